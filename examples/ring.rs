//! Ring shift, the hello world of gpushmem: every PE `put_nbi`s a buffer to
//! the next PE, `quiet`, `barrier_all`; then each checks what it received.
//!
//! `cargo run --release --example ring [-- PES [BYTES]]` runs PEs as threads
//! (default: 2 per GPU… at least 2); under `gpushmem-run -n N` each process is one PE.

#[path = "common/mod.rs"]
mod common;

use gpushmem::{LaunchConfig, Shmem};
use std::time::Instant;

const PTX: &str = include_str!(env!("GPUSHMEM_PTX_RING_KERNELS"));

fn pattern(pe: usize, i: usize) -> u8 {
    (i.wrapping_mul(31) ^ pe.wrapping_mul(97) ^ (i >> 8)) as u8
}

/// Whether every byte arrived, the kernel's device time (events around it on
/// the PE's stream: the put, its quiet and the in-kernel barrier) and the wall
/// time (launch, kernel, host synchronisation), in seconds.
fn ring(shmem: &Shmem, bytes: usize) -> gpushmem::Result<(bool, f64, f64)> {
    let (me, n) = (shmem.my_pe(), shmem.n_pes());
    let src = shmem.malloc::<u8>(bytes)?;
    let dst = shmem.calloc::<u8>(bytes)?;
    let done = shmem.calloc::<u32>(1)?;
    shmem.write(&src, &(0..bytes).map(|i| pattern(me, i)).collect::<Vec<_>>())?;
    let module = shmem.load_module("ring-kernels", PTX)?;
    let k = module.kernel("ring_shift")?;
    // A block per 256 KiB, at most 32, and never more than a collective launch may use.
    let fit = shmem.collective_launch_query_gridsize(&k, 512, 0)?;
    let blocks = ((bytes / (256 << 10)).clamp(1, 32) as u32).min(fit);
    let cfg = LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (512, 1, 1), shared_mem_bytes: 0 };
    shmem.barrier_all()?;
    let timed = Some(gpushmem::cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
    let t = Instant::now();
    let start = shmem.stream().record_event(timed)?;
    // SAFETY: `ring_shift(dest: Sym<u8>, src: Sym<u8>, done: Sym<u32>)`; each
    // `&SymSlice<T>` arrives as the kernel's `Sym<T>` handle.
    unsafe { shmem.launch_collective(&k, cfg, (&dst, &src, &done))? };
    let end = shmem.stream().record_event(timed)?;
    shmem.synchronize()?;
    let wall = t.elapsed().as_secs_f64();
    let device = f64::from(start.elapsed_ms(&end)?) / 1e3;
    let from = (me + n - 1) % n;
    let got = shmem.read(&dst)?;
    let ok = got.iter().enumerate().all(|(i, &b)| b == pattern(from, i));
    shmem.free(done)?;
    shmem.free(dst)?;
    shmem.free(src)?;
    Ok((ok, device, wall))
}

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(bytes) = common::arg(&args, 1, 64 << 20) else {
        return common::usage("ring [PES [BYTES]]  (both > 0)");
    };
    common::run(
        "ring",
        &args,
        "every PE received the right data",
        "some PE received WRONG DATA (see above)",
        |s, mode, _shared| {
            let (ok, device, wall) = ring(s, bytes)?;
            if s.my_pe() == 0 {
                println!("ring: {} PEs ({mode}), {bytes} bytes each", s.n_pes());
            }
            println!(
                "PE {}: {}; put kernel {:.3} ms on the GPU ({:.1} GB/s: put, quiet and barrier), \
                 {:.3} ms wall time (adds launch and host synchronisation)",
                s.my_pe(),
                if ok { "received the right data" } else { "WRONG DATA" },
                device * 1e3,
                bytes as f64 / device / 1e9,
                wall * 1e3,
            );
            // Every PE's verdict, so that PE 0 reports for the job.
            Ok(common::gather(s, device, ok)?.1)
        },
    )
}
