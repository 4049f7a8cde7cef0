//! `latency` (p, g), `pingpong` (put_signal round trip), `barrier` (barrier_all, sync_all against PEs).
//! With `--one-pe` (always on the NVSHMEM engine) `pingpong` runs between two
//! blocks of one PE and `barrier` on 1 PE, the shapes of NVSHMEM's one-PE program.

use crate::common::{config, median_ms, median_ms_lined_up, module, nothing, BenchResult, Row};
use crate::engine::job;
use crate::opts::Opts;
use crate::progress::Progress;
use gpushmem::LaunchConfig;

/// Operations per kernel launch of every latency test.
pub const ITERS: u32 = 10_000;

/// One block of one warp.
const ONE_WARP: LaunchConfig = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (32, 1, 1), shared_mem_bytes: 0 };

/// µs per operation from a launch's ms.
fn us_per_op(ms: f64) -> f64 {
    ms * 1e3 / ITERS as f64
}

/// Heap per PE of every subcommand here.
pub const HEAP: u64 = 64 << 20;

/// `p_latency`, `g_latency`: PE 0's thread 0 to PE 1.
pub fn p_g(o: &Opts) -> BenchResult<Vec<Row>> {
    let r = job(2, config(HEAP), |shmem| {
        let pbuf = shmem.calloc::<u64>(1)?;
        // Must stay zero: `g_latency` chases the index it loads.
        let gbuf = shmem.calloc::<u64>(1)?;
        let out = shmem.calloc::<u64>(1)?;
        let m = module(shmem)?;
        let (kp, kg) = (m.kernel("p_latency")?, m.kernel("g_latency")?);
        let mut us = (0.0, 0.0);
        if shmem.my_pe() == 0 {
            let s = shmem.stream();
            // SAFETY: the arguments match the kernels; the buffers are symmetric words.
            let p = median_ms(s, o.warmup, o.reps, nothing, || unsafe {
                shmem.launch(&kp, ONE_WARP, (pbuf.as_kernel_ptr(), 1u32, ITERS))
            })?;
            let g = median_ms(s, o.warmup, o.reps, nothing, || unsafe {
                shmem.launch(&kg, ONE_WARP, (gbuf.as_kernel_ptr(), out.as_kernel_ptr(), 1u32, ITERS))
            })?;
            us = (us_per_op(p), us_per_op(g));
        }
        shmem.barrier_all()?;
        Ok(us)
    })?;
    let (p, g) = r[0];
    Ok(vec![Row::new("p_latency", 8, p, None, "us"), Row::new("g_latency", 8, g, None, "us")])
}

/// Rows of `gpushmem-perf scopes`: each ordering choice of the ping-pong kernel
/// `pingpong_mode` (modes 0-18, see its doc), µs per round trip. Like for like
/// with NVSHMEM's one-PE program (bench/nvshmem/perf.cu): mode 17 (8-byte
/// `putmem_signal_nbi`, the source rewritten and the payload echoed every hop,
/// as NVSHMEM's kernel does) with its `put_signal_pingpong`, and mode 10
/// (`signal_op_relaxed` + `signal_wait_until_relaxed`: NVSHMEM's unordered
/// semantics, the address translated in every call as NVSHMEM's `signal_op`
/// does) with its `signal_pingpong`. Mode 0 (source written once, the
/// one-element path) and mode 13 (`PeerSignal`: translated once) are our
/// variants beside them, not like for like.
pub const MODES: [&str; 19] = [
    "pingpong_mode_0_library",
    "pingpong_mode_1_relaxed_floor",
    "pingpong_mode_2_release_sys_fence_sys",
    "pingpong_mode_3_release_gpu_fence_gpu",
    "pingpong_mode_4_release_sys_ld_acquire_sys",
    "pingpong_mode_5_release_gpu_ld_acquire_gpu",
    "pingpong_mode_6_fence_gpu_relaxed_fence_gpu",
    "signal_pingpong",
    "pingpong_mode_8_volatile_floor",
    "pingpong_mode_9_release_gpu_poll_gpu_ld_acquire_gpu",
    "signal_relaxed_pingpong",
    "pingpong_mode_11_pretranslated_signal_relaxed_wait",
    "pingpong_mode_12_relaxed_signal_volatile_poll",
    "signal_relaxed_peer_pingpong",
    "signal_peer_pingpong",
    "pingpong_mode_15_peer_signal_poll_2_staggered",
    "pingpong_mode_16_peer_signal_poll_4_staggered",
    "pingpong_mode_17_put_signal_like_nvshmem",
    "pingpong_mode_18_put_signal_echo_1elem",
];

/// How a ping-pong kernel runs: `pingpong_mode` between two PEs (one block
/// each), or `pingpong_blocks` between two blocks of one PE (NVSHMEM's
/// single-GPU perftest shape; the one Nsight Compute can profile).
#[derive(Clone, Copy)]
enum Sides {
    TwoPes,
    TwoBlocks,
}

/// Byte offsets of the ping-pong's words: `pingpong-placement` moves the
/// payload and signal words by multiples of this (one 4 KiB page plus two
/// 128-byte L2 lines, so every placement is a new page and a new line).
const PLACEMENT_STRIDE: usize = 4096 + 256;

/// µs per round trip of each of `modes` (outer) at each of `placements`
/// (inner; the payload and signal words moved by `k · PLACEMENT_STRIDE` bytes)
/// of the ping-pong kernel of `sides`.
fn pingpong_modes(o: &Opts, sides: Sides, modes: &[u32], placements: usize) -> BenchResult<Vec<Vec<f64>>> {
    let (pes, kernel, grid) = match sides {
        Sides::TwoPes => (2, "pingpong_mode", 1),
        Sides::TwoBlocks => (1, "pingpong_blocks", 2),
    };
    let cfg = LaunchConfig { grid_dim: (grid, 1, 1), ..ONE_WARP };
    let words_per_place = PLACEMENT_STRIDE / 8;
    let r = job(pes, config(HEAP), |shmem| {
        let payload = shmem.calloc::<u64>(placements * words_per_place)?;
        let sig = shmem.calloc::<u64>(placements * words_per_place)?;
        let m = module(shmem)?;
        let k = m.kernel(kernel)?;
        let mut base = 0u64;
        let mut us = Vec::new();
        for &mode in modes {
            let mut at = Vec::new();
            for place in 0..placements {
                let shift = (place * PLACEMENT_STRIDE) as u64;
                let ms = median_ms_lined_up(shmem, o, || {
                    let b = base;
                    base += ITERS as u64;
                    let args = (payload.as_kernel_ptr() + shift, sig.as_kernel_ptr() + shift, b, ITERS, mode);
                    // SAFETY: the arguments match both ping-pong kernels (words inside the two
                    // buffers: `shift` leaves `words_per_place` words); every PE launches it.
                    unsafe { shmem.launch_collective(&k, cfg, args) }
                })?;
                at.push(us_per_op(ms));
            }
            us.push(at);
        }
        shmem.barrier_all()?;
        Ok(us)
    })?;
    Ok(r.into_iter().next().unwrap_or_default())
}

/// Rows of `pingpong` and the kernel mode of each. Like for like with NVSHMEM's rows
/// of the same work: `put_signal_pingpong_like_nvshmem` (its `put_signal_pingpong`)
/// and `signal_relaxed_pingpong` (its `signal_pingpong`); the others are our variants.
pub const PINGPONG_ROWS: [(&str, u32); 6] = [
    // 8-byte putmem_signal_nbi, source rewritten / payload echoed each hop (NVSHMEM's work).
    ("put_signal_pingpong_like_nvshmem", 17),
    // The row named `put_signal_pingpong` before 2026-12-07: source written once, one u64.
    ("put_signal_pingpong_src_once", 0),
    // NVSHMEM's per-hop work through the one-u64 fast path.
    ("put_signal_pingpong_echo_1elem", 18),
    // Ordered signal_op (release): stronger than NVSHMEM's.
    ("signal_pingpong", 7),
    // signal_op_relaxed, translated per call: NVSHMEM's signal_op semantics and work.
    ("signal_relaxed_pingpong", 10),
    // The same through a PeerSignal translated once before the loop: our extra.
    ("signal_relaxed_peer_pingpong", 13),
];

/// `pingpong`: each of [`PINGPONG_ROWS`] (8 B payload where there is one, signal
/// SET) round trip between PE 0 and PE 1; with `--one-pe` between two blocks of
/// PE 0, the shape of NVSHMEM's one-PE program.
pub fn pingpong(o: &Opts) -> BenchResult<Vec<Row>> {
    let sides = if o.one_pe { Sides::TwoBlocks } else { Sides::TwoPes };
    let modes: Vec<u32> = PINGPONG_ROWS.iter().map(|r| r.1).collect();
    let us = pingpong_modes(o, sides, &modes, 1)?;
    Ok(PINGPONG_ROWS.iter().zip(&us).map(|(&(name, _), us)| Row::new(name, 8, us[0], None, "us/round trip")).collect())
}

/// What each ordering choice costs in a signal ping-pong: every mode of [`MODES`].
/// With `blocks`, between two blocks of one PE (rows `blocks_…`), else between two PEs.
pub fn scopes(o: &Opts, blocks: bool) -> BenchResult<Vec<Row>> {
    let modes: Vec<u32> = (0..MODES.len() as u32).collect();
    let (sides, prefix) = if blocks { (Sides::TwoBlocks, "blocks_") } else { (Sides::TwoPes, "") };
    let us = pingpong_modes(o, sides, &modes, 1)?;
    Ok(MODES
        .iter()
        .zip(&us)
        .map(|(&name, us)| Row::new(format!("{prefix}{name}"), 8, us[0], None, "us/round trip"))
        .collect())
}

/// Modes of `pingpong-placement`: no ordering (relaxed, volatile), the
/// hand-written release/acquire, the library's `signal_op`, `put_signal_nbi`
/// (source written once) and `signal_op_relaxed` (the like-for-like of NVSHMEM's `signal_op`
/// ping-pong, whose C++ program measures the same placements), and the two
/// halves of the last (modes 11 and 12: which half costs what), the
/// relaxed and ordered signals through a `PeerSignal` (modes 13 and 14), and
/// the like-for-like of NVSHMEM's put_signal ping-pong (mode 17).
const PLACEMENT_MODES: [u32; 11] = [1, 8, 5, 7, 0, 10, 11, 12, 13, 14, 17];

/// How much the ping-pong depends on where its words are: each mode of
/// `--modes` (default [`PLACEMENT_MODES`]) between two blocks of one PE
/// (NVSHMEM's shape, as `pingpong-blocks`) at `--placements` positions of its
/// payload and signal words; rows `placement_<mode>_{min,median,max}`, and
/// `placement_<mode>_run<k>_…` for the k-th repeat of a mode listed again.
/// Which L2 slice holds a word (and how far it is from the two SMs) is set by
/// its address, so one placement can favour one library over another.
pub fn placement(o: &Opts) -> BenchResult<Vec<Row>> {
    let modes = o.modes.clone().unwrap_or_else(|| PLACEMENT_MODES.to_vec());
    let us = pingpong_modes(o, Sides::TwoBlocks, &modes, o.placements)?;
    let mut rows = Vec::new();
    for (k, (&mode, at)) in modes.iter().zip(&us).enumerate() {
        let name = MODES[mode as usize].trim_start_matches("pingpong_");
        let repeat = modes[..k].iter().filter(|&&m| m == mode).count();
        let name = if repeat == 0 { name.to_string() } else { format!("{name}_run{}", repeat + 1) };
        let mut sorted = at.clone();
        sorted.sort_by(f64::total_cmp);
        let median = sorted[sorted.len() / 2];
        for (stat, v) in [("min", sorted[0]), ("median", median), ("max", sorted[sorted.len() - 1])] {
            rows.push(Row::new(format!("placement_{name}_{stat}"), 8, v, None, "us/round trip"));
        }
    }
    Ok(rows)
}

/// `barrier_all_block` and `sync_all_block` latency for each PE count of `--pes`
/// (1 with `--one-pe`).
pub fn barrier(o: &Opts) -> BenchResult<Vec<Row>> {
    let mut rows = Vec::new();
    let progress = Progress::new(o.pes.len());
    for &n in &o.pes {
        progress.start(&format!("barrier_all_block, sync_all_block {n} PEs"));
        let r = job(n, config(HEAP), |shmem| {
            let m = module(shmem)?;
            let mut us = Vec::new();
            for name in ["barrier_loop", "sync_all_loop"] {
                let k = m.kernel(name)?;
                // SAFETY: the argument matches the kernel; every PE launches it.
                let ms = median_ms_lined_up(shmem, o, || unsafe { shmem.launch_collective(&k, ONE_WARP, (ITERS,)) })?;
                us.push(us_per_op(ms));
            }
            shmem.barrier_all()?;
            Ok(us)
        })?;
        rows.push(Row::new("barrier_all_block", n as u64, r[0][0], None, "us (size = PEs)"));
        rows.push(Row::new("sync_all_block", n as u64, r[0][1], None, "us (size = PEs)"));
        progress.step();
    }
    Ok(rows)
}
