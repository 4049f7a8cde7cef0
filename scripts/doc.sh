#!/usr/bin/env bash
# The device API's documentation: gpushmem-kernels' rustdoc built for the
# nvptx64 target (where its device modules exist; on the host it has only
# `abi` and `reduce`), checked to show the public device functions.
#   bash scripts/doc.sh          build; prints the index's path
#   bash scripts/doc.sh --open   build and open it in a browser
# scripts/test.sh runs it. Needs scripts/setup.sh's toolchain (rust-src).
set -euo pipefail
cd "$(dirname "$0")/.."
target=nvptx64-nvidia-cuda
# Under CARGO_TARGET_DIR when set (a checkout that must stay read-only), else target/.
out=${CARGO_TARGET_DIR:-target}/doc-nvptx
RUSTC_BOOTSTRAP=1 CARGO_ENCODED_RUSTFLAGS="-Ctarget-cpu=sm_90" RUSTDOCFLAGS="-D warnings" \
  cargo doc --quiet --no-deps -p gpushmem-kernels --target "$target" -Zbuild-std=core --target-dir "$out"
doc="$out/$target/doc/gpushmem_kernels"
# A sample of the device API by topic: each must have its page.
missing=""
for page in rma/fn.put_nbi.html rma/fn.get.html rma/fn.putmem_nbi_block.html sync/fn.quiet.html sync/fn.fence.html \
  sync/fn.barrier_all.html signal/fn.put_signal_nbi.html signal/fn.signal_op.html signal/fn.signal_op_relaxed.html \
  signal/fn.signal_wait_until.html atomic/fn.atomic_fetch_add.html wait/fn.wait_until.html team/struct.Team.html \
  team/fn.team_my_pe.html collective/fn.reduce_block.html collective/fn.broadcast.html pe/fn.my_pe.html \
  thread/fn.sync_block.html thread/fn.global_idx.html; do
  [ -f "$doc/$page" ] || missing="$missing $page"
done
if [ -n "$missing" ]; then
  echo "doc.sh: the nvptx64 rustdoc of gpushmem-kernels lacks:$missing" >&2
  exit 1
fi
# An absolute CARGO_TARGET_DIR stays as it is; a relative one is under the checkout.
case $doc in /*) abs=$doc ;; *) abs=$PWD/$doc ;; esac
echo "device API docs: $abs/index.html"
if [ "${1:-}" = "--open" ]; then
  xdg-open "$doc/index.html" 2>/dev/null || open "$doc/index.html" 2>/dev/null || true
fi
