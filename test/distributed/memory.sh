#!/usr/bin/env bash
# Memory you can see (dtc --report) against memory a rank allocates and the
# OS measures, replicated and under sharding stages 1 and 2 at 2 ranks:
#  1. the program prints what it allocates ("memory per rank: ..."), and it
#     is exactly the report's "per-rank allocation" at the same batch;
#  2. each rank's peak resident memory (/usr/bin/time's maximum RSS) is
#     within 10% of that allocation, plus the process's own memory, plus the
#     collective library's temporary buffer: the process's is measured as the
#     peak RSS of a program whose model is 100 floats under the same
#     launcher, data and options (the runtime, MPI, oneDNN; about 31 MB);
#     Open MPI's all-reduce and reduce-scatter allocate a temporary buffer
#     of up to the bucket they reduce, which no plan of dtc's can see: the
#     allowance is the largest bucket the report lists (4 MB);
#  3. what sharding saves, measured (replicated RSS minus the stage's), is
#     within 10% of what the report says it saves, with the same allowance;
#  4. a checkpoint (the sharded state gathered whole into rank 0) leaves
#     rank 1 within check 2's bound.
# The model: an MLP of 8 layers of 1024 (8.4 M parameters, 34 MB; AdamW: 67
# MB of moments) on 100 synthetic samples, in buckets of 4 MB.
# Under the sanitizers (SANITIZED=ON: ASan's shadow memory and quarantine
# are in every RSS) only check 1 holds.
# usage: memory.sh DTC WORKDIR [SANITIZED=OFF]
set -euo pipefail
dtc=$1 work=$2 sanitized=${3:-OFF}
mkdir -p "$work"
mpirun="timeout 300 mpirun --allow-run-as-root --oversubscribe --bind-to none"
{
  echo "input x: f32[B, 1024]"
  echo "label y: i32[B]"
  echo "h0 = x"
  for i in 1 2 3 4 5 6 7 8; do echo "h$i = linear(h$((i - 1)), 1024, act=relu)"; done
  echo "out = linear(h8, 10)"
  echo "loss = cross_entropy(out, y)"
  echo "train {"
  echo "  optimizer = adamw(lr=0.001)"
  echo "  batch = 16"
  echo "}"
} >"$work/deep.dsl"
sed 's/linear(h\([0-9]\), 1024/linear(h\1, 8/' "$work/deep.dsl" >"$work/tiny.dsl"
grep -q 'linear(h0, 8' "$work/tiny.dsl"
# Buckets of 4 MB (a layer's weight each): small against the model.
buckets=(--bucket-mb 4 --first-bucket-mb 1)
opts=(--data synthetic:100,0 --epochs 1 --max-steps 4 --eval off --threads 1)

# peak RSS (bytes) of each of the 2 ranks of a run, and rank 0's output
run() { # NAME [AS] [TRAIN-OPTIONS...]: the program NAME, its measures as AS
  local exe=$1 as=${2:-$1}
  shift $(($# > 1 ? 2 : 1))
  $mpirun -np 2 sh -c 'exe=$1; shift; exec /usr/bin/time -f "maxrss %M" -o "$0.rss.$OMPI_COMM_WORLD_RANK" "$exe" "$@"' \
    "$work/$as" "$work/$exe" "${opts[@]}" "$@" >"$work/$as.log"
}
rss() { # NAME RANK -> bytes
  echo $(($(sed -n 's/^maxrss \([0-9]*\)$/\1/p' "$work/$1.rss.$2") * 1024))
}

"$dtc" "$work/tiny.dsl" "${buckets[@]}" -o "$work/tiny"
run tiny
base=$(( $(rss tiny 0) > $(rss tiny 1) ? $(rss tiny 0) : $(rss tiny 1) ))
echo "the process's own memory (a model of 100 floats): $base bytes"

# within MEASURED PLANNED WHAT: check 2
within() {
  /usr/bin/python3 - "$1" "$2" "$base" "$3" "$bucket" <<'PY'
import sys
measured, planned, base, what = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
bucket = int(sys.argv[5])
model = measured - base
ok = -0.1 * planned <= model - planned <= 0.1 * planned + bucket
print(f"   {what}: peak RSS {measured} = {base} (process) + {model} (model), "
      f"{100 * (model - planned) / planned:+.1f}% of the report: {'ok' if ok else 'FAIL'}")
sys.exit(0 if ok else 1)
PY
}

declare -A report
for stage in none optimizer gradients; do
  "$dtc" "$work/deep.dsl" "${buckets[@]}" --shard=$stage --ranks 2 --report -o "$work/$stage" \
    >"$work/$stage.report"
  report[$stage]=$(sed -n 's/^per-rank allocation (batch 16): .* = \([0-9]*\) bytes$/\1/p' \
    "$work/$stage.report")
  bucket=$(sed -n 's/^  bucket [0-9]* *\([0-9]*\) bytes:.*/\1/p' "$work/$stage.report" | sort -n | tail -1)
  echo "== $stage: the largest bucket $bucket bytes"
  run "$stage"
  printed=$(sed -n 's/^memory per rank: .* = \([0-9]*\) bytes.*$/\1/p' "$work/$stage.log")
  echo "== $stage: report ${report[$stage]} bytes, the program allocates $printed"
  [ -n "$printed" ] && [ "$printed" = "${report[$stage]}" ] || { echo FAIL; exit 1; }
  [ "$sanitized" = ON ] && continue
  for r in 0 1; do
    measured=$(rss "$stage" $r)
    within "$measured" "${report[$stage]}" "$stage rank $r"
  done
done

if [ "$sanitized" = ON ]; then
  echo "(sanitized build: the peak RSS is ASan's as much as the program's; not compared)"
  echo PASS
  exit 0
fi
# 4. A checkpoint gathers the sharded optimizer state whole (67 MB) into
# rank 0 only: rank 1 holds a bucket of it at a time, and stays within
# check 2's bound of its allocation (the whole state would be 8 times the
# bound's slack).
echo "== gradients with a checkpoint at the epoch's end (step 3)"
run gradients gradients-ckpt --checkpoint "$work/gradients.state"
[ -s "$work/gradients.state" ] || { echo "FAIL: no checkpoint written"; exit 1; }
within "$(rss gradients-ckpt 1)" "${report[gradients]}" "gradients rank 1, checkpointing"
for stage in optimizer gradients; do
  saved=$(( $(rss none 0) - $(rss $stage 0) ))
  planned=$(( ${report[none]} - ${report[$stage]} ))
  /usr/bin/python3 - "$saved" "$planned" "$stage" "$bucket" <<'PY'
import sys
saved, planned, stage, bucket = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
ok = abs(saved - planned) <= 0.1 * planned + bucket
print(f"== {stage} saves {saved} bytes a rank, the report says {planned} "
      f"({100 * (saved - planned) / planned:+.1f}%): {'ok' if ok else 'FAIL'}")
sys.exit(0 if ok else 1)
PY
done
echo PASS
