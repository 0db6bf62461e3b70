#!/usr/bin/env bash
# Every launcher starts ONE job of 2 ranks of a compiled CPU program, and they
# all train the same parameters, bit for bit (a two-rank float sum a + b is
# exact whichever rank computes it):
#  (a) mpirun -np 2                                   backend mpi (reference)
#  (b) torchrun --no_python --nproc_per_node=2        backend gloo
#  (c) python3 -m torch.distributed.launch --nproc_per_node=2 --no_python
#      --use_env, and without --no_python through a python shim that gets
#      --local_rank=K from the launcher and hands it to train     backend gloo
#  (d) two processes started by hand with TF_CONFIG    backend gloo
#  (e) Slurm's variables without a PMI (MPI comes up as a singleton): an
#      error at once, naming SLURM_NTASKS and the commands to use
#  (f) gloo, a rank killed -9: the other ends within --comm-timeout 10 with
#      an error naming the all-reduce
# torch 1.13 spells it --no_python (--no-python came later). Debian's torch
# 1.13 under Python 3.11 crashes in torchrun's default --redirects/--tee
# ("'NoneType' object has no attribute 'get'": enum.Flag no longer iterates
# over Std.NONE), hence --redirects 9:0 --tee 9:0 (a no-op mapping).
# usage: launchers.sh DTC MODEL.dsl WORKDIR
set -uo pipefail
dtc=$1 model=$2 work=$3
rm -rf "$work"
mkdir -p "$work"
py=/usr/bin/python3
mpirun="mpirun --allow-run-as-root --oversubscribe --bind-to none"
torchfix=(--redirects 9:0 --tee 9:0)
cmp="$py $(dirname "$0")/compare_safetensors.py"
common=(--data synthetic:1001,0 --shuffle off --threads 1 --batch 32 --epochs 1 --quiet
        --eval off --comm-timeout 60)
fail() { echo "FAIL: $*"; exit 1; }
# A port p with p + 1 free too (torchrun's agent serves its store on p, the
# ranks then meet on p + 1).
freeport() {
  $py - <<'EOF'
import socket
while True:
    a = socket.socket(); a.bind(("127.0.0.1", 0)); p = a.getsockname()[1]
    if p >= 65535:
        continue
    b = socket.socket()
    try:
        b.bind(("127.0.0.1", p + 1))
    except OSError:
        continue
    print(p)
    break
EOF
}
# The header line (a run without --quiet) names the ranks and the backend.
check_backend() { # LOG WANT
  grep -q " ranks 2 backend $2\( \|\$\)" "$1" || { cat "$1"; fail "$1: not 'ranks 2 backend $2'"; }
}

"$dtc" "$model" -o "$work/train" || fail "compile"
train=$work/train

echo "== (a) mpirun -np 2 (reference)"
timeout 300 $mpirun -np 2 "$train" "${common[@]}" --save "$work/a.safetensors" \
  >"$work/a.log" 2>&1 || { cat "$work/a.log"; fail "mpirun"; }
timeout 300 $mpirun -np 2 "$train" --data synthetic:64,0 --epochs 1 --threads 1 \
  >"$work/a-header.log" 2>&1 || { cat "$work/a-header.log"; fail "mpirun (header)"; }
check_backend "$work/a-header.log" mpi

echo "== (b) torchrun --no_python --nproc_per_node=2"
port=$(freeport)
timeout 300 /usr/bin/torchrun "${torchfix[@]}" --no_python --nproc_per_node=2 \
  --master_port="$port" "$train" "${common[@]}" --save "$work/b.safetensors" \
  >"$work/b.log" 2>&1 || { cat "$work/b.log"; fail "torchrun"; }
port=$(freeport)
timeout 300 /usr/bin/torchrun "${torchfix[@]}" --no_python --nproc_per_node=2 \
  --master_port="$port" "$train" --data synthetic:64,0 --epochs 1 --threads 1 \
  >"$work/b-header.log" 2>&1 || { cat "$work/b-header.log"; fail "torchrun (header)"; }
check_backend "$work/b-header.log" gloo
$cmp "$work/b.safetensors" "$work/a.safetensors" --exact || fail "torchrun vs mpirun"

echo "== (c) python3 -m torch.distributed.launch --nproc_per_node=2 --no_python --use_env"
port=$(freeport)
timeout 300 $py -m torch.distributed.launch "${torchfix[@]}" --nproc_per_node=2 \
  --master_port="$port" --no_python --use_env "$train" "${common[@]}" \
  --save "$work/c.safetensors" >"$work/c.log" 2>&1 || { cat "$work/c.log"; fail "launch"; }
$cmp "$work/c.safetensors" "$work/a.safetensors" --exact || fail "launch vs mpirun"
echo "== (c') torch.distributed.launch passing --local_rank=K (through a python shim)"
cat >"$work/shim.py" <<'EOF'
# What torch.distributed.launch runs without --use_env: python3 -u shim.py
# --local_rank=K TRAIN ARGS...; runs TRAIN ARGS... --local_rank=K.
import os, sys
rank = [a for a in sys.argv[1:] if a.startswith("--local_rank")]
rest = [a for a in sys.argv[1:] if not a.startswith("--local_rank")]
assert len(rank) == 1, sys.argv
os.execv(rest[0], rest + rank)
EOF
port=$(freeport)
timeout 300 $py -m torch.distributed.launch "${torchfix[@]}" --nproc_per_node=2 \
  --master_port="$port" "$work/shim.py" "$train" --data synthetic:64,0 --epochs 1 --threads 1 \
  >"$work/c-shim.log" 2>&1 || { cat "$work/c-shim.log"; fail "launch with --local_rank"; }
check_backend "$work/c-shim.log" gloo
# ... and a --local_rank that disagrees with the launcher's LOCAL_RANK is refused.
cat >"$work/shim-wrong.py" <<'EOF'
import os, sys
rest = [a for a in sys.argv[1:] if not a.startswith("--local_rank")]
os.execv(rest[0], rest + ["--local_rank=%d" % (1 - int(os.environ["LOCAL_RANK"]))])
EOF
port=$(freeport)
timeout 300 $py -m torch.distributed.launch "${torchfix[@]}" --nproc_per_node=2 \
  --master_port="$port" "$work/shim-wrong.py" "$train" --data synthetic:64,0 --threads 1 \
  >"$work/c-wrong.log" 2>&1 && { cat "$work/c-wrong.log"; fail "a wrong --local_rank was accepted"; }
grep -q "train: error: --local_rank 1 disagrees with LOCAL_RANK=0" "$work/c-wrong.log" ||
  { cat "$work/c-wrong.log"; fail "no clear --local_rank message"; }

echo "== (d) TF_CONFIG, two processes by hand"
p0=$(freeport) p1=$(freeport)
tf() { echo "{\"cluster\": {\"worker\": [\"localhost:$p0\", \"localhost:$p1\"]}, \"task\": {\"type\": \"worker\", \"index\": $1}}"; }
TF_CONFIG=$(tf 1) timeout 300 "$train" "${common[@]}" >"$work/d1.log" 2>&1 &
w1=$!
TF_CONFIG=$(tf 0) timeout 300 "$train" "${common[@]}" --save "$work/d.safetensors" \
  >"$work/d0.log" 2>&1
r0=$?
wait $w1
r1=$?
[ $r0 -eq 0 ] && [ $r1 -eq 0 ] || { cat "$work/d0.log" "$work/d1.log"; fail "TF_CONFIG ranks: $r0 $r1"; }
$cmp "$work/d.safetensors" "$work/a.safetensors" --exact || fail "TF_CONFIG vs mpirun"
TF_CONFIG=$(tf 1) timeout 300 "$train" --data synthetic:64,0 --threads 1 >"$work/d1h.log" 2>&1 &
w1=$!
TF_CONFIG=$(tf 0) timeout 300 "$train" --data synthetic:64,0 --threads 1 >"$work/dh.log" 2>&1
wait $w1
check_backend "$work/dh.log" gloo

echo "== (e) Slurm's variables without a PMI"
start=$SECONDS
SLURM_PROCID=0 SLURM_NTASKS=2 SLURM_LOCALID=0 timeout 60 "$train" "${common[@]}" \
  >"$work/e.log" 2>&1
rc=$?
cat "$work/e.log"
[ $rc -eq 1 ] || fail "Slurm without PMI: exit $rc, not 1"
grep -q "train: error: Slurm started 2 tasks (SLURM_NTASKS=2), but mpi runs 1 rank" "$work/e.log" ||
  fail "no clear Slurm message"
grep -q "srun --mpi=pmix $train" "$work/e.log" && grep -q "mpirun -np 2 $train" "$work/e.log" ||
  fail "the Slurm message does not name the commands"
[ $((SECONDS - start)) -lt 30 ] || fail "Slurm without PMI took $((SECONDS - start)) s"

echo "== (f) gloo: a rank killed -9 while training"
port=$(freeport)
start=$SECONDS
timeout 120 /usr/bin/torchrun "${torchfix[@]}" --no_python --nproc_per_node=2 \
  --master_port="$port" "$train" --data synthetic:20000,0 --epochs 1000 --threads 1 \
  --comm-timeout 10 --progress off >"$work/f.log" 2>&1 &
job=$!
# Rank 0 prints the header when both ranks have loaded the data and start
# training; then rank 1 is killed.
for _ in $(seq 300); do
  grep -q " ranks 2 backend gloo" "$work/f.log" && break
  sleep 0.1
done
sleep 1
victim=
for p in $(pgrep -f "^$train --data synthetic:20000,0"); do
  tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx RANK=1 && victim=$p
done
[ -n "$victim" ] || { kill $job; cat "$work/f.log"; fail "no rank 1 to kill"; }
killed=$SECONDS
kill -9 "$victim"
wait $job
rc=$?
elapsed=$((SECONDS - killed))
grep "train: error" "$work/f.log"
[ $rc -ne 0 ] || fail "the job exited 0 after a rank was killed"
[ $rc -ne 124 ] || fail "the job hung after a rank was killed"
grep -q "train: error: rank 0: all-reduce of bucket .* failed: gloo allreduce: \|train: error: rank 0: .* did not complete within 10 s" "$work/f.log" ||
  { cat "$work/f.log"; fail "rank 0 gave no error naming the operation"; }
echo "ended with exit $rc $elapsed s after the kill"
[ $elapsed -le 12 ] || fail "took $elapsed s after the kill (--comm-timeout 10)"
pgrep -f "^$train --data synthetic:20000,0" && fail "ranks left running"
echo PASS
