//! Ordering and synchronization: `fence`, `quiet`, `barrier_all`, `sync_all`,
//! and their team forms `barrier(team)`, `team_sync(team)`.
//!
//! `barrier_all`/`sync_all` (one-round all-to-all): each PE writes its new
//! barrier sequence number into its own slot of every member's flag array
//! (the team's sync slot in the heap, written only by that PE, numbers only
//! grow: no reset race), then waits until every slot of its own array has
//! reached it. Cost: team-size remote stores and local polls per PE, one
//! NVLink latency; the `_block` form spreads both over the block's threads.
//! At most one thread (thread form) or one block (`_block`) per PE may be in
//! a barrier at a time, as in NVSHMEM.

use crate::abi::{sync_area, TeamDesc};
use crate::group::Group;
use crate::pe::peer_address;
use crate::team::{member_desc, Team, TEAM_WORLD};
use crate::{debug, ptx, state, wait};
use core::ffi::CStr;

/// Orders this thread's earlier puts, AMOs and memory stores to each PE
/// before its later ones to the same PE (`nvshmem_fence`): `fence.acq_rel` (`.gpu`
/// when every PE shares this GPU, else `.sys`).
#[inline(always)]
pub fn fence() {
    ptx::fence_acq_rel();
}

/// Completes this thread's earlier puts, AMOs and non-blocking gets
/// (`nvshmem_quiet`): they are visible to every PE after it. `fence.sc`
/// (`.gpu` when every PE shares this GPU, else `.sys`), which also orders
/// later loads after earlier stores.
#[inline(always)]
pub fn quiet() {
    ptx::fence_sc();
}

fn quiet_group(g: Group) {
    // Sync first so every thread's stores precede the leader's fence, whose
    // cumulativity then covers them; sync again so no thread runs ahead of it.
    g.sync();
    if g.is_leader() {
        ptx::fence_sc();
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

/// Teams up to this size have their barrier flags written by the group's leader.
const LEADER_WRITES_UP_TO: u32 = 64;

pub(crate) fn team_sync_group(team: Team, g: Group, complete: bool, call: &CStr) {
    debug::check_installed(call);
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

fn sync_all_group(g: Group, complete: bool) {
    team_sync_group(TEAM_WORLD, g, complete, c"barrier_all")
}

/// Completes this thread's earlier operations, then every member of `team`
/// arrives before any leaves (`nvshmem_barrier`). One thread per member calls it.
pub fn barrier(team: Team) {
    team_sync_group(team, Group::thread(), true, c"barrier")
}

/// [`barrier`] for a block (`nvshmemx_barrier_block`).
pub fn barrier_block(team: Team) {
    team_sync_group(team, Group::block(), true, c"barrier_block")
}

/// [`barrier`] for a warp (`nvshmemx_barrier_warp`).
pub fn barrier_warp(team: Team) {
    team_sync_group(team, Group::warp(), true, c"barrier_warp")
}

/// Every member of `team` arrives before any leaves; orders but does not
/// complete earlier operations (`nvshmem_team_sync`).
pub fn team_sync(team: Team) {
    team_sync_group(team, Group::thread(), false, c"team_sync")
}

/// [`team_sync`] for a block (`nvshmemx_team_sync_block`).
pub fn team_sync_block(team: Team) {
    team_sync_group(team, Group::block(), false, c"team_sync_block")
}

/// [`team_sync`] for a warp (`nvshmemx_team_sync_warp`).
pub fn team_sync_warp(team: Team) {
    team_sync_group(team, Group::warp(), false, c"team_sync_warp")
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
