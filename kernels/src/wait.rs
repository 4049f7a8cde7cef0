//! The bounded poll every wait is built on.
//!
//! Polls with `ld.relaxed.sys` (FACTS: an acquire load in the loop made a
//! ping-pong 2.7× slower) and leaves with `fence.acq_rel.sys`, so what the
//! writer ordered before its flag store is visible after the wait. After
//! `state.timeout_ns` nanoseconds (`GPUSHMEM_TIMEOUT` on the host; 0 = never)
//! it prints the PE, the address, the awaited and the last seen value, and traps.

use crate::{ptx, state};
use core::ffi::CStr;

/// Polls between two reads of `%globaltimer`.
const POLLS_PER_CLOCK_READ: u32 = 64;

/// Waits until `*addr >= target` (as a wrapping difference: counters only grow);
/// returns the value seen. Acquire semantics on return.
///
/// # Safety
/// `addr` is a valid, 8-byte-aligned global address.
#[inline(always)]
pub unsafe fn wait_counter_reaches(addr: *const u64, target: u64, what: &CStr) -> u64 {
    let mut seen = ptx::ld_relaxed_sys_u64(addr);
    if (seen.wrapping_sub(target) as i64) < 0 {
        seen = wait_slow(addr, target, what);
    }
    ptx::fence_acq_rel_sys();
    seen
}

#[inline(never)]
unsafe fn wait_slow(addr: *const u64, target: u64, what: &CStr) -> u64 {
    let timeout = state().timeout_ns;
    let start = ptx::global_timer_ns();
    let mut n = 0u32;
    loop {
        let seen = ptx::ld_relaxed_sys_u64(addr);
        if (seen.wrapping_sub(target) as i64) >= 0 {
            return seen;
        }
        n = n.wrapping_add(1);
        if timeout != 0 && n % POLLS_PER_CLOCK_READ == 0 && ptx::global_timer_ns().wrapping_sub(start) > timeout {
            crate::debug::fail(
                c"gpushmem: PE %llu: %s timed out after %llu ms waiting at 0x%llx for a value >= %llu (last seen %llu); a peer PE may have died or skipped the call\n",
                &[state().my_pe as u64, what.as_ptr() as u64, timeout / 1_000_000, addr as u64, target, seen],
            );
        }
    }
}
