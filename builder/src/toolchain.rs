//! Checks that the toolchain has what an nvptx64 build with `-Zbuild-std` needs.

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

/// Fails with [`BuildError::MissingComponent`] (which prints the exact
/// `rustup component add …` command) when `rust-src`, `llvm-tools` or
/// `llvm-bitcode-linker` is missing from `rustc`'s toolchain.
pub fn check_components(rustc: &Path) -> Result<(), BuildError> {
    let sysroot = PathBuf::from(query(rustc, &["--print", "sysroot"])?);
    let host =
        query(rustc, &["-vV"])?.lines().find_map(|l| l.strip_prefix("host: ").map(str::to_string)).unwrap_or_default();
    let bin = sysroot.join("lib/rustlib").join(&host).join("bin");
    let exe = std::env::consts::EXE_SUFFIX;
    let needs: [(&'static str, PathBuf); 3] = [
        ("rust-src", sysroot.join("lib/rustlib/src/rust/library/core/Cargo.toml")),
        ("llvm-tools", bin.join(format!("llvm-link{exe}"))),
        ("llvm-bitcode-linker", bin.join(format!("self-contained/llvm-bitcode-linker{exe}"))),
    ];
    let toolchain = std::env::var("RUSTUP_TOOLCHAIN")
        .ok()
        .or_else(|| sysroot.file_name().map(|n| n.to_string_lossy().into_owned()));
    for (component, path) in needs {
        if !path.exists() {
            return Err(BuildError::MissingComponent {
                component,
                why: format!("{} not found", path.display()),
                sysroot: sysroot.clone(),
                toolchain_arg: toolchain.as_ref().map(|t| format!(" --toolchain {t}")).unwrap_or_default(),
            });
        }
    }
    Ok(())
}
