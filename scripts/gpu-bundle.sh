#!/usr/bin/env bash
# Prepares, on a development machine (no GPU needed), what the GPU check needs
# on a machine that has only CUDA (and perhaps PyTorch): the seed MLP and the
# deeper example compiled for --target=cuda (one train program each, CPU and
# CUDA steps, built with --static-libs for a generic x86-64-v3 host so that
# they need nothing there but the C library, cuBLAS and NCCL), the runtime's
# CUDA kernel unit tests linked the same way, the Fashion-MNIST files, and a
# fixed initialization per model. Writes gpu-bundle/ and, stripped and
# packed, gpu-bundle.tar.xz (~50 MB, under the device tool's carry limit;
# both git-ignored) at the project root. There:
#   python3 -c "import tarfile; tarfile.open('gpu-bundle.tar.xz').extractall('/tmp')" &&
#     /tmp/gpu-bundle/gpu-check.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${DTC_BUILD_DIR:-$root/build}
out=$root/gpu-bundle
"$root/scripts/build.sh"
rm -rf "$out" && mkdir -p "$out/data"
flags=(--target=cuda --cuda-arch=sm_90 --static-libs "--cxx-flags=-O2 -march=x86-64-v3")
for model in mlp deep_mlp; do
  "$build/bin/dtc" "$root/examples/$model.dsl" "${flags[@]}" -o "$out/train-$model"
  # One initialization for both devices (written by the CPU path).
  "$out/train-$model" --device cpu --epochs 0 --eval off --save "$out/init-$model.safetensors" --quiet
done
# The kernel unit tests (runtime/test/cuda_test.cpp), relinked without
# Debian's shared libraries.
cuda=/usr/local/cuda/lib
g++ -o "$out/cuda_test" "$build/runtime/test/CMakeFiles/dtcrt_cuda_test.dir/cuda_test.cpp.o" \
  "$build/runtime/CMakeFiles/dtcrt_gemm_openblas.dir/lib/gemm/openblas.cpp.o" \
  "$build/runtime/cuda/libdtcrt_cuda.a" "$build/runtime/libdtcrt.a" \
  -l:libgtest_main.a -l:libgtest.a -l:libopenblas.a -l:libgfortran.a -l:libquadmath.a -l:libdeflate.a \
  "$cuda/libcudart_static.a" -L"$cuda" -lcublas -lcublasLt "$cuda/libculibos.a" -lnccl \
  -lrt -lpthread -ldl -lm -static-libstdc++ -static-libgcc
cp /usr/share/datasets/fashion-mnist/*.gz "$out/data/"
cp "$root/benchmarks/torch_gpu.py" "$root/benchmarks/idx.py" "$root/scripts/gpu-check.sh" "$out/"
# What the programs need at run time, beyond the C library and CUDA's own.
extra=$(for f in "$out"/train-* "$out/cuda_test"; do ldd "$f"; done | awk '{print $1}' | sort -u |
  grep -v -E '^(linux-vdso|/lib64/ld-linux|libc\.|libm\.|libdl\.|librt\.|libpthread\.|libgcc_s\.|libstdc\+\+\.|libcublas|libcublasLt|libnccl)' || true)
if [ -n "$extra" ]; then
  echo "gpu-bundle: the programs still need: $extra" >&2
  exit 1
fi
strip "$out"/train-* "$out/cuda_test"
tar -C "$root" -cJf "$root/gpu-bundle.tar.xz" gpu-bundle
echo "gpu-bundle: $(du -sh "$root/gpu-bundle.tar.xz" | cut -f1) in $root/gpu-bundle.tar.xz; the programs need only libc, libstdc++ (through cuBLAS), cuBLAS and NCCL"
