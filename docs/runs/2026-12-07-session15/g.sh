#!/usr/bin/env bash
# Session 15 fourth call: compute-sanitizer (memcheck, synccheck) over the collective-argument
# check (debug checks on), quick mode, in parallel: the 8-PE debug-checks test and the 4-PE
# collective and stream-collective suites as processes with GPUSHMEM_DEBUG_CHECKS=1.
set -u
cd "$(dirname "$0")"; O=/tmp/g; mkdir -p $O
export GPUSHMEM_REQUIRE_GPU=1 NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 GPUSHMEM_RUN="$PWD/gpushmem-run" GPUSHMEM_TEST_TIMEOUT=600 GPUSHMEM_TEST_QUICK=1
[ -f gpu ] || gunzip -k gpu.gz; chmod +x gpu gpushmem-run
san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer | head -1)
"$san" --version | tail -1 > $O/version.txt
u(){ local tool=$1 t=$2 env=$3; local log=$O/$tool-${t//:/_}.log s=$SECONDS
  env $env timeout -k 5 ${LIM:-200} "$san" --tool $tool --error-exitcode 99 --print-limit 50 ./gpu --test-threads 1 --exact "$t" > $log 2>&1
  echo "$tool $t [$env] rc=$? $((SECONDS-s))s: $(grep -E 'ERROR SUMMARY|test result' $log | tr '\n' ' ')" >> $O/summary.txt; }
for tool in memcheck synccheck; do
  u $tool collective::quick_debug_checks_8pe X=1 &
  u $tool collective::quick_4pe::as_4_processes "GPUSHMEM_TEST_ALL_AS_PROCESSES=1 GPUSHMEM_DEBUG_CHECKS=1" &
  u $tool stream::collectives_4pe::as_4_processes "GPUSHMEM_TEST_ALL_AS_PROCESSES=1 GPUSHMEM_DEBUG_CHECKS=1" &
done
wait
tar -C /tmp -czf "$OUT/g.tgz" g
cat $O/version.txt $O/summary.txt
