//! Issue 40, step 3, on the GPU: the bulk-copy engine driven from Rust
//! (tests/kernels/src/bulk.rs) copies correctly, and what one elected thread
//! per block moves; dynamic shared memory from Rust. Native engine only.

use crate::common::*;
use gpushmem::cudarc::driver::sys::CUevent_flags;
use gpushmem::LaunchConfig;

/// `bulk_probe_copy` of 64 MiB with 1, 8 and 132 blocks of 32 threads (one
/// issuing thread each), and of a size that is not a whole number of chunks:
/// every byte checked; the device-timed GB/s printed (the probe's own
/// figure, a first point for issue 40's table, not a benchmark).
pub fn probe_copy() -> TestResult {
    let rows = threads(1, 160 << 20, |shmem| {
        let m = kernels(shmem)?;
        let k = m.kernel("bulk_probe_copy")?;
        let mut report = Vec::new();
        for (bytes, blocks) in [(64usize << 20, 1u32), (64 << 20, 8), (64 << 20, 132), ((5 << 20) + 48, 7)] {
            let src = shmem.malloc::<u8>(bytes)?;
            let dst = shmem.calloc::<u8>(bytes)?;
            let data: Vec<u8> = (0..bytes).map(|i| (i.wrapping_mul(131) ^ (i >> 11)) as u8).collect();
            shmem.write(&src, &data)?;
            let cfg = LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (32, 1, 1), shared_mem_bytes: 0 };
            let timed = Some(CUevent_flags::CU_EVENT_DEFAULT);
            let start = shmem.stream().record_event(timed)?;
            // SAFETY: `bulk_probe_copy(dst, src, bytes)`: both `bytes` long, 16-byte aligned heap memory.
            unsafe { shmem.launch(&k, cfg, (dst.as_kernel_ptr(), src.as_kernel_ptr(), bytes as u64))? };
            let end = shmem.stream().record_event(timed)?;
            shmem.synchronize()?;
            let secs = f64::from(start.elapsed_ms(&end)?) / 1e3;
            let got = shmem.read(&dst)?;
            let wrong = (0..bytes).find(|&i| got[i] != data[i]);
            report.push((bytes, blocks, secs, wrong));
            shmem.free(dst)?;
            shmem.free(src)?;
        }
        Ok(report)
    })?;
    let mut bad = Vec::new();
    for &(bytes, blocks, secs, wrong) in &rows[0] {
        match wrong {
            Some(i) => bad.push(format!("{bytes} bytes, {blocks} blocks: byte {i} wrong")),
            None => println!(
                "  bulk_probe_copy {bytes} bytes, {blocks} block(s) x 1 issuing thread: right, {:.1} GB/s",
                bytes as f64 / secs / 1e9
            ),
        }
    }
    fail_if_any(&bad)
}

/// `bulk_probe_dynamic` with 16 KiB of dynamic shared memory: the words come back.
pub fn probe_dynamic() -> TestResult {
    let words = 4096u32;
    let rows = threads(1, 16 << 20, |shmem| {
        let m = kernels(shmem)?;
        let out = shmem.calloc::<u32>(words as usize)?;
        let cfg = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 4 * words };
        // SAFETY: `bulk_probe_dynamic(out, words)`; `out` has `words` u32s and the launch gives 4 * words bytes.
        unsafe { shmem.launch(&m.kernel("bulk_probe_dynamic")?, cfg, (out.as_kernel_ptr(), words))? };
        shmem.synchronize()?;
        shmem.read(&out)
    })?;
    match (0..words as usize).find(|&i| rows[0][i] != i as u32 * 3 + 1) {
        Some(i) => Err(format!("dynamic shared memory word {i}: {} (want {})", rows[0][i], i * 3 + 1).into()),
        None => {
            println!("  dynamic shared memory from Rust (global_asm! .extern .shared): {words} words right");
            Ok(())
        }
    }
}
