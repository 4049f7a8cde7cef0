//! Kernels of the team tests (tests/gpu/team.rs), built for both engines:
//! what the device sees of the team table, per-team barrier rounds, back-to-back
//! collectives alternating between two overlapping teams.
//!
//! Every kernel runs as one block; team handles arrive as `u32` and become
//! `shmem::Team(t)`. A PE that is not a member of the team a step names skips
//! that step (it must not call).

use core::arch::nvptx::*;
use gpushmem_kernels as shmem;
use shmem::{ReduceOp, Team, TEAM_WORLD};

/// World PE of member `m` of `team`, through the device's own translation.
#[inline(always)]
fn world_of(team: Team, m: u32) -> u32 {
    shmem::team_translate_pe(team, m as i32, TEAM_WORLD) as u32
}

/// Writes, for each team `a` of `teams[..nteams]` (handles), into `out[a * per..]`
/// with `per = 2 + nteams * (npe + 2)`: `team_my_pe(a)`, `team_n_pes(a)`, then
/// for each team `b`: `team_translate_pe(a, pe, b)` for `pe` in `-1..=npe`.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn team_query(teams: *const u32, nteams: u32, npe: u32, out: *mut i32) {
    if _thread_idx_x() != 0 || _block_idx_x() != 0 {
        return;
    }
    let row = npe as usize + 2;
    let per = 2 + nteams as usize * row;
    for a in 0..nteams as usize {
        let ta = Team(*teams.add(a));
        let o = out.add(a * per);
        *o = shmem::team_my_pe(ta);
        *o.add(1) = shmem::team_n_pes(ta);
        for b in 0..nteams as usize {
            let tb = Team(*teams.add(b));
            for k in 0..row {
                *o.add(2 + b * row + k) = shmem::team_translate_pe(ta, k as i32 - 1, tb);
            }
        }
    }
}

/// `barrier_rounds` for a team: each round every member writes the round
/// number (`base + r`) into its slot on every member (double-buffered by
/// parity), synchronizes, then checks all the team's slots; mismatches are
/// counted in `errors[0]`. Non-members return at once.
///
/// `form`: 0 `barrier` (thread 0), 1 `barrier_block`, 2 `barrier_warp` (warp 0),
/// 3 `quiet_block` + `team_sync_block`, 4 `quiet_block` + `team_sync` (thread 0),
/// 5 `quiet_block` + `team_sync_warp` (warp 0).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn team_barrier_rounds(
    team: u32,
    buf: *mut u64,
    base: u64,
    rounds: u32,
    errors: *mut u32,
    form: u32,
) {
    let team = Team(team);
    let me = shmem::team_my_pe(team);
    if me < 0 {
        return;
    }
    let n = shmem::team_n_pes(team) as u32;
    let t = _thread_idx_x() as u32;
    let bs = _block_dim_x() as u32;
    for r in 1..=rounds as u64 {
        let v = base + r;
        let half = buf.add((r as usize % 2) * n as usize);
        let mut j = t;
        while j < n {
            shmem::p(half.add(me as usize), v, world_of(team, j));
            j += bs;
        }
        match form {
            0 => {
                shmem::quiet_block();
                if t == 0 {
                    shmem::barrier(team);
                }
                shmem::thread::sync_block();
            }
            1 => shmem::barrier_block(team),
            2 => {
                shmem::quiet_block();
                if t < 32 {
                    shmem::barrier_warp(team);
                }
                shmem::thread::sync_block();
            }
            3 => {
                shmem::quiet_block();
                shmem::team_sync_block(team);
            }
            4 => {
                shmem::quiet_block();
                if t == 0 {
                    shmem::team_sync(team);
                }
                shmem::thread::sync_block();
            }
            _ => {
                shmem::quiet_block();
                if t < 32 {
                    shmem::team_sync_warp(team);
                }
                shmem::thread::sync_block();
            }
        }
        let mut j = t;
        while j < n {
            if half.add(j as usize).read_volatile() != v {
                *errors += 1; // racy count is fine: any non-zero is a failure
            }
            j += bs;
        }
    }
}

/// The value world PE `pe` contributes at element `k` of iteration `i` of `team_alternate`.
#[inline(always)]
fn alt_value(i: u32, pe: u32, k: u32) -> u64 {
    (i as u64) << 32 | (pe as u64) << 12 | k as u64
}

/// Back-to-back collectives alternating between two (overlapping) teams:
/// iteration `i` uses team `ta` when `i` is even, `tb` when odd, and does
/// op `ops[(i / 2) % len]` of its form's list: 0 barrier, 1 fcollect, 2 sum
/// reduce, 3 broadcast from root `i % n` (all on u64, `elems` elements per
/// member). Members check the result (each thread its share); PEs outside
/// that iteration's team skip it. `form`: 0 thread (thread 0 calls; barrier,
/// reduce), 1 warp (warp 0; barrier, fcollect), 2 block (all four).
/// `errors[0]` counts wrong elements, `errors[1]` gets a failing iteration + 1.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "ptx-kernel" fn team_alternate(
    ta: u32,
    tb: u32,
    iters: u32,
    src: *mut u64,
    dst: *mut u64,
    elems: u32,
    form: u32,
    errors: *mut u32,
) {
    let t = _thread_idx_x() as u32;
    let (rank, size) = match form {
        0 => (0, 1),
        1 => (t, 32),
        _ => (t, _block_dim_x() as u32),
    };
    if rank >= size || (form == 0 && t != 0) {
        return; // not a caller in this form
    }
    let me_world = shmem::my_pe();
    for i in 0..iters {
        let team = Team(if i % 2 == 0 { ta } else { tb });
        if shmem::team_my_pe(team) < 0 {
            continue;
        }
        let n = shmem::team_n_pes(team) as u32;
        let op = match form {
            0 => 2 * ((i / 2) % 2),
            1 => (i / 2) % 2,
            _ => (i / 2) % 4,
        };
        let mut k = rank;
        while k < elems {
            *src.add(k as usize) = alt_value(i, me_world, k);
            k += size;
        }
        let e = elems as usize;
        let root = i.checked_rem(n).unwrap_or(0);
        match (op, form) {
            (0, 0) => shmem::barrier(team),
            (0, 1) => shmem::barrier_warp(team),
            (0, _) => shmem::barrier_block(team),
            (2, 0) => shmem::reduce(team, dst, src, e, ReduceOp::Sum),
            (1, 1) => shmem::fcollect_warp(team, dst, src, e),
            (1, 2) => shmem::fcollect_block(team, dst, src, e),
            (2, 2) => shmem::reduce_block(team, dst, src, e, ReduceOp::Sum),
            (3, 2) => shmem::broadcast_block(team, dst, src, e, root),
            _ => {}
        }
        let mut bad = 0u32;
        let mut k = rank;
        while k < elems {
            match op {
                1 => {
                    for m in 0..n {
                        if *dst.add((m * elems + k) as usize) != alt_value(i, world_of(team, m), k) {
                            bad += 1;
                        }
                    }
                }
                2 => {
                    let mut want = 0u64;
                    for m in 0..n {
                        want = want.wrapping_add(alt_value(i, world_of(team, m), k));
                    }
                    if *dst.add(k as usize) != want {
                        bad += 1;
                    }
                }
                3 if *dst.add(k as usize) != alt_value(i, world_of(team, root), k) => bad += 1,
                _ => {}
            }
            k += size;
        }
        if bad != 0 {
            *errors += bad; // racy: any non-zero is a failure
            *errors.add(1) = i + 1;
        }
    }
}
