#!/usr/bin/env bash
# The test command (README, CI): formatting, lints, then every test of the
# workspace. GPU tests run where a GPU is; elsewhere they are reported as
# ignored with the reason. Run scripts/setup.sh first on a fresh machine.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.tools/bin:$PATH"
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0
# Each step's time, so that CI's time can be read from its log.
step() { echo "test.sh: [${SECONDS}s] $*"; }
step "formatting"
cargo fmt --all --check
# The guide's app on the packaged crates (tests/guide.rs; scripts/package.sh's
# cargo publish --dry-run, then the app built outside the workspace): minutes of
# mostly one-core work (ptxas, fat LTO) in target directories of its own, so it
# runs beside the steps below; its verdict comes at the end.
guide_log=$(mktemp)
guide_dir=$(mktemp -d)
bash scripts/check-guide.sh --packaged "$guide_dir" >"$guide_log" 2>&1 &
guide_pid=$!
cargo clippy --workspace --all-targets --quiet -- -D warnings
# Kernel crates are workspaces of their own (built for nvptx64 only). The
# built-in kernels' manifest is a template that host/build.rs fills in under
# its OUT_DIR (run by the clippy above): found through cargo's build-script report.
builtin=$(cargo check --quiet -p gpushmem --message-format=json | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "build-script-executed" and "/host#gpushmem@" in m["package_id"]:
        print(m["out_dir"] + "/builtin")')
[ -f "$builtin/Cargo.toml" ] || { echo "test.sh: host/build.rs wrote no built-in kernels' manifest (${builtin:-no out dir})" >&2; exit 1; }
kernel_crates=(tests/kernels examples/*-kernels "$builtin" bench/kernels)
for k in "${kernel_crates[@]}"; do
  cargo fmt --check --manifest-path "$k/Cargo.toml"
done
step "nvptx64 clippy"
# Clippy on the device code for nvptx64, as gpushmem-build compiles it, on both
# engines: the device library and every kernel crate.
nvptx_clippy() { # nvptx_clippy EXTRA_RUSTFLAGS CARGO_ARGS...
  local flags=$1
  shift
  RUSTC_BOOTSTRAP=1 CARGO_ENCODED_RUSTFLAGS="-Ctarget-cpu=sm_90$flags" cargo clippy --quiet \
    --target nvptx64-nvidia-cuda -Zbuild-std=core --target-dir "${CARGO_TARGET_DIR:-target}/clippy-nvptx" "$@" -- -D warnings
}
nvshmem_flags=$'\x1f--cfg\x1fgpushmem_nvshmem'
nvptx_clippy "" -p gpushmem-kernels
nvptx_clippy "$nvshmem_flags" -p gpushmem-kernels --features nvshmem
for k in "${kernel_crates[@]}"; do
  nvptx_clippy "" --manifest-path "$k/Cargo.toml"
  nvptx_clippy "$nvshmem_flags" --manifest-path "$k/Cargo.toml" --features gpushmem-kernels/nvshmem
done
step "rustdoc"
# The device API's rustdoc (nvptx64), checked to show the device functions.
bash scripts/doc.sh
# docs/verification.md's litmus table is what the committed logs give.
python3 scripts/litmus-table.py --check
# The host crates' rustdoc: no broken or private links.
RUSTDOCFLAGS="-D warnings" cargo doc --quiet --no-deps -p gpushmem -p gpushmem-build
log=$(mktemp)
trap 'rm -rf "$log" "$guide_log" "$guide_dir"; kill "$guide_pid" 2>/dev/null || true' EXIT
step "cargo test --workspace"
# tests/guide.rs is what runs in the background above.
cargo test --workspace -- --skip guide_example_builds_and_runs 2>&1 | tee "$log"
# The simulated-node tests (host/tests/multinode.rs) make mount and UTS
# namespaces: ignored above, run here where that is possible (as root, as CI
# runs); elsewhere they stay ignored, and this says why.
if [ "$(id -u)" = 0 ] && unshare --mount --uts true 2>/dev/null; then
  netns=--skip=separate_network_namespaces
  if ip netns add gpushmem-probe 2>/dev/null && ip netns del gpushmem-probe; then
    netns=
  else
    echo "test.sh: the network-namespace test of host/tests/multinode.rs not run: it needs iproute2 (ip netns)"
  fi
  step "simulated-node tests"
  cargo test -p gpushmem --test multinode -- --ignored $netns 2>&1 | tee -a "$log"
else
  echo "test.sh: host/tests/multinode.rs not run: it needs root and mount/UTS namespaces (unshare --mount --uts)"
fi
# The GPU scripts' guard (GPUSHMEM_REQUIRE_GPU=1): with no usable GPU (none here,
# or hidden by CUDA_VISIBLE_DEVICES=) the GPU suite must fail, not list ignored
# tests, and fail by the guard: its own message (tests/gpu/main.rs) must be in
# the output, since any other failure (a build error, a panic) exits non-zero too.
step "GPU guard"
guard_out=$(CUDA_VISIBLE_DEVICES= GPUSHMEM_REQUIRE_GPU=1 cargo test --quiet --test gpu 2>&1) && guard_rc=0 || guard_rc=$?
if [ "$guard_rc" -eq 0 ]; then
  echo "test.sh: the GPU suite passed without a GPU although GPUSHMEM_REQUIRE_GPU=1" >&2
  exit 1
fi
if ! grep -q "GPU tests FAILED: GPUSHMEM_REQUIRE_GPU is set, but no GPU can be used" <<<"$guard_out"; then
  echo "test.sh: the GPU suite without a GPU (GPUSHMEM_REQUIRE_GPU=1) failed, but not by the guard:" >&2
  tail -20 <<<"$guard_out" >&2
  exit 1
fi
step "the guide's app on the packaged crates (started at the beginning)"
if wait "$guide_pid" && grep -q "check-guide: built and ran.*from the packaged crates" "$guide_log"; then
  guide_pid=
  grep -E "^package.sh: |^check-guide: " "$guide_log"
  # Counted with the tests (what tests/guide.rs checks).
  echo "test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out (tests/guide.rs, run by test.sh)" >>"$log"
else
  guide_pid=
  cat "$guide_log" >&2
  echo "test.sh: scripts/check-guide.sh --packaged failed (above)" >&2
  exit 1
fi
step "done"
# One closing line over every test binary (cargo's last line is the doc-test
# summary), then why the skipped ones were skipped, by reason (GPU tests: the
# suite's own line says why). Helpers (ignored functions that other tests run
# as child processes) are not tests: not counted.
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i; if ($(i+1) ~ /^ignored/) s += $i } }
     /^GPU tests ignored: / { gpu = substr($0, 20) }
     /\.\.\. ignored/ { r = $0; sub(/.*\.\.\. ignored,? */, "", r)
                        if (r ~ /^(helper|run as a child|the child process)/) { h++; next }
                        if (r == "" && $0 ~ /\[needs GPU\]/) r = "needs a GPU: " gpu
                        if (r == "") r = "no reason given"
                        why[r]++ }
     END { printf "all tests: %d passed, %d failed, %d skipped\n", p, f, s - h
           for (r in why) printf "  %d skipped: %s\n", why[r], r | "sort -rn" }' "$log"
