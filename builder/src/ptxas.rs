//! Assembling PTX with `ptxas` to catch what the driver's JIT would reject.

use crate::BuildError;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `ptxas` from `GPUSHMEM_PTXAS`, else the first on `PATH`, else the one
/// `scripts/setup.sh` installed in the gpushmem checkout this crate is built
/// from (`.tools/bin/ptxas`: an application outside the checkout that depends
/// on it by path finds it with no setting), else none.
pub fn find_ptxas() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("GPUSHMEM_PTXAS") {
        let p = PathBuf::from(p);
        return p.is_file().then_some(p);
    }
    let on_path = std::env::var_os("PATH")
        .and_then(|path| std::env::split_paths(&path).map(|d| d.join("ptxas")).find(|p| p.is_file()));
    on_path.or_else(|| {
        let installed = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.tools/bin/ptxas");
        installed.is_file().then_some(installed)
    })
}

/// Runs `ptxas -arch=<arch> <ptx> -o <ptx>.<arch>.cubin`; an assembler
/// error is [`BuildError::Ptxas`] with what ptxas printed.
pub fn assemble(ptxas: &Path, ptx: &Path, arch: &str) -> Result<PathBuf, BuildError> {
    let cubin = ptx.with_extension(format!("{arch}.cubin"));
    let out = Command::new(ptxas)
        .arg(format!("-arch={arch}"))
        .arg(ptx)
        .arg("-o")
        .arg(&cubin)
        .output()
        .map_err(|source| BuildError::Spawn { what: ptxas.display().to_string(), source })?;
    if !out.status.success() {
        return Err(BuildError::Ptxas {
            arch: arch.to_string(),
            ptx: ptx.to_path_buf(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    Ok(cubin)
}
