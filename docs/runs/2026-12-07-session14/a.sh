#!/usr/bin/env bash
# Session 14 call A: session 13's a.sh with NVSHMEM's C++ build in the background.
#   cp target/release/gpushmem-perf docs/runs/2026-12-07-session14/a.sh stage-perf/
#   device run carry=["stage-perf"] command="bash stage-perf/a.sh"
set -u
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"; P=$PWD/gpushmem-perf; O=/tmp/a; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $O/gpu.txt
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu=$NCU" > $O/times.txt
t(){ local n=$1; shift; local s=$(date +%s); timeout ${T:-120} "$@" > $O/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s)-s ))s" >> $O/times.txt; }
(bash ../bench/nvshmem/build.sh /tmp/nvb > $O/nvb.log 2>&1; echo done > $O/nvb.done) &
t place $P pingpong-placement --modes 13,11,10,15,13,11,10,15 --csv $O/place-native.csv
t putbw $P put-bw --scope block,block_gs --min-size 1m --max-size 1g --csv $O/putbw.csv
while [ ! -f $O/nvb.done ]; do sleep 1; done
t place-cpp /tmp/nvb/run-nvshmem-perf pingpong-placement --csv $O/place-cpp.csv
t cpp-putbw /tmp/nvb/run-nvshmem-perf put-bw --min-size 8m --max-size 256m --csv $O/cpp-putbw.csv
tar -C /tmp -czf "$OUT/a.tgz" a
for k in bw_put_block bw_put_block_gs; do
  t ncu-$k-64m $NCU -k $k --launch-skip 3 --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section Occupancy --section LaunchStats --section SchedulerStats --section WarpStateStats --csv --page details $P put-bw --scope ${k#bw_put_} --min-size 64m --max-size 64m --reps 2 --warmup 3
done
tar -C /tmp -czf "$OUT/a.tgz" a
for n in 2 8; do t coll-$n $P collective --npes $n --coll-max-size 4k --graph --csv $O/coll-$n-graph.csv; done
cat $O/times.txt $O/gpu.txt
grep -h "put_bw\|placement_.*median" $O/putbw.log $O/place-native.csv $O/place-cpp.csv
tar -C /tmp -czf "$OUT/a.tgz" a
