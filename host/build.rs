//! Builds the built-in kernels (builtin/src) to PTX for `Shmem`'s
//! stream-ordered operations (env GPUSHMEM_PTX_GPUSHMEM_BUILTIN_KERNELS).
//!
//! Their manifest is `builtin/Cargo.toml.in`, written as `Cargo.toml` into
//! OUT_DIR with the source and the gpushmem-kernels copy filled in: a
//! `Cargo.toml` in builtin/ would make it a nested package, which `cargo
//! package` leaves out, and a fixed `../../kernels` would point outside the
//! published crate. gpushmem-kernels says where its source is through `links`
//! (`DEP_GPUSHMEM_KERNELS_ROOT`): the same copy this crate is built with.
use std::path::{Path, PathBuf};

fn main() {
    let here = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("builtin");
    let Some(kernels) = std::env::var_os("DEP_GPUSHMEM_KERNELS_ROOT") else {
        eprintln!(
            "error: gpushmem-kernels did not say where its source is (DEP_GPUSHMEM_KERNELS_ROOT): is it a dependency?"
        );
        std::process::exit(1);
    };
    if let Err(e) = write_crate(&here.join("builtin"), Path::new(&kernels), &out) {
        eprintln!("error: writing the built-in kernel crate's manifest into {}: {e}", out.display());
        std::process::exit(1);
    }
    println!("cargo::rerun-if-changed=builtin/Cargo.toml.in");
    println!("cargo::rerun-if-changed=builtin/Cargo.lock");
    // Native on both engines: these kernels reach peers through gpushmem's own
    // peer table (on the NVSHMEM engine, filled from nvshmem_ptr).
    gpushmem_build::Builder::new(&out).engine(gpushmem_build::Engine::Native).build_or_exit();
}

/// `dir`'s template as `out/Cargo.toml` (and its lock file beside it).
fn write_crate(dir: &Path, kernels: &Path, out: &Path) -> std::io::Result<()> {
    let template = std::fs::read_to_string(dir.join("Cargo.toml.in"))?;
    let manifest =
        template.replace("@LIB@", &toml_str(&dir.join("src").join("lib.rs"))).replace("@KERNELS@", &toml_str(kernels));
    std::fs::create_dir_all(out)?;
    write_if_changed(&out.join("Cargo.toml"), manifest.as_bytes())?;
    write_if_changed(&out.join("Cargo.lock"), &std::fs::read(dir.join("Cargo.lock"))?)
}

/// A path as the inside of a TOML basic string.
fn toml_str(p: &Path) -> String {
    p.to_string_lossy().replace('\\', "\\\\").replace('"', "\\\"")
}

/// Writes only a change, so that the nested cargo's fingerprints stay fresh.
fn write_if_changed(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if std::fs::read(path).is_ok_and(|old| old == bytes) {
        return Ok(());
    }
    std::fs::write(path, bytes)
}
