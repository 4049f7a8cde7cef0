#!/usr/bin/env bash
# The crates.io packages: gpushmem-build, gpushmem-kernels and gpushmem, packaged
# together and verified (each .crate unpacked under target/packaging/package and built,
# the dependents against the others through cargo's temporary local registry,
# since they are not on crates.io yet). Fails when any of them does not package
# or build; prints each .crate with its size. scripts/test.sh runs it.
#   bash scripts/package.sh
# With crates.io reachable this is `cargo publish --dry-run`; offline
# (CARGO_NET_OFFLINE=true, or no index) `cargo package`, the dependencies from
# cargo's cache. --allow-dirty: this checks what the packages contain and that
# they build, not the checkout's state (a real publish does that).
set -euo pipefail
cd "$(dirname "$0")/.."
# A target directory of its own (under the workspace's): this cleans the three
# crates' artifacts below, and may run beside another build of the workspace.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}/packaging"
crates=(gpushmem-build gpushmem-kernels gpushmem)
args=()
for c in "${crates[@]}"; do args+=(-p "$c"); done
# Cargo unpacks its temporary registry's crates under the cargo home and does
# not unpack one again while the version is unchanged: drop the copies an
# earlier run left (never crates.io's), or the verification builds stale sources.
for c in "${crates[@]}"; do
  find "${CARGO_HOME:-$HOME/.cargo}/registry/src" "${CARGO_HOME:-$HOME/.cargo}/registry/cache" -mindepth 2 -maxdepth 2 \
    -name "$c-[0-9]*" -not -path '*/index.crates.io-*' -exec rm -rf {} + 2>/dev/null || true
done
# Its build artifacts too: cargo takes a registry crate of an unchanged version
# for unchanged, so an earlier run's gpushmem-build would be linked again.
cargo clean --quiet "${args[@]}"
# `cargo publish --dry-run` where crates.io's index can be reached (what
# publishing checks, less the upload), else the same packaging and build
# offline (`cargo package`).
out=$CARGO_TARGET_DIR/package
rm -f "$out"/*.crate
if [ "${CARGO_NET_OFFLINE:-false}" != true ] && cargo publish --dry-run --allow-dirty "${args[@]}"; then
  echo "package.sh: cargo publish --dry-run passed for ${crates[*]}"
  # The .crate files where `cargo package` puts them (publish keeps its own).
  cargo package --offline --allow-dirty --no-verify "${args[@]}"
elif [ -n "${CI:-}" ] || { [ "${CARGO_NET_OFFLINE:-false}" != true ] && cargo search --limit 1 gpushmem >/dev/null 2>&1; }; then
  # Under CI (CI set) the dry run itself is the check: no offline fallback.
  echo "package.sh: cargo publish --dry-run failed (above)" >&2
  exit 1
else
  echo "package.sh: crates.io not reachable: packaging and building offline (cargo package)"
  cargo package --offline --allow-dirty "${args[@]}"
fi
for c in "${crates[@]}"; do
  version=$(cargo pkgid --offline -p "$c" | sed 's/.*[@#]//')
  f="$out/$c-$version.crate"
  [ -f "$f" ] || { echo "package.sh: $f was not written" >&2; exit 1; }
  printf '%s\t%s bytes\n' "$f" "$(stat -c %s "$f")"
done
