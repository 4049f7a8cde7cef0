#!/usr/bin/env bash
# Builds the GPU test binaries, examples and tools here (release) and stages
# them in ./stage (git-ignored) for the device tool. Then, on the GPU machine:
#
#   device run  carry=["stage"]  command="bash stage/run.sh [what]"
#
# (stage/ holds run.sh and bundle.tar.gz; run.sh unpacks the bundle into stage/bin and runs there)
#
# what: tests (default: the GPU test suite, then the PTX tests), or any
# command line run inside stage/ with the staged binaries on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.tools/bin:$PATH"
rm -rf stage .stage-bin && mkdir -p stage .stage-bin
json=$(cargo test --workspace --release --no-run --message-format=json 2>/dev/null) || {
  echo "device.sh: the build failed:" >&2
  cargo test --workspace --release --no-run 2>&1 | grep -E "^(error|warning)" -A8 | head -60 >&2
  exit 1
}
cargo build --workspace --release --bins --examples --quiet
# Copy each test executable under its target name (gpu, ptx, launcher, …).
echo "$json" | python3 -c '
import json, sys, shutil, os
for line in sys.stdin:
    try: m = json.loads(line)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        t = m["target"]; name = t["name"] if t["kind"] != ["lib"] else t["name"] + "-unit"
        shutil.copy(m["executable"], os.path.join(".stage-bin", name))
'
for b in target/release/gpushmem-run target/release/gpushmem-perf target/release/gpushmem-info \
  target/release/examples/ring target/release/examples/allreduce target/release/examples/moe target/release/examples/halo; do
  [ -f "$b" ] && cp "$b" .stage-bin/
done
# The ring, moe and halo examples built for the NVSHMEM engine (docs/multinode.md), as <name>-nvshmem.
# And the GPU test suite with its kernels built for the NVSHMEM engine, as gpu-nvshmem.
if GPUSHMEM_ENGINE=nvshmem cargo build --release --examples --quiet --target-dir target/nvshmem; then
  for e in ring moe halo; do cp "target/nvshmem/release/examples/$e" ".stage-bin/$e-nvshmem"; done
else
  echo "device.sh: the NVSHMEM-engine build of the examples failed; not staged" >&2
fi
# gpushmem-perf with its kernels built for the NVSHMEM engine (its one-PE benchmarks), as gpushmem-perf-nvshmem.
if GPUSHMEM_ENGINE=nvshmem cargo build --release --bin gpushmem-perf --quiet --target-dir target/nvshmem; then
  cp target/nvshmem/release/gpushmem-perf .stage-bin/gpushmem-perf-nvshmem
else
  echo "device.sh: the NVSHMEM-engine build of gpushmem-perf failed; gpushmem-perf-nvshmem not staged" >&2
fi
nvgpu=$(GPUSHMEM_ENGINE=nvshmem cargo test --release --test gpu --no-run --target-dir target/nvshmem --message-format=json 2>/dev/null |
  python3 -c 'import json,sys
for l in sys.stdin:
    try: m = json.loads(l)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "gpu": print(m["executable"])') || true
if [ -n "$nvgpu" ]; then cp "$nvgpu" .stage-bin/gpu-nvshmem; else echo "device.sh: the NVSHMEM-engine GPU suite did not build; not staged" >&2; fi
strip .stage-bin/* 2>/dev/null || true  # (guide-myapp is stripped where it is staged, below)
cp scripts/sanitize.sh .stage-bin/sanitize.sh
cp scripts/put-sweep.sh .stage-bin/put-sweep.sh
cp scripts/device-verify.sh .stage-bin/verify.sh
# The guide's app, built outside the workspace from docs/guide.md on the packaged crates (issues 9, 39).
guide=$(mktemp -d)
if bash scripts/check-guide.sh --packaged "$guide" >/dev/null 2>&1; then
  cp "$guide/myapp/target/debug/myapp" .stage-bin/guide-myapp && { strip .stage-bin/guide-myapp || true; }
else
  echo "device.sh: scripts/check-guide.sh failed; guide-myapp not staged" >&2
fi
rm -rf "$guide"
# The binaries embed their PTX and cubins: gzip makes them fit the device tool's 64 MiB.
tar -C .stage-bin -czf stage/bundle.tar.gz .
cp scripts/device-run.sh stage/run.sh
du -sh stage; ls .stage-bin
