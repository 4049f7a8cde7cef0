#!/usr/bin/env bash
# The whole GPU verification in one device call, run from the staged folder
# (scripts/device.sh copies it as stage/bin/verify.sh):
#
#   bash stage/run.sh true >/dev/null; bash stage/bin/verify.sh [PARTS]
#
# PARTS (default all, comma-separated): threads (GPU test suite, PEs as
# threads), processes (the process-mode variants), examples (each example as
# threads and under gpushmem-run), info (gpushmem-info), guide (the guide's
# app, built outside the workspace), perf (latency/ping-pong/barrier/init rows,
# the ping-pong at 16 placements of its words),
# nvshmem (NVSHMEM's ping-pong, its placement sweep and barrier in the same call, when its build
# script finds the package), ncu (Nsight Compute profiles of the one-kernel
# ping-pong: library put_signal, hand-written release/acquire, library signal_op, signal_op_relaxed),
# ncu-engine (the same ping-pong on the NVSHMEM engine, modes 0, 7 and 10, beside NVSHMEM's
# own ping-pong kernels: SASS with stall samples as CSV; not in the default set),
# multinode (issue 38: 2 simulated nodes on this GPU: the bootstrap 2x2, the native engine's refusal, the
# NVSHMEM-engine examples and suite across the 2 nodes; needs root; not in the default set),
# nvshmem-engine (the ring, moe and halo examples built for the NVSHMEM engine,
# as 1 PE and as 2 processes; not in the default set),
# engine-perf (issue 16: the one-PE benchmarks side by side, each in two interleaved rounds:
# gpushmem-perf on the native engine, gpushmem-perf-nvshmem on the NVSHMEM engine, and NVSHMEM's
# own bench/nvshmem/perf.cu; put/get bandwidth 8 B-1 GiB with the memcpy baseline, put_signal and
# signal ping-pong, barrier on 1 PE, init; CSVs and bench/compare.py's three-way tables in the
# logs, round 1's brief table printed; about 1-2 minutes, at most ~300 s; not in the default set),
# collective (issue 17: gpushmem-perf collective on 2, 4, 8 PEs up to 256 MiB with the bound, 8 PEs up to
# 1 MiB with --graph, put-bw,
# the allreduce example on 8 PEs; about 3-5 minutes; not in the default set),
# sanitize (compute-sanitizer memcheck, racecheck and synccheck over the
# quick-mode suite, scripts/sanitize.sh; not in the default set: it needs
# about 7 minutes of a 10-minute call by itself), multigpu (issue 8, on a machine of 2+ GPUs:
# `nvidia-smi topo -m`, then put/get bandwidth one way and both ways, ping-pong,
# barrier and collectives with the PEs spread over the GPUs; not in the default
# set; the threads and processes parts already spread PEs over every GPU;
# NVSHMEM's side is bench/nvshmem/perf_multi.cu, 2 PEs for everything and 4
# and 8 for the barrier, as far as GPUs are present). Every part has its own
# time limit, so one hang cannot eat the call. Logs go to $OUT/verify ($OUT unset: ./verify); one summary line per part.
set -uo pipefail
cd "$(dirname "$0")"
export PATH="$PWD:$PATH" GPUSHMEM_RUN="$PWD/gpushmem-run"
# No usable GPU here is a failure of the run, never a green run of ignored tests.
export GPUSHMEM_REQUIRE_GPU=1
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0
logs=${OUT:-$PWD}/verify
mkdir -p "$logs"
parts=${1:-threads,processes,examples,info,guide,perf,nvshmem,ncu}
rc=0
# step NAME LIMIT_S CMD...: runs CMD under a time limit, logs it, prints one line.
step() {
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  timeout -k 5 "$limit" "$@" >"$logs/$name.log" 2>&1
  local r=$?
  local tail
  tail=$(grep -E "test result|passed|failed|error|Error|timed out" "$logs/$name.log" | tail -2 | tr '\n' ' ' | cut -c1-300)
  echo "verify $name: exit $r in $((SECONDS - t0)) s: $tail"
  [ $r -eq 0 ] || rc=1
}
has() { [[ ",$parts," == *",$1,"* ]]; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
# Control of the no-GPU guard: with the GPU hidden, the suite must fail (and print why).
if has threads; then
  if CUDA_VISIBLE_DEVICES= ./gpu --list >"$logs/require-gpu.log" 2>&1; then
    echo "verify require-gpu: FAILED: the GPU suite exited 0 with the GPU hidden"; rc=1
  else
    echo "verify require-gpu: ok: with the GPU hidden the suite fails: $(grep -m1 FAILED "$logs/require-gpu.log" | cut -c1-160)"
  fi
fi
has threads && step threads 330 ./gpu --test-threads 1 --skip processes
has processes && step processes 240 ./gpu --test-threads 1 processes
if has examples; then
  for e in ring allreduce moe halo; do
    step "example-$e-threads" 60 ./$e 2
    step "example-$e-processes" 90 ./gpushmem-run -n 2 -- ./$e
  done
fi
# The NVSHMEM engine (issue 16): the examples built for it, as 1 PE and as 2 processes on this GPU.
if has nvshmem-engine; then
  for e in ring moe halo; do
    if [ -x "./$e-nvshmem" ]; then
      step "nvshmem-engine-$e-1pe" 90 env GPUSHMEM_ENGINE=nvshmem "./$e-nvshmem"
      step "nvshmem-engine-$e-2processes" 120 env GPUSHMEM_ENGINE=nvshmem ./gpushmem-run -n 2 -- "./$e-nvshmem"
    else
      echo "verify nvshmem-engine-$e: not run: $e-nvshmem was not staged (scripts/device.sh)"; rc=1
    fi
  done
fi
# The GPU suite on the NVSHMEM engine (issue 16): its 1-PE tests, then every multi-PE test that
# needs no device team or collective, each as one process per PE on this GPU (2 and 4 PEs).
if has nvshmem-suite; then
  if [ -x ./gpu-nvshmem ]; then
    # (libtest-mimic takes one name filter a run)
    step nvshmem-suite-1pe-smoke 120 env GPUSHMEM_ENGINE=nvshmem ./gpu-nvshmem --test-threads 1 smoke::
    step nvshmem-suite-1pe-wait 120 env GPUSHMEM_ENGINE=nvshmem ./gpu-nvshmem --test-threads 1 wait::table_1pe
    step nvshmem-suite-processes 480 env GPUSHMEM_ENGINE=nvshmem GPUSHMEM_TEST_ALL_AS_PROCESSES=1 ./gpu-nvshmem \
      --test-threads 1 --skip stream::collectives --skip stress:: --skip _8pe --skip pipeline_2pe
  else
    echo "verify nvshmem-suite: not run: gpu-nvshmem was not staged (scripts/device.sh)"; rc=1
  fi
fi
# Issue 38: 2 simulated nodes on this one GPU (docs/multinode.md): gpushmem-run --simulate-nodes gives
# each node its own mount and UTS namespaces (private /tmp, /dev/shm, /run/user; own hostname unless
# --same-hostname), so the PEs meet over TCP. The bootstrap alone as 2x2; the native engine's refusal
# (distinct hostnames: two nodes); the NVSHMEM-engine examples and suite with --same-hostname (NVSHMEM
# tells nodes apart by hostname: with one hostname it uses P2P between the PEs on this one GPU, and
# meets them at /tmp/nvshmem-socket-*, so --same-hostname leaves /tmp shared).
if has multinode; then
  sim=(./gpushmem-run --simulate-nodes 2)
  step multinode-join-2x2 60 "${sim[@]}" -n 4 -- ./gpushmem-info --join
  cat "$logs/multinode-join-2x2.log"
  for e in ring moe halo; do
    timeout -k 5 60 "${sim[@]}" -n 2 -- "./$e" >"$logs/multinode-native-$e-refused.log" 2>&1
    # Counted as PEs that exited 1 saying why; the examples write each line in one write.
    n=$(grep -o "this job spans 2 nodes" "$logs/multinode-native-$e-refused.log" | wc -l)
    echo "verify multinode-native-$e-refused: $n of 2 PEs refused: $(grep -m1 "spans 2 nodes" "$logs/multinode-native-$e-refused.log" | cut -c1-220)"
    [ "$n" -eq 2 ] || rc=1
  done
  # One hostname: gpushmem's census sees one node, and the native engine runs across the two mount namespaces.
  step multinode-native-ring-same-hostname 90 "${sim[@]}" --same-hostname -n 2 -- ./ring
  for e in ring moe halo; do
    step "multinode-nvshmem-$e" 120 env GPUSHMEM_ENGINE=nvshmem "${sim[@]}" --same-hostname -n 2 -- "./$e-nvshmem"
  done
  if [ -x ./gpu-nvshmem ]; then
    step multinode-nvshmem-suite 420 env GPUSHMEM_ENGINE=nvshmem GPUSHMEM_TEST_ALL_AS_PROCESSES=1 \
      GPUSHMEM_TEST_LAUNCHER_ARGS="--simulate-nodes 2 --same-hostname" ./gpu-nvshmem \
      --test-threads 1 --skip stream::collectives --skip stress:: --skip _8pe --skip pipeline_2pe --skip smoke:: --skip _1pe
  fi
fi
has info && step info 30 ./gpushmem-info
if has guide; then
  if [ -x ./guide-myapp ]; then step guide 60 ./guide-myapp; else echo "verify guide: not staged (scripts/check-guide.sh failed in scripts/device.sh)"; rc=1; fi
fi
# Clocks and power once a second while the timed parts run (read only: the
# card's settings are left alone), to tell a clock change from a code change.
if has perf || has nvshmem; then
  nvidia-smi dmon -s pc -d 1 >"$logs/dmon.log" 2>&1 &
  dmon=$!
fi
# Issue 17: the stream-ordered collectives (allreduce f32/bf16, fcollect, alltoall, 4 KiB-256 MiB) on 2, 4
# and 8 PEs as threads with the memory bound of each row, the block put by size against cuMemcpy, and the
# allreduce example (its hand-written one-shot/two-shot and the library call) on 8 PEs.
if has collective; then
  for n in 2 4 8; do
    step "collective-${n}pe" 150 ./gpushmem-perf collective --npes "$n" --coll-max-size 256m --csv "$logs/collective-${n}pe.csv"
  done
  # The small sizes again with each timed span's calls in a CUDA graph: the device's time per call
  # without the driver's serialized launches of eight PE threads sharing one context.
  step collective-8pe-graph 120 ./gpushmem-perf collective --npes 8 --coll-max-size 1m --graph --csv "$logs/collective-8pe-graph.csv"
  step put-bw 120 ./gpushmem-perf put-bw --csv "$logs/put-bw.csv"
  step example-allreduce-8 90 ./allreduce 8
fi
if has perf; then
  step perf 240 ./gpushmem-perf pingpong scopes pingpong-blocks pingpong-placement latency barrier init \
    --csv "$logs/perf.csv" --json "$logs/perf.json"
fi
# A missing NVSHMEM build script or program is a failed part with a line saying so, never silence.
nvshmem_step() { # nvshmem_step NAME LIMIT PROGRAM ARGS...
  if [ -x "$3" ]; then step "$@"; else echo "verify $1: not run: $3 was not built (see $logs/nvshmem-build.log)"; rc=1; fi
}
if has nvshmem; then
  if [ -f ../../bench/nvshmem/build.sh ]; then
    step nvshmem-build 120 bash ../../bench/nvshmem/build.sh /tmp/nvb
  else
    echo "verify nvshmem-build: not run: ../../bench/nvshmem/build.sh not found (run from stage/bin of a checkout)"; rc=1
  fi
  nvshmem_step nvshmem 120 /tmp/nvb/run-nvshmem-perf pingpong --csv "$logs/nvshmem.csv"
  nvshmem_step nvshmem-barrier 60 /tmp/nvb/run-nvshmem-perf barrier --csv "$logs/nvshmem-barrier.csv"
  nvshmem_step nvshmem-placement 120 /tmp/nvb/run-nvshmem-perf pingpong-placement --csv "$logs/nvshmem-placement.csv"
fi
# The NVSHMEM engine side by side (issue 16, one GPU): the same one-PE shapes on all three sides
# (--one-pe: put/get between two buffers of PE 0's heap, ping-pong between two blocks of PE 0,
# barrier and init on 1 PE; default bandwidth grid capped at 1056 blocks of 1024 threads, nvshmem-perf's shape),
# medians of 20 timed runs after 5 warm-up runs, one launch per timed span (--iters 1: nvshmem-perf
# times one launch). Two rounds, the three programs interleaved, so
# the run-to-run spread shows beside the differences (device/METHOD.md); round 2 is left out when
# round 1 took over 150 s, to keep the part under ~300 s.
if has engine-perf; then
  t_ep=$SECONDS
  [ -n "${dmon:-}" ] || { nvidia-smi dmon -s pc -d 1 >"$logs/dmon.log" 2>&1 & dmon=$!; }
  ep=(put-bw get-bw pingpong barrier init --one-pe --max-grid 1056 --block 1024 --iters 1 --reps 20 --warmup 5)
  if [ ! -x /tmp/nvb/run-nvshmem-perf ]; then
    if [ -f ../../bench/nvshmem/build.sh ]; then
      step nvshmem-build 120 bash ../../bench/nvshmem/build.sh /tmp/nvb
    else
      echo "verify nvshmem-build: not run: ../../bench/nvshmem/build.sh not found (run from stage/bin of a checkout)"; rc=1
    fi
  fi
  for round in 1 2; do
    if [ "$round" -eq 2 ] && [ $((SECONDS - t_ep)) -gt 150 ]; then
      echo "verify engine-perf: round 2 left out: round 1 took $((SECONDS - t_ep)) s"; break
    fi
    step "engine-perf-native-$round" 90 ./gpushmem-perf "${ep[@]}" \
      --csv "$logs/engine-perf-native-$round.csv" --json "$logs/engine-perf-native-$round.json"
    if [ -x ./gpushmem-perf-nvshmem ]; then
      step "engine-perf-nvshmem-engine-$round" 120 env GPUSHMEM_ENGINE=nvshmem ./gpushmem-perf-nvshmem "${ep[@]}" \
        --csv "$logs/engine-perf-nvshmem-engine-$round.csv" --json "$logs/engine-perf-nvshmem-engine-$round.json"
    else
      echo "verify engine-perf-nvshmem-engine-$round: not run: gpushmem-perf-nvshmem was not staged (scripts/device.sh)"; rc=1
    fi
    nvshmem_step "engine-perf-nvshmem-cpp-$round" 60 /tmp/nvb/run-nvshmem-perf all --reps 20 --warmup 5 \
      --csv "$logs/engine-perf-nvshmem-cpp-$round.csv"
    files=("$logs/engine-perf-native-$round.csv" "$logs/engine-perf-nvshmem-engine-$round.csv" "$logs/engine-perf-nvshmem-cpp-$round.csv")
    missing=""
    for f in "${files[@]}"; do [ -f "$f" ] || missing="$missing ${f##*/}"; done
    if [ -z "$missing" ]; then
      python3 ../../bench/compare.py "${files[@]}" >"$logs/engine-perf-compare-$round.txt" 2>&1 || rc=1
      python3 ../../bench/compare.py "${files[@]}" --markdown >"$logs/engine-perf-compare-$round.md" 2>&1
    else
      echo "verify engine-perf-compare-$round: not made: missing$missing"; rc=1
    fi
  done
  echo "verify engine-perf: $((SECONDS - t_ep)) s; CSVs, logs and engine-perf-compare-{1,2}.{txt,md} in $logs"
  if [ -f "$logs/engine-perf-native-1.csv" ] && [ -f "$logs/engine-perf-nvshmem-engine-1.csv" ] &&
    [ -f "$logs/engine-perf-nvshmem-cpp-1.csv" ]; then
    echo "=== engine-perf round 1 (bench/compare.py --brief; every size in engine-perf-compare-1.txt) ==="
    python3 ../../bench/compare.py --brief "$logs/engine-perf-native-1.csv" "$logs/engine-perf-nvshmem-engine-1.csv" \
      "$logs/engine-perf-nvshmem-cpp-1.csv"
  fi
fi
[ -n "${dmon:-}" ] && kill "$dmon" 2>/dev/null
if has ncu; then
  ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
  if [ -n "$ncu" ]; then
    # The one-kernel ping-pong's timed launch of mode 0 (library put_signal_nbi),
    # 5 (hand-written release/acquire) and 7 (library signal_op): with
    # --warmup 3 --reps 1 every mode launches 4 times, its timed one last.
    for mode in 0 5 7 10; do
      step "ncu-mode$mode" 120 "$ncu" --clock-control none --kernel-name pingpong_blocks --launch-skip $((4 * mode + 3)) --launch-count 1 \
        --section WarpStateStats --section SourceCounters --section LaunchStats \
        --export "$logs/pingpong-mode$mode" --force-overwrite \
        ./gpushmem-perf pingpong-blocks --warmup 3 --reps 1
      "$ncu" --import "$logs/pingpong-mode$mode.ncu-rep" --page details --print-details all >"$logs/ncu-details-mode$mode.txt" 2>&1
      "$ncu" --import "$logs/pingpong-mode$mode.ncu-rep" --page source --csv --print-source sass >"$logs/ncu-sass-mode$mode.csv" 2>&1
    done
  else
    echo "verify ncu: ncu not found"
  fi
fi
if has ncu-engine; then
  # Issue 16: why the NVSHMEM-engine ping-pong is slower than NVSHMEM's C++ one.
  # The same one-kernel ping-pong (two blocks of PE 0) on the NVSHMEM engine,
  # modes 0 (put_signal_nbi), 7 (signal_op) and 10 (signal_op_relaxed), and
  # NVSHMEM's own two ping-pong kernels; SASS with stall samples as CSV.
  ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
  if [ -z "$ncu" ]; then
    echo "verify ncu-engine: ncu not found"; rc=1
  else
    [ -x /tmp/nvb/run-nvshmem-perf ] || step nvshmem-build 120 bash ../../bench/nvshmem/build.sh /tmp/nvb
    sections=(--section WarpStateStats --section SourceCounters)
    for mode in 0 7 10; do
      step "ncu-engine-mode$mode" 120 env GPUSHMEM_ENGINE=nvshmem "$ncu" --clock-control none --kernel-name pingpong_blocks \
        --launch-skip $((4 * mode + 3)) --launch-count 1 "${sections[@]}" --export "$logs/engine-mode$mode" --force-overwrite \
        ./gpushmem-perf-nvshmem pingpong-blocks --warmup 3 --reps 1
      "$ncu" --import "$logs/engine-mode$mode.ncu-rep" --page source --csv --print-source sass >"$logs/ncu-engine-sass-mode$mode.csv" 2>&1
    done
    for k in pingpong_put_signal pingpong_signal; do
      nvshmem_step "ncu-cpp-$k" 120 "$ncu" --clock-control none --kernel-name "$k" --launch-skip 3 --launch-count 1 \
        "${sections[@]}" --export "$logs/cpp-$k" --force-overwrite /tmp/nvb/run-nvshmem-perf pingpong --reps 3 --warmup 3
      "$ncu" --import "$logs/cpp-$k.ncu-rep" --page source --csv --print-source sass >"$logs/ncu-cpp-sass-$k.csv" 2>&1
    done
  fi
fi
if has multigpu; then
  nvidia-smi topo -m >"$logs/topo.txt" 2>&1
  ngpu=$(nvidia-smi -L | wc -l)
  echo "verify multigpu: $ngpu GPU(s); topology in topo.txt"
  step perf-multigpu 400 ./gpushmem-perf put-bw get-bw pingpong barrier collective --bidir \
    --min-size 4k --pes 2,4,8 --csv "$logs/perf-multigpu.csv" --json "$logs/perf-multigpu.json" --png "$logs/bw-multigpu.png"
  # NVSHMEM across the GPUs, same sizes (perf_multi.cu: one process per GPU, unique-ID bootstrap).
  [ -x /tmp/nvb/run-nvshmem-perf-multi ] || step nvshmem-build 150 bash ../../bench/nvshmem/build.sh /tmp/nvb
  for n in 2 4 8; do
    [ "$n" -le "$ngpu" ] || continue
    if [ "$n" -eq 2 ]; then what=all; else what=barrier; fi
    nvshmem_step "nvshmem-multigpu-$n" 300 /tmp/nvb/run-nvshmem-perf-multi \
      --npes "$n" "$what" --min-size 4k --csv "$logs/nvshmem-multigpu-$n.csv"
  done
fi
has sanitize && OUT=$logs SANITIZE_BUDGET=540 step sanitize 560 bash ./sanitize.sh
exit $rc
