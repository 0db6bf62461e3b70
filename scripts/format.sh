#!/usr/bin/env bash
# Formats the compiler's C++ sources (dialects/, passes/, frontends/, tools/)
# with clang-format-22 in LLVM style (.clang-format), as LLVM, MLIR, CIRCT
# and IREE do. --check changes nothing and fails, listing the files, when a
# source is not formatted (the test format.compiler runs it). The runtime
# keeps its own, wider layout.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
fmt=${CLANG_FORMAT:-clang-format-22}
if ! command -v "$fmt" >/dev/null; then
  echo "format.sh: $fmt not found (scripts/install-deps.sh installs clang-format-22)" >&2
  exit 77
fi
cd "$root"
mapfile -t files < <(git ls-files --cached --others --exclude-standard -- 'dialects/*.cpp' 'dialects/*.h' 'passes/*.cpp' 'passes/*.h' \
  'frontends/*.cpp' 'frontends/*.h' 'tools/*.cpp' 'tools/*.h')
if [ "${1:-}" = "--check" ]; then
  bad=()
  for f in "${files[@]}"; do
    "$fmt" --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
  done
  if [ ${#bad[@]} -gt 0 ]; then
    echo "format.sh: not formatted (run scripts/format.sh): ${bad[*]}" >&2
    exit 1
  fi
  echo "format.sh: ${#files[@]} files formatted"
else
  "$fmt" -i "${files[@]}"
fi
