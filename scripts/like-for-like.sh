#!/usr/bin/env bash
# Issue 37 §4, "figures that are like for like": one device call that measures,
# beside NVSHMEM's C++ program (bench/nvshmem/perf.cu) in the same call,
#   - the put_signal ping-pong doing NVSHMEM's per-hop work (mode 17) and our
#     variants (mode 0: source written once; mode 18: the one-u64 path);
#   - signal_op_relaxed (translated per call, like NVSHMEM's signal_op; mode 10)
#     and PeerSignal (translated once: our extra; mode 13);
#   - the 1 GiB malloc timed the same way on both sides: the first (cold) call
#     and the median of the warm calls after it;
#   - the collectives with the bound from the best cuMemcpy of 64 MiB / 256 MiB /
#     1 GiB in the same run (row bound_memcpy_dtod_best names the size).
#
# Here (CPU machine):   bash scripts/like-for-like.sh stage
#   builds gpushmem-perf (release, stripped) into stage-l4l/ (git-ignored) with
#   this script as stage-l4l/run.sh.
# On the GPU machine:   device run carry=["stage-l4l"] command="bash stage-l4l/run.sh run"
#   writes everything under ${1:-$OUT/l4l} (CSV, logs, compare.py tables) and
#   tars it to $OUT/l4l.tgz after each step. LIMIT (seconds, default 450) stops
#   starting steps when the call is nearly spent; every step has its own timeout.
#   NVSHMEM's program is built there from bench/nvshmem/ (build.sh, its nvcc and
#   NVSHMEM package), in the background while ours runs.
set -u
here=$(cd "$(dirname "$0")" && pwd)

if [ "${1:-}" = stage ]; then
    cd "$here/.."
    cargo build --release --bin gpushmem-perf || exit 1
    rm -rf stage-l4l && mkdir stage-l4l
    cp target/release/gpushmem-perf stage-l4l/ && strip stage-l4l/gpushmem-perf
    cp scripts/like-for-like.sh stage-l4l/run.sh
    { git rev-parse HEAD; git status --short --untracked-files=no; } > stage-l4l/commit.txt
    du -sh stage-l4l
    exit 0
fi
if [ "${1:-}" != run ]; then
    echo "usage: bash scripts/like-for-like.sh stage   (here) | bash stage-l4l/run.sh run [OUTDIR]   (GPU machine)" >&2
    exit 2
fi

export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0
repo=$(cd "$here/.." && pwd)
P=$here/gpushmem-perf
O=${2:-${OUT:?OUT or an OUTDIR}/l4l}
mkdir -p "$O"
chmod +x "$P"
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$O/gpu.txt" 2>&1
cp "$here/commit.txt" "$O/commit.txt" 2>/dev/null || true

# step NAME SECONDS CMD...: runs CMD into NAME.log with a timeout of SECONDS, cut to what
# is left of LIMIT, if at least 15 s are left.
step() {
    local name=$1 lim=$2 s left
    shift 2
    s=$(date +%s)
    left=$((${LIMIT:-450} - (s - T0) - 5))
    if [ "$left" -lt 15 ]; then
        echo "$name skipped (no time left)" >> "$O/times.txt"
        return
    fi
    [ "$lim" -gt "$left" ] && lim=$left
    timeout "$lim" "$@" > "$O/$name.log" 2>&1
    echo "$name rc=$? $(($(date +%s) - s))s" >> "$O/times.txt"
    [ -n "${OUT:-}" ] && tar -C "$(dirname "$O")" -czf "$OUT/l4l.tgz" "$(basename "$O")"
}

# (A caller that started the build earlier, into /tmp/nvb, leaves its log there: it is reused.)
if [ -x /tmp/nvb/run-nvshmem-perf ] || [ -f /tmp/nvb.started ]; then
    (while [ ! -x /tmp/nvb/run-nvshmem-perf ] && [ ! -f /tmp/nvb.failed ]; do sleep 2; done
     cp /tmp/nvb.log "$O/nvb.log" 2>/dev/null; echo "rc=reused" > "$O/nvb.done") &
else
    (bash "$repo/bench/nvshmem/build.sh" /tmp/nvb > "$O/nvb.log" 2>&1; echo "rc=$?" > "$O/nvb.done") &
fi

# Ours, in NVSHMEM's shape (two blocks of one PE), twice: the spread between runs.
for r in 1 2; do step pingpong-$r 60 "$P" pingpong --one-pe --csv "$O/pingpong-$r.csv"; done
# The same modes over 16 placements of the words, each twice (17 0 18 10 13, then again).
step place 120 "$P" pingpong-placement --modes 17,0,18,10,13,17,0,18,10,13 --csv "$O/place.csv"
# Collectives with the bound from the best large copy of the run (64 MiB per PE as in RESULTS).
for n in 8 4 2; do step coll-$n 120 "$P" collective --npes $n --coll-max-size 64m --csv "$O/coll-$n.csv"; done

# NVSHMEM's side, once its build is done. The wall-clock rows (init, malloc) of both sides
# run only then, so that nvcc does not share the CPU with them.
while [ ! -f "$O/nvb.done" ] && [ $(($(date +%s) - T0)) -lt $((${LIMIT:-450} - 60)) ]; do sleep 2; done
# malloc timed both ways: one PE (NVSHMEM's shape) and 8 PEs.
step init-1pe 60 "$P" init --one-pe --csv "$O/init-1pe.csv"
step init-8pe 90 "$P" init --npes 8 --csv "$O/init-8pe.csv"
C=/tmp/nvb/run-nvshmem-perf
if [ -x "$C" ]; then
    for r in 1 2; do step cpp-pingpong-$r 60 "$C" pingpong --csv "$O/cpp-pingpong-$r.csv"; done
    step cpp-place 60 "$C" pingpong-placement --csv "$O/cpp-place.csv"
    step cpp-init 60 "$C" init --csv "$O/cpp-init.csv"
else
    echo "NVSHMEM's program did not build: see nvb.log" >> "$O/times.txt"
fi

# Side by side (bench/compare.py; ratio = ours / NVSHMEM).
side() { [ -f "$O/$1" ] && [ -f "$O/$2" ] && python3 "$repo/bench/compare.py" "$O/$1" "$O/$2" --markdown > "$O/$3" 2>&1; }
side pingpong-1.csv cpp-pingpong-1.csv compare-pingpong-1.md
side pingpong-2.csv cpp-pingpong-2.csv compare-pingpong-2.md
side init-1pe.csv cpp-init.csv compare-init-1pe.md
side init-8pe.csv cpp-init.csv compare-init-8pe.md
echo "total $(($(date +%s) - T0))s" >> "$O/times.txt"
[ -n "${OUT:-}" ] && tar -C "$(dirname "$O")" -czf "$OUT/l4l.tgz" "$(basename "$O")"

# Last, the short table the device tool's reply carries.
cat "$O/gpu.txt" "$O/times.txt"
for f in "$O"/compare-pingpong-1.md "$O"/compare-init-1pe.md; do [ -f "$f" ] && grep -E "pingpong|malloc|init" "$f"; done
cd "$O" || exit 0
grep "placement_.*_median" place.csv cpp-place.csv 2>/dev/null
grep "^bound_memcpy\|^memcpy_dtod\|^allreduce_sum_f32,67108864\|^allreduce_sum_bf16,67108864\|^fcollect,8388608\|^alltoall,8388608" coll-*.csv 2>/dev/null
