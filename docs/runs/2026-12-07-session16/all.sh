#!/usr/bin/env bash
# Session 16's one device call: NVSHMEM's C++ build in the background, the GPU tests of
# issue 37 §3 (stage-t/t.sh), then the like-for-like figures (stage-l4l/run.sh).
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0
touch /tmp/nvb.started
(bash bench/nvshmem/build.sh /tmp/nvb > /tmp/nvb.log 2>&1 || touch /tmp/nvb.failed) &
LIMIT=${TL:-150} bash stage-t/t.sh
LIMIT=${LL:-400} bash stage-l4l/run.sh run
