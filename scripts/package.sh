#!/usr/bin/env bash
# The crates.io packages: gpushmem-build, gpushmem-kernels and gpushmem, packaged
# together and verified (each .crate unpacked under target/package and built,
# the dependents against the others through cargo's temporary local registry,
# since they are not on crates.io yet). Fails when any of them does not package
# or build; prints each .crate with its size. scripts/test.sh runs it.
#   bash scripts/package.sh
# Offline: the dependencies come from cargo's cache (~/.cargo), filled by any
# earlier build of the workspace. --allow-dirty: this checks what the packages
# contain and that they build, not the checkout's state (cargo publish does that).
set -euo pipefail
cd "$(dirname "$0")/.."
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
cargo package --offline --allow-dirty "${args[@]}"
out=${CARGO_TARGET_DIR:-target}/package
for c in "${crates[@]}"; do
  version=$(cargo pkgid --offline -p "$c" | sed 's/.*[@#]//')
  f="$out/$c-$version.crate"
  [ -f "$f" ] || { echo "package.sh: $f was not written" >&2; exit 1; }
  printf '%s\t%s bytes\n' "$f" "$(stat -c %s "$f")"
done
