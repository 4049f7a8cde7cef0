//! Where this thread is in the launch, and how the threads of a block or a
//! warp wait for each other: safe, plain-integer forms of CUDA's `threadIdx`,
//! `blockIdx`, `blockDim`, `gridDim`, `__syncthreads` and `__syncwarp`, so a
//! kernel needs neither `core::arch::nvptx` nor `unsafe` for them.
//!
//! The indices are the x dimension, the one a 1-D launch (the host's
//! `gpushmem::LaunchConfig { grid_dim: (g, 1, 1), block_dim: (b, 1, 1), .. }`)
//! uses; the `*_xyz` forms give all three. None of these calls touches memory
//! except [`sync_block`] and [`sync_warp`], whose ordering is stated on each.

use crate::ptx;
use core::arch::nvptx::*;

/// This thread's index in its block, x dimension (`threadIdx.x`).
#[inline(always)]
pub fn thread_idx() -> u32 {
    // SAFETY: reads a special register (PTX ISA 10.1 %tid).
    unsafe { _thread_idx_x() as u32 }
}

/// This block's index in the grid, x dimension (`blockIdx.x`).
#[inline(always)]
pub fn block_idx() -> u32 {
    // SAFETY: reads a special register (PTX ISA 10.5 %ctaid).
    unsafe { _block_idx_x() as u32 }
}

/// Threads per block, x dimension (`blockDim.x`).
#[inline(always)]
pub fn block_dim() -> u32 {
    // SAFETY: reads a special register (PTX ISA 10.2 %ntid).
    unsafe { _block_dim_x() as u32 }
}

/// Blocks in the grid, x dimension (`gridDim.x`).
#[inline(always)]
pub fn grid_dim() -> u32 {
    // SAFETY: reads a special register (PTX ISA 10.6 %nctaid).
    unsafe { _grid_dim_x() as u32 }
}

/// `threadIdx` as `(x, y, z)`.
#[inline(always)]
pub fn thread_idx_xyz() -> (u32, u32, u32) {
    // SAFETY: special registers (PTX ISA 10.1).
    unsafe { (_thread_idx_x() as u32, _thread_idx_y() as u32, _thread_idx_z() as u32) }
}

/// `blockIdx` as `(x, y, z)`.
#[inline(always)]
pub fn block_idx_xyz() -> (u32, u32, u32) {
    // SAFETY: special registers (PTX ISA 10.5).
    unsafe { (_block_idx_x() as u32, _block_idx_y() as u32, _block_idx_z() as u32) }
}

/// `blockDim` as `(x, y, z)`.
#[inline(always)]
pub fn block_dim_xyz() -> (u32, u32, u32) {
    // SAFETY: special registers (PTX ISA 10.2).
    unsafe { (_block_dim_x() as u32, _block_dim_y() as u32, _block_dim_z() as u32) }
}

/// `gridDim` as `(x, y, z)`.
#[inline(always)]
pub fn grid_dim_xyz() -> (u32, u32, u32) {
    // SAFETY: special registers (PTX ISA 10.6).
    unsafe { (_grid_dim_x() as u32, _grid_dim_y() as u32, _grid_dim_z() as u32) }
}

/// This thread's index in the whole grid, x dimension
/// (`blockIdx.x * blockDim.x + threadIdx.x`), widened so it cannot overflow.
#[inline(always)]
pub fn global_idx() -> usize {
    block_idx() as usize * block_dim() as usize + thread_idx() as usize
}

/// Threads in the whole grid, x dimension (`gridDim.x * blockDim.x`): the
/// stride of a grid-stride loop.
#[inline(always)]
pub fn global_size() -> usize {
    grid_dim() as usize * block_dim() as usize
}

/// This thread's lane in its warp, 0..32 (`%laneid`).
#[inline(always)]
pub fn lane_id() -> u32 {
    ptx::lane_id()
}

/// Every thread of the block waits here (`__syncthreads`, `barrier.sync 0`);
/// memory operations before it are visible to the block's threads after it
/// (CTA scope, not other blocks or PEs).
///
/// Every thread of the block must call it (from any branch: the non-aligned
/// form is used, so divergent callers are allowed), or the block hangs.
#[inline(always)]
pub fn sync_block() {
    ptx::sync_block()
}

/// Every thread of the warp waits here (`__syncwarp()`, full mask); memory
/// operations before it are visible to the warp's lanes after it.
///
/// Every lane of the warp must call it.
#[inline(always)]
pub fn sync_warp() {
    ptx::sync_warp()
}

/// The GPU's global nanosecond timer (`%globaltimer`; its ticks are coarse,
/// about 1 µs on recent GPUs): for timeouts and coarse timing in kernels.
#[inline(always)]
pub fn global_timer_ns() -> u64 {
    ptx::global_timer_ns()
}
