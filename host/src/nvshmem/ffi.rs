//! NVSHMEM's host library (`libnvshmem_host.so.3`), loaded at run time like
//! cudarc loads the CUDA driver: the few C functions the NVSHMEM engine calls,
//! with the structs they take. Names, signatures and layouts are NVSHMEM
//! 3.x's (`include/host/nvshmem_api.h`, `host/nvshmemx_api.h`,
//! `device_host/nvshmem_types.h`, `bootstrap_device_host/nvshmem_uniqueid.h`),
//! pinned by the size asserts below.

use crate::{Error, Result};
use std::ffi::{c_int, c_long, c_uint, c_void};
use std::path::{Path, PathBuf};

/// `nvshmemx_uniqueid_v1`: 128 bytes, made by PE 0 and handed to every PE.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct UniqueId {
    pub version: c_int,
    pub internal: [u8; 124],
}
const _: () = assert!(std::mem::size_of::<UniqueId>() == 128);

impl UniqueId {
    /// `NVSHMEMX_UNIQUEID_INITIALIZER`.
    pub fn new() -> UniqueId {
        UniqueId { version: (1 << 16) + 128, internal: [0; 124] }
    }
}

/// `nvshmemx_uniqueid_args_v1`.
#[repr(C)]
struct UniqueIdArgs {
    version: c_int,
    id: *mut UniqueId,
    myrank: c_int,
    nranks: c_int,
}
const _: () = assert!(std::mem::size_of::<UniqueIdArgs>() == 24);

/// `nvshmemx_init_args_v1`.
#[repr(C)]
struct InitArgs {
    version: c_int,
    uid_args: UniqueIdArgs,
    content: [u8; 96],
}
const _: () = assert!(std::mem::size_of::<InitArgs>() == 128);

/// `nvshmemx_init_attr_v1`.
#[repr(C)]
pub(crate) struct InitAttr {
    version: c_int,
    mpi_comm: *mut c_void,
    args: InitArgs,
}
const _: () = assert!(std::mem::size_of::<InitAttr>() == 144);

impl InitAttr {
    /// `NVSHMEMX_INIT_ATTR_INITIALIZER`.
    pub fn new() -> InitAttr {
        InitAttr {
            version: (1 << 16) + 144,
            mpi_comm: std::ptr::null_mut(),
            args: InitArgs {
                version: (1 << 16) + 128,
                uid_args: UniqueIdArgs { version: (1 << 16) + 24, id: std::ptr::null_mut(), myrank: -1, nranks: -1 },
                content: [0; 96],
            },
        }
    }
}

/// `NVSHMEMX_INIT_WITH_UNIQUEID`.
pub(crate) const INIT_WITH_UNIQUEID: c_uint = 1 << 3;

/// The loaded library and the functions the engine calls (valid while `_lib` lives).
pub(crate) struct Lib {
    pub path: PathBuf,
    pub get_uniqueid: unsafe extern "C" fn(*mut UniqueId) -> c_int,
    pub set_attr_uniqueid_args: unsafe extern "C" fn(c_int, c_int, *const UniqueId, *mut InitAttr) -> c_int,
    pub hostlib_init_attr: unsafe extern "C" fn(c_uint, *mut InitAttr) -> c_int,
    pub hostlib_finalize: unsafe extern "C" fn(),
    pub my_pe: unsafe extern "C" fn() -> c_int,
    pub n_pes: unsafe extern "C" fn() -> c_int,
    pub malloc: unsafe extern "C" fn(usize) -> *mut c_void,
    pub free: unsafe extern "C" fn(*mut c_void),
    pub ptr: unsafe extern "C" fn(*const c_void, c_int) -> *mut c_void,
    pub cumodule_init: unsafe extern "C" fn(cudarc::driver::sys::CUmodule) -> c_int,
    pub cumodule_finalize: unsafe extern "C" fn(cudarc::driver::sys::CUmodule) -> c_int,
    /// `nvshmem_team_split_strided(parent, start, stride, size, config, config_mask, new)`.
    pub team_split_strided:
        unsafe extern "C" fn(c_int, c_int, c_int, c_int, *const c_void, c_long, *mut c_int) -> c_int,
    /// `nvshmem_team_split_2d(parent, xrange, xconfig, xmask, xteam, yconfig, ymask, yteam)`.
    pub team_split_2d: unsafe extern "C" fn(
        c_int,
        c_int,
        *const c_void,
        c_long,
        *mut c_int,
        *const c_void,
        c_long,
        *mut c_int,
    ) -> c_int,
    pub team_destroy: unsafe extern "C" fn(c_int),
    pub vendor_version: unsafe extern "C" fn(*mut c_int, *mut c_int, *mut c_int),
    _lib: libloading::Library,
}

/// The file name of NVSHMEM 3's host library.
pub(crate) const LIB_NAME: &str = "libnvshmem_host.so.3";

impl Lib {
    /// Loads the host library from the first place that has it:
    /// `GPUSHMEM_NVSHMEM_LIB` (a file), `$NVSHMEM_HOME/lib`, the Python
    /// package `nvidia.nvshmem` (the `nvidia-nvshmem-cu12/cu13` wheels), then
    /// the dynamic loader's own search (`LD_LIBRARY_PATH`, ldconfig).
    pub fn load() -> Result<Lib> {
        let mut tried: Vec<String> = Vec::new();
        for candidate in candidates() {
            // SAFETY: loading NVSHMEM's host library runs its initialisers, which only set up its own state.
            match unsafe { libloading::Library::new(&candidate) } {
                Ok(lib) => return Lib::resolve(lib, candidate),
                Err(e) => tried.push(format!("{}: {e}", candidate.display())),
            }
        }
        Err(Error::Engine {
            why: format!(
                "NVSHMEM's host library {LIB_NAME} was not found (tried: {}). Install the NVSHMEM version the \
                 kernels were built with (`pip install nvidia-nvshmem-cu13==3.4.5`), or set NVSHMEM_HOME or \
                 GPUSHMEM_NVSHMEM_LIB",
                tried.join("; ")
            ),
        })
    }

    fn resolve(lib: libloading::Library, path: PathBuf) -> Result<Lib> {
        fn sym<T: Copy>(lib: &libloading::Library, path: &Path, name: &str) -> Result<T> {
            // SAFETY: the type is the C signature of `name` in NVSHMEM 3's headers (see the Lib fields).
            unsafe { lib.get::<T>(name.as_bytes()) }.map(|s| *s).map_err(|e| Error::Engine {
                why: format!("{} has no `{name}` ({e}): not an NVSHMEM 3 host library?", path.display()),
            })
        }
        Ok(Lib {
            get_uniqueid: sym(&lib, &path, "nvshmemx_get_uniqueid")?,
            set_attr_uniqueid_args: sym(&lib, &path, "nvshmemx_set_attr_uniqueid_args")?,
            hostlib_init_attr: sym(&lib, &path, "nvshmemx_hostlib_init_attr")?,
            hostlib_finalize: sym(&lib, &path, "nvshmemx_hostlib_finalize")?,
            my_pe: sym(&lib, &path, "nvshmem_my_pe")?,
            n_pes: sym(&lib, &path, "nvshmem_n_pes")?,
            malloc: sym(&lib, &path, "nvshmem_malloc")?,
            free: sym(&lib, &path, "nvshmem_free")?,
            ptr: sym(&lib, &path, "nvshmem_ptr")?,
            cumodule_init: sym(&lib, &path, "nvshmemx_cumodule_init")?,
            cumodule_finalize: sym(&lib, &path, "nvshmemx_cumodule_finalize")?,
            team_split_strided: sym(&lib, &path, "nvshmem_team_split_strided")?,
            team_split_2d: sym(&lib, &path, "nvshmem_team_split_2d")?,
            team_destroy: sym(&lib, &path, "nvshmem_team_destroy")?,
            vendor_version: sym(&lib, &path, "nvshmemx_vendor_get_version_info")?,
            path,
            _lib: lib,
        })
    }

    /// The library's version (`nvshmemx_vendor_get_version_info`).
    pub fn version(&self) -> (i32, i32, i32) {
        let (mut a, mut b, mut c) = (0, 0, 0);
        // SAFETY: writes three ints through live pointers.
        unsafe { (self.vendor_version)(&mut a, &mut b, &mut c) };
        (a, b, c)
    }
}

/// Where to look for the host library, in order (see [`Lib::load`]).
fn candidates() -> Vec<PathBuf> {
    let mut v = Vec::new();
    if let Some(p) = std::env::var_os("GPUSHMEM_NVSHMEM_LIB") {
        v.push(PathBuf::from(p));
    }
    if let Some(h) = std::env::var_os("NVSHMEM_HOME") {
        v.push(Path::new(&h).join("lib").join(LIB_NAME));
    }
    let py = std::process::Command::new(std::env::var_os("PYTHON").unwrap_or_else(|| "python3".into()))
        .args(["-c", "import nvidia.nvshmem as m; print(list(m.__path__)[0])"])
        .output();
    if let Some(out) = py.ok().filter(|o| o.status.success()) {
        let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if !dir.is_empty() {
            v.push(Path::new(&dir).join("lib").join(LIB_NAME));
        }
    }
    v.push(PathBuf::from(LIB_NAME));
    v
}
