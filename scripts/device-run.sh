#!/usr/bin/env bash
# Runs on the GPU machine from the staged folder (see scripts/device.sh).
set -uo pipefail
cd "$(dirname "$0")"
export PATH="$PWD:$PATH" GPUSHMEM_RUN="$PWD/gpushmem-run"
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
