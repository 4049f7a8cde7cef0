//! Kernels of the memory-model litmus tests (tests/gpu/litmus.rs).
//!
//! Every kernel runs many independent instances at once. The host places
//! them at random: each instance has its own cells (32 B each, taken from a
//! shuffled permutation of the buffer), its own pair of PEs and its own
//! threads. A task (two `u64` per thread, see [`Task`]) tells a thread its
//! role in one instance. Values are round-tagged, so one instance runs many
//! rounds in one launch and a stale value is recognised by its round.
//!
//! Counters (`out`, symmetric, this PE, [`OUT_WORDS`] words): `[violations,
//! observations, timeouts]`, then the arrival flags of [`GET_UNFENCED`].
//! Besides, most kernels write one result per task (`res`), so that the
//! host can tell that every task ran and what each one saw.

use core::arch::nvptx::*;
use gpushmem_kernels as shmem;
use shmem::{Cmp, SignalOp};

// The cell size, the shapes and the task layout: the host's very file.
#[path = "litmus_ops.rs"]
mod litmus_ops;
use litmus_ops::*;

/// Task `i` of the table `tasks`.
#[inline(always)]
unsafe fn task_at(tasks: *const u64, i: usize) -> Task {
    Task::from_words(*tasks.add(2 * i), *tasks.add(2 * i + 1))
}

#[inline(always)]
fn global_id() -> usize {
    // SAFETY: special registers.
    unsafe { _block_idx_x() as usize * _block_dim_x() as usize + _thread_idx_x() as usize }
}

/// Adds this thread's counts to `out` (symmetric, this PE).
#[inline(always)]
unsafe fn count(out: *mut u64, violations: u64, observations: u64) {
    let me = shmem::my_pe();
    if violations != 0 {
        shmem::atomic_add(out, violations, me);
    }
    if observations != 0 {
        shmem::atomic_add(out.add(1), observations, me);
    }
}

/// Message passing, `rounds` rounds per instance. Role 1 (writer) sends
/// round r to the reader (its `peer`); the data cell `a` and the flag cell
/// `b` live on the reader. Shapes (`ordered` = 0 drops the ordering step):
/// - `MP_FENCE`: data (4 words = r) by `put_nbi`, `fence`, flag = r by `p`.
/// - `MP_QUIET`: the same with `quiet`.
/// - `MP_SIGNAL`: data and signal (cell b) by `put_signal_nbi` (variant bit 1
///   clear) or `put_signal` (set), SET r (bit 0 clear) or ADD 1 (set: the
///   signal counts rounds). Unordered: `put_nbi` then a plain `p` (SET) or a
///   relaxed `atomic_add` (ADD) of the signal.
/// - `MP_AMO_FLAG`: data by `put_nbi`, `fence`, flag `atomic_add` 1.
/// - `MP_AMO_DATA`: data word `atomic_add` 1, `fence`, flag = r by `p`.
/// - `MP_FENCE_P`: data by one `p` per word, `fence`, flag = r by `p`.
/// - `MP_SIGNAL_OP`: data by `put_nbi`, then `signal_op` SET r / ADD 1
///   (variant bit 0); unordered: `signal_op_relaxed`.
/// - `MP_CROSS_QUIET` / `MP_CROSS_FENCE`: data by `put_nbi` to the PE in the
///   writer's variant bits (not the reader's), `quiet` / `fence`, flag = r
///   by `p` to the reader; the reader's peer is the data's PE, and it reads
///   the data from there with `g`.
///
/// Each round the writer stages the data in its own copy of cell a (the
/// put's source). Role 2 (reader) waits for the flag to pass the last value
/// it saw (`wait_until` / `signal_wait_until`, acquire), then checks that
/// every data word is at least the flag's value (`atomic_fetch` for
/// `MP_AMO_DATA`): a smaller word is a violation. It stops at `rounds`.
///
/// `res[i]` (one word per task): a writer's messages sent, a reader's
/// messages observed (flag values it saw and checked the data against; at
/// least 1 once it ran). Readers skip the rounds the writer sent while they
/// checked, so observed < sent.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn litmus_mp(
    buf: *mut u64,
    tasks: *const u64,
    ntasks: u32,
    rounds: u32,
    shape: u32,
    ordered: u32,
    res: *mut u64,
    out: *mut u64,
) {
    let i = global_id();
    if i >= ntasks as usize {
        return;
    }
    let t = task_at(tasks, i);
    let data = buf.add(t.a * CELL);
    let flag = buf.add(t.b * CELL);
    let ordered = ordered != 0;
    let rounds = rounds as u64;
    if t.role == 1 {
        for r in 1..=rounds {
            if shape == MP_AMO_DATA {
                shmem::atomic_add(data, 1u64, t.peer);
                if ordered {
                    shmem::fence();
                }
                shmem::p(flag, r, t.peer);
                continue;
            }
            if shape == MP_FENCE_P {
                for w in 0..CELL {
                    shmem::p(data.add(w), r, t.peer);
                }
                if ordered {
                    shmem::fence();
                }
                shmem::p(flag, r, t.peer);
                continue;
            }
            for w in 0..CELL {
                data.add(w).write_volatile(r);
            }
            if shape == MP_SIGNAL_OP {
                let (op, v) = if t.var & 1 == 0 { (SignalOp::Set, r) } else { (SignalOp::Add, 1) };
                shmem::put_nbi(data, data, CELL, t.peer);
                if ordered {
                    shmem::signal_op(flag, v, op, t.peer);
                } else {
                    shmem::signal_op_relaxed(flag, v, op, t.peer);
                }
                continue;
            }
            if shape == MP_SIGNAL {
                let (op, v) = if t.var & 1 == 0 { (SignalOp::Set, r) } else { (SignalOp::Add, 1) };
                if !ordered {
                    shmem::put_nbi(data, data, CELL, t.peer);
                    match op {
                        SignalOp::Set => shmem::p(flag, r, t.peer),
                        SignalOp::Add => shmem::atomic_add(flag, 1u64, t.peer),
                    }
                } else if t.var & 2 == 0 {
                    shmem::put_signal_nbi(data, data, CELL, flag, v, op, t.peer);
                } else {
                    shmem::put_signal(data, data, CELL, flag, v, op, t.peer);
                }
                continue;
            }
            let cross = shape == MP_CROSS_QUIET || shape == MP_CROSS_FENCE;
            let data_pe = if cross { t.var as u32 } else { t.peer };
            shmem::put_nbi(data, data, CELL, data_pe);
            if ordered {
                match shape {
                    MP_FENCE | MP_AMO_FLAG | MP_CROSS_FENCE => shmem::fence(),
                    MP_QUIET | MP_CROSS_QUIET => shmem::quiet(),
                    _ => {}
                }
            }
            if shape == MP_AMO_FLAG {
                shmem::atomic_add(flag, 1u64, t.peer);
            } else {
                shmem::p(flag, r, t.peer);
            }
        }
        *res.add(i) = rounds;
    } else if t.role == 2 {
        let me = shmem::my_pe();
        let (mut last, mut violations, mut observations) = (0u64, 0u64, 0u64);
        while last < rounds {
            let v = if shape == MP_SIGNAL || shape == MP_SIGNAL_OP {
                shmem::signal_wait_until(flag, Cmp::Gt, last)
            } else {
                shmem::wait_until(flag as *const u64, Cmp::Gt, last)
            };
            let ok = if shape == MP_AMO_DATA {
                shmem::atomic_fetch(data as *const u64, me) >= v
            } else if shape == MP_CROSS_QUIET || shape == MP_CROSS_FENCE {
                (0..CELL).all(|w| shmem::g(data.add(w) as *const u64, t.peer) >= v)
            } else {
                (0..CELL).all(|w| data.add(w).read_volatile() >= v)
            };
            violations += !ok as u64;
            observations += 1;
            last = v;
        }
        *res.add(i) = observations;
        count(out, violations, observations);
    }
}

/// Spins until `*ptr(var, pe) >= value` (read with `g`), at most `limit_ns`;
/// false on timeout. The lock-step of [`litmus_sb`]; not a documented wait
/// (those are on local memory only), so it carries its own bound.
#[inline(always)]
unsafe fn spin_until_ge(var: *const u64, pe: u32, value: u64, limit_ns: u64) -> bool {
    let start = shmem::thread::global_timer_ns();
    while shmem::g(var, pe) < value {
        if shmem::thread::global_timer_ns().wrapping_sub(start) > limit_ns {
            return false;
        }
    }
    true
}

/// Store buffering, `rounds` ≤ 64 rounds per instance. Both sides (role 1)
/// run: `p(x, r)`; the ordering step; `v = g(y)`; where x is this side's
/// variable (cell a) and y the other side's (cell b). Variant bit 0 / 1: x /
/// y lives on the peer (else on this PE). `order`: 2 `quiet`, 1 `fence`, 0
/// nothing. `res[2 i]`: bit r - 1 is set when this side missed the other's
/// round-r write (`v < r`); the host pairs the two sides' masks: both bits
/// set for one round is the outcome `quiet` forbids. `res[2 i + 1]`: the
/// rounds this side completed (the host checks that every side ran them all).
///
/// `lockstep` ≠ 0: after each round the side waits (at most 10 s) until y
/// has reached r, so both sides start every round together; a timeout
/// counts in `out[2]` and ends the instance.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn litmus_sb(
    buf: *mut u64,
    tasks: *const u64,
    ntasks: u32,
    rounds: u32,
    order: u32,
    lockstep: u32,
    res: *mut u64,
    out: *mut u64,
) {
    let i = global_id();
    if i >= ntasks as usize {
        return;
    }
    let t = task_at(tasks, i);
    if t.role != 1 {
        return;
    }
    let me = shmem::my_pe();
    let x = buf.add(t.a * CELL);
    let y = buf.add(t.b * CELL);
    let hx = if t.var & 1 != 0 { t.peer } else { me };
    let hy = if t.var & 2 != 0 { t.peer } else { me };
    let (mut missed, mut done) = (0u64, 0u64);
    for r in 1..=rounds.min(64) as u64 {
        shmem::p(x, r, hx);
        match order {
            2 => shmem::quiet(),
            1 => shmem::fence(),
            _ => {}
        }
        if shmem::g(y as *const u64, hy) < r {
            missed |= 1 << (r - 1);
        }
        done = r;
        if lockstep != 0 && !spin_until_ge(y, hy, r, 10_000_000_000) {
            shmem::atomic_add(out.add(2), 1u64, me);
            break;
        }
    }
    *res.add(2 * i) = missed;
    *res.add(2 * i + 1) = done;
}

/// [`GET_UNFENCED`]'s arrival, called by every thread of the block: the
/// first thread stores `r` into this PE's flag on every PE (`p`: a plain
/// store), the first `n_pes` threads poll their PE's flag here with plain
/// loads (at most 10 s; false on timeout). No fence anywhere: nothing orders
/// the block's earlier puts before the flag, nor later gets after the poll.
unsafe fn arrive_unfenced(flags: *mut u64, r: u64) -> bool {
    let tid = _thread_idx_x();
    let (me, n) = (shmem::my_pe(), shmem::n_pes());
    shmem::thread::sync_block();
    if tid == 0 {
        for pe in 0..n {
            shmem::p(flags.add(me as usize), r, pe);
        }
    }
    let mut ok = true;
    if tid < n {
        let start = shmem::thread::global_timer_ns();
        while flags.add(tid as usize).read_volatile() < r {
            if shmem::thread::global_timer_ns().wrapping_sub(start) > 10_000_000_000 {
                ok = false;
                break;
            }
        }
    }
    shmem::thread::sync_block();
    ok
}

/// Get after a remote `quiet` + barrier, one block per PE, `rounds` rounds.
/// Writer tasks (`wt`, role 1): stage tag(r) = (r << 32) | cell a, !tag in
/// this PE's own copy of cell a, `put_nbi` both words to the target (peer).
/// Then `order` ([`GET_BARRIER_ALL`] …): `barrier_all_block` (includes
/// `quiet`), `sync_all_block` (arrival only: the `quiet` removed),
/// [`arrive_unfenced`] (an arrival with no fence at all) or only a block
/// sync (no inter-PE ordering at all). Getter tasks (`gt`, role 2): blocking
/// `get` of the two words from the target into this PE's own cell b, which
/// must be tag(r), !tag(r). Then a `sync_all_block` (no barrier: a block
/// sync) so that no writer starts round r + 1 before every get of round r is
/// done. An arrival timeout counts in `out[2]`.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn litmus_get_after_barrier(
    buf: *mut u64,
    wt: *const u64,
    nw: u32,
    gt: *const u64,
    ng: u32,
    rounds: u32,
    order: u32,
    out: *mut u64,
) {
    let tid = _thread_idx_x() as usize;
    let bs = _block_dim_x() as usize;
    let (mut violations, mut observations) = (0u64, 0u64);
    for r in 1..=rounds as u64 {
        let mut j = tid;
        while j < nw as usize {
            let t = task_at(wt, j);
            let stage = buf.add(t.a * CELL);
            let tag = r << 32 | t.a as u64;
            stage.write_volatile(tag);
            stage.add(1).write_volatile(!tag);
            shmem::put_nbi(stage, stage, 2, t.peer);
            j += bs;
        }
        match order {
            GET_BARRIER_ALL => shmem::barrier_all_block(),
            GET_SYNC_ALL => shmem::sync_all_block(),
            GET_UNFENCED => {
                if !arrive_unfenced(out.add(3), r) && tid == 0 {
                    shmem::atomic_add(out.add(2), 1u64, shmem::my_pe());
                }
            }
            _ => shmem::thread::sync_block(),
        }
        let mut j = tid;
        while j < ng as usize {
            let t = task_at(gt, j);
            let got = buf.add(t.b * CELL);
            shmem::get(got, buf.add(t.a * CELL), 2, t.peer);
            let tag = r << 32 | t.a as u64;
            violations += (got.read_volatile() != tag || got.add(1).read_volatile() != !tag) as u64;
            observations += 1;
            j += bs;
        }
        if order == GET_NO_BARRIER {
            shmem::thread::sync_block();
        } else {
            shmem::sync_all_block();
        }
    }
    count(out, violations, observations);
}
