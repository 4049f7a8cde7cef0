//! Kernels of the point-to-point tests: signals (a producer/consumer ring),
//! remote atomics, the wait/test family, strided RMA (tests/gpu/signal.rs,
//! atomic.rs, wait.rs).

use core::arch::nvptx::*;
use gpushmem_kernels as shmem;
use shmem::atomic::{AtomicFloat, AtomicWord};
use shmem::{Cmp, SignalOp};

/// The comparison with code `c` (the `repr(u32)` of [`Cmp`]); out-of-range codes mean `Le`.
#[inline(always)]
fn cmp_of(c: u64) -> Cmp {
    Cmp::from_u32(c as u32).unwrap_or(Cmp::Le)
}

/// The signal operation with code `c`: 0 SET, anything else ADD.
#[inline(always)]
fn op_of(c: u32) -> SignalOp {
    SignalOp::from_u32(c).unwrap_or(SignalOp::Add)
}

/// Spins for at least `ns` nanoseconds of `%globaltimer`.
#[inline(always)]
fn delay_ns(ns: u64) {
    let t0 = shmem::thread::global_timer_ns();
    while shmem::thread::global_timer_ns().wrapping_sub(t0) < ns {}
}

// ---------------------------------------------------------------------------
// Producer/consumer ring (signal.rs)
// ---------------------------------------------------------------------------

/// Payload word `i` of message `m` from PE `s` (splitmix64 of the three).
#[inline(always)]
fn payload(s: u32, m: u32, i: u32) -> u32 {
    let mut z = ((s as u64) << 48 ^ (m as u64) << 16 ^ i as u64).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) as u32
}

/// The put-with-signal forms by code: which threads call (1, a warp, the
/// block) and whether the form is the byte (`putmem`) one.
/// 0 put_signal::<u32>, 1 put_signal_nbi::<u32>, 2 put_signal_warp::<u32>,
/// 3 putmem_signal_nbi_warp, 4 putmem_signal_block, 5 put_signal_nbi_block::<u32>,
/// 6 putmem_signal, 7 putmem_signal_nbi, 8 put_signal_block::<u32>, 9 put_signal_nbi_warp::<u32>.
#[inline(always)]
fn form_group_size(form: u32) -> u32 {
    match form {
        2 | 3 | 9 => 32,
        4 | 5 | 8 => block_threads(),
        _ => 1,
    }
}

#[inline(always)]
fn block_threads() -> u32 {
    // SAFETY: reads a special register.
    unsafe { _block_dim_x() as u32 }
}

#[inline(always)]
fn form_sync(form: u32) {
    match form {
        2 | 3 | 9 => shmem::thread::sync_warp(),
        4 | 5 | 8 => shmem::thread::sync_block(),
        _ => {}
    }
}

#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn put_signal_form(
    form: u32,
    dest: *mut u32,
    src: *const u32,
    words: usize,
    sig: *mut u64,
    value: u64,
    op: SignalOp,
    pe: u32,
) {
    let (d, s, b) = (dest as *mut u8, src as *const u8, words * 4);
    match form {
        0 => shmem::put_signal(dest, src, words, sig, value, op, pe),
        1 => shmem::put_signal_nbi(dest, src, words, sig, value, op, pe),
        2 => shmem::put_signal_warp(dest, src, words, sig, value, op, pe),
        3 => shmem::putmem_signal_nbi_warp(d, s, b, sig, value, op, pe),
        4 => shmem::putmem_signal_block(d, s, b, sig, value, op, pe),
        5 => shmem::put_signal_nbi_block(dest, src, words, sig, value, op, pe),
        6 => shmem::putmem_signal(d, s, b, sig, value, op, pe),
        7 => shmem::putmem_signal_nbi(d, s, b, sig, value, op, pe),
        8 => shmem::put_signal_block(dest, src, words, sig, value, op, pe),
        _ => shmem::put_signal_nbi_warp(dest, src, words, sig, value, op, pe),
    }
}

/// A ring of PEs, each sending `msgs` messages of `words` u32 to PE me + 1
/// through a ring buffer of `slots` slots in the receiver's heap.
///
/// `buf` (symmetric, u32): `[ring: slots × words][stage: slots × words]` — the
/// receiver's slots, and the sender's local staging copy of each slot.
/// `ctl` (symmetric, u64, zeroed): `[slot_sig: slots][ack][recv errors, received, send errors, sent]`.
///
/// Block 0 sends: message m goes to slot m % slots with `put_signal` form
/// `form` and signal op `op` (SET: value m + 1; ADD: value 1, so the slot's
/// signal counts its uses); before reusing a slot it waits until the receiver
/// has acknowledged message m - slots (`ack` ≥ m - slots + 1).
/// Block 1 (thread 0) receives: waits for each slot's signal, checks the
/// signal's value and every payload word, then acknowledges to the sender
/// with `signal_op` (SET m + 1, or ADD 1, as `op`); odd messages through a
/// `PeerSignal` made before the loop (the same release, translated once).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn p2p_pipeline(
    buf: *mut u32,
    ctl: *mut u64,
    msgs: u32,
    slots: u32,
    words: u32,
    form: u32,
    op: u32,
) {
    let slots = slots.max(1);
    let op = op_of(op);
    let me = shmem::my_pe();
    let n = shmem::n_pes();
    let t = _thread_idx_x() as u32;
    let ring = buf;
    let stage = buf.add((slots * words) as usize);
    let slot_sig = ctl;
    let ack = ctl.add(slots as usize);
    let out = ctl.add(slots as usize + 1);
    if _block_idx_x() == 0 {
        // Sender.
        let gsize = form_group_size(form);
        if t >= gsize {
            return;
        }
        let to = (me + 1) % n;
        for m in 0..msgs {
            let k = m % slots;
            if m >= slots && t == 0 {
                // Slot k is free once message m - slots has been consumed.
                shmem::signal_wait_until(ack, Cmp::Ge, (m - slots + 1) as u64);
            }
            let st = stage.add((k * words) as usize);
            let mut i = t;
            while i < words {
                *st.add(i as usize) = payload(me, m, i);
                i += gsize;
            }
            // The staging words written by every thread (and the leader's ack
            // wait) precede the group's put.
            form_sync(form);
            let value = match op {
                SignalOp::Set => m as u64 + 1,
                SignalOp::Add => 1,
            };
            put_signal_form(
                form,
                ring.add((k * words) as usize),
                st,
                words as usize,
                slot_sig.add(k as usize),
                value,
                op,
                to,
            );
        }
        if t == 0 {
            shmem::signal_wait_until(ack, Cmp::Ge, msgs as u64);
            let a = shmem::signal_fetch(ack);
            *out.add(2) = (a != msgs as u64) as u64;
            *out.add(3) = msgs as u64;
        }
    } else if t == 0 {
        // Receiver.
        let from = (me + n - 1) % n;
        let mut errors = 0u64;
        // Odd messages are acked through a PeerSignal (translated once), even
        // ones through signal_op: both must release the slot's reads.
        let ack_peer = shmem::peer_signal(ack, from);
        for m in 0..msgs {
            let k = m % slots;
            let want = match op {
                SignalOp::Set => m as u64 + 1,
                SignalOp::Add => (m / slots) as u64 + 1,
            };
            let seen = shmem::signal_wait_until(slot_sig.add(k as usize), Cmp::Ge, want);
            if seen != want {
                errors += 1;
            }
            let r = ring.add((k * words) as usize);
            for i in 0..words {
                if r.add(i as usize).read() != payload(from, m, i) {
                    errors += 1;
                }
            }
            let value = match op {
                SignalOp::Set => m as u64 + 1,
                SignalOp::Add => 1,
            };
            if m % 2 == 1 {
                ack_peer.signal_op(value, op);
            } else {
                shmem::signal_op(ack, value, op, from);
            }
        }
        // Each slot's final signal: its last message + 1 (SET) or its number of uses (ADD).
        let mut k = 0;
        while k < slots && k < msgs {
            let uses = (msgs - k).div_ceil(slots);
            let want = match op {
                SignalOp::Set => (k + (uses - 1) * slots) as u64 + 1,
                SignalOp::Add => uses as u64,
            };
            if shmem::signal_fetch(slot_sig.add(k as usize)) != want {
                errors += 1;
            }
            k += 1;
        }
        *out = errors;
        *out.add(1) = msgs as u64;
    }
}

/// `signal_wait_until(sig, ==, 1)` for a signal that never comes (timeout test).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn signal_wait_forever(sig: *mut u64) {
    if _thread_idx_x() == 0 {
        shmem::signal_wait_until(sig, Cmp::Eq, 1);
    }
}

// ---------------------------------------------------------------------------
// Atomics (atomic.rs)
// ---------------------------------------------------------------------------

/// Every thread: `iters` × `atomic_fetch_add(counter, delta, PE 0)`, each old
/// value stored at `out[global thread × iters + j]` (this PE's array).
#[inline(always)]
unsafe fn amo_contend<T: AtomicWord>(counter: *mut T, out: *mut T, iters: u32, delta: T) {
    let gid = _block_idx_x() as usize * _block_dim_x() as usize + _thread_idx_x() as usize;
    for j in 0..iters as usize {
        *out.add(gid * iters as usize + j) = shmem::atomic_fetch_add(counter, delta, 0);
    }
}

#[no_mangle]
pub unsafe extern "ptx-kernel" fn amo_contend_u32(counter: *mut u32, out: *mut u32, iters: u32, delta: u32) {
    amo_contend(counter, out, iters, delta)
}

#[no_mangle]
pub unsafe extern "ptx-kernel" fn amo_contend_u64(counter: *mut u64, out: *mut u64, iters: u32, delta: u64) {
    amo_contend(counter, out, iters, delta)
}

#[no_mangle]
pub unsafe extern "ptx-kernel" fn amo_contend_i32(counter: *mut i32, out: *mut i32, iters: u32, delta: i32) {
    amo_contend(counter, out, iters, delta)
}

#[no_mangle]
pub unsafe extern "ptx-kernel" fn amo_contend_i64(counter: *mut i64, out: *mut i64, iters: u32, delta: i64) {
    amo_contend(counter, out, iters, delta)
}

/// As [`amo_contend`], with `atomic_fetch_add_float`.
#[inline(always)]
unsafe fn amo_contend_float<T: AtomicFloat>(counter: *mut T, out: *mut T, iters: u32, delta: T) {
    let gid = _block_idx_x() as usize * _block_dim_x() as usize + _thread_idx_x() as usize;
    for j in 0..iters as usize {
        *out.add(gid * iters as usize + j) = shmem::atomic_fetch_add_float(counter, delta, 0);
    }
}

#[no_mangle]
pub unsafe extern "ptx-kernel" fn amo_contend_f32(counter: *mut f32, out: *mut f32, iters: u32, delta: f32) {
    amo_contend_float(counter, out, iters, delta)
}

#[no_mangle]
pub unsafe extern "ptx-kernel" fn amo_contend_f64(counter: *mut f64, out: *mut f64, iters: u32, delta: f64) {
    amo_contend_float(counter, out, iters, delta)
}

/// A spin lock on PE 0's `lock` word (0 = free), taken `iters` times by lane
/// 0 of every warp: test (`atomic_fetch`), then `atomic_compare_swap(0 → tag)`,
/// `fence` (acquire); inside, checks that the lock holds this warp's tag and
/// increments PE 0's `counter` with a plain `g` then `p`; `quiet` completes
/// the update before `atomic_set(lock, 0)` releases.
///
/// `out` (symmetric, u64, this PE): `[acquisitions, exclusion violations, timeouts]`.
/// A spin longer than `timeout_ns` counts a timeout and ends this warp's loop.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn amo_lock(
    lock: *mut u64,
    counter: *mut u64,
    iters: u32,
    out: *mut u64,
    timeout_ns: u64,
) {
    if !_thread_idx_x().is_multiple_of(32) {
        return;
    }
    let me = shmem::my_pe();
    let warp = (_block_idx_x() as u64 * _block_dim_x() as u64 + _thread_idx_x() as u64) / 32;
    let tag = ((me as u64 + 1) << 32) | (warp + 1);
    let mut done = 0u64;
    let mut violations = 0u64;
    let mut timeouts = 0u64;
    'outer: for _ in 0..iters {
        let start = shmem::thread::global_timer_ns();
        loop {
            if shmem::atomic_fetch(lock, 0) == 0 && shmem::atomic_compare_swap(lock, 0u64, tag, 0) == 0 {
                break;
            }
            if shmem::thread::global_timer_ns().wrapping_sub(start) > timeout_ns {
                timeouts += 1;
                break 'outer;
            }
        }
        shmem::fence();
        if shmem::atomic_fetch(lock, 0) != tag {
            violations += 1;
        }
        let v = shmem::g(counter, 0);
        shmem::p(counter, v + 1, 0);
        shmem::quiet();
        shmem::atomic_set(lock, 0u64, 0);
        done += 1;
    }
    shmem::atomic_add(out, done, me);
    shmem::atomic_add(out.add(1), violations, me);
    shmem::atomic_add(out.add(2), timeouts, me);
}

/// One thread runs every remote atomic on `w` on PE `pe`, in a fixed order,
/// recording each returned old value (or, after the no-result forms, an
/// `atomic_fetch`) in `out[0..17]`. The host replays the sequence.
#[inline(always)]
unsafe fn amo_ops<T: AtomicWord>(w: *mut T, out: *mut T, pe: u32, x0: T, a: T, b: T, c: T) {
    if _thread_idx_x() != 0 || _block_idx_x() != 0 {
        return;
    }
    shmem::atomic_set(w, x0, pe);
    *out = shmem::atomic_fetch(w, pe); // x0
    *out.add(1) = shmem::atomic_swap(w, a, pe); // x0; w = a
    *out.add(2) = shmem::atomic_compare_swap(w, a, b, pe); // a (succeeds); w = b
    *out.add(3) = shmem::atomic_compare_swap(w, a, c, pe); // b (fails); w = b
    *out.add(4) = shmem::atomic_fetch(w, pe); // b
    *out.add(5) = shmem::atomic_fetch_inc(w, pe); // b; w = b + 1
    shmem::atomic_inc(w, pe);
    *out.add(6) = shmem::atomic_fetch(w, pe); // b + 2
    *out.add(7) = shmem::atomic_fetch_add(w, c, pe); // b + 2; w = b + 2 + c
    shmem::atomic_add(w, c, pe);
    *out.add(8) = shmem::atomic_fetch(w, pe); // b + 2 + 2c
    shmem::atomic_set(w, a, pe);
    *out.add(9) = shmem::atomic_fetch_and(w, b, pe); // a; w = a & b
    shmem::atomic_and(w, c, pe);
    *out.add(10) = shmem::atomic_fetch(w, pe); // a & b & c
    shmem::atomic_set(w, a, pe);
    *out.add(11) = shmem::atomic_fetch_or(w, b, pe); // a; w = a | b
    shmem::atomic_or(w, c, pe);
    *out.add(12) = shmem::atomic_fetch(w, pe); // a | b | c
    shmem::atomic_set(w, a, pe);
    *out.add(13) = shmem::atomic_fetch_xor(w, b, pe); // a; w = a ^ b
    shmem::atomic_xor(w, c, pe);
    *out.add(14) = shmem::atomic_fetch(w, pe); // a ^ b ^ c
    *out.add(15) = shmem::atomic_compare_swap(w, *out.add(14), x0, pe); // a ^ b ^ c (succeeds); w = x0
    *out.add(16) = shmem::atomic_fetch(w, pe); // x0
}

#[no_mangle]
pub unsafe extern "ptx-kernel" fn amo_ops_u32(w: *mut u32, out: *mut u32, pe: u32, x0: u32, a: u32, b: u32, c: u32) {
    amo_ops(w, out, pe, x0, a, b, c)
}

#[no_mangle]
pub unsafe extern "ptx-kernel" fn amo_ops_u64(w: *mut u64, out: *mut u64, pe: u32, x0: u64, a: u64, b: u64, c: u64) {
    amo_ops(w, out, pe, x0, a, b, c)
}

#[no_mangle]
pub unsafe extern "ptx-kernel" fn amo_ops_i32(w: *mut i32, out: *mut i32, pe: u32, x0: i32, a: i32, b: i32, c: i32) {
    amo_ops(w, out, pe, x0, a, b, c)
}

#[no_mangle]
pub unsafe extern "ptx-kernel" fn amo_ops_i64(w: *mut i64, out: *mut i64, pe: u32, x0: i64, a: i64, b: i64, c: i64) {
    amo_ops(w, out, pe, x0, a, b, c)
}

// ---------------------------------------------------------------------------
// Wait / test family (wait.rs)
// ---------------------------------------------------------------------------

/// u64 words per case record (see [`wait_table`]).
const REC: usize = 24;
/// Elements per case.
const ELEMS: usize = 8;
/// u64 result slots per case: three stages of `[result, indices × 8]`.
const OUT: usize = 27;

/// The test form of a case: writes its result (and `test_some`'s indices) at `o`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn run_test<T: AtomicWord>(
    form: u64,
    vector: bool,
    ivars: *const T,
    n: usize,
    status: *const i32,
    cmp: Cmp,
    value: T,
    values: *const T,
    o: *mut u64,
) {
    let idx = o.add(1) as *mut usize;
    *o = match (form, vector) {
        (0, _) => shmem::test(ivars, cmp, value) as u64,
        (1, false) => shmem::test_all(ivars, n, status, cmp, value) as u64,
        (1, true) => shmem::test_all_vector(ivars, n, status, cmp, values) as u64,
        (2, false) => shmem::test_any(ivars, n, status, cmp, value) as u64,
        (2, true) => shmem::test_any_vector(ivars, n, status, cmp, values) as u64,
        (_, false) => shmem::test_some(ivars, n, idx, status, cmp, value) as u64,
        (_, true) => shmem::test_some_vector(ivars, n, idx, status, cmp, values) as u64,
    };
}

/// The wait form of a case: writes its result at `o` (`wait_until`: the value, in the low bytes;
/// `wait_until_all*`: 1 once it returned; `_any`: the index; `_some`: the count, then the indices).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn run_wait<T: AtomicWord>(
    form: u64,
    vector: bool,
    ivars: *const T,
    n: usize,
    status: *const i32,
    cmp: Cmp,
    value: T,
    values: *const T,
    o: *mut u64,
) {
    let idx = o.add(1) as *mut usize;
    match (form, vector) {
        (0, _) => {
            *o = 0;
            (o as *mut T).write(shmem::wait_until(ivars, cmp, value));
        }
        (1, false) => {
            shmem::wait_until_all(ivars, n, status, cmp, value);
            *o = 1;
        }
        (1, true) => {
            shmem::wait_until_all_vector(ivars, n, status, cmp, values);
            *o = 1;
        }
        (2, false) => *o = shmem::wait_until_any(ivars, n, status, cmp, value) as u64,
        (2, true) => *o = shmem::wait_until_any_vector(ivars, n, status, cmp, values) as u64,
        (_, false) => *o = shmem::wait_until_some(ivars, n, idx, status, cmp, value) as u64,
        (_, true) => *o = shmem::wait_until_some_vector(ivars, n, idx, status, cmp, values) as u64,
    }
}

/// A table of wait/test cases. Case c has the record `recs[c * 24..]`:
/// `[form (0 wait_until/test, 1 all, 2 any, 3 some), vector, cmp, n, use status,
/// wait, nsets, value (T in the low bytes), set indices × 8, set values × 8 (T in the low bytes)]`,
/// and its elements at `ivars/status/values[c * 8..]`.
///
/// Block 0, thread 0 (the waiter): per case, the test form (stage 0 of
/// `out[c * 27..]`); then, if the case has sets, tells the setter (`ready` on
/// the setter's PE = c + 1); then, if `wait`, the wait form (stage 1); then the
/// test form again (stage 2).
/// Block 1, thread 0 (the setter, for PE me + shift): per case with sets,
/// waits for `ready` ≥ c + 1, then makes each set with `atomic_set` on that PE,
/// 2 µs apart.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn wait_table<T: AtomicWord>(
    recs: *const u64,
    ivars: *mut T,
    status: *const i32,
    values: *const T,
    out: *mut u64,
    ready: *mut u64,
    ncases: u32,
    shift: u32,
) {
    if _thread_idx_x() != 0 {
        return;
    }
    let n_pes = shmem::n_pes();
    let me = shmem::my_pe();
    if _block_idx_x() == 0 {
        let setter = (me + n_pes - shift % n_pes) % n_pes;
        for c in 0..ncases as usize {
            let r = recs.add(c * REC);
            let form = *r;
            let vector = *r.add(1) != 0;
            let cmp = cmp_of(*r.add(2));
            let n = *r.add(3) as usize;
            let st = if *r.add(4) != 0 { status.add(c * ELEMS) } else { core::ptr::null() };
            let wait = *r.add(5) != 0;
            let nsets = *r.add(6);
            let value = (r.add(7) as *const T).read();
            let iv = ivars.add(c * ELEMS) as *const T;
            let vals = values.add(c * ELEMS);
            let o = out.add(c * OUT);
            run_test(form, vector, iv, n, st, cmp, value, vals, o);
            if nsets > 0 {
                shmem::signal_op(ready, c as u64 + 1, SignalOp::Set, setter);
            }
            if wait {
                run_wait(form, vector, iv, n, st, cmp, value, vals, o.add(9));
            }
            run_test(form, vector, iv, n, st, cmp, value, vals, o.add(18));
        }
    } else {
        let target = (me + shift) % n_pes;
        for c in 0..ncases as usize {
            let r = recs.add(c * REC);
            let nsets = *r.add(6) as usize;
            if nsets == 0 {
                continue;
            }
            shmem::signal_wait_until(ready, Cmp::Ge, c as u64 + 1);
            for s in 0..nsets.min(ELEMS) {
                let i = *r.add(8 + s) as usize;
                let v = (r.add(16 + s) as *const T).read();
                delay_ns(2000);
                shmem::atomic_set(ivars.add(c * ELEMS + i), v, target);
            }
        }
    }
}

#[no_mangle]
pub unsafe extern "ptx-kernel" fn wait_table_u32(
    recs: *const u64,
    ivars: *mut u32,
    status: *const i32,
    values: *const u32,
    out: *mut u64,
    ready: *mut u64,
    ncases: u32,
    shift: u32,
) {
    wait_table(recs, ivars, status, values, out, ready, ncases, shift)
}

#[no_mangle]
pub unsafe extern "ptx-kernel" fn wait_table_u64(
    recs: *const u64,
    ivars: *mut u64,
    status: *const i32,
    values: *const u64,
    out: *mut u64,
    ready: *mut u64,
    ncases: u32,
    shift: u32,
) {
    wait_table(recs, ivars, status, values, out, ready, ncases, shift)
}

#[no_mangle]
pub unsafe extern "ptx-kernel" fn wait_table_i32(
    recs: *const u64,
    ivars: *mut i32,
    status: *const i32,
    values: *const i32,
    out: *mut u64,
    ready: *mut u64,
    ncases: u32,
    shift: u32,
) {
    wait_table(recs, ivars, status, values, out, ready, ncases, shift)
}

#[no_mangle]
pub unsafe extern "ptx-kernel" fn wait_table_i64(
    recs: *const u64,
    ivars: *mut i64,
    status: *const i32,
    values: *const i64,
    out: *mut u64,
    ready: *mut u64,
    ncases: u32,
    shift: u32,
) {
    wait_table(recs, ivars, status, values, out, ready, ncases, shift)
}

// ---------------------------------------------------------------------------
// Strided RMA (run by tests/gpu/signal.rs, `strided_ring`)
// ---------------------------------------------------------------------------

/// One block: PE me does strided op `op` towards PE (me + shift) % n
/// (0 iput, 1 iput_warp, 2 iput_block, 3 iget, 4 iget_warp, 5 iget_block;
/// puts: `dest` symmetric, gets: `src` symmetric), then quiet + barrier.
/// `dest`/`src` point at element 0 (the high end for a negative stride).
macro_rules! strided_ring {
    ($name:ident, $t:ty) => {
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(
            op: u32,
            dest: *mut $t,
            src: *const $t,
            dst: i64,
            sst: i64,
            nelems: u64,
            shift: u32,
        ) {
            let pe = (shmem::my_pe() + shift) % shmem::n_pes();
            let t = _thread_idx_x();
            let (dst, sst, n) = (dst as isize, sst as isize, nelems as usize);
            match op {
                0 if t == 0 => shmem::iput(dest, src, dst, sst, n, pe),
                1 if t < 32 => shmem::iput_warp(dest, src, dst, sst, n, pe),
                2 => shmem::iput_block(dest, src, dst, sst, n, pe),
                3 if t == 0 => shmem::iget(dest, src, dst, sst, n, pe),
                4 if t < 32 => shmem::iget_warp(dest, src, dst, sst, n, pe),
                5 => shmem::iget_block(dest, src, dst, sst, n, pe),
                _ => {}
            }
            shmem::quiet_block();
            shmem::barrier_all_block();
        }
    };
}

strided_ring!(strided_ring_u16, u16);
strided_ring!(strided_ring_u64, u64);
