#!/usr/bin/env bash
# Session 16: issue 37 §3's GPU tests (stream guards, cross-PE MP, slots fix), then the whole suite.
set -u
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"; [ -f gpu ] || gunzip -k gpu.gz; chmod +x gpu gpushmem-run
export GPUSHMEM_RUN=$PWD/gpushmem-run GPUSHMEM_REQUIRE_GPU=1
O=/tmp/t; mkdir -p $O; T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $O/gpu.txt
t(){ local n=$1 lim=$2; shift 2; local s=$(date +%s) left=$(( ${LIMIT:-570} - ($(date +%s) - T0) - 5 ))
  if [ $left -lt 20 ]; then echo "$n skipped" >> $O/times.txt; return; fi
  [ $lim -gt $left ] && lim=$left
  timeout $lim "$@" > $O/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s)-s ))s" >> $O/times.txt
  tar -C /tmp -czf "$OUT/t.tgz" t; }
t stream 150 ./gpu --test-threads 1 stream::
t litmus 150 ./gpu --test-threads 1 litmus::
t slots 60 ./gpu --test-threads 1 team::slots
t grid 120 ./gpu --test-threads 1 collective::grid_forms
for n in stream::collectives_2pe::as_2_processes stream::collectives_4pe::as_4_processes collective::grid_forms_5pe::as_5_processes collective::grid_forms_8pe::as_8_processes litmus::mp_cross_pe_quiet_4pe::as_4_processes; do
  t "p-${n//:/_}" 90 env GPUSHMEM_TEST_ALL_AS_PROCESSES=1 ./gpu --exact "$n"
done
[ -n "${ALL:-}" ] && t all 560 ./gpu --test-threads 1 --skip stream:: --skip litmus:: --skip collective::grid_forms --skip team::slots
cat $O/gpu.txt $O/times.txt
grep -h "test result\|FAILED\|failed\|panicked" $O/*.log | head -40
grep -h "control\|violations" $O/litmus.log | head -30
