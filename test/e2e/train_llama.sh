#!/usr/bin/env bash
# examples/llama.dsl (RMSNorm, SwiGLU, no biases) trains on its text data,
# Debian's fortunes, on 1 and 2 ranks: 30 steps each, the loss falls by
# more than 0.5 nats from its first step (about 5.5, ln 256), every loss
# finite. Its parity with PyTorch is test/parity/llama.py's.
# usage: train_llama.sh DTC EXAMPLE WORKDIR
set -euo pipefail
dtc=$1 example=$2 work=$3
mkdir -p "$work"
"$dtc" "$example" -o "$work/llama"
for ranks in 1 2; do
  launch=()
  if [ "$ranks" -gt 1 ]; then
    launch=(timeout 300 mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$ranks")
  fi
  "${launch[@]}" "$work/llama" --max-steps 30 --eval off --quiet --threads 1 \
    --metrics "$work/m$ranks.csv"
  /usr/bin/python3 - "$work/m$ranks.csv" "$ranks" <<'PY'
import csv, math, sys
rows = list(csv.DictReader(open(sys.argv[1])))
losses = [float(r["loss"]) for r in rows]
ok = len(losses) == 30 and all(math.isfinite(l) for l in losses) and losses[0] - losses[-1] > 0.5
print(f"llama {sys.argv[2]} rank(s): {len(losses)} steps, loss {losses[0]:.4f} -> {losses[-1]:.4f}",
      "ok" if ok else "FAIL")
sys.exit(0 if ok else 1)
PY
done
