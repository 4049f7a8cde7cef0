//! What every measurement shares: result rows, event timing, settings, the kernel module.

use gpushmem::cudarc::driver::{sys::CUevent_flags, CudaStream};
use gpushmem::{Config, Module, Shmem};

const PTX: &str = include_str!(env!("GPUSHMEM_PTX_GPUSHMEM_BENCH_KERNELS"));
const CUBIN: &[u8] = include_bytes!(env!("GPUSHMEM_CUBIN_GPUSHMEM_BENCH_KERNELS"));

/// Error of a subcommand: a library error, an engine error
/// ([`crate::engine::EngineError`]) or a failed result check.
pub type BenchError = Box<dyn std::error::Error + Send + Sync>;
/// Result of a subcommand.
pub type BenchResult<T> = Result<T, BenchError>;

/// One row of results.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// Test name (the CSV's `test` column).
    pub test: String,
    /// Bytes, PEs or threads, as the test's doc says.
    pub size: u64,
    /// The figure, in `unit`.
    pub ours: f64,
    /// cuMemcpyDtoDAsync of the same bytes, for bandwidth rows.
    pub baseline: Option<f64>,
    /// `GB/s`, `us`, `ms (size = PEs)`, …
    pub unit: String,
}

impl Row {
    /// A row.
    pub fn new(test: impl Into<String>, size: u64, ours: f64, baseline: Option<f64>, unit: &str) -> Row {
        Row { test: test.into(), size, ours, baseline, unit: unit.into() }
    }
}

/// Loads the bench kernels (collective).
pub fn module(shmem: &Shmem) -> gpushmem::Result<Module> {
    shmem.load_module_prebuilt("gpushmem-bench-kernels", PTX, CUBIN)
}

/// Settings from the environment, with this heap size per PE.
pub fn config(heap: u64) -> Config {
    Config { heap_size: heap, ..Config::from_env().unwrap_or_default() }
}

/// Median in ms of `reps` runs of `f` (after `warmup` runs), each timed with
/// CUDA events recorded around it on `stream`. `pre` runs before each run,
/// outside the timed span (e.g. a stream-ordered barrier that lines the PEs
/// up, so one PE's later launch is not counted in another's time).
pub fn median_ms(
    stream: &CudaStream,
    warmup: usize,
    reps: usize,
    mut pre: impl FnMut() -> gpushmem::Result<()>,
    mut f: impl FnMut() -> gpushmem::Result<()>,
) -> gpushmem::Result<f64> {
    let cu = cuda("recording or reading a timing event");
    for _ in 0..warmup {
        pre()?;
        f()?;
    }
    stream.synchronize().map_err(cu)?;
    let mut t = Vec::with_capacity(reps);
    for _ in 0..reps {
        pre()?;
        let a = stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).map_err(cu)?;
        f()?;
        let b = stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).map_err(cu)?;
        t.push(a.elapsed_ms(&b).map_err(cu)? as f64);
    }
    Ok(median(&mut t))
}

/// Median of `v` (upper middle for an even count); `v` is sorted in place. 0 when empty.
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// [`median_ms`] on `shmem`'s stream with the PEs lined up before each run
/// by a stream-ordered barrier (every PE calls it: a collective). A job of
/// one PE has nothing to line up: no barrier then, as NVSHMEM's one-PE
/// program (bench/nvshmem/perf.cu) times it.
pub fn median_ms_lined_up(
    shmem: &gpushmem::Shmem,
    o: &crate::opts::Opts,
    f: impl FnMut() -> gpushmem::Result<()>,
) -> gpushmem::Result<f64> {
    let s = shmem.stream();
    if shmem.n_pes() == 1 {
        return median_ms(s, o.warmup, o.reps, nothing, f);
    }
    median_ms(s, o.warmup, o.reps, || shmem.barrier_all_on_stream(s), f)
}

/// Wraps a driver error as `gpushmem::Error::Cuda` naming `call` (for `map_err`).
pub fn cuda(call: &'static str) -> impl Fn(gpushmem::cudarc::driver::DriverError) -> gpushmem::Error + Copy {
    move |source| gpushmem::Error::Cuda { call: call.into(), source }
}

/// No-op `pre` for [`median_ms`].
pub fn nothing() -> gpushmem::Result<()> {
    Ok(())
}

/// `8 B`, `4 KiB`, `64 MiB`, `1 GiB`, `1536 B` (exact powers of 1024 only get a unit).
pub fn human_size(b: u64) -> String {
    for (shift, unit) in [(40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if b >= 1 << shift && b.is_multiple_of(1 << shift) {
            return format!("{} {unit}", b >> shift);
        }
    }
    format!("{b} B")
}

/// `min, 2·min, 4·min … ≤ max`, then `max` itself if the doubling missed it.
pub fn sizes(min: u64, max: u64, factor: u64) -> Vec<u64> {
    let mut v = Vec::new();
    let mut s = min.max(1);
    while s <= max {
        v.push(s);
        s = match s.checked_mul(factor) {
            Some(n) => n,
            None => break,
        };
    }
    if v.last() != Some(&max) && max >= min {
        v.push(max);
    }
    v
}

/// GB/s (10^9 bytes per second) of `bytes` in `ms`.
pub fn gbs(bytes: f64, ms: f64) -> f64 {
    bytes / (ms * 1e-3) / 1e9
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helpers() {
        assert_eq!(sizes(8, 64, 2), [8, 16, 32, 64]);
        assert_eq!(sizes(8, 100, 4), [8, 32, 100]);
        assert_eq!(human_size(64 << 20), "64 MiB");
        assert_eq!(human_size(1536), "1536 B");
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert!((gbs(1e9, 1000.0) - 1.0).abs() < 1e-12);
    }
}
