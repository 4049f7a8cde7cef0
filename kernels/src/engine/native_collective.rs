//! The native engine's device collectives: **sync, then pull, then sync**.
//! The first team sync makes sure every member has entered (its source
//! written, its destination free); each member then *reads* what it needs
//! straight from the other members' source buffers with vector loads (no
//! staging, no extra copies); the closing sync makes sure nobody reuses a
//! source that another member is still reading. Cost per call: two team
//! syncs (each one NVLink latency) plus the data: broadcast reads `nbytes`
//! from the root; fcollect/alltoall read `(n-1)·nbytes`; reduce reads
//! `n·nbytes` and combines in a fixed member order, so every member gets the
//! bitwise-same result (floats included), or from 256 KiB on runs two-shot
//! (each member combines its `1/n` chunk, a third sync, then copies the
//! others' chunks: about `2·nbytes` read per member, same bits);
//! reducescatter reads `n·nbytes/n` per member's share. With a grid group
//! (the `_grid` forms) every block of the grid shares the data movement.
//!
//! The arguments were checked by [`crate::collective`] (membership, root,
//! overlap, operator); `d` is this PE's view of `team`. With debug checks on,
//! [`enter`] also compares each member's arguments with the next member's.

use super::native::{peer_address, remote, team_sync_group};
use crate::abi::{sync_area, TeamDesc, REDUCE_TWO_SHOT_MIN_BYTES};
use crate::copy::copy_bytes;
use crate::group::Group;
use crate::reduce::{ReduceOp, Reducible};
use crate::state::state;
use crate::team::Team;
use crate::{debug, ptx, wait};
use core::ffi::CStr;

/// Which collective a member is in, as [`Args`] records it.
#[derive(Clone, Copy)]
#[repr(u64)]
enum Kind {
    Broadcast = 1,
    Fcollect = 2,
    Alltoall = 3,
    Reduce = 4,
    Reducescatter = 5,
}

/// The names [`enter`]'s message gives the kinds (index = `Kind as usize`).
const KIND_NAMES: [&CStr; 6] = [c"?", c"broadcast", c"fcollect", c"alltoall", c"reduce", c"reducescatter"];

/// What a member passed to a collective: what every member must pass alike.
#[derive(Clone, Copy)]
struct Args {
    kind: Kind,
    /// The size the call was given, in bytes (per member's block for fcollect/alltoall).
    bytes: usize,
    /// The operator of a reduction (0 otherwise).
    op: u32,
    /// The root of a broadcast (0 otherwise).
    root: u32,
}

impl Args {
    /// The two words of [`sync_area::COLL_ARGS`].
    #[inline(always)]
    fn words(self) -> [u64; 2] {
        [self.bytes as u64, (self.kind as u64) << 56 | (self.op as u64) << 32 | self.root as u64]
    }
}

/// The first team sync of every native collective. With debug checks on, the
/// group's leader first publishes this member's [`Args`] in its team slot
/// (then a release store of its collective count), and after the sync waits
/// (bounded) until the next member has published the same collective, then
/// compares: members whose sizes, operator, root or collective (broadcast,
/// fcollect, alltoall, reduce, reducescatter) differ trap with both sets
/// named, instead of a wrong result or a sync that times out. Only the leader
/// compares: the group's other threads may meanwhile start the data movement
/// with their own sizes (loads within the heap; the kernel then traps).
/// Comparing each member with the next covers the team: if any two differ,
/// some neighbouring pair does. The next member cannot publish its following
/// collective before this one's closing sync, which this member reaches only
/// after the comparison.
///
/// # Safety
/// `d` is `team`'s descriptor on this PE, a member (as [`crate::team::member_desc`]
/// returns it); every thread of `g` calls.
#[inline(always)]
unsafe fn enter(team: Team, d: &TeamDesc, g: Group, args: Args, call: &CStr) {
    let check = debug::checks_on() && d.size > 1;
    let slot = state().heap_base + TeamDesc::slot_offset(team.0);
    let (seq_ptr, args_ptr) = ((slot + sync_area::COLL_SEQ) as *mut u64, (slot + sync_area::COLL_ARGS) as *mut u64);
    let mine = args.words();
    let mut seq = 0;
    if check && g.is_leader() {
        // SAFETY: this PE's slot of `team`; the words are written only here, by one leader at a time.
        unsafe {
            seq = seq_ptr.read_volatile() + 1;
            args_ptr.write_volatile(mine[0]);
            args_ptr.add(1).write_volatile(mine[1]);
            ptx::st_release_sys_u64(seq_ptr, seq);
        }
    }
    team_sync_group(team, g, false, call);
    if check && g.is_leader() {
        let next = d.world_pe((d.my_index + 1) % d.size);
        // SAFETY: the same slot on the next member, mapped like the rest of its heap (the
        // sync above reached it, so it is reachable); the wait acquires before the reads.
        let theirs = unsafe {
            let (seq_at, args_at) = (peer_address(seq_ptr, next), peer_address(args_ptr, next));
            wait::wait_counter_reaches(seq_at, seq, call);
            [args_at.read_volatile(), args_at.add(1).read_volatile()]
        };
        if theirs != mine {
            let field = |w: [u64; 2]| [w[1] >> 56, w[0], w[1] >> 32 & 0xff, w[1] & 0xffff_ffff];
            let name = |k: u64| KIND_NAMES.get(k as usize).unwrap_or(&KIND_NAMES[0]).as_ptr() as u64;
            let ([k0, b0, o0, r0], [k1, b1, o1, r1]) = (field(mine), field(theirs));
            debug::fail(
                c"gpushmem: %s: the team's members passed different arguments: \
                  PE %llu: %s of %llu bytes (op %llu, root %llu); PE %llu: %s of %llu bytes (op %llu, root %llu). \
                  Every member must make the same collective call with the same sizes, operator and root\n",
                &[call.as_ptr() as u64, state().my_pe as u64, name(k0), b0, o0, r0, next as u64, name(k1), b1, o1, r1],
            );
        }
    }
}

/// `bytes` of `src` on member `root` into `dest` on every member.
///
/// # Safety
/// As the [`crate::collective`] call it serves: `dest` and `src` are symmetric ranges of `bytes`
/// bytes that do not overlap; `root < d.size`; `d` is `team`'s descriptor on this
/// PE, a member; every member calls with the same arguments and every thread of `g` calls.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn broadcast(
    team: Team,
    d: &TeamDesc,
    dest: *mut u8,
    src: *const u8,
    bytes: usize,
    root: u32,
    g: Group,
    call: &CStr,
) {
    // SAFETY: `d` is `team`'s member descriptor and every thread of `g` calls (this fn's
    // contract); `src` is a symmetric range of `bytes` on member `root`, so `remote` gives
    // the root's copy, and `dest` is a local range of `bytes` disjoint from it.
    unsafe {
        enter(team, d, g, Args { kind: Kind::Broadcast, bytes, op: 0, root }, call);
        copy_bytes(dest, remote(src, bytes, d.world_pe(root), call), bytes, g);
    }
    team_sync_group(team, g, false, call);
}

/// Member `m`'s `bytes` of `src` at `dest + m * bytes` on every member.
///
/// # Safety
/// As the [`crate::collective`] call it serves: `dest` is a symmetric range of `d.size * bytes`
/// bytes, `src` one of `bytes`, not overlapping; `d` is `team`'s descriptor on this
/// PE, a member; every member calls with the same arguments and every thread of `g` calls.
#[inline(always)]
pub(crate) unsafe fn fcollect(
    team: Team,
    d: &TeamDesc,
    dest: *mut u8,
    src: *const u8,
    bytes: usize,
    g: Group,
    call: &CStr,
) {
    // SAFETY: `d` is `team`'s member descriptor and every thread of `g` calls (this fn's contract).
    unsafe { enter(team, d, g, Args { kind: Kind::Fcollect, bytes, op: 0, root: 0 }, call) };
    for k in 0..d.size {
        // Start at the next member so the members do not all read the same one first.
        let m = (d.my_index + 1 + k) % d.size;
        // SAFETY: `m < d.size`, so block `m` of `dest` (`d.size * bytes` bytes) is in range;
        // `src` is a symmetric range of `bytes`, read on member `m`; the two do not overlap.
        unsafe { copy_bytes(dest.add(m as usize * bytes), remote(src, bytes, d.world_pe(m), call), bytes, g) };
    }
    team_sync_group(team, g, false, call);
}

/// Block `j` (of `bytes`) of member `i`'s `src` at block `i` of member `j`'s `dest`.
///
/// # Safety
/// As the [`crate::collective`] call it serves: `dest` and `src` are symmetric ranges of
/// `d.size * bytes` bytes that do not overlap; `d` is `team`'s descriptor on this
/// PE, a member; every member calls with the same arguments and every thread of `g` calls.
#[inline(always)]
pub(crate) unsafe fn alltoall(
    team: Team,
    d: &TeamDesc,
    dest: *mut u8,
    src: *const u8,
    bytes: usize,
    g: Group,
    call: &CStr,
) {
    // SAFETY: `d` is `team`'s member descriptor and every thread of `g` calls (this fn's contract).
    unsafe { enter(team, d, g, Args { kind: Kind::Alltoall, bytes, op: 0, root: 0 }, call) };
    for k in 0..d.size {
        let m = (d.my_index + 1 + k) % d.size;
        // SAFETY: `my_index` and `m` are below `d.size`, so block `my_index` of `src` and block
        // `m` of `dest` (each of `d.size * bytes` bytes, disjoint: this fn's contract) are in range.
        let theirs = unsafe { src.add(d.my_index as usize * bytes) };
        // SAFETY: as above; `theirs` is in the symmetric `src`, read on member `m`.
        unsafe { copy_bytes(dest.add(m as usize * bytes), remote(theirs, bytes, d.world_pe(m), call), bytes, g) };
    }
    team_sync_group(team, g, false, call);
}

/// `dest[i] = op` over every member's `src[i]`, in member order: one-shot
/// (every member combines all of it) below [`REDUCE_TWO_SHOT_MIN_BYTES`], two-shot
/// from there.
///
/// # Safety
/// As the [`crate::collective`] call it serves: `dest` and `src` are symmetric ranges of `n` `T`s
/// that do not overlap; `d` is `team`'s descriptor on this
/// PE, a member; every member calls with the same arguments and every thread of `g` calls.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn reduce<T: Reducible>(
    team: Team,
    d: &TeamDesc,
    dest: *mut T,
    src: *const T,
    n: usize,
    op: ReduceOp,
    g: Group,
    call: &CStr,
) {
    let size = core::mem::size_of::<T>();
    // SAFETY: `d` is `team`'s member descriptor and every thread of `g` calls (this fn's contract).
    unsafe { enter(team, d, g, Args { kind: Kind::Reduce, bytes: n * size, op: op as u32, root: 0 }, call) };
    if n * size < REDUCE_TWO_SHOT_MIN_BYTES || d.size == 1 {
        // SAFETY: `dest` and `src` are disjoint symmetric ranges of `n` `T`s (this fn's contract).
        unsafe { combine(d, dest, src, n, op, g, call) };
        team_sync_group(team, g, false, call);
        return;
    }
    // Two-shot: reduce-scatter into our own `dest` chunk, then all-gather the
    // others' chunks from their `dest`. Each chunk is combined once, by its
    // owner, in member order: the same bits as the one-shot above.
    let chunk = |m: u32| {
        let per = n.div_ceil(d.size as usize).next_multiple_of(16 / size);
        let lo = (m as usize * per).min(n);
        (lo, (lo + per).min(n) - lo)
    };
    let (lo, len) = chunk(d.my_index);
    // SAFETY: `chunk` keeps `lo + len <= n`, so both subranges are in the disjoint symmetric
    // ranges of `n` `T`s (this fn's contract).
    unsafe { combine(d, dest.add(lo), src.add(lo), len, op, g, call) };
    team_sync_group(team, g, false, call);
    for k in 1..d.size {
        let m = (d.my_index + k) % d.size;
        let (lo, len) = chunk(m);
        // SAFETY: `lo + len <= n`: chunk `m` of the symmetric `dest`.
        let (mine, bytes) = (unsafe { dest.add(lo) } as *mut u8, len * size);
        // SAFETY: `mine` is a symmetric range of `bytes`; its copy on member `m` (another
        // PE, `k >= 1`) is a different buffer, so source and destination do not overlap.
        unsafe { copy_bytes(mine, remote(mine, bytes, d.world_pe(m), call), bytes, g) };
    }
    team_sync_group(team, g, false, call);
}

/// Member `k`: `dest[i] = op` over every member's `src[k * n + i]`.
///
/// # Safety
/// As the [`crate::collective`] call it serves: `dest` is a symmetric range of `n` `T`s, `src` one of
/// `d.size * n`, not overlapping; `d` is `team`'s descriptor on this
/// PE, a member; every member calls with the same arguments and every thread of `g` calls.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn reducescatter<T: Reducible>(
    team: Team,
    d: &TeamDesc,
    dest: *mut T,
    src: *const T,
    n: usize,
    op: ReduceOp,
    g: Group,
    call: &CStr,
) {
    let bytes = n * core::mem::size_of::<T>();
    // SAFETY: `d` is `team`'s member descriptor and every thread of `g` calls; `my_index <
    // d.size`, so block `my_index` of `src` (`d.size * n` `T`s) is `n` `T`s in range, disjoint
    // from `dest` (this fn's contract).
    unsafe {
        enter(team, d, g, Args { kind: Kind::Reducescatter, bytes, op: op as u32, root: 0 }, call);
        combine(d, dest, src.add(d.my_index as usize * n), n, op, g, call);
    }
    team_sync_group(team, g, false, call);
}

/// Members combined per pass over `dest`: their addresses stay in registers
/// and one load from each is in flight before the first combine.
const BATCH: usize = 8;

/// 16 bytes of elements, aligned so that any element type can be viewed in it.
#[derive(Clone, Copy)]
#[repr(C, align(16))]
struct Unit([u32; 4]);

impl Unit {
    /// The same 16 bytes as two 8-byte words (what [`Reducible::apply_16`] takes).
    #[inline(always)]
    fn words(&mut self) -> &mut [u64; 2] {
        // SAFETY: same size, and `Unit`'s 16-byte alignment covers `u64`'s.
        unsafe { &mut *(self.0.as_mut_ptr() as *mut [u64; 2]) }
    }
}

/// `dest[i] = op over members m (in order) of m's src[i]`, for `i` in `0..n`, split over `g`.
///
/// Element-outer in batches of [`BATCH`] members: each thread loads one unit
/// (16 bytes when `dest` and `src` are 16-byte aligned, else one element) from
/// every member of the batch, folds them in member order and stores once; a
/// team larger than the batch takes further passes that fold `dest` with the
/// next members. Memory traffic is `n` reads per member plus one write (and
/// one re-read per extra pass). The order (member 0, 1, …) and per-step
/// rounding are the same on every member, so results are bitwise identical.
///
/// # Safety
/// `dest` is valid global memory of `n` `T`s; `src` is a symmetric range of `n` `T`s on every
/// member of `d` (this PE a member), not overlapping `dest`; every thread of `g` calls.
#[inline(always)]
unsafe fn combine<T: Reducible>(
    d: &TeamDesc,
    dest: *mut T,
    src: *const T,
    n: usize,
    op: ReduceOp,
    g: Group,
    call: &CStr,
) {
    let size = core::mem::size_of::<T>();
    let bytes = n * size;
    let vector = (dest as usize | src as usize) & 15 == 0;
    let lanes = 16 / size;
    let vector_elems = if vector { n / lanes * lanes } else { 0 };
    let mut first = 0u32;
    while first < d.size {
        let count = (d.size - first).min(BATCH as u32) as usize;
        let mut from = [core::ptr::null::<T>(); BATCH];
        // Fixed trip counts with guards (here and in `fold_units`): the arrays stay in registers.
        #[allow(clippy::needless_range_loop)]
        for k in 0..BATCH {
            if k < count {
                // SAFETY: `src` is a symmetric range of `bytes` (this fn's contract) and
                // `first + k < d.size`, a member.
                from[k] = unsafe { remote(src.cast(), bytes, d.world_pe(first + k as u32), call) } as *const T;
            }
        }
        let fold_dest = first > 0;
        if vector {
            let units = vector_elems / lanes;
            // Sum, the common case, with the operator a constant: LLVM then drops the
            // operator dispatch from the loop and unrolls the fold over the batch, so the
            // loaded units stay in registers. With `op` a run-time value the fold stayed a
            // rolled loop over units kept in local memory (`STL.128`/`LDL.128` per member
            // and unit in the SASS of `gpushmem_reduce_bf16`, 2026-12-06).
            // SAFETY: `from[..count]` are the members' copies of `src` and `dest`, all 16-byte
            // aligned (`vector`), of `n` `T`s, and `units * lanes <= n`.
            unsafe {
                if op == ReduceOp::Sum {
                    fold_units::<T, true>(&from, count, dest, fold_dest, units, 0, ReduceOp::Sum, g);
                } else {
                    fold_units::<T, true>(&from, count, dest, fold_dest, units, 0, op, g);
                }
            }
        }
        // The rest (or everything, when unaligned), one element per unit.
        // SAFETY: elements `vector_elems..n` of the `count` members' copies of `src` and of `dest`.
        unsafe { fold_units::<T, false>(&from, count, dest, fold_dest, n - vector_elems, vector_elems, op, g) };
        first += BATCH as u32;
    }
}

/// Folds `units` units starting at element `at` (units of 16 bytes if `VECTOR`,
/// else of one element) of the `count` member buffers in `from` into `dest`,
/// after `dest`'s own value when `fold_dest`. Every thread of `g` calls.
///
/// # Safety
/// `from[..count]` and `dest` are valid global memory for elements `at..at + units * lanes`
/// (`lanes` = `16 / size_of::<T>()` if `VECTOR`, else 1), aligned for `T` and, if
/// `VECTOR`, to 16 bytes at element `at`; `dest` overlaps none of `from[..count]`; `count >= 1`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn fold_units<T: Reducible, const VECTOR: bool>(
    from: &[*const T; BATCH],
    count: usize,
    dest: *mut T,
    fold_dest: bool,
    units: usize,
    at: usize,
    op: ReduceOp,
    g: Group,
) {
    let lanes = if VECTOR { 16 / core::mem::size_of::<T>() } else { 1 };
    let load = |p: *const T| -> Unit {
        let mut u = Unit([0; 4]);
        // SAFETY: `p` is an element of a buffer that this fn's contract makes valid and
        // aligned for the access (16 bytes if `VECTOR`); a `T` (at most 16 bytes) fits in
        // `Unit`, whose 16-byte alignment covers `T`'s.
        unsafe {
            if VECTOR {
                u.0 = crate::ptx::ld_global_v4(p.cast());
            } else {
                *(u.0.as_mut_ptr() as *mut T) = *p;
            }
        }
        u
    };
    let mut i = g.rank;
    while i < units {
        let e = at + i * lanes;
        // All loads first: they are independent, so they overlap in flight.
        let mut x = [Unit([0; 4]); BATCH];
        #[allow(clippy::needless_range_loop)]
        for k in 0..BATCH {
            if k < count {
                // SAFETY: `i < units`, so element `e` starts a unit inside `from[k]`'s range.
                x[k] = load(unsafe { from[k].add(e) });
            }
        }
        // SAFETY: as above, in `dest`'s range.
        let mut acc = if fold_dest { load(unsafe { dest.add(e) }) } else { x[0] };
        #[allow(clippy::needless_range_loop)]
        for k in 0..BATCH {
            if k < count && (k > 0 || fold_dest) {
                if VECTOR {
                    T::apply_16(op, acc.words(), x[k].words());
                } else {
                    let (a, b) = (acc.0.as_mut_ptr() as *mut T, x[k].0.as_ptr() as *const T);
                    // SAFETY: both point to the start of a local `Unit`, which holds a `T`
                    // (written by `load`) and is aligned for it.
                    unsafe { *a = T::apply(op, *a, *b) };
                }
            }
        }
        // SAFETY: element `e` starts a unit inside `dest`'s range, 16-byte aligned if `VECTOR`
        // (this fn's contract); `acc` holds a `T` at its start, aligned for it.
        unsafe {
            if VECTOR {
                crate::ptx::st_global_v4(dest.add(e).cast(), acc.0);
            } else {
                *dest.add(e) = *(acc.0.as_ptr() as *const T);
            }
        }
        i += g.size;
    }
}
