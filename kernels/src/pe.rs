//! Who am I, how many are we, and where is a symmetric object on another PE.

use crate::{debug, state};

/// This PE's number (`nvshmem_my_pe`).
#[inline(always)]
pub fn my_pe() -> u32 {
    state().my_pe
}

/// Number of PEs in the job (`nvshmem_n_pes`).
#[inline(always)]
pub fn n_pes() -> u32 {
    state().n_pes
}

/// The address through which this PE reaches `sym` (a pointer into its own
/// symmetric heap) on PE `pe`, or null when `pe`'s heap is not reachable by
/// loads and stores (`nvshmem_ptr`). Loads and stores through it are ordinary
/// weak accesses: order them with [`crate::fence`]/[`crate::quiet`].
///
/// # Safety
/// `sym` points into this PE's symmetric heap and `pe < n_pes()` (checked,
/// with a trap and a message, when debug checks are on).
#[inline(always)]
pub unsafe fn ptr<T>(sym: *const T, pe: u32) -> *mut T {
    debug::check_pe(pe, c"ptr");
    peer_address(sym, pe)
}

/// `peer_base[pe] + (sym - heap_base)`: translation by offset, so it also
/// holds where heaps do not sit at the same address on every PE.
#[inline(always)]
pub(crate) unsafe fn peer_address<T>(sym: *const T, pe: u32) -> *mut T {
    let s = state();
    // The table is written by the host between launches only.
    let base = crate::ptx::ld_invariant((s.peer_bases as *const u64).add(pe as usize));
    if base == 0 {
        return core::ptr::null_mut();
    }
    (base + (sym as u64 - s.heap_base)) as *mut T
}
