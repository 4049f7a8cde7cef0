// nvshmem-perf-multi: the NVSHMEM side of the cross-GPU comparison (issue 8).
//
// N PEs, one process per GPU (PE r on GPU r % device count), started by this
// program itself: it forks the N processes, PE 0 makes an NVSHMEM unique ID
// and hands it to the others through pipes, and every PE joins with
// nvshmemx_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID) (the pip package has no
// nvshmrun). Output (table, CSV) comes from PE 0; the exit status is the
// worst of the PEs' (a PE that fails makes the parent kill the others).
//
//   nvshmem-perf-multi --npes N [all|put-bw|get-bw|pingpong|barrier]
//                      [--min-size B] [--max-size B] [--grid G] [--reps N] [--warmup N]
//                      [--csv FILE] [--timeout S]
//
// - put-bw / get-bw: PE 0 moves S bytes to / from PE 1 (nvshmemx_*mem_nbi_block,
//   grid as nvshmem-perf), beside cudaMemcpyAsync between the same two buffers
//   (PE 1's through nvshmem_ptr: a peer copy). Rows put_bw_block / get_bw_block.
//   Then both PEs at once, each to / from the other, lined up by a barrier
//   before every run: rows *_bidir, GB/s = 2 S / the slower PE's median.
// - pingpong: PE 0 and PE 1 (thread 0 of one block each): nvshmemx_signal_op
//   SET / nvshmem_signal_wait_until GE (signal_pingpong), and
//   nvshmem_putmem_signal_nbi of an unchanging 8-byte word (put_signal_pingpong),
//   us per round trip.
// - barrier: nvshmemx_barrier_all_block x 10^4 over the N PEs.
//
// Not run yet on a machine of several GPUs (written while only one was lent).

#define NVSHMEM_PERF_NO_MAIN
#include "perf.cu"

#include <sys/types.h>
#include <sys/wait.h>

// ---------------------------------------------------------------- kernels

// Thread 0 of PE 0 and PE 1: 10^4 round trips on one signal word per PE.
__global__ void pingpong_signal_pes(uint64_t *sig, uint64_t base, int iters, int me) {
    if (threadIdx.x != 0 || me > 1) return;
    int peer = 1 - me;
    for (int i = 1; i <= iters; i++) {
        uint64_t v = base + (uint64_t)i;
        if (me == 1) nvshmem_signal_wait_until(sig, NVSHMEM_CMP_GE, v);
        nvshmemx_signal_op(sig, v, NVSHMEM_SIGNAL_SET, peer);
        if (me == 0) nvshmem_signal_wait_until(sig, NVSHMEM_CMP_GE, v);
    }
    nvshmem_quiet();
}

// As pingpong_signal_pes, each message data[1] (unchanging) put into the
// peer's data[0] with its signal.
__global__ void pingpong_put_signal_pes(uint64_t *data, uint64_t *sig, uint64_t base, int iters, int me) {
    if (threadIdx.x != 0 || me > 1) return;
    int peer = 1 - me;
    for (int i = 1; i <= iters; i++) {
        uint64_t v = base + (uint64_t)i;
        if (me == 1) nvshmem_signal_wait_until(sig, NVSHMEM_CMP_GE, v);
        nvshmem_putmem_signal_nbi(&data[0], &data[1], sizeof(uint64_t), sig, v, NVSHMEM_SIGNAL_SET, peer);
        if (me == 0) nvshmem_signal_wait_until(sig, NVSHMEM_CMP_GE, v);
    }
    nvshmem_quiet();
}

// ---------------------------------------------------------------- tests

static unsigned grid_for(const Opts &o, uint64_t size) {
    return o.grid ? o.grid : default_grid(size);
}

// The largest of every PE's `ms`: each PE puts its value into PE 0's slot array.
static double slowest(double *slots, int me, int npes, double ms) {
    nvshmem_double_p(&slots[me], ms, 0);
    nvshmem_quiet();
    nvshmem_barrier_all();
    double worst = ms;
    if (me == 0) {
        std::vector<double> all(npes);
        CUDA_CHECK(cudaMemcpy(all.data(), slots, npes * sizeof(double), cudaMemcpyDeviceToHost));
        for (double v : all) worst = std::max(worst, v);
    }
    nvshmem_barrier_all();
    return worst;
}

static void bandwidth_pes(const Opts &o, bool get, int me, int npes, cudaStream_t s, char *src, char *dst,
                          double *slots, std::vector<Row> &rows) {
    const std::string test = get ? "get_bw_block" : "put_bw_block";
    // The watchdog reads the phase name at any time: keep it in static storage.
    static std::string phase_name;
    phase_name = test;
    phase(phase_name.c_str());
    int peer = me == 0 ? 1 : 0;
    char *peer_src = (char *)nvshmem_ptr(src, peer);
    char *peer_dst = (char *)nvshmem_ptr(dst, peer);
    if (me <= 1 && (!peer_src || !peer_dst)) fail("nvshmem_ptr returned NULL: no peer mapping between the two GPUs");
    // memcpy baseline between the same two buffers as the kernel.
    char *to = get ? dst : peer_dst;
    const char *from = get ? peer_src : src;
    nvshmem_barrier_all();
    if (me == 0) {
        for (uint64_t size = o.min_size; size <= o.max_size; size *= 2) {
            unsigned blocks = grid_for(o, size);
            double ours = median_ms(s, o.warmup, o.reps, [&] {
                bw_block<<<blocks, 1024, 0, s>>>(get ? 1 : 0, dst, src, (size_t)size, 1);
                CUDA_CHECK(cudaGetLastError());
            });
            double base = median_ms(s, o.warmup, o.reps, [&] {
                CUDA_CHECK(cudaMemcpyAsync(to, from, (size_t)size, cudaMemcpyDeviceToDevice, s));
            });
            auto gbs = [&](double ms) { return (double)size / (ms * 1e-3) / 1e9; };
            rows.push_back({test, size, gbs(ours), true, gbs(base), "GB/s"});
        }
    }
    CUDA_CHECK(cudaDeviceSynchronize());
    nvshmem_barrier_all();
    // Both directions: PE 0 and PE 1 at once, lined up by a host barrier before each run.
    phase_name = test + "_bidir";
    phase(phase_name.c_str());
    for (uint64_t size = o.min_size; size <= o.max_size; size *= 2) {
        unsigned blocks = grid_for(o, size);
        auto line_up = [] { nvshmem_barrier_all(); };
        auto run_kernel = [&] {
            if (me <= 1) {
                bw_block<<<blocks, 1024, 0, s>>>(get ? 1 : 0, dst, src, (size_t)size, peer);
                CUDA_CHECK(cudaGetLastError());
            }
        };
        auto run_memcpy = [&] {
            if (me <= 1) CUDA_CHECK(cudaMemcpyAsync(to, from, (size_t)size, cudaMemcpyDeviceToDevice, s));
        };
        double ours = slowest(slots, me, npes, median_ms_pre(s, o.warmup, o.reps, line_up, run_kernel));
        double base = slowest(slots, me, npes, median_ms_pre(s, o.warmup, o.reps, line_up, run_memcpy));
        auto gbs = [&](double ms) { return 2.0 * (double)size / (ms * 1e-3) / 1e9; };
        if (me == 0) rows.push_back({test + "_bidir", size, gbs(ours), true, gbs(base), "GB/s"});
    }
    CUDA_CHECK(cudaDeviceSynchronize());
    nvshmem_barrier_all();
}

static void pingpong_pes(const Opts &o, int me, cudaStream_t s, std::vector<Row> &rows) {
    uint64_t *sig = (uint64_t *)nvshmem_malloc(2 * sizeof(uint64_t));
    uint64_t *data = (uint64_t *)nvshmem_malloc(2 * sizeof(uint64_t));
    if (!sig || !data) fail("pingpong: nvshmem_malloc of the signal words returned NULL");
    CUDA_CHECK(cudaMemset(sig, 0, 2 * sizeof(uint64_t)));
    uint64_t init[2] = {0, 0x9a710ad0000ull + (uint64_t)me};
    CUDA_CHECK(cudaMemcpy(data, init, sizeof init, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaDeviceSynchronize());
    nvshmem_barrier_all();
    int iters = kIters;
    struct Case {
        const char *name;
        bool put;
        uint64_t *sig;
    } cases[] = {{"signal_pingpong", false, &sig[0]}, {"put_signal_pingpong", true, &sig[1]}};
    for (const Case &c : cases) {
        phase(c.name);
        uint64_t base = 0;
        uint64_t *word = c.sig;
        auto line_up = [] { nvshmem_barrier_all(); };
        double ms = median_ms_pre(s, o.warmup, o.reps, line_up, [&] {
            uint64_t b = base;
            base += (uint64_t)iters;
            if (c.put)
                pingpong_put_signal_pes<<<1, 32, 0, s>>>(data, word, b, iters, me);
            else
                pingpong_signal_pes<<<1, 32, 0, s>>>(word, b, iters, me);
            CUDA_CHECK(cudaGetLastError());
        });
        CUDA_CHECK(cudaDeviceSynchronize());
        nvshmem_barrier_all();
        uint64_t got = 0;
        CUDA_CHECK(cudaMemcpy(&got, word, sizeof got, cudaMemcpyDeviceToHost));
        if (me <= 1 && got != base) {
            fprintf(stderr, "nvshmem-perf-multi: PE %d: %s: signal %llu, expected %llu\n", me, c.name,
                    (unsigned long long)got, (unsigned long long)base);
            exit(1);
        }
        if (me == 0) rows.push_back({c.name, 8, ms * 1e3 / iters, false, 0.0, "us/round trip"});
    }
    uint64_t d0 = 0;
    CUDA_CHECK(cudaMemcpy(&d0, data, sizeof d0, cudaMemcpyDeviceToHost));
    if (me <= 1 && d0 != 0x9a710ad0000ull + (uint64_t)(1 - me)) {
        fprintf(stderr, "nvshmem-perf-multi: PE %d: put_signal_pingpong: payload %#llx is not PE %d's\n", me,
                (unsigned long long)d0, 1 - me);
        exit(1);
    }
    nvshmem_barrier_all();
    nvshmem_free(data);
    nvshmem_free(sig);
}

// ---------------------------------------------------------------- one PE

static int run_pe(const Opts &o, int me, int npes, const nvshmemx_uniqueid_t &id) {
    int ndev = 0;
    CUDA_CHECK(cudaGetDeviceCount(&ndev));
    if (ndev < 1) fail("no CUDA device");
    CUDA_CHECK(cudaSetDevice(me % ndev));
    CUDA_CHECK(cudaFree(0));  // a context before NVSHMEM's init (it fails with "busy" otherwise)

    phase("init");
    auto t0 = std::chrono::steady_clock::now();
    nvshmemx_init_attr_t attr = NVSHMEMX_INIT_ATTR_INITIALIZER;
    NVSHMEM_CHECK(nvshmemx_set_attr_uniqueid_args(me, npes, &id, &attr));
    NVSHMEM_CHECK(nvshmemx_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID, &attr));
    double init_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (nvshmem_my_pe() != me || nvshmem_n_pes() != npes) {
        fprintf(stderr, "nvshmem-perf-multi: PE %d of %d joined as PE %d of %d\n", me, npes, nvshmem_my_pe(),
                nvshmem_n_pes());
        return 1;
    }
    if (me == 0) {
        cudaDeviceProp prop;
        CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
        printf("NVSHMEM, %d PEs on %d GPU(s) (%s), reps %d, warmup %d\n", npes, std::min(npes, ndev), prop.name,
               o.reps, o.warmup);
        fflush(stdout);
    }
    std::vector<Row> rows;
    rows.push_back({"init", (uint64_t)npes, init_ms, false, 0.0, "ms (size = PEs)"});
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    double *slots = (double *)nvshmem_malloc(npes * sizeof(double));
    if (!slots) fail("nvshmem_malloc of the timing slots returned NULL");
    const bool all = o.what == "all";
    if (all || o.what == "put-bw" || o.what == "get-bw") {
        char *src, *dst;
        bw_buffers(o, &src, &dst);
        if (all || o.what == "put-bw") bandwidth_pes(o, false, me, npes, s, src, dst, slots, rows);
        if (all || o.what == "get-bw") bandwidth_pes(o, true, me, npes, s, src, dst, slots, rows);
        nvshmem_free(dst);
        nvshmem_free(src);
    }
    if (all || o.what == "pingpong") pingpong_pes(o, me, s, rows);
    if (all || o.what == "barrier") {
        // The same kernel and figure as nvshmem-perf's barrier row, now over N PEs.
        barrier(o, npes, s, rows);
    }
    CUDA_CHECK(cudaDeviceSynchronize());
    alarm(0);
    if (me == 0) {
        print_rows(rows);
        if (!o.csv.empty() && !write_csv(o.csv, rows)) return 1;
    }
    nvshmem_free(slots);
    CUDA_CHECK(cudaStreamDestroy(s));
    nvshmem_finalize();
    return 0;
}

// ---------------------------------------------------------------- launcher

static bool read_all(int fd, void *p, size_t n) {
    char *c = (char *)p;
    while (n > 0) {
        ssize_t r = read(fd, c, n);
        if (r <= 0) return false;
        c += r;
        n -= (size_t)r;
    }
    return true;
}

int main(int argc, char **argv) {
    // --npes N is ours; the rest is nvshmem-perf's command line.
    int npes = 2;
    std::vector<char *> rest = {argv[0]};
    for (int i = 1; i < argc; i++) {
        if (std::string(argv[i]) == "--npes" && i + 1 < argc) {
            long v;
            if (!parse_int(argv[++i], 2, &v)) {
                fprintf(stderr, "nvshmem-perf-multi: --npes must be an integer >= 2\n");
                return 2;
            }
            npes = (int)v;
        } else {
            rest.push_back(argv[i]);
        }
    }
    Opts o = parse((int)rest.size(), rest.data());
    if (o.what == "init") o.what = "barrier";  // init is measured always
    signal(SIGALRM, on_alarm);
    setenv("NVSHMEM_DISABLE_NVLS", "1", 1);
    setenv("NVSHMEM_REMOTE_TRANSPORT", "none", 0);           // one host: P2P only
    setenv("NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME", "lo", 0);    // one host: loopback
    setenv("NVSHMEM_SYMMETRIC_SIZE", std::to_string(2 * o.max_size + (256ull << 20)).c_str(), 0);

    // No CUDA call before fork: each PE process initializes its own. PE 0 makes
    // the unique ID (its bootstrap listens on it) and sends it up a pipe; the
    // other PEs are forked after that and inherit it.
    std::vector<pid_t> pids(npes, -1);
    int from_pe0[2];
    if (pipe(from_pe0) != 0) fail("pipe");
    pids[0] = fork();
    if (pids[0] < 0) fail("fork");
    if (pids[0] == 0) {
        close(from_pe0[0]);
        nvshmemx_uniqueid_t id = NVSHMEMX_UNIQUEID_INITIALIZER;
        NVSHMEM_CHECK(nvshmemx_get_uniqueid(&id));
        // One write of 128 bytes (< PIPE_BUF) to a pipe is atomic: all of it or an error.
        if (write(from_pe0[1], &id, sizeof id) != (ssize_t)sizeof id) fail("PE 0: writing the unique ID");
        close(from_pe0[1]);
        _exit(run_pe(o, 0, npes, id));
    }
    close(from_pe0[1]);
    nvshmemx_uniqueid_t id = NVSHMEMX_UNIQUEID_INITIALIZER;
    if (!read_all(from_pe0[0], &id, sizeof id)) {
        kill(pids[0], SIGKILL);
        fail("PE 0 did not send the unique ID");
    }
    close(from_pe0[0]);
    for (int r = 1; r < npes; r++) {
        pids[r] = fork();
        if (pids[r] < 0) fail("fork");
        if (pids[r] == 0) _exit(run_pe(o, r, npes, id));
    }
    // Wait for all; the first failure ends the job.
    int worst = 0, left = npes;
    while (left > 0) {
        int st = 0;
        pid_t pid = waitpid(-1, &st, 0);
        if (pid < 0) break;
        left--;
        int r = (int)(std::find(pids.begin(), pids.end(), pid) - pids.begin());
        int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
        if (code != 0) {
            fprintf(stderr, "nvshmem-perf-multi: PE %d exited with status %d; ending the job\n", r, code);
            if (worst == 0)
                for (pid_t p : pids)
                    if (p > 0 && p != pid) kill(p, SIGKILL);
            worst = std::max(worst, code);
        }
    }
    return worst;
}
