//! Ordering and synchronization: `fence`, `quiet`, `barrier_all`, `sync_all`.
//!
//! `barrier_all`/`sync_all` (one-round all-to-all): each PE writes its new
//! barrier sequence number into its own slot of every PE's flag array (sync
//! area of the heap, written only by that PE, numbers only grow: no reset
//! race), then waits until every slot of its own array has reached it.
//! Cost: n_pes remote stores and n_pes local polls per PE, one NVLink
//! latency; the `_block` form spreads both over the block's threads.
//! At most one thread (thread form) or one block (`_block`) per PE may be in
//! a barrier at a time, as in NVSHMEM.

use crate::abi::sync_area;
use crate::group::Group;
use crate::pe::peer_address;
use crate::{debug, ptx, state, wait};

/// Orders this thread's earlier puts, AMOs and memory stores to each PE
/// before its later ones to the same PE (`nvshmem_fence`): `fence.acq_rel.sys`.
#[inline(always)]
pub fn fence() {
    ptx::fence_acq_rel_sys();
}

/// Completes this thread's earlier puts, AMOs and non-blocking gets
/// (`nvshmem_quiet`): they are visible system-wide after it. `fence.sc.sys`
/// (`membar.sys`), which also orders later loads after earlier stores.
#[inline(always)]
pub fn quiet() {
    ptx::fence_sc_sys();
}

fn quiet_group(g: Group) {
    // Sync first so every thread's stores precede the leader's fence, whose
    // cumulativity then covers them; sync again so no thread runs ahead of it.
    g.sync();
    if g.is_leader() {
        ptx::fence_sc_sys();
    }
    g.sync();
}

/// `quiet` for a warp: every lane calls; completes all lanes' operations.
pub fn quiet_warp() {
    quiet_group(Group::warp());
}

/// `quiet` for a block: every thread calls; completes all threads' operations.
pub fn quiet_block() {
    quiet_group(Group::block());
}

fn sync_all_group(g: Group, complete: bool) {
    debug::check_installed(c"barrier_all/sync_all");
    let s = state();
    g.sync();
    let seq_ptr = (s.heap_base + sync_area::BARRIER_SEQ) as *mut u64;
    if g.is_leader() {
        if complete {
            ptx::fence_sc_sys();
        } else {
            ptx::fence_acq_rel_sys();
        }
        // SAFETY: the seq word is in this PE's sync area, touched only by the barrier's leader.
        unsafe { seq_ptr.write_volatile(seq_ptr.read_volatile() + 1) };
    }
    g.sync();
    // SAFETY: written by the leader before the group sync above.
    let seq = unsafe { seq_ptr.read_volatile() };
    let flags = (s.heap_base + sync_area::BARRIER_FLAGS) as *mut u64;
    let mut pe = g.rank as u32;
    while pe < s.n_pes {
        // SAFETY: slot `my_pe` of `pe`'s flag array; sync area is in every heap.
        unsafe {
            let slot = peer_address(flags.add(s.my_pe as usize), pe);
            ptx::st_release_sys_u64(slot, seq);
        }
        pe += g.size as u32;
    }
    let mut pe = g.rank as u32;
    while pe < s.n_pes {
        // SAFETY: own flag array.
        unsafe { wait::wait_counter_reaches(flags.add(pe as usize), seq, c"barrier_all") };
        pe += g.size as u32;
    }
    g.sync();
}

/// All PEs arrive before any leaves, after completing this thread's earlier
/// operations (`nvshmem_barrier_all`). One thread per PE calls it.
pub fn barrier_all() {
    sync_all_group(Group::thread(), true);
}

/// `barrier_all` for a block (`nvshmemx_barrier_all_block`): every thread of
/// one block per PE calls it; completes all of the block's earlier operations.
pub fn barrier_all_block() {
    sync_all_group(Group::block(), true);
}

/// `barrier_all` for a warp (`nvshmemx_barrier_all_warp`).
pub fn barrier_all_warp() {
    sync_all_group(Group::warp(), true);
}

/// All PEs arrive before any leaves (`nvshmem_sync_all`); earlier puts are
/// ordered before the arrival but not completed. One thread per PE calls it.
pub fn sync_all() {
    sync_all_group(Group::thread(), false);
}

/// `sync_all` for a block (`nvshmemx_sync_all_block`).
pub fn sync_all_block() {
    sync_all_group(Group::block(), false);
}

/// `sync_all` for a warp (`nvshmemx_sync_all_warp`).
pub fn sync_all_warp() {
    sync_all_group(Group::warp(), false);
}
