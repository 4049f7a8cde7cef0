use std::path::PathBuf;

/// Why a kernel crate did not turn into PTX.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The GPU architecture is not one kernels can be built for.
    #[error("GPUSHMEM_ARCH (or Builder::arch) is {arch:?}: {why}; use one of {}; `nvidia-smi --query-gpu=compute_cap --format=csv` gives the GPU's (9.0 is sm_90)", crate::ARCHS.join(", "))]
    BadArch {
        /// The name given.
        arch: String,
        /// What is wrong with it.
        why: String,
    },
    /// The kernel crate's manifest is missing.
    #[error("no kernel crate at {0} (Cargo.toml not found)")]
    NoKernelCrate(PathBuf),
    /// A rustup component that the nvptx build needs is not installed.
    #[error("the rustup component `{component}` is missing from the toolchain at {sysroot} ({why}); install it with:\n    rustup component add {component}{toolchain_arg}")]
    MissingComponent {
        /// The component's name.
        component: &'static str,
        /// What was looked for.
        why: String,
        /// The toolchain's sysroot.
        sysroot: PathBuf,
        /// ` --toolchain <name>` when the toolchain is known.
        toolchain_arg: String,
    },
    /// A command could not be started.
    #[error("could not run {what}: {source}")]
    Spawn {
        /// The command.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The nested cargo build failed.
    #[error("cargo build of the kernel crate {manifest} {how} failed ({status}); its diagnostics are above")]
    CargoFailed {
        /// The kernel crate.
        manifest: PathBuf,
        /// For what it was built (`for nvptx64`, and the feature of the NVSHMEM engine).
        how: String,
        /// The exit status.
        status: String,
    },
    /// The build succeeded but wrote no `.ptx`.
    #[error("cargo built {0} but produced no .ptx file: is it a `crate-type = [\"cdylib\"]` crate?")]
    NoPtx(PathBuf),
    /// `ptxas` rejected the PTX.
    #[error("ptxas -arch={arch} rejected {ptx}:\n{stderr}")]
    Ptxas {
        /// The architecture.
        arch: String,
        /// The PTX file.
        ptx: PathBuf,
        /// What ptxas printed.
        stderr: String,
    },
    /// `GPUSHMEM_ENGINE` (or a string given to `Engine::from_str`) names no engine.
    #[error("GPUSHMEM_ENGINE={0:?} is not an engine: use `native` (the default) or `nvshmem`")]
    BadEngine(String),
    /// The NVSHMEM engine was chosen but NVSHMEM's device bitcode was not found.
    #[error(
        "NVSHMEM's device bitcode (lib/libnvshmem_device.bc) was not found; looked in: {searched}.\n\
         Install it with `bash scripts/setup.sh` in the gpushmem checkout (into .tools/nvshmem), or \
         `pip install nvidia-nvshmem-cu13==3.4.5`, or set NVSHMEM_HOME to an NVSHMEM install that has \
         lib/libnvshmem_device.bc (3.8 and later: lib/libnvshmem_device_<arch>.bc)"
    )]
    NoNvshmem {
        /// Where it was looked for, in order.
        searched: String,
    },
    /// The NVSHMEM engine's cargo build succeeded but rustc wrote no bitcode.
    #[error("the kernel crate was built but its LLVM bitcode {0} is missing")]
    NoBitcode(PathBuf),
    /// The kernel crate's bitcode defines no kernel (`extern "ptx-kernel"` function).
    #[error("{0} defines no kernel (no `ptx_kernel` function): nothing to link against NVSHMEM")]
    NoKernels(PathBuf),
    /// An LLVM tool of the NVSHMEM engine's link failed.
    #[error("{command}\nfailed ({status}):\n{stderr}")]
    LlvmTool {
        /// The command line.
        command: String,
        /// The exit status.
        status: String,
        /// What the tool printed.
        stderr: String,
    },
}
