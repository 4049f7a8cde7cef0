//! The NVSHMEM engine (cargo feature `nvshmem`): each operation calls
//! NVSHMEM's device function of the same meaning. The functions are declared
//! here `extern "C"` and resolved when the builder links NVSHMEM's LLVM
//! bitcode (`libnvshmem_device.bc`); every one declared here is defined in
//! NVSHMEM 3.4.5's bitcode (checked with `llvm-nm --defined-only`).
//! Signatures are from NVSHMEM 3.4.5's headers (`include/device/…`); C types
//! map as `int` → `c_int` (i32), `size_t` → `usize`, `ptrdiff_t` → `isize`,
//! `uint{8,16,32,64}_t` → `u8`…`u64`, pointers → raw pointers.
//!
//! Every address handed in has been checked by the topic module (PE range,
//! heap bounds against [`crate::GPUSHMEM_STATE`], which the host installs on
//! this engine too, with NVSHMEM's heap); NVSHMEM translates it.

use super::{FetchOp, Mode, Op};
use crate::abi::SignalOp;
use crate::group::{Group, Kind};
use crate::ptx;
use crate::word::{AtomicFloat, AtomicWord};
use core::ffi::{c_int, c_void, CStr};
use core::mem::{align_of, size_of};

/// `NVSHMEM_SIGNAL_SET` (`include/device_host_transport/nvshmem_common_transport.h`:
/// `typedef enum { NVSHMEM_SIGNAL_SET = 9, NVSHMEM_SIGNAL_ADD = 10 } nvshmemx_signal_op_t`).
const NVSHMEM_SIGNAL_SET: c_int = 9;
/// `NVSHMEM_SIGNAL_ADD` (same header).
const NVSHMEM_SIGNAL_ADD: c_int = 10;
/// `NVSHMEM_CMP_GE` (`include/device_host_transport/nvshmem_constants.h`:
/// `EQ = 0, NE, GT, LE, LT, GE`).
const NVSHMEM_CMP_GE: c_int = 5;

// include/device/nvshmem_defines.h
extern "C" {
    fn nvshmem_my_pe() -> c_int;
    fn nvshmem_n_pes() -> c_int;
    fn nvshmem_ptr(ptr: *const c_void, pe: c_int) -> *mut c_void;

    fn nvshmem_putmem(dest: *mut c_void, source: *const c_void, bytes: usize, pe: c_int);
    fn nvshmem_getmem(dest: *mut c_void, source: *const c_void, bytes: usize, pe: c_int);
    fn nvshmem_putmem_nbi(dest: *mut c_void, source: *const c_void, bytes: usize, pe: c_int);
    fn nvshmem_getmem_nbi(dest: *mut c_void, source: *const c_void, bytes: usize, pe: c_int);

    // NVSHMEMI_TYPENAME_P_IMPL / NVSHMEMI_TYPENAME_G_IMPL over the standard RMA types.
    fn nvshmem_uint8_p(dest: *mut u8, value: u8, pe: c_int);
    fn nvshmem_uint16_p(dest: *mut u16, value: u16, pe: c_int);
    fn nvshmem_uint32_p(dest: *mut u32, value: u32, pe: c_int);
    fn nvshmem_uint64_p(dest: *mut u64, value: u64, pe: c_int);
    fn nvshmem_uint8_g(source: *const u8, pe: c_int) -> u8;
    fn nvshmem_uint16_g(source: *const u16, pe: c_int) -> u16;
    fn nvshmem_uint32_g(source: *const u32, pe: c_int) -> u32;
    fn nvshmem_uint64_g(source: *const u64, pe: c_int) -> u64;

    // NVSHMEM_IPUTSIZE / NVSHMEM_IGETSIZE over NVSHMEMI_REPT_FOR_SIZES_WITH_TYPE
    // (8: int8_t, 16: int16_t, 32: int32_t, 64: int64_t, 128: int4).
    fn nvshmem_iput8(dest: *mut c_void, source: *const c_void, dst: isize, sst: isize, nelems: usize, pe: c_int);
    fn nvshmem_iput16(dest: *mut c_void, source: *const c_void, dst: isize, sst: isize, nelems: usize, pe: c_int);
    fn nvshmem_iput32(dest: *mut c_void, source: *const c_void, dst: isize, sst: isize, nelems: usize, pe: c_int);
    fn nvshmem_iput64(dest: *mut c_void, source: *const c_void, dst: isize, sst: isize, nelems: usize, pe: c_int);
    fn nvshmem_iput128(dest: *mut c_void, source: *const c_void, dst: isize, sst: isize, nelems: usize, pe: c_int);
    fn nvshmem_iget8(dest: *mut c_void, source: *const c_void, dst: isize, sst: isize, nelems: usize, pe: c_int);
    fn nvshmem_iget16(dest: *mut c_void, source: *const c_void, dst: isize, sst: isize, nelems: usize, pe: c_int);
    fn nvshmem_iget32(dest: *mut c_void, source: *const c_void, dst: isize, sst: isize, nelems: usize, pe: c_int);
    fn nvshmem_iget64(dest: *mut c_void, source: *const c_void, dst: isize, sst: isize, nelems: usize, pe: c_int);
    fn nvshmem_iget128(dest: *mut c_void, source: *const c_void, dst: isize, sst: isize, nelems: usize, pe: c_int);

    fn nvshmem_fence();
    fn nvshmem_quiet();
    fn nvshmem_barrier_all();
    fn nvshmem_sync_all();

    fn nvshmem_putmem_signal(
        dest: *mut c_void,
        source: *const c_void,
        bytes: usize,
        sig_addr: *mut u64,
        signal: u64,
        sig_op: c_int,
        pe: c_int,
    );
    fn nvshmem_putmem_signal_nbi(
        dest: *mut c_void,
        source: *const c_void,
        bytes: usize,
        sig_addr: *mut u64,
        signal: u64,
        sig_op: c_int,
        pe: c_int,
    );
    fn nvshmem_signal_fetch(sig_addr: *mut u64) -> u64;

    // NVSHMEM_TEST (`int nvshmem_uint64_test(uint64_t *ivar, int cmp, uint64_t cmp_value)`).
    fn nvshmem_uint64_test(ivar: *mut u64, cmp: c_int, cmp_value: u64) -> c_int;
}

// include/device/nvshmemx_defines.h
extern "C" {
    fn nvshmemx_putmem_warp(dest: *mut c_void, source: *const c_void, bytes: usize, pe: c_int);
    fn nvshmemx_putmem_block(dest: *mut c_void, source: *const c_void, bytes: usize, pe: c_int);
    fn nvshmemx_getmem_warp(dest: *mut c_void, source: *const c_void, bytes: usize, pe: c_int);
    fn nvshmemx_getmem_block(dest: *mut c_void, source: *const c_void, bytes: usize, pe: c_int);
    fn nvshmemx_putmem_nbi_warp(dest: *mut c_void, source: *const c_void, bytes: usize, pe: c_int);
    fn nvshmemx_putmem_nbi_block(dest: *mut c_void, source: *const c_void, bytes: usize, pe: c_int);
    fn nvshmemx_getmem_nbi_warp(dest: *mut c_void, source: *const c_void, bytes: usize, pe: c_int);
    fn nvshmemx_getmem_nbi_block(dest: *mut c_void, source: *const c_void, bytes: usize, pe: c_int);

    // NVSHMEM_IPUTSIZE_THREADGROUP / NVSHMEM_IGETSIZE_THREADGROUP (warp, block).
    fn nvshmemx_iput8_warp(dest: *mut c_void, source: *const c_void, dst: isize, sst: isize, nelems: usize, pe: c_int);
    fn nvshmemx_iput16_warp(dest: *mut c_void, source: *const c_void, dst: isize, sst: isize, nelems: usize, pe: c_int);
    fn nvshmemx_iput32_warp(dest: *mut c_void, source: *const c_void, dst: isize, sst: isize, nelems: usize, pe: c_int);
    fn nvshmemx_iput64_warp(dest: *mut c_void, source: *const c_void, dst: isize, sst: isize, nelems: usize, pe: c_int);
    fn nvshmemx_iput128_warp(
        dest: *mut c_void,
        source: *const c_void,
        dst: isize,
        sst: isize,
        nelems: usize,
        pe: c_int,
    );
    fn nvshmemx_iput8_block(dest: *mut c_void, source: *const c_void, dst: isize, sst: isize, nelems: usize, pe: c_int);
    fn nvshmemx_iput16_block(
        dest: *mut c_void,
        source: *const c_void,
        dst: isize,
        sst: isize,
        nelems: usize,
        pe: c_int,
    );
    fn nvshmemx_iput32_block(
        dest: *mut c_void,
        source: *const c_void,
        dst: isize,
        sst: isize,
        nelems: usize,
        pe: c_int,
    );
    fn nvshmemx_iput64_block(
        dest: *mut c_void,
        source: *const c_void,
        dst: isize,
        sst: isize,
        nelems: usize,
        pe: c_int,
    );
    fn nvshmemx_iput128_block(
        dest: *mut c_void,
        source: *const c_void,
        dst: isize,
        sst: isize,
        nelems: usize,
        pe: c_int,
    );
    fn nvshmemx_iget8_warp(dest: *mut c_void, source: *const c_void, dst: isize, sst: isize, nelems: usize, pe: c_int);
    fn nvshmemx_iget16_warp(dest: *mut c_void, source: *const c_void, dst: isize, sst: isize, nelems: usize, pe: c_int);
    fn nvshmemx_iget32_warp(dest: *mut c_void, source: *const c_void, dst: isize, sst: isize, nelems: usize, pe: c_int);
    fn nvshmemx_iget64_warp(dest: *mut c_void, source: *const c_void, dst: isize, sst: isize, nelems: usize, pe: c_int);
    fn nvshmemx_iget128_warp(
        dest: *mut c_void,
        source: *const c_void,
        dst: isize,
        sst: isize,
        nelems: usize,
        pe: c_int,
    );
    fn nvshmemx_iget8_block(dest: *mut c_void, source: *const c_void, dst: isize, sst: isize, nelems: usize, pe: c_int);
    fn nvshmemx_iget16_block(
        dest: *mut c_void,
        source: *const c_void,
        dst: isize,
        sst: isize,
        nelems: usize,
        pe: c_int,
    );
    fn nvshmemx_iget32_block(
        dest: *mut c_void,
        source: *const c_void,
        dst: isize,
        sst: isize,
        nelems: usize,
        pe: c_int,
    );
    fn nvshmemx_iget64_block(
        dest: *mut c_void,
        source: *const c_void,
        dst: isize,
        sst: isize,
        nelems: usize,
        pe: c_int,
    );
    fn nvshmemx_iget128_block(
        dest: *mut c_void,
        source: *const c_void,
        dst: isize,
        sst: isize,
        nelems: usize,
        pe: c_int,
    );

    fn nvshmemx_barrier_all_warp();
    fn nvshmemx_barrier_all_block();
    fn nvshmemx_sync_all_warp();
    fn nvshmemx_sync_all_block();

    fn nvshmemx_putmem_signal_warp(
        dest: *mut c_void,
        source: *const c_void,
        bytes: usize,
        sig_addr: *mut u64,
        signal: u64,
        sig_op: c_int,
        pe: c_int,
    );
    fn nvshmemx_putmem_signal_block(
        dest: *mut c_void,
        source: *const c_void,
        bytes: usize,
        sig_addr: *mut u64,
        signal: u64,
        sig_op: c_int,
        pe: c_int,
    );
    fn nvshmemx_putmem_signal_nbi_warp(
        dest: *mut c_void,
        source: *const c_void,
        bytes: usize,
        sig_addr: *mut u64,
        signal: u64,
        sig_op: c_int,
        pe: c_int,
    );
    fn nvshmemx_putmem_signal_nbi_block(
        dest: *mut c_void,
        source: *const c_void,
        bytes: usize,
        sig_addr: *mut u64,
        signal: u64,
        sig_op: c_int,
        pe: c_int,
    );
    fn nvshmemx_signal_op(sig_addr: *mut u64, signal: u64, sig_op: c_int, pe: c_int);
}

/// The AMOs of one word width, `nvshmem_uint{32,64}_atomic_*`
/// (include/device/nvshmem_defines.h: `NVSHMEMI_REPT_FOR_STANDARD_AMO_TYPES`,
/// `…_EXTENDED_AMO_TYPES`, `…_BITWISE_AMO_TYPES`).
macro_rules! amo_externs {
    ($w:ty: $fetch_add:ident, $add:ident, $fetch_inc:ident, $inc:ident, $fetch_and:ident, $and:ident,
     $fetch_or:ident, $or:ident, $fetch_xor:ident, $xor:ident, $swap:ident, $cas:ident, $fetch:ident, $set:ident) => {
        extern "C" {
            fn $fetch_add(target: *mut $w, value: $w, pe: c_int) -> $w;
            fn $add(target: *mut $w, value: $w, pe: c_int);
            fn $fetch_inc(target: *mut $w, pe: c_int) -> $w;
            fn $inc(target: *mut $w, pe: c_int);
            fn $fetch_and(target: *mut $w, value: $w, pe: c_int) -> $w;
            fn $and(target: *mut $w, value: $w, pe: c_int);
            fn $fetch_or(target: *mut $w, value: $w, pe: c_int) -> $w;
            fn $or(target: *mut $w, value: $w, pe: c_int);
            fn $fetch_xor(target: *mut $w, value: $w, pe: c_int) -> $w;
            fn $xor(target: *mut $w, value: $w, pe: c_int);
            fn $swap(target: *mut $w, value: $w, pe: c_int) -> $w;
            fn $cas(target: *mut $w, cond: $w, value: $w, pe: c_int) -> $w;
            fn $fetch(target: *const $w, pe: c_int) -> $w;
            fn $set(target: *mut $w, value: $w, pe: c_int);
        }

        impl Word for $w {
            #[inline(always)]
            unsafe fn fetch_op(p: *mut Self, v: Self, pe: c_int, op: FetchOp) -> Self {
                // SAFETY: `p` is a naturally aligned symmetric address of a `$w` and `pe < n_pes()`
                // (the trait's contract), which is what each of NVSHMEM's AMOs on it requires.
                unsafe {
                    match op {
                        FetchOp::Add => $fetch_add(p, v, pe),
                        FetchOp::Inc => $fetch_inc(p, pe),
                        FetchOp::And => $fetch_and(p, v, pe),
                        FetchOp::Or => $fetch_or(p, v, pe),
                        FetchOp::Xor => $fetch_xor(p, v, pe),
                        FetchOp::Swap => $swap(p, v, pe),
                    }
                }
            }
            #[inline(always)]
            unsafe fn op(p: *mut Self, v: Self, pe: c_int, op: Op) {
                // SAFETY: `p` is a naturally aligned symmetric address of a `$w` and `pe < n_pes()`
                // (the trait's contract), which is what each of NVSHMEM's AMOs on it requires.
                unsafe {
                    match op {
                        Op::Add => $add(p, v, pe),
                        Op::Inc => $inc(p, pe),
                        Op::And => $and(p, v, pe),
                        Op::Or => $or(p, v, pe),
                        Op::Xor => $xor(p, v, pe),
                        Op::Set => $set(p, v, pe),
                    }
                }
            }
            #[inline(always)]
            unsafe fn compare_swap(p: *mut Self, cond: Self, v: Self, pe: c_int) -> Self {
                // SAFETY: `p` is a naturally aligned symmetric address of a `$w` and `pe < n_pes()`
                // (the trait's contract), which is what NVSHMEM's AMO on it requires.
                unsafe { $cas(p, cond, v, pe) }
            }
            #[inline(always)]
            unsafe fn fetch(p: *const Self, pe: c_int) -> Self {
                // SAFETY: `p` is a naturally aligned symmetric address of a `$w` and `pe < n_pes()`
                // (the trait's contract), which is what NVSHMEM's AMO on it requires.
                unsafe { $fetch(p, pe) }
            }
        }
    };
}

/// An unsigned word NVSHMEM has AMOs for; the remote atomics of a
/// [`AtomicWord`] go through the one of its width.
trait Word: bytemuck::Pod {
    /// The AMO `op` that returns the old value.
    ///
    /// # Safety
    /// `p` is a naturally aligned symmetric address of a `Self`; `0 <= pe < n_pes()`.
    unsafe fn fetch_op(p: *mut Self, v: Self, pe: c_int, op: FetchOp) -> Self;
    /// The AMO `op` without a result.
    ///
    /// # Safety
    /// As [`Word::fetch_op`].
    unsafe fn op(p: *mut Self, v: Self, pe: c_int, op: Op);
    /// `atomic_compare_swap`.
    ///
    /// # Safety
    /// As [`Word::fetch_op`].
    unsafe fn compare_swap(p: *mut Self, cond: Self, v: Self, pe: c_int) -> Self;
    /// `atomic_fetch`.
    ///
    /// # Safety
    /// As [`Word::fetch_op`].
    unsafe fn fetch(p: *const Self, pe: c_int) -> Self;
}

amo_externs!(u32: nvshmem_uint32_atomic_fetch_add, nvshmem_uint32_atomic_add, nvshmem_uint32_atomic_fetch_inc,
    nvshmem_uint32_atomic_inc, nvshmem_uint32_atomic_fetch_and, nvshmem_uint32_atomic_and,
    nvshmem_uint32_atomic_fetch_or, nvshmem_uint32_atomic_or, nvshmem_uint32_atomic_fetch_xor,
    nvshmem_uint32_atomic_xor, nvshmem_uint32_atomic_swap, nvshmem_uint32_atomic_compare_swap,
    nvshmem_uint32_atomic_fetch, nvshmem_uint32_atomic_set);
// `i64` goes through these too: NVSHMEM 3.4.5 declares but does not define
// `nvshmem_int64_atomic_{add,fetch_add,inc,fetch_inc}`, and every AMO here is
// the same operation on the bit pattern in two's complement.
amo_externs!(u64: nvshmem_uint64_atomic_fetch_add, nvshmem_uint64_atomic_add, nvshmem_uint64_atomic_fetch_inc,
    nvshmem_uint64_atomic_inc, nvshmem_uint64_atomic_fetch_and, nvshmem_uint64_atomic_and,
    nvshmem_uint64_atomic_fetch_or, nvshmem_uint64_atomic_or, nvshmem_uint64_atomic_fetch_xor,
    nvshmem_uint64_atomic_xor, nvshmem_uint64_atomic_swap, nvshmem_uint64_atomic_compare_swap,
    nvshmem_uint64_atomic_fetch, nvshmem_uint64_atomic_set);

/// This PE's number (`nvshmem_my_pe`).
#[inline(always)]
pub(crate) fn my_pe() -> u32 {
    // SAFETY: reads NVSHMEM's device state, installed by `nvshmemx_cumodule_init`.
    unsafe { nvshmem_my_pe() as u32 }
}

/// Number of PEs (`nvshmem_n_pes`).
#[inline(always)]
pub(crate) fn n_pes() -> u32 {
    // SAFETY: as `my_pe`.
    unsafe { nvshmem_n_pes() as u32 }
}

/// `nvshmem_ptr`: the load/store address of `sym` on `pe`, or null.
///
/// # Safety
/// As [`crate::pe::ptr`].
#[inline(always)]
pub(crate) unsafe fn ptr<T>(sym: *const T, pe: u32) -> *mut T {
    // SAFETY: `sym` is in the symmetric heap and `pe < n_pes()` (this fn's contract), as
    // `nvshmem_ptr` requires; it only translates the address.
    unsafe { nvshmem_ptr(sym.cast(), pe as c_int).cast() }
}

/// `nvshmem(x)_putmem(_nbi)(_warp/_block)` of `nelems * size_of::<T>()` bytes.
///
/// # Safety
/// As [`crate::rma::put`]: `dest` is a symmetric-heap range of `nelems` `T`s, `src` valid global
/// memory of as many, not overlapping; `pe < n_pes()`; every thread of `g` calls.
#[inline(always)]
pub(crate) unsafe fn put<T: bytemuck::Pod>(
    dest: *mut T,
    src: *const T,
    nelems: usize,
    pe: u32,
    g: Group,
    mode: Mode,
    _call: &CStr,
) {
    let (d, s, n, pe) = (dest.cast::<c_void>(), src.cast::<c_void>(), nelems * size_of::<T>(), pe as c_int);
    // SAFETY: this fn's contract is each call's: `d` symmetric, `s` valid, `n` bytes each,
    // not overlapping, `pe` in range; the group form is called by the whole group.
    unsafe {
        match (g.kind, mode) {
            (Kind::Thread, Mode::Blocking) => nvshmem_putmem(d, s, n, pe),
            (Kind::Warp, Mode::Blocking) => nvshmemx_putmem_warp(d, s, n, pe),
            (Kind::Block, Mode::Blocking) => nvshmemx_putmem_block(d, s, n, pe),
            (Kind::Thread, Mode::Nbi) => nvshmem_putmem_nbi(d, s, n, pe),
            (Kind::Warp, Mode::Nbi) => nvshmemx_putmem_nbi_warp(d, s, n, pe),
            (Kind::Block, Mode::Nbi) => nvshmemx_putmem_nbi_block(d, s, n, pe),
        }
    }
}

/// `nvshmem(x)_getmem(_nbi)(_warp/_block)` of `nelems * size_of::<T>()` bytes.
///
/// # Safety
/// As [`crate::rma::get`]: `src` is a symmetric-heap range of `nelems` `T`s, `dest` valid global
/// memory of as many, not overlapping; `pe < n_pes()`; every thread of `g` calls.
#[inline(always)]
pub(crate) unsafe fn get<T: bytemuck::Pod>(
    dest: *mut T,
    src: *const T,
    nelems: usize,
    pe: u32,
    g: Group,
    mode: Mode,
    _call: &CStr,
) {
    let (d, s, n, pe) = (dest.cast::<c_void>(), src.cast::<c_void>(), nelems * size_of::<T>(), pe as c_int);
    // SAFETY: this fn's contract is each call's: `s` symmetric, `d` valid, `n` bytes each,
    // not overlapping, `pe` in range; the group form is called by the whole group.
    unsafe {
        match (g.kind, mode) {
            (Kind::Thread, Mode::Blocking) => nvshmem_getmem(d, s, n, pe),
            (Kind::Warp, Mode::Blocking) => nvshmemx_getmem_warp(d, s, n, pe),
            (Kind::Block, Mode::Blocking) => nvshmemx_getmem_block(d, s, n, pe),
            (Kind::Thread, Mode::Nbi) => nvshmem_getmem_nbi(d, s, n, pe),
            (Kind::Warp, Mode::Nbi) => nvshmemx_getmem_nbi_warp(d, s, n, pe),
            (Kind::Block, Mode::Nbi) => nvshmemx_getmem_nbi_block(d, s, n, pe),
        }
    }
}

/// Refuses (at compile time) an element that NVSHMEM has no single-access
/// `_p`/`_g` for: its size must be 1, 2, 4 or 8 bytes and its alignment its
/// size (NVSHMEM accesses it as one `uint{8,16,32,64}_t`).
struct ElemCheck<T>(T);
impl<T> ElemCheck<T> {
    const OK: () = assert!(
        matches!(size_of::<T>(), 1 | 2 | 4 | 8) && align_of::<T>() == size_of::<T>(),
        "gpushmem-kernels (nvshmem engine): p/g need an element of 1, 2, 4 or 8 bytes aligned to its size (nvshmem_uint{{8,16,32,64}}_p/_g)"
    );
}

/// `nvshmem_uint{8,16,32,64}_p` on the element's bits.
///
/// # Safety
/// `dest` is a naturally aligned symmetric address of a `T`; `pe < n_pes()`.
#[inline(always)]
pub(crate) unsafe fn p<T: bytemuck::Pod>(dest: *mut T, value: T, pe: u32, _call: &CStr) {
    let () = ElemCheck::<T>::OK;
    let pe = pe as c_int;
    // SAFETY: `dest` is an aligned symmetric `T` and `pe` in range (this fn's contract);
    // `ElemCheck` makes `T` an unsigned word of the width called, aligned to its size.
    unsafe {
        match size_of::<T>() {
            1 => nvshmem_uint8_p(dest.cast(), bytemuck::cast(value), pe),
            2 => nvshmem_uint16_p(dest.cast(), bytemuck::cast(value), pe),
            4 => nvshmem_uint32_p(dest.cast(), bytemuck::cast(value), pe),
            _ => nvshmem_uint64_p(dest.cast(), bytemuck::cast(value), pe),
        }
    }
}

/// `nvshmem_uint{8,16,32,64}_g` on the element's bits.
///
/// # Safety
/// `src` is a naturally aligned symmetric address of a `T`; `pe < n_pes()`.
#[inline(always)]
pub(crate) unsafe fn g<T: bytemuck::Pod>(src: *const T, pe: u32, _call: &CStr) -> T {
    let () = ElemCheck::<T>::OK;
    let pe = pe as c_int;
    // SAFETY: as in `p`, with `src`.
    unsafe {
        match size_of::<T>() {
            1 => bytemuck::cast(nvshmem_uint8_g(src.cast(), pe)),
            2 => bytemuck::cast(nvshmem_uint16_g(src.cast(), pe)),
            4 => bytemuck::cast(nvshmem_uint32_g(src.cast(), pe)),
            _ => bytemuck::cast(nvshmem_uint64_g(src.cast(), pe)),
        }
    }
}

/// Refuses (at compile time) an element that NVSHMEM has no sized strided
/// function for: 1, 2, 4, 8 or 16 bytes, aligned to its size.
struct StridedCheck<T>(T);
impl<T> StridedCheck<T> {
    const OK: () = assert!(
        matches!(size_of::<T>(), 1 | 2 | 4 | 8 | 16) && align_of::<T>() == size_of::<T>(),
        "gpushmem-kernels (nvshmem engine): iput/iget need an element of 1, 2, 4, 8 or 16 bytes aligned to its size (nvshmem_iput{{8,16,32,64,128}})"
    );
}

/// Calls the sized strided function for `$t` and the group `$g`:
/// `[thread, warp, block]` per size 1, 2, 4, 8, 16 (direct calls: the
/// size and the group are constants once inlined).
macro_rules! strided_call {
    ($t:ty, $g:expr, $args:tt, $($size:literal => [$th:ident, $wa:ident, $bl:ident]),*) => {{
        let () = StridedCheck::<$t>::OK;
        match size_of::<$t>() {
            $($size => match $g.kind {
                Kind::Thread => $th $args,
                Kind::Warp => $wa $args,
                Kind::Block => $bl $args,
            },)*
            _ => unreachable!(),
        }
    }};
}

/// `nvshmem(x)_iput{8..128}(_warp/_block)`: strides in elements (NVSHMEM's are too).
///
/// # Safety
/// As [`crate::rma::iput`]: `dest`'s elements are in the symmetric heap, both sides' elements
/// are valid, naturally aligned and do not overlap; `pe < n_pes()`; every thread of `g` calls.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn iput<T: bytemuck::Pod>(
    dest: *mut T,
    src: *const T,
    dst: isize,
    sst: isize,
    nelems: usize,
    pe: u32,
    g: Group,
    _call: &CStr,
) {
    let (d, s, pe) = (dest.cast::<c_void>(), src.cast::<c_void>(), pe as c_int);
    // SAFETY: this fn's contract is the strided call's; `StridedCheck` makes `T` of the
    // width called, aligned to its size; the group form is called by the whole group.
    unsafe {
        strided_call!(T, g, (d, s, dst, sst, nelems, pe),
            1 => [nvshmem_iput8, nvshmemx_iput8_warp, nvshmemx_iput8_block],
            2 => [nvshmem_iput16, nvshmemx_iput16_warp, nvshmemx_iput16_block],
            4 => [nvshmem_iput32, nvshmemx_iput32_warp, nvshmemx_iput32_block],
            8 => [nvshmem_iput64, nvshmemx_iput64_warp, nvshmemx_iput64_block],
            16 => [nvshmem_iput128, nvshmemx_iput128_warp, nvshmemx_iput128_block])
    }
}

/// `nvshmem(x)_iget{8..128}(_warp/_block)`.
///
/// # Safety
/// As [`crate::rma::iget`]: `src`'s elements are in the symmetric heap, both sides' elements
/// are valid, naturally aligned and do not overlap; `pe < n_pes()`; every thread of `g` calls.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn iget<T: bytemuck::Pod>(
    dest: *mut T,
    src: *const T,
    dst: isize,
    sst: isize,
    nelems: usize,
    pe: u32,
    g: Group,
    _call: &CStr,
) {
    let (d, s, pe) = (dest.cast::<c_void>(), src.cast::<c_void>(), pe as c_int);
    // SAFETY: this fn's contract is the strided call's; `StridedCheck` makes `T` of the
    // width called, aligned to its size; the group form is called by the whole group.
    unsafe {
        strided_call!(T, g, (d, s, dst, sst, nelems, pe),
            1 => [nvshmem_iget8, nvshmemx_iget8_warp, nvshmemx_iget8_block],
            2 => [nvshmem_iget16, nvshmemx_iget16_warp, nvshmemx_iget16_block],
            4 => [nvshmem_iget32, nvshmemx_iget32_warp, nvshmemx_iget32_block],
            8 => [nvshmem_iget64, nvshmemx_iget64_warp, nvshmemx_iget64_block],
            16 => [nvshmem_iget128, nvshmemx_iget128_warp, nvshmemx_iget128_block])
    }
}

/// `nvshmem_fence`.
#[inline(always)]
pub(crate) fn fence() {
    // SAFETY: orders this thread's operations; no arguments.
    unsafe { nvshmem_fence() }
}

/// `nvshmem_quiet`; a group syncs, one thread quiets, the group syncs again
/// (NVSHMEM 3.4.5's bitcode defines no `nvshmemx_quiet_warp/_block`; its own
/// group quiet is a fence by thread 0 between the group's syncs too, and on a
/// proxy transport `nvshmem_quiet` waits for every operation this PE issued).
#[inline(always)]
pub(crate) fn quiet(g: Group) {
    g.sync();
    if g.is_leader() {
        // SAFETY: completes this PE's operations; no arguments.
        unsafe { nvshmem_quiet() }
    }
    g.sync();
}

/// `nvshmem(x)_barrier_all(_warp/_block)` when `complete`, else
/// `nvshmem(x)_sync_all(_warp/_block)`.
#[inline(always)]
pub(crate) fn barrier_all(g: Group, complete: bool) {
    // SAFETY: collective over all PEs, called by the group (documented on the public functions).
    unsafe {
        match (g.kind, complete) {
            (Kind::Thread, true) => nvshmem_barrier_all(),
            (Kind::Warp, true) => nvshmemx_barrier_all_warp(),
            (Kind::Block, true) => nvshmemx_barrier_all_block(),
            (Kind::Thread, false) => nvshmem_sync_all(),
            (Kind::Warp, false) => nvshmemx_sync_all_warp(),
            (Kind::Block, false) => nvshmemx_sync_all_block(),
        }
    }
}

/// NVSHMEM's code for a signal operation.
#[inline(always)]
fn sig_op(op: SignalOp) -> c_int {
    match op {
        SignalOp::Set => NVSHMEM_SIGNAL_SET,
        SignalOp::Add => NVSHMEM_SIGNAL_ADD,
    }
}

/// `nvshmem(x)_putmem_signal(_nbi)(_warp/_block)`: NVSHMEM orders the data
/// before the signal update (a system fence between them on load/store paths).
///
/// # Safety
/// As [`crate::signal::put_signal`]: `dest` is a symmetric-heap range of `nelems` `T`s and
/// `sig` an 8-byte-aligned symmetric address; `src` is valid global memory of `nelems` `T`s,
/// not overlapping `dest`; `pe < n_pes()`; every thread of `g` calls.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn put_signal<T: bytemuck::Pod>(
    dest: *mut T,
    src: *const T,
    nelems: usize,
    sig: *mut u64,
    value: u64,
    op: SignalOp,
    pe: u32,
    g: Group,
    mode: Mode,
    _call: &CStr,
) {
    let (d, s, n, o, pe) =
        (dest.cast::<c_void>(), src.cast::<c_void>(), nelems * size_of::<T>(), sig_op(op), pe as c_int);
    // SAFETY: this fn's contract is each call's: `d` and `sig` symmetric, `s` valid for `n`
    // bytes, not overlapping `d`, `pe` in range; the group form is called by the whole group.
    unsafe {
        match (g.kind, mode) {
            (Kind::Thread, Mode::Blocking) => nvshmem_putmem_signal(d, s, n, sig, value, o, pe),
            (Kind::Warp, Mode::Blocking) => nvshmemx_putmem_signal_warp(d, s, n, sig, value, o, pe),
            (Kind::Block, Mode::Blocking) => nvshmemx_putmem_signal_block(d, s, n, sig, value, o, pe),
            (Kind::Thread, Mode::Nbi) => nvshmem_putmem_signal_nbi(d, s, n, sig, value, o, pe),
            (Kind::Warp, Mode::Nbi) => nvshmemx_putmem_signal_nbi_warp(d, s, n, sig, value, o, pe),
            (Kind::Block, Mode::Nbi) => nvshmemx_putmem_signal_nbi_block(d, s, n, sig, value, o, pe),
        }
    }
}

/// `nvshmem_fence` then `nvshmemx_signal_op`: NVSHMEM's signal op does not
/// order earlier operations; the fence gives this crate's release guarantee.
///
/// # Safety
/// `sig` is an 8-byte-aligned symmetric address; `pe < n_pes()`.
#[inline(always)]
pub(crate) unsafe fn signal_op(sig: *mut u64, value: u64, op: SignalOp, pe: u32, _call: &CStr) {
    // SAFETY: `nvshmem_fence` takes no arguments; `sig` is an aligned symmetric word and `pe`
    // in range (this fn's contract), as `nvshmemx_signal_op` requires.
    unsafe {
        nvshmem_fence();
        nvshmemx_signal_op(sig, value, sig_op(op), pe as c_int)
    }
}

/// `nvshmemx_signal_op` alone: NVSHMEM's own (unordered) signal update.
///
/// # Safety
/// `sig` is an 8-byte-aligned symmetric address; `pe < n_pes()`.
#[inline(always)]
pub(crate) unsafe fn signal_op_relaxed(sig: *mut u64, value: u64, op: SignalOp, pe: u32, _call: &CStr) {
    // SAFETY: `sig` is an aligned symmetric word and `pe` in range (this fn's contract).
    unsafe { nvshmemx_signal_op(sig, value, sig_op(op), pe as c_int) }
}

/// The address a [`PeerSignal`](crate::signal::PeerSignal) updates directly:
/// `nvshmem_ptr(sig, pe)`, null where `pe` is reached through a proxy
/// (network) transport, in which case its calls go through
/// `nvshmemx_signal_op` with the symmetric address.
///
/// # Safety
/// `sig` is an 8-byte-aligned symmetric address; `pe < n_pes()`.
#[inline(always)]
pub(crate) unsafe fn peer_signal_address(sig: *mut u64, pe: u32, _call: &CStr) -> *mut u64 {
    // SAFETY: the caller upholds this function's contract, which covers `ptr`'s.
    unsafe { ptr(sig, pe) }
}

/// [`signal_op`] through an address from [`peer_signal_address`]:
/// `nvshmem_fence`, then [`signal_op_relaxed_at`].
///
/// # Safety
/// `sig` and `pe` meet [`peer_signal_address`]'s contract and `at` is what it returned for them.
#[inline(always)]
pub(crate) unsafe fn signal_op_at(at: *mut u64, sig: *mut u64, value: u64, op: SignalOp, pe: u32, call: &CStr) {
    // SAFETY: `nvshmem_fence` takes no arguments; the rest is this fn's contract, which is
    // `signal_op_relaxed_at`'s.
    unsafe {
        nvshmem_fence();
        signal_op_relaxed_at(at, sig, value, op, pe, call)
    }
}

/// [`signal_op_relaxed`] through an address from [`peer_signal_address`]:
/// where it is not null, what `nvshmemx_signal_op` does on a load/store
/// peer (a volatile store for `SET`, a system-scope atomic add for `ADD`)
/// without its per-call translation; else `nvshmemx_signal_op`.
///
/// # Safety
/// As [`signal_op_at`].
#[inline(always)]
pub(crate) unsafe fn signal_op_relaxed_at(at: *mut u64, sig: *mut u64, value: u64, op: SignalOp, pe: u32, call: &CStr) {
    if at.is_null() {
        // SAFETY: `sig` is an aligned symmetric word and `pe` in range (this fn's contract).
        return unsafe { signal_op_relaxed(sig, value, op, pe, call) };
    }
    // SAFETY: `at` is `nvshmem_ptr(sig, pe)`, not null: `sig`'s word on `pe`, mapped for
    // loads and stores and 8-byte aligned.
    unsafe { super::signal_relaxed(at, value, op) }
}

/// `nvshmem_signal_fetch` (a volatile load), then `fence.acq_rel` for the acquire.
///
/// # Safety
/// `sig` is a valid, 8-byte-aligned global address.
#[inline(always)]
pub(crate) unsafe fn signal_fetch(sig: *const u64) -> u64 {
    // SAFETY: `sig` is a valid, aligned `u64` (this fn's contract); NVSHMEM only reads it
    // (the `*mut` is its C signature).
    let v = unsafe { nvshmem_signal_fetch(sig.cast_mut()) };
    ptx::fence_acq_rel();
    v
}

/// Refuses (at compile time) a word that is neither 4 nor 8 bytes.
struct WordCheck<T>(T);
impl<T> WordCheck<T> {
    const OK: () = assert!(
        matches!(size_of::<T>(), 4 | 8),
        "gpushmem-kernels (nvshmem engine): remote atomics need a 4- or 8-byte word (nvshmem_uint{{32,64}}_atomic_*)"
    );
}

/// [`Word::fetch_op`] of `T`'s width.
///
/// # Safety
/// `dest` is a naturally aligned symmetric address of a `T`; `pe < n_pes()`.
#[inline(always)]
pub(crate) unsafe fn atomic_fetch_op<T: AtomicWord>(dest: *mut T, value: T, pe: u32, op: FetchOp, _call: &CStr) -> T {
    let () = WordCheck::<T>::OK;
    let pe = pe as c_int;
    // SAFETY: `dest` is an aligned symmetric `T` and `pe` in range (this fn's contract), so
    // its cast is the same word as a `u{32,64}` of `T`'s width (`WordCheck`), as `Word` needs.
    unsafe {
        if size_of::<T>() == 4 {
            bytemuck::cast(<u32 as Word>::fetch_op(dest.cast(), bytemuck::cast(value), pe, op))
        } else {
            bytemuck::cast(<u64 as Word>::fetch_op(dest.cast(), bytemuck::cast(value), pe, op))
        }
    }
}

/// [`Word::op`] of `T`'s width.
///
/// # Safety
/// `dest` is a naturally aligned symmetric address of a `T`; `pe < n_pes()`.
#[inline(always)]
pub(crate) unsafe fn atomic_op<T: AtomicWord>(dest: *mut T, value: T, pe: u32, op: Op, _call: &CStr) {
    let () = WordCheck::<T>::OK;
    let pe = pe as c_int;
    // SAFETY: `dest` is an aligned symmetric `T` and `pe` in range (this fn's contract), so
    // its cast is the same word as a `u{32,64}` of `T`'s width (`WordCheck`), as `Word` needs.
    unsafe {
        if size_of::<T>() == 4 {
            <u32 as Word>::op(dest.cast(), bytemuck::cast(value), pe, op)
        } else {
            <u64 as Word>::op(dest.cast(), bytemuck::cast(value), pe, op)
        }
    }
}

/// `nvshmem_uint{32,64}_atomic_compare_swap`.
///
/// # Safety
/// `dest` is a naturally aligned symmetric address of a `T`; `pe < n_pes()`.
#[inline(always)]
pub(crate) unsafe fn atomic_compare_swap<T: AtomicWord>(dest: *mut T, cond: T, value: T, pe: u32, _call: &CStr) -> T {
    let () = WordCheck::<T>::OK;
    let pe = pe as c_int;
    // SAFETY: `dest` is an aligned symmetric `T` and `pe` in range (this fn's contract), so
    // its cast is the same word as a `u{32,64}` of `T`'s width (`WordCheck`), as `Word` needs.
    unsafe {
        if size_of::<T>() == 4 {
            bytemuck::cast(<u32 as Word>::compare_swap(dest.cast(), bytemuck::cast(cond), bytemuck::cast(value), pe))
        } else {
            bytemuck::cast(<u64 as Word>::compare_swap(dest.cast(), bytemuck::cast(cond), bytemuck::cast(value), pe))
        }
    }
}

/// `nvshmem_uint{32,64}_atomic_fetch`.
///
/// # Safety
/// `src` is a naturally aligned symmetric address of a `T`; `pe < n_pes()`.
#[inline(always)]
pub(crate) unsafe fn atomic_fetch<T: AtomicWord>(src: *const T, pe: u32, _call: &CStr) -> T {
    let () = WordCheck::<T>::OK;
    let pe = pe as c_int;
    // SAFETY: `src` is an aligned symmetric `T` and `pe` in range (this fn's contract), so
    // its cast is the same word as a `u{32,64}` of `T`'s width (`WordCheck`), as `Word` needs.
    unsafe {
        if size_of::<T>() == 4 {
            bytemuck::cast(<u32 as Word>::fetch(src.cast(), pe))
        } else {
            bytemuck::cast(<u64 as Word>::fetch(src.cast(), pe))
        }
    }
}

/// Float fetch-add as a compare-and-swap loop on the float's bits (NVSHMEM
/// 3.4.5 has no float add): read the word, add, swap in if unchanged, else
/// retry with the value seen. Atomic with respect to other AMOs on the word.
/// `AtomicFloat` is implemented for `f32` (4 bytes) and `f64` (8 bytes) only.
///
/// # Safety
/// `dest` is a naturally aligned symmetric address of a `T`; `pe < n_pes()`.
#[inline(always)]
pub(crate) unsafe fn atomic_fetch_add_float<T: AtomicFloat>(dest: *mut T, value: T, pe: u32, _call: &CStr) -> T {
    let () = WordCheck::<T>::OK;
    let pe = pe as c_int;
    if size_of::<T>() == 4 {
        let (d, v) = (dest.cast::<u32>(), bytemuck::cast::<T, f32>(value));
        // SAFETY: `dest` is an aligned symmetric `T` of 4 bytes and `pe` in range (this fn's
        // contract): `d` is the same word as a `u32`, as `Word` needs.
        let mut old = unsafe { <u32 as Word>::fetch(d, pe) };
        loop {
            // SAFETY: as above.
            let seen = unsafe { <u32 as Word>::compare_swap(d, old, (f32::from_bits(old) + v).to_bits(), pe) };
            if seen == old {
                return bytemuck::cast(old);
            }
            old = seen;
        }
    } else {
        let (d, v) = (dest.cast::<u64>(), bytemuck::cast::<T, f64>(value));
        // SAFETY: `dest` is an aligned symmetric `T` of 8 bytes and `pe` in range (this fn's
        // contract): `d` is the same word as a `u64`, as `Word` needs.
        let mut old = unsafe { <u64 as Word>::fetch(d, pe) };
        loop {
            // SAFETY: as above.
            let seen = unsafe { <u64 as Word>::compare_swap(d, old, (f64::from_bits(old) + v).to_bits(), pe) };
            if seen == old {
                return bytemuck::cast(old);
            }
            old = seen;
        }
    }
}

/// NVSHMEM's step after a wait or test succeeds
/// (`nvshmemi_transfer_syncapi_update_mem`: `__threadfence()`, and on a proxy
/// transport a consistency operation at the target, so that data the NIC
/// wrote before the awaited word is visible). It has no entry point of its
/// own: `nvshmem_uint64_test` runs it whenever its condition holds, and
/// `x >= 0` holds for every `u64`.
#[inline(always)]
pub(crate) fn after_wait() {
    let mut probe = 0u64;
    // SAFETY: `probe` is a valid u64 that the test only reads.
    unsafe { nvshmem_uint64_test(&mut probe, NVSHMEM_CMP_GE, 0) };
}
