//! `put-bw` / `get-bw`: PE 0 moves S bytes to / from PE 1, thread, warp or block
//! scope; with `--bidir` also both PEs at once, each to / from the other.
//! The `cuMemcpy` column is `cuMemcpyDtoDAsync` of the same bytes between the
//! same two PEs' buffers (the peer's through `Shmem::ptr`: a peer copy when
//! the PEs are on different GPUs). With `--one-pe` (always on the NVSHMEM
//! engine) the job is one PE that moves the bytes between two buffers of its
//! own heap, to / from itself, as NVSHMEM's one-PE program does.

use crate::common::{cuda, gbs, human_size, median_ms, median_ms_lined_up, module, nothing, sizes, BenchResult, Row};
use crate::engine::job;
use crate::opts::{Opts, Scope};
use crate::progress::Progress;
use gpushmem::{LaunchConfig, Shmem};

/// Blocks of the default grid for `size` bytes, 1..=`max` (`--max-grid`,
/// default 4224): below 1 MiB one per 16 KiB (one 16-byte access per thread
/// of a 1024-thread block); from 1 MiB to 64 MiB one per 64 KiB held to
/// 64..=128 blocks (about one per SM); above, one per 64 KiB.
///
/// Why, from a grid sweep of the block put on one H100 (2026-12-06,
/// bench/RESULTS.md "put-bw grid"): between 1 and 64 MiB 64–128 blocks
/// copied at 0.84–1.01 of cuMemcpy, while one block per 16 KiB fell to
/// 0.53 at 16 MiB and 1056 blocks to 0.39–0.76 (every block pays its
/// `quiet_block` and start-up, which small chunks do not hide), and the earlier
/// one per 64 KiB gave 16 blocks at 1 MiB (0.74). From 128 MiB one per 64 KiB
/// reached ≥ 0.95, and at 1 GiB 4224 blocks beat 1056 (ours 96.0% of
/// cuMemcpy against 86.6%; NVSHMEM's 95.4% against 82.4%). NVSHMEM's put_bw
/// caps at 1056 blocks. bench/nvshmem/perf.cu uses the same rule (capped at 1056).
pub fn default_blocks(size: u64, max: u32) -> u32 {
    let blocks = match size {
        s if s < 1 << 20 => s / (16 << 10),
        s if s <= 64 << 20 => (s / (64 << 10)).clamp(64, 128),
        s => s / (64 << 10),
    };
    blocks.clamp(1, max.max(1) as u64) as u32
}

/// Bytes of each of the two buffers for `o`'s sizes.
fn buffer_bytes(o: &Opts) -> u64 {
    let max = sizes(o.min_size.max(1), o.max_size, 2).last().copied().unwrap_or(16);
    max.next_multiple_of(16)
}

/// Heap per PE that `put-bw`/`get-bw` need with `o`: the two buffers and 64 MiB to spare.
pub fn heap(o: &Opts) -> u64 {
    2 * buffer_bytes(o) + (64 << 20)
}

/// Threads per block by default: 512 for the block scope, 1024 for the thread
/// and warp scopes (one chunk per thread or warp: more threads, more chunks).
///
/// Why 512 for the block scope, from the grid × block sweep on one H200
/// (2026-12-06, bench/RESULTS.md "One H200, 2026-12-06 (twelfth session)"): at
/// the default grid, 512 threads were as fast as 1024 or faster at every size
/// swept (4 MiB 899 against 843 GB/s, 64 MiB 1747 / 1722, 256 MiB 1987 /
/// 1776: 0.95 of cuMemcpy against 0.85). `bw_put_block` takes 55 registers
/// a thread, so a 1024-thread block fills an SM's register file alone and the
/// SM idles while its closing `quiet_block` fence waits for the stores; two
/// 512-thread blocks share the SM and one's fence overlaps the other's copy.
pub fn default_threads(scope: Scope) -> u32 {
    match scope {
        Scope::Thread | Scope::Warp => 1024,
        _ => 512,
    }
}

/// The launch shape for `size` bytes at `scope`.
fn shape(o: &Opts, size: u64, scope: Scope) -> LaunchConfig {
    let blocks = o.grid.unwrap_or_else(|| default_blocks(size, o.max_grid));
    let threads = o.block.unwrap_or_else(|| default_threads(scope));
    LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: 0 }
}

/// `cuMemsetD8Async` of `bytes` bytes at `ptr` (this PE's heap) on this PE's stream.
fn memset(shmem: &Shmem, ptr: u64, value: u8, bytes: usize) -> gpushmem::Result<()> {
    shmem.context().bind_to_thread().map_err(cuda("cuMemsetD8Async"))?;
    // SAFETY: the callers pass ranges of this PE's heap.
    unsafe { gpushmem::cudarc::driver::result::memset_d8_async(ptr, value, bytes, shmem.stream().cu_stream()) }
        .map_err(cuda("cuMemsetD8Async"))
}

/// Byte value the data check fills the source with.
const PATTERN: u8 = 0x5a;

/// Offsets and lengths the data check reads back: all of `n` bytes up to 3 MiB,
/// else 1 MiB at the start, the middle and the end.
fn check_ranges(n: usize) -> Vec<(usize, usize)> {
    const MIB: usize = 1 << 20;
    if n <= 3 * MIB {
        vec![(0, n)]
    } else {
        vec![(0, MIB), (n / 2 - MIB / 2, MIB), (n - MIB, MIB)]
    }
}

/// Rows `<op>_bw_<scope>` (and `…_bidir`) for every size and scope of `o`;
/// `get` picks the operation. Fails if the data check at the largest size does.
pub fn run(o: &Opts, get: bool) -> BenchResult<Vec<Row>> {
    let op = if get { "get" } else { "put" };
    let list = sizes(o.min_size.max(1), o.max_size, 2);
    let max = *list.last().unwrap_or(&16);
    let buf = buffer_bytes(o) as usize;
    let directions = if o.bidir { 2 } else { 1 };
    let progress = Progress::new(list.len() * o.scopes.len() * directions);
    // One PE: to / from itself; two: PE 0 to / from PE 1.
    let pes = if o.one_pe { 1 } else { 2 };
    let per_pe = job(pes, crate::common::config(heap(o)), |shmem| {
        let src = shmem.calloc::<u8>(buf)?;
        let dst = shmem.calloc::<u8>(buf)?;
        let m = module(shmem)?;
        let mut rows = Vec::new();
        let mut errors = Vec::new();
        // The PE that PE 0 puts to / gets from: PE 1, or itself in a one-PE job.
        let peer_of_0 = pes - 1;
        // Data check at the largest size, once per scope: PE 0 copies `max` bytes of
        // PATTERN over zeros; the PE that receives them (the peer for put, 0 for get) reads them back.
        for &scope in &o.scopes {
            let test = format!("{op}_bw_{}", scope.name());
            let k = m.kernel(&format!("bw_{op}_{}", scope.name()))?;
            memset(shmem, src.as_kernel_ptr(), PATTERN, max as usize)?;
            memset(shmem, dst.as_kernel_ptr(), 0, max as usize)?;
            shmem.barrier_all()?;
            if shmem.my_pe() == 0 {
                // SAFETY: the arguments match `bw_*`; both ranges hold `max` bytes on every PE.
                unsafe {
                    shmem.launch(
                        &k,
                        shape(o, max, scope),
                        (dst.as_kernel_ptr(), src.as_kernel_ptr(), max, peer_of_0 as u32),
                    )
                }?;
            }
            shmem.barrier_all()?;
            let receiver = if get { 0 } else { peer_of_0 };
            if shmem.my_pe() == receiver {
                for (start, len) in check_ranges(max as usize) {
                    let got = shmem.read_at(&dst, start, len)?;
                    if let Some(i) = got.iter().position(|&b| b != PATTERN) {
                        errors.push(format!(
                            "{test}: data check at {}: byte {} on PE {} is {:#04x}, expected {PATTERN:#04x}",
                            human_size(max),
                            start + i,
                            shmem.my_pe(),
                            got[i]
                        ));
                        break;
                    }
                }
            }
        }
        // PE 0's peer is `peer_of_0`, and PE 1's is PE 0 (with --bidir).
        let peer = if shmem.my_pe() == 0 { peer_of_0 } else { 0 };
        // The memcpy baseline moves the same bytes between the same buffers as the kernel.
        let (to, from) = if get {
            (dst.as_kernel_ptr(), shmem.ptr(&src, peer)?)
        } else {
            (shmem.ptr(&dst, peer)?, src.as_kernel_ptr())
        };
        let stream = shmem.stream();
        let memcpy = |size: u64| -> gpushmem::Result<()> {
            for _ in 0..o.iters {
                // SAFETY: `to` and `from` are `size`-byte ranges of this PE's and the peer's heap.
                unsafe {
                    gpushmem::cudarc::driver::result::memcpy_dtod_async(to, from, size as usize, stream.cu_stream())
                }
                .map_err(cuda("cuMemcpyDtoDAsync"))?;
            }
            Ok(())
        };
        let kernel_runs = |k: &gpushmem::Kernel, size: u64, scope: Scope| -> gpushmem::Result<()> {
            let args = (dst.as_kernel_ptr(), src.as_kernel_ptr(), size, peer as u32);
            let cfg = shape(o, size, scope);
            for _ in 0..o.iters {
                // SAFETY: the arguments match `bw_*`; both ranges hold `size` bytes on every PE.
                unsafe { shmem.launch(k, cfg, args) }?;
            }
            Ok(())
        };
        if shmem.my_pe() == 0 {
            for &scope in &o.scopes {
                let test = format!("{op}_bw_{}", scope.name());
                let k = m.kernel(&format!("bw_{op}_{}", scope.name()))?;
                for &size in &list {
                    progress.start(&format!("{test} {}", human_size(size)));
                    let ours = median_ms(stream, o.warmup, o.reps, nothing, || kernel_runs(&k, size, scope))?;
                    let base = median_ms(stream, o.warmup, o.reps, nothing, || memcpy(size))?;
                    let bytes = (size * o.iters as u64) as f64;
                    rows.push(Row::new(test.clone(), size, gbs(bytes, ours), Some(gbs(bytes, base)), "GB/s"));
                    progress.step();
                }
            }
        }
        shmem.barrier_all()?;
        if o.bidir {
            // Both PEs at once, lined up before every run; the slower PE's median counts.
            for &scope in &o.scopes {
                let test = format!("{op}_bw_{}_bidir", scope.name());
                let k = m.kernel(&format!("bw_{op}_{}", scope.name()))?;
                for &size in &list {
                    let lead = shmem.my_pe() == 0;
                    if lead {
                        progress.start(&format!("{test} {}", human_size(size)));
                    }
                    let ours = slowest(shmem, median_ms_lined_up(shmem, o, || kernel_runs(&k, size, scope))?)?;
                    let base = slowest(shmem, median_ms_lined_up(shmem, o, || memcpy(size))?)?;
                    let bytes = (2 * size * o.iters as u64) as f64;
                    if lead {
                        rows.push(Row::new(test.clone(), size, gbs(bytes, ours), Some(gbs(bytes, base)), "GB/s"));
                        progress.step();
                    }
                }
            }
        }
        shmem.barrier_all()?;
        Ok((rows, errors))
    })?;
    let errors: Vec<String> = per_pe.iter().flat_map(|(_, e)| e.iter().cloned()).collect();
    if !errors.is_empty() {
        return Err(format!("wrong results: {}", errors.join("; ")).into());
    }
    Ok(per_pe.into_iter().next().map(|(rows, _)| rows).unwrap_or_default())
}

/// The largest of every PE's `ms` (host all-gather over the bootstrap).
fn slowest(shmem: &Shmem, ms: f64) -> gpushmem::Result<f64> {
    let all = shmem.bootstrap().allgather(&ms.to_le_bytes())?;
    Ok(all.iter().map(|b| f64::from_le_bytes(b[..8].try_into().expect("8 bytes of time"))).fold(0.0, f64::max))
}
