//! The native engine (default): our device state, our symmetric heap, loads
//! and stores (and `atom`/`red`) over the peer table, our barrier.
//!
//! Every address a topic module hands in has been checked there (PE range,
//! heap bounds, alignment: [`crate::debug`]); this file translates it to the
//! peer's mapping and moves the data.

use super::{FetchOp, Mode, Op};
use crate::abi::{sync_area, SignalOp, TeamDesc};
use crate::copy::copy_elems;
use crate::group::{blocks_in_grid, Group, Kind};
use crate::state::state;
use crate::team::{member_desc, Team, TEAM_WORLD};
use crate::word::{AtomicFloat, AtomicWord, Bitwise};
use crate::{debug, ptx, wait};
use core::ffi::CStr;

/// This PE's number, from the device state.
#[inline(always)]
pub(crate) fn my_pe() -> u32 {
    state().my_pe
}

/// Number of PEs, from the device state.
#[inline(always)]
pub(crate) fn n_pes() -> u32 {
    state().n_pes
}

/// The load/store address of `sym` on `pe`, or null when `pe` is not reachable.
///
/// # Safety
/// As [`crate::pe::ptr`].
#[inline(always)]
pub(crate) unsafe fn ptr<T>(sym: *const T, pe: u32) -> *mut T {
    // SAFETY: the caller upholds this function's contract, which is `peer_address`'s:
    // `sym` is in this PE's heap and `pe < n_pes()`.
    unsafe { peer_address(sym, pe) }
}

/// `peer_base[pe] + (sym - heap_base)`: translation by offset, so it also
/// holds where heaps do not sit at the same address on every PE.
///
/// # Safety
/// `sym` points into this PE's symmetric heap and `pe < n_pes()` (the table has
/// `n_pes` entries).
#[inline(always)]
pub(crate) unsafe fn peer_address<T>(sym: *const T, pe: u32) -> *mut T {
    let s = state();
    // The table is written by the host between launches only.
    // SAFETY: `pe < n_pes()` (this fn's contract), so entry `pe` is in the host's table of
    // `n_pes` 8-byte-aligned `u64`s, which no thread writes while a kernel runs.
    let base = unsafe { crate::ptx::ld_invariant((s.peer_bases as *const u64).add(pe as usize)) };
    if base == 0 {
        return core::ptr::null_mut();
    }
    (base + (sym as u64 - s.heap_base)) as *mut T
}

/// [`peer_address`], trapping with a message when `pe` is not reachable by loads and stores.
///
/// # Safety
/// As [`peer_address`].
#[inline(always)]
unsafe fn translate<T>(sym: *const T, pe: u32, call: &CStr) -> *mut T {
    // SAFETY: the caller upholds this function's contract, which is `peer_address`'s.
    let p = unsafe { peer_address(sym, pe) };
    if p.is_null() {
        debug::fail(
            c"gpushmem: %s: PE %llu is not reachable by loads/stores from this PE\n",
            &[call.as_ptr() as u64, pe as u64],
        );
    }
    p
}

/// Checks (debug mode) and translates a symmetric range to its address on `pe`
/// (the collectives read the members' buffers through it).
///
/// # Safety
/// As [`peer_address`]: `sym` points into this PE's symmetric heap and `pe < n_pes()`.
#[inline(always)]
pub(crate) unsafe fn remote(sym: *const u8, bytes: usize, pe: u32, call: &CStr) -> *mut u8 {
    debug::check_remote(sym, bytes, pe, call);
    // SAFETY: the caller upholds this function's contract, which is `translate`'s.
    unsafe { translate(sym, pe, call) }
}

/// `nelems` of `T` from local `src` to symmetric `dest` on `pe`, split over
/// `g`; a blocking group form waits for the whole group.
///
/// # Safety
/// `dest` is a symmetric-heap range of `nelems` `T`s, naturally aligned; `src` is valid
/// global memory of as many, aligned, not overlapping `dest` on `pe`; `pe < n_pes()`.
#[inline(always)]
pub(crate) unsafe fn put<T: bytemuck::Pod>(
    dest: *mut T,
    src: *const T,
    nelems: usize,
    pe: u32,
    g: Group,
    mode: Mode,
    call: &CStr,
) {
    // SAFETY: this fn's contract: `dest` is in the heap and `pe < n_pes()` (as `translate`
    // needs), and its translation on `pe` and `src` are valid, aligned, disjoint ranges
    // of `nelems` `T`s (as `copy_elems` needs): a peer's heap is mapped whole.
    unsafe { copy_elems(translate(dest, pe, call), src, nelems, g, call) };
    if mode == Mode::Blocking {
        g.sync();
    }
}

/// `nelems` of `T` from symmetric `src` on `pe` to local `dest`, split over `g`.
///
/// # Safety
/// `src` is a symmetric-heap range of `nelems` `T`s, naturally aligned; `dest` is valid
/// global memory of as many, aligned, not overlapping `src` on `pe`; `pe < n_pes()`.
#[inline(always)]
pub(crate) unsafe fn get<T: bytemuck::Pod>(
    dest: *mut T,
    src: *const T,
    nelems: usize,
    pe: u32,
    g: Group,
    mode: Mode,
    call: &CStr,
) {
    // SAFETY: as in `put`, with the symmetric side the source.
    unsafe { copy_elems(dest, translate(src, pe, call), nelems, g, call) };
    if mode == Mode::Blocking {
        g.sync();
    }
}

/// One element to `dest` on `pe`: a single store.
///
/// # Safety
/// `dest` is a naturally aligned symmetric address of a `T`; `pe < n_pes()`.
#[inline(always)]
pub(crate) unsafe fn p<T: bytemuck::Pod>(dest: *mut T, value: T, pe: u32, call: &CStr) {
    // SAFETY: `dest` is an aligned `T` in the heap and `pe < n_pes()` (this fn's contract),
    // so its translation is an aligned `T` in `pe`'s mapped heap.
    unsafe { translate(dest, pe, call).write_volatile(value) };
}

/// One element from `src` on `pe`: a single load.
///
/// # Safety
/// `src` is a naturally aligned symmetric address of a `T`; `pe < n_pes()`.
#[inline(always)]
pub(crate) unsafe fn g<T: bytemuck::Pod>(src: *const T, pe: u32, call: &CStr) -> T {
    // SAFETY: as in `p`: the translation is an aligned `T` in `pe`'s mapped heap.
    unsafe { (translate(src, pe, call) as *const T).read_volatile() }
}

/// `dest[i * dst] = src[i * sst]` for `i` in `0..nelems`, split over `g`.
///
/// # Safety
/// Elements `0..nelems` of both sides at their strides are valid, aligned `T`s, and no
/// destination element overlaps a source element.
#[inline(always)]
unsafe fn strided<T: bytemuck::Pod>(dest: *mut T, src: *const T, dst: isize, sst: isize, nelems: usize, g: Group) {
    let mut i = g.rank;
    while i < nelems {
        // SAFETY: `i < nelems`: element `i` of each side, valid and aligned (this fn's contract).
        unsafe { dest.offset(i as isize * dst).write(src.offset(i as isize * sst).read()) };
        i += g.size;
    }
}

/// Strided put (strides in elements), split over `g`; the group then syncs.
///
/// # Safety
/// As [`crate::rma::iput`]: `dest`'s elements are in the symmetric heap, both sides'
/// elements are valid, naturally aligned and do not overlap; `pe < n_pes()`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn iput<T: bytemuck::Pod>(
    dest: *mut T,
    src: *const T,
    dst: isize,
    sst: isize,
    nelems: usize,
    pe: u32,
    g: Group,
    call: &CStr,
) {
    if nelems > 0 {
        // SAFETY: this fn's contract; `dest`'s elements on `pe` are in its mapped heap.
        unsafe { strided(translate(dest, pe, call), src, dst, sst, nelems, g) };
    }
    g.sync();
}

/// Strided get (strides in elements), split over `g`; the group then syncs.
///
/// # Safety
/// As [`crate::rma::iget`]: `src`'s elements are in the symmetric heap, both sides'
/// elements are valid, naturally aligned and do not overlap; `pe < n_pes()`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn iget<T: bytemuck::Pod>(
    dest: *mut T,
    src: *const T,
    dst: isize,
    sst: isize,
    nelems: usize,
    pe: u32,
    g: Group,
    call: &CStr,
) {
    if nelems > 0 {
        // SAFETY: this fn's contract; `src`'s elements on `pe` are in its mapped heap.
        unsafe { strided(dest, translate(src, pe, call), dst, sst, nelems, g) };
    }
    g.sync();
}

/// `fence.acq_rel` at the job's scope.
#[inline(always)]
pub(crate) fn fence() {
    ptx::fence_acq_rel();
}

/// `fence.sc` at the job's scope; a group syncs first so every thread's
/// stores precede the leader's fence, whose cumulativity then covers them,
/// and again so no thread runs ahead of it.
#[inline(always)]
pub(crate) fn quiet(g: Group) {
    g.sync();
    if g.is_leader() {
        ptx::fence_sc();
    }
    g.sync();
}

/// Every PE arrives before any leaves (after a quiet when `complete`).
#[inline(always)]
pub(crate) fn barrier_all(g: Group, complete: bool) {
    team_sync_group(TEAM_WORLD, g, complete, c"barrier_all")
}

/// Teams up to this size have their barrier flags written by the group's leader.
const LEADER_WRITES_UP_TO: u32 = 64;

/// The barrier of `team` over the group `g` (see `crate::sync` for the algorithm).
/// Inlined, so that the group's kind and `complete` are constants and only
/// the one path a call needs is emitted (the PTX goldens check it).
#[inline(always)]
pub(crate) fn team_sync_group(team: Team, g: Group, complete: bool, call: &CStr) {
    debug::check_installed(call);
    if g.kind == Kind::Grid {
        grid_sync(team, complete, call);
    } else {
        team_sync_members(team, g, complete, call);
    }
}

/// [`team_sync_group`] for a thread, warp or block: the members' flags.
/// (Not recursive through [`grid_sync`], so it inlines into every caller.)
#[inline(always)]
fn team_sync_members(team: Team, g: Group, complete: bool, call: &CStr) {
    let s = state();
    let d = member_desc(team, call);
    g.sync();
    let slot = s.heap_base + TeamDesc::slot_offset(team.0);
    let seq_ptr = (slot + sync_area::BARRIER_SEQ) as *mut u64;
    let flags = (slot + sync_area::BARRIER_FLAGS) as *mut u64;
    // SAFETY: flag `my_index` of member i's slot; every heap has the slot.
    let flag_on = |i: u32| unsafe { peer_address(flags.add(d.my_index as usize), d.world_pe(i)) };
    // Small teams: the leader fences once and writes every member's flag
    // itself (fence, then relaxed stores of the same thread: a release
    // pattern, one fence per barrier). Large teams: the group spreads the
    // flags, each thread with its own release store.
    let leader_writes = d.size <= LEADER_WRITES_UP_TO;
    if g.is_leader() {
        if complete {
            ptx::fence_sc();
        } else {
            ptx::fence_acq_rel();
        }
        // SAFETY: the seq word is in this PE's slot, touched only by the barrier's leader.
        let seq = unsafe { seq_ptr.read_volatile() + 1 };
        // SAFETY: as above.
        unsafe { seq_ptr.write_volatile(seq) };
        if leader_writes {
            for i in 0..d.size {
                // SAFETY: see `flag_on`.
                unsafe { ptx::st_relaxed_sys_u64(flag_on(i), seq) };
            }
        }
    }
    g.sync();
    // SAFETY: written by the leader before the group sync above.
    let seq = unsafe { seq_ptr.read_volatile() };
    if !leader_writes {
        let mut i = g.rank as u32;
        while i < d.size {
            // SAFETY: see `flag_on`.
            unsafe { ptx::st_release_u64(flag_on(i), seq) };
            i += g.size as u32;
        }
    }
    let mut i = g.rank as u32;
    while i < d.size {
        // SAFETY: own flag array.
        unsafe { wait::wait_counter_reaches(flags.add(i as usize), seq, call) };
        i += g.size as u32;
    }
    g.sync();
}

/// The barrier of `team` over every block of this PE's grid (`_grid` forms):
/// the blocks meet on this PE, the last to arrive runs the team's barrier for
/// them all, then lets them go.
///
/// Each block: block sync (its threads' accesses happen before its leader's
/// next step), then its leader reads the generation `g0`, fences
/// (`fence.acq_rel`: release) and adds 1 to the arrival count. The leader
/// that brings the count to the number of blocks fences again (acquire: it
/// now has every block's accesses before it), resets the count, runs the
/// team barrier with one thread (whose fences are cumulative, so they carry
/// every block's accesses to the other members), and publishes `g0 + 1`
/// (fence, then store: release). Every other leader waits, bounded, until
/// the generation differs from `g0` (acquire). A last block sync lets the
/// block's threads go. The words are in the team's sync slot of this PE
/// ([`sync_area::GRID_ARRIVE`], [`sync_area::GRID_GEN`]), so one grid
/// barrier per team may run at a time on a PE, like the block form's rule.
///
/// Why `g0` is current: a block reads it after leaving the previous grid
/// barrier, which it left by seeing that generation (or by publishing it).
/// Blocks that are not all resident never meet: the wait times out with the
/// usual message, so a grid launched without the collective launch traps
/// instead of hanging.
#[inline(always)]
fn grid_sync(team: Team, complete: bool, call: &CStr) {
    let blocks = blocks_in_grid() as u32;
    if blocks == 1 {
        return team_sync_members(team, Group::block(), complete, call);
    }
    let slot = state().heap_base + TeamDesc::slot_offset(team.0);
    let arrive = (slot + sync_area::GRID_ARRIVE) as *mut u32;
    let gen = (slot + sync_area::GRID_GEN) as *mut u32;
    ptx::sync_block();
    if ptx::thread_index_in_block() == 0 {
        // SAFETY: both words are in this PE's slot of `team`, used only by this barrier.
        unsafe {
            let g0 = u32::load_volatile(gen);
            if complete {
                ptx::fence_sc();
            } else {
                ptx::fence_acq_rel();
            }
            if u32::fetch_add(arrive, 1) == blocks - 1 {
                ptx::fence_acq_rel();
                u32::store(arrive, 0);
                team_sync_members(team, Group::thread(), complete, call);
                ptx::fence_acq_rel();
                u32::store(gen, g0.wrapping_add(1));
            } else {
                wait::wait_until_named(gen, crate::Cmp::Ne, g0, call);
            }
        }
    }
    ptx::sync_block();
}

/// Release-updates the signal word at the already translated address `sig` (PTX ISA 9.7.8.10 st, 9.7.13.6 red).
///
/// # Safety
/// `sig` is a valid, 8-byte-aligned global address.
#[inline(always)]
unsafe fn signal_release(sig: *mut u64, value: u64, op: SignalOp) {
    // SAFETY: `sig` is a valid, 8-byte-aligned global address (this fn's contract), which
    // is what both callees require.
    unsafe {
        match op {
            SignalOp::Set => ptx::st_release_u64(sig, value),
            SignalOp::Add => ptx::red_release_add_u64(sig, value),
        }
    }
}

/// The data stores (split over the group), a group barrier, then the
/// leader's release update of the signal on the target. Both modes are the
/// same on this transport (the stores are issued on return).
///
/// # Safety
/// As [`crate::signal::put_signal`]: `dest` is a symmetric-heap range of `nelems` `T`s and
/// `sig` an 8-byte-aligned symmetric address; `src` is valid global memory of `nelems`
/// `T`s, not overlapping `dest` on `pe`; `pe < n_pes()`; every thread of `g` calls.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn put_signal<T: bytemuck::Pod>(
    dest: *mut T,
    src: *const T,
    nelems: usize,
    sig: *mut u64,
    value: u64,
    op: SignalOp,
    pe: u32,
    g: Group,
    _mode: Mode,
    call: &CStr,
) {
    // SAFETY: `dest` and `sig` are in the heap and `pe < n_pes()` (this fn's contract).
    let r = unsafe { translate(dest, pe, call) };
    // SAFETY: as `r`.
    let s = unsafe { translate(sig, pe, call) };
    // SAFETY: `r` is `dest`'s range in `pe`'s mapped heap; `src` is valid and disjoint
    // from it (this fn's contract).
    unsafe { copy_elems(r, src, nelems, g, call) };
    // Every thread's stores precede the leader's release (bar.sync, then a
    // cumulative release at system scope).
    g.sync();
    if g.is_leader() {
        // SAFETY: `s` is the aligned signal word in `pe`'s mapped heap.
        unsafe { signal_release(s, value, op) };
    }
}

/// A release update of the signal `sig` on `pe`.
///
/// # Safety
/// `sig` is an 8-byte-aligned symmetric address; `pe < n_pes()`.
#[inline(always)]
pub(crate) unsafe fn signal_op(sig: *mut u64, value: u64, op: SignalOp, pe: u32, call: &CStr) {
    // SAFETY: `sig` is an aligned word in the heap and `pe < n_pes()` (this fn's contract):
    // its translation is that word in `pe`'s mapped heap.
    unsafe { signal_release(translate(sig, pe, call), value, op) }
}

/// One relaxed system-scope store (`SET`) or `red.relaxed.sys.add` (`ADD`)
/// on the peer's word: atomic, unordered.
///
/// # Safety
/// `sig` is an 8-byte-aligned symmetric address; `pe < n_pes()`.
#[inline(always)]
pub(crate) unsafe fn signal_op_relaxed(sig: *mut u64, value: u64, op: SignalOp, pe: u32, call: &CStr) {
    // SAFETY: as in `signal_op`.
    unsafe { super::signal_relaxed(translate(sig, pe, call), value, op) }
}

/// The address a [`PeerSignal`](crate::signal::PeerSignal) updates: `sig` on
/// `pe`, translated once (traps, as every call here, when `pe` is not
/// reachable by loads and stores; never null).
///
/// # Safety
/// `sig` is an 8-byte-aligned symmetric address; `pe < n_pes()`.
#[inline(always)]
pub(crate) unsafe fn peer_signal_address(sig: *mut u64, pe: u32, call: &CStr) -> *mut u64 {
    // SAFETY: the caller upholds this function's contract, which covers `translate`'s.
    unsafe { translate(sig, pe, call) }
}

/// [`signal_op`] through an address from [`peer_signal_address`].
///
/// # Safety
/// `at` is [`peer_signal_address`]`(sig, pe)` for `sig` and `pe` that met its contract.
#[inline(always)]
pub(crate) unsafe fn signal_op_at(at: *mut u64, _sig: *mut u64, value: u64, op: SignalOp, _pe: u32, _call: &CStr) {
    // SAFETY: `at` is the aligned signal word in `pe`'s mapped heap (this fn's contract).
    unsafe { signal_release(at, value, op) }
}

/// [`signal_op_relaxed`] through an address from [`peer_signal_address`].
///
/// # Safety
/// As [`signal_op_at`].
#[inline(always)]
pub(crate) unsafe fn signal_op_relaxed_at(
    at: *mut u64,
    _sig: *mut u64,
    value: u64,
    op: SignalOp,
    _pe: u32,
    _call: &CStr,
) {
    // SAFETY: `at` is the aligned signal word in `pe`'s mapped heap (this fn's contract).
    unsafe { super::signal_relaxed(at, value, op) }
}

/// An acquire load of the local signal word.
///
/// # Safety
/// `sig` is a valid, 8-byte-aligned global address.
#[inline(always)]
pub(crate) unsafe fn signal_fetch(sig: *const u64) -> u64 {
    // SAFETY: `sig` is a valid, 8-byte-aligned global address (this fn's contract).
    unsafe { <u64 as AtomicWord>::load_acquire(sig) }
}

/// One system-scope `atom` on `dest` on `pe`; returns the old value.
///
/// # Safety
/// `dest` is a naturally aligned symmetric address of a `T`; `pe < n_pes()`.
#[inline(always)]
pub(crate) unsafe fn atomic_fetch_op<T: AtomicWord>(dest: *mut T, value: T, pe: u32, op: FetchOp, call: &CStr) -> T {
    // SAFETY: `dest` is an aligned `T` in the heap and `pe < n_pes()` (this fn's contract): its
    // translation is that word in `pe`'s mapped heap, as the `AtomicWord` ops need.
    unsafe {
        let p = translate(dest, pe, call);
        match op {
            FetchOp::Add | FetchOp::Inc => T::fetch_add(p, value),
            FetchOp::And => T::fetch_and(p, value),
            FetchOp::Or => T::fetch_or(p, value),
            FetchOp::Xor => T::fetch_xor(p, value),
            FetchOp::Swap => T::swap(p, value),
        }
    }
}

/// One system-scope `red` (or relaxed store, for `Set`) on `dest` on `pe`.
///
/// # Safety
/// `dest` is a naturally aligned symmetric address of a `T`; `pe < n_pes()`.
#[inline(always)]
pub(crate) unsafe fn atomic_op<T: AtomicWord>(dest: *mut T, value: T, pe: u32, op: Op, call: &CStr) {
    // SAFETY: `dest` is an aligned `T` in the heap and `pe < n_pes()` (this fn's contract): its
    // translation is that word in `pe`'s mapped heap, as the `AtomicWord` ops need.
    unsafe {
        let p = translate(dest, pe, call);
        match op {
            Op::Add | Op::Inc => T::add(p, value),
            Op::And => T::red_bitwise(p, value, Bitwise::And),
            Op::Or => T::red_bitwise(p, value, Bitwise::Or),
            Op::Xor => T::red_bitwise(p, value, Bitwise::Xor),
            Op::Set => T::store(p, value),
        }
    }
}

/// `atom.cas` on `dest` on `pe`; returns the old value.
///
/// # Safety
/// `dest` is a naturally aligned symmetric address of a `T`; `pe < n_pes()`.
#[inline(always)]
pub(crate) unsafe fn atomic_compare_swap<T: AtomicWord>(dest: *mut T, cond: T, value: T, pe: u32, call: &CStr) -> T {
    // SAFETY: `dest` is an aligned `T` in the heap and `pe < n_pes()` (this fn's contract): its
    // translation is that word in `pe`'s mapped heap, as the `AtomicWord` ops need.
    unsafe { T::compare_swap(translate(dest, pe, call), cond, value) }
}

/// `ld.relaxed.sys` of `src` on `pe`.
///
/// # Safety
/// `src` is a naturally aligned symmetric address of a `T`; `pe < n_pes()`.
#[inline(always)]
pub(crate) unsafe fn atomic_fetch<T: AtomicWord>(src: *const T, pe: u32, call: &CStr) -> T {
    // SAFETY: `src` is an aligned `T` in the heap and `pe < n_pes()` (this fn's contract): its
    // translation is that word in `pe`'s mapped heap, as the `AtomicWord` ops need.
    unsafe { T::load(translate(src, pe, call)) }
}

/// `atom.add` of a float on `dest` on `pe`; returns the old value.
///
/// # Safety
/// `dest` is a naturally aligned symmetric address of a `T`; `pe < n_pes()`.
#[inline(always)]
pub(crate) unsafe fn atomic_fetch_add_float<T: AtomicFloat>(dest: *mut T, value: T, pe: u32, call: &CStr) -> T {
    // SAFETY: `dest` is an aligned `T` in the heap and `pe < n_pes()` (this fn's contract): its
    // translation is that word in `pe`'s mapped heap, as the `AtomicFloat` op needs.
    unsafe { T::fetch_add(translate(dest, pe, call), value) }
}

/// Nothing: the wait's acquire is all this engine needs.
#[inline(always)]
pub(crate) fn after_wait() {}
