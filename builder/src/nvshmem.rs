//! The NVSHMEM engine: find NVSHMEM's device bitcode, link the kernel crate's
//! unoptimised bitcode against it, optimise the whole, and write PTX.

use crate::toolchain::LlvmTools;
use crate::BuildError;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The symbol of gpushmem's device state; kept visible so the host finds it.
pub const STATE_SYMBOL: &str = "GPUSHMEM_STATE";

/// NVSHMEM's device library as LLVM bitcode, and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NvshmemBitcode {
    /// The `.bc` file.
    pub path: PathBuf,
    /// NVSHMEM's version (`3.4.5`) from `include/non_abi/nvshmem_version.h`
    /// beside it, when that header is there.
    pub version: Option<String>,
    /// How it was found: `NVSHMEM_HOME`, the Python package or the checkout's `.tools/nvshmem`.
    pub found_by: &'static str,
}

/// The bitcode in the NVSHMEM install `home`: `lib/libnvshmem_device_<arch>.bc`
/// (NVSHMEM 3.8 and later ship one per architecture), else `lib/libnvshmem_device.bc`.
pub fn bitcode_in(home: &Path, arch: &str) -> Option<PathBuf> {
    let lib = home.join("lib");
    let base = arch.trim_end_matches('a');
    [format!("libnvshmem_device_{arch}.bc"), format!("libnvshmem_device_{base}.bc"), "libnvshmem_device.bc".into()]
        .into_iter()
        .map(|f| lib.join(f))
        .find(|p| p.is_file())
}

/// NVSHMEM's version `major.minor.patch` from the text of `nvshmem_version.h`.
pub fn parse_version(header: &str) -> Option<String> {
    let field = |name: &str| {
        header.lines().find_map(|l| {
            let mut w = l.split_whitespace();
            (w.next() == Some("#define") && w.next() == Some(name)).then(|| w.next()).flatten()?.parse::<u32>().ok()
        })
    };
    Some(format!(
        "{}.{}.{}",
        field("NVSHMEM_VENDOR_MAJOR_VERSION")?,
        field("NVSHMEM_VENDOR_MINOR_VERSION")?,
        field("NVSHMEM_VENDOR_PATCH_VERSION")?
    ))
}

fn found(home: &Path, arch: &str, found_by: &'static str) -> Option<NvshmemBitcode> {
    let path = bitcode_in(home, arch)?;
    let path = path.canonicalize().unwrap_or(path);
    let version =
        std::fs::read_to_string(home.join("include/non_abi/nvshmem_version.h")).ok().and_then(|h| parse_version(&h));
    Some(NvshmemBitcode { path, version, found_by })
}

/// The directory of the Python package `nvidia.nvshmem` (`pip install nvidia-nvshmem-cu13`), if installed.
fn python_package() -> Option<PathBuf> {
    let out = Command::new("python3")
        .args(["-c", "import nvidia.nvshmem as m; print(list(m.__path__)[0])"])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !dir.is_empty()).then(|| PathBuf::from(dir))
}

/// NVSHMEM's device bitcode for `arch`: from `NVSHMEM_HOME` when it is set
/// (and only there), else the Python package `nvidia.nvshmem`, else the
/// gpushmem checkout's `.tools/nvshmem` (installed by `scripts/setup.sh`),
/// else [`BuildError::NoNvshmem`] saying how to install it.
pub fn find_nvshmem_bitcode(arch: &str) -> Result<NvshmemBitcode, BuildError> {
    if let Some(home) = std::env::var_os("NVSHMEM_HOME") {
        let home = PathBuf::from(home);
        return found(&home, arch, "NVSHMEM_HOME").ok_or_else(|| BuildError::NoNvshmem {
            searched: format!("NVSHMEM_HOME={} (its lib/ has no libnvshmem_device*.bc for {arch})", home.display()),
        });
    }
    let mut searched = Vec::new();
    match python_package() {
        Some(dir) => {
            if let Some(b) = found(&dir, arch, "the Python package nvidia.nvshmem") {
                return Ok(b);
            }
            searched.push(format!("the Python package nvidia.nvshmem at {}", dir.display()));
        }
        None => searched.push("the Python package nvidia.nvshmem (not importable by python3)".into()),
    }
    let tools = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.tools/nvshmem");
    if let Some(b) = found(&tools, arch, "the gpushmem checkout's .tools/nvshmem") {
        return Ok(b);
    }
    searched.push(format!("{} (scripts/setup.sh installs it there)", tools.display()));
    searched.insert(0, "NVSHMEM_HOME (not set)".into());
    Err(BuildError::NoNvshmem { searched: searched.join(", ") })
}

/// The kernels (`define … ptx_kernel … @name(`, not internal) in `llvm-dis` output.
pub(crate) fn kernel_entries(ir: &str) -> Vec<String> {
    ir.lines()
        .filter_map(|l| l.strip_prefix("define "))
        .filter_map(|l| {
            let (head, rest) = l.split_once('@')?;
            let words: Vec<&str> = head.split_whitespace().collect();
            let kernel = words.contains(&"ptx_kernel") && !words.iter().any(|w| matches!(*w, "internal" | "private"));
            kernel.then(|| symbol_name(rest))
        })
        .flatten()
        .collect()
}

/// The name at the start of `rest` (after the `@`): `name(` or `"quoted name"(`.
fn symbol_name(rest: &str) -> Option<String> {
    if let Some(q) = rest.strip_prefix('"') {
        return q.split_once('"').map(|(n, _)| n.to_string());
    }
    let end = rest.find('(')?;
    Some(rest[..end].to_string())
}

/// The globals NVSHMEM's host library looks up in a module: the defined
/// data symbols `nvshmemi_*_d` of NVSHMEM's bitcode (`llvm-nm --defined-only` output).
pub(crate) fn nvshmem_globals(nm: &str) -> Vec<String> {
    nm.lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace().rev();
            let (name, kind) = (w.next()?, w.next()?);
            let data = matches!(kind, "D" | "B" | "R" | "C" | "G" | "S" | "V");
            (data && name.starts_with("nvshmemi_") && name.ends_with("_d")).then(|| name.to_string())
        })
        .collect()
}

fn run(tool: &Path, args: &[&std::ffi::OsStr]) -> Result<String, BuildError> {
    let command = std::iter::once(tool.as_os_str())
        .chain(args.iter().copied())
        .map(|a| a.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ");
    let out = Command::new(tool)
        .args(args)
        .output()
        .map_err(|source| BuildError::Spawn { what: tool.display().to_string(), source })?;
    if !out.status.success() {
        return Err(BuildError::LlvmTool {
            command,
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Links the kernel crate's unoptimised bitcode `kernel_bc` against NVSHMEM's
/// and writes `<kernel_bc's crate>.nvshmem.ptx` in `out_dir`:
/// `llvm-link --only-needed` → `opt` (internalize everything but the kernels,
/// [`STATE_SYMBOL`] and NVSHMEM's `nvshmemi_*_d` globals, then O3) → `llc`.
pub(crate) fn link_to_ptx(
    tools: &LlvmTools,
    kernel_bc: &Path,
    nvshmem: &NvshmemBitcode,
    arch: &str,
    ptx_feature: &str,
    out_dir: &Path,
    crate_name: &str,
) -> Result<PathBuf, BuildError> {
    let os = |s: &str| std::ffi::OsString::from(s);
    let kernels = kernel_entries(&run(&tools.dis, &[kernel_bc.as_os_str(), &os("-o"), &os("-")])?);
    if kernels.is_empty() {
        return Err(BuildError::NoKernels(kernel_bc.to_path_buf()));
    }
    let globals = nvshmem_globals(&run(&tools.nm, &[&os("--defined-only"), nvshmem.path.as_os_str()])?);
    let mut public = kernels;
    public.push(STATE_SYMBOL.to_string());
    public.extend(globals);

    let linked = out_dir.join(format!("{crate_name}.nvshmem-linked.bc"));
    let optimised = out_dir.join(format!("{crate_name}.nvshmem-opt.bc"));
    let ptx = out_dir.join(format!("{crate_name}.nvshmem.ptx"));
    run(
        &tools.link,
        &[&os("--only-needed"), kernel_bc.as_os_str(), nvshmem.path.as_os_str(), &os("-o"), linked.as_os_str()],
    )?;
    run(
        &tools.opt,
        &[
            linked.as_os_str(),
            &os("-o"),
            optimised.as_os_str(),
            &os(&format!("--internalize-public-api-list={}", public.join(","))),
            &os("--passes=internalize,globaldce,default<O3>,globaldce"),
            &os("--strip-debug"),
        ],
    )?;
    run(
        &tools.llc,
        &[
            &os("-mtriple=nvptx64-nvidia-cuda"),
            &os(&format!("-mcpu={arch}")),
            &os(&format!("-mattr=+{ptx_feature}")),
            &os("-O3"),
            optimised.as_os_str(),
            &os("-o"),
            ptx.as_os_str(),
        ],
    )?;
    Ok(ptx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels_are_the_external_ptx_kernel_definitions() {
        let ir = "\
define ptx_kernel void @ring_shift(ptr %dest, ptr %src) unnamed_addr #1 {
define dso_local ptx_kernel void @\"odd name\"(i32 %x) #1 {
define internal ptx_kernel void @hidden() #1 {
define void @device_fn(ptr %p) #0 {
declare void @nvshmem_quiet() unnamed_addr #1
  call void @ring_shift(ptr null, ptr null)
";
        assert_eq!(kernel_entries(ir), ["ring_shift", "odd name"]);
    }

    #[test]
    fn nvshmem_globals_are_its_data_symbols_named_nvshmemi_d() {
        let nm = "\
---------------- D nvshmemi_device_lib_version_d
---------------- D nvshmemi_device_state_d
---------------- B nvshmemi_ibgda_device_state_d
---------------- T nvshmemi_transfer_d
---------------- d nvshmemi_local_d
---------------- D nvshmemi_other
---------------- T nvshmem_quiet
";
        assert_eq!(
            nvshmem_globals(nm),
            ["nvshmemi_device_lib_version_d", "nvshmemi_device_state_d", "nvshmemi_ibgda_device_state_d"]
        );
    }

    #[test]
    fn version_from_the_header() {
        let h = "#pragma once\n#define NVSHMEM_VENDOR_MAJOR_VERSION 3\n#define NVSHMEM_VENDOR_MINOR_VERSION 4\n\
                 #define NVSHMEM_VENDOR_PATCH_VERSION 5\n#define NVSHMEM_VENDOR_PACKAGE_VERSION 0\n";
        assert_eq!(parse_version(h).as_deref(), Some("3.4.5"));
        assert_eq!(parse_version("#define NVSHMEM_VENDOR_MAJOR_VERSION 3\n"), None);
    }

    #[test]
    fn per_arch_bitcode_is_preferred() {
        let home = std::env::temp_dir().join(format!("gpushmem-nvshmem-home-{}", std::process::id()));
        let lib = home.join("lib");
        std::fs::create_dir_all(&lib).unwrap();
        assert_eq!(bitcode_in(&home, "sm_90"), None);
        std::fs::write(lib.join("libnvshmem_device.bc"), "").unwrap();
        assert_eq!(bitcode_in(&home, "sm_90"), Some(lib.join("libnvshmem_device.bc")));
        std::fs::write(lib.join("libnvshmem_device_sm_90.bc"), "").unwrap();
        assert_eq!(bitcode_in(&home, "sm_90"), Some(lib.join("libnvshmem_device_sm_90.bc")));
        assert_eq!(bitcode_in(&home, "sm_90a"), Some(lib.join("libnvshmem_device_sm_90.bc")));
        assert_eq!(bitcode_in(&home, "sm_80"), Some(lib.join("libnvshmem_device.bc")));
        std::fs::remove_dir_all(&home).unwrap();
    }
}
