//! Checks that the toolchain has what an nvptx64 build with `-Zbuild-std` needs,
//! and finds the LLVM tools of its `llvm-tools` component.

use crate::BuildError;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The rustc the outer build uses (`RUSTC`, set by cargo for build scripts), else `rustc`.
pub(crate) fn rustc() -> PathBuf {
    std::env::var_os("RUSTC").map(PathBuf::from).unwrap_or_else(|| "rustc".into())
}

fn query(rustc: &Path, args: &[&str]) -> Result<String, BuildError> {
    let out = Command::new(rustc)
        .args(args)
        .output()
        .map_err(|source| BuildError::Spawn { what: format!("{} {}", rustc.display(), args.join(" ")), source })?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Where `rustc`'s toolchain keeps its files.
struct Toolchain {
    sysroot: PathBuf,
    /// `<sysroot>/lib/rustlib/<host>/bin`: the `llvm-tools` component's tools.
    bin: PathBuf,
    /// ` --toolchain <name>` for the `rustup component add` hint, when known.
    toolchain_arg: String,
}

impl Toolchain {
    fn of(rustc: &Path) -> Result<Toolchain, BuildError> {
        let sysroot = PathBuf::from(query(rustc, &["--print", "sysroot"])?);
        let host = query(rustc, &["-vV"])?
            .lines()
            .find_map(|l| l.strip_prefix("host: ").map(str::to_string))
            .unwrap_or_default();
        let bin = sysroot.join("lib/rustlib").join(&host).join("bin");
        let toolchain = std::env::var("RUSTUP_TOOLCHAIN")
            .ok()
            .or_else(|| sysroot.file_name().map(|n| n.to_string_lossy().into_owned()));
        let toolchain_arg = toolchain.map(|t| format!(" --toolchain {t}")).unwrap_or_default();
        Ok(Toolchain { sysroot, bin, toolchain_arg })
    }

    fn missing(&self, component: &'static str, why: String) -> BuildError {
        BuildError::MissingComponent {
            component,
            why,
            sysroot: self.sysroot.clone(),
            toolchain_arg: self.toolchain_arg.clone(),
        }
    }
}

/// Fails with [`BuildError::MissingComponent`] (which prints the exact
/// `rustup component add …` command) when `rust-src`, `llvm-tools` or
/// `llvm-bitcode-linker` is missing from `rustc`'s toolchain.
pub fn check_components(rustc: &Path) -> Result<(), BuildError> {
    let tc = Toolchain::of(rustc)?;
    let exe = std::env::consts::EXE_SUFFIX;
    let needs: [(&'static str, PathBuf); 3] = [
        ("rust-src", tc.sysroot.join("lib/rustlib/src/rust/library/core/Cargo.toml")),
        ("llvm-tools", tc.bin.join(format!("llvm-link{exe}"))),
        ("llvm-bitcode-linker", tc.bin.join(format!("self-contained/llvm-bitcode-linker{exe}"))),
    ];
    for (component, path) in needs {
        if !path.exists() {
            return Err(tc.missing(component, format!("{} not found", path.display())));
        }
    }
    Ok(())
}

/// The LLVM tools the NVSHMEM engine runs, from the `llvm-tools` component
/// (same LLVM as rustc's, so they read the bitcode rustc writes).
#[derive(Debug, Clone)]
pub(crate) struct LlvmTools {
    pub link: PathBuf,
    pub opt: PathBuf,
    pub llc: PathBuf,
    pub nm: PathBuf,
    pub dis: PathBuf,
}

/// Finds `llvm-link`, `opt`, `llc`, `llvm-nm` and `llvm-dis` beside `rustc`'s
/// toolchain; a missing one is [`BuildError::MissingComponent`] naming `llvm-tools`.
pub(crate) fn llvm_tools(rustc: &Path) -> Result<LlvmTools, BuildError> {
    let tc = Toolchain::of(rustc)?;
    let tool = |name: &str| {
        let path = tc.bin.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
        if path.is_file() {
            Ok(path)
        } else {
            Err(tc.missing(
                "llvm-tools",
                format!(
                    "{} not found; the NVSHMEM engine links with llvm-link, opt, llc, llvm-nm and llvm-dis",
                    path.display()
                ),
            ))
        }
    };
    Ok(LlvmTools {
        link: tool("llvm-link")?,
        opt: tool("opt")?,
        llc: tool("llc")?,
        nm: tool("llvm-nm")?,
        dis: tool("llvm-dis")?,
    })
}
