//! Who am I, how many are we, and where is a symmetric object on another PE.

use crate::{debug, engine};

/// This PE's number (`nvshmem_my_pe`).
#[inline(always)]
pub fn my_pe() -> u32 {
    engine::my_pe()
}

/// Number of PEs in the job (`nvshmem_n_pes`).
#[inline(always)]
pub fn n_pes() -> u32 {
    engine::n_pes()
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
    // SAFETY: the caller upholds this function's contract, which is `engine::ptr`'s:
    // `sym` is in this PE's symmetric heap and `pe < n_pes()`.
    unsafe { engine::ptr(sym, pe) }
}
