//! Waiting on local symmetric memory: the bounded spin every wait is built
//! on, and OpenSHMEM's point-to-point synchronization (`wait_until*`, `test*`).
//!
//! Polls with relaxed system-scope loads (`ld.volatile`, which has the
//! semantics of `ld.relaxed.sys` and polls faster; FACTS: an acquire
//! load in the loop made a ping-pong 2.7× slower) and, once the condition
//! holds, acquires: a single-word wait issues one `ld.acquire` of the word
//! whose value it does not use (compiled to an L1 invalidation, see `spin_word`),
//! the multi-word forms issue `fence.acq_rel` (both at `.gpu` scope when every
//! PE shares this GPU, else `.sys`), so what the writer ordered before its
//! store is visible after the wait. After `state.timeout_ns` nanoseconds
//! without success (`GPUSHMEM_TIMEOUT` on the host; 0 = never) a wait prints
//! the PE, the address, the awaited condition and the last seen value, and
//! traps. `test*` never block.
//!
//! `status` arrays (may be null) exclude element `i` where `status[i] != 0`.
//!
//! These waits are the same on both engines: they read local symmetric
//! memory, which is NVSHMEM's heap on the NVSHMEM engine. There, a wait or
//! test that succeeds also runs NVSHMEM's post-wait step (what its own
//! `wait_until`/`test` do: a `__threadfence()`, and on a proxy (network)
//! transport a consistency operation at the target, so that data written by
//! the NIC before the awaited word is visible). The signal wait
//! (`signal_wait_until`) does not, as NVSHMEM's own does not.

use crate::abi::Cmp;
use crate::state::state;
use crate::word::AtomicWord;
use crate::{debug, engine, ptx};
use core::ffi::CStr;

/// Polls between two reads of `%globaltimer`.
const POLLS_PER_CLOCK_READ: u32 = 64;

/// Spins until `step` returns `Some`, then issues the acquire fence
/// (`fence.acq_rel` at the job's scope). After the timeout calls `report`
/// (which prints; then the kernel traps).
#[inline(always)]
pub(crate) fn spin<R>(step: impl FnMut() -> Option<R>, report: impl Fn(u64)) -> R {
    match poll(step) {
        Ok(r) => {
            acquire();
            r
        }
        Err(timeout) => {
            report(timeout);
            ptx::trap()
        }
    }
}

/// Spins until `step` returns `Some`; no ordering (callers acquire).
/// `Err(timeout_ns)` once the state's timeout has passed without success.
///
/// Every [`POLLS_PER_CLOCK_READ`] polls the loop calls [`clock_check`], a
/// function kept out of line: with the clock read inline behind `n % 64`,
/// ptxas read `%globaltimer` (`CS2R`) on every poll anyway (if-conversion),
/// and a wait paid a clock read and a state load before its second poll
/// (SASS of `pingpong_blocks`, 2026-12-06); an inner loop of 64 polls instead
/// was unrolled 64 times at every wait, growing the test binaries by 12 MB.
/// Now the poll is a load, a compare, a count and two branches. The timeout
/// counts from the first check, 64 polls (microseconds) after the wait began.
///
/// The caller reports the timeout, not a closure called in here: LLVM does
/// not inline a call on this cold path, so a report closure's captures were
/// built in local memory before every wait (five `st.local` per wait, seen
/// in the Nsight Compute profile of the ping-pong).
#[inline(always)]
fn poll<R>(mut step: impl FnMut() -> Option<R>) -> Result<R, u64> {
    let mut start = 0u64;
    let mut n = 0u32;
    loop {
        if let Some(r) = step() {
            return Ok(r);
        }
        n = n.wrapping_add(1);
        if n.is_multiple_of(POLLS_PER_CLOCK_READ) {
            let (s, expired) = clock_check(start);
            if expired != 0 {
                return Err(expired);
            }
            start = s;
        }
    }
}

/// The timeout check of [`poll`]: with `start == 0` (the first check) reads
/// the clock as the start; returns the start and, once more than the state's
/// `timeout_ns` have passed since it, that timeout (else 0; a timeout of 0
/// never expires).
#[inline(never)]
fn clock_check(start: u64) -> (u64, u64) {
    let timeout = state().timeout_ns;
    if timeout == 0 {
        return (start, 0);
    }
    let now = ptx::global_timer_ns();
    if start == 0 {
        return (now, 0);
    }
    (start, if now.wrapping_sub(start) > timeout { timeout } else { 0 })
}

/// What a timed-out single-word wait prints (see [`timed_out`]): the call,
/// the comparison and the awaited value widened to 64 bits, and its signedness.
#[derive(Clone, Copy)]
struct Awaited<'a> {
    what: &'a CStr,
    cmp: &'a CStr,
    value: u64,
    signed: bool,
}

/// Waits until `holds(*word)`: polls with relaxed loads, then acquires with
/// an `ld.acquire` of the word whose value is not used, and returns the
/// polled value that satisfied `holds`.
///
/// Why the acquire's value goes unused: `ptxas` (sm_90) compiles an
/// `ld.acquire` with a dead result to `CCTL.IVALL` alone (invalidate L1 so
/// that later loads see what the releasing writer wrote before its store):
/// no second load, no wait for one. Waiting for its value, as this wait did
/// until 2026-12-03, added one L2 round trip per wait: the library's
/// `signal_op` ping-pong took 1.72 µs against 1.38 µs for the hand-written
/// release/acquire one, whose acquire was dead (SASS read with `nvdisasm`).
///
/// Ordering: the acquire reads the polled value or a later one of the word
/// (same thread, same address: coherence); either way it synchronizes with a
/// release at or after the one the poll observed when the word's writers are
/// one producer or atomic updates (signals, counters, barrier flags). The
/// condition is not re-checked: a word that changes back after satisfying it
/// (another writer resetting it) still ends the wait, as in NVSHMEM.
///
/// # Safety
/// `word` is a valid, naturally aligned global address of a `T`.
#[inline(always)]
unsafe fn spin_word<T: AtomicWord>(word: *const T, holds: impl Fn(T) -> bool + Copy, a: Awaited) -> T {
    // SAFETY: `word` is a valid, naturally aligned `T` (this fn's contract), as both callees need.
    unsafe {
        let v = poll_word(word, holds, a);
        acquire_observed(word);
        v
    }
}

/// Polls `word` with relaxed loads until `holds(*word)`; no acquire, no
/// engine step after it (the relaxed waits, and [`spin_word`] before its
/// acquire). Traps with the timeout message of `a`.
///
/// # Safety
/// `word` is a valid, naturally aligned global address of a `T`.
#[inline(always)]
unsafe fn poll_word<T: AtomicWord>(word: *const T, holds: impl Fn(T) -> bool + Copy, a: Awaited) -> T {
    // `holds` by value (`move`, `Copy`): a captured reference would put the
    // wait's arguments in local memory and re-load them on every poll.
    match poll(move || {
        // SAFETY: `word` is a valid, naturally aligned `T` (this fn's contract).
        let v = unsafe { T::load_volatile(word) };
        holds(v).then_some(v)
    }) {
        Ok(v) => v,
        // SAFETY: as above.
        Err(t) => timed_out(a.what, t, word as u64, a.cmp, a.value, wide(unsafe { T::load(word) }), a.signed),
    }
}

/// Acquire after a relaxed load of `word` saw what the caller waited for: an
/// `ld.acquire` of the word whose value is dropped (compiled to `CCTL.IVALL`
/// alone; see [`spin_word`]). The asm is not `pure`, so it stays.
///
/// # Safety
/// `word` is a valid, naturally aligned global address of a `T`.
#[inline(always)]
unsafe fn acquire_observed<T: AtomicWord>(word: *const T) {
    // SAFETY: `word` is a valid, naturally aligned `T` (this fn's contract).
    let _ = unsafe { T::load_acquire(word) };
    engine::after_wait();
}

/// The acquire of a multi-word wait or test that succeeded: `fence.acq_rel`
/// at the job's scope, then what the engine does after a wait.
#[inline(always)]
fn acquire() {
    ptx::fence_acq_rel();
    engine::after_wait();
}

#[cold]
#[inline(never)]
fn timed_out(what: &CStr, timeout: u64, addr: u64, cmp: &CStr, value: u64, seen: u64, signed: bool) -> ! {
    let args =
        [state().my_pe as u64, what.as_ptr() as u64, timeout / 1_000_000, addr, cmp.as_ptr() as u64, value, seen];
    if signed {
        debug::fail(
            c"gpushmem: PE %llu: %s timed out after %llu ms waiting at 0x%llx for a value %s %lld (last seen %lld); a peer PE may have died or skipped the call\n",
            &args,
        )
    } else {
        debug::fail(
            c"gpushmem: PE %llu: %s timed out after %llu ms waiting at 0x%llx for a value %s %llu (last seen %llu); a peer PE may have died or skipped the call\n",
            &args,
        )
    }
}

fn cmp_cstr(c: Cmp) -> &'static CStr {
    [c"==", c"!=", c">", c">=", c"<", c"<="][c as usize]
}

/// Whether `T` is a signed type (its all-ones value compares below zero).
#[inline(always)]
fn is_signed<T: AtomicWord>() -> bool {
    let ones: T = bytemuck::cast_slice::<u8, T>(&[0xFF; 8][..core::mem::size_of::<T>()])[0];
    ones < T::zeroed()
}

/// Widens a word for a message (sign-extended for signed types).
#[inline(always)]
fn wide<T: AtomicWord>(v: T) -> u64 {
    let b = bytemuck::bytes_of(&v);
    let mut out = [0u8; 8];
    out[..b.len()].copy_from_slice(b);
    let x = u64::from_le_bytes(out);
    let bits = 8 * b.len() as u32;
    // Sign-extend when the type is signed (it compares below zero).
    if bits < 64 && v < T::zeroed() {
        x | (!0u64 << bits)
    } else {
        x
    }
}

/// Waits until `*addr >= target` as a wrapping difference (monotone counters);
/// returns the value seen. Acquire semantics on return.
///
/// # Safety
/// `addr` is a valid, 8-byte-aligned global address.
#[inline(always)]
pub unsafe fn wait_counter_reaches(addr: *const u64, target: u64, what: &CStr) -> u64 {
    // SAFETY: `addr` is a valid, 8-byte-aligned `u64` (this fn's contract), as `spin_word` needs.
    unsafe {
        spin_word(
            addr,
            move |v| (v.wrapping_sub(target) as i64) >= 0,
            Awaited { what, cmp: c">=", value: target, signed: false },
        )
    }
}

/// Waits until `*ivar <cmp> value` (`nvshmem_wait_until`); returns the value
/// that satisfied it. Acquire semantics on return.
///
/// # Safety
/// `ivar` is a naturally aligned address in this PE's symmetric heap (or any global memory).
#[inline(always)]
pub unsafe fn wait_until<T: AtomicWord>(ivar: *const T, cmp: Cmp, value: T) -> T {
    // SAFETY: the caller upholds this function's contract, which is `wait_until_named`'s.
    unsafe { wait_until_named(ivar, cmp, value, c"wait_until") }
}

/// [`wait_until`] whose timeout message names the call `what`.
///
/// # Safety
/// `ivar` is a valid, naturally aligned global address of a `T`.
#[inline(always)]
pub(crate) unsafe fn wait_until_named<T: AtomicWord>(ivar: *const T, cmp: Cmp, value: T, what: &CStr) -> T {
    // SAFETY: `ivar` is a valid, naturally aligned `T` (this fn's contract), as `spin_word` needs.
    unsafe {
        spin_word(
            ivar,
            move |v| cmp.holds(v, value),
            Awaited { what, cmp: cmp_cstr(cmp), value: wide(value), signed: is_signed::<T>() },
        )
    }
}

/// [`wait_until_named`] without the acquire: returns once a relaxed load saw
/// `*ivar <cmp> value`, and orders nothing (the relaxed signal wait).
///
/// # Safety
/// `ivar` is a valid, naturally aligned global address of a `T`.
#[inline(always)]
pub(crate) unsafe fn wait_until_relaxed_named<T: AtomicWord>(ivar: *const T, cmp: Cmp, value: T, what: &CStr) -> T {
    // SAFETY: `ivar` is a valid, naturally aligned `T` (this fn's contract), as `poll_word` needs.
    unsafe {
        poll_word(
            ivar,
            move |v| cmp.holds(v, value),
            Awaited { what, cmp: cmp_cstr(cmp), value: wide(value), signed: is_signed::<T>() },
        )
    }
}

/// [`wait_until_named`] for a signal word (`nvshmem_signal_wait_until`): the
/// same poll and acquire, without the engine's post-wait step, because
/// NVSHMEM's own `nvshmem_signal_wait_until` has none (unlike its
/// `wait_until` and `test`, it does not call
/// `nvshmemi_transfer_syncapi_update_mem`; read in `libnvshmem_device.bc`
/// 3.4.5). The step is a `membar.gl` plus, on a proxy transport, a round trip
/// to the proxy: on the NVSHMEM engine it cost about 1.3 µs of each
/// put_signal ping-pong round trip (Nsight Compute, 2026-12-05). Native: the
/// same code as [`wait_until_named`] (its step is empty).
///
/// # Safety
/// `sig` is a valid, 8-byte-aligned global address.
#[inline(always)]
pub(crate) unsafe fn signal_wait_until_named(sig: *const u64, cmp: Cmp, value: u64, what: &CStr) -> u64 {
    // SAFETY: `sig` is a valid, 8-byte-aligned `u64` (this fn's contract).
    let v = unsafe { wait_until_relaxed_named(sig, cmp, value, what) };
    // The acquire of `spin_word` (a dead `ld.acquire`: `CCTL.IVALL`).
    // SAFETY: as above.
    let _ = unsafe { u64::load_acquire(sig) };
    v
}

/// Whether `*ivar <cmp> value` holds now (`nvshmem_test`); never blocks.
/// Acquire semantics when it returns true (as [`wait_until`]'s).
///
/// # Safety
/// As [`wait_until`].
#[inline(always)]
pub unsafe fn test<T: AtomicWord>(ivar: *const T, cmp: Cmp, value: T) -> bool {
    // SAFETY: `ivar` is a valid, naturally aligned `T` (this fn's contract).
    let ok = cmp.holds(unsafe { T::load(ivar) }, value);
    if ok {
        // SAFETY: as above.
        unsafe { acquire_observed(ivar) };
    }
    ok
}

/// The compared-against value of element `i`: one for all, or one each.
#[derive(Clone, Copy)]
enum Values<T> {
    One(T),
    Each(*const T),
}

impl<T: Copy> Values<T> {
    /// The value element `i` is compared against.
    ///
    /// # Safety
    /// For `Each(p)`, `p` holds at least `i + 1` valid, aligned `T`s.
    #[inline(always)]
    unsafe fn at(self, i: usize) -> T {
        match self {
            Values::One(v) => v,
            // SAFETY: `p` holds more than `i` valid, aligned `T`s (this fn's contract).
            Values::Each(p) => unsafe { *p.add(i) },
        }
    }
}

/// Whether element `i` is excluded by `status`.
///
/// # Safety
/// `status` is null or holds at least `i + 1` valid `i32`s.
#[inline(always)]
unsafe fn excluded(status: *const i32, i: usize) -> bool {
    // SAFETY: read only when `status` is not null; then it holds more than `i` `i32`s
    // (this fn's contract).
    !status.is_null() && unsafe { *status.add(i) } != 0
}

/// Whether `ivars[i] <cmp> v.at(i)` holds now (a relaxed load).
///
/// # Safety
/// `ivars` holds at least `i + 1` valid, naturally aligned `T`s, and `v` is as [`Values::at`]
/// needs for `i`.
#[inline(always)]
unsafe fn holds_at<T: AtomicWord>(ivars: *const T, i: usize, cmp: Cmp, v: Values<T>) -> bool {
    // SAFETY: element `i` of `ivars` and of `v` are valid and aligned (this fn's contract).
    cmp.holds(unsafe { T::load(ivars.add(i)) }, unsafe { v.at(i) })
}

/// First eligible element whose condition does not hold yet, if any.
///
/// # Safety
/// The multi-word contract: `ivars` holds `n` valid, naturally aligned `T`s; `status` is
/// null or holds `n` `i32`s; `v` is `One` or `Each` of `n` valid, aligned `T`s.
#[inline(always)]
unsafe fn first_pending<T: AtomicWord>(
    ivars: *const T,
    n: usize,
    status: *const i32,
    cmp: Cmp,
    v: Values<T>,
) -> Option<usize> {
    // SAFETY: `i < n`, within every array (this fn's contract).
    (0..n).find(|&i| unsafe { !excluded(status, i) && !holds_at(ivars, i, cmp, v) })
}

/// First eligible element whose condition holds, if any.
///
/// # Safety
/// As [`first_pending`].
#[inline(always)]
unsafe fn first_done<T: AtomicWord>(
    ivars: *const T,
    n: usize,
    status: *const i32,
    cmp: Cmp,
    v: Values<T>,
) -> Option<usize> {
    // SAFETY: `i < n`, within every array (this fn's contract).
    (0..n).find(|&i| unsafe { !excluded(status, i) && holds_at(ivars, i, cmp, v) })
}

/// Whether `status` excludes every element.
///
/// # Safety
/// `status` is null or holds `n` valid `i32`s.
#[inline(always)]
unsafe fn all_excluded(n: usize, status: *const i32) -> bool {
    // SAFETY: `i < n`, within `status` (this fn's contract).
    (0..n).all(|i| unsafe { excluded(status, i) })
}

/// Writes the eligible indices whose condition holds into `indices`; returns how many.
///
/// # Safety
/// As [`first_pending`]; `indices` has room for `n` `usize`s.
#[inline(always)]
unsafe fn collect_done<T: AtomicWord>(
    ivars: *const T,
    n: usize,
    indices: *mut usize,
    status: *const i32,
    cmp: Cmp,
    v: Values<T>,
) -> usize {
    let mut k = 0;
    for i in 0..n {
        // SAFETY: `i < n`, within every array; `k <= i < n`, within `indices` (this fn's contract).
        unsafe {
            if !excluded(status, i) && holds_at(ivars, i, cmp, v) {
                *indices.add(k) = i;
                k += 1;
            }
        }
    }
    k
}

/// The timeout message of a multi-word wait, for the first eligible element (or element 0).
///
/// # Safety
/// As [`first_pending`], and `n >= 1`.
#[cold]
#[inline(never)]
unsafe fn report_pending<T: AtomicWord>(
    what: &CStr,
    t: u64,
    ivars: *const T,
    n: usize,
    status: *const i32,
    cmp: Cmp,
    v: Values<T>,
) -> ! {
    // SAFETY: `i < n`, within `status` (this fn's contract).
    let i = (0..n).find(|&i| unsafe { !excluded(status, i) }).unwrap_or(0);
    // SAFETY: `i < n` (`n >= 1` for the fallback 0): element `i` of `ivars` and `v` is valid.
    unsafe { timed_out_at(what, t, ivars, i, cmp, v) }
}

/// The timeout message of a multi-word wait, for element `i`.
///
/// # Safety
/// Element `i` of `ivars` is valid symmetric memory of this PE, and `i` is within `v`.
unsafe fn timed_out_at<T: AtomicWord>(what: &CStr, t: u64, ivars: *const T, i: usize, cmp: Cmp, v: Values<T>) -> ! {
    // SAFETY: element `i` of `ivars` is valid and `i` is within `v` (this fn's contract).
    let (addr, value, seen) = unsafe { (ivars.add(i), v.at(i), T::load(ivars.add(i))) };
    timed_out(what, t, addr as u64, cmp_cstr(cmp), wide(value), wide(seen), is_signed::<T>())
}

/// Waits until every eligible element's condition holds, then acquires.
///
/// # Safety
/// As [`first_pending`].
unsafe fn wait_all<T: AtomicWord>(what: &CStr, ivars: *const T, n: usize, status: *const i32, cmp: Cmp, v: Values<T>) {
    // SAFETY: every call below is on the arrays of this fn's contract, at indices `i < n`
    // that `first_pending` returned; `report_pending` runs only when the timeout hit with
    // no element pending, which needs an eligible element to have been pending, so `n >= 1`.
    unsafe {
        spin(
            || first_pending(ivars, n, status, cmp, v).is_none().then_some(()),
            |t| match first_pending(ivars, n, status, cmp, v) {
                Some(i) => timed_out_at(what, t, ivars, i, cmp, v),
                None => report_pending(what, t, ivars, n, status, cmp, v),
            },
        )
    }
}

/// Waits until some eligible element's condition holds, then acquires; returns its index,
/// or `usize::MAX` when every element is excluded.
///
/// # Safety
/// As [`first_pending`].
unsafe fn wait_any<T: AtomicWord>(
    what: &CStr,
    ivars: *const T,
    n: usize,
    status: *const i32,
    cmp: Cmp,
    v: Values<T>,
) -> usize {
    // SAFETY: the arrays of this fn's contract; past the early return some element is
    // eligible, so `n >= 1` for `report_pending`.
    unsafe {
        if all_excluded(n, status) {
            return usize::MAX;
        }
        spin(|| first_done(ivars, n, status, cmp, v), |t| report_pending(what, t, ivars, n, status, cmp, v))
    }
}

/// Waits until at least one eligible element's condition holds, then acquires; writes
/// their indices to `indices` and returns how many (0 when every element is excluded).
///
/// # Safety
/// As [`collect_done`].
unsafe fn wait_some<T: AtomicWord>(
    what: &CStr,
    ivars: *const T,
    n: usize,
    indices: *mut usize,
    status: *const i32,
    cmp: Cmp,
    v: Values<T>,
) -> usize {
    // SAFETY: the arrays of this fn's contract; past the early return some element is
    // eligible, so `n >= 1` for `report_pending`.
    unsafe {
        if all_excluded(n, status) {
            return 0;
        }
        spin(
            || {
                let k = collect_done(ivars, n, indices, status, cmp, v);
                (k > 0).then_some(k)
            },
            |t| report_pending(what, t, ivars, n, status, cmp, v),
        )
    }
}

/// Waits until every eligible `ivars[i] <cmp> value` (`nvshmem_wait_until_all`).
///
/// # Safety
/// `ivars` holds `n` naturally aligned words; `status` is null or holds `n` ints.
pub unsafe fn wait_until_all<T: AtomicWord>(ivars: *const T, n: usize, status: *const i32, cmp: Cmp, value: T) {
    // SAFETY: the caller upholds this function's contract, which is `wait_all`'s:
    // `ivars` holds `n` aligned words, `status` is null or holds `n` ints.
    unsafe { wait_all(c"wait_until_all", ivars, n, status, cmp, Values::One(value)) }
}

/// Waits until some eligible `ivars[i] <cmp> value`; returns that `i` (the
/// lowest), or `usize::MAX` when every element is excluded (`nvshmem_wait_until_any`).
///
/// # Safety
/// As [`wait_until_all`].
pub unsafe fn wait_until_any<T: AtomicWord>(
    ivars: *const T,
    n: usize,
    status: *const i32,
    cmp: Cmp,
    value: T,
) -> usize {
    // SAFETY: the caller upholds this function's contract, which is `wait_any`'s:
    // `ivars` holds `n` aligned words, `status` is null or holds `n` ints.
    unsafe { wait_any(c"wait_until_any", ivars, n, status, cmp, Values::One(value)) }
}

/// Waits until at least one eligible `ivars[i] <cmp> value`; writes every
/// such `i` (ascending) to `indices` and returns how many (0 when all are
/// excluded) (`nvshmem_wait_until_some`).
///
/// # Safety
/// As [`wait_until_all`]; `indices` has room for `n`.
pub unsafe fn wait_until_some<T: AtomicWord>(
    ivars: *const T,
    n: usize,
    indices: *mut usize,
    status: *const i32,
    cmp: Cmp,
    value: T,
) -> usize {
    // SAFETY: the caller upholds this function's contract, which is `wait_some`'s:
    // `ivars` holds `n` aligned words, `status` is null or holds `n` ints, `indices` has room for `n`.
    unsafe { wait_some(c"wait_until_some", ivars, n, indices, status, cmp, Values::One(value)) }
}

/// [`wait_until_all`] with a value per element (`nvshmem_wait_until_all_vector`).
///
/// # Safety
/// As [`wait_until_all`]; `values` holds `n` words.
pub unsafe fn wait_until_all_vector<T: AtomicWord>(
    ivars: *const T,
    n: usize,
    status: *const i32,
    cmp: Cmp,
    values: *const T,
) {
    // SAFETY: the caller upholds this function's contract, which is `wait_all`'s:
    // `ivars` holds `n` aligned words, `status` is null or holds `n` ints, `values` holds `n` words.
    unsafe { wait_all(c"wait_until_all_vector", ivars, n, status, cmp, Values::Each(values)) }
}

/// [`wait_until_any`] with a value per element.
///
/// # Safety
/// As [`wait_until_all_vector`].
pub unsafe fn wait_until_any_vector<T: AtomicWord>(
    ivars: *const T,
    n: usize,
    status: *const i32,
    cmp: Cmp,
    values: *const T,
) -> usize {
    // SAFETY: the caller upholds this function's contract, which is `wait_any`'s:
    // `ivars` holds `n` aligned words, `status` is null or holds `n` ints, `values` holds `n` words.
    unsafe { wait_any(c"wait_until_any_vector", ivars, n, status, cmp, Values::Each(values)) }
}

/// [`wait_until_some`] with a value per element.
///
/// # Safety
/// As [`wait_until_all_vector`]; `indices` has room for `n`.
pub unsafe fn wait_until_some_vector<T: AtomicWord>(
    ivars: *const T,
    n: usize,
    indices: *mut usize,
    status: *const i32,
    cmp: Cmp,
    values: *const T,
) -> usize {
    // SAFETY: the caller upholds this function's contract, which is `wait_some`'s:
    // `ivars` holds `n` aligned words, `status` is null or holds `n` ints, `values` holds `n` words, `indices` has room for `n`.
    unsafe { wait_some(c"wait_until_some_vector", ivars, n, indices, status, cmp, Values::Each(values)) }
}

/// Whether every eligible `ivars[i] <cmp> value` holds now (`nvshmem_test_all`; true when all are excluded).
///
/// # Safety
/// As [`wait_until_all`].
pub unsafe fn test_all<T: AtomicWord>(ivars: *const T, n: usize, status: *const i32, cmp: Cmp, value: T) -> bool {
    // SAFETY: the caller upholds this function's contract, which is `test_all_of`'s:
    // `ivars` holds `n` aligned words, `status` is null or holds `n` ints.
    unsafe { test_all_of(ivars, n, status, cmp, Values::One(value)) }
}

/// The lowest eligible `i` whose condition holds now, or `usize::MAX` (`nvshmem_test_any`).
///
/// # Safety
/// As [`wait_until_all`].
pub unsafe fn test_any<T: AtomicWord>(ivars: *const T, n: usize, status: *const i32, cmp: Cmp, value: T) -> usize {
    // SAFETY: the caller upholds this function's contract, which is `test_any_of`'s:
    // `ivars` holds `n` aligned words, `status` is null or holds `n` ints.
    unsafe { test_any_of(ivars, n, status, cmp, Values::One(value)) }
}

/// Writes the eligible indices whose condition holds now to `indices`; returns how many (`nvshmem_test_some`).
///
/// # Safety
/// As [`wait_until_some`].
pub unsafe fn test_some<T: AtomicWord>(
    ivars: *const T,
    n: usize,
    indices: *mut usize,
    status: *const i32,
    cmp: Cmp,
    value: T,
) -> usize {
    // SAFETY: the caller upholds this function's contract, which is `test_some_of`'s:
    // `ivars` holds `n` aligned words, `status` is null or holds `n` ints, `indices` has room for `n`.
    unsafe { test_some_of(ivars, n, indices, status, cmp, Values::One(value)) }
}

/// [`test_all`] with a value per element.
///
/// # Safety
/// As [`wait_until_all_vector`].
pub unsafe fn test_all_vector<T: AtomicWord>(
    ivars: *const T,
    n: usize,
    status: *const i32,
    cmp: Cmp,
    values: *const T,
) -> bool {
    // SAFETY: the caller upholds this function's contract, which is `test_all_of`'s:
    // `ivars` holds `n` aligned words, `status` is null or holds `n` ints, `values` holds `n` words.
    unsafe { test_all_of(ivars, n, status, cmp, Values::Each(values)) }
}

/// [`test_any`] with a value per element.
///
/// # Safety
/// As [`wait_until_all_vector`].
pub unsafe fn test_any_vector<T: AtomicWord>(
    ivars: *const T,
    n: usize,
    status: *const i32,
    cmp: Cmp,
    values: *const T,
) -> usize {
    // SAFETY: the caller upholds this function's contract, which is `test_any_of`'s:
    // `ivars` holds `n` aligned words, `status` is null or holds `n` ints, `values` holds `n` words.
    unsafe { test_any_of(ivars, n, status, cmp, Values::Each(values)) }
}

/// [`test_some`] with a value per element.
///
/// # Safety
/// As [`wait_until_some_vector`].
pub unsafe fn test_some_vector<T: AtomicWord>(
    ivars: *const T,
    n: usize,
    indices: *mut usize,
    status: *const i32,
    cmp: Cmp,
    values: *const T,
) -> usize {
    // SAFETY: the caller upholds this function's contract, which is `test_some_of`'s:
    // `ivars` holds `n` aligned words, `status` is null or holds `n` ints, `values` holds `n` words, `indices` has room for `n`.
    unsafe { test_some_of(ivars, n, indices, status, cmp, Values::Each(values)) }
}

/// Whether every eligible element's condition holds now; acquires if so.
///
/// # Safety
/// As [`first_pending`].
unsafe fn test_all_of<T: AtomicWord>(ivars: *const T, n: usize, status: *const i32, cmp: Cmp, v: Values<T>) -> bool {
    // SAFETY: the arrays of this fn's contract.
    let ok = unsafe { first_pending(ivars, n, status, cmp, v) }.is_none();
    if ok {
        acquire();
    }
    ok
}

/// The lowest eligible index whose condition holds now (acquires if any), or `usize::MAX`.
///
/// # Safety
/// As [`first_pending`].
unsafe fn test_any_of<T: AtomicWord>(ivars: *const T, n: usize, status: *const i32, cmp: Cmp, v: Values<T>) -> usize {
    // SAFETY: the arrays of this fn's contract.
    match unsafe { first_done(ivars, n, status, cmp, v) } {
        Some(i) => {
            acquire();
            i
        }
        None => usize::MAX,
    }
}

/// Writes the eligible indices whose condition holds now to `indices` (acquires if any);
/// returns how many.
///
/// # Safety
/// As [`collect_done`].
unsafe fn test_some_of<T: AtomicWord>(
    ivars: *const T,
    n: usize,
    indices: *mut usize,
    status: *const i32,
    cmp: Cmp,
    v: Values<T>,
) -> usize {
    // SAFETY: the arrays of this fn's contract.
    let k = unsafe { collect_done(ivars, n, indices, status, cmp, v) };
    if k > 0 {
        acquire();
    }
    k
}
