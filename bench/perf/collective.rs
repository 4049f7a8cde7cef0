//! `collective`: stream-ordered allreduce (sum; f32, bf16), fcollect and alltoall over
//! `--npes` PEs as threads, every result checked against a CPU reference.
//!
//! Bandwidths as nccl-tests defines them, with `t` the slowest PE's median time
//! per operation:
//! - allreduce: size = bytes of each PE's vector; algbw = size / t; busbw = algbw × 2(n−1)/n.
//! - fcollect: size = bytes each PE contributes; algbw = n·size / t (bytes each PE
//!   ends with); busbw = algbw × (n−1)/n.
//! - alltoall: size = bytes each PE sends to each PE; algbw = n·size / t; busbw = algbw × (n−1)/n.
//!
//! The bound: each algbw row's `cuMemcpy` column is the algbw the chosen
//! algorithm would reach if memory were the only limit, and its ratio is the
//! fraction reached. A `<test>_traffic` row gives the bytes the algorithm
//! moves through memory per PE (reads + writes, `M`); the bound time is
//! `pes_on_device × M / (2 R)`, with `R` the best device-to-device
//! `cuMemcpy` rate PE 0 measured in the same run over [`MEMCPY_SIZES`]
//! (64 MiB, 256 MiB, 1 GiB: one 64 MiB copy sits in the H200's L2-overflow
//! dip, 1717 GB/s against 2130 at 1 GiB, which made the bound loose by a
//! quarter; it reads and writes `R` bytes a second, so memory moves `2 R`)
//! and `pes_on_device` the PEs whose traffic shares that memory. Rows
//! `memcpy_dtod` [bytes] give each size's rate, and `bound_memcpy_dtod_best`
//! [the size it came from] the rate the bound uses. `M` per algorithm (n PEs, size s):
//! allreduce one-shot (below 256 KiB) `(n + 1) s`, two-shot `2 s + (n − 1) s / n`;
//! fcollect and alltoall `2 n s`.
//!
//! With `--graph` each PE captures the back-to-back calls of a timed span in a
//! CUDA graph once and times the graph's launch (nccl-tests' `-G`); the rows
//! are named `<test>_graph`. With many PEs as threads of one GPU the plain rows
//! of small sizes measure the driver, which serializes the PEs' kernel
//! launches into their shared context; the graph rows measure the device.
//!
//! Two floors come first, timed the same way (rows `floor_launch_time`,
//! `floor_barrier_time`, µs per call): an empty kernel launched on each PE's
//! stream (what launching alone costs when the PEs share a GPU) and the
//! stream-ordered `barrier_all` (a launch and one sync of every PE). A small
//! allreduce is one launch and two syncs.

use crate::common::{
    config, cuda, gbs, human_size, median_ms, median_ms_lined_up, module, nothing, sizes, BenchResult, Row,
};
use crate::engine::job;
use crate::opts::Opts;
use crate::progress::Progress;
use gpushmem::cudarc::driver::{CudaGraph, DriverError};
use gpushmem::{Bf16, LaunchConfig, ReduceOp, ReduceType, Shmem};
use gpushmem_kernels::abi::REDUCE_TWO_SHOT_MIN_BYTES;

/// An element type the allreduce is measured for.
trait Elem: ReduceType + Send {
    const TEST: &'static str;
    /// Relative tolerance of the check (the inputs make every sum exact; this is a margin).
    const TOL: f32;
    fn from_f32(v: f32) -> Self;
    fn to_f32(self) -> f32;
}

impl Elem for f32 {
    const TEST: &'static str = "allreduce_sum_f32";
    const TOL: f32 = 1e-5;
    fn from_f32(v: f32) -> Self {
        v
    }
    fn to_f32(self) -> f32 {
        self
    }
}

impl Elem for Bf16 {
    const TEST: &'static str = "allreduce_sum_bf16";
    const TOL: f32 = 1e-2;
    fn from_f32(v: f32) -> Self {
        Bf16::from_f32(v)
    }
    fn to_f32(self) -> f32 {
        Bf16::to_f32(self)
    }
}

/// PE `pe`'s input at index `i`: an integer in −8..=8, so sums over up to 16 PEs are exact in bf16.
fn input(pe: usize, i: usize) -> f32 {
    ((i * 7 + pe * 3) % 17) as f32 - 8.0
}

fn close(got: f32, want: f32, tol: f32) -> bool {
    (got - want).abs() <= tol * want.abs().max(1.0)
}

/// First mismatch of `got` against `want(i)`, as a message.
fn first_mismatch(
    test: &str,
    pe: usize,
    size: u64,
    got: &[f32],
    want: impl Fn(usize) -> f32,
    tol: f32,
) -> Option<String> {
    let bad = got.iter().enumerate().filter(|&(i, &g)| !close(g, want(i), tol)).count();
    let (i, &g) = got.iter().enumerate().find(|&(i, &g)| !close(g, want(i), tol))?;
    Some(format!(
        "{test} {}: PE {pe} element {i} is {g}, expected {} ({bad} of {} wrong)",
        human_size(size),
        want(i),
        got.len()
    ))
}

/// One measured point on one PE: ms per operation.
struct Meas {
    test: &'static str,
    size: u64,
    ms: f64,
}

/// Median ms per operation of `per_span` back-to-back `op`s, PEs lined up by a
/// stream-ordered barrier before each timed span; with `--graph` the span is
/// one launch of a CUDA graph that holds the `per_span` calls.
fn time_op(shmem: &Shmem, o: &Opts, size: u64, mut op: impl FnMut() -> gpushmem::Result<()>) -> gpushmem::Result<f64> {
    let per_span = ((16u64 << 20) / size.max(1)).clamp(1, 16);
    let ms = if o.graph {
        let graph = capture(shmem, || (0..per_span).try_for_each(|_| op()))?;
        median_ms_lined_up(shmem, o, || graph.launch().map_err(cuda("cuGraphLaunch")))?
    } else {
        median_ms_lined_up(shmem, o, || (0..per_span).try_for_each(|_| op()))?
    };
    Ok(ms / per_span as f64)
}

/// What `calls` enqueues on this PE's stream, captured (thread-local mode: the
/// other PE threads go on) and instantiated as a CUDA graph.
fn capture(shmem: &Shmem, calls: impl FnOnce() -> gpushmem::Result<()>) -> gpushmem::Result<CudaGraph> {
    use gpushmem::cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
    let s = shmem.stream();
    s.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL).map_err(cuda("cuStreamBeginCapture"))?;
    let enqueued = calls();
    // The capture ends whatever `calls` returned, so the stream is usable again.
    let graph = s.end_capture(CUgraphInstantiate_flags(0)).map_err(cuda("cuStreamEndCapture"));
    enqueued?;
    graph?.ok_or_else(|| {
        cuda("cuStreamEndCapture")(DriverError(
            gpushmem::cudarc::driver::sys::CUresult::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
        ))
    })
}

/// The floors of a small collective (module doc): ms per empty launch and per
/// stream-ordered `barrier_all`, as `floor_launch` and `floor_barrier` of size 0.
fn floors(shmem: &Shmem, o: &Opts, out: &mut Vec<Meas>) -> gpushmem::Result<()> {
    let m = module(shmem)?;
    let empty = m.kernel("barrier_loop")?;
    let cfg = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (32, 1, 1), shared_mem_bytes: 0 };
    // Spans of 16 calls, as a 4 KiB collective's.
    // SAFETY: `barrier_loop(0)` does nothing; its one argument is a u32.
    let ms = time_op(shmem, o, 4 << 10, || unsafe { shmem.launch(&empty, cfg, (0u32,)) })?;
    out.push(Meas { test: "floor_launch", size: 0, ms });
    let ms = time_op(shmem, o, 4 << 10, || shmem.barrier_all_on_stream(shmem.stream()))?;
    out.push(Meas { test: "floor_barrier", size: 0, ms });
    Ok(())
}

fn allreduce<T: Elem>(
    shmem: &Shmem,
    o: &Opts,
    size: u64,
    out: &mut Vec<Meas>,
    errors: &mut Vec<String>,
) -> gpushmem::Result<()> {
    let n = (size as usize) / std::mem::size_of::<T>();
    let (me, npes) = (shmem.my_pe(), shmem.n_pes());
    let src = shmem.calloc::<T>(n)?;
    let dst = shmem.calloc::<T>(n)?;
    let data: Vec<T> = (0..n).map(|i| T::from_f32(input(me, i))).collect();
    shmem.write(&src, &data)?;
    let team = shmem.team_world();
    let s = shmem.stream();
    let ms = time_op(shmem, o, size, || shmem.allreduce_on_stream(&team, &dst, &src, n, ReduceOp::Sum, s))?;
    out.push(Meas { test: T::TEST, size, ms });
    shmem.synchronize()?;
    let got: Vec<f32> = shmem.read(&dst)?.into_iter().map(T::to_f32).collect();
    let want = |i: usize| {
        // Member order 0, 1, … with the type's rounding after each step, as the device does.
        (1..npes).fold(T::from_f32(input(0, i)), |acc, p| T::from_f32(acc.to_f32() + input(p, i))).to_f32()
    };
    errors.extend(first_mismatch(T::TEST, me, size, &got, want, T::TOL));
    shmem.barrier_all()?;
    shmem.free(dst)?;
    shmem.free(src)
}

/// fcollect (`alltoall == false`) or alltoall of f32 blocks of `size` bytes.
fn gather(
    shmem: &Shmem,
    o: &Opts,
    size: u64,
    alltoall: bool,
    out: &mut Vec<Meas>,
    errors: &mut Vec<String>,
) -> gpushmem::Result<()> {
    let ne = size as usize / 4;
    let (me, npes) = (shmem.my_pe(), shmem.n_pes());
    let src_len = if alltoall { ne * npes } else { ne };
    let src = shmem.calloc::<f32>(src_len)?;
    let dst = shmem.calloc::<f32>(ne * npes)?;
    let data: Vec<f32> = (0..src_len).map(|i| input(me, i)).collect();
    shmem.write(&src, &data)?;
    let team = shmem.team_world();
    let s = shmem.stream();
    let test = if alltoall { "alltoall" } else { "fcollect" };
    let ms = time_op(shmem, o, size * npes as u64, || {
        if alltoall {
            shmem.alltoall_on_stream(&team, &dst, &src, ne, s)
        } else {
            shmem.fcollect_on_stream(&team, &dst, &src, ne, s)
        }
    })?;
    out.push(Meas { test, size, ms });
    shmem.synchronize()?;
    let got = shmem.read(&dst)?;
    // Block k of dest comes from PE k: its whole source (fcollect) or its block `me` (alltoall).
    let want = |f: usize| {
        let (k, i) = (f / ne, f % ne);
        input(k, if alltoall { me * ne + i } else { i })
    };
    errors.extend(first_mismatch(test, me, size, &got, want, 0.0));
    shmem.barrier_all()?;
    shmem.free(dst)?;
    shmem.free(src)
}

pub fn run(o: &Opts) -> BenchResult<Vec<Row>> {
    let npes = o.npes;
    let max = o.coll_max_size.max(4 << 10);
    let reduce_sizes = sizes(4 << 10, max, 4);
    // Factor 2: the 8 MiB row of the fcollect/alltoall target is in the series.
    let block_sizes = sizes(4 << 10, (max / npes as u64).max(4 << 10), 2);
    let progress = Progress::new(1 + 2 * reduce_sizes.len() + 2 * block_sizes.len());
    let heap =
        2 * reduce_sizes.last().copied().unwrap_or(max).max(npes as u64 * block_sizes.last().copied().unwrap_or(0));
    let r = job(npes, config(heap + (64 << 20) + 2 * MEMCPY_MAX), |shmem| {
        let (mut out, mut errors) = (Vec::new(), Vec::new());
        let lead = shmem.my_pe() == 0;
        let memcpy_gbs = memcpy_rate(shmem, o)?;
        let show = |what: String| {
            if lead {
                progress.start(&what);
            }
        };
        let done = || {
            if lead {
                progress.step();
            }
        };
        show("floors".into());
        floors(shmem, o, &mut out)?;
        done();
        for &size in &reduce_sizes {
            show(format!("allreduce_sum_f32 {}", human_size(size)));
            allreduce::<f32>(shmem, o, size, &mut out, &mut errors)?;
            done();
            show(format!("allreduce_sum_bf16 {}", human_size(size)));
            allreduce::<Bf16>(shmem, o, size, &mut out, &mut errors)?;
            done();
        }
        for alltoall in [false, true] {
            for &size in &block_sizes {
                show(format!("{} {}", if alltoall { "alltoall" } else { "fcollect" }, human_size(size)));
                gather(shmem, o, size, alltoall, &mut out, &mut errors)?;
                done();
            }
        }
        Ok((out, errors, memcpy_gbs, shmem.pes_on_device()))
    })?;
    let errors: Vec<String> = r.iter().flat_map(|(_, e, _, _)| e.iter().cloned()).collect();
    if !errors.is_empty() {
        return Err(format!("wrong results: {}", errors.join("; ")).into());
    }
    let n = npes as f64;
    let (memcpy, sharing) = (&r[0].2, r[0].3 as f64);
    let mut rows: Vec<Row> =
        memcpy.iter().map(|&(size, rate)| Row::new("memcpy_dtod", size, rate, None, "GB/s")).collect();
    // The bound's rate: the best of the sizes (named by the row's size), never one in the L2 dip alone.
    let (best_size, memcpy_gbs) = memcpy.iter().copied().fold((0, 0.0), |b, m| if m.1 > b.1 { m } else { b });
    rows.push(Row::new(
        "bound_memcpy_dtod_best",
        best_size,
        memcpy_gbs,
        None,
        "GB/s (the bound's rate; size = its copy)",
    ));
    for (j, m) in r[0].0.iter().enumerate() {
        // The slowest PE's time is the collective's.
        let ms = r.iter().map(|(v, _, _, _)| v[j].ms).fold(0.0, f64::max);
        let test = if o.graph { format!("{}_graph", m.test) } else { m.test.to_string() };
        if m.test.starts_with("floor") {
            rows.push(Row::new(format!("{test}_time"), 0, ms * 1e3, None, "us"));
            continue;
        }
        let (bytes, bus) = match m.test {
            "fcollect" | "alltoall" => (m.size as f64 * n, (n - 1.0) / n),
            _ => (m.size as f64, 2.0 * (n - 1.0) / n),
        };
        let traffic = traffic_per_pe(m.test, m.size as f64, n);
        // Bound: every sharing PE's traffic through one memory at 2 R bytes/s.
        let bound_ms = sharing * traffic / (2.0 * memcpy_gbs * 1e6);
        let alg = gbs(bytes, ms);
        rows.push(Row::new(&test, m.size, alg, Some(gbs(bytes, bound_ms)), "GB/s"));
        rows.push(Row::new(format!("{test}_busbw"), m.size, alg * bus, None, "GB/s"));
        rows.push(Row::new(format!("{test}_traffic"), m.size, traffic, None, "B/PE through memory"));
        rows.push(Row::new(format!("{test}_time"), m.size, ms * 1e3, None, "us"));
    }
    Ok(rows)
}

/// Sizes of the `cuMemcpy`s whose best rate gives the bound (bytes).
pub const MEMCPY_SIZES: [u64; 3] = [64 << 20, 256 << 20, 1 << 30];
/// The largest of [`MEMCPY_SIZES`]: the two heap buffers the copies use.
const MEMCPY_MAX: u64 = 1 << 30;

/// PE 0: the device-to-device `cuMemcpy` rate in GB/s at each of
/// [`MEMCPY_SIZES`] (between two heap buffers, median after warm-up), as
/// (bytes, GB/s); other PEs return none (only PE 0's are used).
fn memcpy_rate(shmem: &Shmem, o: &Opts) -> gpushmem::Result<Vec<(u64, f64)>> {
    let a = shmem.calloc::<u8>(MEMCPY_MAX as usize)?;
    let b = shmem.calloc::<u8>(MEMCPY_MAX as usize)?;
    let mut rates = Vec::new();
    if shmem.my_pe() == 0 {
        let s = shmem.stream();
        for size in MEMCPY_SIZES {
            let ms = median_ms(s, o.warmup, o.reps, nothing, || {
                // SAFETY: two distinct MEMCPY_MAX-byte allocations of this PE's heap; size <= MEMCPY_MAX.
                unsafe {
                    gpushmem::cudarc::driver::result::memcpy_dtod_async(
                        b.as_kernel_ptr(),
                        a.as_kernel_ptr(),
                        size as usize,
                        s.cu_stream(),
                    )
                }
                .map_err(cuda("cuMemcpyDtoDAsync"))
            })?;
            rates.push((size, gbs(size as f64, ms)));
        }
    }
    shmem.barrier_all()?;
    shmem.free(b)?;
    shmem.free(a)?;
    Ok(rates)
}

/// Bytes the built-in algorithm moves through memory per PE (reads + writes)
/// for `test` of `size` on `n` PEs (the module doc's table).
fn traffic_per_pe(test: &str, size: f64, n: f64) -> f64 {
    match test {
        "fcollect" | "alltoall" => 2.0 * n * size,
        _ if size < REDUCE_TWO_SHOT_MIN_BYTES as f64 => (n + 1.0) * size,
        _ => 2.0 * size + (n - 1.0) * size / n,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_sum_exactly_in_bf16() {
        for i in 0..64 {
            let exact: f32 = (0..8).map(|p| input(p, i)).sum();
            let b = (1..8).fold(Bf16::from_f32(input(0, i)), |a, p| Bf16::from_f32(a.to_f32() + input(p, i)));
            assert_eq!(b.to_f32(), exact);
        }
        assert!(first_mismatch("t", 0, 8, &[1.0, 2.0], |i| i as f32 + 1.0, 0.0).is_none());
        assert!(first_mismatch("t", 0, 8, &[1.0, 2.5], |i| i as f32 + 1.0, 1e-3).is_some());
    }
}
