//! The NVSHMEM engine's host side: NVSHMEM's host library drives the job
//! (its transports reach PEs that loads and stores cannot), while gpushmem
//! keeps its own bootstrap, heap allocator, checks and module handling.
//!
//! - **Init.** PE 0 makes NVSHMEM's unique ID; gpushmem's bootstrap hands it
//!   to every PE (so `gpushmem-run`, `mpirun` and `srun` all work, no MPI
//!   library needed); each PE then calls `nvshmemx_hostlib_init_attr` with it.
//! - **Heap.** One `nvshmem_malloc` of the whole symmetric heap at init;
//!   gpushmem's allocator hands out ranges of it, so `malloc`/`free` keep
//!   their agreement checks and offsets are the same on every PE. Peers'
//!   heaps, where loads and stores reach them, come from `nvshmem_ptr`: the
//!   built-in (native) kernels and `Shmem::ptr` use them.
//! - **Modules.** A module built for this engine carries NVSHMEM's device
//!   state (`nvshmemi_device_state_d`); loading it checks that its NVSHMEM
//!   version equals the host library's, then `nvshmemx_cumodule_init`.
//! - One PE per process: NVSHMEM has no PEs-as-threads mode.

mod exit_guard;
mod ffi;
mod registration;

pub(crate) use registration::Registration;

use crate::bootstrap::Bootstrap;
use crate::{Error, Result};
use cudarc::driver::{sys, CudaContext};
use ffi::{InitAttr, Lib, UniqueId, INIT_WITH_UNIQUEID};
use gpushmem_kernels::abi::ENGINE_TEAM_INVALID;
use std::ffi::c_void;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Which engine moves the data: chosen once per job (`GPUSHMEM_ENGINE`), the
/// same at build time (kernels) and run time (host).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Engine {
    /// gpushmem's own load/store path over NVLink / CUDA IPC (one node; PEs as
    /// threads or processes).
    #[default]
    Native,
    /// NVSHMEM's device library and host runtime (its transports leave the
    /// node; one PE per process).
    Nvshmem,
}

impl Engine {
    /// Parses `native` / `nvshmem`.
    pub fn parse(s: &str) -> std::result::Result<Engine, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "native" => Ok(Engine::Native),
            "nvshmem" => Ok(Engine::Nvshmem),
            _ => Err("expected `native` or `nvshmem`".into()),
        }
    }
}

/// The global of a module built for the NVSHMEM engine that holds the NVSHMEM
/// version its device code came from (`nvshmemi_version_t`: major, minor, patch).
const DEVICE_VERSION_SYMBOL: &str = "nvshmemi_device_lib_version_d";

/// The global of such a module that holds NVSHMEM's device state.
const DEVICE_STATE_SYMBOL: &str = "nvshmemi_device_state_d";

/// One PE's NVSHMEM runtime: initialised, with the symmetric heap allocated.
/// Dropping it frees the heap and finalises NVSHMEM.
pub(crate) struct Runtime {
    lib: Lib,
    heap: *mut c_void,
    /// This PE and the job size, as gpushmem's launcher and NVSHMEM agree.
    me: usize,
    n: usize,
    /// Made current before module (de)registration, which reads module globals.
    ctx: Arc<CudaContext>,
    /// Modules registered with `nvshmemx_cumodule_init` and not yet
    /// deregistered (`CUmodule` handles): NVSHMEM writes its device state into
    /// each of them whenever that state changes, so each must be deregistered
    /// before it is unloaded (see [`Registration`]).
    modules: Mutex<Vec<usize>>,
}

// SAFETY: the raw heap pointer is a device address, only passed back to NVSHMEM; the
// library's functions may be called from any thread of the process.
unsafe impl Send for Runtime {}
// SAFETY: as above; `Runtime` has no interior mutability.
unsafe impl Sync for Runtime {}

impl Runtime {
    /// Initialises NVSHMEM for this PE (collective over `boot`) with `ctx`
    /// current, and allocates `heap_size` bytes of symmetric heap. The process
    /// ends, saying why, if NVSHMEM's init has not returned after twice
    /// `init_timeout` (the bootstrap's bound).
    pub fn init(
        boot: &dyn Bootstrap,
        ctx: &Arc<CudaContext>,
        heap_size: u64,
        single_node: bool,
        init_timeout: Duration,
    ) -> Result<Runtime> {
        let (me, n) = (boot.rank(), boot.size());
        set_default_env(heap_size, single_node);
        let lib = Lib::load()?;
        log::debug!("PE {me}: NVSHMEM {:?} from {}", lib.version(), lib.path.display());
        ctx.bind_to_thread().map_err(|source| Error::Cuda { call: "cuCtxSetCurrent".into(), source })?;
        let mut id = UniqueId::new();
        if me == 0 {
            // SAFETY: writes the 128-byte ID into `id`.
            check(unsafe { (lib.get_uniqueid)(&mut id) }, "nvshmemx_get_uniqueid")?;
        }
        // PE 0's ID reaches every PE through gpushmem's (authenticated) bootstrap.
        let all = boot.allgather(if me == 0 { bytes_of(&id) } else { &[] })?;
        let root = all.first().filter(|b| b.len() == std::mem::size_of::<UniqueId>()).ok_or_else(|| {
            Error::PeerFailed { me, peer: 0, why: "sent no NVSHMEM unique ID (mixed engines across PEs?)".into() }
        })?;
        // SAFETY: `UniqueId` is plain bytes and `root` has exactly its size.
        let id: UniqueId = unsafe { std::ptr::read_unaligned(root.as_ptr().cast()) };
        let mut attr = InitAttr::new();
        // SAFETY: `id` and `attr` live across the init call that reads them.
        check(
            unsafe { (lib.set_attr_uniqueid_args)(me as i32, n as i32, &id, &mut attr) },
            "nvshmemx_set_attr_uniqueid_args",
        )?;
        // NVSHMEM's proxy may end the process with exit() behind a kernel that
        // waits for it, from init on: bound that exit (see `exit_guard`).
        if let Some(grace) = exit_guard::grace_from_env(exit_guard::GRACE) {
            exit_guard::install(grace);
        }
        // Init meets the other PEs again, through NVSHMEM's proxy where a
        // remote transport is used: a proxy that stopped leaves it waiting for
        // ever, so it gets twice the bootstrap's bound.
        let limit = 2 * init_timeout;
        let what = format!("PE {me}: nvshmemx_hostlib_init_attr (NVSHMEM's init)");
        let rc = exit_guard::bounded(&what, limit, "twice GPUSHMEM_BOOTSTRAP_TIMEOUT", || {
            // SAFETY: as above; NVSHMEM initialises on the current context.
            unsafe { (lib.hostlib_init_attr)(INIT_WITH_UNIQUEID, &mut attr) }
        });
        check(rc, "nvshmemx_hostlib_init_attr")?;
        // SAFETY: NVSHMEM is initialised.
        let (their_me, their_n) = unsafe { ((lib.my_pe)(), (lib.n_pes)()) };
        if their_me != me as i32 || their_n != n as i32 {
            return Err(Error::Engine {
                why: format!("NVSHMEM made this PE {their_me} of {their_n}; gpushmem's launcher says {me} of {n}"),
            });
        }
        // SAFETY: collective allocation after init; every PE asks for the same size (checked by the caller's heap agreement).
        let heap = unsafe { (lib.malloc)(heap_size as usize) };
        if heap.is_null() {
            // SAFETY: NVSHMEM is initialised; finalising undoes it.
            unsafe { (lib.hostlib_finalize)() };
            return Err(Error::Engine {
                why: format!(
                    "nvshmem_malloc({heap_size}) failed: raise NVSHMEM_SYMMETRIC_SIZE above GPUSHMEM_SYMMETRIC_SIZE \
                     (NVSHMEM keeps some of its heap for itself)"
                ),
            });
        }
        Ok(Runtime { lib, heap, me, n, ctx: ctx.clone(), modules: Mutex::new(Vec::new()) })
    }

    /// The symmetric heap's device address on this PE.
    pub fn heap_base(&self) -> u64 {
        self.heap as u64
    }

    /// Where PE `pe`'s copy of the heap is in this PE's address space, or 0
    /// when loads and stores cannot reach it (another node).
    pub fn peer_base(&self, pe: usize) -> u64 {
        // SAFETY: `heap` is a symmetric address of NVSHMEM's heap.
        unsafe { (self.lib.ptr)(self.heap, pe as i32) as u64 }
    }

    /// Prepares a loaded module that holds NVSHMEM device code (its NVSHMEM
    /// version is `device`, see [`module_nvshmem_version`]): checks that
    /// version against the host library's, runs `nvshmemx_cumodule_init` on
    /// `handle` (the `CUmodule` of `module`), then reads the device state back
    /// from the module and checks that it names this PE and job size. The
    /// returned [`Registration`] deregisters the module when dropped; keep it
    /// as long as the module is loaded.
    pub fn module_init(
        self: &Arc<Self>,
        name: &str,
        module: &Arc<cudarc::driver::CudaModule>,
        handle: sys::CUmodule,
        device: (i32, i32, i32),
        stream: &Arc<cudarc::driver::CudaStream>,
    ) -> Result<Registration> {
        let err = |why: String| Error::Module { name: name.into(), why };
        let host = self.lib.version();
        if device != host {
            return Err(err(format!(
                "its kernels were linked with NVSHMEM {}.{}.{}'s device library, but the host library {} is \
                 NVSHMEM {}.{}.{}: build the kernels against the NVSHMEM you run with (NVSHMEM_HOME at build time)",
                device.0,
                device.1,
                device.2,
                self.lib.path.display(),
                host.0,
                host.1,
                host.2
            )));
        }
        // SAFETY: a loaded module of the current context holding NVSHMEM's device globals.
        check(unsafe { (self.lib.cumodule_init)(handle) }, "nvshmemx_cumodule_init").map_err(|e| err(e.to_string()))?;
        self.modules.lock().unwrap_or_else(|p| p.into_inner()).push(handle as usize);
        // From here on, dropping the registration deregisters the module.
        let reg = Registration::new(self, handle, module.clone());
        let (mype, npes) = module_state_pes(module, stream)?;
        if (mype, npes) != (self.me as i32, self.n as i32) {
            return Err(err(format!(
                "after nvshmemx_cumodule_init its NVSHMEM device state names PE {mype} of {npes}, but this is PE {} of \
                 {}: NVSHMEM did not install its state into the module",
                self.me, self.n
            )));
        }
        Ok(reg)
    }

    /// `nvshmem_team_split_strided` of NVSHMEM team `parent` (members `start`,
    /// `start + stride`, …, `size` of them, numbered in `parent`); collective
    /// over `parent`'s members, which alone may call it. The new team's handle,
    /// or [`ENGINE_TEAM_INVALID`] on a PE outside it.
    pub fn team_split_strided(&self, parent: i32, start: usize, stride: usize, size: usize) -> Result<i32> {
        let mut team = ENGINE_TEAM_INVALID;
        let int = |v: usize| i32::try_from(v).unwrap_or(i32::MAX);
        // SAFETY: NVSHMEM is initialised; no config (mask 0); `team` outlives the call.
        let status = unsafe {
            (self.lib.team_split_strided)(parent, int(start), int(stride), int(size), std::ptr::null(), 0, &mut team)
        };
        check(status, "nvshmem_team_split_strided").map(|()| team).map_err(|e| self.team_err(e))
    }

    /// `nvshmem_team_split_2d` of NVSHMEM team `parent` into rows of `xrange`
    /// members and the columns across them; collective over `parent`'s
    /// members. The (x, y) handles as this PE sees them.
    pub fn team_split_2d(&self, parent: i32, xrange: usize) -> Result<(i32, i32)> {
        let (mut x, mut y) = (ENGINE_TEAM_INVALID, ENGINE_TEAM_INVALID);
        let xr = i32::try_from(xrange).unwrap_or(i32::MAX);
        // SAFETY: as `team_split_strided`.
        let status =
            unsafe { (self.lib.team_split_2d)(parent, xr, std::ptr::null(), 0, &mut x, std::ptr::null(), 0, &mut y) };
        check(status, "nvshmem_team_split_2d").map(|()| (x, y)).map_err(|e| self.team_err(e))
    }

    /// `nvshmem_team_destroy` (collective over the team's members; a no-op for
    /// an invalid handle).
    pub fn team_destroy(&self, team: i32) {
        if team != ENGINE_TEAM_INVALID {
            // SAFETY: a team this PE created and has not destroyed.
            unsafe { (self.lib.team_destroy)(team) }
        }
    }

    fn team_err(&self, e: Error) -> Error {
        Error::Engine {
            why: format!(
                "PE {}: {e}; NVSHMEM has room for NVSHMEM_MAX_TEAMS teams (default 32, a few reserved): destroy \
                 unused teams or raise it",
                self.me
            ),
        }
    }

    /// `nvshmemx_cumodule_finalize` on `handle` if it is still registered
    /// (NVSHMEM stops writing its device state into it).
    fn deregister(&self, handle: usize) {
        let mut modules = self.modules.lock().unwrap_or_else(|p| p.into_inner());
        let Some(i) = modules.iter().position(|&m| m == handle) else { return };
        modules.swap_remove(i);
        if let Err(e) = self.ctx.bind_to_thread() {
            log::warn!("PE {}: deregistering a module from NVSHMEM: cuCtxSetCurrent: {e}", self.me);
        }
        // SAFETY: `handle` is a module registered by `module_init` and still loaded: its
        // `Registration` (which keeps it loaded) or this runtime's drop is calling.
        let status = unsafe { (self.lib.cumodule_finalize)(handle as sys::CUmodule) };
        if status != 0 {
            log::warn!("PE {}: nvshmemx_cumodule_finalize failed with status {status}", self.me);
        }
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        // Modules still loaded (a Kernel kept past its Shmem) leave NVSHMEM's list first.
        let left: Vec<usize> = self.modules.lock().unwrap_or_else(|p| p.into_inner()).clone();
        for handle in left {
            self.deregister(handle);
        }
        // SAFETY: the heap came from nvshmem_malloc; both calls are collective,
        // and every PE drops its runtime at finalize.
        unsafe {
            (self.lib.free)(self.heap);
            (self.lib.hostlib_finalize)();
        }
    }
}

/// The NVSHMEM version a module's device code was linked from, or `None` for
/// a module without NVSHMEM code. `ptx` is the module's PTX (also when a cubin
/// built from it was loaded): a module whose PTX does not name the version
/// global is not looked up, because a failed `cuModuleGetGlobal` counts as an
/// API error under compute-sanitizer's memcheck.
pub(crate) fn module_nvshmem_version(
    module: &Arc<cudarc::driver::CudaModule>,
    ptx: &str,
    stream: &Arc<cudarc::driver::CudaStream>,
) -> Result<Option<(i32, i32, i32)>> {
    if !ptx.contains(DEVICE_VERSION_SYMBOL) {
        return Ok(None);
    }
    let Ok(global) = module.get_global(DEVICE_VERSION_SYMBOL, stream) else { return Ok(None) };
    if global.len() < 12 {
        return Ok(None);
    }
    let bytes = stream
        .clone_dtoh(&global)
        .map_err(|source| Error::Cuda { call: format!("reading {DEVICE_VERSION_SYMBOL}"), source })?;
    let int = |i: usize| i32::from_le_bytes(bytes[4 * i..4 * i + 4].try_into().unwrap_or_default());
    Ok(Some((int(0), int(1), int(2))))
}

/// The `mype` and `npes` fields of the NVSHMEM device state in `module`
/// (`nvshmemi_device_state_d`, NVSHMEM 3's `nvshmemi_device_host_state_t`:
/// `int version, mype, npes` first).
fn module_state_pes(
    module: &Arc<cudarc::driver::CudaModule>,
    stream: &Arc<cudarc::driver::CudaStream>,
) -> Result<(i32, i32)> {
    let global = module
        .get_global(DEVICE_STATE_SYMBOL, stream)
        .map_err(|source| Error::Cuda { call: format!("cuModuleGetGlobal({DEVICE_STATE_SYMBOL})"), source })?;
    let head = global.slice(0..12.min(global.len()));
    let bytes = stream
        .clone_dtoh(&head)
        .map_err(|source| Error::Cuda { call: format!("reading {DEVICE_STATE_SYMBOL}"), source })?;
    let int =
        |i: usize| bytes.get(4 * i..4 * i + 4).map_or(-1, |b| i32::from_le_bytes(b.try_into().unwrap_or_default()));
    Ok((int(1), int(2)))
}

/// NVSHMEM settings gpushmem gives a default where the user set none: a heap
/// big enough for gpushmem's, NVLink multicast off, and for a one-node job
/// the unique-ID bootstrap on loopback with no network transport.
fn set_default_env(heap_size: u64, single_node: bool) {
    let mut defaults = vec![
        ("NVSHMEM_SYMMETRIC_SIZE", (heap_size + (512 << 20)).to_string()),
        ("NVSHMEM_DISABLE_NVLS", "1".to_string()),
    ];
    if single_node {
        defaults.push(("NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME", "lo".to_string()));
        defaults.push(("NVSHMEM_REMOTE_TRANSPORT", "none".to_string()));
    }
    for (k, v) in defaults {
        if std::env::var_os(k).is_none() {
            log::debug!("{k}={v} (gpushmem's default for the NVSHMEM engine)");
            std::env::set_var(k, v);
        }
    }
}

fn check(status: std::ffi::c_int, call: &str) -> Result<()> {
    if status == 0 {
        Ok(())
    } else {
        Err(Error::Engine { why: format!("{call} failed with status {status} (NVSHMEM_DEBUG=INFO says more)") })
    }
}

fn bytes_of(id: &UniqueId) -> &[u8] {
    // SAFETY: `UniqueId` is `repr(C)` plain data without padding.
    unsafe { std::slice::from_raw_parts((id as *const UniqueId).cast(), std::mem::size_of::<UniqueId>()) }
}
