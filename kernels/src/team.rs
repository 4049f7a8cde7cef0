//! Teams: subsets of PEs `start, start + stride, …` (`nvshmem_team_t`).
//!
//! Kernels name a team by its slot in this PE's team table ([`Team`], a
//! `u32` kernel argument; the host's `Team::handle()`); [`TEAM_WORLD`] is
//! slot 0. Each team has its own barrier state in the heap, so barriers of
//! different teams never mix rounds.

#[cfg(feature = "nvshmem")]
use crate::abi;
use crate::abi::{TeamDesc, MAX_TEAMS, NOT_A_MEMBER};
use crate::debug;
use crate::state::state;

/// A team, as kernels receive it: its slot in the team table.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Team(pub u32);

/// All PEs (`NVSHMEM_TEAM_WORLD`).
pub const TEAM_WORLD: Team = Team(0);

/// This PE's view of `team`; traps for a slot out of range or unused
/// (destroyed or never created), whether or not debug checks are on.
///
/// Always checked because [`Team`] is a plain slot number a kernel may be
/// handed: out of range, the read would leave the table; unused, the zeroed
/// descriptor would send a barrier to slot 0's peers. The checks cost one
/// compare before the descriptor's load and one on its `size` after it, no
/// extra load.
#[inline(always)]
pub(crate) fn desc(team: Team, call: &core::ffi::CStr) -> TeamDesc {
    query_desc(team).unwrap_or_else(|| invalid(team, call))
}

/// `team`'s descriptor for the queries, or `None` for a slot out of range
/// or unused: like `nvshmem_team_*` on `NVSHMEM_TEAM_INVALID`, a query answers
/// -1 instead of trapping (it reads nothing out of bounds either way).
#[inline(always)]
fn query_desc(team: Team) -> Option<TeamDesc> {
    if team.0 >= MAX_TEAMS {
        return None;
    }
    // SAFETY: the host installs a `[TeamDesc; MAX_TEAMS]` table before any
    // launch, and `team.0 < MAX_TEAMS` (checked above).
    let d = unsafe { crate::ptx::ld_invariant((state().teams as *const TeamDesc).add(team.0 as usize)) };
    (d.size != 0).then_some(d)
}

#[cold]
#[inline(never)]
fn invalid(team: Team, call: &core::ffi::CStr) -> ! {
    debug::fail(
        c"gpushmem: %s: team %llu is not a valid team (destroyed, never created, or out of range) on PE %llu\n",
        &[call.as_ptr() as u64, team.0 as u64, state().my_pe as u64],
    )
}

/// Like [`desc`], and traps unless this PE is a member (always checked: a
/// non-member would otherwise write its flags out of bounds on the members).
#[inline(always)]
pub(crate) fn member_desc(team: Team, call: &core::ffi::CStr) -> TeamDesc {
    let d = desc(team, call);
    if d.my_index == NOT_A_MEMBER {
        debug::fail(
            c"gpushmem: %s: PE %llu is not a member of team %llu\n",
            &[call.as_ptr() as u64, state().my_pe as u64, team.0 as u64],
        );
    }
    d
}

/// This PE's number in `team`, or -1 if it is not a member or `team` is not
/// a valid team (destroyed, never created, out of range) (`nvshmem_team_my_pe`).
#[inline(always)]
pub fn team_my_pe(team: Team) -> i32 {
    match query_desc(team) {
        Some(d) if d.my_index != NOT_A_MEMBER => d.my_index as i32,
        _ => -1,
    }
}

/// Number of PEs in `team`, or -1 if `team` is not a valid team (destroyed,
/// never created, out of range) (`nvshmem_team_n_pes`). A non-member of a
/// valid team gets its size.
#[inline(always)]
pub fn team_n_pes(team: Team) -> i32 {
    query_desc(team).map_or(-1, |d| d.size as i32)
}

/// The number in `dest` of the PE numbered `pe` in `src`, or -1 if it is not
/// in `dest`, `pe` is not in `src`, or either team is not valid
/// (`nvshmem_team_translate_pe`).
#[inline(always)]
pub fn team_translate_pe(src: Team, pe: i32, dest: Team) -> i32 {
    let (Some(s), Some(d)) = (query_desc(src), query_desc(dest)) else {
        return -1;
    };
    if pe < 0 || pe as u32 >= s.size {
        return -1;
    }
    d.index_of(s.world_pe(pe as u32)).map_or(-1, |i| i as i32)
}

/// `team`'s handle in the NVSHMEM engine (`nvshmem_team_t`), read from the
/// team table after the descriptors; traps if the slot has none on this PE
/// (it is not a member, or the team was made for another engine).
#[cfg(feature = "nvshmem")]
#[inline(always)]
pub(crate) fn engine_handle(team: Team, call: &core::ffi::CStr) -> i32 {
    let s = state();
    if team.0 >= MAX_TEAMS {
        invalid(team, call);
    }
    let at = (s.teams + abi::ENGINE_TEAMS_OFFSET) as *const i32;
    // SAFETY: the host installs the `[i32; MAX_TEAMS]` after the descriptors; `team.0` is in range.
    let h = unsafe { crate::ptx::ld_invariant(at.add(team.0 as usize)) };
    if h == abi::ENGINE_TEAM_INVALID {
        debug::fail(
            c"gpushmem: %s: team %llu has no NVSHMEM team on PE %llu (not a member, or not made on this engine)\n",
            &[call.as_ptr() as u64, team.0 as u64, s.my_pe as u64],
        );
    }
    h
}
