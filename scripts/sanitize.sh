#!/usr/bin/env bash
# Runs GPU tests under compute-sanitizer (memcheck, racecheck, synccheck) on
# the GPU machine, from the staged folder (scripts/device.sh copies this as
# stage/bin/sanitize.sh, unpacked by `bash stage/run.sh true`):
#
#   bash stage/bin/sanitize.sh [TOOLS] [FILTER...]
#
# TOOLS: comma-separated (default memcheck,racecheck,synccheck).
#
# Without FILTER (the whole-suite run): one sanitizer run per tool and test,
# SANITIZE_JOBS (default 8) at a time, the tests with the most PEs first, all
# in quick mode (GPUSHMEM_TEST_QUICK=1: counts / 100, sizes up to 128 KiB;
# see tests/gpu/main.rs). The tests:
#
#   - every multi-PE test with ONE PROCESS PER PE through gpushmem-run
#     (GPUSHMEM_TEST_ALL_AS_PROCESSES=1: an `::as_<N>_processes` variant of
#     every `…_<N>pe` test, plus the process variants the normal suite has),
#     whatever N: stream::collectives_large_3pe and collective::grid_forms_5pe
#     run as 3 and 5 processes, never as threads (before 2026-12-07 the
#     threads list skipped only _2pe/_4pe/_8pe, so these two ran as threads too);
#     compute-sanitizer follows the child processes (its default; a child PE
#     that traps shows up in the parent's summary:
#     docs/runs/2026-12-04-sanitizer/childcheck-*.log);
#   - the tests that are not one multi-PE job (smoke, atomics, fence,
#     missing-barrier detection, the 1-PE wait table) and
#     collective::quick_debug_checks_8pe (8 PE threads in a child process).
#
# Why processes: with PEs as threads all PEs share one CUDA context, and under
# the sanitizer a PE's CUDA call now and then waits for the context's running
# kernels, which spin waiting for that very PE: the threads-mode quick suite
# stalled under memcheck (team::alternating_10k_8pe) and synccheck
# (stream::collectives_4pe) on 2026-12-03, at different places, with no error
# reported; no normal run stalls there. One process per PE gives each PE its own
# context and sanitizer instance. The kernels and the tests' checks are the same.
# Why several runs at a time: the sanitizer's work is on the CPU (16 cores)
# and the GPU time-slices the processes' contexts; 8 at a time ran the 150
# runs of all three tools in about 7 minutes of device time (2026-12-04).
# The list has grown since: on 2026-12-06 it held 192 runs and a 540 s budget
# covered the 63 with the most PEs (H200); a later call resumes through
# SANITIZE_DONE (below) with the first call's `ok` lines as "TOOL TEST".
#
# Each run ends after SANITIZE_UNIT_LIMIT s (default 300; its whole process
# group is killed). With SANITIZE_BUDGET (seconds since the script started)
# no run starts when less than 30 s are left and runs are cut at the budget.
# A line "TOOL TEST" in the file $SANITIZE_DONE skips that run, so a later
# device call can take up where one ended. One summary line per run, also in
# $OUT/each-summary.txt: `ok TOOL TEST …`, `FAIL …`, `LIMIT …` (over its own
# limit) or `CUT …` (cut by the budget).
#
# Skipped: errors::, faults::, lifecycle:: (below).
#   errors::     traps on purpose in child processes (device_*_traps, device_wait_times_out,
#                signal_wait_times_out, team_*_traps, reduce_*_traps), spawns a PE that
#                never starts (bootstrap_missing_pe) or kills one (killed_pe_is_reported);
#                host_bad_inputs makes failing CUDA calls on purpose (a missing kernel, a
#                module without state), which the sanitizer counts as API errors.
#   faults::     kills PE processes with SIGKILL, asks for a heap larger than the GPU or a
#                GPU that does not exist (failing CUDA calls on purpose).
#   lifecycle::  measures the device's free memory, which the sanitizer's own
#                allocations move.
# racecheck checks shared memory only, which no gpushmem kernel uses but the
# bulk-copy probes of the test suite (bulk::, issue 40; tests/ptx checks that);
# it runs anyway, so the claim is checked too.
#
# With FILTER(s): one run per tool and filter (the harness takes one name
# filter per run), PEs as threads, at full size unless GPUSHMEM_TEST_QUICK=1
# is set by the caller; process-mode variants are skipped. With `--processes`
# as the first FILTER the filters select among the process variants instead.
#
# Logs: $OUT (or .)/sanitize-<tool>-<test or filter>.log. Exits non-zero if
# any tool reports an error, a test fails or a run does not finish.
set -uo pipefail
cd "$(dirname "$0")"
export GPUSHMEM_REQUIRE_GPU=1 NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 GPUSHMEM_RUN="$PWD/gpushmem-run"
# Device waits of the tests: 600 s instead of 20 (GPUSHMEM_TEST_TIMEOUT, see
# tests/gpu/common.rs `config`): under the sanitizer a PE can start well after
# the others; a real hang still ends, just later.
export GPUSHMEM_TEST_TIMEOUT=${GPUSHMEM_TEST_TIMEOUT:-600}
find_sanitizer() {
  command -v compute-sanitizer && return
  for d in /usr/local/cuda*/bin /usr/local/cuda*/compute-sanitizer /opt/nvidia/*/bin; do
    [ -x "$d/compute-sanitizer" ] && { echo "$d/compute-sanitizer"; return; }
  done
  local site
  for site in $(python3 -c 'import site,sys; print(" ".join(site.getsitepackages()+[site.getusersitepackages()]))' 2>/dev/null); do
    local f
    f=$(find "$site/nvidia" -name compute-sanitizer -type f -perm -u+x 2>/dev/null | head -1)
    [ -n "$f" ] && { echo "$f"; return; }
  done
  return 1
}
san=$(find_sanitizer) || { echo "sanitize: compute-sanitizer not found (PATH, /usr/local/cuda*, python nvidia packages)"; exit 3; }
echo "sanitize: using $san ($("$san" --version 2>/dev/null | tail -1))"
tools=${1:-memcheck,racecheck,synccheck}
[ $# -gt 0 ] && shift
processes=0
if [ "${1:-}" = --processes ]; then
  processes=1
  shift
fi
filters=("$@")
own_skips=(--skip errors:: --skip faults:: --skip lifecycle::)
rc=0
# summary_of LOG: the sanitizer's and the harness's summary lines of one run, on one line.
summary_of() {
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|test result" "$1" | tr '\n' ' '
}
# run TOOL NAME ARGS...: one sanitizer run of ./gpu with ARGS; NAME labels its log and summary line.
run() {
  local tool=$1 name=$2
  shift 2
  local log="${OUT:-.}/sanitize-$tool-${name//:/_}.log" t0=$SECONDS
  "$san" --tool "$tool" --error-exitcode 99 --print-limit 50 \
    ./gpu --test-threads 1 "$@" >"$log" 2>&1
  local r=$?
  echo "sanitize $tool $name: exit $r in $((SECONDS - t0)) s: $(summary_of "$log")"
  if [ $r -ne 0 ]; then
    rc=1
    grep -E "^=========" "$log" | head -20
    grep -A30 -E "^failures:$" "$log" | head -30
  fi
}
# unit TOOL MODE TEST: one sanitizer run of one test (MODE threads|processes),
# in its own process group, killed after SANITIZE_UNIT_LIMIT s.
unit() {
  local tool=$1 mode=$2 t=$3
  local log="${OUT:-.}/sanitize-$tool-${t//:/_}.log" t0=$SECONDS as=
  [ "$mode" = processes ] && as=1
  GPUSHMEM_TEST_QUICK=1 GPUSHMEM_TEST_ALL_AS_PROCESSES=$as setsid "$san" --tool "$tool" --error-exitcode 99 \
    --print-limit 50 ./gpu --test-threads 1 --exact "$t" >"$log" 2>&1 &
  local p=$! limit=${SANITIZE_UNIT_LIMIT:-300} cut=LIMIT
  if [ -n "${SANITIZE_BUDGET:-}" ] && [ $((SANITIZE_BUDGET - SECONDS)) -lt "$limit" ]; then
    limit=$((SANITIZE_BUDGET - SECONDS)) cut=CUT
  fi
  (sleep "$limit"; kill -TERM -- -$p; sleep 5; kill -KILL -- -$p) >/dev/null 2>&1 &
  local watch=$!
  wait $p
  local r=$?
  kill $watch 2>/dev/null
  local verdict=FAIL
  if grep -q "^test result: ok. 1 passed" "$log" && [ $r -eq 0 ]; then
    verdict=ok
  elif [ $r -ge 128 ]; then
    verdict=$cut
  fi
  echo "$verdict $tool $t: exit $r in $((SECONDS - t0)) s: $(summary_of "$log")" | tee -a "${OUT:-.}/each-summary.txt"
}
# each_test N: every (tool, test) as a unit, N at a time, most PEs first.
each_test() {
  local n=$1 units=() t
  # PEs as threads: the single-PE tests only. A multi-PE test (`…_<N>pe`,
  # any N ≥ 2: 3 and 5 too) runs as processes below; the verdict:: tests
  # need no GPU (CPU CI runs them).
  while read -r t; do units+=("0 threads $t"); done < <(GPUSHMEM_TEST_QUICK=1 ./gpu --list --skip processes \
    --skip verdict:: "${own_skips[@]}" | sed -n 's/^\[[^]]*\] //; s/: test$//p' | grep -Ev '_([2-9]|[1-9][0-9]+)pe$'
    echo collective::quick_debug_checks_8pe)
  while read -r t; do
    units+=("$(echo "$t" | sed -n 's/.*::as_\([0-9]*\)_processes$/\1/p') processes $t")
  done < <(GPUSHMEM_TEST_QUICK=1 GPUSHMEM_TEST_ALL_AS_PROCESSES=1 ./gpu --list | sed -n 's/^\[[^]]*\] //; s/: test$//p')
  mapfile -t units < <(printf '%s\n' "${units[@]}" | sort -s -k1,1nr)
  echo "sanitize: ${#units[@]} tests × tools ${tools}, $n at a time"
  local tool u pes mode s="${OUT:-.}/each-summary.txt" wanted=0 started=0
  : >"$s" # this invocation's runs only (a warm machine keeps $OUT between calls)
  for u in "${units[@]}"; do
    read -r pes mode t <<<"$u"
    for tool in ${tools//,/ }; do
      [ -n "${SANITIZE_DONE:-}" ] && grep -qxF "$tool $t" "$SANITIZE_DONE" 2>/dev/null && continue
      wanted=$((wanted + 1))
      while [ "$(jobs -rp | wc -l)" -ge "$n" ]; do wait -n; done
      [ -n "${SANITIZE_BUDGET:-}" ] && [ $((SANITIZE_BUDGET - SECONDS)) -lt 30 ] && continue
      started=$((started + 1))
      unit "$tool" "$mode" "$t" &
    done
  done
  wait
  echo "sanitize: $(grep -c '^ok ' "$s") ok, $(grep -c '^FAIL ' "$s") failed, $(grep -c '^LIMIT ' "$s")" \
    "over the limit, $(grep -c '^CUT ' "$s") cut by the budget, $((wanted - started)) not started (budget)"
  if grep -q -E '^(FAIL|LIMIT|CUT) ' "$s" || [ $started -lt $wanted ]; then
    rc=1
  fi
}
if [ ${#filters[@]} -eq 0 ]; then
  each_test "${SANITIZE_JOBS:-8}"
  exit $rc
fi
for tool in ${tools//,/ }; do
  if [ $processes -eq 1 ]; then
    for f in "${filters[@]}"; do
      GPUSHMEM_TEST_ALL_AS_PROCESSES=1 run "$tool" "processes-$f" "$f"
    done
  else
    for f in "${filters[@]}"; do
      run "$tool" "$f" --skip processes "$f"
    done
  fi
done
exit $rc
