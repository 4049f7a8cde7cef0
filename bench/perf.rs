//! gpushmem-perf: measurements in the manner of NVSHMEM's perftests, PEs as
//! threads of this process (on one GPU they run concurrently; several GPUs are
//! used round-robin when present). Every device figure is the median of
//! `--reps` timed runs after `--warmup` runs, timed with CUDA events on the
//! measuring PE's stream; host figures are wall-clock medians.
//!
//! Engines: the kernels are built for the engine `GPUSHMEM_ENGINE` names at
//! build time (`GPUSHMEM_ENGINE=nvshmem cargo build --release --bin
//! gpushmem-perf --target-dir target/nvshmem`: linked with NVSHMEM's device
//! library, see docs/multinode.md), and the host runs on the same one
//! (`GPUSHMEM_ENGINE` at run time may be unset or must name it). The NVSHMEM
//! engine has one PE per process, so there every job is this process's one PE:
//! `--one-pe` is implied, `all` runs only the one-PE subcommands (the others are
//! listed as skipped), and naming one without a one-PE form is refused. The
//! engine, the NVSHMEM version and the shape are printed first and written into
//! the CSV (a first `# gpushmem-perf engine=… one_pe=…` line) and the JSON.
//!
//! ```text
//! gpushmem-perf [SUBCOMMAND ...] [OPTIONS]          (no subcommand = all)
//! gpushmem-perf plot RESULTS.csv --png FILE          (re-plot a CSV; needs no GPU)
//! ```
//!
//! Subcommands (test names as in the table/CSV; `size` column in brackets):
//! - `put-bw` / `get-bw` → `put_bw_<scope>`, `get_bw_<scope>` [bytes]: PE 0 moves
//!   S bytes to / from PE 1 (S = `--min-size` … `--max-size`, doubling) in one
//!   launch that ends with `quiet_block`; `--iters` launches per timed span. Scope `block`
//!   (default): one chunk per block, `putmem_nbi_block`/`getmem_nbi_block`;
//!   `warp`: one chunk per warp, `*_nbi_warp`; `thread`: one chunk per thread,
//!   `putmem_nbi`/`getmem_nbi`; `block_cs`, `block_x8` (put only): hand-written
//!   diagnostic copies (streaming stores; eight loads in flight); `block_gs` (put
//!   only): `putmem_nbi_block` over 64 KiB pieces, grid-strided. Grid = `--grid` or the
//!   default rule (`bandwidth::default_blocks`: 64–128 blocks up to 64 MiB, then S / 64 KiB;
//!   at most 4224; NVSHMEM caps at 1056) × `--block` threads (default 512 for the block
//!   scopes, 1024 for warp and thread; NVSHMEM's put_bw uses 1024). GB/s = S·iters /
//!   time (10^9 B/s). Beside each point, `cuMemcpyDtoDAsync` of the same S (·iters)
//!   between the same two buffers (the peer's through `Shmem::ptr`) on the same
//!   stream in the same run (the `cuMemcpy` column; a peer copy when the PEs are
//!   on different GPUs; until 2026-12-02 it copied within PE 0's heap). With PEs on
//!   one GPU both are device-local copies (peer = same HBM). `--bidir` adds
//!   `<op>_bw_<scope>_bidir`: both PEs move S to / from each other at once, lined
//!   up by a barrier before each run; GB/s = 2·S·iters / the slower PE's median. The same buffers are reused
//!   at every repetition, so 16–64 MiB stay in the H200's 60 MB L2 and read above
//!   HBM speed (NVSHMEM's figures show the same); sizes ≥ 256 MiB measure HBM.
//! - `latency` → `p_latency`, `g_latency` [8]: thread 0 of PE 0 does 10^4 ×
//!   (`p` of a u64 to PE 1, then `quiet`), or 10^4 dependent `g`s (a pointer
//!   chase) from PE 1, in one launch; µs per operation.
//! - `pingpong` → [8], round trips between PE 0 and PE 1, 10^4 per launch; µs per
//!   round trip: `put_signal_pingpong_like_nvshmem` (8-byte `putmem_signal_nbi` +
//!   signal SET, the source rewritten and the received payload re-stored every hop:
//!   NVSHMEM's kernel's work, like for like with its `put_signal_pingpong`),
//!   `put_signal_pingpong_src_once` (the row called `put_signal_pingpong` before
//!   2026-12-07: source written once, the one-`u64` fast path),
//!   `put_signal_pingpong_echo_1elem` (NVSHMEM's work through the one-`u64` path),
//!   `signal_pingpong` (ordered `signal_op`), `signal_relaxed_pingpong`
//!   (`signal_op_relaxed`, translated per call: like for like with NVSHMEM's
//!   `signal_pingpong`) and `signal_relaxed_peer_pingpong` (through a `PeerSignal`,
//!   translated once: our extra).
//! - `scopes` → `pingpong_mode_<k>_…` and `signal_pingpong` [8]: the same ping-pong
//!   with each ordering choice spelled out (relaxed floor, release/acquire and
//!   fences at `.sys` and `.gpu` scope, the library's `put_signal` and `signal_op`):
//!   what each memory-model guarantee costs; see the kernel `pingpong_mode`.
//! - `pingpong-blocks` → `blocks_pingpong_mode_<k>_…` [8]: the modes of `scopes`
//!   between two blocks of one kernel of one PE (NVSHMEM's single-GPU perftest
//!   shape). One kernel: the form to profile with Nsight Compute
//!   (`ncu -k pingpong_blocks gpushmem-perf pingpong-blocks`), which serializes
//!   kernels and so cannot run the two-PE ping-pong.
//! - `pingpong-placement` → `placement_<mode>_{min,median,max}` [8]: the
//!   `pingpong-blocks` modes relaxed floor, volatile floor, hand-written
//!   release/acquire, library `signal_op` and library `put_signal_nbi` with the
//!   payload and signal words at `--placements` (16) positions 4352 B apart
//!   (a new page and L2 line each): how much of a ping-pong figure is where its
//!   words sit (their L2 slice) rather than its instructions.
//! - `barrier` → `barrier_all_block`, `sync_all_block` [PEs]: 10^4 barriers per
//!   launch by one 32-thread block per PE, for each PE count of `--pes` (2,4,8); µs each.
//! - `atomic` → `atomic_fetch_add_latency` [8]: 10^4 dependent u64
//!   `atomic_fetch_add`s by one thread of PE 0 on PE 1, µs each;
//!   `atomic_add_throughput` [threads]: every thread of a grid (`--grid`, default
//!   one block per SM, × `--block`, default 1024) does 64 `atomic_add`s on its own
//!   counter on PE 1, Mops/s; `atomic_add_throughput_one_counter`: the same, all on
//!   one counter. Every final counter value is checked (a wrong count fails the subcommand).
//! - `collective` → `allreduce_sum_f32`, `allreduce_sum_bf16` [bytes per PE, 4 KiB …
//!   `--coll-max-size` (64 MiB), ×4], `fcollect`, `alltoall` [bytes per PE block,
//!   4 KiB … coll-max-size / PEs]: the stream-ordered collectives over `--npes`
//!   (8) PEs; algbw GB/s and, as `<test>_busbw`, bus bandwidth as nccl-tests
//!   defines it (allreduce ×2(n−1)/n, the others ×(n−1)/n); time = slowest PE's
//!   median per operation, PEs lined up by a stream-ordered barrier before each
//!   timed span of up to 16 back-to-back operations. Every result is checked
//!   against a CPU reference (a mismatch fails the subcommand). First
//!   `floor_launch_time` and `floor_barrier_time` [0]: µs per empty kernel and
//!   per `barrier_all_on_stream` on every PE, timed the same way (what a small
//!   collective cannot go below when the PEs share a GPU).
//! - `init` → `init`, `malloc_1gib_first`, `malloc_1gib`, `calloc_1gib_first`,
//!   `calloc_1gib` [PEs]: wall-clock ms of setting up `--npes` (8) PEs with a
//!   1 GiB + 64 MiB heap each, and of a collective 1 GiB malloc / calloc (slowest
//!   PE): `_first` the first, cold sample; without it the median of the warm ones.
//!
//! `--one-pe` (always on the NVSHMEM engine): the one-PE forms, the shapes of
//! NVSHMEM's one-PE program bench/nvshmem/perf.cu: `put-bw`/`get-bw` move S bytes
//! between two buffers of PE 0's heap (to / from PE 0 itself; `cuMemcpy` the same
//! copy); `pingpong` → its rows [8] between two blocks of PE 0 (`pingpong-blocks`
//! modes 17, 0, 18, 7, 10, 13); `barrier` and `init` on 1 PE
//! [size 1]. `pingpong-blocks` and `pingpong-placement` are one PE anyway;
//! `latency`, `scopes`, `atomic` and `collective` have no one-PE form.
//!
//! Options: `--min-size`/`--max-size BYTES` (8 / 1g), `--scope thread,warp,block|all`
//! (block), `--grid N`, `--max-grid N` (4224; 1056 is NVSHMEM's rule), `--block N`,
//! `--iters N` (1), `--reps N` (10), `--warmup N`
//! (3), `--pes LIST` (2,4,8), `--npes N` (8), `--coll-max-size BYTES` (64m), `--one-pe`;
//! output: the header and the table on stdout always, `--csv FILE` (`test,size,gpushmem,baseline,unit`
//! after the `# gpushmem-perf …` line),
//! `--json FILE`, `--png FILE` (bandwidth against size of every `*_bw_*` test and
//! its baseline). A progress bar on stderr while sweeps run, when stderr is a
//! terminal (`GPUSHMEM_PROGRESS=0` hides it there too). `--help` lists all of
//! this. A failing subcommand is reported with its name and the others still
//! run; the exit status is then 1 (2 for bad usage, an engine mismatch or no GPU).

#[path = "perf/atomic.rs"]
mod atomic;
#[path = "perf/bandwidth.rs"]
mod bandwidth;
#[path = "perf/collective.rs"]
mod collective;
#[path = "perf/common.rs"]
mod common;
#[path = "perf/engine.rs"]
mod engine;
#[path = "perf/init.rs"]
mod init;
#[path = "perf/latency.rs"]
mod latency;
#[path = "perf/opts.rs"]
mod opts;
#[path = "perf/output.rs"]
mod output;
#[path = "perf/plot.rs"]
mod plot;
#[path = "perf/progress.rs"]
mod progress;

use common::{BenchResult, Row};
use std::process::ExitCode;

const PLOT_TITLE: &str = "gpushmem put/get bandwidth";

fn run_one(name: &str, o: &opts::Opts) -> BenchResult<Vec<Row>> {
    match name {
        "put-bw" => bandwidth::run(o, false),
        "get-bw" => bandwidth::run(o, true),
        "latency" => latency::p_g(o),
        "pingpong" => latency::pingpong(o),
        "scopes" => latency::scopes(o, false),
        "pingpong-blocks" => latency::scopes(o, true),
        "pingpong-placement" => latency::placement(o),
        "barrier" => latency::barrier(o),
        "atomic" => atomic::run(o),
        "collective" => collective::run(o),
        "init" => init::run(o),
        other => Err(format!("unknown subcommand {other}").into()),
    }
}

/// Writes `data` to `path`; on failure prints why and returns false.
fn write_file(path: &str, data: &[u8]) -> bool {
    match std::fs::write(path, data) {
        Ok(()) => true,
        Err(e) => {
            eprintln!("gpushmem-perf: writing {path}: {e}");
            false
        }
    }
}

fn write_png(path: &str, rows: &[Row]) -> bool {
    match plot::png(rows, PLOT_TITLE) {
        Ok(Some(png)) => write_file(path, &png),
        Ok(None) => {
            eprintln!("gpushmem-perf: --png {path}: no *_bw_* results to plot; not written");
            true
        }
        Err(e) => {
            eprintln!("gpushmem-perf: --png {path}: {e}");
            false
        }
    }
}

/// Heap per PE that subcommand `name` asks for with `o`.
fn heap_of(name: &str, o: &opts::Opts) -> u64 {
    match name {
        "put-bw" | "get-bw" => bandwidth::heap(o),
        "init" => init::HEAP,
        _ => latency::HEAP,
    }
}

/// On the NVSHMEM engine every job initialises NVSHMEM anew in this process,
/// and gpushmem sets `NVSHMEM_SYMMETRIC_SIZE` from the first job's heap only
/// where it is unset: set it here, before the first job, for the largest heap
/// of this run (+ 512 MiB, gpushmem's margin), so that no later job outgrows
/// it. A value the user set stays (a too small one fails naming it).
fn nvshmem_heap(o: &opts::Opts) {
    const VAR: &str = "NVSHMEM_SYMMETRIC_SIZE";
    if std::env::var_os(VAR).is_none() {
        let need = o.what.iter().map(|w| heap_of(w, o)).max().unwrap_or(latency::HEAP);
        std::env::set_var(VAR, (need + (512 << 20)).to_string());
    }
    println!("gpushmem-perf: {VAR}={}", std::env::var(VAR).unwrap_or_default());
}

fn main() -> ExitCode {
    // Jobs of 2 to 8 PEs as threads run one after another in this process, and
    // the first CUDA context fixes the hardware queue count: size it for the
    // largest (two queues per PE; gpushmem refuses a job larger than the context).
    if std::env::var_os("CUDA_DEVICE_MAX_CONNECTIONS").is_none() {
        std::env::set_var("CUDA_DEVICE_MAX_CONNECTIONS", "16");
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    // Bad usage: clap prints the error and the usage and exits 2 (`--help`: the help, 0).
    let o = opts::parse(args.clone()).unwrap_or_else(|e| e.exit());
    if let Some(csv) = &o.plot_from {
        let rows = match std::fs::read_to_string(csv).map_err(|e| e.to_string()).and_then(|t| output::parse_csv(&t)) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("gpushmem-perf: plot: reading {csv}: {e}");
                return ExitCode::from(1);
            }
        };
        let ok = write_png(o.png.as_deref().unwrap_or_default(), &rows);
        return if ok { ExitCode::SUCCESS } else { ExitCode::from(1) };
    }
    // The engine: the kernels' (GPUSHMEM_ENGINE at run time unset or the same).
    let engine = match engine::resolve() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("gpushmem-perf: {e}");
            return ExitCode::from(2);
        }
    };
    let mut o = o;
    if let Err(e) = o.for_engine(engine) {
        eprintln!("gpushmem-perf: {e}");
        return ExitCode::from(2);
    }
    let meta = output::Meta {
        engine: engine::name(engine),
        nvshmem: if engine == gpushmem::Engine::Nvshmem { engine::KERNELS_NVSHMEM } else { None },
        one_pe: o.one_pe,
        max_grid: o.max_grid,
        reps: o.reps,
        warmup: o.warmup,
        skipped: o.skipped.clone(),
    };
    print!("{}", meta.header());
    if engine == gpushmem::Engine::Nvshmem {
        nvshmem_heap(&o);
    }
    if let Err(e) = gpushmem::gpu_available() {
        eprintln!("gpushmem-perf: {e}");
        eprintln!("gpushmem-perf: this tool needs an NVIDIA GPU and its driver; nothing was measured");
        return ExitCode::from(2);
    }
    let mut rows = Vec::new();
    let mut errors: Vec<(String, String)> = Vec::new();
    for &name in &o.what {
        match run_one(name, &o) {
            Ok(v) => rows.extend(v),
            Err(e) => {
                eprintln!("gpushmem-perf: {name}: {e}");
                errors.push((name.to_string(), e.to_string()));
            }
        }
    }
    print!("{}", output::table(&rows));
    let mut ok = errors.is_empty();
    if let Some(path) = &o.csv {
        ok &= write_file(path, output::csv(&rows, &meta).as_bytes());
    }
    if let Some(path) = &o.json {
        ok &= write_file(path, output::json(&rows, &meta, &args, &errors).as_bytes());
    }
    if let Some(path) = &o.png {
        ok &= write_png(path, &rows);
    }
    if !errors.is_empty() {
        let names: Vec<&str> = errors.iter().map(|e| e.0.as_str()).collect();
        eprintln!("gpushmem-perf: failed: {}", names.join(", "));
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
