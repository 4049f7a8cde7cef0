use std::path::PathBuf;

/// Why a kernel crate did not turn into PTX.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
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
    #[error(
        "cargo build of the kernel crate {manifest} for nvptx64 failed (exit {status}); its diagnostics are above"
    )]
    CargoFailed {
        /// The kernel crate.
        manifest: PathBuf,
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
}
