//! gpushmem-perf: measurements in the manner of NVSHMEM's perftests, PEs as
//! threads of this process. Every figure is the median of `--reps` timed runs
//! after `--warmup` runs, timed with CUDA events on the measuring PE's stream.
//!
//! ```text
//! gpushmem-perf [all|put-bw|get-bw|pingpong|barrier] [--max-size BYTES] [--reps N] [--warmup N] [--csv FILE]
//! ```
//! - `put-bw`/`get-bw`: PE 0 moves S bytes to/from PE 1 with `putmem_nbi_block`/`getmem_nbi_block`
//!   (grid = S / 64 KiB blocks × 1024 threads, at most 1056, as NVSHMEM's test), then `quiet`;
//!   beside it `cuMemcpyDtoDAsync` of the same S on the same stream. GB/s = S / time.
//! - `pingpong`: `put_signal_nbi` (8 B + signal SET) round trip between PE 0 and PE 1, 10^4 per run.
//! - `barrier`: `barrier_all_block` latency for 2, 4 and 8 PEs, 10^4 per run.

use gpushmem::cudarc::driver::{sys::CUevent_flags, CudaStream};
use gpushmem::{Config, LaunchConfig, Threads};
use std::io::Write;

const PTX: &str = include_str!(env!("GPUSHMEM_PTX_GPUSHMEM_BENCH_KERNELS"));
const CUBIN: &[u8] = include_bytes!(env!("GPUSHMEM_CUBIN_GPUSHMEM_BENCH_KERNELS"));

struct Opts {
    what: String,
    max_size: u64,
    reps: usize,
    warmup: usize,
    csv: Option<String>,
}

fn parse() -> Result<Opts, String> {
    let mut o = Opts { what: "all".into(), max_size: 1 << 30, reps: 10, warmup: 3, csv: None };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match a.as_str() {
            "--max-size" => o.max_size = gpushmem::parse_size(&val("--max-size")?)?,
            "--reps" => o.reps = val("--reps")?.parse().map_err(|e| format!("--reps: {e}"))?,
            "--warmup" => o.warmup = val("--warmup")?.parse().map_err(|e| format!("--warmup: {e}"))?,
            "--csv" => o.csv = Some(val("--csv")?),
            "-h" | "--help" => return Err(String::new()),
            w if !w.starts_with('-') => o.what = w.to_string(),
            other => return Err(format!("unknown option {other}")),
        }
    }
    if o.reps == 0 {
        return Err("--reps must be at least 1".into());
    }
    Ok(o)
}

/// Median in ms of `reps` runs of `f` (after `warmup`), timed with events around it on `stream`.
fn median_ms(
    stream: &CudaStream,
    warmup: usize,
    reps: usize,
    mut f: impl FnMut() -> gpushmem::Result<()>,
) -> gpushmem::Result<f64> {
    let cu = |e| gpushmem::Error::Cuda { call: "event".into(), source: e };
    for _ in 0..warmup {
        f()?;
    }
    stream.synchronize().map_err(cu)?;
    let mut t = Vec::with_capacity(reps);
    for _ in 0..reps {
        let a = stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).map_err(cu)?;
        f()?;
        let b = stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).map_err(cu)?;
        t.push(a.elapsed_ms(&b).map_err(cu)? as f64);
    }
    t.sort_by(|a, b| a.total_cmp(b));
    Ok(t[t.len() / 2])
}

fn config(heap: u64) -> Config {
    Config { heap_size: heap, ..Config::from_env().unwrap_or_default() }
}

/// One row of results.
struct Row {
    test: &'static str,
    size: u64,
    ours: f64,
    baseline: Option<f64>,
    unit: &'static str,
}

fn bandwidth(o: &Opts, get: bool) -> gpushmem::Result<Vec<Row>> {
    let max = o.max_size.max(16);
    let rows = Threads::new(2).config(config(2 * max + (64 << 20))).run(|shmem| {
        let src = shmem.calloc::<u8>(max as usize)?;
        let dst = shmem.calloc::<u8>(max as usize)?;
        let m = shmem.load_module_prebuilt("gpushmem-bench-kernels", PTX, CUBIN)?;
        let k = m.kernel("bw_block")?;
        let mut rows = Vec::new();
        if shmem.my_pe() == 0 {
            let stream = shmem.stream();
            let mut size = 8u64;
            while size <= max {
                let blocks = (size / (64 << 10)).clamp(1, 1056) as u32;
                let cfg = LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (1024, 1, 1), shared_mem_bytes: 0 };
                let args = (get as u32, dst.as_kernel_ptr(), src.as_kernel_ptr(), size, 1u32, 1u32);
                let ours = median_ms(stream, o.warmup, o.reps, || unsafe { shmem.launch(&k, cfg, args) })?;
                let base = median_ms(stream, o.warmup, o.reps, || {
                    // SAFETY: both ranges are in this PE's heap.
                    unsafe {
                        gpushmem::cudarc::driver::result::memcpy_dtod_async(
                            dst.as_kernel_ptr(),
                            src.as_kernel_ptr(),
                            size as usize,
                            stream.cu_stream(),
                        )
                    }
                    .map_err(|e| gpushmem::Error::Cuda { call: "cuMemcpyDtoDAsync".into(), source: e })
                })?;
                let gbs = |ms: f64| size as f64 / (ms * 1e-3) / 1e9;
                rows.push((size, gbs(ours), gbs(base)));
                size *= 4;
            }
        }
        shmem.barrier_all()?;
        Ok(rows)
    })?;
    let test = if get { "get_bw_block" } else { "put_bw_block" };
    Ok(rows[0].iter().map(|&(size, ours, base)| Row { test, size, ours, baseline: Some(base), unit: "GB/s" }).collect())
}

fn pingpong(o: &Opts) -> gpushmem::Result<Vec<Row>> {
    const ITERS: u32 = 10_000;
    let r = Threads::new(2).config(config(64 << 20)).run(|shmem| {
        let payload = shmem.calloc::<u64>(2)?;
        let sig = shmem.calloc::<u64>(1)?;
        let m = shmem.load_module_prebuilt("gpushmem-bench-kernels", PTX, CUBIN)?;
        let k = m.kernel("pingpong")?;
        let one = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (32, 1, 1), shared_mem_bytes: 0 };
        let mut base = 0u64;
        let ms = median_ms(shmem.stream(), o.warmup, o.reps, || {
            let b = base;
            base += ITERS as u64;
            unsafe { shmem.launch_collective(&k, one, (payload.as_kernel_ptr(), sig.as_kernel_ptr(), b, ITERS)) }
        })?;
        shmem.barrier_all()?;
        Ok(ms * 1e3 / ITERS as f64)
    })?;
    Ok(vec![Row { test: "put_signal_pingpong", size: 8, ours: r[0], baseline: None, unit: "us/round trip" }])
}

fn barrier(o: &Opts) -> gpushmem::Result<Vec<Row>> {
    const ITERS: u32 = 10_000;
    let mut rows = Vec::new();
    for n in [2usize, 4, 8] {
        let r = Threads::new(n).config(config(64 << 20)).run(|shmem| {
            let m = shmem.load_module_prebuilt("gpushmem-bench-kernels", PTX, CUBIN)?;
            let k = m.kernel("barrier_loop")?;
            let one = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (32, 1, 1), shared_mem_bytes: 0 };
            let ms =
                median_ms(shmem.stream(), o.warmup, o.reps, || unsafe { shmem.launch_collective(&k, one, (ITERS,)) })?;
            shmem.barrier_all()?;
            Ok(ms * 1e3 / ITERS as f64)
        })?;
        rows.push(Row {
            test: "barrier_all_block",
            size: n as u64,
            ours: r[0],
            baseline: None,
            unit: "us (size = PEs)",
        });
    }
    Ok(rows)
}

fn main() -> std::process::ExitCode {
    let o = match parse() {
        Ok(o) => o,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("gpushmem-perf: {e}");
            }
            eprintln!("usage: gpushmem-perf [all|put-bw|get-bw|pingpong|barrier] [--max-size BYTES] [--reps N] [--warmup N] [--csv FILE]");
            return std::process::ExitCode::from(2);
        }
    };
    if let Err(e) = gpushmem::gpu_available() {
        eprintln!("gpushmem-perf: {e}");
        return std::process::ExitCode::from(2);
    }
    let mut rows = Vec::new();
    let mut run = |name: &str, r: gpushmem::Result<Vec<Row>>| match r {
        Ok(v) => rows.extend(v),
        Err(e) => eprintln!("gpushmem-perf: {name}: {e}"),
    };
    let all = o.what == "all";
    if all || o.what == "put-bw" {
        run("put-bw", bandwidth(&o, false));
    }
    if all || o.what == "get-bw" {
        run("get-bw", bandwidth(&o, true));
    }
    if all || o.what == "pingpong" {
        run("pingpong", pingpong(&o));
    }
    if all || o.what == "barrier" {
        run("barrier", barrier(&o));
    }
    println!("{:<22} {:>12} {:>14} {:>14} {:>7}  unit", "test", "size", "gpushmem", "cuMemcpy", "ratio");
    for r in &rows {
        let (b, ratio) = match r.baseline {
            Some(b) => (format!("{b:.2}"), format!("{:.3}", r.ours / b)),
            None => ("-".into(), "-".into()),
        };
        println!("{:<22} {:>12} {:>14.3} {:>14} {:>7}  {}", r.test, r.size, r.ours, b, ratio, r.unit);
    }
    if let Some(path) = &o.csv {
        let write = || -> std::io::Result<()> {
            let mut f = std::fs::File::create(path)?;
            writeln!(f, "test,size,gpushmem,baseline,unit")?;
            for r in &rows {
                writeln!(
                    f,
                    "{},{},{},{},{}",
                    r.test,
                    r.size,
                    r.ours,
                    r.baseline.map_or(String::new(), |b| b.to_string()),
                    r.unit
                )?;
            }
            Ok(())
        };
        if let Err(e) = write() {
            eprintln!("gpushmem-perf: writing {path}: {e}");
            return std::process::ExitCode::from(1);
        }
    }
    std::process::ExitCode::SUCCESS
}
