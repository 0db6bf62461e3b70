"""dtc's dropout masks rebuilt in numpy (runtime/include/dtc/runtime.h:
dtc::rt::stepRngSeed and dropoutKeeps), so that a parity test can apply the
same mask to PyTorch's side."""
import numpy as np

M64 = (1 << 64) - 1

def _mix(a, b):
    z = (a + 0x9e3779b97f4a7c15 * (b + 1)) & M64
    z = ((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9) & M64
    z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & M64
    return z ^ (z >> 31)

def step_seed(seed, step, rank):
    """StepArgs::rngSeed of optimizer step `step` (1-based) on `rank`."""
    return _mix(_mix(seed ^ 0x64726f706f7574, step), rank)

def keep_mask(seed, salt, n, p):
    """dropoutKeeps(seed, salt, i, p) for i in [0, n), as a bool array."""
    with np.errstate(over="ignore"):
        i = np.arange(n, dtype=np.uint64)
        z = np.uint64(seed) ^ (np.uint64(salt) * np.uint64(0xd1b54a32d192ed03))
        z = z + np.uint64(0x9e3779b97f4a7c15) * (i + np.uint64(1))
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xbf58476d1ce4e5b9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94d049bb133111eb)
        z = z ^ (z >> np.uint64(31))
    u = (z >> np.uint64(40)).astype(np.float32) * np.float32(1.0 / 16777216.0)
    return u >= np.float32(p)
