#!/usr/bin/env bash
# The test command (README, CI): formatting, lints, then every test of the
# workspace. GPU tests run where a GPU is; elsewhere they are reported as
# ignored with the reason. Run scripts/setup.sh first on a fresh machine.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.tools/bin:$PATH"
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0
cargo fmt --all --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
cargo test --workspace
