#!/usr/bin/env bash
# Builds the GPU test binaries, examples and tools here (release) and stages
# them in ./stage (git-ignored) for the device tool. Then, on the GPU machine:
#
#   device run  carry=["stage"]  command="bash stage/run.sh [what]"
#
# what: tests (default: the GPU test suite, then the PTX tests), or any
# command line run inside stage/ with the staged binaries on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.tools/bin:$PATH"
rm -rf stage && mkdir -p stage
json=$(cargo test --workspace --release --no-run --message-format=json 2>/dev/null)
cargo build --workspace --release --bins --examples --quiet
# Copy each test executable under its target name (gpu, ptx, launcher, …).
echo "$json" | python3 -c '
import json, sys, shutil, os
for line in sys.stdin:
    try: m = json.loads(line)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        t = m["target"]; name = t["name"] if t["kind"] != ["lib"] else t["name"] + "-unit"
        shutil.copy(m["executable"], os.path.join("stage", name))
'
for b in target/release/gpushmem-run target/release/gpushmem-perf target/release/gpushmem-info target/release/examples/ring; do
  [ -f "$b" ] && cp "$b" stage/
done
cp scripts/device-run.sh stage/run.sh
strip stage/* 2>/dev/null || true
du -sh stage; ls stage
