//! Ring shift: every PE sends its block of data to the next PE. Written with
//! the typed API only: no `unsafe` block, no raw pointer.
#![no_std]
#![feature(abi_ptx)]

use gpushmem_kernels::{self as shmem, thread, Sym};

/// Each block sends its slice of `src` to the same place of `dest` on PE
/// `(me + 1) % n` with a block-wide `put_nbi`, then completes its puts
/// (`quiet_block`); the last block to finish (counted on `done`, one `u32`)
/// waits for every PE (`barrier_all`) and resets `done` for the next launch.
/// The host launches it collectively (the grid must be co-resident) with
/// `dest` and `src` of the same length.
///
/// Why the count is enough: each block's `quiet_block` completes its puts
/// (a system-scope sequentially consistent fence) before its thread 0 adds
/// to `done`; the block that sees the last count then runs `barrier_all`,
/// which starts with the same fence, so every block's puts are complete
/// before this PE arrives.
#[no_mangle]
pub extern "ptx-kernel" fn ring_shift(dest: Sym<u8>, src: Sym<u8>, done: Sym<u32>) {
    let me = shmem::my_pe();
    let next = (me + 1) % shmem::n_pes();
    let (blocks, b) = (thread::grid_dim() as usize, thread::block_idx() as usize);
    let bytes = src.len();
    let per = bytes.div_ceil(blocks);
    let start = (b * per).min(bytes);
    let end = (start + per).min(bytes);
    // Checked: equal lengths, `next` in range (a mismatch traps with a message).
    dest.slice(start, end).put_nbi_block(src.slice(start, end), next);
    shmem::quiet_block();
    if thread::thread_idx() == 0 {
        let arrived = done.atomic_fetch_add(1, me);
        if arrived == blocks as u32 - 1 {
            shmem::barrier_all();
            done.write(0, 0);
        }
    }
}
