//! Kernels of the team and collective tests (tests/gpu/team.rs, collective.rs):
//! what the device sees of the team table, per-team barrier rounds, back-to-back
//! collectives alternating between two overlapping teams, a batch of collective
//! cases per element type, and deliberate misuse (debug-check traps).
//!
//! Every kernel runs as one block; team handles arrive as `u32` and become
//! `shmem::Team(t)`. A PE that is not a member of the team a step names skips
//! that step (it must not call).

use core::arch::nvptx::*;
use gpushmem_kernels as shmem;
use shmem::{ReduceOp, Reducible, Team, TEAM_WORLD};

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
                shmem::ptx::sync_block();
            }
            1 => shmem::barrier_block(team),
            2 => {
                shmem::quiet_block();
                if t < 32 {
                    shmem::barrier_warp(team);
                }
                shmem::ptx::sync_block();
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
                shmem::ptx::sync_block();
            }
            _ => {
                shmem::quiet_block();
                if t < 32 {
                    shmem::team_sync_warp(team);
                }
                shmem::ptx::sync_block();
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
                3 => {
                    if *dst.add(k as usize) != alt_value(i, world_of(team, root), k) {
                        bad += 1;
                    }
                }
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

/// Words per case in the tables `coll_copy_batch` and `coll_reduce_batch_*` read.
pub const CASE_WORDS: usize = 7;

/// One case: `w[0..7]` = kind (0 broadcast, 1 fcollect, 2 alltoall, 3 reduce,
/// 4 reducescatter), form (0 thread: thread 0 calls; 1 warp: warp 0; 2 block),
/// team handle, root (broadcast) or `ReduceOp` code, element count, source
/// address, destination address. Returns the fields, or `None` when this
/// thread does not call (not a member of the team, or not in the form's group).
#[inline(always)]
unsafe fn case_fields(w: *const u64) -> Option<(u64, u64, Team, u32, usize, u64, u64)> {
    let (kind, form, team, arg, n) = (*w, *w.add(1), Team(*w.add(2) as u32), *w.add(3) as u32, *w.add(4) as usize);
    if shmem::team_my_pe(team) < 0 {
        return None; // not a member: must not call
    }
    let t = _thread_idx_x();
    let caller = match form {
        0 => t == 0,
        1 => t < 32,
        _ => true,
    };
    caller.then_some((kind, form, team, arg, n, *w.add(5), *w.add(6)))
}

/// Runs a table of copy cases (kinds 0-2, every form) in order, on bytes: the
/// element type of a copy collective only scales its byte count, so `n` is in
/// bytes here. Threads that do not call a case go on to the next one; the
/// next group call waits for them.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn coll_copy_batch(cases: *const u64, ncases: u32) {
    for c in 0..ncases as usize {
        let Some((kind, form, team, root, n, src, dst)) = case_fields(cases.add(c * CASE_WORDS)) else {
            continue;
        };
        let (src, dst) = (src as *const u8, dst as *mut u8);
        match (kind, form) {
            (0, 0) => shmem::broadcast(team, dst, src, n, root),
            (0, 1) => shmem::broadcast_warp(team, dst, src, n, root),
            (0, 2) => shmem::broadcast_block(team, dst, src, n, root),
            (1, 0) => shmem::fcollect(team, dst, src, n),
            (1, 1) => shmem::fcollect_warp(team, dst, src, n),
            (1, 2) => shmem::fcollect_block(team, dst, src, n),
            (2, 0) => shmem::alltoall(team, dst, src, n),
            (2, 1) => shmem::alltoall_warp(team, dst, src, n),
            (2, 2) => shmem::alltoall_block(team, dst, src, n),
            _ => {} // never asked: the destination stays poisoned and the host reports it
        }
    }
}

/// Bit of `(kind, form)` in a `FORMS` mask of [`coll_reduce_batch`]: kinds 3 (reduce) and 4 (reducescatter).
pub const fn form_bit(kind: u64, form: u64) -> u32 {
    1 << ((kind - 3) * 3 + form)
}

/// Runs a table of reduction cases (kinds 3, 4) on `T` in order. Only the
/// (kind, form) pairs in `FORMS` are compiled in (each one inlines a whole
/// collective; all of them for all twelve types would make the module slow
/// to JIT-load); the host asks for exactly those (tests/gpu/collective.rs).
#[inline(always)]
unsafe fn coll_reduce_batch<T: Reducible, const FORMS: u32>(cases: *const u64, ncases: u32) {
    for c in 0..ncases as usize {
        let Some((kind, form, team, op, n, src, dst)) = case_fields(cases.add(c * CASE_WORDS)) else {
            continue;
        };
        let (src, dst) = (src as *const T, dst as *mut T);
        let op = ReduceOp::from_u32(op).unwrap_or(ReduceOp::Sum);
        let has = |k: u64, f: u64| kind == k && form == f && FORMS & form_bit(k, f) != 0;
        if has(3, 0) {
            shmem::reduce(team, dst, src, n, op)
        } else if has(3, 1) {
            shmem::reduce_warp(team, dst, src, n, op)
        } else if has(3, 2) {
            shmem::reduce_block(team, dst, src, n, op)
        } else if has(4, 0) {
            shmem::reducescatter(team, dst, src, n, op)
        } else if has(4, 1) {
            shmem::reducescatter_warp(team, dst, src, n, op)
        } else if has(4, 2) {
            shmem::reducescatter_block(team, dst, src, n, op)
        }
    }
}

/// Block forms of both reductions.
const BLOCK: u32 = form_bit(3, 2) | form_bit(4, 2);

macro_rules! reduce_kernels {
    ($($name:ident: $t:ty, $forms:expr;)*) => {$(
        /// [`coll_reduce_batch`] for one element type.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(cases: *const u64, ncases: u32) {
            coll_reduce_batch::<$t, { $forms }>(cases, ncases)
        }
    )*};
}

// Every type: both block forms. The thread and warp forms on a few types each
// (they differ from the block form only in the group); keep in step with
// `REDUCE_TYPES` in tests/gpu/collective.rs.
reduce_kernels!(
    coll_reduce_batch_u8: u8, BLOCK | form_bit(3, 0);
    coll_reduce_batch_i8: i8, BLOCK | form_bit(4, 1);
    coll_reduce_batch_u16: u16, BLOCK;
    coll_reduce_batch_i16: i16, BLOCK | form_bit(3, 1);
    coll_reduce_batch_u32: u32, BLOCK | form_bit(3, 1) | form_bit(4, 0);
    coll_reduce_batch_i32: i32, BLOCK;
    coll_reduce_batch_u64: u64, BLOCK;
    coll_reduce_batch_i64: i64, BLOCK | form_bit(3, 0);
    coll_reduce_batch_f32: f32, BLOCK | form_bit(3, 0) | form_bit(4, 1);
    coll_reduce_batch_f64: f64, BLOCK | form_bit(3, 1);
    coll_reduce_batch_f16: shmem::F16, BLOCK | form_bit(3, 0);
    coll_reduce_batch_bf16: shmem::Bf16, BLOCK | form_bit(3, 1) | form_bit(4, 0);
);

/// Misuse that debug checks must trap on (thread 0 only): `what` 0
/// `barrier(Team(team))`; 1 `reduce` with `And` on f32 (`dest = buf + n`);
/// 2 `reduce` (sum) on `team` whose dest `buf + 1` overlaps its source `buf`.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn coll_misuse(what: u32, team: u32, buf: *mut f32, n: u64) {
    if _thread_idx_x() != 0 {
        return;
    }
    let n = n as usize;
    match what {
        0 => shmem::barrier(Team(team)),
        1 => shmem::reduce(TEAM_WORLD, buf.add(n), buf, n, ReduceOp::And),
        2 => shmem::reduce(Team(team), buf.add(1), buf, n, ReduceOp::Sum),
        _ => {}
    }
}
