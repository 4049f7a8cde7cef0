//! MoE-style token dispatch and combine for the `moe` example: every PE
//! routes each of its tokens to an "expert" PE, the experts transform what
//! they receive and send every token back to where it came from.
//!
//! The tokens are split into `gridDim.x` *channels*: block `b` of every PE
//! handles its share of that PE's tokens and exchanges them only with block
//! `b` of the other PEs, with its own receive buffer and signal words, so the
//! blocks of a PE never wait for each other.
#![no_std]
#![feature(abi_ptx, stdarch_nvptx)]

use core::arch::nvptx::*;
use core::sync::atomic::{AtomicU32, Ordering};
use gpushmem_kernels as shmem;
use shmem::{Cmp, SignalOp};

mod route;
pub use route::route;

/// Tokens `[start, start + len)` of channel `idx` of `parts` (nearly equal shares).
fn share(total: usize, parts: usize, idx: usize) -> (usize, usize) {
    let per = total.div_ceil(parts);
    let start = (idx * per).min(total);
    (start, per.min(total - start))
}

/// Waits (threads of the block in parallel) until `sig(pe) >= value` for every
/// PE `pe`, then syncs the block so every thread sees what the signals published.
#[inline(always)]
unsafe fn wait_all(sig: impl Fn(usize) -> *mut u64, value: u64, n: usize) {
    let mut pe = _thread_idx_x() as usize;
    while pe < n {
        shmem::signal_wait_until(sig(pe), Cmp::Ge, value);
        pe += _block_dim_x() as usize;
    }
    _syncthreads();
}

/// One token (`hidden` `f32`) to `dest` on `pe` by the calling warp, with the
/// signal on `pe` incremented by one once it has landed. Kept out of line:
/// inlined into the kernel's loops, its copy paths keep too many registers live.
#[inline(never)]
unsafe fn put_token(dest: *mut f32, src: *const f32, hidden: usize, sig: *mut u64, pe: u32) {
    shmem::put_signal_nbi_warp(dest, src, hidden, sig, 1, SignalOp::Add, pe);
}

/// This PE's row of counts (`n` words) to `dest` on `pe`, with the signal on
/// `pe` SET to `round`; out of line for the same reason as [`put_token`].
#[inline(never)]
unsafe fn put_row(dest: *mut u32, src: *const u32, n: usize, sig: *mut u64, round: u64, pe: u32) {
    shmem::put_signal(dest, src, n, sig, round, SignalOp::Set, pe);
}

/// `rounds` rounds of dispatch → expert → combine, numbered `first`, `first + 1`, …
/// (the host keeps counting across launches; the round number routes the
/// tokens and is the value of the count signals). Per round and channel `b`:
///
/// 1. **Route and count**: every token `t` of the channel gets its expert
///    `route(my_pe, t, round)` and a slot among this PE's tokens for that
///    expert (an atomic counter per expert, so the order within an expert's
///    segment is arbitrary; the token's index travels with it).
/// 2. **Exchange counts**: this PE's row of counts goes to every PE
///    (`put_signal`, signal SET to the round), so every PE holds the whole
///    `n × n` matrix of the channel and computes the same offsets: source
///    `p`'s tokens for expert `d` start at `sum(count[q][d] for q < p)` in
///    `d`'s receive buffer.
/// 3. **Dispatch**: a warp per token puts it to its expert at that offset
///    (`put_signal_nbi_warp`, signal ADD 1), after a `p` of its origin
///    (`source PE << 32 | token`); the expert waits until the channel's
///    counter has grown by the number of tokens the matrix says it gets.
/// 4. **Expert and combine**: a warp per received token multiplies it by
///    `my_pe + 1` and puts it back into row `token` of `out` on its source
///    (`put_signal_nbi_warp`, ADD 1); the owner waits until all of its
///    channel's tokens are back. With `check`, it adds them into `acc`.
///
/// Buffers (all symmetric): `tokens` = `[x; out; acc]`, each `n_tokens ×
/// hidden`; `recv`: `gridDim.x × cap × hidden` and `meta`: `gridDim.x × cap`
/// with `cap = n_pes × ceil(n_tokens / gridDim.x)` (the most a channel can
/// receive); `scratch`: `2 × n_tokens + gridDim.x × n_pes` `u32`; `counts`:
/// `2 × gridDim.x × n_pes × n_pes` `u32` (double-buffered by round parity: a
/// PE may send its row of round `r + 1` while a peer still reads round `r`'s
/// matrix, but not of `r + 2`); `sigs`: `2 × gridDim.x × n_pes + 4 ×
/// gridDim.x` `u64`, zeroed once. `shape` = `n_tokens << 32 | hidden`.
///
/// Why one receive buffer suffices: a PE dispatches round `r + 1` only after
/// it has every PE's count row of `r + 1`, which each PE sends only after
/// finishing round `r` (its expert work and combine puts included).
///
/// # Safety
/// Pointers as described; `hidden` a multiple of 4 (16-byte rows); every
/// PE launches it with the same grid, block (a multiple of 32 threads) and
/// arguments, collectively.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "ptx-kernel" fn moe_rounds(
    tokens: *mut f32,
    recv: *mut f32,
    meta: *mut u64,
    scratch: *mut u32,
    counts: *mut u32,
    sigs: *mut u64,
    shape: u64,
    first: u64,
    rounds: u64,
    check: u32,
) {
    let (me, n) = (shmem::my_pe() as usize, shmem::n_pes() as usize);
    let (n_tokens, hidden) = ((shape >> 32) as usize, (shape & 0xffff_ffff) as usize);
    let (blocks, b) = (_grid_dim_x() as usize, _block_idx_x() as usize);
    let (tid, threads) = (_thread_idx_x() as usize, _block_dim_x() as usize);
    let (warp, warps, lane) = (tid / 32, threads / 32, tid % 32);
    let (t0, tl) = share(n_tokens, blocks, b);
    let cap = n * n_tokens.div_ceil(blocks);

    let x = tokens as *const f32;
    let out = tokens.add(n_tokens * hidden);
    let acc = tokens.add(2 * n_tokens * hidden);
    let recv = recv.add(b * cap * hidden);
    let meta = meta.add(b * cap);
    let route_of = scratch;
    let slot_of = scratch.add(n_tokens);
    let count = scratch.add(2 * n_tokens + b * n);
    // Signal words: the count rows [parity][channel][source], then per channel
    // the dispatch and combine counters and two words of this PE's bookkeeping.
    let row_sig = |par: usize| move |src: usize| sigs.add((par * blocks + b) * n + src);
    let dispatch_sig = sigs.add(2 * blocks * n + b);
    let combine_sig = sigs.add(2 * blocks * n + blocks + b);
    let book = sigs.add(2 * blocks * n + 2 * blocks + 2 * b);
    let matrix = |par: usize, src: usize, dst: usize| *counts.add(((par * blocks + b) * n + src) * n + dst);
    let row = |par: usize, src: usize| counts.add(((par * blocks + b) * n + src) * n);

    for round in first..first + rounds {
        let par = (round % 2) as usize;
        // 1. Route and count.
        let mut d = tid;
        while d < n {
            *count.add(d) = 0;
            d += threads;
        }
        _syncthreads();
        let mut i = tid;
        while i < tl {
            let t = t0 + i;
            let d = route(me as u32, t as u32, round, n as u32);
            *route_of.add(t) = d;
            *slot_of.add(t) = AtomicU32::from_ptr(count.add(d as usize)).fetch_add(1, Ordering::Relaxed);
            i += threads;
        }
        _syncthreads();
        // 2. My row of counts to every PE (me included), then wait for every row.
        let mut d = tid;
        while d < n {
            put_row(row(par, me), count, n, row_sig(par)(me), round, d as u32);
            d += threads;
        }
        wait_all(row_sig(par), round, n);
        // 3. Dispatch: a warp per token, to its slot in its expert's segment for me.
        let mut i = warp;
        while i < tl {
            let t = t0 + i;
            let d = *route_of.add(t) as usize;
            let mut pos = *slot_of.add(t) as usize;
            for q in 0..me {
                pos += matrix(par, q, d) as usize;
            }
            if lane == 0 {
                shmem::p(meta.add(pos), ((me as u64) << 32) | t as u64, d as u32);
            }
            put_token(recv.add(pos * hidden), x.add(t * hidden), hidden, dispatch_sig, d as u32);
            i += warps;
        }
        // Wait for the tokens the matrix says this PE gets (the counter only grows).
        let incoming = (0..n).map(|q| matrix(par, q, me) as usize).sum::<usize>();
        if tid == 0 {
            let target = *book + incoming as u64;
            *book = target;
            shmem::signal_wait_until(dispatch_sig, Cmp::Ge, target);
        }
        _syncthreads();
        // 4. Expert (× (my_pe + 1)) and combine: each token back to its row on its source.
        let scale = (me + 1) as f32;
        let mut pos = warp;
        while pos < incoming {
            let token = recv.add(pos * hidden);
            let mut h = lane;
            while h < hidden {
                *token.add(h) *= scale;
                h += 32;
            }
            // The whole row is scaled before any lane copies it.
            shmem::thread::sync_warp();
            let origin = *meta.add(pos);
            let (src, t) = ((origin >> 32) as u32, (origin & 0xffff_ffff) as usize);
            put_token(out.add(t * hidden), token, hidden, combine_sig, src);
            pos += warps;
        }
        if tid == 0 {
            let target = *book.add(1) + tl as u64;
            *book.add(1) = target;
            shmem::signal_wait_until(combine_sig, Cmp::Ge, target);
        }
        _syncthreads();
        if check != 0 {
            let mut e = tid;
            while e < tl * hidden {
                *acc.add(t0 * hidden + e) += *out.add(t0 * hidden + e);
                e += threads;
            }
        }
        // Everything of this round is read before the next round's count row goes out.
        _syncthreads();
    }
}
