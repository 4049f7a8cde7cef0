//! Kernels of the collective tests (tests/gpu/collective.rs): a batch of
//! collective cases per element type, and deliberate misuse (debug-check traps).
//!
//! Every kernel runs as one block; team handles arrive as `u32` and become
//! `shmem::Team(t)`. A PE that is not a member of the team a step names skips
//! that step (it must not call).

use core::arch::nvptx::*;
use gpushmem_kernels as shmem;
use shmem::{ReduceOp, Reducible, Team, TEAM_WORLD};

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
        // An unknown code calls nothing: the destination stays poisoned and the host reports it.
        let Some(op) = ReduceOp::from_u32(op) else { continue };
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

// On the NVSHMEM engine every type, operator and form inlines one of
// NVSHMEM's collectives (about 0.35-0.8 MB of PTX each): all of them made 77 MB
// of PTX that ptxas did not finish in 20 minutes, and the quick matrix's three
// types with their extra forms 32 MB that it had not finished after 5. There
// the quick matrix runs u32 (block forms) and f32 (block forms and the thread
// reduce): `NVSHMEM_REDUCE_TYPES` in tests/gpu/collective.rs.
#[cfg(gpushmem_nvshmem)]
reduce_kernels!(
    coll_reduce_batch_u32: u32, BLOCK;
    coll_reduce_batch_f32: f32, BLOCK | form_bit(3, 0);
);

// Every type: both block forms. The thread and warp forms on a few types each
// (they differ from the block form only in the group); keep in step with
// `REDUCE_TYPES` in tests/gpu/collective.rs. Native engine only (above).
#[cfg(not(gpushmem_nvshmem))]
reduce_kernels!(
    coll_reduce_batch_u32: u32, BLOCK | form_bit(3, 1) | form_bit(4, 0);
    coll_reduce_batch_f32: f32, BLOCK | form_bit(3, 0) | form_bit(4, 1);
    coll_reduce_batch_bf16: shmem::Bf16, BLOCK | form_bit(3, 1) | form_bit(4, 0);
    coll_reduce_batch_u8: u8, BLOCK | form_bit(3, 0);
    coll_reduce_batch_i8: i8, BLOCK | form_bit(4, 1);
    coll_reduce_batch_u16: u16, BLOCK;
    coll_reduce_batch_i16: i16, BLOCK | form_bit(3, 1);
    coll_reduce_batch_i32: i32, BLOCK;
    coll_reduce_batch_u64: u64, BLOCK;
    coll_reduce_batch_i64: i64, BLOCK | form_bit(3, 0);
    coll_reduce_batch_f64: f64, BLOCK | form_bit(3, 1);
    coll_reduce_batch_f16: shmem::F16, BLOCK | form_bit(3, 0);
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

/// The `_grid` forms on the world team, every block of a collectively
/// launched grid calling (tests/gpu/collective.rs `grid_forms`). `n` f32
/// elements per PE in `src` (symmetric, `n * n_pes` long so alltoall and
/// reducescatter have their blocks); `out` (symmetric) receives, in order,
/// each result followed by `gap` elements it must leave alone (the host's
/// guards): broadcast from the last PE (`n`), fcollect of the first `k = n /
/// n_pes` (`k * n_pes`), alltoall of blocks of `k` (`k * n_pes`), the f32 sum
/// reduce (`n`), the u32 wrapping-sum reduce of the same bits (`n`), the f32
/// max reducescatter (`k`). Then a barrier check: each block's thread 0 stores
/// `round` into its word of the next PE's `marks` (one per block, `p`), all
/// blocks pass `barrier_all_grid`, and each block's thread 0 checks its
/// own word from the previous PE: `errors[0]` counts misses (the barrier did
/// not complete or order the other PE's stores).
#[cfg(not(gpushmem_nvshmem))]
#[no_mangle]
pub unsafe extern "ptx-kernel" fn coll_grid_forms(
    src: *const f32,
    out: *mut f32,
    n: u64,
    gap: u64,
    marks: *mut u32,
    round: u32,
    errors: *mut u32,
) {
    let (me, npes) = (shmem::my_pe(), shmem::n_pes());
    let n = n as usize;
    let (k, gap) = (n / npes as usize, gap as usize);
    let mut o = out;
    shmem::broadcast_grid(TEAM_WORLD, o, src, n, npes - 1);
    o = o.add(n + gap);
    shmem::fcollect_grid(TEAM_WORLD, o, src, k);
    o = o.add(k * npes as usize + gap);
    shmem::alltoall_grid(TEAM_WORLD, o, src, k);
    o = o.add(k * npes as usize + gap);
    shmem::reduce_grid(TEAM_WORLD, o, src, n, ReduceOp::Sum);
    o = o.add(n + gap);
    shmem::reduce_grid(TEAM_WORLD, o as *mut u32, src as *const u32, n, ReduceOp::Sum);
    o = o.add(n + gap);
    shmem::reducescatter_grid(TEAM_WORLD, o, src, k, ReduceOp::Max);
    // Barrier check: every block of every PE.
    let b = _block_idx_x() as usize;
    if _thread_idx_x() == 0 {
        shmem::p(marks.add(b), round, (me + 1) % npes);
    }
    shmem::barrier_all_grid();
    if _thread_idx_x() == 0 && core::ptr::read_volatile(marks.add(b)) != round {
        shmem::atomic_add(errors, 1u32, me);
    }
    shmem::sync_all_grid();
}
