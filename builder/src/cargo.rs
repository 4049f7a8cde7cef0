//! The nested `cargo build` for nvptx64 and reading its results.

use crate::{BuildError, NVPTX_TARGET};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

pub(crate) struct KernelBuild {
    pub crate_name: String,
    /// The PTX rustc linked (for [`Emit::Bitcode`]: an unoptimised one that
    /// leaves NVSHMEM's functions undefined; not the one to load).
    pub ptx: PathBuf,
    /// For [`Emit::Bitcode`]: the crate's LLVM bitcode after fat LTO (the
    /// kernel crate, its dependencies and `core` in one module), unoptimised.
    pub bitcode: Option<PathBuf>,
    pub sources: Vec<PathBuf>,
}

/// What the nested cargo makes of the kernel crate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Emit {
    /// Native engine: `cargo build --release`, PTX from rustc's bitcode linker.
    Ptx,
    /// NVSHMEM engine: `cargo rustc` with the `gpushmem-kernels/nvshmem`
    /// feature in an opt-level-0 profile, and `--emit=llvm-bc` as well.
    Bitcode,
}

/// The cargo profile of [`Emit::Bitcode`] builds: release settings at opt-level 0.
pub(crate) const NVSHMEM_PROFILE: &str = "gpushmem-nvshmem";

/// The feature of gpushmem-kernels that lowers the device API to NVSHMEM's functions.
pub(crate) const NVSHMEM_FEATURE: &str = "gpushmem-kernels/nvshmem";

/// Variables of the outer build that must not leak into the nested one: they
/// describe the outer package/target, and `RUSTC_WRAPPER`-style settings or
/// host rustflags would be applied to the nvptx build.
fn is_outer_build_var(key: &str) -> bool {
    const KEEP: [&str; 2] = ["CARGO_HOME", "CARGO_NET_OFFLINE"];
    if KEEP.contains(&key) {
        return false;
    }
    key.starts_with("CARGO_")
        || key.starts_with("RUSTC_")
        || key.starts_with("DEP_")
        || matches!(
            key,
            "RUSTFLAGS"
                | "RUSTDOCFLAGS"
                | "TARGET"
                | "HOST"
                | "OUT_DIR"
                | "PROFILE"
                | "OPT_LEVEL"
                | "DEBUG"
                | "NUM_JOBS"
        )
}

/// `cargo build --release --target nvptx64-nvidia-cuda -Zbuild-std=core` on
/// the kernel crate, with release settings that kernels need (fat LTO so the
/// device library is inlined, abort on panic, one codegen unit).
///
/// For [`Emit::Bitcode`] the same settings in the profile [`NVSHMEM_PROFILE`]
/// at opt-level 0, with [`NVSHMEM_FEATURE`], through `cargo rustc … --
/// --emit=llvm-bc` (rustc writes `deps/<crate>.bc` beside the PTX).
pub(crate) fn build_kernel_crate(
    manifest: &Path,
    target_dir: &Path,
    rustflags: &str,
    rustc: &Path,
    emit: Emit,
) -> Result<KernelBuild, BuildError> {
    let cargo = std::env::var_os("CARGO").map(PathBuf::from).unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(&cargo);
    for (k, _) in std::env::vars_os() {
        if is_outer_build_var(&k.to_string_lossy()) {
            cmd.env_remove(k);
        }
    }
    cmd.env("RUSTC", rustc).env("RUSTC_BOOTSTRAP", "1").env("CARGO_ENCODED_RUSTFLAGS", rustflags);
    let profile = match emit {
        Emit::Ptx => {
            cmd.args(["build", "--release"]);
            "release"
        }
        Emit::Bitcode => {
            // Unoptimised on purpose: rustc declares NVSHMEM's functions without
            // `convergent`, so optimising before they are linked in may copy a
            // barrier call onto divergent paths (FACTS.md). `opt` optimises later.
            let p = NVSHMEM_PROFILE;
            cmd.args(["rustc", "--profile", p, "--features", NVSHMEM_FEATURE])
                .args(["--config", &format!("profile.{p}.inherits=\"release\"")])
                .args(["--config", &format!("profile.{p}.opt-level=0")]);
            p
        }
    };
    cmd.args(["--target", NVPTX_TARGET, "-Zbuild-std=core"])
        .args(["--message-format", "json"])
        .args(["--config", &format!("profile.{profile}.lto=\"fat\"")])
        .args(["--config", &format!("profile.{profile}.panic=\"abort\"")])
        .args(["--config", &format!("profile.{profile}.codegen-units=1")])
        .arg("--manifest-path")
        .arg(manifest)
        .arg("--target-dir")
        .arg(target_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    if emit == Emit::Bitcode {
        cmd.args(["--", "--emit=llvm-bc"]);
    }
    let mut child = cmd
        .spawn()
        .map_err(|source| BuildError::Spawn { what: format!("{} build (kernel crate)", cargo.display()), source })?;
    let mut found: Option<(String, PathBuf)> = None;
    let want_manifest = manifest.canonicalize().unwrap_or_else(|_| manifest.to_path_buf());
    for line in BufReader::new(child.stdout.take().expect("piped")).lines() {
        let Ok(line) = line else { break };
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(&line) else { continue };
        if msg["reason"] == "compiler-message" {
            let from_this = msg["manifest_path"].as_str().map(PathBuf::from).is_some_and(|m| m == want_manifest);
            forward_diagnostic(&msg["message"], from_this);
            continue;
        }
        if msg["reason"] != "compiler-artifact" {
            continue;
        }
        let from_this = msg["manifest_path"].as_str().map(PathBuf::from).is_some_and(|m| m == want_manifest);
        if !from_this {
            continue;
        }
        let name = msg["target"]["name"].as_str().unwrap_or_default().to_string();
        if let Some(files) = msg["filenames"].as_array() {
            for f in files.iter().filter_map(|f| f.as_str()) {
                if f.ends_with(".ptx") {
                    found = Some((name.clone(), PathBuf::from(f)));
                }
            }
        }
    }
    let status = child.wait().map_err(|source| BuildError::Spawn { what: "cargo".into(), source })?;
    if !status.success() {
        let how = match emit {
            Emit::Ptx => "for nvptx64".to_string(),
            Emit::Bitcode => format!("for nvptx64 with --features {NVSHMEM_FEATURE} (NVSHMEM engine)"),
        };
        return Err(BuildError::CargoFailed { manifest: manifest.to_path_buf(), how, status: status.to_string() });
    }
    let (crate_name, ptx) = found.ok_or_else(|| BuildError::NoPtx(manifest.to_path_buf()))?;
    let sources = dep_info_sources(&ptx.with_extension("d"));
    let bitcode = match emit {
        Emit::Ptx => None,
        Emit::Bitcode => {
            let bc = ptx.parent().unwrap_or(Path::new(".")).join("deps").join(format!("{crate_name}.bc"));
            if !bc.is_file() {
                return Err(BuildError::NoBitcode(bc));
            }
            Some(bc)
        }
    };
    Ok(KernelBuild { crate_name, ptx, bitcode, sources })
}

/// Where one rustc diagnostic of the kernel build goes.
#[derive(Debug, PartialEq)]
enum Forward<'a> {
    /// To the user's build output as `cargo:warning=` lines (cargo shows
    /// them even when the build succeeds).
    Warning(&'a str),
    /// To stderr (cargo shows it when the build fails).
    Stderr(&'a str),
}

/// Where the diagnostic `m` goes: warnings of the kernel crate itself
/// (`from_this`) to the build output, errors to stderr. Left out (`None`):
/// warnings of its dependencies (`core`, gpushmem-kernels: not the user's to
/// fix), rustc's closing count ("N warnings emitted"), and the note that the
/// builder's own `-Ctarget-feature=+ptxNN` is unstable (or unknown to rustc).
fn forwarded(m: &serde_json::Value, from_this: bool) -> Option<Forward<'_>> {
    let rendered = m["rendered"].as_str()?;
    let text = m["message"].as_str().unwrap_or_default();
    let no_spans = m["spans"].as_array().is_none_or(|s| s.is_empty());
    // rustc says "unstable feature" for a ptxNN it knows, "unknown and unstable
    // feature" for a newer one (ptx88 on some toolchains).
    let ptx_feature = text.contains("feature specified for `-Ctarget-feature`: `ptx");
    if no_spans && (text.ends_with("emitted") || ptx_feature) {
        return None;
    }
    match (m["level"] == "warning", from_this) {
        (true, true) => Some(Forward::Warning(rendered)),
        (true, false) => None,
        (false, _) => Some(Forward::Stderr(rendered)),
    }
}

/// Passes one rustc diagnostic of the kernel build on to the user (see [`forwarded`]).
fn forward_diagnostic(m: &serde_json::Value, from_this: bool) {
    match forwarded(m, from_this) {
        Some(Forward::Warning(r)) => {
            for line in r.trim_end().lines() {
                println!("cargo:warning=(kernel crate) {line}");
            }
        }
        Some(Forward::Stderr(r)) => eprint!("{r}"),
        None => {}
    }
}

/// The source files named in cargo's dep-info file (`<artifact>.d`), leaving
/// out the toolchain's own sources.
fn dep_info_sources(dep_file: &Path) -> Vec<PathBuf> {
    let Ok(text) = std::fs::read_to_string(dep_file) else { return Vec::new() };
    let Some((_, deps)) = text.split_once(": ") else { return Vec::new() };
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = deps.chars().peekable();
    // Make-style list: spaces separate, `\ ` escapes a space.
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&' ') => {
                cur.push(' ');
                chars.next();
            }
            ' ' | '\n' | '\r' => {
                if !cur.is_empty() {
                    out.push(PathBuf::from(std::mem::take(&mut cur)));
                }
            }
            _ => cur.push(c),
        }
    }
    if !cur.is_empty() {
        out.push(PathBuf::from(cur));
    }
    out.retain(|p| !p.components().any(|c| c.as_os_str() == "rustlib"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(level: &str, text: &str, spans: bool) -> serde_json::Value {
        serde_json::json!({
            "level": level,
            "message": text,
            "rendered": format!("{level}: {text}\n"),
            "spans": if spans { serde_json::json!([{"file_name": "src/lib.rs"}]) } else { serde_json::json!([]) },
        })
    }

    #[test]
    fn which_diagnostics_are_forwarded() {
        let w = msg("warning", "unused variable: `x`", true);
        assert_eq!(forwarded(&w, true), Some(Forward::Warning("warning: unused variable: `x`\n")));
        assert_eq!(forwarded(&w, false), None, "a dependency's warning");
        assert_eq!(forwarded(&msg("warning", "3 warnings emitted", false), true), None);
        let feature = msg("warning", "unstable feature specified for `-Ctarget-feature`: `ptx80`", false);
        assert_eq!(forwarded(&feature, true), None);
        let unknown = msg("warning", "unknown and unstable feature specified for `-Ctarget-feature`: `ptx88`", false);
        assert_eq!(forwarded(&unknown, true), None);
        let e = msg("error", "cannot find value `y`", true);
        assert_eq!(forwarded(&e, false), Some(Forward::Stderr("error: cannot find value `y`\n")), "errors always");
    }
}
