#!/usr/bin/env bash
# Runs GPU tests under compute-sanitizer (memcheck, racecheck, synccheck) on
# the GPU machine, from the staged folder (scripts/device.sh copies this as
# stage/sanitize.sh):
#
#   bash stage/sanitize.sh [TOOLS] [FILTER...]
#
# TOOLS: comma-separated (default memcheck,racecheck,synccheck). FILTER: test
# name filters for ./gpu (default: the threads-mode tests that run no child
# process and do not trap on purpose). Prints one summary line per tool;
# exits non-zero if any tool reports an error or a test fails.
set -uo pipefail
cd "$(dirname "$0")"
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 GPUSHMEM_RUN="$PWD/gpushmem-run"
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
if [ ${#filters[@]} -eq 0 ]; then
  # The harness takes one name filter per run: a few runs, each covering a family.
  filters=(smoke:: rma::ring_threads_2pe rma::strided_ring_2pe signal::pipeline_2pe atomic::ops_results
    wait::table_2pe stream::ordered_ops_2pe stream::collectives_2pe team::layout_8pe collective::quick_2pe)
fi
rc=0
for tool in ${tools//,/ }; do
  for f in "${filters[@]}"; do
    log="${OUT:-.}/sanitize-$tool-${f//:/_}.log"
    "$san" --tool "$tool" --error-exitcode 99 --print-limit 50 \
      ./gpu --test-threads 1 --skip processes "$f" >"$log" 2>&1
    r=$?
    summary=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY|test result" "$log" | tr '\n' ' ')
    echo "sanitize $tool $f: exit $r: $summary"
    if [ $r -ne 0 ]; then rc=1; grep -E "^=========" "$log" | head -20; fi
  done
done
exit $rc
