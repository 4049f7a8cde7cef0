//! Ring shift, the hello world of gpushmem: every PE `put_nbi`s a buffer to
//! the next PE, `quiet`, `barrier_all`; then each checks what it received.
//!
//! `cargo run --release --example ring [-- PES [BYTES]]` runs PEs as threads
//! (default: 2 per GPU… at least 2); under `gpushmem-run -n N` each process is one PE.

use gpushmem::{LaunchConfig, Shmem, Threads};
use std::time::Instant;

const PTX: &str = include_str!(env!("GPUSHMEM_PTX_RING_KERNELS"));

fn pattern(pe: usize, i: usize) -> u8 {
    (i.wrapping_mul(31) ^ pe.wrapping_mul(97) ^ (i >> 8)) as u8
}

fn ring(shmem: &Shmem, bytes: usize) -> gpushmem::Result<(bool, f64)> {
    let (me, n) = (shmem.my_pe(), shmem.n_pes());
    let src = shmem.malloc::<u8>(bytes)?;
    let dst = shmem.calloc::<u8>(bytes)?;
    let done = shmem.calloc::<u32>(1)?;
    shmem.write(&src, &(0..bytes).map(|i| pattern(me, i)).collect::<Vec<_>>())?;
    let module = shmem.load_module("ring-kernels", PTX)?;
    let k = module.kernel("ring_shift")?;
    let blocks = (bytes / (256 << 10)).clamp(1, 32) as u32;
    let cfg = LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (512, 1, 1), shared_mem_bytes: 0 };
    shmem.barrier_all()?;
    let t = Instant::now();
    unsafe {
        shmem.launch_collective(
            &k,
            cfg,
            (dst.as_kernel_ptr(), src.as_kernel_ptr(), bytes as u64, done.as_kernel_ptr()),
        )?
    };
    shmem.synchronize()?;
    let secs = t.elapsed().as_secs_f64();
    let from = (me + n - 1) % n;
    let got = shmem.read(&dst)?;
    let ok = got.iter().enumerate().all(|(i, &b)| b == pattern(from, i));
    shmem.free(done)?;
    shmem.free(dst)?;
    shmem.free(src)?;
    Ok((ok, secs))
}

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let bytes: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(64 << 20);
    let launched = std::env::var_os("GPUSHMEM_RANK").is_some() || std::env::var_os("OMPI_COMM_WORLD_RANK").is_some();
    let result = if launched {
        Shmem::init().and_then(|s| {
            let r = ring(&s, bytes)?;
            s.finalize()?;
            Ok(vec![r])
        })
    } else {
        let gpus = match gpushmem::gpu_available() {
            Ok(n) => n,
            Err(e) => {
                eprintln!("ring: {e}");
                return std::process::ExitCode::from(2);
            }
        };
        let pes = args.first().and_then(|s| s.parse().ok()).unwrap_or(gpus.max(2));
        println!("ring: {pes} PEs as threads on {gpus} GPU(s), {bytes} bytes each");
        Threads::new(pes).run(|s| ring(s, bytes))
    };
    match result {
        Ok(rows) => {
            let all_ok = rows.iter().all(|r| r.0);
            for (pe, (ok, secs)) in rows.iter().enumerate() {
                println!(
                    "PE {pe}: {} in {:.3} ms ({:.1} GB/s put)",
                    if *ok { "received the right data" } else { "WRONG DATA" },
                    secs * 1e3,
                    bytes as f64 / secs / 1e9
                );
            }
            if all_ok {
                std::process::ExitCode::SUCCESS
            } else {
                std::process::ExitCode::from(1)
            }
        }
        Err(e) => {
            eprintln!("ring: {e}");
            std::process::ExitCode::from(1)
        }
    }
}
