// nvshmem-perf: the NVSHMEM side of gpushmem's benchmark comparison.
//
// One process, one PE (run it as a plain process: NVSHMEM's default PMI
// bootstrap finds no PMI_FD/PMI_PORT and initializes as a singleton, size 1).
// Every figure is the median of --reps timed runs after --warmup runs, timed
// with CUDA events on one stream, in the manner of bench/perf.rs.
//
//   nvshmem-perf [all|put-bw|get-bw|pingpong|pingpong-placement|barrier|init]
//                [--max-size BYTES] [--reps N] [--warmup N] [--csv FILE] [--timeout S]
//
// - init (always measured, at start): wall time of nvshmem_init (after
//   cudaSetDevice(0); cudaFree(0)) and of nvshmem_malloc(1 GiB), in ms:
//   malloc_1gib_first the first (cold) call, malloc_1gib the median of the
//   --reps calls after it (each freed), as gpushmem-perf init times its own.
// - put-bw / get-bw: PE 0 moves S bytes from a symmetric src to a symmetric dst
//   on itself with nvshmemx_putmem_nbi_block / nvshmemx_getmem_nbi_block
//   (grid = default_grid(S): gpushmem-perf's rule capped at 1056, blocks x 1024 threads, each block its
//   16-byte-aligned share), then nvshmem_quiet in the kernel; beside it
//   cudaMemcpyAsync DtoD of the same S on the same stream. GB/s = S / time.
// - pingpong: two blocks of one kernel (thread 0 of each) ping-pong 10^4 round
//   trips on two symmetric u64 signal words (one per direction):
//   nvshmemx_signal_op(SET) / nvshmem_signal_wait_until(GE), and the same with
//   nvshmem_putmem_signal_nbi (8-byte payload + signal SET; block 0 rewrites its
//   source each hop, block 1 re-stores the payload it received: gpushmem-perf's
//   put_signal_pingpong_like_nvshmem does the same). us per round trip.
// - pingpong-placement (not in all): both ping-pongs with their words at 16
//   positions 4352 B apart; min/median/max (gpushmem-perf pingpong-placement).
// - barrier: nvshmemx_barrier_all_block x 10^4 in a one-block kernel (1 PE).
//
// CSV (--csv FILE): header `test,size,nvshmem,baseline,unit`, rows as gpushmem-perf
// writes them (bench/compare.py joins the two files).
//
// Exit codes: 0 ok, 1 a CUDA/NVSHMEM call or a check failed, 2 bad usage or
// wrong PE count, 4 watchdog (a phase ran past --timeout: hung kernel?).

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <unistd.h>

#include <cuda_runtime.h>
#include <nvshmem.h>
#include <nvshmemx.h>

// ---------------------------------------------------------------- checks

#define CUDA_CHECK(call)                                                                       \
    do {                                                                                       \
        cudaError_t e_ = (call);                                                               \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, "nvshmem-perf: %s:%d: %s failed: %s (%s)\n", __FILE__, __LINE__, \
                    #call, cudaGetErrorName(e_), cudaGetErrorString(e_));                      \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

#define NVSHMEM_CHECK(call)                                                                    \
    do {                                                                                       \
        int s_ = (call);                                                                       \
        if (s_ != 0) {                                                                         \
            fprintf(stderr, "nvshmem-perf: %s:%d: %s failed: status %d\n", __FILE__, __LINE__, \
                    #call, s_);                                                                \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

// The default grid of the bandwidth tests, gpushmem-perf's rule (bench/perf/bandwidth.rs
// default_blocks): one block per 16 KiB below 1 MiB, 64..128 blocks to 64 MiB, then one
// per 64 KiB; capped at 1056 (NVSHMEM's put_bw) unless --grid is given.
static unsigned default_grid(uint64_t size) {
    uint64_t b = size < (1u << 20) ? size / (16 << 10)
                 : size <= (64ull << 20) ? std::min<uint64_t>(std::max<uint64_t>(size / (64 << 10), 64), 128)
                                         : size / (64 << 10);
    return (unsigned)std::min<uint64_t>(std::max<uint64_t>(b, 1), 1056);
}

static void fail(const char *what) {
    fprintf(stderr, "nvshmem-perf: %s\n", what);
    exit(1);
}

// ---------------------------------------------------------------- watchdog

static const char *volatile g_phase = "start";

static void on_alarm(int) {
    // Only async-signal-safe calls here.
    const char a[] = "nvshmem-perf: watchdog: phase '";
    const char b[] = "' ran past --timeout (hung kernel?); exiting\n";
    ssize_t r = write(2, a, sizeof a - 1);
    const char *p = (const char *)g_phase;
    r = write(2, p, strlen(p));
    r = write(2, b, sizeof b - 1);
    (void)r;
    _exit(4);
}

static unsigned g_timeout_s = 300;

static void phase(const char *name) {
    g_phase = name;
    alarm(g_timeout_s);
}

// ---------------------------------------------------------------- options

struct Opts {
    std::string what = "all";
    uint64_t max_size = 1ull << 30;
    uint64_t min_size = 8;
    unsigned grid = 0;  // 0: the size rule below
    int reps = 10;
    int warmup = 3;
    std::string csv;
};

// 123, 64k, 512M, 1g, 2T (powers of 1024; a trailing b / ib is allowed), as gpushmem's parse_size.
static bool parse_size(const char *s, uint64_t *out) {
    std::string t(s);
    for (auto &c : t) c = (char)tolower((unsigned char)c);
    if (t.size() >= 2 && t.compare(t.size() - 2, 2, "ib") == 0)
        t.resize(t.size() - 2);
    else if (!t.empty() && t.back() == 'b')
        t.resize(t.size() - 1);
    int shift = 0;
    if (!t.empty()) {
        switch (t.back()) {
            case 'k': shift = 10; break;
            case 'm': shift = 20; break;
            case 'g': shift = 30; break;
            case 't': shift = 40; break;
            default: break;
        }
        if (shift) t.resize(t.size() - 1);
    }
    if (t.empty()) return false;
    char *end = nullptr;
    unsigned long long n = strtoull(t.c_str(), &end, 10);
    if (!end || *end != '\0' || n == 0) return false;
    if (shift && n > (~0ull >> shift)) return false;
    *out = (uint64_t)n << shift;
    return true;
}

static void usage() {
    fprintf(stderr,
            "usage: nvshmem-perf [all|put-bw|get-bw|pingpong|pingpong-placement|barrier|init] [--max-size BYTES] "
            "[--reps N] [--warmup N] [--csv FILE] [--timeout SECONDS]\n");
}

static bool parse_int(const char *s, long lo, long *out) {
    char *end = nullptr;
    long v = strtol(s, &end, 10);
    if (!end || *end != '\0' || v < lo) return false;
    *out = v;
    return true;
}

static Opts parse(int argc, char **argv) {
    Opts o;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        auto val = [&](const char *name) -> const char * {
            if (i + 1 >= argc) {
                fprintf(stderr, "nvshmem-perf: %s needs a value\n", name);
                usage();
                exit(2);
            }
            return argv[++i];
        };
        long v;
        if (a == "--min-size") {
            const char *s = val("--min-size");
            if (!parse_size(s, &o.min_size) || o.min_size == 0) {
                fprintf(stderr, "nvshmem-perf: --min-size: bad size '%s'\n", s);
                exit(2);
            }
            continue;
        }
        if (a == "--grid") {
            o.grid = (unsigned)atoi(val("--grid"));
            if (o.grid == 0) {
                fprintf(stderr, "nvshmem-perf: --grid must be at least 1\n");
                exit(2);
            }
            continue;
        }
        if (a == "--max-size") {
            const char *s = val("--max-size");
            if (!parse_size(s, &o.max_size)) {
                fprintf(stderr, "nvshmem-perf: --max-size: bad size '%s'\n", s);
                exit(2);
            }
        } else if (a == "--reps") {
            if (!parse_int(val("--reps"), 1, &v)) {
                fprintf(stderr, "nvshmem-perf: --reps must be an integer >= 1\n");
                exit(2);
            }
            o.reps = (int)v;
        } else if (a == "--warmup") {
            if (!parse_int(val("--warmup"), 0, &v)) {
                fprintf(stderr, "nvshmem-perf: --warmup must be an integer >= 0\n");
                exit(2);
            }
            o.warmup = (int)v;
        } else if (a == "--timeout") {
            if (!parse_int(val("--timeout"), 1, &v)) {
                fprintf(stderr, "nvshmem-perf: --timeout must be an integer >= 1 (seconds)\n");
                exit(2);
            }
            g_timeout_s = (unsigned)v;
        } else if (a == "--csv") {
            o.csv = val("--csv");
        } else if (a == "-h" || a == "--help") {
            usage();
            exit(2);
        } else if (!a.empty() && a[0] != '-') {
            o.what = a;
        } else {
            fprintf(stderr, "nvshmem-perf: unknown option %s\n", a.c_str());
            usage();
            exit(2);
        }
    }
    const char *known[] = {"all", "put-bw", "get-bw", "pingpong", "pingpong-placement", "barrier", "init"};
    bool ok = false;
    for (const char *k : known) ok = ok || o.what == k;
    if (!ok) {
        fprintf(stderr, "nvshmem-perf: unknown test '%s'\n", o.what.c_str());
        usage();
        exit(2);
    }
    if (o.max_size < 16) o.max_size = 16;
    return o;
}

// ---------------------------------------------------------------- results

struct Row {
    std::string test;
    uint64_t size;
    double value;
    bool has_base;
    double base;
    std::string unit;
};

// Median in ms of `reps` runs of `f` (after `warmup`), each timed with events
// around it on `s`; `pre` runs before each run, outside the timed span (e.g. a
// host barrier that lines the PEs up in nvshmem-perf-multi).
template <typename P, typename F>
static double median_ms_pre(cudaStream_t s, int warmup, int reps, P pre, F f) {
    for (int i = 0; i < warmup; i++) {
        pre();
        f();
    }
    CUDA_CHECK(cudaStreamSynchronize(s));
    cudaEvent_t a, b;
    CUDA_CHECK(cudaEventCreate(&a));
    CUDA_CHECK(cudaEventCreate(&b));
    std::vector<float> t;
    t.reserve(reps);
    for (int i = 0; i < reps; i++) {
        pre();
        CUDA_CHECK(cudaEventRecord(a, s));
        f();
        CUDA_CHECK(cudaEventRecord(b, s));
        CUDA_CHECK(cudaEventSynchronize(b));
        float ms = 0.f;
        CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
        t.push_back(ms);
    }
    CUDA_CHECK(cudaEventDestroy(a));
    CUDA_CHECK(cudaEventDestroy(b));
    std::sort(t.begin(), t.end());
    return (double)t[t.size() / 2];
}

// median_ms_pre with nothing before each run.
template <typename F>
static double median_ms(cudaStream_t s, int warmup, int reps, F f) {
    return median_ms_pre(s, warmup, reps, [] {}, f);
}

// ---------------------------------------------------------------- kernels

__device__ __forceinline__ size_t umin(size_t a, size_t b) { return a < b ? a : b; }

// Each block moves its 16-byte-aligned share of `bytes` (get = 0: put to `pe`,
// get = 1: get from `pe`), then the block waits for completion (quiet).
__global__ void bw_block(int get, char *dst, const char *src, size_t bytes, int pe) {
    size_t blocks = gridDim.x;
    size_t per = (bytes + blocks - 1) / blocks;
    per = (per + 15) & ~(size_t)15;
    size_t start = umin((size_t)blockIdx.x * per, bytes);
    size_t len = umin(per, bytes - start);
    if (len > 0) {  // uniform over the block: every thread joins the block-scoped call
        if (get)
            nvshmemx_getmem_nbi_block(dst + start, src + start, len, pe);
        else
            nvshmemx_putmem_nbi_block(dst + start, src + start, len, pe);
    }
    __syncthreads();
    if (threadIdx.x == 0) nvshmem_quiet();
    __syncthreads();
}

// Block 0 pings on sig[0], block 1 pongs on sig[1]; thread 0 of each. Signal
// values are base+1 .. base+iters, so the words need no reset between launches.
__global__ void pingpong_signal(uint64_t *sig, uint64_t base, int iters, int pe) {
    if (threadIdx.x != 0) return;
    uint64_t *ping = sig, *pong = sig + 1;
    if (blockIdx.x == 0) {
        for (int i = 1; i <= iters; i++) {
            uint64_t v = base + (uint64_t)i;
            nvshmemx_signal_op(ping, v, NVSHMEM_SIGNAL_SET, pe);
            nvshmem_signal_wait_until(pong, NVSHMEM_CMP_GE, v);
        }
    } else if (blockIdx.x == 1) {
        for (int i = 1; i <= iters; i++) {
            uint64_t v = base + (uint64_t)i;
            nvshmem_signal_wait_until(ping, NVSHMEM_CMP_GE, v);
            nvshmemx_signal_op(pong, v, NVSHMEM_SIGNAL_SET, pe);
        }
    }
    nvshmem_quiet();
}

// As pingpong_signal, each message an 8-byte payload + signal SET in one
// nvshmem_putmem_signal_nbi. data (symmetric, 4 words): [0] ping destination,
// [1] pong destination, [2] ping source, [3] pong source. The pong echoes the
// payload it received.
__global__ void pingpong_put_signal(uint64_t *data, uint64_t *sig, uint64_t base, int iters, int pe) {
    if (threadIdx.x != 0) return;
    uint64_t *ping = sig, *pong = sig + 1;
    if (blockIdx.x == 0) {
        for (int i = 1; i <= iters; i++) {
            uint64_t v = base + (uint64_t)i;
            data[2] = v;
            nvshmem_putmem_signal_nbi(&data[0], &data[2], sizeof(uint64_t), ping, v,
                                      NVSHMEM_SIGNAL_SET, pe);
            nvshmem_signal_wait_until(pong, NVSHMEM_CMP_GE, v);
        }
    } else if (blockIdx.x == 1) {
        for (int i = 1; i <= iters; i++) {
            uint64_t v = base + (uint64_t)i;
            nvshmem_signal_wait_until(ping, NVSHMEM_CMP_GE, v);
            data[3] = *(volatile uint64_t *)&data[0];
            nvshmem_putmem_signal_nbi(&data[1], &data[3], sizeof(uint64_t), pong, v,
                                      NVSHMEM_SIGNAL_SET, pe);
        }
    }
    nvshmem_quiet();
}

__global__ void barrier_loop(int iters) {
    for (int i = 0; i < iters; i++) nvshmemx_barrier_all_block();
}

// ---------------------------------------------------------------- tests

static const int kIters = 10000;

static void launch_collective(const void *fn, dim3 grid, dim3 block, void **args, cudaStream_t s,
                              const char *name) {
    int st = nvshmemx_collective_launch(fn, grid, block, args, 0, s);
    if (st != 0) {
        fprintf(stderr, "nvshmem-perf: nvshmemx_collective_launch(%s) failed: status %d\n", name, st);
        exit(1);
    }
}

static void bandwidth(const Opts &o, bool get, int pe, cudaStream_t s, char *src, char *dst,
                      std::vector<Row> &rows) {
    const char *test = get ? "get_bw_block" : "put_bw_block";
    phase(test);
    // Correctness check once, at the largest size: dst must equal src afterwards.
    {
        size_t n = o.max_size;
        CUDA_CHECK(cudaMemsetAsync(src, 0x5a, n, s));
        CUDA_CHECK(cudaMemsetAsync(dst, 0x00, n, s));
        unsigned blocks = o.grid ? o.grid : default_grid(n);
        bw_block<<<blocks, 1024, 0, s>>>(get ? 1 : 0, dst, src, n, pe);
        CUDA_CHECK(cudaGetLastError());
        CUDA_CHECK(cudaStreamSynchronize(s));
        unsigned char head[16], tail[16];
        CUDA_CHECK(cudaMemcpy(head, dst, 16, cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaMemcpy(tail, dst + n - 16, 16, cudaMemcpyDeviceToHost));
        for (int i = 0; i < 16; i++)
            if (head[i] != 0x5a || tail[i] != 0x5a) {
                fprintf(stderr, "nvshmem-perf: %s: data check failed at %zu bytes\n", test, n);
                exit(1);
            }
    }
    // Doubling, like gpushmem-perf, so that both sweeps share every size (1 GiB included).
    for (uint64_t size = o.min_size; size <= o.max_size; size *= 2) {
        unsigned blocks = o.grid ? o.grid : default_grid(size);
        double ours = median_ms(s, o.warmup, o.reps, [&] {
            bw_block<<<blocks, 1024, 0, s>>>(get ? 1 : 0, dst, src, (size_t)size, pe);
            CUDA_CHECK(cudaGetLastError());
        });
        double base = median_ms(s, o.warmup, o.reps, [&] {
            CUDA_CHECK(cudaMemcpyAsync(dst, src, (size_t)size, cudaMemcpyDeviceToDevice, s));
        });
        auto gbs = [&](double ms) { return (double)size / (ms * 1e-3) / 1e9; };
        rows.push_back({test, size, gbs(ours), true, gbs(base), "GB/s"});
    }
}

// Bytes between the placements of `pingpong-placement` (as gpushmem-perf's:
// one 4 KiB page plus two 128-byte L2 lines).
static const size_t kPlacementStride = 4096 + 256;
static const int kPlacements = 16;

// One ping-pong figure, us per round trip: signal_op (put_signal = false) or
// putmem_signal_nbi, its signal words at sig[0..2] and (put_signal) its
// payload words at data[0..4]. Checks the final signal/payload words.
static double pingpong_us(const Opts &o, int pe, cudaStream_t s, uint64_t *sig, uint64_t *data,
                          bool put_signal) {
    int iters = kIters;
    uint64_t base = 0;  // grows by iters each launch: the signal words are never reset
    CUDA_CHECK(cudaMemset(sig, 0, 2 * sizeof(uint64_t)));
    CUDA_CHECK(cudaMemset(data, 0, 4 * sizeof(uint64_t)));
    CUDA_CHECK(cudaDeviceSynchronize());
    const char *name = put_signal ? "put_signal_pingpong" : "signal_pingpong";
    double ms = median_ms(s, o.warmup, o.reps, [&] {
        uint64_t b = base;
        base += (uint64_t)iters;
        if (put_signal) {
            void *args[] = {&data, &sig, &b, &iters, &pe};
            launch_collective((const void *)pingpong_put_signal, dim3(2), dim3(32), args, s, name);
        } else {
            void *args[] = {&sig, &b, &iters, &pe};
            launch_collective((const void *)pingpong_signal, dim3(2), dim3(32), args, s, name);
        }
    });
    CUDA_CHECK(cudaDeviceSynchronize());
    uint64_t got[2];
    CUDA_CHECK(cudaMemcpy(got, put_signal ? data : sig, sizeof got, cudaMemcpyDeviceToHost));
    if (got[0] != base || got[1] != base) {
        fprintf(stderr, "nvshmem-perf: %s: %s words %llu/%llu, expected %llu\n", name,
                put_signal ? "payload" : "signal", (unsigned long long)got[0], (unsigned long long)got[1],
                (unsigned long long)base);
        exit(1);
    }
    return ms * 1e3 / iters;
}

// pingpong: both ping-pongs at the heap's first words. pingpong-placement: at
// kPlacements positions kPlacementStride apart; rows placement_<kind>_{min,median,max}.
static void pingpong(const Opts &o, int pe, cudaStream_t s, bool placements, std::vector<Row> &rows) {
    int places = placements ? kPlacements : 1;
    size_t bytes = (size_t)places * kPlacementStride;
    char *sig = (char *)nvshmem_malloc(bytes);
    char *data = (char *)nvshmem_malloc(bytes);
    if (!sig || !data) fail("pingpong: nvshmem_malloc of the signal words returned NULL");
    nvshmem_barrier_all();
    for (int put_signal = 0; put_signal < 2; put_signal++) {
        const char *kind = put_signal ? "put_signal" : "signal";
        phase(put_signal ? "put_signal_pingpong" : "signal_pingpong");
        std::vector<double> us;
        for (int k = 0; k < places; k++) {
            size_t at = (size_t)k * kPlacementStride;
            us.push_back(pingpong_us(o, pe, s, (uint64_t *)(sig + at), (uint64_t *)(data + at), put_signal));
        }
        if (!placements) {
            rows.push_back({std::string(kind) + "_pingpong", 8, us[0], false, 0.0, "us/round trip"});
            continue;
        }
        std::sort(us.begin(), us.end());
        double stats[3] = {us.front(), us[us.size() / 2], us.back()};
        const char *names[3] = {"min", "median", "max"};
        for (int i = 0; i < 3; i++)
            rows.push_back({std::string("placement_") + kind + "_" + names[i], 8, stats[i], false, 0.0,
                            "us/round trip"});
    }
    nvshmem_barrier_all();
    nvshmem_free(data);
    nvshmem_free(sig);
}

static void barrier(const Opts &o, int npes, cudaStream_t s, std::vector<Row> &rows) {
    phase("barrier_all_block");
    int iters = kIters;
    double ms = median_ms(s, o.warmup, o.reps, [&] {
        void *args[] = {&iters};
        launch_collective((const void *)barrier_loop, dim3(1), dim3(32), args, s, "barrier_loop");
    });
    rows.push_back({"barrier_all_block", (uint64_t)npes, ms * 1e3 / iters, false, 0.0, "us (size = PEs)"});
}

// ---------------------------------------------------------------- main

static double wall_ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

static std::string fmt(double v) {
    char b[64];
    snprintf(b, sizeof b, "%.9g", v);
    return b;
}

// The bandwidth tests' symmetric buffers of --max-size bytes: src filled with 0x5a, dst zeroed.
static void bw_buffers(const Opts &o, char **src, char **dst) {
    *src = (char *)nvshmem_malloc(o.max_size);
    *dst = (char *)nvshmem_malloc(o.max_size);
    if (!*src || !*dst) fail("nvshmem_malloc of the bandwidth buffers returned NULL");
    CUDA_CHECK(cudaMemset(*src, 0x5a, o.max_size));
    CUDA_CHECK(cudaMemset(*dst, 0, o.max_size));
    CUDA_CHECK(cudaDeviceSynchronize());
}

// The results table on stdout.
static void print_rows(const std::vector<Row> &rows) {
    printf("%-26s %12s %14s %14s %7s  unit\n", "test", "size", "nvshmem", "cudaMemcpy", "ratio");
    for (const Row &r : rows) {
        char b[32] = "-", q[32] = "-";
        if (r.has_base) {
            snprintf(b, sizeof b, "%.2f", r.base);
            snprintf(q, sizeof q, "%.3f", r.value / r.base);
        }
        printf("%-26s %12llu %14.3f %14s %7s  %s\n", r.test.c_str(), (unsigned long long)r.size, r.value, b, q,
               r.unit.c_str());
    }
}

// The CSV file (header `test,size,nvshmem,baseline,unit`); false (after a message) on a write error.
static bool write_csv(const std::string &path, const std::vector<Row> &rows) {
    FILE *f = fopen(path.c_str(), "w");
    if (!f) {
        fprintf(stderr, "nvshmem-perf: writing %s: %s\n", path.c_str(), strerror(errno));
        return false;
    }
    fprintf(f, "test,size,nvshmem,baseline,unit\n");
    for (const Row &r : rows)
        fprintf(f, "%s,%llu,%s,%s,%s\n", r.test.c_str(), (unsigned long long)r.size, fmt(r.value).c_str(),
                r.has_base ? fmt(r.base).c_str() : "", r.unit.c_str());
    if (fclose(f) != 0) {
        fprintf(stderr, "nvshmem-perf: writing %s: %s\n", path.c_str(), strerror(errno));
        return false;
    }
    printf("wrote %s\n", path.c_str());
    return true;
}

#ifndef NVSHMEM_PERF_NO_MAIN  // perf_multi.cu includes this file for its kernels and helpers
int main(int argc, char **argv) {
    Opts o = parse(argc, argv);
    signal(SIGALRM, on_alarm);
    const bool all = o.what == "all";
    const bool want_bw = all || o.what == "put-bw" || o.what == "get-bw";

    // Environment, before nvshmem_init reads it. NVLink multicast must stay off on
    // the shared machines; the heap must hold 1 GiB (malloc test) and later src + dst.
    setenv("NVSHMEM_DISABLE_NVLS", "1", 1);
    const uint64_t need = std::max<uint64_t>(want_bw ? 2 * o.max_size : 0, 1ull << 30) + (256ull << 20);
    {
        const char *cur = getenv("NVSHMEM_SYMMETRIC_SIZE");
        uint64_t have = 0;
        if (!cur) {
            setenv("NVSHMEM_SYMMETRIC_SIZE", std::to_string(need).c_str(), 1);
        } else if (parse_size(cur, &have) && have < need) {
            fprintf(stderr, "nvshmem-perf: raising NVSHMEM_SYMMETRIC_SIZE from %s to %llu (these tests use that much)\n",
                    cur, (unsigned long long)need);
            setenv("NVSHMEM_SYMMETRIC_SIZE", std::to_string(need).c_str(), 1);
        }
    }
    // One PE on one GPU: no network transport is needed (skips probing for IB).
    setenv("NVSHMEM_REMOTE_TRANSPORT", "none", 0);

    phase("init");
    CUDA_CHECK(cudaSetDevice(0));
    CUDA_CHECK(cudaFree(0));  // a context before nvshmem_init (it fails with "busy" otherwise)

    auto t0 = std::chrono::steady_clock::now();
    int provided = 0;
    // Same path as nvshmem_init(); on failure NVSHMEM itself prints "aborting due to error in
    // nvshmemi_init_thread" and exits with status 255 (NVSHMEM_DEBUG=INFO tells more).
    NVSHMEM_CHECK(nvshmem_init_thread(NVSHMEM_THREAD_SERIALIZED, &provided));
    double init_ms = wall_ms_since(t0);

    int pe = nvshmem_my_pe();
    int npes = nvshmem_n_pes();
    if (npes != 1) {
        if (pe == 0)
            fprintf(stderr,
                    "nvshmem-perf: %d PEs: run it as one plain process (no launcher): every test "
                    "here is on one PE\n",
                    npes);
        nvshmem_finalize();
        return 2;
    }

    // As gpushmem-perf init: the first (cold) sample, and the median of --reps
    // warm samples after it (each a malloc, timed, then a free).
    phase("malloc_1gib");
    std::vector<double> malloc_samples;
    for (int i = 0; i <= o.reps; i++) {
        t0 = std::chrono::steady_clock::now();
        void *big = nvshmem_malloc(1ull << 30);
        malloc_samples.push_back(wall_ms_since(t0));
        if (!big) fail("nvshmem_malloc(1 GiB) returned NULL (NVSHMEM_SYMMETRIC_SIZE too small?)");
        nvshmem_free(big);
    }
    double malloc_first_ms = malloc_samples[0];
    std::vector<double> warm(malloc_samples.begin() + 1, malloc_samples.end());
    std::sort(warm.begin(), warm.end());
    double malloc_ms = warm[warm.size() / 2];  // upper middle, as gpushmem-perf's median

    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    int rt = 0, drv = 0;
    CUDA_CHECK(cudaRuntimeGetVersion(&rt));
    CUDA_CHECK(cudaDriverGetVersion(&drv));
#if defined(NVSHMEM_VENDOR_MAJOR_VERSION) && defined(NVSHMEM_VENDOR_MINOR_VERSION) && \
    defined(NVSHMEM_VENDOR_PATCH_VERSION)
    printf("NVSHMEM %d.%d.%d (headers)", NVSHMEM_VENDOR_MAJOR_VERSION, NVSHMEM_VENDOR_MINOR_VERSION,
           NVSHMEM_VENDOR_PATCH_VERSION);
#else
    printf("NVSHMEM (version macros not found in headers)");
#endif
    printf(", %d PE, %s (%d SMs), CUDA runtime %d, driver %d\n", npes, prop.name,
           prop.multiProcessorCount, rt, drv);
    printf("NVSHMEM_SYMMETRIC_SIZE=%s NVSHMEM_DISABLE_NVLS=%s NVSHMEM_REMOTE_TRANSPORT=%s\n",
           getenv("NVSHMEM_SYMMETRIC_SIZE"), getenv("NVSHMEM_DISABLE_NVLS"),
           getenv("NVSHMEM_REMOTE_TRANSPORT"));
    printf("reps %d, warmup %d, max size %llu\n", o.reps, o.warmup, (unsigned long long)o.max_size);
    fflush(stdout);

    std::vector<Row> rows;
    rows.push_back({"init", 1, init_ms, false, 0.0, "ms"});
    rows.push_back({"malloc_1gib_first", 1, malloc_first_ms, false, 0.0, "ms"});
    rows.push_back({"malloc_1gib", 1, malloc_ms, false, 0.0, "ms"});

    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

    if (want_bw) {
        char *src, *dst;
        bw_buffers(o, &src, &dst);
        if (all || o.what == "put-bw") bandwidth(o, false, pe, s, src, dst, rows);
        if (all || o.what == "get-bw") bandwidth(o, true, pe, s, src, dst, rows);
        CUDA_CHECK(cudaDeviceSynchronize());
        nvshmem_free(dst);
        nvshmem_free(src);
    }
    if (all || o.what == "pingpong") pingpong(o, pe, s, false, rows);
    if (o.what == "pingpong-placement") pingpong(o, pe, s, true, rows);
    if (all || o.what == "barrier") barrier(o, npes, s, rows);
    CUDA_CHECK(cudaDeviceSynchronize());
    alarm(0);

    print_rows(rows);
    printf("(barrier_all_block is on 1 PE: NVSHMEM here runs one PE; gpushmem's rows are for 2-8 PEs)\n");

    if (!o.csv.empty() && !write_csv(o.csv, rows)) return 1;

    CUDA_CHECK(cudaStreamDestroy(s));
    nvshmem_finalize();
    return 0;
}
#endif  // NVSHMEM_PERF_NO_MAIN
