//! Argument checks and failure reports.
//!
//! With [`crate::abi::FLAG_DEBUG_CHECKS`] set in the state (host:
//! `GPUSHMEM_DEBUG_CHECKS=1`), every RMA call checks its PE and that its
//! symmetric range lies in the heap; a failed check prints one line naming the
//! call, the PE and the address, then traps (the host sees
//! `CUDA_ERROR_LAUNCH_FAILED`, and the context stays failed).

use crate::state::state;
use crate::{abi, ptx};
use core::ffi::CStr;

/// Prints `fmt` with `args` through `vprintf`, then traps.
///
/// Every conversion in `fmt` must take 8 bytes (`%llu`, `%llx`, `%p`, `%s`),
/// except `%.*s`, whose precision may be followed by its pointer.
#[inline(never)]
#[cold]
pub fn fail(fmt: &CStr, args: &[u64]) -> ! {
    // SAFETY: vprintf reads one 8-byte slot per conversion from `args`.
    unsafe { core::arch::nvptx::vprintf(fmt.as_ptr().cast(), args.as_ptr().cast()) };
    ptx::trap()
}

/// [`fail`] for a format whose first conversion is `%.*s` of `s`, then one `%u`/`%llu`.
#[inline(never)]
#[cold]
pub fn fail_str(fmt: &CStr, s: &str, n: u64) -> ! {
    fail(fmt, &[s.len() as u64, s.as_ptr() as u64, n])
}

/// Whether the state asks for debug checks ([`crate::abi::FLAG_DEBUG_CHECKS`]).
#[inline(always)]
pub(crate) fn checks_on() -> bool {
    state().flags & abi::FLAG_DEBUG_CHECKS != 0
}

/// With debug checks on: traps unless the state is installed and `pe < n_pes`.
#[inline(always)]
pub fn check_pe(pe: u32, call: &CStr) {
    if checks_on() && pe >= state().n_pes {
        fail(
            c"gpushmem: %s: PE %llu out of range (n_pes = %llu), called on PE %llu\n",
            &[call.as_ptr() as u64, pe as u64, state().n_pes as u64, state().my_pe as u64],
        );
    }
}

/// With debug checks on: traps unless `[ptr, ptr + bytes)` lies in the symmetric heap.
#[inline(always)]
pub fn check_symmetric(ptr: *const u8, bytes: usize, call: &CStr) {
    if checks_on() {
        let s = state();
        let a = ptr as u64;
        let inside = a >= s.heap_base && (a - s.heap_base).checked_add(bytes as u64).is_some_and(|e| e <= s.heap_size);
        if !inside {
            fail(
                c"gpushmem: %s: address 0x%llx (+%llu bytes) is outside the symmetric heap [0x%llx, +%llu) of PE %llu\n",
                &[call.as_ptr() as u64, a, bytes as u64, s.heap_base, s.heap_size, s.my_pe as u64],
            );
        }
    }
}

/// With debug checks on: traps unless `pe < n_pes` and `[sym, sym + bytes)`
/// lies in the symmetric heap: the checks of every call that names a PE and
/// a symmetric range, on both engines.
#[inline(always)]
pub fn check_remote(sym: *const u8, bytes: usize, pe: u32, call: &CStr) {
    check_pe(pe, call);
    check_symmetric(sym, bytes, call);
}

/// [`check_remote`] for one `T` at `sym`, which must also be aligned for `T`.
#[inline(always)]
pub fn check_remote_elem<T>(sym: *const T, pe: u32, call: &CStr) {
    check_aligned(sym, call);
    check_remote(sym.cast(), core::mem::size_of::<T>(), pe, call);
}

/// With debug checks on: traps unless `ptr` is aligned for a `T` (an element
/// access at a misaligned address would otherwise fault the whole context
/// with a bare "misaligned address").
#[inline(always)]
pub fn check_aligned<T>(ptr: *const T, call: &CStr) {
    let align = core::mem::align_of::<T>();
    if checks_on() && !(ptr as usize).is_multiple_of(align) {
        fail(
            c"gpushmem: %s: address 0x%llx is not aligned to %llu bytes (its element type's alignment), on PE %llu\n",
            &[call.as_ptr() as u64, ptr as u64, align as u64, state().my_pe as u64],
        );
    }
}

/// Traps with a message when no host has installed the device state in this module.
#[inline(always)]
pub fn check_installed(call: &CStr) {
    if state().version != abi::STATE_VERSION {
        fail(
            c"gpushmem: %s: device state version %llu, expected %llu: was this module loaded through gpushmem's host (Shmem::load_module)?\n",
            &[call.as_ptr() as u64, state().version as u64, abi::STATE_VERSION as u64],
        );
    }
}
