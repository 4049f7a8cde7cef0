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
use core::arch::asm;
use core::ffi::CStr;

/// A word the remote atomics work on. Implemented for `u32`, `u64`, `i32`, `i64`.
pub trait AtomicWord: bytemuck::Pod + PartialOrd {
    /// `atom.add`, returns the old value.
    ///
    /// # Safety
    /// `p` is a valid, naturally aligned global address: this GPU's memory or
    /// a peer's heap mapped into it.
    unsafe fn fetch_add(p: *mut Self, v: Self) -> Self;
    /// `red.add`.
    ///
    /// # Safety
    /// `p` is a valid, naturally aligned global address: this GPU's memory or
    /// a peer's heap mapped into it.
    unsafe fn add(p: *mut Self, v: Self);
    /// `red.and` / `red.or` / `red.xor`: no result, no round trip.
    ///
    /// # Safety
    /// `p` is a valid, naturally aligned global address: this GPU's memory or
    /// a peer's heap mapped into it.
    unsafe fn red_bitwise(p: *mut Self, v: Self, op: Bitwise);
    /// `atom.and`, returns the old value.
    ///
    /// # Safety
    /// `p` is a valid, naturally aligned global address: this GPU's memory or
    /// a peer's heap mapped into it.
    unsafe fn fetch_and(p: *mut Self, v: Self) -> Self;
    /// `atom.or`, returns the old value.
    ///
    /// # Safety
    /// `p` is a valid, naturally aligned global address: this GPU's memory or
    /// a peer's heap mapped into it.
    unsafe fn fetch_or(p: *mut Self, v: Self) -> Self;
    /// `atom.xor`, returns the old value.
    ///
    /// # Safety
    /// `p` is a valid, naturally aligned global address: this GPU's memory or
    /// a peer's heap mapped into it.
    unsafe fn fetch_xor(p: *mut Self, v: Self) -> Self;
    /// `atom.exch`, returns the old value.
    ///
    /// # Safety
    /// `p` is a valid, naturally aligned global address: this GPU's memory or
    /// a peer's heap mapped into it.
    unsafe fn swap(p: *mut Self, v: Self) -> Self;
    /// `atom.cas`: stores `v` if the word equals `cond`; returns the old value.
    ///
    /// # Safety
    /// `p` is a valid, naturally aligned global address: this GPU's memory or
    /// a peer's heap mapped into it.
    unsafe fn compare_swap(p: *mut Self, cond: Self, v: Self) -> Self;
    /// `ld.relaxed.sys`.
    ///
    /// # Safety
    /// `p` is a valid, naturally aligned global address: this GPU's memory or
    /// a peer's heap mapped into it.
    unsafe fn load(p: *const Self) -> Self;
    /// `ld.acquire`, at the job's scope (`.gpu` when every PE shares this GPU, else `.sys`).
    ///
    /// # Safety
    /// `p` is a valid, naturally aligned global address: this GPU's memory or
    /// a peer's heap mapped into it.
    unsafe fn load_acquire(p: *const Self) -> Self;
    /// `ld.volatile`: by the PTX ISA the same memory synchronization semantics
    /// as `ld.relaxed.sys` (see `ld`, "Memory Consistency Model"). The waits
    /// poll with it, as NVSHMEM's do: a ping-pong polling `ld.volatile` was 5–10%
    /// faster than one polling `ld.relaxed.sys` in three runs (bench/RESULTS.md).
    ///
    /// # Safety
    /// `p` is a valid, naturally aligned global address: this GPU's memory or
    /// a peer's heap mapped into it.
    unsafe fn load_volatile(p: *const Self) -> Self;
    /// `st.volatile`: the same semantics as `st.relaxed.sys` (PTX ISA), as
    /// [`AtomicWord::load_volatile`]; the relaxed signal stores with it.
    ///
    /// # Safety
    /// `p` is a valid, naturally aligned global address: this GPU's memory or
    /// a peer's heap mapped into it.
    unsafe fn store_volatile(p: *mut Self, v: Self);
    /// `st.relaxed.sys`.
    ///
    /// # Safety
    /// `p` is a valid, naturally aligned global address: this GPU's memory or
    /// a peer's heap mapped into it.
    unsafe fn store(p: *mut Self, v: Self);
    /// The value one.
    const ONE: Self;
}

/// The bitwise operation of [`AtomicWord::red_bitwise`].
#[derive(Clone, Copy)]
pub enum Bitwise {
    /// `&`
    And,
    /// `|`
    Or,
    /// `^`
    Xor,
}

macro_rules! atomic_word {
    ($t:ty, $reg:ident, $u:literal, $b:literal) => {
        impl AtomicWord for $t {
            const ONE: Self = 1;
            #[inline(always)]
            unsafe fn fetch_add(p: *mut Self, v: Self) -> Self {
                let old: Self;
                // SAFETY: `p` is a valid, naturally aligned global address of a `Self` (this
                // fn's contract); the asm reads and writes only that word, atomically (PTX ISA 9.7.13.5 atom).
                unsafe { asm!(concat!("atom.relaxed.sys.global.add.", $u, " {o}, [{p}], {v};"), o = out($reg) old, p = in(reg64) p, v = in($reg) v) };
                old
            }
            #[inline(always)]
            unsafe fn add(p: *mut Self, v: Self) {
                // SAFETY: `p` is a valid, naturally aligned global address of a `Self` (this
                // fn's contract); the asm reads and writes only that word, atomically (PTX ISA 9.7.13.6 red).
                unsafe { asm!(concat!("red.relaxed.sys.global.add.", $u, " [{p}], {v};"), p = in(reg64) p, v = in($reg) v) };
            }
            #[inline(always)]
            unsafe fn red_bitwise(p: *mut Self, v: Self, op: Bitwise) {
                // SAFETY: `p` is a valid, naturally aligned global address of a `Self` (this
                // fn's contract); each asm reads and writes only that word, atomically (PTX ISA 9.7.13.6 red).
                unsafe {
                    match op {
                        Bitwise::And => asm!(concat!("red.relaxed.sys.global.and.", $b, " [{p}], {v};"), p = in(reg64) p, v = in($reg) v),
                        Bitwise::Or => asm!(concat!("red.relaxed.sys.global.or.", $b, " [{p}], {v};"), p = in(reg64) p, v = in($reg) v),
                        Bitwise::Xor => asm!(concat!("red.relaxed.sys.global.xor.", $b, " [{p}], {v};"), p = in(reg64) p, v = in($reg) v),
                    }
                }
            }
            #[inline(always)]
            unsafe fn fetch_and(p: *mut Self, v: Self) -> Self {
                let old: Self;
                // SAFETY: `p` is a valid, naturally aligned global address of a `Self` (this
                // fn's contract); the asm reads and writes only that word, atomically (PTX ISA 9.7.13.5 atom).
                unsafe { asm!(concat!("atom.relaxed.sys.global.and.", $b, " {o}, [{p}], {v};"), o = out($reg) old, p = in(reg64) p, v = in($reg) v) };
                old
            }
            #[inline(always)]
            unsafe fn fetch_or(p: *mut Self, v: Self) -> Self {
                let old: Self;
                // SAFETY: `p` is a valid, naturally aligned global address of a `Self` (this
                // fn's contract); the asm reads and writes only that word, atomically (PTX ISA 9.7.13.5 atom).
                unsafe { asm!(concat!("atom.relaxed.sys.global.or.", $b, " {o}, [{p}], {v};"), o = out($reg) old, p = in(reg64) p, v = in($reg) v) };
                old
            }
            #[inline(always)]
            unsafe fn fetch_xor(p: *mut Self, v: Self) -> Self {
                let old: Self;
                // SAFETY: `p` is a valid, naturally aligned global address of a `Self` (this
                // fn's contract); the asm reads and writes only that word, atomically (PTX ISA 9.7.13.5 atom).
                unsafe { asm!(concat!("atom.relaxed.sys.global.xor.", $b, " {o}, [{p}], {v};"), o = out($reg) old, p = in(reg64) p, v = in($reg) v) };
                old
            }
            #[inline(always)]
            unsafe fn swap(p: *mut Self, v: Self) -> Self {
                let old: Self;
                // SAFETY: `p` is a valid, naturally aligned global address of a `Self` (this
                // fn's contract); the asm reads and writes only that word, atomically (PTX ISA 9.7.13.5 atom).
                unsafe { asm!(concat!("atom.relaxed.sys.global.exch.", $b, " {o}, [{p}], {v};"), o = out($reg) old, p = in(reg64) p, v = in($reg) v) };
                old
            }
            #[inline(always)]
            unsafe fn compare_swap(p: *mut Self, cond: Self, v: Self) -> Self {
                let old: Self;
                // SAFETY: `p` is a valid, naturally aligned global address of a `Self` (this
                // fn's contract); the asm reads and writes only that word, atomically (PTX ISA 9.7.13.5 atom).
                unsafe { asm!(concat!("atom.relaxed.sys.global.cas.", $b, " {o}, [{p}], {c}, {v};"), o = out($reg) old, p = in(reg64) p, c = in($reg) cond, v = in($reg) v) };
                old
            }
            #[inline(always)]
            unsafe fn load(p: *const Self) -> Self {
                let v: Self;
                // SAFETY: `p` is a valid, naturally aligned global address of a `Self` (this
                // fn's contract); the asm reads only that word (PTX ISA 9.7.8.8 ld).
                unsafe { asm!(concat!("ld.relaxed.sys.global.", $b, " {v}, [{p}];"), v = out($reg) v, p = in(reg64) p) };
                v
            }
            #[inline(always)]
            unsafe fn load_acquire(p: *const Self) -> Self {
                let v: Self;
                // SAFETY: `p` is a valid, naturally aligned global address of a `Self` (this
                // fn's contract); either asm reads only that word (PTX ISA 9.7.8.8 ld).
                unsafe {
                    if crate::ptx::one_gpu() {
                        asm!(concat!("ld.acquire.gpu.global.", $b, " {v}, [{p}];"), v = out($reg) v, p = in(reg64) p);
                    } else {
                        asm!(concat!("ld.acquire.sys.global.", $b, " {v}, [{p}];"), v = out($reg) v, p = in(reg64) p);
                    }
                }
                v
            }
            #[inline(always)]
            unsafe fn load_volatile(p: *const Self) -> Self {
                let v: Self;
                // SAFETY: `p` is a valid, naturally aligned global address of a `Self` (this
                // fn's contract); the asm reads only that word (PTX ISA 9.7.8.8 ld).
                unsafe { asm!(concat!("ld.volatile.global.", $b, " {v}, [{p}];"), v = out($reg) v, p = in(reg64) p) };
                v
            }
            #[inline(always)]
            unsafe fn store_volatile(p: *mut Self, v: Self) {
                // SAFETY: `p` is a valid, naturally aligned global address of a `Self` (this
                // fn's contract); the asm writes only that word (PTX ISA 9.7.8.10 st).
                unsafe { asm!(concat!("st.volatile.global.", $b, " [{p}], {v};"), p = in(reg64) p, v = in($reg) v) };
            }
            #[inline(always)]
            unsafe fn store(p: *mut Self, v: Self) {
                // SAFETY: `p` is a valid, naturally aligned global address of a `Self` (this
                // fn's contract); the asm writes only that word (PTX ISA 9.7.8.10 st).
                unsafe { asm!(concat!("st.relaxed.sys.global.", $b, " [{p}], {v};"), p = in(reg64) p, v = in($reg) v) };
            }
        }
    };
}

// `atom.add` has no .s64: two's complement makes .u64 the same operation.
atomic_word!(u32, reg32, "u32", "b32");
atomic_word!(i32, reg32, "s32", "b32");
atomic_word!(u64, reg64, "u64", "b64");
atomic_word!(i64, reg64, "u64", "b64");

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

/// A float the hardware adds atomically (`atom.add.f32`/`.f64`, sm_60+).
pub trait AtomicFloat: bytemuck::Pod {
    /// `atom.add`, returns the old value.
    ///
    /// # Safety
    /// `p` is a valid, naturally aligned global address: this GPU's memory or
    /// a peer's heap mapped into it.
    unsafe fn fetch_add(p: *mut Self, v: Self) -> Self;
}

impl AtomicFloat for f32 {
    #[inline(always)]
    unsafe fn fetch_add(p: *mut Self, v: Self) -> Self {
        let old: f32;
        // SAFETY: `p` is a valid, naturally aligned global address of an `f32` (this fn's
        // contract); the asm reads and writes only that word, atomically (PTX ISA 9.7.13.5 atom).
        unsafe {
            asm!("atom.relaxed.sys.global.add.f32 {o}, [{p}], {v};", o = out(reg32) old, p = in(reg64) p, v = in(reg32) v)
        };
        old
    }
}

impl AtomicFloat for f64 {
    #[inline(always)]
    unsafe fn fetch_add(p: *mut Self, v: Self) -> Self {
        let old: f64;
        // SAFETY: `p` is a valid, naturally aligned global address of an `f64` (this fn's
        // contract); the asm reads and writes only that word, atomically (PTX ISA 9.7.13.5 atom).
        unsafe {
            asm!("atom.relaxed.sys.global.add.f64 {o}, [{p}], {v};", o = out(reg64) old, p = in(reg64) p, v = in(reg64) v)
        };
        old
    }
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
