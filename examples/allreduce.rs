//! All-reduce (sum of `f32`) by hand with `put_signal_nbi` and
//! `signal_wait_until`, against the library's `reduce_grid`.
//!
//! - **one-shot**: every PE puts its whole buffer into its own slot on every
//!   other PE (signal SET to the all-reduce's number), waits for the `n - 1`
//!   signals of its slots and sums in PE order;
//! - **two-shot**: reduce-scatter (PE `k` receives chunk `k` of every PE's
//!   buffer into slots and sums it), then all-gather (every PE puts its summed
//!   chunk to all others, with signals);
//! - **library**: `reduce_grid(TEAM_WORLD, …)` (every block of a co-resident grid; one-shot below 256 KiB, two-shot above).
//!
//! Each kernel runs many all-reduces back to back, numbered by a counter the
//! host keeps across launches: the number is the signal value (no resets),
//! and it picks one of three input versions so that stale data cannot pass
//! for fresh. A check launch adds every result into an accumulator that is
//! compared, element by element, with a CPU reference (integer-valued
//! floats: the sums are exact). PE 0 prints the time per all-reduce (the
//! slowest PE's) for each variant and size.
//!
//! `cargo run --release --example allreduce [-- PES [ELEMS ...]]` runs PEs as
//! threads (default: one per GPU, at least 2) for the given sizes in `f32`
//! elements; under `gpushmem-run -n N` each process is one PE (`PES` is then
//! ignored). Exit status 0 iff every check passed on every PE; 2 without a GPU.

#[path = "common/mod.rs"]
mod common;

use common::gather;
use gpushmem::{LaunchConfig, Shmem};
use std::process::ExitCode;
use std::time::Instant;

const PTX: &str = include_str!(env!("GPUSHMEM_PTX_ALLREDUCE_KERNELS"));
const CUBIN: &[u8] = include_bytes!(env!("GPUSHMEM_CUBIN_ALLREDUCE_KERNELS"));

/// Signal words per source PE (one per block); as in the kernel crate.
const MAX_BLOCKS: usize = 32;
/// Input versions; as in the kernel crate.
const VERSIONS: usize = 3;
/// Threads per block.
const THREADS: u32 = 512;
/// All-reduces of the check launch: both slot parities, every input version.
const CHECK_ITERS: u64 = 6;
/// Default sizes, in `f32` elements (4 KiB … 16 MiB).
const DEFAULT_SIZES: [usize; 5] = [1 << 10, 1 << 14, 1 << 18, 1 << 20, 1 << 22];

/// Distance between input versions and between one-shot slots; as `stride` in the kernel crate.
fn stride(elems: usize) -> usize {
    elems.next_multiple_of(4)
}

/// Element `i` of input version `version` on PE `pe`: a small integer, so every sum is exact.
fn input(pe: usize, version: usize, i: usize) -> f32 {
    ((i * 7 + pe * 5 + version * 3) % 17) as f32 - 8.0
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Variant {
    OneShot,
    TwoShot,
    Library,
}

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Variant::OneShot => "one-shot put_signal",
            Variant::TwoShot => "two-shot put_signal",
            Variant::Library => "library reduce_grid",
        }
    }
}

/// Runs every variant for every size on this PE (at most `max_iters` timed
/// all-reduces per launch); returns whether every PE's checks passed.
fn allreduce(shmem: &Shmem, sizes: &[usize], mode: &str, max_iters: u64) -> gpushmem::Result<bool> {
    let (me, n) = (shmem.my_pe(), shmem.n_pes());
    let module = shmem.load_module_prebuilt("allreduce-kernels", PTX, CUBIN)?;
    let one_shot = module.kernel("allreduce_one_shot")?;
    let two_shot = module.kernel("allreduce_two_shot")?;
    let library = module.kernel("allreduce_library")?;
    // Zeroed once: signal values only grow (the all-reduce number).
    let sig_one = shmem.calloc::<u64>(2 * n * MAX_BLOCKS)?;
    let sig_two = shmem.calloc::<u64>(2 * n * MAX_BLOCKS)?;
    let mut next = 1u64;
    let mut all_ok = true;
    if me == 0 {
        println!("allreduce: {n} PEs ({mode}), sum of f32, time per all-reduce of the slowest PE");
        println!(
            "{:>10} {:>10}  {:<21} {:>6} {:>6} {:>11} {:>10} {:>10}  check",
            "elements", "bytes", "variant", "blocks", "iters", "time", "algbw", "busbw"
        );
    }
    for &elems in sizes {
        let st = stride(elems);
        let chunk = elems.div_ceil(n).next_multiple_of(4);
        let src = shmem.malloc::<f32>(VERSIONS * st)?;
        let mut host = vec![0.0f32; VERSIONS * st];
        for v in 0..VERSIONS {
            for i in 0..elems {
                host[v * st + i] = input(me, v, i);
            }
        }
        shmem.write(&src, &host)?;
        let out = shmem.malloc::<f32>(elems)?;
        let acc = shmem.calloc::<f32>(elems)?;
        let slots_one = shmem.malloc::<f32>(2 * n * st)?;
        let slots_two = shmem.malloc::<f32>(n * chunk)?;
        let blocks = (elems / 16384).clamp(1, 8);
        let iters = (((64usize << 20) / (elems * 4)).clamp(10, 500) as u64).min(max_iters);
        for variant in [Variant::OneShot, Variant::TwoShot, Variant::Library] {
            let kernel = match variant {
                Variant::OneShot => &one_shot,
                Variant::TwoShot => &two_shot,
                Variant::Library => &library,
            };
            // Blocks as large as the kernel's registers allow (the library's reduction needs more of them).
            let threads = THREADS.min(kernel.max_threads_per_block()? / 32 * 32);
            let grid = match variant {
                // One block per 64 KiB, as many as may be co-resident (as the library's stream-ordered all-reduce).
                Variant::Library => {
                    let fits = shmem.collective_launch_query_gridsize(kernel, threads, 0)? as usize;
                    (elems * 4).div_ceil(64 << 10).clamp(1, fits.max(1))
                }
                _ => blocks,
            };
            let cfg = LaunchConfig { grid_dim: (grid as u32, 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: 0 };
            let (s, o, a) = (&src, &out, &acc);
            let launch = |first: u64, count: u64, check: u32| {
                // SAFETY: the arguments match each kernel's parameters (each `&SymSlice`
                // arrives as the kernel's `Sym`); every PE launches the same kernels in the
                // same order with the same numbers.
                unsafe {
                    match variant {
                        Variant::OneShot => shmem.launch_collective(
                            kernel,
                            cfg,
                            (s, o, a, &slots_one, &sig_one, elems as u64, first, count, check),
                        ),
                        Variant::TwoShot => shmem.launch_collective(
                            kernel,
                            cfg,
                            (s, o, a, &slots_two, &sig_two, elems as u64, chunk as u64, first, count, check),
                        ),
                        Variant::Library => {
                            shmem.launch_collective(kernel, cfg, (s, o, a, elems as u64, first, count, check))
                        }
                    }
                }
            };
            // Warm-up, then the timed launch.
            launch(next, 2, 0)?;
            next += 2;
            shmem.barrier_all()?;
            let t = Instant::now();
            launch(next, iters, 0)?;
            next += iters;
            shmem.synchronize()?;
            let secs = t.elapsed().as_secs_f64() / iters as f64;
            // Check launch: every result is added into `acc`.
            shmem.write(&acc, &vec![0.0; elems])?;
            let first = next;
            launch(first, CHECK_ITERS, 1)?;
            next += CHECK_ITERS;
            shmem.synchronize()?;
            let got = shmem.read(&acc)?;
            let expect = |i: usize| -> f32 {
                (first..first + CHECK_ITERS)
                    .map(|it| (0..n).map(|pe| input(pe, it as usize % VERSIONS, i)).sum::<f32>())
                    .sum()
            };
            let wrong = (0..elems).filter(|&i| got[i] != expect(i)).count();
            if let Some(i) = (0..elems).find(|&i| got[i] != expect(i)) {
                common::say(format_args!(
                    "allreduce: PE {me}: {}, {elems} elements: {wrong} wrong, the first at {i}: {} instead of {}",
                    variant.name(),
                    got[i],
                    expect(i)
                ));
            }
            let (slowest, every) = gather(shmem, secs, wrong == 0)?;
            all_ok &= every;
            if me == 0 {
                let bytes = (elems * 4) as f64;
                let algbw = bytes / slowest / 1e9;
                println!(
                    "{:>10} {:>10}  {:<21} {:>6} {:>6} {:>8.2} us {:>5.1} GB/s {:>5.1} GB/s  {}",
                    elems,
                    human(elems * 4),
                    variant.name(),
                    grid,
                    iters,
                    slowest * 1e6,
                    algbw,
                    algbw * 2.0 * (n - 1) as f64 / n as f64,
                    if every { "ok" } else { "WRONG" }
                );
            }
            // Nothing of this variant may still run anywhere when the next one
            // starts writing into the same `out` on the peers, or the buffers go.
            shmem.barrier_all()?;
        }
        shmem.free(slots_two)?;
        shmem.free(slots_one)?;
        shmem.free(acc)?;
        shmem.free(out)?;
        shmem.free(src)?;
    }
    shmem.free(sig_two)?;
    shmem.free(sig_one)?;
    Ok(all_ok)
}

/// `4096` → `4 KiB`.
fn human(bytes: usize) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let sizes: Vec<usize> = if args.len() > 1 {
        match args[1..].iter().map(|s| common::positive(s)).collect::<Option<_>>() {
            Some(s) => s,
            None => return common::usage("allreduce [PES [ELEMENTS ...]]  (element counts > 0)"),
        }
    } else {
        DEFAULT_SIZES.to_vec()
    };
    common::run(
        "allreduce",
        &args,
        "every result on every PE matched the CPU reference",
        "some results were WRONG (see above)",
        // Time-sliced, every exchange costs a context switch: fewer repetitions.
        |s, mode, shared| allreduce(s, &sizes, mode, if shared { 20 } else { 500 }),
    )
}
