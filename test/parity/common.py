"""Shared helpers of the PyTorch parity tests: safetensors I/O (no extra
package needed), compiling DSL text with dtc and running the train program."""
import json, os, struct, subprocess
import numpy as np

def save_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        # int64 arrays stay I64 (num_batches_tracked); the rest is F32
        a = np.array(t, dtype=np.int64 if np.asarray(t).dtype == np.int64 else np.float32)
        header[name] = {"dtype": "I64" if a.dtype == np.int64 else "F32", "shape": list(a.shape),
                        "data_offsets": [offset, offset + a.nbytes]}
        blobs.append(a.tobytes())
        offset += a.nbytes
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))

def load_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    header.pop("__metadata__", None)
    types = {"F32": np.float32, "I64": np.int64}
    return {k: np.frombuffer(data[v["data_offsets"][0]:v["data_offsets"][1]],
                             dtype=types[v["dtype"]]).reshape(v["shape"]).copy()
            for k, v in header.items()}

def dtc_flags():
    """Extra dtc options of every compile of a parity run (DTC_FLAGS in the
    environment: the suites run again with --layout=channels-last)."""
    return os.environ.get("DTC_FLAGS", "").split()

def compile_model(dtc, source, workdir, name, extra=()):
    os.makedirs(workdir, exist_ok=True)
    dsl = os.path.join(workdir, name + ".dsl")
    with open(dsl, "w") as f:
        f.write(source)
    exe = os.path.join(workdir, name)
    subprocess.run([dtc, *dtc_flags(), dsl, "-o", exe, *extra], check=True)
    return exe

def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r.stdout

def read_losses(metrics_csv):
    import csv
    with open(metrics_csv) as f:
        return [float(r["loss"]) for r in csv.DictReader(f)]

def fortunes_corpus(path, size):
    """The first `size` bytes of English in Debian's fortunes (its files in
    name order, the strfile indexes and links left out): the same bytes on
    every machine with the package, for the tests' and the GPU check's text
    data. Writes them to path once; returns path."""
    if not os.path.exists(path):
        out, root = bytearray(), "/usr/share/games/fortunes"
        for name in sorted(os.listdir(root)):
            p = os.path.join(root, name)
            if name.endswith((".dat", ".u8")) or not os.path.isfile(p) or os.path.islink(p):
                continue
            with open(p, "rb") as f:
                out += f.read()
            if len(out) >= size:
                break
        with open(path, "wb") as f:
            f.write(bytes(out[:size]))
    return path
