//! The device state: the global the host installs into every loaded module,
//! and [`state`], the one way device code reads it.

use crate::{abi, ptx};

/// The device state the host installs into every loaded module (found by
/// name, [`abi::STATE_SYMBOL`], with `cuModuleGetGlobal`). Device code reads it; only
/// the library's own counters in the heap change at run time.
#[no_mangle]
#[used]
pub static mut GPUSHMEM_STATE: abi::State = abi::State::UNINIT;

/// The device state, read through a raw pointer (no reference to a `static mut`).
#[inline(always)]
pub(crate) fn state() -> abi::State {
    // SAFETY: the host writes the state before any launch and never while a
    // kernel of this module runs; device code never writes it.
    unsafe { ptx::ld_invariant(core::ptr::addr_of!(GPUSHMEM_STATE)) }
}
