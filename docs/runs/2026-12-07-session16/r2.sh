#!/usr/bin/env bash
# Session 16, second measurement call: the ping-pong rows again after the bench kernel's
# `send` closure was inlined again (MODE in the closures), beside NVSHMEM; the two GPU
# tests changed after the first call (faults::missing_gpu, the cross-PE MustTrip control).
set -u
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0
O=/tmp/r2; mkdir -p $O; T0=$(date +%s); P=$PWD/stage-l4l/gpushmem-perf; chmod +x $P
(bash bench/nvshmem/build.sh /tmp/nvb > $O/nvb.log 2>&1; echo done > $O/nvb.done) &
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $O/gpu.txt
cp stage-t/commit.txt $O/
t(){ local n=$1 lim=$2; shift 2; local s=$(date +%s); timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s)-s ))s" >> $O/times.txt; tar -C /tmp -czf "$OUT/r2.tgz" r2; }
( cd stage-t; gunzip -kf gpu.gz; chmod +x gpu gpushmem-run ) 
export GPUSHMEM_RUN=$PWD/stage-t/gpushmem-run GPUSHMEM_REQUIRE_GPU=1
t t-missing 60 ./stage-t/gpu --exact faults::missing_gpu
t t-cross 90 ./stage-t/gpu --test-threads 1 litmus::mp_cross_pe
t t-verdict 30 ./stage-t/gpu verdict::
for r in 1 2; do t pingpong-$r 60 $P pingpong --one-pe --csv $O/pingpong-$r.csv; done
t place 120 $P pingpong-placement --modes 17,0,18,10,13,17,0,18,10,13 --csv $O/place.csv
while [ ! -f $O/nvb.done ] && [ $(( $(date +%s) - T0 )) -lt 300 ]; do sleep 2; done
C=/tmp/nvb/run-nvshmem-perf
for r in 1 2; do t cpp-pingpong-$r 60 $C pingpong --csv $O/cpp-pingpong-$r.csv; done
t cpp-place 60 $C pingpong-placement --csv $O/cpp-place.csv
for r in 1 2; do python3 bench/compare.py $O/pingpong-$r.csv $O/cpp-pingpong-$r.csv --markdown > $O/compare-pingpong-$r.md 2>&1; done
tar -C /tmp -czf "$OUT/r2.tgz" r2
cat $O/gpu.txt $O/times.txt; grep -h "test result\|FAILED\|panicked" $O/t-*.log; grep -h "cross-PE\|different PEs" $O/t-cross.log | cut -c1-250
grep -h "pingpong" $O/compare-pingpong-*.md | cut -c1-160; grep -h "placement_.*median" $O/place.csv $O/cpp-place.csv
