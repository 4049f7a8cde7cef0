#!/usr/bin/env bash
# Installs what building gpushmem needs on a fresh machine:
#  - the pinned toolchain's components (rust-toolchain.toml): rust-src,
#    llvm-tools, llvm-bitcode-linker (nvptx64 kernels), clippy, rustfmt;
#  - ptxas from the pinned PyPI wheel nvidia-cuda-nvcc-cu12==12.9.86, into
#    .tools/bin (the build assembles every PTX with it; no CUDA install needed);
#  - NVSHMEM's device bitcode and headers from the pinned PyPI wheel
#    nvidia-nvshmem-cu13==3.4.5, into .tools/nvshmem (lib/libnvshmem_device.bc,
#    include/): what gpushmem-build links for the NVSHMEM engine
#    (GPUSHMEM_ENGINE=nvshmem). NVIDIA's EULA covers these files: they are
#    fetched here, on the user's machine, and never committed (.tools/ is ignored).
# Idempotent; prints where ptxas and the NVSHMEM bitcode are.
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
nvshmem=.tools/nvshmem
if [ ! -f "$nvshmem/lib/libnvshmem_device.bc" ] || [ ! -f "$nvshmem/include/non_abi/nvshmem_version.h" ]; then
  rm -rf .tools/wheel "$nvshmem"
  mkdir -p .tools/wheel
  python3 -m pip download --quiet --no-deps --only-binary=:all: -d .tools/wheel nvidia-nvshmem-cu13==3.4.5
  python3 - <<'PY'
import glob, os, zipfile
whl = glob.glob('.tools/wheel/nvidia_nvshmem_cu13-3.4.5-*.whl')[0]
pre = 'nvidia/nvshmem/'
with zipfile.ZipFile(whl) as z:
    for m in z.namelist():
        rel = m[len(pre):] if m.startswith(pre) else None
        if rel and not m.endswith('/') and (rel == 'lib/libnvshmem_device.bc' or rel.startswith('include/')):
            dst = os.path.join('.tools/nvshmem', rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            with open(dst + '.part', 'wb') as f:
                f.write(z.read(m))
            os.replace(dst + '.part', dst)
PY
  rm -rf .tools/wheel
fi
v=$(sed -n 's/^#define NVSHMEM_VENDOR_\(MAJOR\|MINOR\|PATCH\)_VERSION *\([0-9]*\).*/\2/p' "$nvshmem/include/non_abi/nvshmem_version.h" | paste -sd.)
echo "nvshmem $v device bitcode: $PWD/$nvshmem/lib/libnvshmem_device.bc"
