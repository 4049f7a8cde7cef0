//! All-reduce (sum of `f32`) written by hand with `put_signal_nbi_block` and
//! `signal_wait_until`, and the same operation through the library's
//! `reduce_grid`, for the `allreduce` example.
//!
//! Every kernel runs `iters` all-reduces back to back, numbered `first`,
//! `first + 1`, … (the host keeps counting across launches). The number is
//! the signal value, so signal words only grow and never need a reset, and
//! it picks the input: all-reduce `it` reduces version `it % VERSIONS` of
//! `src` (`src` holds `VERSIONS` buffers of `n_elems`, each starting at a
//! multiple of 4 elements), so data left over
//! from an earlier all-reduce never looks right by accident. With `check`
//! set, every all-reduce also adds its result into `acc`, which the host
//! compares with a CPU reference.
//!
//! The hand-written kernels run with any number of blocks (at most
//! [`MAX_BLOCKS`]): block `b` of every PE handles the same share of the
//! buffer and only talks to block `b` of the other PEs, with its own signal
//! words, so blocks never wait for each other.
//!
//! Written with the typed API only (`Sym<T>` handles, `shmem::thread`): no
//! `unsafe` block, no raw pointer; every access and call checks its range,
//! lengths and PE, so a buffer shorter than a kernel's docs ask for traps
//! with a message.
#![no_std]
#![feature(abi_ptx)]

use gpushmem_kernels::{self as shmem, thread, Cmp, SignalOp, Sym};
#[cfg(not(gpushmem_nvshmem))]
use gpushmem_kernels::{ReduceOp, TEAM_WORLD};

/// Signal words reserved per source PE (one per block): launch at most this many blocks.
pub const MAX_BLOCKS: usize = 32;

/// Input versions in `src` (the host writes them all).
const VERSIONS: u64 = 3;

/// Distance in elements between the input versions in `src` and between
/// the one-shot slots: `n_elems` rounded up to 4 elements, so that every
/// buffer starts 16-byte aligned and copies use vector accesses.
fn stride(n_elems: usize) -> usize {
    n_elems.next_multiple_of(4)
}

/// The input of all-reduce `it`: version `it % VERSIONS` of `src`, `n_elems` elements.
fn version(src: Sym<f32>, it: u64, n_elems: usize) -> Sym<f32> {
    let at = (it % VERSIONS) as usize * stride(n_elems);
    src.slice(at, at + n_elems)
}

/// Elements `[start, start + len)` of part `idx` when `total` is cut into parts of `per`.
fn part(total: usize, per: usize, idx: usize) -> (usize, usize) {
    let start = (idx * per).min(total);
    (start, per.min(total - start))
}

/// Share `idx` of `parts` nearly equal shares of `total` elements, each a
/// multiple of 4 elements (16 bytes) so that copies stay vectorized.
fn share(total: usize, parts: usize, idx: usize) -> (usize, usize) {
    part(total, total.div_ceil(parts).next_multiple_of(4), idx)
}

/// `put_signal_nbi_block` of `src` into `dest` on `pe` (signal `sig` SET to
/// `value`), kept out of line: inlined into the kernels' loops its copy paths
/// would keep too many registers live.
#[inline(never)]
fn put_signal_block(dest: Sym<f32>, src: Sym<f32>, sig: Sym<u64>, value: u64, pe: usize) {
    dest.put_signal_nbi_block(src, sig, value, SignalOp::Set, pe as u32);
}

/// Waits (threads of the block in parallel, one signal each) until the
/// signal of every PE but this one, `sig(pe)`, has reached `value`; then
/// syncs the block, so every thread sees what those signals published.
#[inline(always)]
fn wait_peers(sig: impl Fn(usize) -> Sym<u64>, value: u64, me: usize, n: usize) {
    let mut pe = thread::thread_idx() as usize;
    while pe < n {
        if pe != me {
            sig(pe).signal_wait_until(Cmp::Ge, value);
        }
        pe += thread::block_dim() as usize;
    }
    thread::sync_block();
}

/// One-shot all-reduce: block `b` puts its share of the input into slot
/// `[it % 2][my_pe]` of every other PE (`put_signal_nbi_block`, signal SET to
/// `it`), waits for the `n - 1` signals of its own slots, and sums the
/// share in PE order (its own input for its own term) into `out`.
///
/// `src`: `3 × stride(n_elems)` elements; `out`, `acc`: `n_elems`;
/// `slots`: `2 × n_pes × stride(n_elems)` (double-buffered by parity: a
/// PE can start all-reduce `it + 1` while a slower peer still reads the slots
/// of `it`, but not `it + 2`, which needs that peer's data of `it + 1`).
/// `sigs`: zeroed once, `2 × n_pes × MAX_BLOCKS` words.
///
/// Typed handles only: no `unsafe` here. Every PE launches it with the same
/// grid (≤ [`MAX_BLOCKS`] blocks) and arguments, collectively.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "ptx-kernel" fn allreduce_one_shot(
    src: Sym<f32>,
    out: Sym<f32>,
    acc: Sym<f32>,
    slots: Sym<f32>,
    sigs: Sym<u64>,
    n_elems: u64,
    first: u64,
    iters: u64,
    check: u32,
) {
    let (me, n) = (shmem::my_pe() as usize, shmem::n_pes() as usize);
    let total = n_elems as usize;
    let stride = stride(total);
    let b = thread::block_idx() as usize;
    let (tid, threads) = (thread::thread_idx() as usize, thread::block_dim() as usize);
    let (start, len) = share(total, thread::grid_dim() as usize, b);
    for it in first..first + iters {
        let par = (it % 2) as usize;
        let input = version(src, it, total);
        // Where this block's part of the slot that holds PE `pe`'s input starts, and its signal.
        let slot = |pe: usize| (par * n + pe) * stride + start;
        let sig = |pe: usize| sigs.elem((par * n + pe) * MAX_BLOCKS + b);
        let (dest, mine) = (slots.slice(slot(me), slot(me) + len), input.slice(start, start + len));
        // Start with the next PE so that not every PE writes to PE 0 first.
        for k in 1..n {
            put_signal_block(dest, mine, sig(me), it, (me + k) % n);
        }
        wait_peers(sig, it, me, n);
        let mut i = tid;
        while i < len {
            let mut sum = 0.0f32;
            for pe in 0..n {
                sum += if pe == me { input.read(start + i) } else { slots.read(slot(pe) + i) };
            }
            out.write(start + i, sum);
            if check != 0 {
                acc.write(start + i, acc.read(start + i) + sum);
            }
            i += threads;
        }
        // The slots are read before this block's next put_signal releases.
        thread::sync_block();
    }
}

/// Two-shot all-reduce: PE `k` owns chunk `k` (`chunk` elements; the last
/// may be shorter). Reduce-scatter: block `b` puts its piece of chunk `k` of
/// the input into slot `[my_pe]` of PE `k` (signal `sigs[0][my_pe][b]` SET to
/// `it`), waits for the `n - 1` pieces of its own chunk and sums them in PE
/// order into `out`. All-gather: it puts its summed piece into `out` on
/// every other PE (signal `sigs[1][my_pe][b]`) and waits for the others'.
///
/// One set of slots suffices: a PE's reduce-scatter puts of `it + 1` come
/// after it received every peer's all-gather of `it`, which each peer sends
/// only after reading its slots of `it`.
/// `src`, `out`, `acc` as for [`allreduce_one_shot`]; `slots`: `n_pes × chunk`;
/// `sigs`: zeroed once, `2 × n_pes × MAX_BLOCKS` words; `chunk` a multiple
/// of 4 with `n_pes × chunk ≥ n_elems`.
///
/// Typed handles only: no `unsafe` here. Launched as [`allreduce_one_shot`].
// The parameters start as `allreduce_one_shot`'s, spelled out again on
// purpose: they are the kernel's launch ABI, which the host's argument tuple
// matches one by one. Packing the shared ones into a struct would change both
// kernels' PTX signatures and the host's launches, not only the text.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "ptx-kernel" fn allreduce_two_shot(
    src: Sym<f32>,
    out: Sym<f32>,
    acc: Sym<f32>,
    slots: Sym<f32>,
    sigs: Sym<u64>,
    n_elems: u64,
    chunk: u64,
    first: u64,
    iters: u64,
    check: u32,
) {
    let (me, n) = (shmem::my_pe() as usize, shmem::n_pes() as usize);
    let (total, chunk) = (n_elems as usize, chunk as usize);
    let (blocks, b) = (thread::grid_dim() as usize, thread::block_idx() as usize);
    let (tid, threads) = (thread::thread_idx() as usize, thread::block_dim() as usize);
    // This block's piece of PE k's chunk: (start in the buffer, offset in the chunk, length).
    let piece = |k: usize| {
        let (chunk_start, chunk_len) = part(total, chunk, k);
        let (off, len) = share(chunk_len, blocks, b);
        (chunk_start + off, off, len)
    };
    let rs_sig = |pe: usize| sigs.elem(pe * MAX_BLOCKS + b);
    let ag_sig = |pe: usize| sigs.elem((n + pe) * MAX_BLOCKS + b);
    for it in first..first + iters {
        let input = version(src, it, total);
        // Reduce-scatter: my piece of chunk `peer` to `peer`'s slot for me.
        for k in 1..n {
            let peer = (me + k) % n;
            let (at, off, len) = piece(peer);
            let dest = slots.slice(me * chunk + off, me * chunk + off + len);
            put_signal_block(dest, input.slice(at, at + len), rs_sig(me), it, peer);
        }
        wait_peers(rs_sig, it, me, n);
        let (at, off, len) = piece(me);
        let mut i = tid;
        while i < len {
            let mut sum = 0.0f32;
            for pe in 0..n {
                sum += if pe == me { input.read(at + i) } else { slots.read(pe * chunk + off + i) };
            }
            out.write(at + i, sum);
            i += threads;
        }
        // The whole piece is summed before any thread copies it out.
        thread::sync_block();
        // All-gather: my summed piece to the same place of `out` on every other PE.
        let summed = out.slice(at, at + len);
        for k in 1..n {
            put_signal_block(summed, summed, ag_sig(me), it, (me + k) % n);
        }
        wait_peers(ag_sig, it, me, n);
        if check != 0 {
            for k in 0..n {
                let (at, _, len) = piece(k);
                let mut i = tid;
                while i < len {
                    acc.write(at + i, acc.read(at + i) + out.read(at + i));
                    i += threads;
                }
            }
        }
        thread::sync_block();
    }
}

/// The library's all-reduce for comparison: `reduce_grid` over `TEAM_WORLD`
/// (every block of the grid shares the work: one-shot below 256 KiB, else
/// reduce-scatter + all-gather, sums in PE order), `iters` times.
///
/// Buffers as for [`allreduce_one_shot`]. Typed handles only: no `unsafe`
/// here. Launched collectively with a grid no larger than
/// `Shmem::collective_launch_query_gridsize` allows. Native engine only (the
/// `_grid` forms do not exist on the NVSHMEM engine), so it is left out there.
#[cfg(not(gpushmem_nvshmem))]
#[no_mangle]
pub extern "ptx-kernel" fn allreduce_library(
    src: Sym<f32>,
    out: Sym<f32>,
    acc: Sym<f32>,
    n_elems: u64,
    first: u64,
    iters: u64,
    check: u32,
) {
    let total = n_elems as usize;
    let out = out.slice(0, total);
    let (first_i, step) = (thread::global_idx(), thread::global_size());
    for it in first..first + iters {
        // The next call's opening grid sync orders these reads of `out` before its writes.
        out.reduce_grid(TEAM_WORLD, version(src, it, total), ReduceOp::Sum);
        if check != 0 {
            let mut i = first_i;
            while i < total {
                acc.write(i, acc.read(i) + out.read(i));
                i += step;
            }
        }
    }
}
