//! Kernels that gpushmem-perf times (see `bench/perf.rs` for what each figure means).
//!
//! Latency kernels run on thread 0 of one block and chain every operation on
//! the previous one's result (an address or an operand), so the GPU cannot
//! overlap them: the time per iteration is one full round trip.
//!
//! The root build.rs builds this crate for the engine `GPUSHMEM_ENGINE` names
//! (gpushmem-perf runs its one-PE benchmarks on the NVSHMEM engine too). Every
//! kernel here builds for both engines (device teams and collectives lower to
//! NVSHMEM's there too). A kernel that must not (say, one whose PTX would be
//! too large with NVSHMEM's code inlined) goes under
//! `#[cfg(not(gpushmem_nvshmem))]` (as in tests/kernels), and the subcommand
//! that launches it must not be one of the subcommands the NVSHMEM engine runs
//! (bench/perf/opts.rs `ONE_PE`).
#![no_std]
#![feature(abi_ptx, stdarch_nvptx, asm_experimental_arch)]
// Kernel entry points and their helpers: each one's safety contract is its
// launch arguments, which gpushmem-perf (bench/perf/) upholds.
#![allow(clippy::missing_safety_doc)]

use core::arch::nvptx::*;
use gpushmem_kernels as shmem;

/// This thread's chunk of `bytes` when the grid splits them into `units`
/// 16-byte-aligned chunks and this thread's group is chunk `unit`: (offset, length).
#[inline(always)]
fn chunk(bytes: u64, units: u64, unit: u64) -> (usize, usize) {
    let per = bytes.div_ceil(units).next_multiple_of(16);
    let start = (unit * per).min(bytes);
    (start as usize, per.min(bytes - start) as usize)
}

/// Index of this thread's chunk and the number of chunks, for one chunk per
/// thread (`scope` 0), warp (1) or block (2).
///
/// # Safety
/// Only in a kernel (reads the special registers).
#[inline(always)]
unsafe fn unit(scope: u32) -> (u64, u64) {
    let (grid, block, tid) = (_grid_dim_x() as u64, _block_dim_x() as u64, _thread_idx_x() as u64);
    let b = _block_idx_x() as u64;
    match scope {
        0 => (b * block + tid, grid * block),
        1 => (b * (block / 32) + tid / 32, grid * (block / 32)),
        _ => (b, grid),
    }
}

/// Generates one bandwidth kernel: the grid moves `bytes` from `src` to `dest`
/// once, split into one 16-byte-aligned chunk per thread, warp or block (as
/// NVSHMEM's `put_bw`/`get_bw` thread/warp/block variants), then `quiet_block`.
/// One entry point per (operation, scope) and no loop inside: a single kernel
/// with all six bodies, or with an in-kernel repeat loop, takes 96–128
/// registers (`ptxas -v`), too many for 1024-thread blocks (64 at most); these
/// stay under 64.
macro_rules! bw_kernel {
    ($(#[$doc:meta])* $name:ident, $scope:expr, $call:path) => {
        $(#[$doc])*
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(dest: *mut u8, src: *const u8, bytes: u64, pe: u32) {
            let (unit, units) = unit($scope);
            let (start, len) = chunk(bytes, units, unit);
            $call(dest.add(start), src.add(start), len, pe);
            shmem::quiet_block();
        }
    };
}

bw_kernel!(/// Put bandwidth, a chunk per thread: `putmem_nbi` to `pe` (`dest` symmetric).
    bw_put_thread, 0, shmem::putmem_nbi);
bw_kernel!(/// Put bandwidth, a chunk per warp: `putmem_nbi_warp` (`blockDim.x` a multiple of 32).
    bw_put_warp, 1, shmem::putmem_nbi_warp);
bw_kernel!(/// Put bandwidth, a chunk per block: `putmem_nbi_block`.
    bw_put_block, 2, shmem::putmem_nbi_block);
bw_kernel!(/// Get bandwidth, a chunk per thread: `getmem_nbi` from `pe` (`src` symmetric).
    bw_get_thread, 0, shmem::getmem_nbi);
bw_kernel!(/// Get bandwidth, a chunk per warp: `getmem_nbi_warp` (`blockDim.x` a multiple of 32).
    bw_get_warp, 1, shmem::getmem_nbi_warp);
bw_kernel!(/// Get bandwidth, a chunk per block: `getmem_nbi_block`.
    bw_get_block, 2, shmem::getmem_nbi_block);

/// A hand-written block copy of `len` bytes (16-byte aligned ends) through
/// `ptr()`-translated addresses, for the put-bw diagnostics below: `N`
/// 16-byte loads in flight per thread before their stores, the stores
/// `st.global.cs` (streaming: evict first, PTX ISA 9.7.9.9) when `CS`.
/// Not the library's copy (`kernels/src/copy.rs`): this one exists to
/// measure what those two choices would move.
///
/// # Safety
/// Every thread of the block calls it; `dst` and `src` are 16-byte aligned
/// global addresses of `len` bytes each that do not overlap.
#[inline(always)]
unsafe fn hand_copy<const N: usize, const CS: bool>(dst: *mut u8, src: *const u8, len: usize) {
    let units = len / 16;
    let (rank, step) = (_thread_idx_x() as usize, _block_dim_x() as usize);
    let mut u = rank;
    while u + (N - 1) * step < units {
        let mut v = [[0u32; 4]; N];
        for (k, v) in v.iter_mut().enumerate() {
            *v = ld_v4(src.add((u + k * step) * 16));
        }
        for (k, v) in v.into_iter().enumerate() {
            st_v4::<CS>(dst.add((u + k * step) * 16), v);
        }
        u += N * step;
    }
    // The units the loop above leaves, one at a time.
    while u < units {
        st_v4::<false>(dst.add(u * 16), ld_v4(src.add(u * 16)));
        u += step;
    }
    // A ragged tail, byte by byte.
    let mut i = units * 16 + rank;
    while i < len {
        *dst.add(i) = *src.add(i);
        i += step;
    }
}

/// 16 bytes as one `ld.global.v4.u32` (PTX ISA 9.7.9.8).
///
/// # Safety
/// `p` is a valid, 16-byte-aligned global address.
#[inline(always)]
unsafe fn ld_v4(p: *const u8) -> [u32; 4] {
    let (a, b, c, d): (u32, u32, u32, u32);
    core::arch::asm!("ld.global.v4.u32 {{{a}, {b}, {c}, {d}}}, [{p}];",
        a = out(reg32) a, b = out(reg32) b, c = out(reg32) c, d = out(reg32) d, p = in(reg64) p);
    [a, b, c, d]
}

/// 16 bytes as one `st.global.v4.u32`, with the streaming hint `.cs` when
/// `CS` (PTX ISA 9.7.9.9).
///
/// # Safety
/// `p` is a valid, 16-byte-aligned global address.
#[inline(always)]
unsafe fn st_v4<const CS: bool>(p: *mut u8, v: [u32; 4]) {
    let [a, b, c, d] = v;
    if CS {
        core::arch::asm!("st.global.cs.v4.u32 [{p}], {{{a}, {b}, {c}, {d}}};",
            p = in(reg64) p, a = in(reg32) a, b = in(reg32) b, c = in(reg32) c, d = in(reg32) d);
    } else {
        core::arch::asm!("st.global.v4.u32 [{p}], {{{a}, {b}, {c}, {d}}};",
            p = in(reg64) p, a = in(reg32) a, b = in(reg32) b, c = in(reg32) c, d = in(reg32) d);
    }
}

/// Generates one put-bw diagnostic kernel: as `bw_put_block`, but the copy
/// is [`hand_copy`] with `N` loads in flight and streaming stores if `CS`.
macro_rules! bw_put_diag {
    ($(#[$doc:meta])* $name:ident, $n:expr, $cs:expr) => {
        $(#[$doc])*
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(dest: *mut u8, src: *const u8, bytes: u64, pe: u32) {
            let (start, len) = chunk(bytes, _grid_dim_x() as u64, _block_idx_x() as u64);
            hand_copy::<$n, $cs>(shmem::ptr(dest.add(start), pe) as *mut u8, src.add(start), len);
            shmem::quiet_block();
        }
    };
}

bw_put_diag!(/// Put bandwidth diagnostic: a chunk per block, 4 loads in flight, streaming stores.
    bw_put_block_cs, 4, true);
bw_put_diag!(/// Put bandwidth diagnostic: a chunk per block, 8 loads in flight, plain stores.
    bw_put_block_x8, 8, false);

/// Put bandwidth diagnostic: the library's `putmem_nbi_block` over 64 KiB
/// pieces, block `b` taking pieces `b`, `b + grid`, … (the whole grid walks
/// the buffer front to back together, as a grid-stride copy does, instead of
/// each block streaming its own contiguous chunk), then `quiet_block`.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn bw_put_block_gs(dest: *mut u8, src: *const u8, bytes: u64, pe: u32) {
    const PIECE: u64 = 64 << 10;
    let (grid, b) = (_grid_dim_x() as u64, _block_idx_x() as u64);
    let mut start = b * PIECE;
    while start < bytes {
        let len = PIECE.min(bytes - start) as usize;
        shmem::putmem_nbi_block(dest.add(start as usize), src.add(start as usize), len, pe);
        start += grid * PIECE;
    }
    shmem::quiet_block();
}

/// `p` latency: thread 0 does `iters` × (`p` of a `u64` to `dest` on `pe`, then `quiet`).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn p_latency(dest: *mut u64, pe: u32, iters: u32) {
    if _thread_idx_x() != 0 {
        return;
    }
    for i in 0..iters as u64 {
        shmem::p(dest, i, pe);
        shmem::quiet();
    }
}

/// `g` latency: thread 0 does `iters` dependent `g`s of a `u64` from `pe`.
/// `src` (symmetric, at least one word) must hold zeros: each load's value is
/// the index of the next, a pointer chase, so no two loads overlap. The last
/// value goes to `out` (local) so the loads are used.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn g_latency(src: *const u64, out: *mut u64, pe: u32, iters: u32) {
    if _thread_idx_x() != 0 {
        return;
    }
    let mut idx = 0u64;
    for _ in 0..iters {
        idx = shmem::g(src.add(idx as usize), pe);
    }
    *out = idx;
}

/// `iters` × `barrier_all_block`.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn barrier_loop(iters: u32) {
    for _ in 0..iters {
        shmem::barrier_all_block();
    }
}

/// `iters` × `sync_all_block` (a barrier without the quiet).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn sync_all_loop(iters: u32) {
    for _ in 0..iters {
        shmem::sync_all_block();
    }
}

/// Atomic latency: thread 0 does `iters` × `atomic_fetch_add(counter, 1)` on `pe`,
/// each operand depending on the previous result (`1 + (old >> 63)`, always 1 while
/// the counter is below 2^63), so the round trips cannot overlap. The last old
/// value goes to `out` (local).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn atomic_fetch_add_latency(counter: *mut u64, out: *mut u64, pe: u32, iters: u32) {
    if _thread_idx_x() != 0 {
        return;
    }
    let mut old = 0u64;
    for _ in 0..iters {
        old = shmem::atomic_fetch_add(counter, 1 + (old >> 63), pe);
    }
    *out = old;
}

/// Atomic throughput: every thread of the grid does `iters` × `atomic_add(…, 1)`
/// (a `red`, no result) on `pe`: on `counters[global thread index]` when
/// `distinct` is nonzero, else all on `counters[0]`.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn atomic_add_throughput(counters: *mut u64, distinct: u32, pe: u32, iters: u32) {
    let gid = _block_idx_x() as usize * _block_dim_x() as usize + _thread_idx_x() as usize;
    let target = if distinct != 0 { counters.add(gid) } else { counters };
    for _ in 0..iters {
        shmem::atomic_add(target, 1u64, pe);
    }
}

/// Ping-pong between PE 0 and PE 1 (thread 0 of one block each) with the
/// ordering spelled out, to price each choice (`gpushmem-perf scopes`). Each
/// hop: an 8-byte payload store to the peer, then the signal store; the
/// receiver polls its signal relaxed, then orders. `mode`:
/// 0 library `put_signal_nbi` + `signal_wait_until`;
/// 1 relaxed stores, relaxed poll, no fence (the floor; not a valid protocol);
/// 2 `st.release.sys` signal, poll, `fence.acq_rel.sys`;
/// 3 `st.release.gpu` signal, poll, `fence.acq_rel.gpu`;
/// 4 `st.release.sys` signal, poll, one `ld.acquire.sys` of the signal;
/// 5 `st.release.gpu` signal, poll, one `ld.acquire.gpu` of the signal;
/// 6 `fence.acq_rel.gpu` + relaxed signal store, poll, `fence.acq_rel.gpu`;
/// 7 library `signal_op` (SET, no payload) + `signal_wait_until` (NVSHMEM's
/// `signal_op` ping-pong);
/// 8 `st.volatile` stores, `ld.volatile` poll, no fence (NVSHMEM's own polling
/// style; a floor, not a valid protocol);
/// 9 as 5, but polling with `ld.relaxed.gpu` instead of `ld.relaxed.sys`;
/// 10 library `signal_op_relaxed` (SET, no payload) +
/// `signal_wait_until_relaxed` (NVSHMEM's unordered `signal_op` semantics);
/// 11 as 10, but the signal an `st.volatile` to the peer address translated
/// once before the loop (the library's wait, no per-hop translation);
/// 12 as 10, but the wait a bare `ld.volatile` poll (the library's signal, no
/// bounded wait). 11 and 12 split mode 10's cost over its two halves;
/// 13 as 10 through a [`shmem::PeerSignal`] made before the loop
/// (`signal_op_relaxed` without the per-call translation);
/// 14 as 7 through a [`shmem::PeerSignal`] (the ordered `signal_op`);
/// 15 as 13, but the wait keeps two `ld.volatile` polls in flight, issued 200
/// clock cycles apart ([`poll_staggered`]);
/// 16 as 15 with four polls in flight, 100 cycles apart;
/// 17 `putmem_signal_nbi` of 8 bytes + `signal_wait_until`, doing NVSHMEM's
/// work per hop (bench/nvshmem/perf.cu `pingpong_put_signal`): the first side
/// rewrites its source word with the hop's value before each put, the second
/// re-stores the payload it received (a volatile load) into its source before
/// its put; the byte form takes the library's general copy path, as
/// NVSHMEM's `putmem` does (the like-for-like of NVSHMEM's put_signal row);
/// 18 as 17 through the typed one-`u64` form (the one-element fast path of
/// `copy_elems`), to show what that path alone is worth.
///
/// Mode 0 sends `payload[1]`, which it writes once before the loop, so that
/// the time is the put's and not the caller's rewrite of its source (measured:
/// the same 2.26 µs either way, see bench/RESULTS.md; bench/nvshmem/perf.cu's
/// NVSHMEM ping-pong rewrites and echoes its payload every hop, as mode 17
/// does: compare that mode with it, not this one), and
/// traps at the end unless `payload[0]` holds the peer's value. Modes 17 and 18
/// trap at the end unless both sides received the last hop's value.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn pingpong_mode(payload: *mut u64, sig: *mut u64, base: u64, iters: u32, mode: u32) {
    if _thread_idx_x() != 0 {
        return;
    }
    let me = shmem::my_pe();
    let peer = 1 - me;
    let ends = PingPongEnds { recv: payload, src: payload.add(1), dest: payload, my_sig: sig, peer_sig: sig, pe: peer };
    pingpong_dispatch(me == 0, ends, base, iters, mode);
}

/// `pingpong_mode` inside one PE, as NVSHMEM's single-GPU perftest runs it:
/// block 0 and block 1 of one kernel (thread 0 each) are the two sides, each
/// with its own words (`data[2 b]` receives, `data[2 b + 1]` is the source,
/// `sig[b]` its signal), every operation addressed to PE 0. One kernel, so
/// Nsight Compute can profile it (a two-PE ping-pong needs two kernels
/// running at once, which the profiler serializes).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn pingpong_blocks(data: *mut u64, sig: *mut u64, base: u64, iters: u32, mode: u32) {
    if _thread_idx_x() != 0 || _block_idx_x() > 1 {
        return;
    }
    let b = _block_idx_x() as usize;
    let ends = PingPongEnds {
        recv: data.add(2 * b),
        src: data.add(2 * b + 1),
        dest: data.add(2 * (1 - b)),
        my_sig: sig.add(b),
        peer_sig: sig.add(1 - b),
        pe: 0,
    };
    pingpong_dispatch(b == 0, ends, base, iters, mode);
}

/// Picks `pingpong_side`'s instance for `mode` once, before the loop: with
/// the mode a run-time value inside the loop, every hop paid three indirect
/// branches through a jump table (`BRXU`, seen in the Nsight Compute SASS of
/// 2026-12-05), which NVSHMEM's one-purpose ping-pong kernels do not.
#[inline(always)]
unsafe fn pingpong_dispatch(first: bool, e: PingPongEnds, base: u64, iters: u32, mode: u32) {
    match mode {
        0 => pingpong_side::<0>(first, e, base, iters),
        1 => pingpong_side::<1>(first, e, base, iters),
        2 => pingpong_side::<2>(first, e, base, iters),
        3 => pingpong_side::<3>(first, e, base, iters),
        4 => pingpong_side::<4>(first, e, base, iters),
        5 => pingpong_side::<5>(first, e, base, iters),
        6 => pingpong_side::<6>(first, e, base, iters),
        7 => pingpong_side::<7>(first, e, base, iters),
        8 => pingpong_side::<8>(first, e, base, iters),
        9 => pingpong_side::<9>(first, e, base, iters),
        10 => pingpong_side::<10>(first, e, base, iters),
        11 => pingpong_side::<11>(first, e, base, iters),
        12 => pingpong_side::<12>(first, e, base, iters),
        13 => pingpong_side::<13>(first, e, base, iters),
        14 => pingpong_side::<14>(first, e, base, iters),
        15 => pingpong_side::<15>(first, e, base, iters),
        16 => pingpong_side::<16>(first, e, base, iters),
        17 => pingpong_side::<17>(first, e, base, iters),
        18 => pingpong_side::<18>(first, e, base, iters),
        _ => core::arch::nvptx::trap(),
    }
}

/// The words one side of a ping-pong uses; `dest` and `peer_sig` are symmetric
/// addresses on `pe`.
#[derive(Clone, Copy)]
struct PingPongEnds {
    recv: *mut u64,
    src: *mut u64,
    dest: *mut u64,
    my_sig: *mut u64,
    peer_sig: *mut u64,
    pe: u32,
}

/// Polls `sig` until it is `>= v` with `K` `ld.volatile` loads in flight, the
/// first `K` issued `gap` clock cycles apart; each is re-issued as soon as its
/// value was checked, so the stagger persists. A one-load poll sees a store
/// up to one L2 round trip late (the store lands just after a load passed);
/// `K` staggered loads cut that wait to about a `K`-th, if `gap` is near a
/// `K`-th of the round trip. No timeout (a bench floor, like mode 12).
#[inline(always)]
unsafe fn poll_staggered<const K: usize>(sig: *mut u64, v: u64, gap: u32) {
    use core::arch::asm;
    let ld = || {
        let x: u64;
        asm!("ld.volatile.global.u64 {x}, [{p}];", x = out(reg64) x, p = in(reg64) sig);
        x
    };
    let clock = || {
        let c: u32;
        asm!("mov.u32 {c}, %clock;", c = out(reg32) c);
        c
    };
    let mut x = [0u64; K];
    for (k, slot) in x.iter_mut().enumerate() {
        if k > 0 {
            let start = clock();
            while clock().wrapping_sub(start) < gap {}
        }
        *slot = ld();
    }
    loop {
        for slot in x.iter_mut() {
            if *slot >= v {
                return;
            }
            *slot = ld();
        }
    }
}

/// One side of the ping-pong of [`pingpong_mode`] (`first`: this side sends
/// first); traps if mode 0's payload did not arrive.
#[inline(always)]
unsafe fn pingpong_side<const MODE: u32>(first: bool, e: PingPongEnds, base: u64, iters: u32) {
    use core::arch::asm;
    // `MODE` itself inside the closures, not a captured copy: a captured mode is a
    // field of the closure until it is inlined, so every mode's branches count
    // towards its size; once modes 17/18 were added LLVM stopped inlining `send`
    // (a call per hop: the ping-pong measured 0.2-0.5 µs slower on an H100).
    let rpay = shmem::ptr(e.dest, e.pe);
    let rsig = shmem::ptr(e.peer_sig, e.pe);
    let sig = e.my_sig;
    // Modes 13 and 14: the peer's signal word translated once, here.
    let peer = shmem::peer_signal(e.peer_sig, e.pe);
    // Each hop waits, then (on the other side) sends: modes 0 and 7 through the library.
    let wait = move |v: u64| {
        if MODE == 0 || MODE == 7 || MODE == 14 || MODE == 17 || MODE == 18 {
            shmem::signal_wait_until(sig, shmem::Cmp::Ge, v);
            return;
        }
        if MODE == 10 || MODE == 11 || MODE == 13 {
            shmem::signal_wait_until_relaxed(sig, shmem::Cmp::Ge, v);
            return;
        }
        if MODE == 15 {
            poll_staggered::<2>(sig, v, 200);
            return;
        }
        if MODE == 16 {
            poll_staggered::<4>(sig, v, 100);
            return;
        }
        loop {
            let x: u64;
            match MODE {
                8 | 12 => asm!("ld.volatile.global.u64 {x}, [{p}];", x = out(reg64) x, p = in(reg64) sig),
                9 => asm!("ld.relaxed.gpu.global.u64 {x}, [{p}];", x = out(reg64) x, p = in(reg64) sig),
                _ => asm!("ld.relaxed.sys.global.u64 {x}, [{p}];", x = out(reg64) x, p = in(reg64) sig),
            }
            if x >= v {
                break;
            }
        }
        match MODE {
            2 => asm!("fence.acq_rel.sys;"),
            3 | 6 => asm!("fence.acq_rel.gpu;"),
            4 => {
                let _x: u64;
                asm!("ld.acquire.sys.global.u64 {x}, [{p}];", x = out(reg64) _x, p = in(reg64) sig);
            }
            5 | 9 => {
                let _x: u64;
                asm!("ld.acquire.gpu.global.u64 {x}, [{p}];", x = out(reg64) _x, p = in(reg64) sig);
            }
            _ => {}
        }
    };
    let send = move |v: u64| {
        if MODE == 0 {
            shmem::put_signal_nbi(e.dest, e.src, 1, e.peer_sig, v, shmem::SignalOp::Set, e.pe);
            return;
        }
        if MODE == 17 || MODE == 18 {
            // NVSHMEM's per-hop work: the first side writes the hop's value into
            // its source, the second echoes what it received.
            let word = if first { v } else { core::ptr::read_volatile(e.recv) };
            e.src.write(word);
            if MODE == 17 {
                shmem::putmem_signal_nbi(e.dest.cast(), e.src.cast(), 8, e.peer_sig, v, shmem::SignalOp::Set, e.pe);
            } else {
                shmem::put_signal_nbi(e.dest, e.src, 1, e.peer_sig, v, shmem::SignalOp::Set, e.pe);
            }
            return;
        }
        if MODE == 7 {
            shmem::signal_op(e.peer_sig, v, shmem::SignalOp::Set, e.pe);
            return;
        }
        if MODE == 10 || MODE == 12 {
            shmem::signal_op_relaxed(e.peer_sig, v, shmem::SignalOp::Set, e.pe);
            return;
        }
        if MODE == 13 || MODE == 15 || MODE == 16 {
            peer.signal_op_relaxed(v, shmem::SignalOp::Set);
            return;
        }
        if MODE == 14 {
            peer.signal_op(v, shmem::SignalOp::Set);
            return;
        }
        if MODE == 11 {
            asm!("st.volatile.global.u64 [{p}], {v};", p = in(reg64) rsig, v = in(reg64) v);
            return;
        }
        if MODE == 8 {
            asm!("st.volatile.global.u64 [{p}], {v};", p = in(reg64) rpay, v = in(reg64) v);
            asm!("st.volatile.global.u64 [{p}], {v};", p = in(reg64) rsig, v = in(reg64) v);
            return;
        }
        asm!("st.relaxed.sys.global.u64 [{p}], {v};", p = in(reg64) rpay, v = in(reg64) v);
        match MODE {
            2 | 4 => asm!("st.release.sys.global.u64 [{p}], {v};", p = in(reg64) rsig, v = in(reg64) v),
            3 | 5 | 9 => asm!("st.release.gpu.global.u64 [{p}], {v};", p = in(reg64) rsig, v = in(reg64) v),
            6 => asm!("fence.acq_rel.gpu; st.relaxed.gpu.global.u64 [{p}], {v};", p = in(reg64) rsig, v = in(reg64) v),
            _ => asm!("st.relaxed.sys.global.u64 [{p}], {v};", p = in(reg64) rsig, v = in(reg64) v),
        }
    };
    // Mode 0's source word: tagged by the sending side, so the end check sees whose it is.
    const PAYLOAD_TAG: u64 = 0x9a7_10ad_0000;
    let tag = |first: bool| PAYLOAD_TAG + first as u64;
    if MODE == 0 {
        *e.src = tag(first);
    }
    // A half-open u32 range, as NVSHMEM's `for (int i = 0; i < iter; i++)`: an
    // inclusive u64 range (`1..=iters as u64`) kept its exhausted flag and
    // 64-bit bounds in uniform registers, a dozen more instructions a hop in
    // some modes' loops (SASS of `pingpong_blocks`, 2026-12-06).
    let mut v = base;
    for _ in 0..iters {
        v += 1;
        if !first {
            wait(v);
        }
        send(v);
        if first {
            wait(v);
        }
    }
    // Both sides have received the other's last message (the second side
    // waited before its last send, the first after), so the payload is there.
    if MODE == 0 && iters > 0 && *e.recv != tag(!first) {
        core::arch::nvptx::trap();
    }
    // Modes 17 and 18: the last hop's value went there and back.
    if (MODE == 17 || MODE == 18) && iters > 0 && core::ptr::read_volatile(e.recv) != v {
        core::arch::nvptx::trap();
    }
}
