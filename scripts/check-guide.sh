#!/usr/bin/env bash
# Builds the example app of docs/guide.md outside the workspace, from the
# guide's own code blocks, and runs it: on a GPU machine it must print its
# results and exit 0 (it exits 1 when a check fails); elsewhere it must fail
# saying no GPU was found — accepted only where GPUSHMEM_REQUIRE_GPU is unset
# (the GPU scripts set it).
# Usage: scripts/check-guide.sh [--packaged] [DIR]   (default: a fresh temporary directory)
# Without --packaged the guide's path dependencies point at this checkout, as
# the guide writes them. With --packaged the app takes the three crates as a
# registry user does: by version ("0.1.0"), their sources being what
# scripts/package.sh packed (the .crate files, unpacked read-only outside the
# checkout and put in for crates.io's with `[patch.crates-io]` in the app's
# .cargo/config.toml, as they are not on crates.io yet); no scripts/setup.sh
# runs for the app, its lock files and target directories are its own.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
packaged=
if [ "${1:-}" = --packaged ]; then packaged=1; shift; fi
dir=${1:-$(mktemp -d)}
mkdir -p "$dir/myapp/src" "$dir/myapp/kernels/src" "$dir/myapp/.cargo"
version=
if [ -n "$packaged" ]; then
  # Its verdict line (cargo publish --dry-run, or cargo package offline) shown; the listing kept.
  bash "$repo/scripts/package.sh" >"$dir/package.log" || { cat "$dir/package.log"; exit 1; }
  grep '^package.sh: ' "$dir/package.log"
  # Where package.sh wrote the .crate files.
  crates=$(cd "$repo" && realpath -m "${CARGO_TARGET_DIR:-target}/packaging/package")
  version=$(cd "$repo" && cargo pkgid --offline -p gpushmem | sed 's/.*[@#]//')
  src="$dir/crates"
  mkdir -p "$src"
  echo "[patch.crates-io]" >"$dir/myapp/.cargo/config.toml"
  for c in gpushmem gpushmem-kernels gpushmem-build; do
    tar -C "$src" -xzf "$crates/$c-$version.crate"
    echo "$c = { path = \"$src/$c-$version\" }" >>"$dir/myapp/.cargo/config.toml"
  done
  chmod -R a-w "$src"
  # Writable again once built, so that the directory can be removed.
  trap 'chmod -R u+w "$src"' EXIT
fi
python3 - "$repo" "$dir" "$version" <<'PY'
import re, sys
repo, dir, version = sys.argv[1], sys.argv[2], sys.argv[3]
guide = open(f"{repo}/docs/guide.md").read()
blocks = re.findall(r'`(myapp/[^`]+)`:\n```\w*\n(.*?)```', guide, re.S)
assert len(blocks) == 5, f"expected 5 file blocks in the guide, found {len(blocks)}"
for path, body in blocks:
    if version:
        body, n = re.subn(r'\{ path = "/path/to/gpushmem/\w+" \}', f'"{version}"', body)
        assert n == 0 or path.endswith("Cargo.toml"), path
    open(f"{dir}/{path}", "w").write(body.replace("/path/to/gpushmem", repo))
PY
if [ -n "$packaged" ] && grep -rq "$repo" "$dir/myapp"; then
  echo "check-guide: --packaged, yet the app names the checkout:" >&2
  grep -rn "$repo" "$dir/myapp" >&2
  exit 1
fi
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
echo "check-guide: built and ran the guide's example in $dir/myapp${packaged:+ (from the packaged crates $version)}"
