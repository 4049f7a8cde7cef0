#!/usr/bin/env bash
# Session 15 second call: put-bw noise at 1-8 MiB, and the 32/64 MiB shape sweep (issue 17).
set -u
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"; P=$PWD/gpushmem-perf; O=/tmp/e; mkdir -p $O; T0=$(date +%s)
chmod +x gpushmem-perf
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $O/gpu.txt
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
left(){ [ $(( $(date +%s) - T0 + 15 )) -lt ${LIMIT:-200} ]; }
for r in 1 2 3; do left && timeout 30 $P put-bw --min-size 1m --max-size 8m --csv $O/small-$r.csv > $O/small-$r.log 2>&1; done
tar -C /tmp -czf "$OUT/e.tgz" e
for b in 512 256 1024; do for g in 64 128 132 264 528; do
  left || break
  timeout 30 $P put-bw --scope block,block_x8,block_cs --min-size 32m --max-size 64m --block $b --grid $g --csv $O/sw-$b-$g.csv > $O/sw-$b-$g.log 2>&1
done; tar -C /tmp -czf "$OUT/e.tgz" e; done
left && timeout 40 $NCU -k "regex:[Cc]opy|[Mm]emcpy" --launch-count 1 --section SpeedOfLight --section LaunchStats --section Occupancy --csv --page details $P put-bw --min-size 64m --max-size 64m --reps 2 --warmup 1 > $O/ncu-memcpy.log 2>&1
echo "$(( $(date +%s) - T0 ))s" > $O/time.txt
tar -C /tmp -czf "$OUT/e.tgz" e
cat $O/time.txt; grep -h "put_bw" $O/sw-*.csv | head -3; grep -c . $O/ncu-memcpy.log
