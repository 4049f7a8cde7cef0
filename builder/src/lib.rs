//! `gpushmem-build`: compile a `#![no_std]` kernel crate to PTX from a `build.rs`.
//!
//! In the `build.rs` of the host crate that launches the kernels:
//!
//! ```no_run
//! gpushmem_build::Builder::new("kernels").build_or_exit();
//! ```
//!
//! and in the host code: `const PTX: &str = include_str!(env!("GPUSHMEM_PTX_MY_KERNELS"));`
//! (and `include_bytes!(env!("GPUSHMEM_CUBIN_MY_KERNELS"))` for the assembled
//! cubin, empty when `ptxas` was not found; see `Shmem::load_module_prebuilt`).
//!
//! The kernel crate is built with rustc's own `nvptx64-nvidia-cuda` target on
//! the stable toolchain (`RUSTC_BOOTSTRAP=1`, `-Zbuild-std=core`), with
//! `-Ctarget-cpu=<arch>` passed to every crate through
//! `CARGO_ENCODED_RUSTFLAGS` (so the rebuilt `core` gets it too). It runs a
//! nested cargo with its own target directory (sharing the outer one would
//! deadlock on cargo's lock), with the outer build's cargo/rustc variables
//! cleared. When `ptxas` is found (`GPUSHMEM_PTXAS`, else `PATH`, else the
//! checkout's `.tools/bin/ptxas` from `scripts/setup.sh`) the PTX is
//! assembled for the target and an assembler error fails the build.
//!
//! # Engines
//!
//! The device API of `gpushmem-kernels` has two implementations, chosen at
//! build time for the whole kernel crate ([`Engine`]): [`Builder::engine`], else
//! the environment variable `GPUSHMEM_ENGINE` (`native` or `nvshmem`; anything
//! else is [`BuildError::BadEngine`]), else [`Engine::Native`].
//!
//! - **native**: gpushmem's own implementation; the PTX comes from rustc as
//!   described above (`cargo build --release`, fat LTO).
//! - **nvshmem**: the kernel crate is built with the feature
//!   `gpushmem-kernels/nvshmem`, under which the device API calls NVSHMEM's
//!   device functions (`nvshmem_quiet`, `nvshmemx_putmem_nbi_block`, …) as
//!   `extern "C"` symbols. They are resolved from the LLVM bitcode of
//!   NVSHMEM's device library, so the result is one self-contained PTX module
//!   that NVSHMEM's host library initialises with `nvshmemx_cumodule_init`.
//!
//! ## Where NVSHMEM's bitcode is found
//!
//! [`find_nvshmem_bitcode`]: `$NVSHMEM_HOME/lib/libnvshmem_device_<arch>.bc`
//! (NVSHMEM 3.8 and later) or `$NVSHMEM_HOME/lib/libnvshmem_device.bc` when
//! `NVSHMEM_HOME` is set (and nowhere else then); else the same files in the
//! Python package `nvidia.nvshmem` (`pip install nvidia-nvshmem-cu13==3.4.5`);
//! else the gpushmem checkout's `.tools/nvshmem`, which `bash scripts/setup.sh`
//! fills from the pinned wheel `nvidia-nvshmem-cu13==3.4.5`. NVSHMEM's version
//! is read from `include/non_abi/nvshmem_version.h` beside it. Build against
//! the NVSHMEM version the program runs with: NVSHMEM's host library refuses a
//! module whose minor version is newer than its own. The bitcode is under
//! NVIDIA's proprietary licence: it is fetched on the user's machine and never
//! committed, and neither is PTX or a cubin built from it.
//!
//! ## The pipeline, and why in this order
//!
//! 1. `cargo rustc` with `--features gpushmem-kernels/nvshmem`, `--emit=llvm-bc`,
//!    `-Ctarget-cpu=<arch> -Ctarget-feature=+ptx88`, fat LTO and **opt-level 0**
//!    (profile `gpushmem-nvshmem`): one module holding the kernel crate, its
//!    dependencies and `core`, unoptimised. rustc declares NVSHMEM's functions
//!    without `convergent`; optimised at this point, LLVM may copy a call to
//!    `nvshmemx_barrier_all_block` into both arms of an `if`, putting a block
//!    barrier on divergent paths (seen on the H200: 45 `bar.sync` instead of 28).
//!    PTX ISA 8.8 because NVSHMEM's inline assembly needs `.mmio` (8.2 and later).
//! 2. `llvm-link --only-needed kernel.bc <nvshmem .bc>`: only the NVSHMEM
//!    functions the kernels reach are linked in, with their `convergent` marks.
//! 3. `opt --internalize-public-api-list=<names>
//!    --passes='internalize,globaldce,default<O3>,globaldce' --strip-debug`: every
//!    symbol but the kernels (the crate's `ptx_kernel` functions), `GPUSHMEM_STATE`
//!    and NVSHMEM's module globals (its `nvshmemi_*_d` data symbols, such as
//!    `nvshmemi_device_state_d`, which the host library looks up in the module)
//!    becomes internal, then the whole program is optimised once.
//! 4. `llc -mtriple=nvptx64-nvidia-cuda -mcpu=<arch> -mattr=+ptx88 -O3` writes
//!    `<crate>.nvshmem.ptx`, and `ptxas` assembles it as on the native path.
//!
//! `llvm-link`, `opt`, `llc`, `llvm-nm` and `llvm-dis` come from rustup's
//! `llvm-tools` component (`$(rustc --print sysroot)/lib/rustlib/<host>/bin`,
//! the same LLVM as rustc's); a missing one is [`BuildError::MissingComponent`]
//! with the `rustup component add llvm-tools` command. [`Builder::build_or_exit`]
//! also sets `GPUSHMEM_ENGINE_<CRATE>` (`native` or `nvshmem`) and, on the NVSHMEM
//! engine, `GPUSHMEM_NVSHMEM_VERSION_<CRATE>` when the version is known.

#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

mod cargo;
mod error;
mod nvshmem;
mod ptxas;
mod toolchain;

pub use error::BuildError;
pub use nvshmem::{find_nvshmem_bitcode, NvshmemBitcode, STATE_SYMBOL};
pub use ptxas::{assemble, find_ptxas};
pub use toolchain::check_components;

use std::path::{Path, PathBuf};

/// The GPU architecture kernels are built for unless [`Builder::arch`] says otherwise.
pub const DEFAULT_ARCH: &str = "sm_90";

/// The GPU architectures kernels can be built for: Volta (`sm_70`) and later,
/// as LLVM's NVPTX back end names them (`a`: the architecture-specific form).
/// gpushmem's device code needs `sm_70` (scoped atomics and fences).
pub const ARCHS: &[&str] = &[
    "sm_70", "sm_72", "sm_75", "sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "sm_90a", "sm_100", "sm_100a", "sm_101",
    "sm_101a", "sm_120", "sm_120a",
];

/// Checks a GPU architecture name (`GPUSHMEM_ARCH`, [`Builder::arch`]) before
/// anything is built, so that a typo is not buried under LLVM's errors.
pub fn check_arch(arch: &str) -> Result<(), BuildError> {
    if ARCHS.contains(&arch) {
        return Ok(());
    }
    let why = match arch.strip_prefix("sm_").map(|n| n.trim_end_matches('a').parse::<u32>()) {
        Some(Ok(n)) if n < 70 => "gpushmem needs sm_70 (Volta) or later".to_string(),
        Some(Ok(_)) => "not an architecture this toolchain's NVPTX back end knows".to_string(),
        _ => "not a GPU architecture: the form is sm_XY, from the GPU's compute capability X.Y".to_string(),
    };
    Err(BuildError::BadArch { arch: arch.to_string(), why })
}

/// The rustc target that kernel crates are compiled for.
pub const NVPTX_TARGET: &str = "nvptx64-nvidia-cuda";

/// The environment variable that chooses the [`Engine`] when [`Builder::engine`] was not called.
pub const ENGINE_VAR: &str = "GPUSHMEM_ENGINE";

/// The `cfg` a kernel crate is compiled with on the NVSHMEM engine:
/// `#[cfg(not(gpushmem_nvshmem))]` leaves out kernels that use what that
/// engine does not have yet (device teams and collectives). Declare it in the
/// kernel crate's `Cargo.toml` (`[lints.rust] unexpected_cfgs = { level = "warn",
/// check-cfg = ['cfg(gpushmem_nvshmem)'] }`).
pub const NVSHMEM_CFG: &str = "gpushmem_nvshmem";

/// Which implementation of the device API a kernel crate is built with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Engine {
    /// gpushmem's own device code (the default).
    #[default]
    Native,
    /// NVSHMEM's device library, linked from its LLVM bitcode (feature `gpushmem-kernels/nvshmem`).
    Nvshmem,
}

impl Engine {
    /// The engine `GPUSHMEM_ENGINE` names, [`Engine::Native`] when it is unset;
    /// [`BuildError::BadEngine`] for any other value.
    pub fn from_env() -> Result<Engine, BuildError> {
        match std::env::var_os(ENGINE_VAR) {
            None => Ok(Engine::Native),
            Some(v) => v.to_str().ok_or_else(|| BuildError::BadEngine(v.to_string_lossy().into_owned()))?.parse(),
        }
    }

    /// `native` or `nvshmem`.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Native => "native",
            Engine::Nvshmem => "nvshmem",
        }
    }
}

impl std::fmt::Display for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Engine {
    type Err = BuildError;
    /// `native` or `nvshmem` (case and surrounding blanks ignored, as the host's `GPUSHMEM_ENGINE`).
    fn from_str(s: &str) -> Result<Engine, BuildError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "native" => Ok(Engine::Native),
            "nvshmem" => Ok(Engine::Nvshmem),
            _ => Err(BuildError::BadEngine(s.to_string())),
        }
    }
}

/// Compiles one kernel crate to PTX. Build it from a `build.rs`.
#[derive(Debug, Clone)]
pub struct Builder {
    crate_dir: PathBuf,
    engine: Option<Engine>,
    arch: String,
    ptx_isa: Option<String>,
    env_name: Option<String>,
    target_dir: Option<PathBuf>,
    assemble: bool,
}

/// What a successful build produced.
#[derive(Debug, Clone)]
pub struct Built {
    /// The PTX file.
    pub ptx: PathBuf,
    /// The cubin `ptxas` assembled from it, when `ptxas` was found.
    pub cubin: Option<PathBuf>,
    /// The source files the PTX depends on (from cargo's dep-info).
    pub sources: Vec<PathBuf>,
    /// The engine it was built for.
    pub engine: Engine,
    /// On [`Engine::Nvshmem`]: the NVSHMEM bitcode it was linked against.
    pub nvshmem: Option<NvshmemBitcode>,
    /// The name of the environment variable [`Builder::build_or_exit`] set to [`Built::ptx`]
    /// (`GPUSHMEM_PTX_<CRATE>`); it also sets `GPUSHMEM_CUBIN_<CRATE>` to the cubin, or to an
    /// empty file when there is none.
    pub env_name: String,
}

impl Builder {
    /// A builder for the kernel crate in `crate_dir` (relative paths are taken
    /// from `CARGO_MANIFEST_DIR`, the directory of the calling crate).
    pub fn new(crate_dir: impl AsRef<Path>) -> Self {
        let dir = crate_dir.as_ref();
        let crate_dir = match std::env::var_os("CARGO_MANIFEST_DIR") {
            Some(m) if dir.is_relative() => PathBuf::from(m).join(dir),
            _ => dir.to_path_buf(),
        };
        let arch = std::env::var("GPUSHMEM_ARCH").unwrap_or_else(|_| DEFAULT_ARCH.to_string());
        Builder { crate_dir, engine: None, arch, ptx_isa: None, env_name: None, target_dir: None, assemble: true }
    }

    /// The engine to build for; default: what `GPUSHMEM_ENGINE` says
    /// ([`Engine::from_env`]), else [`Engine::Native`].
    pub fn engine(mut self, engine: Engine) -> Self {
        self.engine = Some(engine);
        self
    }

    /// The engine [`Builder::build`] uses: the one set, else [`Engine::from_env`].
    pub fn resolved_engine(&self) -> Result<Engine, BuildError> {
        self.engine.map_or_else(Engine::from_env, Ok)
    }

    /// The GPU architecture (`sm_90`, `sm_80`, …); default [`DEFAULT_ARCH`] or `GPUSHMEM_ARCH`.
    pub fn arch(mut self, arch: impl Into<String>) -> Self {
        self.arch = arch.into();
        self
    }

    /// The PTX ISA version as a target feature (`ptx80`); default: the lowest
    /// that the architecture needs (`ptx80` for `sm_90`), and `ptx88` on
    /// [`Engine::Nvshmem`] (NVSHMEM's inline assembly needs 8.2 or later).
    pub fn ptx_isa(mut self, isa: impl Into<String>) -> Self {
        self.ptx_isa = Some(isa.into());
        self
    }

    /// The environment variable that receives the PTX path; default
    /// `GPUSHMEM_PTX_<CRATE_NAME>` in upper case with `-` as `_`.
    pub fn env_name(mut self, name: impl Into<String>) -> Self {
        self.env_name = Some(name.into());
        self
    }

    /// The nested cargo's target directory; default `gpushmem-ptx` beside the
    /// outer build's profile directories (so it survives `cargo clean -p`).
    pub fn target_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.target_dir = Some(dir.into());
        self
    }

    /// Whether to assemble the PTX with `ptxas` when it is found (default true).
    pub fn assemble(mut self, yes: bool) -> Self {
        self.assemble = yes;
        self
    }

    fn ptx_feature(&self, engine: Engine) -> String {
        if let Some(isa) = &self.ptx_isa {
            return isa.clone();
        }
        if engine == Engine::Nvshmem {
            return "ptx88".to_string();
        }
        let sm: u32 = self.arch.trim_start_matches("sm_").trim_end_matches('a').parse().unwrap_or(90);
        // PTX ISA release notes: sm_90 needs 7.8, sm_89 7.8, sm_80 7.0, sm_70 6.0.
        match sm {
            90.. => "ptx80",
            80..=89 => "ptx78",
            _ => "ptx70",
        }
        .to_string()
    }

    fn default_target_dir(&self) -> PathBuf {
        if let Some(out) = std::env::var_os("OUT_DIR") {
            // OUT_DIR = <target>/<profile>/build/<pkg>-<hash>/out
            if let Some(t) = Path::new(&out).ancestors().nth(4) {
                return t.join("gpushmem-ptx");
            }
        }
        self.crate_dir.join("target")
    }

    /// Builds the PTX (and assembles it when `ptxas` is found). Emits nothing
    /// for cargo; see [`Builder::build_or_exit`] for the `build.rs` form.
    pub fn build(&self) -> Result<Built, BuildError> {
        let engine = self.resolved_engine()?;
        check_arch(&self.arch)?;
        let manifest = self.crate_dir.join("Cargo.toml");
        if !manifest.is_file() {
            return Err(BuildError::NoKernelCrate(manifest));
        }
        let rustc = toolchain::rustc();
        check_components(&rustc)?;
        let target_dir = self.target_dir.clone().unwrap_or_else(|| self.default_target_dir());
        let feature = self.ptx_feature(engine);
        let rustflags = format!("-Ctarget-cpu={}\x1f-Ctarget-feature=+{feature}", self.arch);
        let (out, ptx, nvshmem) = match engine {
            Engine::Native => {
                let out = cargo::build_kernel_crate(&manifest, &target_dir, &rustflags, &rustc, cargo::Emit::Ptx)?;
                let ptx = out.ptx.clone();
                (out, ptx, None)
            }
            Engine::Nvshmem => {
                // Everything the link needs is looked up before the (slow) cargo build.
                let tools = toolchain::llvm_tools(&rustc)?;
                let nv = find_nvshmem_bitcode(&self.arch)?;
                // Kernel crates see the engine as `cfg(gpushmem_nvshmem)`, to leave out what it
                // does not have (device teams and collectives, for now).
                let rustflags = format!("{rustflags}\x1f--cfg\x1f{NVSHMEM_CFG}");
                let out = cargo::build_kernel_crate(&manifest, &target_dir, &rustflags, &rustc, cargo::Emit::Bitcode)?;
                let bc = out.bitcode.as_deref().expect("Emit::Bitcode returns the bitcode");
                let dir = out.ptx.parent().unwrap_or(Path::new("."));
                let ptx = nvshmem::link_to_ptx(&tools, bc, &nv, &self.arch, &feature, dir, &out.crate_name)?;
                (out, ptx, Some(nv))
            }
        };
        let cubin = if self.assemble {
            match find_ptxas() {
                Some(ptxas) => Some(assemble(&ptxas, &ptx, &self.arch)?),
                None => None,
            }
        } else {
            None
        };
        let env_name = self
            .env_name
            .clone()
            .unwrap_or_else(|| format!("GPUSHMEM_PTX_{}", out.crate_name.to_uppercase().replace('-', "_")));
        Ok(Built { ptx, cubin, sources: out.sources, env_name, engine, nvshmem })
    }

    /// Builds and tells cargo about it: `cargo:rustc-env=<env_name>=<ptx path>`
    /// (and `GPUSHMEM_CUBIN_…`, `GPUSHMEM_ENGINE_…`, on the NVSHMEM engine
    /// `GPUSHMEM_NVSHMEM_VERSION_…`), a `rerun-if-changed` for every source
    /// file of the kernel crate and its dependencies (and NVSHMEM's bitcode),
    /// and `rerun-if-env-changed` for the variables read. On an error prints it
    /// and exits the build script with 1.
    pub fn build_or_exit(&self) -> Built {
        match self.build() {
            Ok(b) => {
                println!("cargo:rustc-env={}={}", b.env_name, b.ptx.display());
                // The cubin too (an empty file when ptxas was not found), so the host
                // can `include_bytes!` it unconditionally and skip the driver's PTX JIT.
                let cubin = b.cubin.clone().unwrap_or_else(|| {
                    let none = b.ptx.with_extension("no-cubin");
                    let _ = std::fs::write(&none, []);
                    none
                });
                println!(
                    "cargo:rustc-env={}={}",
                    b.env_name.replacen("GPUSHMEM_PTX_", "GPUSHMEM_CUBIN_", 1),
                    cubin.display()
                );
                println!("cargo:rerun-if-changed={}", self.crate_dir.join("Cargo.toml").display());
                println!("cargo:rerun-if-changed={}", self.crate_dir.join("src").display());
                for s in &b.sources {
                    println!("cargo:rerun-if-changed={}", s.display());
                }
                let engine_env = b.env_name.replacen("GPUSHMEM_PTX_", "GPUSHMEM_ENGINE_", 1);
                println!("cargo:rustc-env={engine_env}={}", b.engine);
                if let Some(nv) = &b.nvshmem {
                    if let Some(v) = &nv.version {
                        let version_env = b.env_name.replacen("GPUSHMEM_PTX_", "GPUSHMEM_NVSHMEM_VERSION_", 1);
                        println!("cargo:rustc-env={version_env}={v}");
                    }
                    println!("cargo:rerun-if-changed={}", nv.path.display());
                    println!("cargo:rerun-if-env-changed=NVSHMEM_HOME");
                }
                println!("cargo:rerun-if-env-changed=GPUSHMEM_ARCH");
                println!("cargo:rerun-if-env-changed=GPUSHMEM_PTXAS");
                println!("cargo:rerun-if-env-changed={ENGINE_VAR}");
                if b.cubin.is_none() && self.assemble {
                    println!("cargo:warning=gpushmem-build: ptxas not found (run scripts/setup.sh in the gpushmem checkout, set GPUSHMEM_PTXAS, or put it on PATH); {} was not assembled and will be JIT-compiled by the driver", b.ptx.display());
                }
                b
            }
            Err(e) => {
                eprintln!("error: gpushmem-build: {e}");
                std::process::exit(1);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_names() {
        assert_eq!("native".parse::<Engine>().unwrap(), Engine::Native);
        assert_eq!(" NVSHMEM\n".parse::<Engine>().unwrap(), Engine::Nvshmem);
        for bad in ["", "nvshmem3", "cuda"] {
            let e = bad.parse::<Engine>().unwrap_err().to_string();
            assert!(e.contains("use `native` (the default) or `nvshmem`"), "{e}");
        }
        assert_eq!(Engine::default(), Engine::Native);
        assert_eq!(Engine::Nvshmem.to_string(), "nvshmem");
    }

    #[test]
    fn architectures_are_checked() {
        assert!(check_arch("sm_90").is_ok() && check_arch("sm_80").is_ok() && check_arch(DEFAULT_ARCH).is_ok());
        for (bad, says) in [("banana", "the form is sm_XY"), ("sm_999", "back end knows"), ("sm_60", "sm_70")] {
            let e = check_arch(bad).unwrap_err().to_string();
            assert!(e.contains(bad) && e.contains(says) && e.contains("GPUSHMEM_ARCH"), "{e}");
        }
    }

    #[test]
    fn nvshmem_engine_defaults_to_ptx88() {
        let b = Builder::new("k").arch("sm_90");
        assert_eq!(b.ptx_feature(Engine::Native), "ptx80");
        assert_eq!(b.ptx_feature(Engine::Nvshmem), "ptx88");
        assert_eq!(b.ptx_isa("ptx90").ptx_feature(Engine::Nvshmem), "ptx90");
    }
}
