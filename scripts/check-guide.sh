#!/usr/bin/env bash
# Builds the example app of docs/guide.md outside the workspace, from the
# guide's own code blocks (paths pointed at this checkout), and runs it: on a
# GPU machine it must print its results and exit 0 (it exits 1 when a check
# fails); elsewhere it must fail saying no GPU was found — accepted only where
# GPUSHMEM_REQUIRE_GPU is unset (the GPU scripts set it).
# Usage: scripts/check-guide.sh [DIR]   (default: a fresh temporary directory)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$(mktemp -d)}
mkdir -p "$dir/myapp/src" "$dir/myapp/kernels/src"
python3 - "$repo" "$dir" <<'PY'
import re, sys
repo, dir = sys.argv[1], sys.argv[2]
guide = open(f"{repo}/docs/guide.md").read()
blocks = re.findall(r'`(myapp/[^`]+)`:\n```\w*\n(.*?)```', guide, re.S)
assert len(blocks) == 5, f"expected 5 file blocks in the guide, found {len(blocks)}"
for path, body in blocks:
    open(f"{dir}/{path}", "w").write(body.replace("/path/to/gpushmem", repo))
PY
cp "$repo/rust-toolchain.toml" "$dir/myapp/"
cd "$dir/myapp"
cargo build --quiet
set +e
out=$(./target/debug/myapp 2>&1); rc=$?
set -e
echo "$out"
if [ $rc -ne 0 ]; then
  if [ "${GPUSHMEM_REQUIRE_GPU:-0}" != 0 ] || ! grep -q '^Error: NoGpu(' <<<"$out"; then
    echo "check-guide: the example failed (exit $rc)" >&2
    exit 1
  fi
  echo "check-guide: no GPU here: the example was built and said so"
fi
echo "check-guide: built and ran the guide's example in $dir/myapp"
