//! The build-and-load smoke test: a kernel from the test kernel crate,
//! compiled by gpushmem-build, loaded through the host crate, writes a
//! pattern the host reads back (poisoned output, random input).

use crate::common::*;
use gpushmem::LaunchConfig;

/// 2^20 + 3 words (quick mode: 2^15 + 3).
pub fn smoke_pattern() -> TestResult {
    let n = size_cap(4 << 20) / 4 + 3;
    let out = threads(1, 16 << 20, |shmem| {
        let module = kernels(shmem)?;
        let k = module.kernel("smoke_pattern")?;
        let stream = shmem.stream();
        let input: Vec<u32> =
            random_bytes(seed(), 0, n * 4).chunks(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect();
        let key = input[0] | 1;
        let inp = stream.clone_htod(&input).cu("htod")?;
        let poison = vec![0xDEAD_BEEFu32; n];
        let out = stream.clone_htod(&poison).cu("htod")?;
        let (pi, po) = (dptr(&inp, stream), dptr(&out, stream));
        unsafe { shmem.launch(&k, LaunchConfig::for_num_elems(n as u32), (po, pi, n as u64, key))? };
        shmem.synchronize()?;
        let got = stream.clone_dtoh(&out).cu("dtoh")?;
        let bad = (0..n).filter(|&i| got[i] != input[i] ^ key ^ (i as u32).wrapping_mul(2654435761)).count();
        Ok(bad)
    })?;
    if out[0] != 0 {
        return Err(format!("{} of {n} words wrong", out[0]).into());
    }
    Ok(())
}

/// The device sees the state the host installed: version, PE numbers, heap,
/// peer table — in every one of two modules loaded at once, each checked
/// (the output poisoned first, so that an unwritten word fails even where the
/// state's value is 0, such as PE 0's number); then again after both were
/// dropped and two more loaded (on the NVSHMEM engine a module unloaded while
/// still registered with NVSHMEM once left the next one with `n_pes() == 0`).
/// `n` PEs.
pub fn state_installed(n: usize) -> TestResult {
    const POISON: u64 = 0xDEAD_BEEF_DEAD_BEEF;
    {
        let rows = threads(n, 8 << 20, |shmem| {
            let stream = shmem.stream();
            let mut got = Vec::new();
            for _round in 0..2 {
                // Two modules at once: each gets the state.
                let modules = [kernels(shmem)?, kernels(shmem)?];
                for m in &modules {
                    let out = stream.clone_htod(&vec![POISON; 5 + n]).cu("htod")?;
                    unsafe { shmem.launch(&m.kernel("state_probe")?, one_block(32), (dptr(&out, stream),))? };
                    shmem.synchronize()?;
                    got.push(stream.clone_dtoh(&out).cu("dtoh")?);
                }
            }
            let s = shmem.device_state();
            let mut want = vec![s.version as u64, s.my_pe as u64, s.n_pes as u64, s.heap_base, s.heap_size];
            want.extend_from_slice(shmem.peer_heap_bases());
            Ok((got, want))
        })?;
        for (pe, (got, want)) in rows.iter().enumerate() {
            if got.len() != 4 {
                return Err(format!("{n} PEs, PE {pe}: {} modules probed, want 4", got.len()).into());
            }
            if want.len() != 5 + n || want[1] != pe as u64 || want[2] != n as u64 {
                return Err(format!("{n} PEs, PE {pe}: the host's own state is off: {want:x?}").into());
            }
            for (mi, g) in got.iter().enumerate() {
                if g != want {
                    return Err(
                        format!("{n} PEs, PE {pe}, module {mi}: device saw {g:x?}, host installed {want:x?}").into()
                    );
                }
            }
        }
    }
    Ok(())
}

/// 100 init/finalize cycles (quick mode: 1; 2 PEs as threads, each cycle
/// loading the test module and running a collective kernel) leave the
/// device's free memory where it started — less what the CUDA driver itself
/// keeps of the modules it loaded and unloaded, measured in the same process
/// by loading the same images the same number of times without gpushmem.
/// The driver (580.159 on the H100) keeps about 2 MiB of device memory per
/// module whose kernels were loaded, after `cuModuleUnload`, until the
/// context goes; gpushmem must keep nothing on top of that.
pub fn init_finalize_cycles() -> TestResult {
    const PES: usize = 2;
    let cycles = scaled(100);
    // Hold the primary context so its own memory is not what we measure.
    let ctx = gpushmem::cudarc::driver::CudaContext::new(0).map_err(|e| format!("{e}"))?;
    let free = || gpushmem::cudarc::driver::result::mem_get_info().map(|m| m.0 as i64).map_err(|e| format!("{e}"));
    // One cycle up to `upto`: 0 init/finalize only, 1 + load the test module,
    // 2 + calloc, 3 + a collective launch (the test's cycle).
    let cycle = |upto: u32| -> TestResult {
        threads(PES, 32 << 20, |shmem| {
            if upto == 0 {
                return shmem.synchronize();
            }
            let m = kernels(shmem)?;
            if upto == 1 {
                return shmem.synchronize();
            }
            let b = shmem.calloc::<u64>(2 * shmem.n_pes())?;
            let e = shmem.calloc::<u32>(1)?;
            if upto == 3 {
                // SAFETY: `barrier_rounds(*mut u64, u32, *mut u32, u32)`: both buffers are live heap allocations of this job.
                unsafe {
                    shmem.launch_collective(
                        &m.kernel("barrier_rounds")?,
                        one_block(32),
                        (b.as_kernel_ptr(), 3u32, e.as_kernel_ptr(), 1u32),
                    )?
                };
            }
            shmem.synchronize()
        })
        .map(drop)
    };
    // Free memory used since the start after each of `n` runs of `step`
    // (after one warm-up run: the driver's own first-use allocations).
    let trace = |n: usize, step: &dyn Fn() -> TestResult| -> Result<Vec<i64>, libtest_mimic::Failed> {
        step()?;
        ctx.bind_to_thread().map_err(|e| format!("{e}"))?;
        let before = free()?;
        let mut t = Vec::with_capacity(n);
        for _ in 0..n {
            step()?;
            ctx.bind_to_thread().map_err(|e| format!("{e}"))?;
            t.push(before - free()?);
        }
        Ok(t)
    };
    let last = |t: &[i64]| t.last().copied().unwrap_or(0);
    // The driver alone: `image` (the cubin, else the PTX, as gpushmem chooses)
    // loaded through cudarc with every kernel loaded (`cuFuncLoad`, as
    // `load_module` does against lazy loading's deadlock), then unloaded;
    // `check_err` shows a failing `cuModuleUnload` (cudarc's drop records it).
    let load = |cubin: &[u8], ptx: &str| -> TestResult {
        let image = if cubin.is_empty() {
            gpushmem::cudarc::nvrtc::Ptx::from_src(ptx)
        } else {
            gpushmem::cudarc::nvrtc::Ptx::from_binary(cubin.to_vec())
        };
        let m = ctx.load_module(image).map_err(|e| format!("{e}"))?;
        for name in entry_names(ptx) {
            let f = m.load_function(name).map_err(|e| format!("cuModuleGetFunction({name}): {e}"))?;
            // SAFETY: a function handle of the module loaded above, which outlives the call.
            unsafe { gpushmem::cudarc::driver::sys::cuFuncLoad(f.cu_function()) }
                .result()
                .map_err(|e| format!("cuFuncLoad: {e}"))?;
        }
        drop(m);
        ctx.check_err().map_err(|e| format!("cuModuleUnload: {e}"))?;
        Ok(())
    };
    // What a cycle loads: on every PE the built-in module (at init) and the test module.
    let same_loads = || -> TestResult {
        for _ in 0..PES {
            load(gpushmem::BUILTIN_CUBIN, gpushmem::BUILTIN_PTX)?;
            load(CUBIN, PTX)?;
        }
        Ok(())
    };
    let full = trace(cycles, &|| cycle(3))?;
    let leaked = last(&full);
    let driver = last(&trace(cycles, &same_loads)?);
    let own = leaked - driver;
    let at = |k: usize| full.get(k - 1).map_or("-".into(), |d| format!("{}:{d}", k));
    let marks: Vec<String> = [1, 2, 3, 5, 10, 25, 50, 75, 100].iter().map(|&k| at(k)).collect();
    println!("  used since the start after cycle k (k:bytes): {}", marks.join(" "));
    println!(
        "  free device memory after {cycles} cycles: {leaked} B less than before; the driver alone, the same \
         {} module loads: {driver} B; gpushmem's own: {own} B",
        2 * PES * cycles
    );
    // Tolerance: the driver keeps memory in 2 MiB chunks, so each of the two
    // traces may end up to one chunk off; far below one 32 MiB heap.
    if own > 4 << 20 {
        // Which step keeps memory: 20 cycles of each shorter cycle, in the same process.
        for (upto, what) in [(0, "init/finalize only"), (1, "+ module load"), (2, "+ calloc")] {
            let t = trace(20, &|| cycle(upto))?;
            println!("  diagnosis: {what}: {} B less after 20 cycles", last(&t));
        }
        return Err(format!(
            "device memory leaked: {own} bytes over {cycles} cycles beyond the driver's own {driver} bytes"
        )
        .into());
    }
    Ok(())
}

/// Names of the kernels (`.entry NAME(`) a PTX text defines; the host's own
/// parser is internal, and the driver-alone measurement runs without a Shmem.
fn entry_names(ptx: &str) -> impl Iterator<Item = &str> {
    ptx.lines().filter_map(|l| l.split(".entry ").nth(1)).filter_map(|n| n.split(['(', ' ']).next())
}

/// `collective_launch_query_gridsize` on 1 and 2 PEs (sharing the GPU): a
/// collective launch of exactly that many blocks goes, one more block is an
/// `Error::Launch` naming the kernel, and 2 PEs on one GPU get half of 1 PE's
/// grid (rounded down). On the NVSHMEM engine (one PE per process) only the
/// 1-PE half runs here.
pub fn launch_query_gridsize() -> TestResult {
    let nvshmem = engine() == gpushmem::Engine::Nvshmem;
    let jobs: &[usize] = if nvshmem { &[1] } else { &[1, 2] };
    let mut per_job = Vec::new();
    for &n in jobs {
        let rows = threads(n, 16 << 20, |shmem| {
            let m = kernels(shmem)?;
            let k = m.kernel("probe_fence")?;
            let q = shmem.collective_launch_query_gridsize(&k, 256, 0)?;
            let cfg = |g: u32| LaunchConfig { grid_dim: (g, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
            // SAFETY: `probe_fence()` takes no arguments.
            unsafe { shmem.launch_collective(&k, cfg(q), ())? };
            shmem.synchronize()?;
            // SAFETY: as above.
            let over = unsafe { shmem.launch_collective(&k, cfg(q + 1), ()) };
            let refused = matches!(&over, Err(gpushmem::Error::Launch { kernel, .. }) if kernel == "probe_fence");
            Ok((q, refused))
        })?;
        per_job.push(rows);
    }
    let mut bad = Vec::new();
    for (&n, rows) in jobs.iter().zip(&per_job) {
        for (pe, (q, refused)) in rows.iter().enumerate() {
            if *q == 0 || !refused {
                bad.push(format!("{n} PE(s), PE {pe}: query {q}, one block more refused: {refused}"));
            }
        }
    }
    let q1 = per_job[0][0].0;
    let Some(two) = per_job.get(1) else {
        fail_if_any(&bad)?;
        println!(
            "  256-thread blocks: {q1} for 1 PE; one block more is refused (2 PEs: native engine only, PEs as threads)"
        );
        return Ok(());
    };
    let q2 = two[0].0;
    if gpushmem::gpu_available().is_ok_and(|g| g == 1) && q2 != q1 / 2 {
        bad.push(format!("2 PEs on one GPU got {q2} blocks each, want half of 1 PE's {q1}"));
    }
    fail_if_any(&bad)?;
    println!("  256-thread blocks: {q1} per PE alone, {q2} per PE with 2 PEs; one block more is refused");
    Ok(())
}
