#!/usr/bin/env bash
# Session 14 device call: the GPU tests the collective-argument check touches, then the
# measurements of session 13's a.sh (ping-pong beside NVSHMEM, put-bw block vs block_gs,
# ncu at 64 MiB, collective floors). Staged (here) as stage-perf/:
#   gpushmem-perf, gpushmem-run, gpu.gz (the release `gpu` test binary, stripped), c.sh
#   device run carry=["stage-perf"] command="bash stage-perf/c.sh"
# Every step has its own timeout; steps start only while the call has time left
# (LIMIT seconds, default 480; pass less when the session's device budget is short); results are tarred to $OUT/c.tgz after each step.
set -u
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"; P=$PWD/gpushmem-perf; O=/tmp/c; mkdir -p $O; T0=$(date +%s)
[ -f gpu ] || gunzip -k gpu.gz; chmod +x gpu gpushmem-run gpushmem-perf
export GPUSHMEM_RUN=$PWD/gpushmem-run GPUSHMEM_REQUIRE_GPU=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $O/gpu.txt
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu=$NCU" > $O/times.txt
t(){ local n=$1 lim=$2; shift 2; local s=$(date +%s)
  if [ $(( s - T0 + 10 )) -ge ${LIMIT:-480} ]; then echo "$n skipped (no time left)" >> $O/times.txt; return; fi
  timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s)-s ))s" >> $O/times.txt
  tar -C /tmp -czf "$OUT/c.tgz" c; }
(bash ../bench/nvshmem/build.sh /tmp/nvb > $O/nvb.log 2>&1; echo done > $O/nvb.done) &
t t-sizes 90 ./gpu --exact errors::collective_sizes_differ_traps
t place 90 $P pingpong-placement --modes 13,11,10,15,13,11,10,15 --csv $O/place-native.csv
t putbw 90 $P put-bw --scope block,block_gs --min-size 1m --max-size 1g --csv $O/putbw.csv
while [ ! -x /tmp/nvb/run-nvshmem-perf ] && [ $(( $(date +%s) - T0 )) -lt $(( ${LIMIT:-480} - 40 )) ]; do sleep 1; done
t place-cpp 60 /tmp/nvb/run-nvshmem-perf pingpong-placement --csv $O/place-cpp.csv
t cpp-putbw 60 /tmp/nvb/run-nvshmem-perf put-bw --min-size 8m --max-size 256m --csv $O/cpp-putbw.csv
t t-dbg 150 ./gpu --exact collective::quick_debug_checks_8pe
t t-grid 120 ./gpu --test-threads 1 collective::grid_forms
t t-stream 150 ./gpu --test-threads 1 stream::
for k in bw_put_block bw_put_block_gs; do
  t ncu-$k-64m 60 $NCU -k $k --launch-skip 3 --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section Occupancy --section LaunchStats --section SchedulerStats --section WarpStateStats --csv --page details $P put-bw --scope ${k#bw_put_} --min-size 64m --max-size 64m --reps 2 --warmup 3
done
for n in 2 8; do t coll-$n 60 $P collective --npes $n --coll-max-size 4k --graph --csv $O/coll-$n-graph.csv; done
t t-quick 120 ./gpu --test-threads 1 collective::quick_
t t-errors 150 ./gpu --test-threads 1 errors::
t t-team 120 ./gpu --test-threads 1 team::
t t-typed 120 ./gpu --test-threads 1 typed::
cat $O/times.txt $O/gpu.txt
grep -h "test result\|FAILED" $O/t-*.log
grep -h "placement_.*median" $O/place-native.csv $O/place-cpp.csv
tar -C /tmp -czf "$OUT/c.tgz" c
