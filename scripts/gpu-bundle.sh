#!/usr/bin/env bash
# Prepares, on a development machine (no GPU needed), what the GPU check needs
# on a machine that has only CUDA (and perhaps PyTorch): the seed MLP compiled
# for --target=cuda into one train program (CPU and CUDA steps; libraries
# other than CUDA's linked statically), the Fashion-MNIST files, and a fixed
# initialization. Writes gpu-bundle/ (git-ignored) at the project root.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${DTC_BUILD_DIR:-$root/build}
out=$root/gpu-bundle
"$root/scripts/build.sh"
rm -rf "$out" && mkdir -p "$out/data"
"$build/bin/dtc" "$root/examples/mlp.dsl" --target=cuda --cuda-arch=sm_90 -o "$out/train"
cp /usr/share/datasets/fashion-mnist/*.gz "$out/data/"
# One initialization for both devices (written by the CPU path).
"$out/train" --device cpu --epochs 0 --eval off --save "$out/init.safetensors" --quiet
cp "$root/benchmarks/torch_gpu.py" "$root/benchmarks/idx.py" "$root/scripts/gpu-check.sh" "$out/"
echo "gpu-bundle: $(du -sh "$out" | cut -f1); missing shared libraries on a CUDA-only machine:"
ldd "$out/train" | grep -v -E "cuda|cublas|nccl|libc\.|libm\.|libstdc|libgcc|ld-linux|linux-vdso|libpthread|libdl|librt" || true
