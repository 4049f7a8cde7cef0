#!/usr/bin/env bash
# Session 18 (issue 38) on the GPU machine (carry stage, stage-ucx; staged by
# docs/runs/2026-12-07-session18/stage.sh):
#   bash docs/runs/2026-12-07-session18/mn.sh verify     # 1.
#   bash docs/runs/2026-12-07-session18/mn.sh stretch    # 2.
#   bash docs/runs/2026-12-07-session18/mn.sh interop    # 3. (issues 39, 40: interop, Sym::p/g, bulk probes, ring)
# Session 17's run of this (its first on a GPU) showed: UCX's proxy aborted as before but neither PE
# ended, with the exit watchdog on or off. Session 18's run (run2) showed why: the watchdog was never
# installed, as NVSHMEM's init (nvshmemx_hostlib_init_attr) never returned (main thread and proxy
# thread spinning). Session 19 bounds that init (twice GPUSHMEM_BOOTSTRAP_TIMEOUT, here 2 x 10 s), so
# the UCX run must now end by itself with gpushmem's message; what each thread waits in is still
# recorded if it does not.
# 1. verify.sh part multinode: 2 simulated nodes on this one GPU (gpushmem-run --simulate-nodes).
# 2. Stretch (NVSHMEM's network path): the NVSHMEM-engine ring across 2 simulated nodes with distinct
#    hostnames (NVSHMEM then needs a remote transport between them) over UCX 1.22 (libucx-cu13 from PyPI,
#    taken along), NVSHMEM_DEBUG=INFO, bounded by timeout; while it runs, what each thread waits in.
set -uo pipefail
root=$PWD
final=${OUT:-$root/out}
mkdir -p "$final"
# The device tool brings back a few files only: the logs go back as one tarball per part.
out=$(mktemp -d /var/tmp/mn.XXXXXX)
trap 'tar -C "$out" -czf "$final/mn-${what:-verify}.tar.gz" .' EXIT
bash stage/run.sh true >/dev/null 2>&1
# Inside a simulated node /tmp, /dev/shm and /run/user are fresh: the binaries must live elsewhere.
bin=$root/stage/bin
case "$bin" in /tmp/*|/dev/shm/*|/run/user/*) mkdir -p /opt/gpushmem && cp -a "$bin" /opt/gpushmem/ && bin=/opt/gpushmem/bin ;; esac
echo "stage: $bin (pwd $root); hostname $(hostname); $(uname -r)"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
command -v gdb eu-stack pstack perf 2>&1 | tr '\n' ' '; echo
what=${1:-verify}
[ "$what" = verify ] && OUT=$out bash "$bin/verify.sh" multinode
# Issue 39 on the GPU: the cudarc interop tests (threads, processes, Shmem::init_on), native and
# NVSHMEM engines, and the guide's app built from the packaged crates.
if [ "$what" = interop ]; then
  (cd "$bin" && GPUSHMEM_REQUIRE_GPU=1 timeout -k 5 300 ./gpu interop:: >"$out/interop-native.log" 2>&1; echo "exit $?" >>"$out/interop-native.log")
  echo "interop native: $(grep -E '^test |test result|exit ' "$out/interop-native.log" | tr '\n' '|')"
  grep -E "^  [0-9]+ (PEs|processes)" "$out/interop-native.log"
  (cd "$bin" && GPUSHMEM_REQUIRE_GPU=1 GPUSHMEM_ENGINE=nvshmem GPUSHMEM_TEST_ALL_AS_PROCESSES=1 timeout -k 5 300 ./gpu-nvshmem interop:: \
    >"$out/interop-nvshmem.log" 2>&1; echo "exit $?" >>"$out/interop-nvshmem.log")
  echo "interop nvshmem: $(grep -E '^test |test result|exit ' "$out/interop-nvshmem.log" | tr '\n' '|')"
  (cd "$bin" && timeout -k 5 120 ./guide-myapp >"$out/guide-packaged.log" 2>&1; echo "exit $?" >>"$out/guide-packaged.log")
  echo "guide (packaged crates): $(tr '\n' '|' <"$out/guide-packaged.log" | cut -c1-400)"
  # Added in session 19: Sym::p/g (typed::), the bulk-copy probes of issue 40 (bulk::), and the
  # ring example's device-timed put line.
  for f in typed:: bulk::; do
    (cd "$bin" && GPUSHMEM_REQUIRE_GPU=1 timeout -k 5 300 ./gpu "$f" >"$out/gpu-${f%::}.log" 2>&1; echo "exit $?" >>"$out/gpu-${f%::}.log")
    echo "gpu $f: $(grep -E '^test |test result|exit |^  ' "$out/gpu-${f%::}.log" | tr '\n' '|' | cut -c1-900)"
  done
  (cd "$bin" && timeout -k 5 120 ./ring 2 >"$out/ring.log" 2>&1; echo "exit $?" >>"$out/ring.log")
  echo "ring: $(tr '\n' '|' <"$out/ring.log" | cut -c1-500)"
fi
# ---- stretch: UCX between simulated nodes ----
if [ "$what" = stretch ] && [ -f "$root/stage-ucx/ucx.tar.xz" ]; then
  mkdir -p /opt/ucx && tar -C /opt/ucx -xJf "$root/stage-ucx/ucx.tar.xz"
  cd "$bin"
  export LD_LIBRARY_PATH=/opt/ucx/libucx/lib:/opt/ucx/libucx_cu13.libs:${LD_LIBRARY_PATH:-}
  export UCX_MODULE_DIR=/opt/ucx/libucx/lib/ucx
  # libfabric 1.17 and its verbs/psm libraries from Debian bookworm's packages (NVSHMEM's libfabric
  # transport accepts the personas verbs, cxi and efa; with verbs it asks fi_getinfo for RDM endpoints
  # with FI_RMA|FI_HMEM|FI_ATOMIC, here offered FI_PROVIDER=tcp).
  if [ -f "$root/stage-ucx/libfabric.tar.xz" ]; then
    mkdir -p /opt/lf && tar -C /opt/lf -xJf "$root/stage-ucx/libfabric.tar.xz"
    export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:/opt/lf/usr/lib/x86_64-linux-gnu:/opt/lf/lib/x86_64-linux-gnu
  fi
  # ucx: init bounded at 2 x 10 s, exit watchdog 10 s; libfabric.
  for t in ucx libfabric; do
    log=$out/stretch-$t-ring.log
    guard=10
    (timeout -k 5 60 env GPUSHMEM_ENGINE=nvshmem GPUSHMEM_TIMEOUT=20 GPUSHMEM_BOOTSTRAP_TIMEOUT=10 GPUSHMEM_EXIT_TIMEOUT=$guard GPUSHMEM_DEBUG=debug NVSHMEM_DEBUG=INFO \
      NVSHMEM_REMOTE_TRANSPORT=${t%-noguard} NVSHMEM_LIBFABRIC_PROVIDER=verbs FI_PROVIDER=tcp FI_LOG_LEVEL=warn \
      NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME=lo UCX_NET_DEVICES=lo ./gpushmem-run --simulate-nodes 2 -n 2 -- ./ring-nvshmem \
      >"$log" 2>&1; echo "exit $?" >>"$log") &
    job=$!
    # What each thread waits in, 40 s in (the UCX runs; libfabric stops at init).
    if [ "$t" = libfabric ]; then wait $job; echo "stretch $t: $(tail -1 "$log"); $(grep -m3 -iE "abort|not supported|error|ending it" "$log" | cut -c1-200 | tr '\n' '|')"; continue; fi
    for _ in $(seq 40); do kill -0 $job 2>/dev/null || break; sleep 1; done
    for p in $(pgrep -f -x './ring-nvshmem'); do
      echo "== pid $p: $(tr '\0' ' ' </proc/$p/cmdline 2>/dev/null | cut -c1-80)"
      for task in /proc/$p/task/*; do
        sc=$(cat $task/syscall 2>/dev/null)
        pc=${sc##* }
        lib=""
        if [ -n "$pc" ] && [ "$pc" != running ]; then
          lib=$(python3 - "$p" "$pc" <<'PY'
import sys
pid, pc = sys.argv[1], int(sys.argv[2], 16)
for l in open(f"/proc/{pid}/maps"):
    f = l.split()
    lo, hi = (int(x, 16) for x in f[0].split("-"))
    if lo <= pc < hi: print(f[-1] if len(f) > 5 else "?", hex(pc - lo + int(f[2], 16))); break
PY
)
        fi
        echo "  tid ${task##*/} $(cat $task/comm 2>/dev/null) state $(awk '{print $3}' $task/stat 2>/dev/null) wchan $(cat $task/wchan 2>/dev/null) syscall ${sc%% *} in $lib"
        sed 's/^/      /' $task/stack 2>/dev/null | head -8
      done
      if command -v gdb >/dev/null; then timeout 60 gdb -p $p -batch -ex 'thread apply all bt 12' 2>&1 | grep -E '^#|^Thread' | head -80; fi
    done >"$out/stretch-$t-threads.txt" 2>&1
    nvidia-smi --query-compute-apps=pid,used_memory --format=csv >>"$out/stretch-$t-threads.txt" 2>&1
    wait $job
    echo "stretch $t: $(tail -1 "$log"); $(grep -m4 -iE "abort|not supported|error|has not returned" "$log" | cut -c1-240 | tr '\n' '|')"
  done
fi
