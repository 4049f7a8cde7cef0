//! Remote atomics (`nvshmem_atomic_*`) on `u32`, `u64`, `i32`, `i64`, plus
//! float `atomic_add` (`f32`, `f64`).
//!
//! Each is one system-scope `atom`/`red` (PTX ISA 9.7.13.5 atom, 9.7.13.6 red)
//! on the peer's address, `.relaxed`: like NVSHMEM's AMOs they are atomic with
//! respect to other AMOs on the same word, and ordered with other operations
//! only by `fence`/`quiet`/barriers. `atomic_fetch` is a `ld.relaxed.sys`,
//! `atomic_set` a `st.relaxed.sys` (atomic at the word).

use crate::debug;
use crate::engine::{self, FetchOp, Op};
use core::ffi::CStr;

pub use crate::word::{AtomicFloat, AtomicWord, Bitwise};

/// Checks (debug mode) the word `dest` on `pe` for `call`.
#[inline(always)]
fn check<T>(dest: *const T, pe: u32, call: &CStr) {
    debug::check_remote_elem(dest, pe, call);
}

macro_rules! fetch_op {
    ($(#[$doc:meta])* $name:ident, $op:ident) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// `dest` is a naturally aligned symmetric address; `pe < n_pes()`.
        #[inline(always)]
        pub unsafe fn $name<T: AtomicWord>(dest: *mut T, value: T, pe: u32) -> T {
            const NAME: &str = concat!(stringify!($name), "\0");
            // SAFETY: NAME ends with its only NUL.
            let call = unsafe { CStr::from_bytes_with_nul_unchecked(NAME.as_bytes()) };
            check(dest, pe, call);
            // SAFETY: the caller upholds this function's contract, which is the engine's:
            // `dest` is a naturally aligned symmetric address and `pe < n_pes()`.
            unsafe { engine::atomic_fetch_op(dest, value, pe, FetchOp::$op, call) }
        }
    };
}

fetch_op!(/// Adds `value` to `dest` on `pe`; returns the old value (`nvshmem_atomic_fetch_add`).
    atomic_fetch_add, Add);
fetch_op!(/// Bitwise-ands `value` into `dest` on `pe`; returns the old value.
    atomic_fetch_and, And);
fetch_op!(/// Bitwise-ors `value` into `dest` on `pe`; returns the old value.
    atomic_fetch_or, Or);
fetch_op!(/// Bitwise-xors `value` into `dest` on `pe`; returns the old value.
    atomic_fetch_xor, Xor);
fetch_op!(/// Stores `value` in `dest` on `pe`; returns the old value (`nvshmem_atomic_swap`).
    atomic_swap, Swap);

/// Adds `value` to `dest` on `pe`, no result (`nvshmem_atomic_add`; a `red`, no round trip).
///
/// # Safety
/// As [`atomic_fetch_add`].
#[inline(always)]
pub unsafe fn atomic_add<T: AtomicWord>(dest: *mut T, value: T, pe: u32) {
    check(dest, pe, c"atomic_add");
    // SAFETY: the caller upholds this function's contract (as `atomic_fetch_add`):
    // `dest` is a naturally aligned symmetric address and `pe < n_pes()`.
    unsafe { engine::atomic_op(dest, value, pe, Op::Add, c"atomic_add") }
}

/// Bitwise-ands `value` into `dest` on `pe` (`nvshmem_atomic_and`; a `red`, no round trip).
///
/// # Safety
/// As [`atomic_fetch_add`].
#[inline(always)]
pub unsafe fn atomic_and<T: AtomicWord>(dest: *mut T, value: T, pe: u32) {
    check(dest, pe, c"atomic_and");
    // SAFETY: the caller upholds this function's contract (as `atomic_fetch_add`):
    // `dest` is a naturally aligned symmetric address and `pe < n_pes()`.
    unsafe { engine::atomic_op(dest, value, pe, Op::And, c"atomic_and") }
}

/// Bitwise-ors `value` into `dest` on `pe` (`nvshmem_atomic_or`).
///
/// # Safety
/// As [`atomic_fetch_add`].
#[inline(always)]
pub unsafe fn atomic_or<T: AtomicWord>(dest: *mut T, value: T, pe: u32) {
    check(dest, pe, c"atomic_or");
    // SAFETY: the caller upholds this function's contract (as `atomic_fetch_add`):
    // `dest` is a naturally aligned symmetric address and `pe < n_pes()`.
    unsafe { engine::atomic_op(dest, value, pe, Op::Or, c"atomic_or") }
}

/// Bitwise-xors `value` into `dest` on `pe` (`nvshmem_atomic_xor`).
///
/// # Safety
/// As [`atomic_fetch_add`].
#[inline(always)]
pub unsafe fn atomic_xor<T: AtomicWord>(dest: *mut T, value: T, pe: u32) {
    check(dest, pe, c"atomic_xor");
    // SAFETY: the caller upholds this function's contract (as `atomic_fetch_add`):
    // `dest` is a naturally aligned symmetric address and `pe < n_pes()`.
    unsafe { engine::atomic_op(dest, value, pe, Op::Xor, c"atomic_xor") }
}

/// Adds one to `dest` on `pe`; returns the old value (`nvshmem_atomic_fetch_inc`).
///
/// # Safety
/// As [`atomic_fetch_add`].
#[inline(always)]
pub unsafe fn atomic_fetch_inc<T: AtomicWord>(dest: *mut T, pe: u32) -> T {
    check(dest, pe, c"atomic_fetch_inc");
    // SAFETY: the caller upholds this function's contract (as `atomic_fetch_add`):
    // `dest` is a naturally aligned symmetric address and `pe < n_pes()`.
    unsafe { engine::atomic_fetch_op(dest, T::ONE, pe, FetchOp::Inc, c"atomic_fetch_inc") }
}

/// Adds one to `dest` on `pe` (`nvshmem_atomic_inc`).
///
/// # Safety
/// As [`atomic_fetch_add`].
#[inline(always)]
pub unsafe fn atomic_inc<T: AtomicWord>(dest: *mut T, pe: u32) {
    check(dest, pe, c"atomic_inc");
    // SAFETY: the caller upholds this function's contract (as `atomic_fetch_add`):
    // `dest` is a naturally aligned symmetric address and `pe < n_pes()`.
    unsafe { engine::atomic_op(dest, T::ONE, pe, Op::Inc, c"atomic_inc") }
}

/// Stores `value` in `dest` on `pe` if it equals `cond`; returns the old
/// value (`nvshmem_atomic_compare_swap`).
///
/// # Safety
/// As [`atomic_fetch_add`].
#[inline(always)]
pub unsafe fn atomic_compare_swap<T: AtomicWord>(dest: *mut T, cond: T, value: T, pe: u32) -> T {
    check(dest, pe, c"atomic_compare_swap");
    // SAFETY: the caller upholds this function's contract (as `atomic_fetch_add`):
    // `dest` is a naturally aligned symmetric address and `pe < n_pes()`.
    unsafe { engine::atomic_compare_swap(dest, cond, value, pe, c"atomic_compare_swap") }
}

/// Reads `src` on `pe` atomically (`nvshmem_atomic_fetch`).
///
/// # Safety
/// As [`atomic_fetch_add`].
#[inline(always)]
pub unsafe fn atomic_fetch<T: AtomicWord>(src: *const T, pe: u32) -> T {
    check(src, pe, c"atomic_fetch");
    // SAFETY: the caller upholds this function's contract (as `atomic_fetch_add`):
    // `src` is a naturally aligned symmetric address and `pe < n_pes()`.
    unsafe { engine::atomic_fetch(src, pe, c"atomic_fetch") }
}

/// Writes `value` to `dest` on `pe` atomically (`nvshmem_atomic_set`).
///
/// # Safety
/// As [`atomic_fetch_add`].
#[inline(always)]
pub unsafe fn atomic_set<T: AtomicWord>(dest: *mut T, value: T, pe: u32) {
    check(dest, pe, c"atomic_set");
    // SAFETY: the caller upholds this function's contract (as `atomic_fetch_add`):
    // `dest` is a naturally aligned symmetric address and `pe < n_pes()`.
    unsafe { engine::atomic_op(dest, value, pe, Op::Set, c"atomic_set") }
}

/// Adds `value` to the float `dest` on `pe`; returns the old value.
///
/// # Safety
/// As [`atomic_fetch_add`].
#[inline(always)]
pub unsafe fn atomic_fetch_add_float<T: AtomicFloat>(dest: *mut T, value: T, pe: u32) -> T {
    check(dest, pe, c"atomic_fetch_add_float");
    // SAFETY: the caller upholds this function's contract (as `atomic_fetch_add`):
    // `dest` is a naturally aligned symmetric address and `pe < n_pes()`.
    unsafe { engine::atomic_fetch_add_float(dest, value, pe, c"atomic_fetch_add_float") }
}
