#!/usr/bin/env bash
# Installs what building gpushmem needs on a fresh machine:
#  - the pinned toolchain's components (rust-toolchain.toml): rust-src,
#    llvm-tools, llvm-bitcode-linker (nvptx64 kernels), clippy, rustfmt;
#  - ptxas from the pinned PyPI wheel nvidia-cuda-nvcc-cu12==12.9.86, into
#    .tools/bin (the build assembles every PTX with it; no CUDA install needed).
# Idempotent; prints where ptxas is.
set -euo pipefail
cd "$(dirname "$0")/.."
toolchain=$(sed -n 's/^channel *= *"\(.*\)"/\1/p' rust-toolchain.toml)
rustup toolchain install "$toolchain" --profile minimal >/dev/null 2>&1 || true
rustup component add --toolchain "$toolchain" rust-src llvm-tools llvm-bitcode-linker clippy rustfmt
ptxas=.tools/bin/ptxas
if [ ! -x "$ptxas" ]; then
  mkdir -p .tools/bin .tools/wheel
  python3 -m pip download --quiet --no-deps --only-binary=:all: -d .tools/wheel nvidia-cuda-nvcc-cu12==12.9.86
  python3 - <<'PY'
import glob, zipfile, os, stat
whl = glob.glob('.tools/wheel/nvidia_cuda_nvcc_cu12-12.9.86-*.whl')[0]
with zipfile.ZipFile(whl) as z:
    data = z.read('nvidia/cuda_nvcc/bin/ptxas')
with open('.tools/bin/ptxas', 'wb') as f:
    f.write(data)
os.chmod('.tools/bin/ptxas', 0o755)
PY
  rm -rf .tools/wheel
fi
"$ptxas" --version | tail -n 1
echo "ptxas: $PWD/$ptxas"
