//! Kernel modules: loading PTX installs this PE's device state into it.

use crate::error::CudaContext as _;
use crate::{Error, Result};
use cudarc::driver::{CudaFunction, CudaModule, CudaStream};
use gpushmem_kernels::abi::{State, STATE_SYMBOL};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Which [`crate::Shmem`] loaded a module: an id unique in this process
/// (never reused, also across jobs), and that Shmem's PE. A kernel carries
/// the device state of the PE that loaded it, so only that Shmem may launch it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Owner {
    /// Unique per `Shmem` in this process.
    pub(crate) id: u64,
    /// The PE of that `Shmem`.
    pub(crate) pe: usize,
}

impl Owner {
    /// A fresh owner for a new `Shmem` of PE `pe`.
    pub(crate) fn new(pe: usize) -> Owner {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Owner { id: NEXT.fetch_add(1, Ordering::Relaxed), pe }
    }
}

/// Fails with [`Error::Launch`] unless `kernel`, loaded by `loaded_by`, is
/// launched through the same `Shmem` (`launcher`).
pub(crate) fn check_owner(kernel: &str, loaded_by: Owner, launcher: Owner) -> Result<()> {
    if loaded_by.id == launcher.id {
        return Ok(());
    }
    let whose = if loaded_by.pe == launcher.pe {
        format!("another Shmem (PE {} of another job)", loaded_by.pe)
    } else {
        format!("PE {}'s Shmem (another PE, or another job)", loaded_by.pe)
    };
    Err(Error::Launch {
        kernel: kernel.to_string(),
        why: format!(
            "the kernel was loaded by {whose}, but launched through PE {}'s: it would run with the other PE's \
             device state; load the module on every PE (`load_module` is collective) and launch each PE's own kernels",
            launcher.pe
        ),
    })
}

/// A loaded PTX module whose `GPUSHMEM_STATE` holds this PE's device state.
/// Several modules may be loaded at once; each has its own copy of the state.
pub struct Module {
    pub(crate) inner: Arc<CudaModule>,
    name: String,
    /// The `Shmem` that loaded it.
    owner: Owner,
    /// Every `.entry` of the PTX, loaded at module load.
    kernels: HashMap<String, CudaFunction>,
    /// On the NVSHMEM engine: keeps the module registered with NVSHMEM while
    /// it or any of its kernels lives.
    nvshmem: Option<Arc<crate::nvshmem::Registration>>,
}

/// A kernel (`extern "ptx-kernel" fn`) of a [`Module`], ready to launch.
#[derive(Clone)]
pub struct Kernel {
    pub(crate) func: CudaFunction,
    pub(crate) name: String,
    /// The `Shmem` whose module it is: only that one may launch it.
    pub(crate) owner: Owner,
    /// As [`Module`]'s: the module stays registered with NVSHMEM while a kernel of it lives.
    _nvshmem: Option<Arc<crate::nvshmem::Registration>>,
}

impl Kernel {
    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The most threads a block of this kernel may have
    /// (`CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK`): below 1024 when its
    /// registers per thread do not allow more. A launch with more fails;
    /// size blocks with `threads.min(k.max_threads_per_block()?)`.
    pub fn max_threads_per_block(&self) -> Result<u32> {
        let n = self.func.max_threads_per_block().cuda("cuFuncGetAttribute(MAX_THREADS_PER_BLOCK)")?;
        Ok(n as u32)
    }
}

impl Module {
    /// Loads `cubin` when given, non-empty and loadable on this GPU, else
    /// `ptx` (`cuModuleLoadData`; the driver JIT-compiles it), and writes `state` into its
    /// `GPUSHMEM_STATE` global, checking the global's size against this
    /// build's [`State`] (a kernel crate built against another version of
    /// `gpushmem-kernels` is refused here rather than misread on the device).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn load(
        owner: Owner,
        ctx: &Arc<cudarc::driver::CudaContext>,
        stream: &Arc<CudaStream>,
        name: &str,
        ptx: &str,
        cubin: Option<&[u8]>,
        state: &State,
        nvshmem: Option<&Arc<crate::nvshmem::Runtime>>,
    ) -> Result<Module> {
        let err = |why: String| Error::Module { name: name.to_string(), why };
        if let Some(why) = arch_mismatch(ptx, ctx) {
            return Err(err(why));
        }
        let prebuilt = cubin.filter(|c| !c.is_empty()).and_then(|c| {
            ctx.load_module(cudarc::nvrtc::Ptx::from_binary(c.to_vec()))
                .map_err(|e| log::debug!("module {name}: cubin not loadable here ({e}); JIT-compiling the PTX"))
                .ok()
        });
        let inner = match prebuilt {
            Some(m) => Ok(m),
            None => ctx.load_module(cudarc::nvrtc::Ptx::from_src(ptx)),
        }
        .map_err(|e| {
            err(format!(
                "cuModuleLoadData failed: {e} (PTX built for a newer GPU or PTX ISA than this driver/GPU supports?)"
            ))
        })?;
        let mut global = inner.get_global(STATE_SYMBOL, stream).map_err(|e| {
            err(format!(
                "no `{STATE_SYMBOL}` global ({e}): the kernel crate must depend on gpushmem-kernels (and use it), so that its state is linked in"
            ))
        })?;
        let want = std::mem::size_of::<State>();
        if global.len() != want {
            return Err(err(format!(
                "`{STATE_SYMBOL}` is {} bytes, this host expects {want} (state version {}): rebuild the kernel crate against the same gpushmem-kernels",
                global.len(),
                gpushmem_kernels::abi::STATE_VERSION
            )));
        }
        stream
            .memcpy_htod(bytemuck::bytes_of(state), &mut global)
            .and_then(|_| stream.synchronize())
            .map_err(|e| err(format!("writing the device state: {e}")))?;
        // Load every kernel now. With CUDA's lazy loading (the default since
        // 12.2) a kernel is loaded at its first use, and loading waits for the
        // kernels running in the context: a PE that loads a kernel while
        // another PE's kernel (same GPU, threads mode) already waits for it
        // in a barrier deadlocks. Seen on the H200.
        let mut kernels = HashMap::new();
        for entry in entry_names(ptx) {
            let f = inner.load_function(entry).map_err(|e| err(format!("cuModuleGetFunction({entry}): {e}")))?;
            // SAFETY: a valid function handle of a loaded module.
            unsafe { cudarc::driver::sys::cuFuncLoad(f.cu_function()) }
                .result()
                .map_err(|e| err(format!("cuFuncLoad({entry}): {e}")))?;
            kernels.insert(entry.to_string(), f);
        }
        // A module built for the NVSHMEM engine holds NVSHMEM's device state, which
        // only NVSHMEM's runtime can fill; one built for the native engine has none.
        let registration = match (crate::nvshmem::module_nvshmem_version(&inner, ptx, stream)?, nvshmem) {
            (None, _) => None,
            (Some(v), Some(rt)) => {
                let Some(f) = kernels.values().next() else {
                    return Err(err("holds NVSHMEM device code but no kernel".into()));
                };
                let mut module: cudarc::driver::sys::CUmodule = std::ptr::null_mut();
                // SAFETY: a function handle of the loaded module; writes its module handle.
                unsafe { cudarc::driver::sys::cuFuncGetModule(&mut module, f.cu_function()) }
                    .result()
                    .map_err(|e| err(format!("cuFuncGetModule: {e}")))?;
                Some(Arc::new(rt.module_init(name, &inner, module, v, stream)?))
            }
            (Some((a, b, c)), None) => {
                return Err(err(format!(
                    "was built for the NVSHMEM engine (NVSHMEM {a}.{b}.{c} device code), but this job runs on the \
                     native engine: run it with GPUSHMEM_ENGINE=nvshmem (one process per PE), or rebuild the kernels \
                     without GPUSHMEM_ENGINE=nvshmem"
                )))
            }
        };
        Ok(Module { inner, name: name.to_string(), owner, kernels, nvshmem: registration })
    }

    /// The kernel `name` of this module.
    pub fn kernel(&self, name: &str) -> Result<Kernel> {
        if let Some(f) = self.kernels.get(name) {
            return Ok(self.wrap(f.clone(), name));
        }
        let func = self.inner.load_function(name).map_err(|e| Error::Module {
            name: self.name.clone(),
            why: format!("no kernel `{name}` ({e}); is it `#[no_mangle] pub extern \"ptx-kernel\" fn {name}` (or `pub unsafe extern`)?"),
        })?;
        Ok(self.wrap(func, name))
    }

    fn wrap(&self, func: CudaFunction, name: &str) -> Kernel {
        Kernel { func, name: name.to_string(), owner: self.owner, _nvshmem: self.nvshmem.clone() }
    }

    /// The name it was loaded under.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// Names of the kernels (`.entry NAME(`) a PTX text defines.
fn entry_names(ptx: &str) -> impl Iterator<Item = &str> {
    ptx.lines().filter_map(|l| {
        let rest =
            l.trim_start().strip_prefix(".visible .entry ").or_else(|| l.trim_start().strip_prefix(".entry "))?;
        rest.split('(').next().map(str::trim).filter(|n| !n.is_empty())
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn entry_names() {
        let ptx = ".version 8.0\n.visible .entry a(\n.param .u64 x)\n{ ret; }\n.entry b_2()\n.func c(\n";
        assert_eq!(super::entry_names(ptx).collect::<Vec<_>>(), ["a", "b_2"]);
    }

    #[test]
    fn owners_are_unique() {
        let a = super::Owner::new(0);
        let b = super::Owner::new(0);
        assert_ne!(a.id, b.id);
        assert_ne!(a, b);
    }

    #[test]
    fn kernel_of_another_shmem_is_refused() {
        use super::{check_owner, Owner};
        let (pe0, pe1) = (Owner::new(0), Owner::new(1));
        assert!(check_owner("k", pe0, pe0).is_ok());
        match check_owner("k", pe0, pe1) {
            Err(crate::Error::Launch { kernel, why }) => {
                assert_eq!(kernel, "k");
                assert!(why.contains("loaded by PE 0's Shmem"), "{why}");
                assert!(why.contains("launched through PE 1's"), "{why}");
            }
            other => panic!("expected Error::Launch, got {other:?}"),
        }
        // Same PE number, another job (another Shmem in this process).
        let other_job = Owner::new(0);
        match check_owner("k", other_job, pe0) {
            Err(crate::Error::Launch { why, .. }) => assert!(why.contains("another job"), "{why}"),
            other => panic!("expected Error::Launch, got {other:?}"),
        }
    }
}

/// The architecture in a PTX module's `.target` line (`sm_90` → (90, false),
/// `sm_90a` → (90, true)).
fn ptx_target(ptx: &str) -> Option<(u32, bool)> {
    let line = ptx.lines().map(str::trim).find(|l| l.starts_with(".target"))?;
    let sm = line.split(|c: char| c.is_whitespace() || c == ',').find_map(|w| w.strip_prefix("sm_"))?;
    let specific = sm.ends_with('a');
    Some((sm.trim_end_matches('a').parse().ok()?, specific))
}

/// Why this GPU cannot run PTX built for its `.target` (a newer
/// architecture, or another's architecture-specific `sm_XXa`), saying what to
/// rebuild with; `None` when it can, or when either side is unknown.
fn arch_mismatch(ptx: &str, ctx: &cudarc::driver::CudaContext) -> Option<String> {
    use cudarc::driver::sys::CUdevice_attribute as A;
    let (target, specific) = ptx_target(ptx)?;
    let major = ctx.attribute(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR).ok()?;
    let minor = ctx.attribute(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR).ok()?;
    let gpu = (major * 10 + minor) as u32;
    let runs = if specific { gpu == target } else { gpu >= target };
    (!runs).then(|| {
        format!(
            "its kernels were built for sm_{target}{} (GPUSHMEM_ARCH when they were built; default sm_90), and this \
             GPU is sm_{gpu}: rebuild them with GPUSHMEM_ARCH=sm_{gpu}",
            if specific { "a" } else { "" }
        )
    })
}

#[cfg(test)]
mod arch_tests {
    use super::ptx_target;

    #[test]
    fn the_ptx_target_is_read() {
        assert_eq!(ptx_target("//\n.version 8.0\n.target sm_90\n.address_size 64\n"), Some((90, false)));
        assert_eq!(ptx_target(".version 8.8\n.target sm_90a, debug\n"), Some((90, true)));
        assert_eq!(ptx_target(".version 7.0\n.target sm_80\n"), Some((80, false)));
        assert_eq!(ptx_target("no target here"), None);
    }
}
