#!/usr/bin/env bash
# The components' boundaries, as the includes show them (docs/design.md):
#   dialects/  includes no other component of dtc's;
#   frontends/ only dialects/;  passes/ only dialects/;
#   tools/     anything but runtime/'s internals (runtime/lib);
#   runtime/   no compiler component (the runtime has no MLIR in it);
#   the lowering's internal header (passes/lowering/Lowering.h) is included
#   only inside passes/;
#   the printers (passes/codegen) include neither passes/Passes.h nor the
#   lowering: what they print is a function of the dtcrt IR.
# Inside the runtime, runtime/lib's families (included as "family/file.h")
# go one way, support <- kernels, comm, data <- checkpoint <- options <- train:
#   support/    no other family (errors, files, buffers, rng, the tracer);
#   kernels/    only support/: the CPU kernels are leaves, and so are their
#               CUDA twins (runtime/cuda/kernels/, whose "kernels/" is its own);
#   comm/, data/  only support/;
#   checkpoint/ only support/ and the schedule it saves (options/schedule.h);
#   options/    no train/ (the loop, the executor, runMain: the top);
#   runtime/mpi/, runtime/gloo/  only comm/ (the plugins' table, sockets);
#   runtime/include/ (the ABI generated code includes) nothing of runtime/lib.
# Prints each include that crosses a boundary and fails; passes otherwise.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
bad=0
# check DIR PATTERN WHY: no file under DIR includes a path matching PATTERN.
check() {
  local hits
  hits=$(git ls-files -- "$1" | grep -E '\.(h|cpp|cu|cuh)$' |
         xargs -r grep -HnE "^#include \"($2)" || true)
  if [ -n "$hits" ]; then
    echo "boundary: $3:"
    echo "$hits" | sed 's/^/  /'
    bad=1
  fi
}
check dialects/ 'passes/|frontends/|tools/|runtime/' "dialects/ includes another component"
check frontends/ 'passes/|tools/|runtime/' "frontends/ includes more than dialects/"
check passes/ 'frontends/|tools/|runtime/' "passes/ includes more than dialects/"
check runtime/ 'dialects/|passes/|frontends/|tools/' "runtime/ includes the compiler"
check tools/ 'runtime/lib/' "tools/ includes runtime internals"
# The printers print the dtcrt IR alone: no pass decides there.
check passes/codegen/ 'passes/Passes.h|passes/lowering/' "the printers read more than the dtcrt IR"
rt=runtime/lib
fams='support/|kernels/|comm/|data/|checkpoint/|options/|train/'
check $rt/support/ 'kernels/|comm/|data/|checkpoint/|options/|train/' "$rt/support/ includes another family"
check $rt/kernels/ 'comm/|data/|checkpoint/|options/|train/' "$rt/kernels/ (leaves) includes more than support/"
check runtime/cuda/kernels/ 'comm/|data/|checkpoint/|options/|train/' "runtime/cuda/kernels/ (leaves) includes more than support/"
check $rt/comm/ 'kernels/|data/|checkpoint/|options/|train/' "$rt/comm/ includes more than support/"
check $rt/data/ 'kernels/|comm/|checkpoint/|options/|train/' "$rt/data/ includes more than support/"
check $rt/checkpoint/ 'kernels/|comm/|data/|options/options|train/' "$rt/checkpoint/ includes more than support/ and options/schedule.h"
check $rt/options/ 'train/' "$rt/options/ includes train/"
for d in runtime/mpi/ runtime/gloo/; do
  check "$d" 'support/|kernels/|data/|checkpoint/|options/|train/' "$d (a plugin) includes more than comm/"
done
check runtime/include/ "$fams" "runtime/include/ (the ABI) includes runtime internals"
for d in dialects/ frontends/ tools/ runtime/ test/; do
  check "$d" 'passes/lowering/' "$d includes an internal header of passes/"
done
[ $bad = 0 ] && echo "boundaries: every include stays inside its component's interface"
exit $bad
