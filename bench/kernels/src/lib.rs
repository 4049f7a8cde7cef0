//! Kernels that gpushmem-perf times.
#![no_std]
#![feature(abi_ptx, stdarch_nvptx)]

use core::arch::nvptx::*;
use gpushmem_kernels as shmem;

/// Each block moves its 16-byte-aligned share of `bytes`, `iters` times:
/// `op` 0 = `putmem_nbi_block` to `pe`, 1 = `getmem_nbi_block` from `pe`;
/// then `quiet_block`.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn bw_block(op: u32, dest: *mut u8, src: *const u8, bytes: u64, pe: u32, iters: u32) {
    let blocks = _grid_dim_x() as u64;
    let per = bytes.div_ceil(blocks).next_multiple_of(16);
    let start = (_block_idx_x() as u64 * per).min(bytes);
    let len = per.min(bytes - start) as usize;
    let (d, s) = (dest.add(start as usize), src.add(start as usize));
    for _ in 0..iters {
        if op == 0 {
            shmem::putmem_nbi_block(d, s, len, pe);
        } else {
            shmem::getmem_nbi_block(d, s, len, pe);
        }
    }
    shmem::quiet_block();
}

/// `put_signal` ping-pong between PE 0 and PE 1, thread 0 of one block on each:
/// PE 0 sends `base + i` (an 8-byte payload, `payload` holds 2 words, with the signal SET to it) and
/// waits for the same value back; PE 1 echoes. `iters` round trips.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn pingpong(payload: *mut u64, sig: *mut u64, base: u64, iters: u32) {
    if _thread_idx_x() != 0 {
        return;
    }
    let me = shmem::my_pe();
    let peer = 1 - me;
    for i in 1..=iters as u64 {
        let v = base + i;
        if me == 1 {
            shmem::signal_wait_until(sig, shmem::Cmp::Ge, v);
        }
        // payload[1] is the local source, payload[0] the symmetric destination.
        *payload.add(1) = v;
        shmem::put_signal_nbi(payload, payload.add(1), 1, sig, v, shmem::SignalOp::Set, peer);
        if me == 0 {
            shmem::signal_wait_until(sig, shmem::Cmp::Ge, v);
        }
    }
}

/// `iters` × `barrier_all_block`.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn barrier_loop(iters: u32) {
    for _ in 0..iters {
        shmem::barrier_all_block();
    }
}
