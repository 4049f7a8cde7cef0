#!/usr/bin/env bash
# Runs on the GPU machine from the staged folder (see scripts/device.sh).
set -uo pipefail
cd "$(dirname "$0")"
# scripts/device.sh ships the binaries as one gzip bundle: unpack it once, into bin/.
if [ -f bundle.tar.gz ] && [ ! -d bin ]; then
  mkdir bin && tar -C bin -xzf bundle.tar.gz || { echo "run.sh: cannot unpack bundle.tar.gz"; exit 1; }
fi
cd bin
export PATH="$PWD:$PATH" GPUSHMEM_RUN="$PWD/gpushmem-run"
# No usable GPU here is a failure of the run, never a green run of ignored tests.
export GPUSHMEM_REQUIRE_GPU=1
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
if [ $# -eq 0 ] || [ "$1" = tests ]; then
  [ $# -gt 0 ] && shift
  rc=0
  ./gpu --test-threads 1 "$@" || rc=$?
  ./ptx || rc=$?
  exit $rc
fi
exec "$@"
