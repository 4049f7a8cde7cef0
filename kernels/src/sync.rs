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
//!
//! On the NVSHMEM engine (feature `nvshmem`): `fence` is `nvshmem_fence`,
//! `quiet` `nvshmem_quiet` (the group forms: group sync, one thread's
//! `nvshmem_quiet`, group sync: NVSHMEM 3.4.5's bitcode has no
//! `nvshmemx_quiet_warp/_block`), `barrier_all*`/`sync_all*` are
//! `nvshmem(x)_barrier_all(_warp/_block)`/`nvshmem(x)_sync_all(_warp/_block)`.
//! The team forms are `nvshmem(x)_barrier(_warp/_block)` and
//! `nvshmem(x)_team_sync(_warp/_block)` on the team's NVSHMEM handle.

use crate::engine;
use crate::engine::team_sync_group;
use crate::group::Group;
use crate::team::Team;

/// Orders this thread's earlier puts, AMOs and memory stores to each PE
/// before its later ones to the same PE (`nvshmem_fence`): `fence.acq_rel` (`.gpu`
/// when every PE shares this GPU, else `.sys`).
#[inline(always)]
pub fn fence() {
    engine::fence();
}

/// Completes this thread's earlier puts, AMOs and non-blocking gets
/// (`nvshmem_quiet`): they are visible to every PE after it. `fence.sc`
/// (`.gpu` when every PE shares this GPU, else `.sys`), which also orders
/// later loads after earlier stores.
#[inline(always)]
pub fn quiet() {
    engine::quiet(Group::thread());
}

/// `quiet` for a warp: every lane calls; completes all lanes' operations.
pub fn quiet_warp() {
    engine::quiet(Group::warp());
}

/// `quiet` for a block: every thread calls; completes all threads' operations.
pub fn quiet_block() {
    engine::quiet(Group::block());
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
    engine::barrier_all(Group::thread(), true);
}

/// `barrier_all` for a block (`nvshmemx_barrier_all_block`): every thread of
/// one block per PE calls it; completes all of the block's earlier operations.
pub fn barrier_all_block() {
    engine::barrier_all(Group::block(), true);
}

/// `barrier_all` for a warp (`nvshmemx_barrier_all_warp`).
pub fn barrier_all_warp() {
    engine::barrier_all(Group::warp(), true);
}

/// All PEs arrive before any leaves (`nvshmem_sync_all`); earlier puts are
/// ordered before the arrival but not completed. One thread per PE calls it.
pub fn sync_all() {
    engine::barrier_all(Group::thread(), false);
}

/// `sync_all` for a block (`nvshmemx_sync_all_block`).
pub fn sync_all_block() {
    engine::barrier_all(Group::block(), false);
}

/// `sync_all` for a warp (`nvshmemx_sync_all_warp`).
pub fn sync_all_warp() {
    engine::barrier_all(Group::warp(), false);
}

/// `barrier_all` for a whole grid (native engine only; no NVSHMEM
/// counterpart): every thread of every block of this PE's grid calls it, on
/// every PE; completes all of the grid's earlier operations, then every PE
/// arrives before any thread of any block leaves. The kernel must be launched
/// collectively (`Shmem::launch_collective`) with a grid that fits at once
/// (`Shmem::collective_launch_query_gridsize`): blocks that are not resident
/// never arrive, and the barrier traps with the wait-timeout message instead
/// of hanging. At most one grid barrier per team runs at a time on a PE.
///
/// Algorithm: the blocks of the grid meet on this PE (an arrival counter and
/// a generation word in the team's sync slot), the last block to arrive runs
/// the PEs' barrier for all of them and releases the others: one NVLink
/// latency plus two local atomics per block.
#[cfg(not(feature = "nvshmem"))]
pub fn barrier_all_grid() {
    engine::barrier_all(Group::grid(), true);
}

/// `sync_all` for a whole grid (as [`barrier_all_grid`], but earlier puts
/// are ordered before the arrival, not completed).
#[cfg(not(feature = "nvshmem"))]
pub fn sync_all_grid() {
    engine::barrier_all(Group::grid(), false);
}

/// [`barrier`] for a whole grid (see [`barrier_all_grid`] for the rules).
#[cfg(not(feature = "nvshmem"))]
pub fn barrier_grid(team: Team) {
    team_sync_group(team, Group::grid(), true, c"barrier_grid")
}

/// [`team_sync`] for a whole grid (see [`barrier_all_grid`] for the rules).
#[cfg(not(feature = "nvshmem"))]
pub fn team_sync_grid(team: Team) {
    team_sync_group(team, Group::grid(), false, c"team_sync_grid")
}
