#!/usr/bin/env bash
# Runs GPU tests under compute-sanitizer (memcheck, racecheck, synccheck) on
# the GPU machine, from the staged folder (scripts/device.sh copies this as
# stage/bin/sanitize.sh, unpacked by `bash stage/run.sh true`):
#
#   bash stage/bin/sanitize.sh [TOOLS] [FILTER...]
#
# TOOLS: comma-separated (default memcheck,racecheck,synccheck).
#
# Without FILTER: per tool, ONE run of the whole threads-mode suite in quick
# mode (GPUSHMEM_TEST_QUICK=1: counts / 100, sizes up to 128 KiB; see
# tests/gpu/main.rs), i.e.
#
#   GPUSHMEM_TEST_QUICK=1 compute-sanitizer --tool T --error-exitcode 99 --print-limit 50 \
#     ./gpu --test-threads 1 --skip processes --skip errors:: --skip faults:: --skip lifecycle::
#
# skipping what is no fit for a sanitizer run:
#   processes    PEs as processes through gpushmem-run (rma::ring_alltoall_processes_*,
#                every *::as_N_processes variant): several processes time-slicing one
#                GPU, each under the sanitizer, is slow and adds no kernel coverage.
#   errors::     traps on purpose in child processes (device_*_traps, device_wait_times_out,
#                signal_wait_times_out, team_*_traps, reduce_*_traps), spawns a PE that
#                never starts (bootstrap_missing_pe) or kills one (killed_pe_is_reported);
#                host_bad_inputs makes failing CUDA calls on purpose (a missing kernel, a
#                module without state), which the sanitizer counts as API errors.
#   faults::     kills PE processes with SIGKILL, asks for a heap larger than the GPU or a
#                GPU that does not exist (failing CUDA calls on purpose).
#   lifecycle::  measures the device's free memory, which the sanitizer's own
#                allocations move.
# collective::quick_debug_checks_8pe does run: its child process (the quick
# collective matrix with debug checks on, no trap expected) is checked too
# (compute-sanitizer follows child processes by default), its reports land in
# the same log.
# One tool over the quick suite takes more than 5 minutes (memcheck had not
# finished after 300 s on the H200, 2026-12-03): give each tool its own device
# call (TOOLS=memcheck, then racecheck, then synccheck).
#
# With FILTER(s): one run per tool and filter (the harness takes one name
# filter per run), at full size unless GPUSHMEM_TEST_QUICK=1 is set by the
# caller; process-mode variants are skipped.
#
# Logs: $OUT (or .)/sanitize-<tool>-<filter or "quick-suite">.log. Prints one
# summary line per tool and run; exits non-zero if any tool reports an error
# or a test fails.
set -uo pipefail
cd "$(dirname "$0")"
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 GPUSHMEM_RUN="$PWD/gpushmem-run"
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
filters=("$@")
# Default: the whole threads-mode suite, quick, minus the tests listed above.
suite_skips=(--skip processes --skip errors:: --skip faults:: --skip lifecycle::)
rc=0
# run TOOL NAME ARGS...: one sanitizer run of ./gpu with ARGS; NAME labels its log and summary line.
run() {
  local tool=$1 name=$2
  shift 2
  local log="${OUT:-.}/sanitize-$tool-${name//:/_}.log"
  "$san" --tool "$tool" --error-exitcode 99 --print-limit 50 \
    ./gpu --test-threads 1 "$@" >"$log" 2>&1
  local r=$?
  local summary
  summary=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY|test result" "$log" | tr '\n' ' ')
  echo "sanitize $tool $name: exit $r: $summary"
  if [ $r -ne 0 ]; then
    rc=1
    grep -E "^=========" "$log" | head -20
    grep -A30 -E "^failures:$" "$log" | head -30
  fi
}
for tool in ${tools//,/ }; do
  if [ ${#filters[@]} -eq 0 ]; then
    GPUSHMEM_TEST_QUICK=1 run "$tool" quick-suite "${suite_skips[@]}"
  else
    for f in "${filters[@]}"; do
      run "$tool" "$f" --skip processes "$f"
    done
  fi
done
exit $rc
