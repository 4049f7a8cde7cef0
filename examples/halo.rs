//! Pipelined 1D stencil with halo exchange over `put_signal_nbi`.
//!
//! A periodic array of `u32` cells is cut into segments, `BLOCKS` per PE
//! (one block each). Every iteration, each segment puts its two edge cells
//! into its neighbours' ghost cells with `put_signal_nbi` (the neighbour on
//! the same PE or on the next/previous one; copies double-buffered by
//! iteration parity, signal = iteration number), waits for its own two
//! ghosts with `signal_wait_until(GE, iteration)`, and applies a 3-point
//! integer stencil. No global barrier: each segment only waits for its two
//! neighbours. At the end every PE compares its cells with a CPU run of the
//! whole array (exact: integer arithmetic). PE 0 prints iterations/s.
//!
//! `cargo run --release --example halo [-- PES [CELLS_PER_PE [ITERS [BLOCKS]]]]`
//! runs PEs as threads (default: one per GPU, at least 2); under
//! `gpushmem-run -n N` each process is one PE (`PES` is then ignored). Exit
//! status 0 iff every check passed on every PE; 2 without a GPU.

#[path = "common/mod.rs"]
mod common;

use common::gather;
use gpushmem::{LaunchConfig, Shmem};
use std::process::ExitCode;
use std::time::Instant;

const PTX: &str = include_str!(env!("GPUSHMEM_PTX_HALO_KERNELS"));
const CUBIN: &[u8] = include_bytes!(env!("GPUSHMEM_CUBIN_HALO_KERNELS"));

/// Threads per block (segment).
const THREADS: u32 = 256;
/// Iterations of the untimed warm-up launch.
const WARMUP_ITERS: u64 = 10;

/// The kernel crate's `stencil`, bit for bit.
fn stencil(left: u32, center: u32, right: u32) -> u32 {
    left.wrapping_add(right).wrapping_add(center.wrapping_mul(3)) ^ (center >> 11)
}

/// Initial value of global cell `i`.
fn initial(i: usize) -> u32 {
    (i as u32).wrapping_mul(0x9E37_79B1) ^ 0x5BD1_E995
}

#[derive(Clone, Copy)]
struct Setup {
    /// Cells per segment.
    seg: usize,
    /// Segments (blocks) per PE.
    blocks: usize,
    iters: u64,
}

/// This PE's copies of its segments, with the initial cells in copy `par`.
fn initial_copies(me: usize, setup: Setup, par: usize) -> Vec<u32> {
    let Setup { seg, blocks, .. } = setup;
    let mut cells = vec![0u32; 2 * blocks * (seg + 2)];
    for b in 0..blocks {
        let copy = (par * blocks + b) * (seg + 2);
        for i in 0..seg {
            cells[copy + 1 + i] = initial((me * blocks + b) * seg + i);
        }
    }
    cells
}

/// The whole array after `iters` iterations, computed on the CPU.
fn cpu_run(len: usize, iters: u64) -> Vec<u32> {
    let mut cur: Vec<u32> = (0..len).map(initial).collect();
    let mut next = vec![0u32; len];
    for _ in 0..iters {
        for i in 0..len {
            next[i] = stencil(cur[(i + len - 1) % len], cur[i], cur[(i + 1) % len]);
        }
        std::mem::swap(&mut cur, &mut next);
    }
    cur
}

/// Runs the warm-up and the timed, checked launch on this PE; returns whether every PE's check passed.
fn halo(shmem: &Shmem, setup: Setup, mode: &str) -> gpushmem::Result<bool> {
    let (me, n) = (shmem.my_pe(), shmem.n_pes());
    let Setup { seg, blocks, iters } = setup;
    let module = shmem.load_module_prebuilt("halo-kernels", PTX, CUBIN)?;
    let kernel = module.kernel("halo_stencil")?;
    let cells = shmem.malloc::<u32>(2 * blocks * (seg + 2))?;
    // Zeroed once: the signals only grow (iteration numbers).
    let sigs = shmem.calloc::<u64>(2 * blocks * 2)?;
    let cfg = LaunchConfig { grid_dim: (blocks as u32, 1, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 };
    let launch = |first: u64, count: u64| {
        // SAFETY: the arguments match `halo_stencil(cells: Sym<u32>, sigs: Sym<u64>, seg,
        // first, iters)` (each `&SymSlice` arrives as its `Sym`); every PE makes the same
        // launches in the same order with the same numbers.
        unsafe { shmem.launch_collective(&kernel, cfg, (&cells, &sigs, seg as u64, first, count)) }
    };
    // Iteration k reads copy (k - 1) % 2: the initial cells go into the copy the first iteration reads.
    let mut next = 1u64;
    shmem.write(&cells, &initial_copies(me, setup, ((next - 1) % 2) as usize))?;
    shmem.barrier_all()?;
    launch(next, WARMUP_ITERS)?;
    next += WARMUP_ITERS;
    // Start again from the initial cells: every PE's warm-up has ended before
    // anyone overwrites its cells, and every PE has written them before any
    // neighbour's first put of the timed run can land.
    shmem.barrier_all()?;
    let first = next;
    shmem.write(&cells, &initial_copies(me, setup, ((first - 1) % 2) as usize))?;
    shmem.barrier_all()?;
    let t = Instant::now();
    launch(first, iters)?;
    shmem.synchronize()?;
    let secs = t.elapsed().as_secs_f64();

    let got = shmem.read(&cells)?;
    let expect = cpu_run(n * blocks * seg, iters);
    let par = ((first - 1 + iters) % 2) as usize;
    let mut wrong = 0usize;
    for b in 0..blocks {
        let copy = (par * blocks + b) * (seg + 2);
        for i in 0..seg {
            let global = (me * blocks + b) * seg + i;
            if got[copy + 1 + i] != expect[global] {
                if wrong == 0 {
                    common::say(format_args!(
                        "halo: PE {me}: cell {global} (segment {b}, cell {i}): {:#010x} instead of {:#010x}",
                        got[copy + 1 + i],
                        expect[global]
                    ));
                }
                wrong += 1;
            }
        }
    }
    if wrong > 0 {
        common::say(format_args!("halo: PE {me}: {wrong} of {} cells WRONG", blocks * seg));
    }
    let (slowest, every) = gather(shmem, secs, wrong == 0)?;
    if me == 0 {
        let total = n * blocks * seg;
        println!(
            "halo: {n} PEs ({mode}), {total} cells: {blocks} segments of {seg} cells per PE, {THREADS} threads each"
        );
        println!(
            "halo: {iters} iterations in {:.2} ms (slowest PE): {:.0} iterations/s, {:.2} us per iteration, \
             {:.2} G cell updates/s",
            slowest * 1e3,
            iters as f64 / slowest,
            slowest / iters as f64 * 1e6,
            (total as f64 * iters as f64) / slowest / 1e9
        );
        println!("halo: every PE's cells against a CPU run of the whole array: {}", if every { "ok" } else { "WRONG" });
    }
    shmem.barrier_all()?;
    shmem.free(sigs)?;
    shmem.free(cells)?;
    Ok(every)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, default: usize| common::arg(&args, i, default);
    let setup = match (arg(1, 1 << 16), arg(2, 1000), arg(3, 4)) {
        (Some(cells), Some(iters), Some(blocks)) => Setup { seg: cells.div_ceil(blocks), blocks, iters: iters as u64 },
        _ => return common::usage("halo [PES [CELLS_PER_PE [ITERS [BLOCKS]]]]  (all > 0)"),
    };
    common::run(
        "halo",
        &args,
        "every cell on every PE matched the CPU run",
        "some cells were WRONG (see above)",
        |s, mode, shared| {
            // Time-sliced, every iteration costs a context switch: fewer unless asked.
            let setup = if shared && args.get(2).is_none() { Setup { iters: 100, ..setup } } else { setup };
            halo(s, setup, mode)
        },
    )
}
