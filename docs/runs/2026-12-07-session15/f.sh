#!/usr/bin/env bash
# Session 15 third call: put-bw grid sweep at 1-8 MiB (512 threads) and NVSHMEM's put-bw 1-64 MiB (issue 17).
set -u
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"; P=$PWD/gpushmem-perf; O=/tmp/f; mkdir -p $O; T0=$(date +%s)
chmod +x gpushmem-perf
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $O/gpu.txt
(bash ../bench/nvshmem/build.sh /tmp/nvb > $O/nvb.log 2>&1; echo done > $O/nvb.done) &
left(){ [ $(( $(date +%s) - T0 + 15 )) -lt ${LIMIT:-120} ]; }
for g in 16 32 64 128 256 512; do left && timeout 30 $P put-bw --min-size 1m --max-size 8m --grid $g --csv $O/g-$g.csv > $O/g-$g.log 2>&1; done
left && timeout 30 $P put-bw --min-size 1m --max-size 64m --csv $O/default.csv > $O/default.log 2>&1
wait
left && timeout 40 /tmp/nvb/run-nvshmem-perf put-bw --min-size 1m --max-size 64m --csv $O/cpp.csv > $O/cpp.log 2>&1
echo "$(( $(date +%s) - T0 ))s" > $O/time.txt
tar -C /tmp -czf "$OUT/f.tgz" f
cat $O/time.txt
