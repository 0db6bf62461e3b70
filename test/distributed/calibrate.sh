#!/usr/bin/env bash
# train --calibrate [FILE] (runtime/lib/train/calibrate.h): at 1 rank and
# under mpirun at 2, the program trains nothing, measures (GEMMs,
# convolutions, elementwise loops, the bucket collectives) and rank 0 writes
# the dtc-machine/1 JSON that dtc's cost model reads: the file parses, says
# its world size, backend and threads, and holds positive times (the
# collectives' at 2 ranks; 7 sizes each at both) and the process's resident
# set. Without FILE it goes to $DTC_CACHE_DIR/machine-<N>ranks.json (the
# directory created); with no cache directory at all, the error asks for
# FILE. An unwritable FILE fails at once (before any measurement), naming
# it, on 1 and 2 ranks, and leaves no file behind. A program planned from
# the file measures the file's reference GEMM again after training and
# prints its ratio to the calibrated time, at 1 and 2 ranks: on the host
# that was just calibrated it is near 1 (0.2-5 allows for a loaded host;
# a wrong unit, per round against per GEMM, is off by 200).
# usage: calibrate.sh DTC WORKDIR
set -euo pipefail
dtc=$1 work=$2
rm -rf "$work"
mkdir -p "$work"
mpirun="timeout 300 mpirun --allow-run-as-root --oversubscribe --bind-to none"
python=/usr/bin/python3
fail() { echo "FAIL: $*"; exit 1; }
cat > "$work/tiny.dsl" <<'DSL'
model tiny
input x: f32[B, 6]
label y: i32[B]
h = linear(x, 8, act=tanh)
o = linear(h, 3)
loss = cross_entropy(o, y)
train {
  data = synthetic(train=100, test=20)
  batch = 10
}
DSL
"$dtc" "$work/tiny.dsl" -o "$work/train"
train=$work/train

# check FILE RANKS BACKEND: the file's keys and values.
check() {
  "$python" - "$@" <<'PY'
import json, sys
path, ranks, backend = sys.argv[1], int(sys.argv[2]), sys.argv[3]
d = json.load(open(path))
def need(cond, what):
    if not cond:
        sys.exit(f"{path}: {what}")
need(d.get("format") == "dtc-machine/1", f"format is {d.get('format')!r}")
need(d.get("written_by") == "train --calibrate", "written_by")
for key in ("date", "host", "cpu", "backend"):
    need(isinstance(d.get(key), str), f"{key} is not a string")
need(d["date"].endswith("Z") and "T" in d["date"], f"date {d['date']!r}")
need(d["ranks"] == ranks, f"ranks {d['ranks']}, expected {ranks}")
need(d["local_ranks"] == ranks, f"local_ranks {d['local_ranks']}, expected {ranks}")
# (All of this test's ranks run on this machine.)
need(d["machine_ranks"] == ranks, f"machine_ranks {d['machine_ranks']}, expected {ranks}")
need(d["backend"] == backend, f"backend {d['backend']!r}, expected {backend!r}")
need(isinstance(d["threads"], int) and d["threads"] >= 1, f"threads {d['threads']}")
need(isinstance(d["deferred_starts"], bool), "deferred_starts is not a boolean")
need(isinstance(d["process_bytes"], int) and d["process_bytes"] > 1e6,
     f"process_bytes {d['process_bytes']}")
def positive(entries, what):
    need(isinstance(entries, list) and entries, f"{what}: empty")
    for e in entries:
        need(isinstance(e["seconds"], (int, float)) and e["seconds"] > 0,
             f"{what}: {e} has no positive seconds")
positive(d["gemm"], "gemm")
shapes = {(g["m"], g["n"], g["k"]) for g in d["gemm"]}
sizes = (16, 64, 256, 1024, 4096)
want = {(m, n, k) for m in sizes for n in sizes for k in sizes if 2 * m * n * k <= 4.3e9}
need(shapes == want, f"gemm shapes: {len(shapes)}, expected {len(want)}")
# The same shapes cold: each call's operands the next ones along the buffers
# of the largest shapes' A, B and C.
cold = d["gemm_cold"]
positive(cold["shapes"], "gemm_cold")
need([(g["m"], g["n"], g["k"]) for g in cold["shapes"]] == [(g["m"], g["n"], g["k"]) for g in d["gemm"]],
     "gemm_cold shapes")
need(cold["bytes"] == 4 * (max(m * k for m, n, k in want) + max(k * n for m, n, k in want) +
                           max(m * n for m, n, k in want)), f"gemm_cold bytes {cold['bytes']}")
positive(d["conv"], "conv")
need([c["flops"] for c in d["conv"]] ==
     [2 * 32 * o * h * w * c * 9 for c, o, h, w in
      ((1, 32, 28, 28), (32, 64, 14, 14), (64, 128, 7, 7), (64, 64, 32, 32))], "conv flops")
positive(d["elementwise"], "elementwise")
need([e["bytes"] for e in d["elementwise"]] == [3 * (1024 << 2 * i) for i in range(9)],
     "elementwise bytes")
# The updates by state buffers: (3 + 2 states) x 4 bytes an element moved,
# arrays of 1 KiB .. 16 MiB.
need(sorted(d["updates"]) == ["adam", "sgd", "sgd_momentum"], f"updates: {sorted(d['updates'])}")
for states, name in enumerate(("sgd", "sgd_momentum", "adam")):
    positive(d["updates"][name], name)
    need([e["bytes"] for e in d["updates"][name]] ==
         [(3 + 2 * states) * (1024 << 2 * i) for i in range(8)], f"{name} bytes")
# The normalizations and poolings by the bytes of their input: batch norm
# and pooling of N x 32 x 28 x 28 for N = 1, 4, 16, 64 (NCHW and blocked),
# layer norm of 64 .. 16384 rows of 256.
norms = ["batch_norm", "batch_norm_grad", "batch_norm_grad_max_pool", "max_pool2d", "max_pool2d_grad"]
norms += [n + "_blocked" for n in norms] + ["layer_norm", "layer_norm_grad"]
need(sorted(d["norms"]) == sorted(norms), f"norms: {sorted(d['norms'])}")
for name in norms:
    positive(d["norms"][name], name)
    want = ([4 * 256 * (64 << 2 * i) for i in range(5)] if name.startswith("layer")
            else [4 * 32 * 28 * 28 * (1 << 2 * i) for i in range(4)])
    need([e["bytes"] for e in d["norms"][name]] == want, f"{name} bytes")
# The same cold: each call's arrays the next ones along 4 buffers of 48 MiB.
need(d["norms_cold"]["bytes"] == 192 << 20, f"norms_cold bytes {d['norms_cold']['bytes']}")
lists = d["norms_cold"]["lists"]
need(sorted(lists) == sorted(norms), f"norms_cold: {sorted(lists)}")
for name in norms:
    positive(lists[name], "cold " + name)
    need([e["bytes"] for e in lists[name]] == [e["bytes"] for e in d["norms"][name]],
         f"cold {name} bytes")
coll = d["collectives"]
# The same started right after compute (collectives_cold): the same sizes.
for kind in ("all_reduce", "reduce_scatter", "all_gather"):
    need([e["bytes"] for e in d["collectives_cold"][kind]] == [e["bytes"] for e in coll[kind]],
         f"collectives_cold {kind} bytes")
    if ranks > 1:
        positive(d["collectives_cold"][kind], "cold " + kind)
for kind in ("all_reduce", "reduce_scatter", "all_gather"):
    entries = coll[kind]
    need(len(entries) == 7, f"{kind}: {len(entries)} sizes")
    need([e["bytes"] for e in entries] == [4 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20],
         f"{kind} bytes")
    if ranks > 1:
        positive(entries, kind)
    else:
        need(all(e["seconds"] >= 0 for e in entries), f"{kind}: negative seconds")
c = d["contention"]
for key in ("compute", "compute_communicating", "communication"):
    need(isinstance(c.get(key), (int, float)) and c[key] >= 1, f"contention {key}: {c.get(key)}")
# The reference: one 256^3 GEMM sustained (seconds; 33.5 MFLOP at 1-5000 GFLOP/s).
ref = c.get("sustained_gemm_256")
need(isinstance(ref, (int, float)) and 6.7e-6 < ref < 3.4e-2, f"sustained_gemm_256: {ref}")
# The same factor by a round's length: five rounds of 5 to 100 ms of GEMMs
# alone (a whole number of GEMMs, at least five: within a GEMM or two of
# the length, or five GEMMs), every factor >= 1.
rounds = c.get("compute_rounds")
need(isinstance(rounds, list) and len(rounds) == 5, f"compute_rounds: {rounds}")
for want, r in zip((0.005, 0.01, 0.02, 0.05, 0.1), rounds):
    need(want - 2 * ref <= r["alone"] <= max(want, 5 * 1.5 * ref) + 2 * ref and r["factor"] >= 1,
         f"compute_rounds: {r} for {want} s")
beside = c.get("communication_beside")
need(isinstance(beside, list), f"contention communication_beside: {beside}")
if ranks == 1 or d["deferred_starts"]:  # no collective runs beside the GEMMs
    need(c["compute_communicating"] == c["compute"] and c["communication"] == 1, f"contention {c}")
    need(beside == [], f"communication_beside: {beside}")
else:
    # Reduce-scatters of 256 KiB to 16 MiB beside the GEMMs, next to their
    # time alone (the reduce_scatter list's); the 256 KiB one's factor is
    # "communication".
    need([e["bytes"] for e in beside] == [256 << 10, 1 << 20, 4 << 20, 16 << 20],
         f"communication_beside bytes: {beside}")
    alone = {e["bytes"]: e["seconds"] for e in coll["reduce_scatter"]}
    need(all(e["alone"] == alone[e["bytes"]] and e["beside"] >= e["alone"] > 0 for e in beside),
         f"communication_beside: {beside} against {alone}")
    need(abs(c["communication"] - beside[0]["beside"] / beside[0]["alone"]) < 1e-3 * c["communication"],
         f"communication {c['communication']} against {beside[0]}")
print(f"{path}: {ranks} rank(s), {d['threads']} thread(s), {d['backend']}, "
      f"{len(d['gemm'])} GEMMs, process {d['process_bytes']} bytes")
PY
}

# 1 rank.
"$train" --calibrate "$work/one.json" > "$work/one.log"
cat "$work/one.log"
grep -q "^calibrated 1 rank x [0-9]* threads\? (local): GEMM .*; wrote $work/one.json\$" \
  "$work/one.log" || fail "no summary line at 1 rank"
check "$work/one.json" 1 local

# 2 ranks under mpirun, one thread each.
$mpirun -np 2 "$train" --calibrate "$work/two.json" --threads 1 > "$work/two.log"
cat "$work/two.log"
[ "$(grep -c '^calibrated' "$work/two.log")" = 1 ] || fail "not one summary line at 2 ranks"
grep -q "^calibrated 2 ranks x 1 thread (mpi" "$work/two.log" || fail "summary at 2 ranks"
check "$work/two.json" 2 mpi
"$python" -c "import json, sys; sys.exit(json.load(open('$work/two.json'))['threads'] != 1)" ||
  fail "--threads 1 not recorded"

# The programs planned from the files measure the reference again.
speed() {
  grep -o "the host's reference GEMMs x[0-9.]* their calibrated time after training: step [0-9.]* ms at that speed ([-+][0-9.]*%)" "$1" |
    sed 's/.*GEMMs x\([0-9.]*\) .*/\1/'
}
"$dtc" "$work/tiny.dsl" --machine "$work/one.json" -o "$work/planned1"
"$work/planned1" --progress off --epochs 3 > "$work/planned1.log" 2>&1
x=$(speed "$work/planned1.log")
[ -n "$x" ] || { cat "$work/planned1.log"; fail "1 rank: no reference measured after training"; }
"$python" -c "import sys; sys.exit(not 0.2 < $x < 5)" || fail "1 rank: reference x$x"
"$dtc" "$work/tiny.dsl" --ranks 2 --machine "$work/two.json" -o "$work/planned2"
$mpirun -np 2 "$work/planned2" --progress off --epochs 3 --threads 1 > "$work/planned2.log" 2>&1
x=$(speed "$work/planned2.log")
[ -n "$x" ] || { cat "$work/planned2.log"; fail "2 ranks: no reference measured after training"; }
"$python" -c "import sys; sys.exit(not 0.2 < $x < 5)" || fail "2 ranks: reference x$x"
echo "the reference after training: x$x at 2 ranks"

# With --overlap on the collectives progress on the communication thread
# beside the GEMMs (not deferred to their waits): what they take there, by size.
$mpirun -np 2 "$train" --calibrate "$work/two-on.json" --threads 1 --overlap on > "$work/two-on.log"
cat "$work/two-on.log"
grep -q "^calibrated 2 ranks x 1 thread (mpi): .*collectives beside it x[0-9.e+]* at 256 KiB \.\. x[0-9.e+]* at 16 MiB)" \
  "$work/two-on.log" || fail "summary at 2 ranks with --overlap on"
check "$work/two-on.json" 2 mpi
"$python" -c "import json, sys; sys.exit(json.load(open('$work/two-on.json'))['deferred_starts'])" ||
  fail "--overlap on: deferred starts recorded"

# Without FILE: the cache directory, created.
DTC_CACHE_DIR=$work/cache/dtc "$train" --calibrate --threads 1 > "$work/cache.log"
[ -f "$work/cache/dtc/machine-1ranks.json" ] || fail "no machine-1ranks.json in DTC_CACHE_DIR"
grep -q "; wrote $work/cache/dtc/machine-1ranks.json\$" "$work/cache.log" || fail "cache summary"
check "$work/cache/dtc/machine-1ranks.json" 1 local
for unset in "DTC_CACHE_DIR=off" "-u DTC_CACHE_DIR -u XDG_CACHE_HOME -u HOME"; do
  # shellcheck disable=SC2086 # (the words are env's arguments)
  if env $unset "$train" --calibrate > "$work/nocache.log" 2>&1; then
    fail "no cache directory ($unset) and no FILE succeeded"
  fi
  grep -q "^train: error: --calibrate: no cache directory .*give the file: --calibrate FILE" \
    "$work/nocache.log" || { cat "$work/nocache.log"; fail "no cache directory ($unset): message"; }
done

# An unwritable FILE: the error names it, nothing is measured or written.
bad=$work/missing/machine.json
for ranks in 1 2; do
  launch=""
  [ $ranks = 1 ] || launch="$mpirun -np 2"
  if $launch "$train" --calibrate "$bad" > "$work/bad$ranks.log" 2> "$work/bad$ranks.err"; then
    fail "$ranks rank(s): an unwritable FILE succeeded"
  fi
  grep -q "^train: error: .*cannot write calibration file '$bad'" "$work/bad$ranks.err" ||
    { cat "$work/bad$ranks.err"; fail "$ranks rank(s): the error does not name $bad"; }
  ! grep -q calibrated "$work/bad$ranks.log" || fail "$ranks rank(s): measured anyway"
  [ ! -e "$bad" ] && [ ! -e "$work/missing" ] || fail "$ranks rank(s): a file was left"
done
# A directory as FILE, likewise; nothing left in it.
if "$train" --calibrate "$work/cache" 2> "$work/dir.err"; then fail "a directory as FILE"; fi
grep -q "^train: error: cannot write calibration file '$work/cache': " "$work/dir.err" ||
  { cat "$work/dir.err"; fail "directory: message"; }
[ -z "$(find "$work/cache" -name '*.tmp.*')" ] || fail "a temporary file was left"

# The modes exclude each other.
if "$train" --calibrate "$work/x.json" --gradcheck 2> "$work/modes.err"; then fail "with --gradcheck"; fi
grep -q "^train: error: --calibrate and --gradcheck exclude each other" "$work/modes.err" ||
  fail "--gradcheck: message"
[ ! -e "$work/x.json" ] || fail "--gradcheck: a file was written"
echo PASS
