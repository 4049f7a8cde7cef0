//! gpushmem-info: what this machine offers gpushmem — the kernel toolchain
//! (rustup components, ptxas), the GPUs and their pairwise peer access, the
//! settings the environment selects and the launcher variables it sees.
//! Works without a GPU (says so) and exits 0 unless a setting is invalid.

use gpushmem::bootstrap::env::LaunchEnv;
use gpushmem::cudarc::driver::{result, sys};
use gpushmem::Config;
use std::process::ExitCode;

fn toolchain() {
    println!("kernel toolchain:");
    let rustc = std::env::var_os("RUSTC").map(std::path::PathBuf::from).unwrap_or_else(|| "rustc".into());
    match gpushmem_build::check_components(&rustc) {
        Ok(()) => {
            println!("  rustup components rust-src, llvm-tools, llvm-bitcode-linker: present ({})", rustc.display())
        }
        Err(e @ gpushmem_build::BuildError::Spawn { .. }) => {
            println!("  {e}");
            println!("  (no Rust toolchain here: kernel crates cannot be built on this machine; programs built elsewhere still run)")
        }
        Err(e) => println!("  {e}"),
    }
    match gpushmem_build::find_ptxas() {
        Some(p) => println!("  ptxas: {}", p.display()),
        None => println!("  ptxas: not found (GPUSHMEM_PTXAS or PATH; scripts/setup.sh installs it): PTX is not checked at build time"),
    }
    println!(
        "  target architecture: {}",
        std::env::var("GPUSHMEM_ARCH").unwrap_or_else(|_| gpushmem_build::DEFAULT_ARCH.into())
    );
}

/// The link between two GPUs as CUDA's peer attributes show it: peer
/// access with native atomics is NVLink (PCIe peers do not offer native
/// atomics); access without them is PCIe. `nvidia-smi topo -m` names the
/// exact link (NV18, PIX, …).
fn link_type(access: i32, native_atomics: i32) -> &'static str {
    match (access, native_atomics) {
        (1, 1) => "NVLink (peer access, native atomics)",
        (1, 0) => "PCIe (peer access, no native atomics)",
        (0, _) => "no peer access: gpushmem cannot map this pair",
        _ => "unknown (the query failed)",
    }
}

fn p2p(attr: sys::CUdevice_P2PAttribute, a: sys::CUdevice, b: sys::CUdevice) -> i32 {
    let mut v = 0;
    // SAFETY: a query on valid device handles.
    match unsafe { sys::cuDeviceGetP2PAttribute(&mut v, attr, a, b) }.result() {
        Ok(()) => v,
        Err(_) => -1,
    }
}

fn gpus() {
    println!("GPUs:");
    let n = match gpushmem::gpu_available() {
        Ok(n) => n,
        Err(e) => {
            println!("  {e}");
            return;
        }
    };
    let mut version = 0;
    // SAFETY: a plain query.
    let _ = unsafe { sys::cuDriverGetVersion(&mut version) };
    println!("  CUDA driver API {}.{}; {n} device(s)", version / 1000, version % 1000 / 10);
    let devs: Vec<sys::CUdevice> = (0..n).filter_map(|i| result::device::get(i as i32).ok()).collect();
    for (i, &d) in devs.iter().enumerate() {
        let name = result::device::get_name(d).unwrap_or_else(|e| format!("? ({e})"));
        // SAFETY: plain queries on a valid device handle.
        let mem = unsafe { result::device::total_mem(d) }.unwrap_or(0);
        // SAFETY: as above: a query of a valid device handle's attribute.
        let attr = |a| unsafe { result::device::get_attribute(d, a) }.unwrap_or(-1);
        let (maj, min) = (
            attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
            attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR),
        );
        let sms = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
        println!("  [{i}] {name}: sm_{maj}{min}, {sms} SMs, {:.1} GiB", mem as f64 / (1u64 << 30) as f64);
    }
    if devs.len() > 1 {
        println!("  peer access (access / native atomics / performance rank: link):");
        for (i, &a) in devs.iter().enumerate() {
            for (j, &b) in devs.iter().enumerate().filter(|(j, _)| *j != i) {
                use sys::CUdevice_P2PAttribute as P;
                let access = p2p(P::CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, a, b);
                let atomics = p2p(P::CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED, a, b);
                let rank = p2p(P::CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK, a, b);
                println!("    {i} -> {j}: {access} / {atomics} / {rank}: {}", link_type(access, atomics));
            }
        }
    }
}

fn settings() -> Result<(), gpushmem::Error> {
    println!("settings (environment):");
    let c = Config::from_env()?;
    println!("  symmetric heap per PE: {} bytes (GPUSHMEM_SYMMETRIC_SIZE)", c.heap_size);
    println!("  bootstrap timeout: {:?} (GPUSHMEM_BOOTSTRAP_TIMEOUT)", c.bootstrap_timeout);
    match c.device_timeout {
        Some(t) => println!("  device wait timeout: {t:?} (GPUSHMEM_TIMEOUT)"),
        None => println!("  device wait timeout: off — waits can hang forever (GPUSHMEM_TIMEOUT=0)"),
    }
    println!("  device debug checks: {} (GPUSHMEM_DEBUG_CHECKS)", if c.debug_checks { "on" } else { "off" });
    match LaunchEnv::from_env()? {
        Some(e) => println!(
            "  launched by {}: PE {} of {}, local {} of {}, device {:?}, rendezvous {}{}, job secret {}",
            e.source,
            e.rank,
            e.size,
            e.local_rank,
            e.local_size,
            e.device,
            e.rendezvous.display(),
            if e.private_dir.is_some() { " (private directory)" } else { " (GPUSHMEM_BOOTSTRAP)" },
            if e.secret.is_some() {
                "set"
            } else {
                "not set: any process of this user can join (set GPUSHMEM_BOOTSTRAP_SECRET)"
            }
        ),
        None => println!(
            "  no launcher variables: a program started like this is a job of one PE (or uses gpushmem::Threads)"
        ),
    }
    Ok(())
}

fn main() -> ExitCode {
    println!("gpushmem {}", env!("CARGO_PKG_VERSION"));
    toolchain();
    gpus();
    match settings() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            println!("  {e}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::link_type;

    #[test]
    fn link_type_from_peer_attributes() {
        assert!(link_type(1, 1).starts_with("NVLink"));
        assert!(link_type(1, 0).starts_with("PCIe"));
        assert!(link_type(0, 0).starts_with("no peer access"));
        assert!(link_type(-1, -1).starts_with("unknown"));
        assert!(link_type(1, -1).starts_with("unknown"));
    }
}
