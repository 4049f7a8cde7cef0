//! Signals: a put that carries its own completion flag (`put_signal`), and
//! the signal word operations (`signal_op`, `signal_fetch`, `signal_wait_until`),
//! and their relaxed forms for flags that carry no data
//! (`signal_op_relaxed`, `signal_wait_until_relaxed`); [`PeerSignal`], a
//! signal word on one PE translated once, for loops that signal it often.
//!
//! Ordering of `put_signal*`: the data stores (split over the group), a group
//! barrier, then one thread updates the signal on the target with a
//! system-scope *release* (`st.release.sys` for SET, `red.release.sys.add`
//! for ADD). A consumer that sees the signal (through `signal_wait_until`,
//! whose exit carries an acquire fence) sees the data. Signal words are `u64`.
//!
//! On the NVSHMEM engine (feature `nvshmem`) `put_signal*` are
//! `nvshmem_putmem_signal(_nbi)`/`nvshmemx_putmem_signal(_nbi)_warp/_block`
//! (which order the data before the signal too), `signal_op` is
//! `nvshmem_fence` + `nvshmemx_signal_op` and `signal_fetch` is
//! `nvshmem_signal_fetch` + an acquire fence; `signal_wait_until` stays this
//! crate's bounded wait on local memory (see [`crate::wait`]) and, like
//! NVSHMEM's own `nvshmem_signal_wait_until`, skips the post-wait step that
//! NVSHMEM's `wait_until`/`test` run.

use crate::abi::{Cmp, SignalOp};
use crate::engine::{self, Mode};
use crate::group::Group;
use crate::{debug, wait};
use core::ffi::CStr;

/// Updates the signal `sig` on `pe` atomically (`nvshmemx_signal_op`); ordered
/// after this thread's earlier memory operations (release).
///
/// Per engine: native, one release store (`SET`) or release `red.add` (`ADD`)
/// on the peer's word. NVSHMEM: `nvshmemx_signal_op` does not order earlier
/// operations by itself, so this call issues `nvshmem_fence()` first and
/// keeps the release guarantee (earlier puts to `pe` arrive before the signal).
///
/// # Safety
/// `sig` is an 8-byte-aligned symmetric address; `pe < n_pes()`.
#[inline(always)]
pub unsafe fn signal_op(sig: *mut u64, value: u64, op: SignalOp, pe: u32) {
    debug::check_remote_elem(sig, pe, c"signal_op");
    // SAFETY: the caller upholds this function's contract: `sig` is an 8-byte-aligned
    // symmetric address and `pe < n_pes()`.
    unsafe { engine::signal_op(sig, value, op, pe, c"signal_op") }
}

/// Reads the local signal word (`nvshmem_signal_fetch`), with acquire semantics.
///
/// Per engine: native, one `ld.acquire`. NVSHMEM: `nvshmem_signal_fetch` (a
/// volatile load), then `fence.acq_rel` for the acquire.
///
/// # Safety
/// `sig` is a valid, 8-byte-aligned global address.
#[inline(always)]
pub unsafe fn signal_fetch(sig: *const u64) -> u64 {
    // SAFETY: `sig` is a valid, 8-byte-aligned global address (this fn's contract).
    unsafe { engine::signal_fetch(sig) }
}

/// Waits until the local signal `sig <cmp> value` (`nvshmem_signal_wait_until`);
/// returns the signal's value. Bounded by the state's timeout; acquire on return.
/// A thread-level call: any number of threads may wait on one word, each
/// returning on its own; for a block, one thread waiting then
/// [`crate::thread::sync_block`] makes the data the signal published visible
/// to the whole block and polls the word once.
///
/// # Safety
/// As [`signal_fetch`].
#[inline(always)]
pub unsafe fn signal_wait_until(sig: *const u64, cmp: Cmp, value: u64) -> u64 {
    // SAFETY: `sig` is a valid, 8-byte-aligned global address (this fn's contract).
    unsafe { wait::signal_wait_until_named(sig, cmp, value, c"signal_wait_until") }
}

/// Updates the signal `sig` on `pe` atomically with **no ordering**
/// (relaxed): NVSHMEM's own `nvshmemx_signal_op` semantics, for flags that
/// carry no data.
///
/// The guarantee is exactly: the update is atomic and reaches `pe`'s word
/// eventually; nothing this thread wrote before it (puts, stores, atomics) is
/// ordered before it. A consumer that sees the new value may still read
/// stale data, so use it for a "go"/"done" flag whose reader touches no data
/// that the signaller wrote (a ping-pong, a credit counter), or after an
/// explicit [`fence`](crate::sync::fence)/[`quiet`](crate::sync::quiet) that
/// already ordered the data. When the flag publishes data, use
/// [`signal_op`] (a release): the litmus test `litmus::mp_signal_op_4pe`
/// checks the release and runs this relaxed form as its control.
///
/// Per engine: native, one relaxed system-scope store (`st.volatile`, `SET`) or
/// `red.relaxed.sys.add` (`ADD`) on the peer's word. NVSHMEM:
/// `nvshmemx_signal_op` with no fence before it.
///
/// # Safety
/// `sig` is an 8-byte-aligned symmetric address; `pe < n_pes()`.
#[inline(always)]
pub unsafe fn signal_op_relaxed(sig: *mut u64, value: u64, op: SignalOp, pe: u32) {
    debug::check_remote_elem(sig, pe, c"signal_op_relaxed");
    // SAFETY: the caller upholds this function's contract: `sig` is an 8-byte-aligned
    // symmetric address and `pe < n_pes()`.
    unsafe { engine::signal_op_relaxed(sig, value, op, pe, c"signal_op_relaxed") }
}

/// A signal word on one PE, translated once: [`PeerSignal::signal_op`] and
/// [`PeerSignal::signal_op_relaxed`] are [`signal_op`] and
/// [`signal_op_relaxed`] without the per-call translation of the symmetric
/// address to the peer's (a dependent load from the peer table on every
/// call). Make it before a loop that signals the same word on the same PE
/// again and again — a ping-pong, a pipeline's "chunk ready" flag: on the
/// H200 the relaxed signal ping-pong took 0.615 µs per round trip with
/// `signal_op_relaxed` in the loop and 0.585 µs through a `PeerSignal`
/// (ordered: 1.099 and 1.060 µs; medians over 16 placements,
/// bench/RESULTS.md). Made by [`Sym::peer_signal`](crate::Sym::peer_signal)
/// (safe, checked) or [`peer_signal`] (raw). The same guarantees as the calls
/// it replaces; on the NVSHMEM engine a PE reached through a proxy (network)
/// transport has no load/store address and its updates go through
/// `nvshmemx_signal_op` as before.
#[derive(Clone, Copy)]
pub struct PeerSignal {
    /// The word on `pe` (null on the NVSHMEM engine for a proxy peer).
    at: *mut u64,
    /// The symmetric address, for the engine's fallback.
    sig: *mut u64,
    pe: u32,
}

impl core::fmt::Debug for PeerSignal {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("PeerSignal").field("sig", &self.sig).field("pe", &self.pe).finish()
    }
}

/// `sig` on `pe` as a [`PeerSignal`]: translates (and, in debug mode, checks)
/// once. Traps on the native engine when `pe` is not reachable by loads and
/// stores.
///
/// # Safety
/// `sig` is an 8-byte-aligned symmetric address; `pe < n_pes()`.
#[inline(always)]
pub unsafe fn peer_signal(sig: *mut u64, pe: u32) -> PeerSignal {
    debug::check_remote_elem(sig, pe, c"peer_signal");
    // SAFETY: the caller upholds this function's contract: `sig` is an 8-byte-aligned
    // symmetric address and `pe < n_pes()`.
    PeerSignal { at: unsafe { engine::peer_signal_address(sig, pe, c"peer_signal") }, sig, pe }
}

impl PeerSignal {
    /// The PE whose word this is.
    #[inline(always)]
    pub fn pe(&self) -> u32 {
        self.pe
    }

    /// [`signal_op`] on this word: atomic, ordered after this thread's
    /// earlier memory operations (release).
    #[inline(always)]
    pub fn signal_op(&self, value: u64, op: SignalOp) {
        // SAFETY: `at`/`sig`/`pe` come from `peer_signal`, whose caller
        // guaranteed a symmetric u64 and a PE in range.
        unsafe { engine::signal_op_at(self.at, self.sig, value, op, self.pe, c"PeerSignal::signal_op") }
    }

    /// [`signal_op_relaxed`] on this word: atomic, **no ordering** (see
    /// [`signal_op_relaxed`] for the exact guarantee and when it is enough).
    #[inline(always)]
    pub fn signal_op_relaxed(&self, value: u64, op: SignalOp) {
        // SAFETY: as in `signal_op`.
        unsafe { engine::signal_op_relaxed_at(self.at, self.sig, value, op, self.pe, c"PeerSignal::signal_op_relaxed") }
    }
}

/// Waits until the local signal `sig <cmp> value`, **without acquiring**:
/// returns the value a relaxed load saw satisfy the condition. Bounded by the
/// state's timeout (the same message as [`signal_wait_until`]).
///
/// Nothing is ordered after the return: reads that follow may see data older
/// than what the signaller wrote before its signal. Pair it with
/// [`signal_op_relaxed`] for flags that carry no data; for a flag that
/// publishes data use [`signal_wait_until`]. On the NVSHMEM engine it also
/// skips NVSHMEM's post-wait step (its fence and, on a proxy transport, the
/// consistency operation at the target).
///
/// # Safety
/// As [`signal_fetch`].
#[inline(always)]
pub unsafe fn signal_wait_until_relaxed(sig: *const u64, cmp: Cmp, value: u64) -> u64 {
    // SAFETY: `sig` is a valid, 8-byte-aligned global address (this fn's contract).
    unsafe { wait::wait_until_relaxed_named(sig, cmp, value, c"signal_wait_until_relaxed") }
}

/// Checks (debug mode) both targets, then the engine's `put_signal`.
///
/// # Safety
/// `dest` is a symmetric-heap range of `nelems` `T`s and `sig` an 8-byte-aligned symmetric
/// address; `src` is valid global memory of `nelems` `T`s, not overlapping `dest`;
/// `pe < n_pes()`; every thread of `g` calls.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn put_signal_elems<T: bytemuck::Pod>(
    dest: *mut T,
    src: *const T,
    nelems: usize,
    sig: *mut u64,
    value: u64,
    op: SignalOp,
    pe: u32,
    g: Group,
    mode: Mode,
    call: &CStr,
) {
    debug::check_remote(dest.cast(), nelems * core::mem::size_of::<T>(), pe, call);
    debug::check_remote_elem(sig, pe, call);
    // SAFETY: the caller upholds this function's contract, which is the engine's `put_signal`'s.
    unsafe { engine::put_signal(dest, src, nelems, sig, value, op, pe, g, mode, call) };
}

macro_rules! put_signal_fns {
    ($(#[$doc:meta])* $typed:ident, $mem:ident, $group:ident, $mode:ident) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// `dest` and `sig` are symmetric (`sig` 8-byte aligned), `src` valid global memory of
        /// `nelems` elements; `pe < n_pes()`. Group forms: every thread of the group calls.
        #[inline(always)]
        pub unsafe fn $typed<T: bytemuck::Pod>(dest: *mut T, src: *const T, nelems: usize, sig: *mut u64, value: u64, op: SignalOp, pe: u32) {
            const NAME: &str = concat!(stringify!($mem), "\0");
            // SAFETY: NAME ends with its only NUL.
            let call = unsafe { CStr::from_bytes_with_nul_unchecked(NAME.as_bytes()) };
            // SAFETY: the caller upholds this function's contract, which is `put_signal_elems`'
            // for this group.
            unsafe { put_signal_elems(dest, src, nelems, sig, value, op, pe, Group::$group(), Mode::$mode, call) };
        }

        $(#[$doc])*
        /// Byte form.
        ///
        /// # Safety
        /// As the typed form, with `bytes` bytes.
        #[inline(always)]
        pub unsafe fn $mem(dest: *mut u8, src: *const u8, bytes: usize, sig: *mut u64, value: u64, op: SignalOp, pe: u32) {
            // SAFETY: the caller upholds this function's contract, the typed form's with `T = u8`.
            unsafe { $typed(dest, src, bytes, sig, value, op, pe) }
        }
    };
}

put_signal_fns!(/// Put, then update the signal on `pe` (`nvshmem_put_signal`): whoever sees the signal sees the data.
    put_signal, putmem_signal, thread, Blocking);
put_signal_fns!(/// `put_signal` by a warp.
    put_signal_warp, putmem_signal_warp, warp, Blocking);
put_signal_fns!(/// `put_signal` by a block.
    put_signal_block, putmem_signal_block, block, Blocking);
put_signal_fns!(/// Non-blocking `put_signal` (`nvshmem_put_signal_nbi`): same ordering; on this transport the stores are issued on return.
    put_signal_nbi, putmem_signal_nbi, thread, Nbi);
put_signal_fns!(/// `put_signal_nbi` by a warp.
    put_signal_nbi_warp, putmem_signal_nbi_warp, warp, Nbi);
put_signal_fns!(/// `put_signal_nbi` by a block.
    put_signal_nbi_block, putmem_signal_nbi_block, block, Nbi);
