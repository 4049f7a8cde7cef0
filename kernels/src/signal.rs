//! Signals: a put that carries its own completion flag (`put_signal`), and
//! the signal word operations (`signal_op`, `signal_fetch`, `signal_wait_until`).
//!
//! Ordering of `put_signal*`: the data stores (split over the group), a group
//! barrier, then one thread updates the signal on the target with a
//! system-scope *release* (`st.release.sys` for SET, `red.release.sys.add`
//! for ADD). A consumer that sees the signal (through `signal_wait_until`,
//! whose exit carries an acquire fence) sees the data. Signal words are `u64`.

use crate::abi::{Cmp, SignalOp};
use crate::copy::copy_elems;
use crate::group::Group;
use crate::rma::{remote_elem, remote_elems};
use crate::{ptx, wait};
use core::ffi::CStr;

/// Release-updates the signal word at the already translated address `sig` (PTX ISA 9.7.8.10 st, 9.7.13.6 red).
#[inline(always)]
unsafe fn signal_release(sig: *mut u64, value: u64, op: SignalOp) {
    match op {
        SignalOp::Set => ptx::st_release_u64(sig, value),
        SignalOp::Add => ptx::red_release_add_u64(sig, value),
    }
}

/// Updates the signal `sig` on `pe` atomically (`nvshmemx_signal_op`); ordered
/// after this thread's earlier memory operations (release).
///
/// # Safety
/// `sig` is an 8-byte-aligned symmetric address; `pe < n_pes()`.
#[inline(always)]
pub unsafe fn signal_op(sig: *mut u64, value: u64, op: SignalOp, pe: u32) {
    signal_release(remote_elem(sig, pe, c"signal_op"), value, op)
}

/// Reads the local signal word (`nvshmem_signal_fetch`), with acquire semantics.
///
/// # Safety
/// `sig` is a valid, 8-byte-aligned global address.
#[inline(always)]
pub unsafe fn signal_fetch(sig: *const u64) -> u64 {
    <u64 as crate::atomic::AtomicWord>::load_acquire(sig)
}

/// Waits until the local signal `sig <cmp> value` (`nvshmem_signal_wait_until`);
/// returns the signal's value. Bounded by the state's timeout; acquire on return.
///
/// # Safety
/// As [`signal_fetch`].
#[inline(always)]
pub unsafe fn signal_wait_until(sig: *const u64, cmp: Cmp, value: u64) -> u64 {
    wait::wait_until_named(sig, cmp, value, c"signal_wait_until")
}

#[inline(always)]
unsafe fn put_signal_elems<T: bytemuck::Pod>(
    dest: *mut T,
    src: *const T,
    nelems: usize,
    sig: *mut u64,
    value: u64,
    op: SignalOp,
    pe: u32,
    g: Group,
    call: &CStr,
) {
    let r = remote_elems(dest, nelems, pe, call);
    let s = remote_elem(sig, pe, call);
    copy_elems(r, src, nelems, g, call);
    // Every thread's stores precede the leader's release (bar.sync, then a
    // cumulative release at system scope).
    g.sync();
    if g.is_leader() {
        signal_release(s, value, op);
    }
}

macro_rules! put_signal_fns {
    ($(#[$doc:meta])* $typed:ident, $mem:ident, $group:ident) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// `dest` and `sig` are symmetric (`sig` 8-byte aligned), `src` valid global memory of
        /// `nelems` elements; `pe < n_pes()`. Group forms: every thread of the group calls.
        #[inline(always)]
        pub unsafe fn $typed<T: bytemuck::Pod>(dest: *mut T, src: *const T, nelems: usize, sig: *mut u64, value: u64, op: SignalOp, pe: u32) {
            const NAME: &str = concat!(stringify!($mem), "\0");
            put_signal_elems(dest, src, nelems, sig, value, op, pe, Group::$group(), CStr::from_bytes_with_nul_unchecked(NAME.as_bytes()));
        }

        $(#[$doc])*
        /// Byte form.
        ///
        /// # Safety
        /// As the typed form, with `bytes` bytes.
        #[inline(always)]
        pub unsafe fn $mem(dest: *mut u8, src: *const u8, bytes: usize, sig: *mut u64, value: u64, op: SignalOp, pe: u32) {
            $typed(dest, src, bytes, sig, value, op, pe)
        }
    };
}

put_signal_fns!(/// Put, then update the signal on `pe` (`nvshmem_put_signal`): whoever sees the signal sees the data.
    put_signal, putmem_signal, thread);
put_signal_fns!(/// `put_signal` by a warp.
    put_signal_warp, putmem_signal_warp, warp);
put_signal_fns!(/// `put_signal` by a block.
    put_signal_block, putmem_signal_block, block);
put_signal_fns!(/// Non-blocking `put_signal` (`nvshmem_put_signal_nbi`): same ordering; on this transport the stores are issued on return.
    put_signal_nbi, putmem_signal_nbi, thread);
put_signal_fns!(/// `put_signal_nbi` by a warp.
    put_signal_nbi_warp, putmem_signal_nbi_warp, warp);
put_signal_fns!(/// `put_signal_nbi` by a block.
    put_signal_nbi_block, putmem_signal_nbi_block, block);
