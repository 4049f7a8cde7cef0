//! Kernel modules: loading PTX installs this PE's device state into it.

use crate::{Error, Result};
use cudarc::driver::{CudaFunction, CudaModule, CudaStream};
use gpushmem_kernels::abi::{State, STATE_SYMBOL};
use std::collections::HashMap;
use std::sync::Arc;

/// A loaded PTX module whose `GPUSHMEM_STATE` holds this PE's device state.
/// Several modules may be loaded at once; each has its own copy of the state.
pub struct Module {
    pub(crate) inner: Arc<CudaModule>,
    name: String,
    /// Every `.entry` of the PTX, loaded at module load.
    kernels: HashMap<String, CudaFunction>,
}

/// A kernel (`extern "ptx-kernel" fn`) of a [`Module`], ready to launch.
#[derive(Clone)]
pub struct Kernel {
    pub(crate) func: CudaFunction,
    pub(crate) name: String,
}

impl Kernel {
    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Module {
    /// Loads `cubin` when given, non-empty and loadable on this GPU, else
    /// `ptx` (`cuModuleLoadData`; the driver JIT-compiles it), and writes `state` into its
    /// `GPUSHMEM_STATE` global, checking the global's size against this
    /// build's [`State`] (a kernel crate built against another version of
    /// `gpushmem-kernels` is refused here rather than misread on the device).
    pub(crate) fn load(
        ctx: &Arc<cudarc::driver::CudaContext>,
        stream: &Arc<CudaStream>,
        name: &str,
        ptx: &str,
        cubin: Option<&[u8]>,
        state: &State,
        nvshmem: Option<&crate::nvshmem::Runtime>,
    ) -> Result<Module> {
        let err = |why: String| Error::Module { name: name.to_string(), why };
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
        match (crate::nvshmem::module_nvshmem_version(&inner, stream)?, nvshmem) {
            (None, _) => {}
            (Some(v), Some(rt)) => {
                let Some(f) = kernels.values().next() else {
                    return Err(err("holds NVSHMEM device code but no kernel".into()));
                };
                let mut module: cudarc::driver::sys::CUmodule = std::ptr::null_mut();
                // SAFETY: a function handle of the loaded module; writes its module handle.
                unsafe { cudarc::driver::sys::cuFuncGetModule(&mut module, f.cu_function()) }
                    .result()
                    .map_err(|e| err(format!("cuFuncGetModule: {e}")))?;
                rt.module_init(name, module, v)?;
            }
            (Some((a, b, c)), None) => {
                return Err(err(format!(
                    "was built for the NVSHMEM engine (NVSHMEM {a}.{b}.{c} device code), but this job runs on the \
                     native engine: run it with GPUSHMEM_ENGINE=nvshmem (one process per PE), or rebuild the kernels \
                     without GPUSHMEM_ENGINE=nvshmem"
                )))
            }
        }
        Ok(Module { inner, name: name.to_string(), kernels })
    }

    /// The kernel `name` of this module.
    pub fn kernel(&self, name: &str) -> Result<Kernel> {
        if let Some(f) = self.kernels.get(name) {
            return Ok(Kernel { func: f.clone(), name: name.to_string() });
        }
        let func = self.inner.load_function(name).map_err(|e| Error::Module {
            name: self.name.clone(),
            why: format!("no kernel `{name}` ({e}); is it `#[no_mangle] pub unsafe extern \"ptx-kernel\" fn {name}`?"),
        })?;
        Ok(Kernel { func, name: name.to_string() })
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
}
