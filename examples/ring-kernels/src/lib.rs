//! Ring shift: every PE sends its block of data to the next PE.
#![no_std]
#![feature(abi_ptx, stdarch_nvptx, asm_experimental_arch)]

use gpushmem_kernels as shmem;

/// Each block sends its slice of `src` to the same place of `dest` on PE
/// `(me + 1) % n` with a block-wide `put_nbi`, then the PE completes its
/// puts (`quiet`) and waits for everyone (`barrier_all`, block 0 only; the
/// host launches one block per slice, so the grid must be co-resident).
///
/// # Safety
/// Launched collectively on every PE with the same grid; `dest` and `src`
/// are symmetric buffers of at least `bytes` bytes, `done` a zeroed symmetric
/// `u32`.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn ring_shift(dest: *mut u8, src: *const u8, bytes: u64, done: *mut u32) {
    use core::arch::nvptx::*;
    let next = (shmem::my_pe() + 1) % shmem::n_pes();
    let blocks = _grid_dim_x() as u64;
    let b = _block_idx_x() as u64;
    let per = bytes.div_ceil(blocks);
    let start = (b * per).min(bytes);
    let len = (per).min(bytes - start);
    shmem::putmem_nbi_block(dest.add(start as usize), src.add(start as usize), len as usize, next);
    shmem::quiet_block();
    // Grid-wide: count finished blocks; the last one runs the barrier.
    if _thread_idx_x() == 0 {
        let arrived: u32;
        core::arch::asm!("atom.add.release.gpu.global.u32 {a}, [{p}], 1;", a = out(reg32) arrived, p = in(reg64) done);
        if arrived == blocks as u32 - 1 {
            shmem::fence();
            shmem::barrier_all();
            *done = 0;
        }
    }
}
