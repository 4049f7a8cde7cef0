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

#![warn(missing_docs)]

mod cargo;
mod error;
mod ptxas;
mod toolchain;

pub use error::BuildError;
pub use ptxas::{assemble, find_ptxas};
pub use toolchain::check_components;

use std::path::{Path, PathBuf};

/// The GPU architecture kernels are built for unless [`Builder::arch`] says otherwise.
pub const DEFAULT_ARCH: &str = "sm_90";

/// The rustc target that kernel crates are compiled for.
pub const NVPTX_TARGET: &str = "nvptx64-nvidia-cuda";

/// Compiles one kernel crate to PTX. Build it from a `build.rs`.
#[derive(Debug, Clone)]
pub struct Builder {
    crate_dir: PathBuf,
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
        Builder { crate_dir, arch, ptx_isa: None, env_name: None, target_dir: None, assemble: true }
    }

    /// The GPU architecture (`sm_90`, `sm_80`, …); default [`DEFAULT_ARCH`] or `GPUSHMEM_ARCH`.
    pub fn arch(mut self, arch: impl Into<String>) -> Self {
        self.arch = arch.into();
        self
    }

    /// The PTX ISA version as a target feature (`ptx80`); default: the lowest
    /// that the architecture needs (`ptx80` for `sm_90`).
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

    fn ptx_feature(&self) -> String {
        if let Some(isa) = &self.ptx_isa {
            return isa.clone();
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
        let manifest = self.crate_dir.join("Cargo.toml");
        if !manifest.is_file() {
            return Err(BuildError::NoKernelCrate(manifest));
        }
        let rustc = toolchain::rustc();
        check_components(&rustc)?;
        let target_dir = self.target_dir.clone().unwrap_or_else(|| self.default_target_dir());
        let rustflags = format!("-Ctarget-cpu={}\x1f-Ctarget-feature=+{}", self.arch, self.ptx_feature());
        let out = cargo::build_kernel_crate(&manifest, &target_dir, &rustflags, &rustc)?;
        let cubin = if self.assemble {
            match find_ptxas() {
                Some(ptxas) => Some(assemble(&ptxas, &out.ptx, &self.arch)?),
                None => None,
            }
        } else {
            None
        };
        let env_name = self
            .env_name
            .clone()
            .unwrap_or_else(|| format!("GPUSHMEM_PTX_{}", out.crate_name.to_uppercase().replace('-', "_")));
        Ok(Built { ptx: out.ptx, cubin, sources: out.sources, env_name })
    }

    /// Builds and tells cargo about it: `cargo:rustc-env=<env_name>=<ptx path>`
    /// and a `rerun-if-changed` for every source file of the kernel crate and
    /// its dependencies. On an error prints it and exits the build script with 1.
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
                println!("cargo:rerun-if-env-changed=GPUSHMEM_ARCH");
                println!("cargo:rerun-if-env-changed=GPUSHMEM_PTXAS");
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
