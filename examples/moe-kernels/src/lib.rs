//! MoE-style token dispatch and combine for the `moe` example: every PE
//! routes each of its tokens to an "expert" PE, the experts transform what
//! they receive and send every token back to where it came from.
//!
//! The tokens are split into `gridDim.x` *channels*: block `b` of every PE
//! handles its share of that PE's tokens and exchanges them only with block
//! `b` of the other PEs, with its own receive buffer and signal words, so the
//! blocks of a PE never wait for each other.
//!
//! Written with the typed API (`Sym<T>` handles, `shmem::thread`): one
//! `unsafe` block remains, the `p` of a token's origin (see [`moe_rounds`]).
#![no_std]
#![feature(abi_ptx)]

use gpushmem_kernels::{self as shmem, thread, Cmp, SignalOp, Sym};

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
fn wait_all(sig: impl Fn(usize) -> Sym<u64>, value: u64, n: usize) {
    let mut pe = thread::thread_idx() as usize;
    while pe < n {
        sig(pe).signal_wait_until(Cmp::Ge, value);
        pe += thread::block_dim() as usize;
    }
    thread::sync_block();
}

/// One token (`src`, a row of `hidden` `f32`) into `dest` on `pe` by the
/// calling warp, with the signal `sig` on `pe` incremented by one once it has
/// landed. Kept out of line: inlined into the kernel's loops, its copy paths
/// keep too many registers live.
#[inline(never)]
fn put_token(dest: Sym<f32>, src: Sym<f32>, sig: Sym<u64>, pe: u32) {
    dest.put_signal_nbi_warp(src, sig, 1, SignalOp::Add, pe);
}

/// This PE's row of counts (`src`, `n` words) into `dest` on `pe`, with the
/// signal `sig` on `pe` SET to `round`; out of line for the same reason as
/// [`put_token`].
#[inline(never)]
fn put_row(dest: Sym<u32>, src: Sym<u32>, sig: Sym<u64>, round: u64, pe: u32) {
    dest.put_signal(src, sig, round, SignalOp::Set, pe);
}

/// `rounds` rounds of dispatch → expert → combine, numbered `first`, `first + 1`, …
/// (the host keeps counting across launches; the round number routes the
/// tokens and is the value of the count signals). Per round and channel `b`:
///
/// 1. **Route and count**: every token `t` of the channel gets its expert
///    `route(my_pe, t, round)` and a slot among this PE's tokens for that
///    expert (an atomic counter per expert, `atomic_fetch_add` on this PE, so
///    the order within an expert's segment is arbitrary; the token's index
///    travels with it).
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
/// Buffers: `tokens` = `[x; out; acc]`, each `n_tokens × hidden` `f32`;
/// `recv`: `gridDim.x × cap × hidden` and `meta`: `gridDim.x × cap`
/// with `cap = n_pes × ceil(n_tokens / gridDim.x)` (the most a channel can
/// receive); `scratch`: `2 × n_tokens + gridDim.x × n_pes` `u32`; `counts`:
/// `2 × gridDim.x × n_pes × n_pes` `u32` (double-buffered by round parity: a
/// PE may send its row of round `r + 1` while a peer still reads round `r`'s
/// matrix, but not of `r + 2`); `sigs`: `2 × gridDim.x × n_pes + 4 ×
/// gridDim.x` `u64`, zeroed once. `shape` = `n_tokens << 32 | hidden`;
/// `hidden` a multiple of 4 (16-byte rows, so the token copies use 16-byte
/// accesses).
///
/// Why one receive buffer suffices: a PE dispatches round `r + 1` only after
/// it has every PE's count row of `r + 1`, which each PE sends only after
/// finishing round `r` (its expert work and combine puts included).
///
/// Typed handles: every access and call checks its range, lengths and PE
/// (a buffer shorter than the above traps with a message). One `unsafe`
/// block remains: the `p` of a token's origin into `meta` on its expert, a
/// single remote store of a value, which the typed API does not offer (its
/// puts copy from a symmetric source); the handle `meta.elem(pos)` checks
/// the slot and gives the address. Every PE launches it with the same grid,
/// block (a multiple of 32 threads) and arguments, collectively.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "ptx-kernel" fn moe_rounds(
    tokens: Sym<f32>,
    recv: Sym<f32>,
    meta: Sym<u64>,
    scratch: Sym<u32>,
    counts: Sym<u32>,
    sigs: Sym<u64>,
    shape: u64,
    first: u64,
    rounds: u64,
    check: u32,
) {
    let (me, n) = (shmem::my_pe() as usize, shmem::n_pes() as usize);
    let (n_tokens, hidden) = ((shape >> 32) as usize, (shape & 0xffff_ffff) as usize);
    let (blocks, b) = (thread::grid_dim() as usize, thread::block_idx() as usize);
    let (tid, threads) = (thread::thread_idx() as usize, thread::block_dim() as usize);
    let (warp, warps, lane) = (tid / 32, threads / 32, tid % 32);
    let (t0, tl) = share(n_tokens, blocks, b);
    let cap = n * n_tokens.div_ceil(blocks);

    let elems = n_tokens * hidden;
    let (x, out, acc) = (tokens.slice(0, elems), tokens.slice(elems, 2 * elems), tokens.slice(2 * elems, 3 * elems));
    // Row `i` (one token) of a buffer of `hidden`-element rows.
    let token = |buf: Sym<f32>, i: usize| buf.slice(i * hidden, (i + 1) * hidden);
    let recv = recv.slice(b * cap * hidden, (b + 1) * cap * hidden);
    let meta = meta.slice(b * cap, (b + 1) * cap);
    let route_of = scratch.slice(0, n_tokens);
    let slot_of = scratch.slice(n_tokens, 2 * n_tokens);
    let count = scratch.slice(2 * n_tokens + b * n, 2 * n_tokens + (b + 1) * n);
    // Signal words: the count rows [parity][channel][source], then per channel
    // the dispatch and combine counters and two words of this PE's bookkeeping.
    let row_sig = |par: usize| move |src: usize| sigs.elem((par * blocks + b) * n + src);
    let dispatch_sig = sigs.elem(2 * blocks * n + b);
    let combine_sig = sigs.elem(2 * blocks * n + blocks + b);
    let book = sigs.slice(2 * blocks * n + 2 * blocks + 2 * b, 2 * blocks * n + 2 * blocks + 2 * b + 2);
    let matrix = |par: usize, src: usize, dst: usize| counts.read(((par * blocks + b) * n + src) * n + dst);
    let row = |par: usize, src: usize| {
        let at = ((par * blocks + b) * n + src) * n;
        counts.slice(at, at + n)
    };

    for round in first..first + rounds {
        let par = (round % 2) as usize;
        // 1. Route and count.
        let mut d = tid;
        while d < n {
            count.write(d, 0);
            d += threads;
        }
        thread::sync_block();
        let mut i = tid;
        while i < tl {
            let t = t0 + i;
            let d = route(me as u32, t as u32, round, n as u32);
            route_of.write(t, d);
            slot_of.write(t, count.elem(d as usize).atomic_fetch_add(1, me as u32));
            i += threads;
        }
        thread::sync_block();
        // 2. My row of counts to every PE (me included), then wait for every row.
        let mut d = tid;
        while d < n {
            put_row(row(par, me), count, row_sig(par)(me), round, d as u32);
            d += threads;
        }
        wait_all(row_sig(par), round, n);
        // 3. Dispatch: a warp per token, to its slot in its expert's segment for me.
        let mut i = warp;
        while i < tl {
            let t = t0 + i;
            let d = route_of.read(t) as usize;
            let mut pos = slot_of.read(t) as usize;
            for q in 0..me {
                pos += matrix(par, q, d) as usize;
            }
            if lane == 0 {
                let origin = meta.elem(pos);
                // SAFETY: `origin` is one `u64` of the symmetric heap (a checked
                // element of a handle) and `d = route(…) % n_pes < n_pes`.
                unsafe { shmem::p(origin.as_ptr(), ((me as u64) << 32) | t as u64, d as u32) };
            }
            put_token(token(recv, pos), token(x, t), dispatch_sig, d as u32);
            i += warps;
        }
        // Wait for the tokens the matrix says this PE gets (the counter only grows).
        let incoming = (0..n).map(|q| matrix(par, q, me) as usize).sum::<usize>();
        if tid == 0 {
            let target = book.read(0) + incoming as u64;
            book.write(0, target);
            dispatch_sig.signal_wait_until(Cmp::Ge, target);
        }
        thread::sync_block();
        // 4. Expert (× (my_pe + 1)) and combine: each token back to its row on its source.
        let scale = (me + 1) as f32;
        let mut pos = warp;
        while pos < incoming {
            let received = token(recv, pos);
            let mut h = lane;
            while h < hidden {
                received.write(h, received.read(h) * scale);
                h += 32;
            }
            // The whole row is scaled before any lane copies it.
            thread::sync_warp();
            let origin = meta.read(pos);
            let (src, t) = ((origin >> 32) as u32, (origin & 0xffff_ffff) as usize);
            put_token(token(out, t), received, combine_sig, src);
            pos += warps;
        }
        if tid == 0 {
            let target = book.read(1) + tl as u64;
            book.write(1, target);
            combine_sig.signal_wait_until(Cmp::Ge, target);
        }
        thread::sync_block();
        if check != 0 {
            let mut e = t0 * hidden + tid;
            while e < (t0 + tl) * hidden {
                acc.write(e, acc.read(e) + out.read(e));
                e += threads;
            }
        }
        // Everything of this round is read before the next round's count row goes out.
        thread::sync_block();
    }
}
