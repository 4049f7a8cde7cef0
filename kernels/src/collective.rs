//! Device collectives over a team, in thread, `_warp` and `_block` forms
//! (every thread of the group calls; one group per member PE).
//!
//! The arguments are checked here (membership always; root, overlap and a
//! bitwise operator on floats with debug checks on), then the engine runs
//! the collective:
//!
//! - **native**: sync, then pull over loads and stores, then sync (see the
//!   engine's `native_collective`): reductions combine in member order, so
//!   every member gets the bitwise-same result, floats included, equal to a
//!   sequential fold over members 0, 1, ….
//! - **NVSHMEM** (feature `nvshmem`): NVSHMEM's function of the same name and
//!   group (`nvshmem_broadcastmem`, `nvshmemx_fcollectmem_block`,
//!   `nvshmem_float_sum_reduce`, `nvshmemx_bfloat16_max_reducescatter_warp`,
//!   …) on the team's NVSHMEM handle. Integer results are the same as
//!   native; for floating-point reductions the order of combination is
//!   NVSHMEM's, so results may differ from native in the last bits (NVSHMEM
//!   does not promise any particular order).
//!
//! Guarantees on return: `dest` holds the result for every thread of the
//! group; `source` may be reused. `dest` must not overlap `source` (debug
//! checks trap if it does). `root` and all PE numbers are team-relative.

use crate::debug;
use crate::engine;
use crate::group::Group;
use crate::reduce::{ReduceOp, Reducible};
use crate::team::{member_desc, Team};
use core::ffi::CStr;

#[inline(always)]
fn check_no_overlap(dest: *const u8, db: usize, src: *const u8, sb: usize, call: &CStr) {
    if debug::checks_on() {
        let (d, s) = (dest as usize, src as usize);
        if d < s + sb && s < d + db {
            debug::fail(
                c"gpushmem: %s: dest 0x%llx overlaps source 0x%llx\n",
                &[call.as_ptr() as u64, d as u64, s as u64],
            );
        }
    }
}

/// Checks the arguments, then the engine's `broadcast` of `bytes` bytes from member `root`.
///
/// # Safety
/// `dest` and `src` are symmetric ranges of `bytes` bytes that do not overlap; every
/// member calls with the same arguments and every thread of `g` calls.
#[inline(always)]
unsafe fn broadcast_g(team: Team, dest: *mut u8, src: *const u8, bytes: usize, root: u32, g: Group, call: &CStr) {
    let d = member_desc(team, call);
    check_no_overlap(dest, bytes, src, bytes, call);
    if debug::checks_on() && root >= d.size {
        debug::fail(
            c"gpushmem: %s: root %llu is not a member number of a team of %llu\n",
            &[call.as_ptr() as u64, root as u64, d.size as u64],
        );
    }
    // SAFETY: the caller upholds this function's contract, which is the engine's `broadcast`'s;
    // `d` is the team's descriptor and this PE a member (`member_desc` traps otherwise).
    unsafe { engine::broadcast(team, &d, dest, src, bytes, root, g, call) };
}

/// Checks the arguments, then the engine's `fcollect` of `bytes` bytes per member.
///
/// # Safety
/// `dest` is a symmetric range of `bytes * team size` bytes, `src` one of `bytes` bytes, not
/// overlapping; every member calls with the same arguments and every thread of `g` calls.
#[inline(always)]
unsafe fn fcollect_g(team: Team, dest: *mut u8, src: *const u8, bytes: usize, g: Group, call: &CStr) {
    let d = member_desc(team, call);
    check_no_overlap(dest, bytes * d.size as usize, src, bytes, call);
    // SAFETY: the caller upholds this function's contract, which is the engine's `fcollect`'s;
    // `d` is the team's descriptor and this PE a member (`member_desc` traps otherwise).
    unsafe { engine::fcollect(team, &d, dest, src, bytes, g, call) };
}

/// Checks the arguments, then the engine's `alltoall` of `bytes` bytes per pair of members.
///
/// # Safety
/// `dest` and `src` are symmetric ranges of `bytes * team size` bytes that do not overlap;
/// every member calls with the same arguments and every thread of `g` calls.
#[inline(always)]
unsafe fn alltoall_g(team: Team, dest: *mut u8, src: *const u8, bytes: usize, g: Group, call: &CStr) {
    let d = member_desc(team, call);
    let n = d.size as usize;
    check_no_overlap(dest, bytes * n, src, bytes * n, call);
    // SAFETY: the caller upholds this function's contract, which is the engine's `alltoall`'s;
    // `d` is the team's descriptor and this PE a member (`member_desc` traps otherwise).
    unsafe { engine::alltoall(team, &d, dest, src, bytes, g, call) };
}

#[inline(always)]
fn check_op<T: Reducible>(op: ReduceOp, call: &CStr) {
    if op.is_bitwise() && !T::INTEGER {
        debug::fail(c"gpushmem: %s: and/or/xor reductions need an integer type\n", &[call.as_ptr() as u64]);
    }
}

/// Checks the arguments, then the engine's `reduce` of `n` elements.
///
/// # Safety
/// `dest` and `src` are symmetric ranges of `n` `T`s that do not overlap; every member
/// calls with the same arguments and every thread of `g` calls.
#[inline(always)]
unsafe fn reduce_g<T: Reducible>(
    team: Team,
    dest: *mut T,
    src: *const T,
    n: usize,
    op: ReduceOp,
    g: Group,
    call: &CStr,
) {
    let d = member_desc(team, call);
    check_op::<T>(op, call);
    let bytes = n * core::mem::size_of::<T>();
    check_no_overlap(dest.cast(), bytes, src.cast(), bytes, call);
    // SAFETY: the caller upholds this function's contract, which is the engine's `reduce`'s;
    // `d` is the team's descriptor and this PE a member (`member_desc` traps otherwise).
    unsafe { engine::reduce(team, &d, dest, src, n, op, g, call) };
}

/// Checks the arguments, then the engine's `reducescatter` of `n` elements per member.
///
/// # Safety
/// `dest` is a symmetric range of `n` `T`s, `src` one of `n * team size`, not overlapping;
/// every member calls with the same arguments and every thread of `g` calls.
#[inline(always)]
unsafe fn reducescatter_g<T: Reducible>(
    team: Team,
    dest: *mut T,
    src: *const T,
    n: usize,
    op: ReduceOp,
    g: Group,
    call: &CStr,
) {
    let d = member_desc(team, call);
    check_op::<T>(op, call);
    let bytes = n * core::mem::size_of::<T>();
    check_no_overlap(dest.cast(), bytes, src.cast(), bytes * d.size as usize, call);
    // SAFETY: the caller upholds this function's contract, which is the engine's `reducescatter`'s;
    // `d` is the team's descriptor and this PE a member (`member_desc` traps otherwise).
    unsafe { engine::reducescatter(team, &d, dest, src, n, op, g, call) };
}

macro_rules! collective_forms {
    ($(#[$attr:meta])* $group:ident, $suffix:literal, $broadcast:ident, $fcollect:ident, $alltoall:ident, $reduce:ident, $reducescatter:ident) => {
        #[doc = concat!("Copies `nelems` elements of `source` on team member `root` into `dest` on every member, root included (`nvshmem", $suffix, "broadcast`).")]
        ///
        /// # Safety
        /// `dest`, `source` symmetric, `nelems` elements each, not overlapping; every member calls with the same arguments.
        $(#[$attr])*
        #[inline(always)]
        pub unsafe fn $broadcast<T: bytemuck::Pod>(team: Team, dest: *mut T, source: *const T, nelems: usize, root: u32) {
            const NAME: &str = concat!(stringify!($broadcast), "\0");
            // SAFETY: NAME ends with its only NUL.
            let call = unsafe { CStr::from_bytes_with_nul_unchecked(NAME.as_bytes()) };
            // SAFETY: the caller upholds this function's contract, which is `broadcast_g`'s for this group.
            unsafe { broadcast_g(team, dest.cast(), source.cast(), nelems * core::mem::size_of::<T>(), root, Group::$group(), call) }
        }

        #[doc = concat!("All-gather: member `k`'s `nelems` elements of `source` land at `dest[k * nelems..]` on every member (`nvshmem", $suffix, "fcollect`).")]
        ///
        /// # Safety
        /// `dest` symmetric with `n_pes * nelems` elements, `source` symmetric with `nelems`; not overlapping.
        $(#[$attr])*
        #[inline(always)]
        pub unsafe fn $fcollect<T: bytemuck::Pod>(team: Team, dest: *mut T, source: *const T, nelems: usize) {
            const NAME: &str = concat!(stringify!($fcollect), "\0");
            // SAFETY: NAME ends with its only NUL.
            let call = unsafe { CStr::from_bytes_with_nul_unchecked(NAME.as_bytes()) };
            // SAFETY: the caller upholds this function's contract, which is `fcollect_g`'s for this group.
            unsafe { fcollect_g(team, dest.cast(), source.cast(), nelems * core::mem::size_of::<T>(), Group::$group(), call) }
        }

        #[doc = concat!("All-to-all: block `j` (of `nelems`) of member `i`'s `source` lands at block `i` of member `j`'s `dest` (`nvshmem", $suffix, "alltoall`).")]
        ///
        /// # Safety
        /// `dest` and `source` symmetric with `n_pes * nelems` elements each; not overlapping.
        $(#[$attr])*
        #[inline(always)]
        pub unsafe fn $alltoall<T: bytemuck::Pod>(team: Team, dest: *mut T, source: *const T, nelems: usize) {
            const NAME: &str = concat!(stringify!($alltoall), "\0");
            // SAFETY: NAME ends with its only NUL.
            let call = unsafe { CStr::from_bytes_with_nul_unchecked(NAME.as_bytes()) };
            // SAFETY: the caller upholds this function's contract, which is `alltoall_g`'s for this group.
            unsafe { alltoall_g(team, dest.cast(), source.cast(), nelems * core::mem::size_of::<T>(), Group::$group(), call) }
        }

        #[doc = concat!("All-reduce: `dest[i] = op` over every member's `source[i]`, the same bits on every member (`nvshmem", $suffix, "<op>_reduce`).")]
        ///
        /// # Safety
        /// `dest`, `source` symmetric with `nreduce` elements each, not overlapping; bitwise `op` only on integers.
        $(#[$attr])*
        #[inline(always)]
        pub unsafe fn $reduce<T: Reducible>(team: Team, dest: *mut T, source: *const T, nreduce: usize, op: ReduceOp) {
            const NAME: &str = concat!(stringify!($reduce), "\0");
            // SAFETY: NAME ends with its only NUL.
            let call = unsafe { CStr::from_bytes_with_nul_unchecked(NAME.as_bytes()) };
            // SAFETY: the caller upholds this function's contract, which is `reduce_g`'s for this group.
            unsafe { reduce_g(team, dest, source, nreduce, op, Group::$group(), call) }
        }

        #[doc = concat!("Reduce-scatter: member `k` gets `dest[i] = op` over every member's `source[k * nreduce + i]` (`nvshmem", $suffix, "<op>_reducescatter`).")]
        ///
        /// # Safety
        /// `dest` symmetric with `nreduce` elements, `source` symmetric with `n_pes * nreduce`; not overlapping.
        $(#[$attr])*
        #[inline(always)]
        pub unsafe fn $reducescatter<T: Reducible>(team: Team, dest: *mut T, source: *const T, nreduce: usize, op: ReduceOp) {
            const NAME: &str = concat!(stringify!($reducescatter), "\0");
            // SAFETY: NAME ends with its only NUL.
            let call = unsafe { CStr::from_bytes_with_nul_unchecked(NAME.as_bytes()) };
            // SAFETY: the caller upholds this function's contract, which is `reducescatter_g`'s for this group.
            unsafe { reducescatter_g(team, dest, source, nreduce, op, Group::$group(), call) }
        }
    };
}

collective_forms!(thread, "_", broadcast, fcollect, alltoall, reduce, reducescatter);
collective_forms!(warp, "x_*_warp/", broadcast_warp, fcollect_warp, alltoall_warp, reduce_warp, reducescatter_warp);
collective_forms!(
    block,
    "x_*_block/",
    broadcast_block,
    fcollect_block,
    alltoall_block,
    reduce_block,
    reducescatter_block
);
collective_forms!(
    ///
    /// **Grid form** (native engine only; no NVSHMEM counterpart): every thread
    /// of every block of the grid calls, and the data movement is split over
    /// all of them. The kernel must be launched collectively (`Shmem::launch_collective`)
    /// with a grid that fits at once (`Shmem::collective_launch_query_gridsize`):
    /// blocks that are not resident never arrive, and the call traps with the
    /// wait-timeout message. At most one grid-scope call per team runs at a
    /// time on a PE. Orders like the `_block` form (see [`crate::sync::barrier_all_grid`]).
    #[cfg(not(feature = "nvshmem"))]
    grid,
    "x_*_block/",
    broadcast_grid,
    fcollect_grid,
    alltoall_grid,
    reduce_grid,
    reducescatter_grid
);
