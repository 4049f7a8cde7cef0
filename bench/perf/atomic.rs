//! `atomic`: remote `atomic_fetch_add` latency and `atomic_add` throughput, PE 0 on PE 1's counters,
//! every final counter value checked on PE 1.

use crate::common::{config, cuda, median_ms, module, nothing, BenchResult, Row};
use crate::engine::job;
use crate::latency::ITERS;
use crate::opts::Opts;
use gpushmem::cudarc::driver::sys::CUdevice_attribute;
use gpushmem::{LaunchConfig, Shmem, SymSlice};

/// `atomic_add`s per thread per launch in the throughput tests.
const THROUGHPUT_ITERS: u32 = 64;

/// Compares PE 1's counters with what the launches must have left there.
fn check(shmem: &Shmem, test: &str, c: &SymSlice<u64>, want: u64, errors: &mut Vec<String>) -> gpushmem::Result<()> {
    let got = shmem.read(c)?;
    if let Some((i, v)) = got.iter().enumerate().find(|(_, &v)| v != want) {
        let bad = got.iter().filter(|&&v| v != want).count();
        errors.push(format!(
            "{test}: counter {i} on PE 1 is {v}, expected {want} ({bad} of {} counters wrong)",
            got.len()
        ));
    }
    Ok(())
}

pub fn run(o: &Opts) -> BenchResult<Vec<Row>> {
    let runs = (o.warmup + o.reps) as u64;
    let r = job(2, config(256 << 20), |shmem| {
        let sms = shmem
            .context()
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(cuda("reading the SM count"))?;
        let blocks = o.grid.unwrap_or(sms.max(1) as u32);
        let threads = o.block.unwrap_or(1024);
        let n = blocks as usize * threads as usize;
        let lat = shmem.calloc::<u64>(1)?;
        let out = shmem.calloc::<u64>(1)?;
        let distinct = shmem.calloc::<u64>(n)?;
        let one = shmem.calloc::<u64>(1)?;
        let m = module(shmem)?;
        let (kl, kt) = (m.kernel("atomic_fetch_add_latency")?, m.kernel("atomic_add_throughput")?);
        let mut rows = Vec::new();
        if shmem.my_pe() == 0 {
            let s = shmem.stream();
            let single = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (32, 1, 1), shared_mem_bytes: 0 };
            // SAFETY: the arguments match the kernels; the counters are symmetric and large enough.
            let ms = median_ms(s, o.warmup, o.reps, nothing, || unsafe {
                shmem.launch(&kl, single, (lat.as_kernel_ptr(), out.as_kernel_ptr(), 1u32, ITERS))
            })?;
            rows.push(Row::new("atomic_fetch_add_latency", 8, ms * 1e3 / ITERS as f64, None, "us"));
            let grid = LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: 0 };
            for (test, c, is_distinct) in
                [("atomic_add_throughput", &distinct, 1u32), ("atomic_add_throughput_one_counter", &one, 0)]
            {
                let ms = median_ms(s, o.warmup, o.reps, nothing, || unsafe {
                    shmem.launch(&kt, grid, (c.as_kernel_ptr(), is_distinct, 1u32, THROUGHPUT_ITERS))
                })?;
                let ops = n as f64 * THROUGHPUT_ITERS as f64;
                rows.push(Row::new(test, n as u64, ops / (ms * 1e-3) / 1e6, None, "Mops/s"));
            }
        }
        shmem.barrier_all()?;
        let mut errors = Vec::new();
        if shmem.my_pe() == 1 {
            check(shmem, "atomic_fetch_add_latency", &lat, runs * ITERS as u64, &mut errors)?;
            check(shmem, "atomic_add_throughput", &distinct, runs * THROUGHPUT_ITERS as u64, &mut errors)?;
            let total = runs * THROUGHPUT_ITERS as u64 * n as u64;
            check(shmem, "atomic_add_throughput_one_counter", &one, total, &mut errors)?;
        }
        Ok((rows, errors))
    })?;
    let errors: Vec<String> = r.iter().flat_map(|(_, e)| e.iter().cloned()).collect();
    if !errors.is_empty() {
        return Err(format!("wrong results: {}", errors.join("; ")).into());
    }
    Ok(r.into_iter().next().map(|(rows, _)| rows).unwrap_or_default())
}
