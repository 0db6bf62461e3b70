#!/usr/bin/env bash
# The GPU check, on a machine with a GPU and nothing but CUDA and PyTorch,
# given the folder scripts/gpu-bundle.sh made (gpu-bundle/). It must finish
# in one 8-minute command, the bundle's extraction included: every step runs
# under its own timeout, the timeouts add up to 435 s (with the extraction,
# about 10 s, under 480 s), the slowest steps come last, and a line per step
# gives its time. A step that times out fails the check and the next ones
# still run (timeout ends the step's whole process group, 2 s after TERM
# with KILL: at most 20 s more over the 10 steps).
#
#   step              timeout  what
#   libraries              15  find cuBLAS, cuBLASLt and NCCL (what the programs
#                              need: needs.txt) in the toolkit (/usr/local/cuda/
#                              lib64, targets/x86_64-linux/lib, lib), then in
#                              python3's nvidia.* wheel folders (nvidia/*/lib),
#                              then the loader's cache; cuDNN too (the programs
#                              do not link it; PyTorch does); print where each
#                              came from; fail if a needed one is missing;
#                              nvidia-smi must list a GPU
#   kernels                45  cuda_test: every CUDA kernel against the CPU
#                              kernels, the device communicators
#   train-tests            50  cuda_launch_test: Link.*, Train.* (CUDA against
#                              the CPU, gradcheck on the GPU, save and
#                              evaluate, log intervals), Nccl.OneRank*
#   mlp, cnn, gpt     30/45/45 CUDA against the CPU steps of the same program
#                              (below), and the control
#   speed-dtc              40  dtc on CUDA: the seed MLP, the CNN, the GPT
#   speed-eager            45  PyTorch eager, same models and batches
#   speed-compile         120  torch.compile, same (compilation included in
#                              the step, not in the timing)
# Both GPU test programs run with DTC_REQUIRE_GPU=1: a test that finds no GPU
# fails instead of skipping (runtime/test/cuda_test_util.h), and a
# "[  SKIPPED ]" line in their output fails the step too. The two-GPU NCCL
# tests are left out by name (this machine has one GPU).
#
# CUDA against the CPU. Each model trains about 50 steps on CUDA and on the
# CPU steps of the same program (--device cpu, --threads = the cores), from
# the same --init file, with --shuffle off, so the batches are the same:
#   mlp      the seed MLP (SGD with momentum), 50 steps of batch 64
#   cnn      examples/cnn.dsl: convolutions, batch norm (batch statistics,
#            running buffers), max pool, dropout (its masks are a hash of the
#            seed, the step and the element: the same on both devices), 50
#            steps of batch 64
#   gpt      examples/gpt.dsl compiled with accumulate = 2 (train-gpt-acc):
#            embeddings, layer norm, causal attention, tanh-GELU, the tied
#            head, AdamW, gradient clipping to norm 1.0, 10 warmup steps
#            then cosine decay to step 50 (--warmup-steps 10 --decay-steps
#            50), 2 micro-batches of 12 per step, 50 optimizer steps
# The CPU steps of a --target=cuda program are the program a --target=cpu
# build runs (same host flags): ctest cuda.cpu_reference.* trains the three
# models 20 steps with both and finds the parameters bit-identical
# (test/cuda/cpu_reference.py).
# gpu-compare.py compares every step's loss (--metrics) and the final
# evaluation. Tolerances (fp32): step 1, from identical parameters, 1e-4
# relative (one forward pass: GEMMs and reductions summed in other orders
# differ by ~1e-6 relative, fp32's rounding times the sums' depth); every
# step 1e-3 relative (the difference grows as training feeds it back, but
# 50 steps of SGD or warming-up AdamW leave it far below a part in a
# thousand of the loss); final evaluation loss 0.5%, accuracy 0.005 (50 of
# 10,000 test images). A control on CUDA with the learning rate 1% higher
# must fail the same comparison for each model, so the comparison can tell
# a wrong gradient scale or a missed term. In the dry run (CPU against CPU)
# the controls' worst steps land at 5.8e-3 (mlp), 6.9e-2 (cnn) and 2.3e-3
# (gpt) relative, first beyond 1e-3 at steps 11, 5 and 10: the tolerance
# lies between float rounding and a 1% error in the update.
#
# Speed: each model on CUDA at the recipe's batch (64, 64, 12 x 64 tokens),
# dtc against PyTorch eager and torch.compile (torch.compile(model), the
# optimizer step eager with its foreach kernels), fp32 without TF32 on both
# sides; dtc's rate from its --metrics timestamps after 100 warm-up steps,
# PyTorch's over as many steps after 20 warm-up steps, with the
# data already on the GPU; printed as images/s or tokens/s and as ratios.
#
# DTC_GPU_CHECK_DRY=1 (for a machine without a GPU): no nvidia-smi, no GPU
# test programs, no PyTorch; the "CUDA" runs are CPU runs at --threads 1
# (against the CPU at all cores), so the comparisons must pass and every
# control must fail; it shows the check's plumbing and times its CPU half.
# usage: scripts/gpu-check.sh [bundle-dir]
set -uo pipefail
self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")

# Each step is this script run again under `timeout` (its whole process
# group ends at the limit).
if [ "${1:-}" = --step ]; then
  step=$2
  dry=${DTC_GPU_CHECK_DRY:-0}
  threads=$(nproc)
  cuda=(--device cuda)
  [ "$dry" = 1 ] && cuda=(--device cpu --threads 1)
  text=text:data/corpus.txt
  data() { case $1 in gpt | gpt-acc) echo "$text" ;; *) echo data ;; esac; }
  # the models' CUDA-against-CPU runs: model, program, extra options
  compare_model() {
    local m=$1 prog=$2 lr=$3
    shift 3
    local common=(--init "init-${m}.safetensors" --shuffle off --data "$(data "$m")" --data-cache off
      --progress off --max-steps 50 "$@")
    local rc=0
    "./$prog" "${cuda[@]}" "${common[@]}" --metrics "cuda-$m.csv" --save "cuda-$m.safetensors" \
      > "cuda-$m.log" 2>&1 || { echo "FAIL: $m on CUDA exited $?"; tail -5 "cuda-$m.log"; rc=1; }
    "./$prog" --device cpu --threads "$threads" "${common[@]}" --metrics "cpu-$m.csv" \
      --save "cpu-$m.safetensors" > "cpu-$m.log" 2>&1 || { echo "FAIL: $m on the CPU exited $?"; tail -5 "cpu-$m.log"; rc=1; }
    grep -h "^model " "cuda-$m.log" "cpu-$m.log" | sed 's/^/  /'
    if python3 gpu-compare.py "$m" cuda; then echo "PASS: $m, CUDA against the CPU"; else rc=1; echo "FAIL: $m, CUDA against the CPU"; fi
    local clr
    clr=$(awk -v l="$lr" 'BEGIN { printf "%.6g", l * 1.01 }')
    "./$prog" "${cuda[@]}" "${common[@]}" --lr "$clr" --metrics "control-$m.csv" \
      --save "control-$m.safetensors" > "control-$m.log" 2>&1 || { echo "FAIL: $m control exited $?"; rc=1; }
    if python3 gpu-compare.py "$m" control; then
      echo "FAIL: $m: the comparison did not notice a 1% learning-rate change (--lr $clr)"; rc=1
    else
      echo "PASS: $m: the comparison notices a 1% learning-rate change (--lr $clr)"
    fi
    return $rc
  }
  gtest_checked() { # program, gtest options: no failure and no skipped test
    local log=$1.log
    DTC_REQUIRE_GPU=1 "./$@" --gtest_brief=0 > "$log" 2>&1
    local rc=$?
    grep -E "^\[(==========|  PASSED  |  SKIPPED |  FAILED  )\]" "$log" | sed 's/^/  /'
    if [ $rc -ne 0 ]; then
      grep -m 20 -A 3 -E "Failure$" "$log" | sed 's/^/  /'
      echo "FAIL: $1 exited $rc (the whole output: $PWD/$log)"; return 1
    fi
    if grep -q "^\[  SKIPPED \]" "$log"; then echo "FAIL: $1: a test was skipped"; return 1; fi
    return 0
  }
  case $step in
  libraries)
    echo "  shared libraries the programs need: $(tr '\n' ' ' < needs.txt)"
    python3 - <<'PY' > libdirs.txt || exit 1
import glob, os, sys
dirs = [("toolkit", d) for d in ("/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib",
                                 "/usr/local/cuda/lib")]
try:
    import nvidia
    for p in nvidia.__path__:
        dirs += [("python3 wheel nvidia." + os.path.basename(os.path.dirname(d)), d)
                 for d in sorted(glob.glob(os.path.join(p, "*", "lib")))]
except ImportError:
    print("  python3 has no nvidia.* wheels", file=sys.stderr)
for kind, d in dirs:
    if os.path.isdir(d):
        print(f"{d}\t{kind}")
PY
    rc=0 path=
    for lib in $(cat needs.txt) libcudnn.so.9; do
      where=$(while IFS=$'\t' read -r dir kind; do
        [ -e "$dir/$lib" ] && { echo "$dir ($kind)"; break; }; done < libdirs.txt)
      if [ -z "$where" ]; then
        cached=$(ldconfig -p 2>/dev/null | awk -v l="$lib" '$1 == l { print $NF; exit }')
        [ -n "$cached" ] && where="$(dirname "$cached") (the loader's cache)"
      fi
      if [ -z "$where" ]; then
        if [ "$lib" = libcudnn.so.9 ]; then echo "  $lib: not found (the programs do not need it)"
        else echo "FAIL: $lib: not found in the toolkit, python3's nvidia.* wheels or the loader's cache"; rc=1; fi
        continue
      fi
      echo "  $lib: $where$([ "$lib" = libcudnn.so.9 ] && echo '; the programs do not link it')"
      dir=${where%% (*}
      [ "$lib" = libcudnn.so.9 ] || case ":$path:" in *":$dir:"*) ;; *) path=$path${path:+:}$dir ;; esac
    done
    echo "$path" > ld_library_path.txt
    export LD_LIBRARY_PATH=$path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    missing=$(ldd ./train-mlp ./cuda_test ./test_train_cuda | grep "not found" | sort -u)
    [ -z "$missing" ] || { echo "FAIL: the loader still cannot find: $missing"; rc=1; }
    ldd ./train-mlp | grep -E "libcublas|libnccl" | sed 's/^[[:space:]]*/  loads /'
    if [ "$dry" = 1 ]; then echo "  dry run: no nvidia-smi"
    else nvidia-smi -L | sed 's/^/  /' && [ "$(nvidia-smi -L | grep -c '^GPU')" -ge 1 ] ||
      { echo "FAIL: no GPU visible (nvidia-smi)"; rc=1; }
    fi
    exit $rc ;;
  kernels)
    gtest_checked cuda_test ;;
  train-tests)
    DTCRT_TEST_TRAIN_CUDA=$PWD/test_train_cuda gtest_checked cuda_launch_test \
      "--gtest_filter=Link.*:Train.*:Nccl.OneRank*" ;;
  mlp) compare_model mlp train-mlp 0.01 ;;
  cnn) compare_model cnn train-cnn 0.01 ;;
  gpt) compare_model gpt train-gpt-acc 0.001 --accumulate 2 --warmup-steps 10 --decay-steps 50 ;;
  speed-dtc)
    rc=0
    for m in mlp cnn gpt; do
      steps=1000; [ "$m" = mlp ] && steps=2000
      [ "$dry" = 1 ] && steps=130 # the CPU: enough to exercise the plumbing
      "./train-$m" "${cuda[@]}" --data "$(data "$m")" --epochs 100 --max-steps "$steps" --eval off \
        --progress off --metrics "speed-$m.csv" > "speed-$m.log" 2>&1 || { echo "FAIL: $m exited $?"; rc=1; continue; }
      python3 - "$m" "speed-$m.csv" <<'PY' | tee -a speed.txt
import csv, sys
m, rows = sys.argv[1], list(csv.DictReader(open(sys.argv[2])))
w = 100
t = [float(r["seconds"]) for r in rows]
per = 12 * 64 if m == "gpt" else int(rows[0]["batch"])
rate = (len(t) - w) * per / (t[-1] - t[w - 1])  # steps w+1 .. n, queued from step w's time on
print(f"{m} dtc {rate:.0f} {'tokens' if m == 'gpt' else 'images'}/s ({len(t) - w} steps)")
PY
    done
    exit $rc ;;
  speed-eager | speed-compile)
    mode=${step#speed-}
    if [ "$dry" = 1 ]; then echo "  dry run: no PyTorch"; exit 0; fi
    if ! python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
      echo "FAIL: PyTorch with CUDA is not available here: no reference timing"; exit 1
    fi
    python3 torch_gpu.py "$mode" data data/corpus.txt | tee -a speed.txt ;;
  *) echo "unknown step $step"; exit 2 ;;
  esac
  exit $?
fi

here=$(dirname "$self")
bundle=${1:-$here/../gpu-bundle}
[ -x "$bundle/train-mlp" ] || bundle=$here
cd "$bundle" || exit 1
export PYTHONUNBUFFERED=1 DTC_CACHE_DIR=$PWD/cache
rm -f speed.txt
status=0 failed=()
start=$(date +%s.%N)
run_step() { # name timeout
  local t0 rc
  t0=$(date +%s.%N)
  echo "== $1 (timeout $2 s)"
  timeout -k 2 "$2" "$BASH" "$self" --step "$1"
  rc=$?
  [ $rc -eq 124 ] && echo "FAIL: $1 timed out after $2 s"
  [ $rc -eq 0 ] || { status=1; failed+=("$1"); }
  awk -v a="$t0" -v b="$(date +%s.%N)" -v s="$1" -v r="$rc" -v l="$2" \
    'BEGIN { printf "-- %s: %.1f s of %d, %s\n", s, b - a, l, r == 0 ? "ok" : "FAILED (exit " r ")" }'
}
run_step libraries 15
[ -s ld_library_path.txt ] && export LD_LIBRARY_PATH=$(cat ld_library_path.txt)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if [ "${DTC_GPU_CHECK_DRY:-0}" = 1 ]; then
  echo "== kernels, train-tests: dry run, not run (they need a GPU)"
else
  run_step kernels 45
  run_step train-tests 50
fi
run_step mlp 30
run_step cnn 45
run_step gpt 45
run_step speed-dtc 40
run_step speed-eager 45
run_step speed-compile 120
if [ -s speed.txt ]; then
  echo "== speed: dtc on CUDA against PyTorch (same model, same batch)"
  awk '$2 == "dtc" { d[$1] = $3; u[$1] = $4 } $2 == "eager" { e[$1] = $3 } $2 == "compile" { c[$1] = $3 }
    END { for (m in d) {
      printf "%-4s dtc %9.0f %s", m, d[m], u[m]
      if (m in e) printf "  eager %9.0f  dtc/eager %.2fx", e[m], d[m] / e[m]
      if (m in c) printf "  torch.compile %9.0f  dtc/compile %.2fx", c[m], d[m] / c[m]
      printf "\n" } }' speed.txt | sort
fi
awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "total %.1f s (the steps'"'"' timeouts add up to 435 s)\n", b - a }'
if [ "$status" -eq 0 ]; then echo "GPU CHECK PASSED"; else echo "GPU CHECK FAILED: ${failed[*]}"; fi
exit "$status"
