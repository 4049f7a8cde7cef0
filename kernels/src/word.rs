//! The words the atomics work on: [`AtomicWord`] (`u32`, `u64`, `i32`, `i64`)
//! and [`AtomicFloat`] (`f32`, `f64`), each operation one inline-PTX
//! `atom`/`red`/`ld`/`st` on a load/store address (PTX ISA 9.7.13.5 atom,
//! 9.7.13.6 red, 9.7.8.8 ld, 9.7.8.10 st).
//!
//! A layer below both [`crate::atomic`] (the device API, which calls the
//! engine) and `engine` (which works on these words), so that the engine does
//! not import `atomic`. Public as `atomic::{AtomicWord, AtomicFloat, Bitwise}`.

use core::arch::asm;

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
