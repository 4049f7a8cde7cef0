//! `init`: host-side setup costs with `--npes` PEs as threads, wall clock:
//! - `init`: from `Threads::run` to the last PE entering its function
//!   (contexts, streams, a 1 GiB + 64 MiB heap allocated and zeroed per PE,
//!   peer mapping, built-in module, closing barrier); median of up to 3 jobs.
//! - `malloc_1gib` / `calloc_1gib`: one collective `malloc`/`calloc` of 1 GiB
//!   per PE (PEs lined up by a host barrier first), slowest PE per sample;
//!   `malloc_1gib_first` / `calloc_1gib_first`: the first sample of the first
//!   job (one cold sample), `malloc_1gib` / `calloc_1gib`: the median of the
//!   warm samples (every job's samples after its first, `--reps` − 1 a job, at
//!   least one). bench/nvshmem/perf.cu times `nvshmem_malloc` the same two ways.
//!
//! With `--one-pe` (always on the NVSHMEM engine) the job is one PE; on the
//! NVSHMEM engine `init` is then `Shmem::init` of this process (NVSHMEM's
//! initialisation and its `nvshmem_malloc` of the whole heap included), and
//! `malloc_1gib`/`calloc_1gib` are gpushmem's allocations inside that heap.

use crate::common::{config, median, BenchResult, Row};
use crate::engine::job;
use crate::opts::Opts;
use crate::progress::Progress;
use std::time::Instant;

const GIB: usize = 1 << 30;

/// Heap per PE: the 1 GiB allocation and 64 MiB to spare.
pub const HEAP: u64 = GIB as u64 + (64 << 20);

/// One PE of one job: ms to enter, then ms per malloc and per calloc sample.
type PeTimes = (f64, Vec<f64>, Vec<f64>);

fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// Cold first sample (the first job's first) and the median of the warm ones
/// (each job's after its first; the first alone if no job has more) of
/// per-job samples.
fn first_and_warm(jobs: &[Vec<f64>]) -> (f64, f64) {
    let first = jobs.first().and_then(|j| j.first()).copied().unwrap_or(0.0);
    let mut warm: Vec<f64> = jobs.iter().flat_map(|j| j.iter().skip(1).copied()).collect();
    if warm.is_empty() {
        warm.push(first);
    }
    (first, median(&mut warm))
}

/// Rows `init`, `malloc_1gib_first`, `malloc_1gib`, `calloc_1gib_first`,
/// `calloc_1gib` (size = PEs).
pub fn run(o: &Opts) -> BenchResult<Vec<Row>> {
    let jobs = o.reps.clamp(1, 3);
    let progress = Progress::new(jobs);
    let (mut init, mut malloc, mut calloc) = (Vec::new(), Vec::<Vec<f64>>::new(), Vec::<Vec<f64>>::new());
    for _ in 0..jobs {
        progress.start(&format!("init, malloc_1gib, calloc_1gib with {} PEs", o.npes));
        let start = Instant::now();
        let r: Vec<PeTimes> = job(o.npes, config(HEAP), |shmem| {
            let entered = ms_since(start);
            let (mut m, mut c) = (Vec::new(), Vec::new());
            for _ in 0..o.reps {
                shmem.barrier_all()?;
                let t = Instant::now();
                let s = shmem.malloc::<u8>(GIB)?;
                m.push(ms_since(t));
                shmem.free(s)?;
                shmem.barrier_all()?;
                let t = Instant::now();
                let s = shmem.calloc::<u8>(GIB)?;
                c.push(ms_since(t));
                shmem.free(s)?;
            }
            Ok((entered, m, c))
        })?;
        init.push(r.iter().map(|p| p.0).fold(0.0, f64::max));
        let slowest = |f: fn(&PeTimes) -> &Vec<f64>| -> Vec<f64> {
            (0..o.reps).map(|i| r.iter().map(|p| f(p)[i]).fold(0.0, f64::max)).collect()
        };
        malloc.push(slowest(|p| &p.1));
        calloc.push(slowest(|p| &p.2));
        progress.step();
    }
    let n = o.npes as u64;
    let unit = "ms (size = PEs)";
    let ((m_first, m_warm), (c_first, c_warm)) = (first_and_warm(&malloc), first_and_warm(&calloc));
    Ok(vec![
        Row::new("init", n, median(&mut init), None, unit),
        Row::new("malloc_1gib_first", n, m_first, None, unit),
        Row::new("malloc_1gib", n, m_warm, None, unit),
        Row::new("calloc_1gib_first", n, c_first, None, unit),
        Row::new("calloc_1gib", n, c_warm, None, unit),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_is_cold_and_warm_leaves_firsts_out() {
        assert_eq!(first_and_warm(&[vec![9.0, 1.0, 2.0], vec![8.0, 3.0]]), (9.0, 2.0));
        assert_eq!(first_and_warm(&[vec![5.0]]), (5.0, 5.0));
    }
}
