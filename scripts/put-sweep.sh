#!/usr/bin/env bash
# The block put's grid × block sweep (issue 17's "is the tool's grid what
# limits put-bw?"), on the GPU machine from the staged folder
# (scripts/device.sh copies this as stage/bin/put-sweep.sh):
#
#   bash stage/run.sh true >/dev/null; cd stage/bin
#   OUT=$OUT bash put-sweep.sh [SIZES] [GRIDS] [BLOCKS]
#
# SIZES, GRIDS, BLOCKS: comma-separated (defaults below; sizes take k/m/g).
# A grid of 0 is the tool's default grid for the size. One `gpushmem-perf
# put-bw` run per (size, grid, block), PE 0 → PE 1 as threads, 20 launches
# per timed span, medians of 10; the CSV rows of every run go to
# $OUT/put-sweep.csv as `size,grid,block,put_GBps,memcpy_GBps,ratio`, and a
# table sorted by size then ratio is printed at the end.
set -uo pipefail
cd "$(dirname "$0")"
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0
sizes=${1:-2m,4m,8m,32m,64m,256m,512m}
grids=${2:-0,132,264,528,1056,2112}
blocks=${3:-512,1024}
out=${OUT:-.}/put-sweep.csv
tmp=$(mktemp -d)
echo "size,grid,block,put_GBps,memcpy_GBps,ratio" >"$out"
for s in ${sizes//,/ }; do
  for g in ${grids//,/ }; do
    for b in ${blocks//,/ }; do
      gridarg=()
      [ "$g" != 0 ] && gridarg=(--grid "$g")
      if ! ./gpushmem-perf put-bw --min-size "$s" --max-size "$s" "${gridarg[@]}" --block "$b" \
        --csv "$tmp/r.csv" >"$tmp/log" 2>&1; then
        echo "put-sweep: $s grid $g block $b failed: $(tail -1 "$tmp/log")" >&2
        continue
      fi
      awk -F, -v g="$g" -v b="$b" '$1 == "put_bw_block" { printf "%s,%s,%s,%.1f,%.1f,%.3f\n", $2, g, b, $3, $4, $3 / $4 }' \
        "$tmp/r.csv" >>"$out"
    done
  done
done
rm -rf "$tmp"
column -s, -t <(head -1 "$out"; tail -n +2 "$out" | sort -t, -k1,1n -k6,6nr)
