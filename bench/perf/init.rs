//! `init`: host-side setup costs with `--npes` PEs as threads, wall clock:
//! - `init`: from `Threads::run` to the last PE entering its function
//!   (contexts, streams, a 1 GiB + 64 MiB heap allocated and zeroed per PE,
//!   peer mapping, built-in module, closing barrier); median of up to 3 jobs.
//! - `malloc_1gib` / `calloc_1gib`: one collective `malloc`/`calloc` of 1 GiB
//!   per PE (PEs lined up by a host barrier first), slowest PE per sample,
//!   median over `--reps` samples in each job.
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

/// Rows `init`, `malloc_1gib`, `calloc_1gib` (size = PEs).
pub fn run(o: &Opts) -> BenchResult<Vec<Row>> {
    let jobs = o.reps.clamp(1, 3);
    let progress = Progress::new(jobs);
    let (mut init, mut malloc, mut calloc) = (Vec::new(), Vec::new(), Vec::new());
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
        for i in 0..o.reps {
            malloc.push(r.iter().map(|p| p.1[i]).fold(0.0, f64::max));
            calloc.push(r.iter().map(|p| p.2[i]).fold(0.0, f64::max));
        }
        progress.step();
    }
    let n = o.npes as u64;
    Ok(vec![
        Row::new("init", n, median(&mut init), None, "ms (size = PEs)"),
        Row::new("malloc_1gib", n, median(&mut malloc), None, "ms (size = PEs)"),
        Row::new("calloc_1gib", n, median(&mut calloc), None, "ms (size = PEs)"),
    ])
}
