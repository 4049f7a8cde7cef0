//! gpushmem-info: what this machine offers gpushmem — the kernel toolchain
//! (rustup components, ptxas), the GPUs and their pairwise peer access, the
//! settings the environment selects and the launcher variables it sees, with
//! the rendezvous a launch would use. Works without a GPU (says so) and exits
//! 0 unless a setting is invalid.
//!
//! Started as every rank of a launch (under `gpushmem-run`, `srun`, `mpirun`),
//! `--join` meets the other ranks through the bootstrap alone (no GPU needed)
//! and prints one line per PE: where they met, the nodes they span, which
//! engine can run such a job. `--init` goes on as far as `Shmem::init`.

use clap::Parser;
use gpushmem::bootstrap::address::Rendezvous;
use gpushmem::bootstrap::env::LaunchEnv;
use gpushmem::bootstrap::node::census;
use gpushmem::bootstrap::socket::SocketBootstrap;
use gpushmem::bootstrap::Bootstrap;
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
    let arch = std::env::var("GPUSHMEM_ARCH").unwrap_or_else(|_| gpushmem_build::DEFAULT_ARCH.into());
    match gpushmem_build::check_arch(&arch) {
        Ok(()) => println!("  target architecture: {arch} (GPUSHMEM_ARCH)"),
        Err(e) => println!("  target architecture: BAD: {e}"),
    }
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

/// Every setting with the verdict `Shmem::init` would give; the launcher's
/// variables. Fails (exit status 1) when init would refuse any of them.
fn settings() -> Result<(), gpushmem::Error> {
    println!("settings (environment):");
    let (_, report) = Config::report_from_lookup(|k| std::env::var(k).ok());
    let mut first_bad = None;
    for s in report {
        let shown = s.value.as_deref().map(|v| format!("={v:?}")).unwrap_or_default();
        match s.verdict {
            Ok(meaning) => println!("  {}{shown}: {meaning}", s.name),
            Err(e) => {
                println!("  {}{shown}: BAD: {e}", s.name);
                first_bad.get_or_insert(e);
            }
        }
    }
    let launch = LaunchEnv::from_env();
    if let Err(l) = &launch {
        println!("  launcher variables: BAD: {l}");
    }
    if let Some(e) = first_bad {
        return Err(e);
    }
    match launch? {
        Some(e) => println!(
            "  launched by {}: PE {} of {}, local {} of {}, {}, rendezvous {}{}, job secret {}",
            e.source,
            e.rank,
            e.size,
            e.local_rank,
            e.local_size,
            match e.device {
                Some(d) => format!("device {d} (GPUSHMEM_DEVICE)"),
                None =>
                    format!("device: local rank {} modulo the number of GPUs (GPUSHMEM_DEVICE unset)", e.local_rank),
            },
            e.rendezvous,
            match (&e.rendezvous, e.private_dir.is_some()) {
                (Rendezvous::Tcp { .. }, _) => " (TCP: PEs on any node meet there)",
                (_, true) => " (Unix socket in a private directory: PEs of this node only)",
                _ => " (Unix socket from GPUSHMEM_BOOTSTRAP: PEs of this node only)",
            },
            match (&e.secret, e.rendezvous.is_tcp()) {
                (Some(_), _) => "set",
                (None, true) =>
                    "NOT SET: a TCP rendezvous refuses to start without one (set GPUSHMEM_BOOTSTRAP_SECRET)",
                (None, false) => "not set: any process of this user can join (set GPUSHMEM_BOOTSTRAP_SECRET)",
            }
        ),
        None => println!(
            "  no launcher variables: a program started like this is a job of one PE (or uses gpushmem::Threads)"
        ),
    }
    Ok(())
}

/// The command line.
#[derive(Parser, Debug)]
#[command(
    name = "gpushmem-info",
    about = "What this machine offers gpushmem; with --join or --init, run as every rank of a launch, whether \
             that launch can start a job."
)]
struct Options {
    /// Join the job this process was launched in through the bootstrap only
    /// (no GPU needed) and print one line per PE: where the PEs met, the nodes
    /// they span, whether the native engine can run it
    #[arg(long, conflicts_with = "init")]
    join: bool,
    /// Start a PE as a program would (`Shmem::init`, with the engine and
    /// settings of the environment) and print one line per PE, or the error
    #[arg(long)]
    init: bool,
}

/// `--join`: the bootstrap and the node census, as `Shmem::init` starts.
fn join() -> Result<String, gpushmem::Error> {
    let config = Config::from_env()?;
    let Some(env) = LaunchEnv::from_env()? else {
        return Ok("no launcher variables: a job of one PE, nothing to join".into());
    };
    let boot = SocketBootstrap::connect(&env, config.bootstrap_timeout)?;
    let nodes = census(&boot)?;
    boot.barrier()?;
    let native = match nodes.check_native() {
        Ok(()) => "native engine: can run it".to_string(),
        Err(e) => format!("native engine: refuses it ({e})"),
    };
    Ok(format!(
        "PE {} of {}: joined at {} (launcher: {}); {} node(s): {}; {native}",
        boot.rank(),
        boot.size(),
        env.rendezvous,
        env.source,
        nodes.count(),
        nodes.describe()
    ))
}

/// `--init`: `Shmem::init`, as a program starts.
fn init() -> Result<String, gpushmem::Error> {
    let s = gpushmem::Shmem::init()?;
    let line = format!(
        "PE {} of {}: Shmem::init ok on device {} ({:?} engine); {} node(s): {}",
        s.my_pe(),
        s.n_pes(),
        s.device(),
        s.config().engine,
        s.nodes().count(),
        s.nodes().describe()
    );
    s.finalize()?;
    Ok(line)
}

fn main() -> ExitCode {
    let opts = Options::parse();
    if opts.join || opts.init {
        let (what, r) = if opts.join { ("--join", join()) } else { ("--init", init()) };
        return match r {
            Ok(line) => {
                println!("{line}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                println!("gpushmem-info {what}: {e}");
                ExitCode::from(1)
            }
        };
    }
    println!("gpushmem {}", env!("CARGO_PKG_VERSION"));
    toolchain();
    gpus();
    // Every bad setting has been printed with its verdict.
    match settings() {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::from(1),
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
