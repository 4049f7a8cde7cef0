//! A module's registration with NVSHMEM's runtime, undone before the module
//! is unloaded.
//!
//! `nvshmemx_cumodule_init` adds the module's `nvshmemi_device_state_d` to a
//! list into which NVSHMEM writes its device state on every change (and on
//! every later `nvshmemx_cumodule_init`). A module unloaded without
//! `nvshmemx_cumodule_finalize` leaves a dangling address in that list: the
//! next write goes to freed (or reused) device memory, and the next module's
//! state may never be written. Seen on the H200: a test that loaded its
//! module a second time read `n_pes() == 0` and crashed.

use super::Runtime;
use cudarc::driver::{sys, CudaModule};
use std::sync::{Arc, Weak};

/// Keeps a module registered with NVSHMEM while it is loaded: held (shared)
/// by the [`crate::Module`] and each of its [`crate::Kernel`]s; the last one
/// dropped deregisters the module, and only then lets it unload.
pub(crate) struct Registration {
    rt: Weak<Runtime>,
    handle: usize,
    /// Dropped after `drop` has deregistered the module.
    _module: Arc<CudaModule>,
}

impl Registration {
    /// The registration of `handle`, the `CUmodule` of `module`, with `rt`.
    pub(super) fn new(rt: &Arc<Runtime>, handle: sys::CUmodule, module: Arc<CudaModule>) -> Registration {
        Registration { rt: Arc::downgrade(rt), handle: handle as usize, _module: module }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        // A runtime already gone has deregistered every module in its own drop.
        if let Some(rt) = self.rt.upgrade() {
            rt.deregister(self.handle);
        }
    }
}
