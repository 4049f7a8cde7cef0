#!/usr/bin/env bash
# Builds bench/nvshmem/perf.cu (the NVSHMEM side of the benchmark comparison)
# against the NVSHMEM Python package (nvidia-nvshmem-cu13 / -cu12).
#
#   bash bench/nvshmem/build.sh OUTDIR
#
# Writes OUTDIR/nvshmem-perf and OUTDIR/run-nvshmem-perf (a wrapper that sets
# LD_LIBRARY_PATH and NVSHMEM_DISABLE_NVLS=1, then runs the binary with its
# arguments). Run the wrapper as a plain process: one PE. Also, where it
# compiles, OUTDIR/nvshmem-perf-multi and run-nvshmem-perf-multi (perf_multi.cu:
# N PEs on N GPUs, started by the program itself; `--npes N`); a failure to
# build that one is reported and does not fail the script.
#
# Finds nvcc on $NVCC, PATH, $CUDA_HOME/$CUDA_PATH, /usr/local/cuda*/bin, or
# inside Python packages (nvidia/*/bin/nvcc: cu13, cuda_nvcc, ...).
# NVSHMEM: $NVSHMEM_HOME, else `import nvidia.nvshmem`.
# Other knobs: PYTHON (default python3), GENCODE (default
# arch=compute_90,code=sm_90), NVCC_FLAGS (extra flags).
#
# Exit codes: 0 built; 1 compile/link failed or bad usage; 3 no nvcc; 4 no NVSHMEM.
set -euo pipefail

if [ $# -ne 1 ]; then
    echo "usage: bash bench/nvshmem/build.sh OUTDIR" >&2
    exit 1
fi
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$1"
OUT=$(cd "$1" && pwd)
PY=${PYTHON:-python3}
GENCODE=${GENCODE:-arch=compute_90,code=sm_90}

say() { echo "build.sh: $*"; }

# Directories on Python's path (site-packages and the like), one a line.
py_dirs() {
    "$PY" -c '
import site, sys, os
seen = []
cands = list(sys.path)
try:
    cands += site.getsitepackages()
except Exception:
    pass
try:
    cands.append(site.getusersitepackages())
except Exception:
    pass
for p in cands:
    if p and os.path.isdir(p) and p not in seen:
        seen.append(p)
        print(p)
' 2>/dev/null || true
}

# ---------------------------------------------------------------- NVSHMEM
P=${NVSHMEM_HOME:-}
if [ -z "$P" ]; then
    P=$("$PY" -c 'import nvidia.nvshmem as m; print(list(m.__path__)[0])' 2>/dev/null || true)
fi
if [ -z "$P" ]; then
    # Fallback: look for the folder directly on Python's path.
    while IFS= read -r d; do
        if [ -f "$d/nvidia/nvshmem/include/nvshmem.h" ]; then P="$d/nvidia/nvshmem"; break; fi
    done < <(py_dirs)
fi
if [ -z "$P" ] || [ ! -f "$P/include/nvshmem.h" ]; then
    echo "build.sh: NVSHMEM not found: no importable nvidia.nvshmem with include/nvshmem.h" \
         "(pip package nvidia-nvshmem-cu13), and NVSHMEM_HOME is not set" >&2
    exit 4
fi
HOSTLIB=""
for c in "$P/lib/libnvshmem_host.so.3" $(find "$P" -name 'libnvshmem_host.so*' 2>/dev/null | sort); do
    if [ -f "$c" ]; then HOSTLIB=$c; break; fi
done
DEVLIB=$(find "$P" -name 'libnvshmem_device.a' 2>/dev/null | sort | head -n 1)
if [ -z "$HOSTLIB" ] || [ -z "$DEVLIB" ]; then
    echo "build.sh: NVSHMEM at $P lacks libnvshmem_host.so.3 or libnvshmem_device.a" \
         "(host: '${HOSTLIB}', device: '${DEVLIB}')" >&2
    exit 4
fi
HOSTLIBDIR=$(dirname "$HOSTLIB")
say "NVSHMEM package: $P"
say "  host library:   $HOSTLIB"
say "  device library: $DEVLIB"
VER_H=$(grep -rhE '^#define NVSHMEM_VENDOR_(MAJOR|MINOR|PATCH)_VERSION' "$P/include" 2>/dev/null \
        | awk '{v[$2]=$3} END {if (v["NVSHMEM_VENDOR_MAJOR_VERSION"] != "") \
              printf "%s.%s.%s", v["NVSHMEM_VENDOR_MAJOR_VERSION"], v["NVSHMEM_VENDOR_MINOR_VERSION"], \
              v["NVSHMEM_VENDOR_PATCH_VERSION"]}')
VER_PIP=""
for name in nvidia-nvshmem-cu13 nvidia-nvshmem-cu12 nvidia-nvshmem; do
    VER_PIP=$("$PY" -m pip show "$name" 2>/dev/null | sed -n 's/^Version: //p' || true)
    if [ -n "$VER_PIP" ]; then VER_PIP="$name $VER_PIP"; break; fi
done
say "  version: headers ${VER_H:-unknown}; pip ${VER_PIP:-unknown}"

# ---------------------------------------------------------------- nvcc
find_nvcc() {
    if [ -n "${NVCC:-}" ] && [ -x "${NVCC}" ]; then echo "$NVCC"; return 0; fi
    if command -v nvcc >/dev/null 2>&1; then command -v nvcc; return 0; fi
    local d
    for d in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda $(ls -d /usr/local/cuda-* 2>/dev/null | sort -rV); do
        if [ -n "$d" ] && [ -x "$d/bin/nvcc" ]; then echo "$d/bin/nvcc"; return 0; fi
    done
    while IFS= read -r d; do
        [ -d "$d/nvidia" ] || continue
        local c
        c=$(find "$d/nvidia" -mindepth 3 -maxdepth 3 -path '*/bin/nvcc' -type f 2>/dev/null | sort | head -n 1)
        if [ -n "$c" ] && [ -x "$c" ]; then echo "$c"; return 0; fi
    done < <(py_dirs)
    return 1
}
if ! NVCC_BIN=$(find_nvcc); then
    echo "build.sh: no nvcc found: not on PATH, not in \$CUDA_HOME/\$CUDA_PATH or /usr/local/cuda*/bin," \
         "and no Python package holds nvidia/*/bin/nvcc (pip package nvidia-cuda-nvcc). Set NVCC=/path/to/nvcc." >&2
    exit 3
fi
TOP=$(cd "$(dirname "$NVCC_BIN")/.." && pwd)
say "nvcc: $NVCC_BIN ($("$NVCC_BIN" --version | grep -i release | sed 's/.*release //'))"
if command -v g++ >/dev/null 2>&1; then
    say "host compiler: $(g++ --version | head -n 1)"
else
    say "warning: no g++ on PATH; nvcc needs a host C++ compiler"
fi

EXTRA=()
# A toolkit laid out by pip (nvidia/cu13/{bin,include,lib}) keeps its libraries in lib/, where
# nvcc's profile does not look; a regular toolkit's profile finds its own. -L on existing dirs is harmless.
for d in "$TOP/lib64" "$TOP/lib" "$TOP/targets/x86_64-linux/lib"; do
    if [ -f "$d/libcudart_static.a" ] || [ -f "$d/libcudadevrt.a" ]; then EXTRA+=("-L$d"); fi
done
if [ ! -f "$TOP/include/cuda_runtime.h" ] && [ ! -f "$TOP/targets/x86_64-linux/include/cuda_runtime.h" ]; then
    while IFS= read -r d; do
        c=$(find "$d/nvidia" -mindepth 3 -maxdepth 3 -path '*/include/cuda_runtime.h' 2>/dev/null | head -n 1 || true)
        if [ -n "$c" ]; then EXTRA+=("-I$(dirname "$c")"); say "cuda_runtime.h: $c"; break; fi
    done < <(py_dirs)
fi

# ---------------------------------------------------------------- link folder
LINKDIR="$OUT/nvshmem-link"
rm -rf "$LINKDIR"
mkdir -p "$LINKDIR"
ln -s "$HOSTLIB" "$LINKDIR/libnvshmem_host.so"
ln -s "$DEVLIB" "$LINKDIR/libnvshmem_device.a"

# libcuda for the link: the toolkit's stub, else the driver's libcuda.so.1 (run time uses the driver's).
LIBCUDA=""
for c in "$TOP/lib64/stubs/libcuda.so" "$TOP/targets/x86_64-linux/lib/stubs/libcuda.so" "$TOP/lib/stubs/libcuda.so" \
         "$(ldconfig -p 2>/dev/null | awk '/libcuda\.so\.1 / {print $NF; exit}')" \
         /usr/local/nvidia/lib64/libcuda.so.1 /usr/lib/x86_64-linux-gnu/libcuda.so.1 /usr/lib64/libcuda.so.1; do
    if [ -n "$c" ] && [ -f "$c" ]; then LIBCUDA=$c; break; fi
done
LCUDA=()
if [ -n "$LIBCUDA" ]; then
    ln -s "$LIBCUDA" "$LINKDIR/libcuda.so"
    LCUDA=(-lcuda)
    say "libcuda for linking: $LIBCUDA"
else
    say "warning: no libcuda.so found; linking without -lcuda"
fi

# ---------------------------------------------------------------- build
CMD=("$NVCC_BIN" -O3 -std=c++17 "-gencode=$GENCODE" -rdc=true
     -I"$P/include" "${EXTRA[@]}" ${NVCC_FLAGS:-}
     "$HERE/perf.cu"
     -L"$LINKDIR" -lnvshmem_host -lnvshmem_device "${LCUDA[@]}"
     -Xlinker -rpath -Xlinker "$HOSTLIBDIR"
     -o "$OUT/nvshmem-perf")
say "${CMD[*]}"
if ! "${CMD[@]}"; then
    echo "build.sh: nvcc failed" >&2
    exit 1
fi

cat > "$OUT/run-nvshmem-perf" <<EOF
#!/usr/bin/env bash
# Generated by bench/nvshmem/build.sh: runs nvshmem-perf as one plain process (one PE).
export LD_LIBRARY_PATH="$HOSTLIBDIR\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
export NVSHMEM_DISABLE_NVLS=1
exec "$OUT/nvshmem-perf" "\$@"
EOF
chmod +x "$OUT/run-nvshmem-perf"
say "built $OUT/nvshmem-perf"

# The multi-GPU program (not yet run anywhere: written while one GPU was lent).
MCMD=("${CMD[@]}")
MCMD[$((${#MCMD[@]} - 1))]="$OUT/nvshmem-perf-multi"
for i in "${!MCMD[@]}"; do [ "${MCMD[$i]}" = "$HERE/perf.cu" ] && MCMD[$i]="$HERE/perf_multi.cu"; done
say "${MCMD[*]}"
if "${MCMD[@]}"; then
    sed -e "s|$OUT/nvshmem-perf\"|$OUT/nvshmem-perf-multi\"|" -e 's|as one plain process (one PE)|(it starts its own PE processes: --npes N)|' \
        "$OUT/run-nvshmem-perf" >"$OUT/run-nvshmem-perf-multi"
    chmod +x "$OUT/run-nvshmem-perf-multi"
    say "built $OUT/nvshmem-perf-multi"
else
    say "warning: perf_multi.cu did not build; nvshmem-perf (one PE) is unaffected"
fi
say "run:   $OUT/run-nvshmem-perf [all|put-bw|get-bw|pingpong|barrier|init] [--csv FILE] ..."
say "       (or: LD_LIBRARY_PATH=$HOSTLIBDIR NVSHMEM_DISABLE_NVLS=1 $OUT/nvshmem-perf ...)"
