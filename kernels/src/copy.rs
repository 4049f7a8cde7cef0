//! The copy engine behind every put and get: the calling group splits the
//! bytes; 16-byte vector accesses where source and destination share their
//! alignment mod 16 (LLVM does not vectorize such copies by itself: a plain
//! copy measured 65% of memcpy bandwidth, a `v4` one 94%), else the widest
//! unit they share (8, 4, 2, 1 bytes), with byte accesses for the ragged
//! head and tail.

use crate::debug;
use crate::group::Group;
use crate::ptx;
use core::ffi::CStr;

/// Copies `nelems` elements of `T` from `src` to `dst`, split over `g` (every
/// thread of `g` calls). One element of at most 16 bytes is one `T` access by
/// the group's first thread: its type gives its alignment, so none of
/// [`copy_bytes`]' alignment dispatch and head/tail code runs (on the H200 that
/// code cost ≈ 20 issued instructions per 8-byte put, on the critical path of
/// a put-with-signal ping-pong). Accesses are weak; no ordering is implied.
///
/// # Safety
/// As [`copy_bytes`]; both pointers are aligned for `T` (checked in debug mode
/// on the one-element path, reported as `call`).
#[inline(always)]
pub(crate) unsafe fn copy_elems<T: bytemuck::Pod>(dst: *mut T, src: *const T, nelems: usize, g: Group, call: &CStr) {
    if nelems == 1 && core::mem::size_of::<T>() <= 16 {
        debug::check_aligned(dst, call);
        debug::check_aligned(src, call);
        if g.rank == 0 {
            // SAFETY: `src` and `dst` are valid for one `T` and aligned for it (this fn's
            // contract); the ranges do not overlap.
            unsafe { dst.write(src.read()) };
        }
        return;
    }
    // SAFETY: the two ranges of `nelems` `T`s are valid global memory that does not
    // overlap (this fn's contract, which is `copy_bytes`' in bytes).
    unsafe { copy_bytes(dst.cast(), src.cast(), nelems * core::mem::size_of::<T>(), g) };
}

/// Copies `n` bytes from `src` to `dst`, split over `g` (every thread of `g` calls).
/// Accesses are weak; no ordering is implied.
///
/// # Safety
/// Both ranges are valid global memory and do not overlap.
#[inline(always)]
pub(crate) unsafe fn copy_bytes(dst: *mut u8, src: *const u8, n: usize, g: Group) {
    let rel = (dst as usize ^ src as usize) & 15;
    // SAFETY: the ranges are valid and disjoint (this fn's contract), which is what
    // each callee needs; `rel` says `src` and `dst` are equal mod `U`, so the units
    // `copy_units::<U>` aligns to `dst` are aligned in `src` too.
    unsafe {
        match rel {
            0 => copy_units::<16>(dst, src, n, g),
            8 => copy_units::<8>(dst, src, n, g),
            4 | 12 => copy_units::<4>(dst, src, n, g),
            2 | 6 | 10 | 14 => copy_units::<2>(dst, src, n, g),
            _ => copy_range_bytes(dst, src, 0, n, g),
        }
    }
}

/// Head bytes up to `dst`'s `U` alignment, `U`-byte units, then tail bytes.
///
/// # Safety
/// As [`copy_bytes`], and `src` and `dst` are equal mod `U` (`U` is 2, 4, 8 or 16).
#[inline(always)]
unsafe fn copy_units<const U: usize>(dst: *mut u8, src: *const u8, n: usize, g: Group) {
    let head = ((U - (dst as usize & (U - 1))) & (U - 1)).min(n);
    let units = (n - head) / U;
    let body_end = head + units * U;
    // Head and tail together, so that one pass of the group covers both.
    let edges = head + (n - body_end);
    let mut i = g.rank;
    while i < edges {
        let off = if i < head { i } else { body_end + (i - head) };
        // SAFETY: `off < head` or `body_end <= off < n`: a byte of both ranges (valid,
        // disjoint: this fn's contract).
        unsafe { *dst.add(off) = *src.add(off) };
        i += g.size;
    }
    // SAFETY: `head <= n`, so both stay within (or one past) their ranges.
    let d = unsafe { dst.add(head) };
    // SAFETY: as `d`.
    let s = unsafe { src.add(head) };
    // Four independent loads in flight per thread before their stores: a
    // copy is latency-bound per thread, so this is what fills the memory pipe.
    let step = g.size;
    let mut u = g.rank;
    while u + 3 * step < units {
        // SAFETY: units `u`, `u + step`, `u + 2 * step`, `u + 3 * step` are all below
        // `units`, so each is a `U`-byte unit inside both ranges (`head + units * U <= n`),
        // `U`-aligned: `d` is aligned to `U` and `s` is equal to it mod `U` (this fn's contract).
        let v = unsafe {
            [
                load_unit::<U>(s.add(u * U)),
                load_unit::<U>(s.add((u + step) * U)),
                load_unit::<U>(s.add((u + 2 * step) * U)),
                load_unit::<U>(s.add((u + 3 * step) * U)),
            ]
        };
        for (k, v) in v.into_iter().enumerate() {
            // SAFETY: as the loads above: unit `u + k * step` (k < 4) is in range, aligned.
            unsafe { store_unit::<U>(d.add((u + k * step) * U), v) };
        }
        u += 4 * step;
    }
    while u < units {
        // SAFETY: `u < units`: a `U`-aligned unit inside both ranges, as above.
        unsafe { store_unit::<U>(d.add(u * U), load_unit::<U>(s.add(u * U))) };
        u += step;
    }
}

/// One `U`-byte unit as four u32 words (only the first `U / 4` used, or the low bytes for U < 4).
///
/// # Safety
/// `p` is valid global memory for `U` bytes, `U`-aligned (`U` is 2, 4, 8 or 16).
#[inline(always)]
unsafe fn load_unit<const U: usize>(p: *const u8) -> [u32; 4] {
    // SAFETY: `p` is valid for a `U`-byte read and `U`-aligned (this fn's contract):
    // each arm reads exactly that unit, aligned for the width it reads.
    unsafe {
        match U {
            16 => ptx::ld_global_v4(p),
            8 => {
                let v = *(p as *const u64);
                [v as u32, (v >> 32) as u32, 0, 0]
            }
            4 => [*(p as *const u32), 0, 0, 0],
            _ => [*(p as *const u16) as u32, 0, 0, 0],
        }
    }
}

/// Stores one `U`-byte unit from four u32 words, as [`load_unit`] gave them.
///
/// # Safety
/// `p` is valid global memory for `U` bytes, `U`-aligned (`U` is 2, 4, 8 or 16).
#[inline(always)]
unsafe fn store_unit<const U: usize>(p: *mut u8, v: [u32; 4]) {
    // SAFETY: `p` is valid for a `U`-byte write and `U`-aligned (this fn's contract):
    // each arm writes exactly that unit, aligned for the width it writes.
    unsafe {
        match U {
            16 => ptx::st_global_v4(p, v),
            8 => *(p as *mut u64) = v[0] as u64 | (v[1] as u64) << 32,
            4 => *(p as *mut u32) = v[0],
            _ => *(p as *mut u16) = v[0] as u16,
        }
    }
}

/// Copies bytes `from..to` of `src` to `dst`, split over `g`.
///
/// # Safety
/// Bytes `from..to` of both ranges are valid global memory and do not overlap.
#[inline(always)]
unsafe fn copy_range_bytes(dst: *mut u8, src: *const u8, from: usize, to: usize, g: Group) {
    let mut i = from + g.rank;
    while i < to {
        // SAFETY: `from <= i < to`: a byte of both valid, disjoint ranges (this fn's contract).
        unsafe { *dst.add(i) = *src.add(i) };
        i += g.size;
    }
}
