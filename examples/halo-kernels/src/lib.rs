//! Pipelined 1D stencil with halo exchange for the `halo` example.
//!
//! The global array is periodic and cut into `n_pes × gridDim.x` segments of
//! `seg` cells: block `b` of PE `p` owns segment `p × gridDim.x + b`. Its
//! neighbours are the segments on either side, on this PE (another block) or
//! on the next/previous PE, reached the same way: every boundary cell goes to
//! the neighbour's ghost cell with `put_signal_nbi` and the neighbour waits
//! for the signal. No block ever waits for more than its two neighbours, so
//! segments run ahead of each other by up to one iteration (the pipelining).
#![no_std]
#![feature(abi_ptx)]

use gpushmem_kernels::{self as shmem, thread, Cmp, SignalOp, Sym};

/// The stencil: the new value of a cell from its left neighbour, itself and
/// its right neighbour (integer arithmetic, so a CPU run gives the same bits;
/// the shift-xor makes it non-linear, so an error spreads instead of cancelling).
/// The host has the same function.
#[inline(always)]
pub fn stencil(left: u32, center: u32, right: u32) -> u32 {
    left.wrapping_add(right).wrapping_add(center.wrapping_mul(3)) ^ (center >> 11)
}

/// Which ghost cell a signal announces: the one on the left, filled by the left neighbour.
const FROM_LEFT: usize = 0;
/// The ghost cell on the right, filled by the right neighbour.
const FROM_RIGHT: usize = 1;

/// Iterations `first`, `first + 1`, …, `first + iters - 1` of the stencil
/// (the host keeps counting across launches).
///
/// `cells`: `[2][gridDim.x][seg + 2]` `u32`: two copies
/// (by parity) of every segment, each with a ghost cell at index 0 and
/// `seg + 1`. Iteration `k` reads copy `(k - 1) % 2` and writes the
/// interior of copy `k % 2`: first it puts its first cell into the left
/// neighbour's right ghost and its last cell into the right neighbour's left
/// ghost, both of copy `(k - 1) % 2`, with the signal `sigs[(k - 1) % 2][block][side]`
/// on that neighbour SET to `k`; then it waits until its own two signals of
/// that parity have reached `k` (`signal_wait_until(GE, k)`), and computes.
///
/// Why two copies suffice: a neighbour writes this segment's ghost cells of
/// parity `k % 2` again only at iteration `k + 2`, which needs this
/// segment's cells of iteration `k + 1`, sent only after iteration `k` has
/// read those ghosts. `sigs`: `[2][gridDim.x][2]` `u64`, zeroed once.
///
/// Typed handles only: no `unsafe` here; each call checks its lengths and
/// PE. Every PE launches it with the same grid and arguments, collectively;
/// `first ≥ 1` and larger than every earlier launch's iterations.
#[no_mangle]
pub extern "ptx-kernel" fn halo_stencil(cells: Sym<u32>, sigs: Sym<u64>, seg: u64, first: u64, iters: u64) {
    let (me, n) = (shmem::my_pe() as usize, shmem::n_pes() as usize);
    let (blocks, b) = (thread::grid_dim() as usize, thread::block_idx() as usize);
    let (tid, threads) = (thread::thread_idx() as usize, thread::block_dim() as usize);
    let seg = seg as usize;
    // Segment numbers, global: mine, and my neighbours' as (PE, block).
    let segments = n * blocks;
    let mine = me * blocks + b;
    let left = (mine + segments - 1) % segments;
    let right = (mine + 1) % segments;
    let (left_pe, left_block) = ((left / blocks) as u32, left % blocks);
    let (right_pe, right_block) = ((right / blocks) as u32, right % blocks);
    let copy = |par: usize, block: usize| {
        let at = (par * blocks + block) * (seg + 2);
        cells.slice(at, at + seg + 2)
    };
    let sig = |par: usize, block: usize, side: usize| sigs.elem((par * blocks + block) * 2 + side);

    for k in first..first + iters {
        let par = ((k - 1) % 2) as usize;
        let cur = copy(par, b);
        let next = copy(1 - par, b);
        // My edge cells to my neighbours' ghost cells (thread 0 and the last thread).
        if tid == 0 {
            let ghost = copy(par, left_block).elem(seg + 1);
            ghost.put_signal_nbi(cur.elem(1), sig(par, left_block, FROM_RIGHT), k, SignalOp::Set, left_pe);
        }
        if tid == threads - 1 {
            let ghost = copy(par, right_block).elem(0);
            ghost.put_signal_nbi(cur.elem(seg), sig(par, right_block, FROM_LEFT), k, SignalOp::Set, right_pe);
        }
        if tid == 0 {
            sig(par, b, FROM_LEFT).signal_wait_until(Cmp::Ge, k);
        }
        if tid == threads - 1 {
            sig(par, b, FROM_RIGHT).signal_wait_until(Cmp::Ge, k);
        }
        thread::sync_block();
        let mut i = 1 + tid;
        while i <= seg {
            next.write(i, stencil(cur.read(i - 1), cur.read(i), cur.read(i + 1)));
            i += threads;
        }
        // This iteration's cells are written before the next one sends its edges.
        thread::sync_block();
    }
}
