#!/usr/bin/env bash
# Prepares, on a development machine (no GPU needed), what the GPU check
# (scripts/gpu-check.sh) needs on a machine that has only CUDA and PyTorch:
#   train-mlp, train-cnn, train-gpt, train-gpt-acc
#              examples/{mlp,cnn,gpt}.dsl compiled for --target=cuda (one
#              program each, CPU and CUDA steps), and the GPT compiled with
#              `accumulate = 2` in its recipe; built with --static-libs for
#              a generic x86-64-v3 host so that they need nothing there but
#              the C library, cuBLAS and NCCL
#   init-*.safetensors  a fixed initialization per model (written by the
#              program's CPU path; the GPT's serves both GPT programs)
#   cuda_test  the runtime's CUDA kernel unit tests (runtime/test/cuda_test.cpp)
#   cuda_launch_test, test_train_cuda  the runtime.cuda launch tests
#              (cuda_launch_test.cpp: Link.*, Train.*, Nccl.*) and the program
#              they run (test_train_cuda.cu, linked by nvcc as dtc links)
#   data/      Fashion-MNIST (IDX, gzip) and data/corpus.txt, the first
#              400 kB of Debian's fortunes (the GPT's text)
#   needs.txt  the shared libraries the programs need beyond the C library
#   gpu-check.sh, gpu-compare.py, torch_gpu.py, torch_cnn.py, idx.py
#              the check and its helpers
# Writes gpu-bundle/ and, stripped and packed with xz -9 (its 64 MiB window
# shares the programs' common OpenBLAS and runtime), gpu-bundle.tar.xz at the
# project root (both git-ignored). There:
#   python3 -c "import tarfile; tarfile.open('gpu-bundle.tar.xz').extractall('/tmp')" &&
#     /tmp/gpu-bundle/gpu-check.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${DTC_BUILD_DIR:-$root/build}
out=$root/gpu-bundle
"$root/scripts/build.sh"
rm -rf "$out" && mkdir -p "$out/data"
flags=(--target=cuda --cuda-arch=sm_90 --static-libs "--cxx-flags=-O2 -march=x86-64-v3")
# The GPT with gradient accumulation compiled in (`accumulate = 2`).
sed 's/^train {$/train {\n  accumulate = 2/' "$root/examples/gpt.dsl" > "$out/gpt-acc.dsl"
grep -q "accumulate = 2" "$out/gpt-acc.dsl"
for model in mlp cnn gpt gpt-acc; do
  src=$root/examples/$model.dsl
  [ "$model" = gpt-acc ] && src=$out/gpt-acc.dsl
  "$build/bin/dtc" "$src" "${flags[@]}" -o "$out/train-$model"
done
rm "$out/gpt-acc.dsl"
# The GPT's text: the first 400 kB of the fortunes (files in name order, as
# test/invariance does; a tenth held out as the validation split).
/usr/bin/python3 -c "import sys; sys.path.insert(0, sys.argv[1]); from common import fortunes_corpus
fortunes_corpus(sys.argv[2], 400_000)" "$root/test/parity" "$out/data/corpus.txt"
cp /usr/share/datasets/fashion-mnist/*.gz "$out/data/"
# One initialization for both devices (written by the CPU path).
for model in mlp cnn; do
  "$out/train-$model" --device cpu --epochs 0 --eval off --data "$out/data" --data-cache off \
    --save "$out/init-$model.safetensors" --quiet
done
"$out/train-gpt" --device cpu --epochs 0 --eval off --data "text:$out/data/corpus.txt" \
  --save "$out/init-gpt.safetensors" --quiet

# The kernel unit tests and the launch tests, relinked without Debian's
# shared libraries; the launch tests' program linked by nvcc as dtc links
# a --static-libs program (runtime/test/CMakeLists.txt, tools/dtc).
cuda=/usr/local/cuda/lib
static=(-l:libopenblas.a -l:libgfortran.a -l:libquadmath.a -l:libdeflate.a)
tests=$build/runtime/test/CMakeFiles
g++ -o "$out/cuda_test" "$tests/dtcrt_cuda_test.dir/cuda_test.cpp.o" \
  "$build/runtime/CMakeFiles/dtcrt_gemm_openblas.dir/lib/kernels/gemm/openblas.cpp.o" \
  "$build/runtime/cuda/libdtcrt_cuda.a" "$build/runtime/libdtcrt.a" \
  -l:libgtest_main.a -l:libgtest.a "${static[@]}" \
  "$cuda/libcudart_static.a" -L"$cuda" -lcublas -lcublasLt "$cuda/libculibos.a" -lnccl \
  -lrt -lpthread -ldl -lm -static-libstdc++ -static-libgcc
g++ -o "$out/cuda_launch_test" "$tests/dtcrt_cuda_launch_test.dir/cuda_launch_test.cpp.o" \
  "$build/runtime/libdtcrt.a" -l:libgtest_main.a -l:libgtest.a -l:libz.a -l:libdeflate.a \
  "$cuda/libcudart_static.a" "$cuda/libculibos.a" -lrt -lpthread -ldl -lm \
  -static-libstdc++ -static-libgcc
/usr/local/cuda/bin/nvcc -arch=sm_90 -std=c++17 -O2 -Xcompiler=-march=x86-64-v3 \
  -I"$root/runtime/include" -I"$root/runtime/test" "$root/runtime/test/test_train_cuda.cu" \
  -o "$out/test_train_cuda" "$build/runtime/CMakeFiles/dtcrt_gemm_openblas.dir/lib/kernels/gemm/openblas.cpp.o" \
  "$build/runtime/cuda/libdtcrt_cuda.a" "$build/runtime/libdtcrt.a" "${static[@]}" \
  -L"$cuda" -lcublas -lnccl -lcudart_static -ldl -lrt -lpthread \
  -Xcompiler=-static-libstdc++ -Xcompiler=-static-libgcc
cp "$root/benchmarks/torch_gpu.py" "$root/benchmarks/torch_cnn.py" \
  "$root/benchmarks/idx.py" "$root/scripts/gpu-check.sh" "$root/scripts/gpu-compare.py" "$out/"
# What the programs need at run time, beyond the C library and CUDA's own:
# only cuBLAS and NCCL, which gpu-check.sh finds there (needs.txt).
progs=("$out"/train-* "$out/cuda_test" "$out/cuda_launch_test" "$out/test_train_cuda")
needed=$(for f in "${progs[@]}"; do ldd "$f"; done | awk '{print $1}' | sort -u)
extra=$(grep -v -E '^(linux-vdso|/lib64/ld-linux|libc\.|libm\.|libdl\.|librt\.|libpthread\.|libgcc_s\.|libstdc\+\+\.|libcublas|libcublasLt|libnccl)' <<<"$needed" || true)
if [ -n "$extra" ]; then
  echo "gpu-bundle: the programs still need: $extra" >&2
  exit 1
fi
grep -E '^(libcublas|libcublasLt|libnccl)' <<<"$needed" > "$out/needs.txt"
strip "${progs[@]}"
XZ_OPT=-9 tar -C "$root" -cJf "$root/gpu-bundle.tar.xz" gpu-bundle
echo "gpu-bundle: $(du -sh "$root/gpu-bundle.tar.xz" | cut -f1) in $root/gpu-bundle.tar.xz; the programs need, beyond libc: $(tr '\n' ' ' < "$out/needs.txt")"
