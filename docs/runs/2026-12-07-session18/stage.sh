#!/usr/bin/env bash
# Session 18 (first written in session 17): the stage for mn.sh, with the native GPU suite (the cudarc interop tests) and the
# guide's app built from the packaged crates (scripts/check-guide.sh --packaged).
# Stages only what mn.sh needs (scripts/device.sh's full stage is over the device tool's 64 MiB with
# the UCX libraries beside it): gpushmem-run, gpushmem-info, the ring/moe/halo examples for both
# engines, the GPU suite for the NVSHMEM engine, verify.sh; and stage-ucx/ucx.tar.xz (libucx-cu13 1.22.0's
# .so.0 files from PyPI, for the stretch item).
set -euo pipefail
cd "$(dirname "$0")/../../.."
export PATH="$PWD/.tools/bin:$PATH"
cargo build --release --quiet -p gpushmem --bin gpushmem-run --bin gpushmem-info
cargo build --release --quiet --example ring --example moe --example halo
GPUSHMEM_ENGINE=nvshmem cargo build --release --quiet --examples --target-dir target/nvshmem
gpu=$(cargo test --release --test gpu --no-run --message-format=json 2>/dev/null |
  python3 -c 'import json,sys
for l in sys.stdin:
    try: m = json.loads(l)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "gpu": print(m["executable"])')
nvgpu=$(GPUSHMEM_ENGINE=nvshmem cargo test --release --test gpu --no-run --target-dir target/nvshmem --message-format=json 2>/dev/null |
  python3 -c 'import json,sys
for l in sys.stdin:
    try: m = json.loads(l)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "gpu": print(m["executable"])')
rm -rf stage .stage-bin && mkdir -p stage .stage-bin
cp target/release/gpushmem-run target/release/gpushmem-info .stage-bin/
for e in ring moe halo; do cp "target/release/examples/$e" .stage-bin/; cp "target/nvshmem/release/examples/$e" ".stage-bin/$e-nvshmem"; done
cp "$nvgpu" .stage-bin/gpu-nvshmem
cp "$gpu" .stage-bin/gpu
# The guide's app on the packaged crates (issue 39).
guide=$(mktemp -d)
bash scripts/check-guide.sh --packaged "$guide" >/dev/null
cp "$guide/myapp/target/debug/myapp" .stage-bin/guide-myapp
rm -rf "$guide"
strip .stage-bin/* 2>/dev/null || true
cp scripts/device-verify.sh .stage-bin/verify.sh
tar -C .stage-bin -czf stage/bundle.tar.gz .
cp scripts/device-run.sh stage/run.sh
if [ ! -f stage-ucx/ucx.tar.xz ]; then
  d=$(mktemp -d); pip download -q --no-deps libucx-cu13==1.22.0 -d "$d"
  (cd "$d" && python3 -c "
import zipfile,glob
z=zipfile.ZipFile(glob.glob('*.whl')[0])
for n in z.namelist():
    if n.endswith('.so.0') or 'libucx_cu13.libs' in n: z.extract(n,'.')
" && mkdir -p "$OLDPWD/stage-ucx" && tar -cJf "$OLDPWD/stage-ucx/ucx.tar.xz" libucx libucx_cu13.libs)
fi
du -sh stage stage-ucx
