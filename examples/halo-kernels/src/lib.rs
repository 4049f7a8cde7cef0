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
#![feature(abi_ptx, stdarch_nvptx)]

use core::arch::nvptx::*;
use gpushmem_kernels as shmem;
use shmem::{Cmp, SignalOp};

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
/// `cells`: symmetric, `[2][gridDim.x][seg + 2]` `u32`: two copies
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
/// read those ghosts. `sigs`: symmetric `[2][gridDim.x][2]` `u64`, zeroed once.
///
/// # Safety
/// Pointers as described; `first ≥ 1` and larger than every earlier
/// launch's iterations; every PE launches it with the same grid and
/// arguments, collectively.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn halo_stencil(cells: *mut u32, sigs: *mut u64, seg: u64, first: u64, iters: u64) {
    let (me, n) = (shmem::my_pe() as usize, shmem::n_pes() as usize);
    let (blocks, b) = (_grid_dim_x() as usize, _block_idx_x() as usize);
    let (tid, threads) = (_thread_idx_x() as usize, _block_dim_x() as usize);
    let seg = seg as usize;
    // Segment numbers, global: mine, and my neighbours' as (PE, block).
    let segments = n * blocks;
    let mine = me * blocks + b;
    let left = (mine + segments - 1) % segments;
    let right = (mine + 1) % segments;
    let (left_pe, left_block) = ((left / blocks) as u32, left % blocks);
    let (right_pe, right_block) = ((right / blocks) as u32, right % blocks);
    let copy = |par: usize, block: usize| cells.add((par * blocks + block) * (seg + 2));
    let sig = |par: usize, block: usize, side: usize| sigs.add((par * blocks + block) * 2 + side);

    for k in first..first + iters {
        let par = ((k - 1) % 2) as usize;
        let cur = copy(par, b);
        let next = copy(1 - par, b);
        // My edge cells to my neighbours' ghost cells (thread 0 and the last thread).
        if tid == 0 {
            shmem::put_signal_nbi(
                copy(par, left_block).add(seg + 1),
                cur.add(1),
                1,
                sig(par, left_block, FROM_RIGHT),
                k,
                SignalOp::Set,
                left_pe,
            );
        }
        if tid == threads - 1 {
            shmem::put_signal_nbi(
                copy(par, right_block),
                cur.add(seg),
                1,
                sig(par, right_block, FROM_LEFT),
                k,
                SignalOp::Set,
                right_pe,
            );
        }
        if tid == 0 {
            shmem::signal_wait_until(sig(par, b, FROM_LEFT), Cmp::Ge, k);
        }
        if tid == threads - 1 {
            shmem::signal_wait_until(sig(par, b, FROM_RIGHT), Cmp::Ge, k);
        }
        _syncthreads();
        let mut i = 1 + tid;
        while i <= seg {
            *next.add(i) = stencil(*cur.add(i - 1), *cur.add(i), *cur.add(i + 1));
            i += threads;
        }
        // This iteration's cells are written before the next one sends its edges.
        _syncthreads();
    }
}
