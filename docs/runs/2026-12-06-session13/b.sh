#!/usr/bin/env bash
# Session 13 call B (short): ping-pong modes beside NVSHMEM, put-bw block vs block_gs.
set -u
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"; P=$PWD/gpushmem-perf; O=/tmp/b; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $O/gpu.txt
t(){ local n=$1; shift; local s=$(date +%s); timeout ${T:-90} "$@" > $O/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s)-s ))s" >> $O/times.txt; }
(bash ../bench/nvshmem/build.sh /tmp/nvb > $O/nvb.log 2>&1; echo done > $O/nvb.done) &
t place $P pingpong-placement --modes 13,11,10,15,13,11 --csv $O/place-native.csv
t putbw $P put-bw --scope block,block_gs --min-size 8m --max-size 256m --csv $O/putbw.csv
while [ ! -f $O/nvb.done ]; do sleep 1; done
t place-cpp /tmp/nvb/run-nvshmem-perf pingpong-placement --csv $O/place-cpp.csv
cat $O/times.txt $O/gpu.txt
grep -h "put_bw\|placement_.*median" $O/putbw.log $O/place-native.csv $O/place-cpp.csv
tar -C /tmp -czf "$OUT/b.tgz" b
