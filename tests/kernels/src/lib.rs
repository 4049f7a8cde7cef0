//! Kernels the GPU test suite launches.
#![no_std]
#![feature(abi_ptx, stdarch_nvptx, asm_experimental_arch)]
#![allow(clippy::missing_safety_doc)]

// The collective test kernels (on the NVSHMEM engine only the quick matrix's
// types: see coll.rs).
// The bulk-copy engine from Rust (issue 40): native engine only.
#[cfg(not(gpushmem_nvshmem))]
mod bulk;
mod coll;
mod litmus;
mod p2p;
mod probes;
mod stress;
mod teams;
mod typed;

use core::arch::nvptx::*;
use gpushmem_kernels as shmem;

#[inline(always)]
fn global_thread() -> (usize, usize) {
    unsafe {
        let i = _block_idx_x() as usize * _block_dim_x() as usize + _thread_idx_x() as usize;
        (i, _grid_dim_x() as usize * _block_dim_x() as usize)
    }
}

/// out[i] = inp[i] ^ key ^ (i * 2654435761): the build-and-load smoke test.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn smoke_pattern(out: *mut u32, inp: *const u32, n: u64, key: u32) {
    let (mut i, stride) = global_thread();
    while i < n as usize {
        *out.add(i) = *inp.add(i) ^ key ^ (i as u32).wrapping_mul(2654435761);
        i += stride;
    }
}

/// Writes what the device sees of its state: version, my_pe, n_pes, heap base, heap size,
/// then `ptr(heap_base, pe)` for every PE.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn state_probe(out: *mut u64) {
    if _thread_idx_x() == 0 && _block_idx_x() == 0 {
        let s = &*core::ptr::addr_of!(shmem::GPUSHMEM_STATE);
        *out = s.version as u64;
        *out.add(1) = shmem::my_pe() as u64;
        *out.add(2) = shmem::n_pes() as u64;
        *out.add(3) = s.heap_base;
        *out.add(4) = s.heap_size;
        for pe in 0..shmem::n_pes() {
            *out.add(5 + pe as usize) = shmem::ptr(s.heap_base as *const u8, pe) as u64;
        }
    }
}

/// The RMA operations the exchange tests cover, by code.
#[inline(always)]
unsafe fn rma(op: u32, dest: *mut u8, src: *const u8, bytes: usize, pe: u32) {
    let warp0 = _thread_idx_x() < 32;
    let t0 = _thread_idx_x() == 0;
    match op {
        0 if t0 => shmem::putmem_nbi(dest, src, bytes, pe),
        1 if warp0 => shmem::putmem_nbi_warp(dest, src, bytes, pe),
        2 => shmem::putmem_nbi_block(dest, src, bytes, pe),
        3 if t0 => shmem::putmem(dest, src, bytes, pe),
        4 if warp0 => shmem::putmem_warp(dest, src, bytes, pe),
        5 => shmem::putmem_block(dest, src, bytes, pe),
        6 if t0 => shmem::getmem_nbi(dest, src, bytes, pe),
        7 if warp0 => shmem::getmem_nbi_warp(dest, src, bytes, pe),
        8 => shmem::getmem_nbi_block(dest, src, bytes, pe),
        9 if t0 => shmem::getmem(dest, src, bytes, pe),
        10 if warp0 => shmem::getmem_warp(dest, src, bytes, pe),
        11 => shmem::getmem_block(dest, src, bytes, pe),
        // p / g element by element (u8), thread 0.
        12 if t0 => {
            for i in 0..bytes {
                shmem::p(dest.add(i), *src.add(i), pe)
            }
        }
        13 if t0 => {
            for i in 0..bytes {
                *dest.add(i) = shmem::g(src.add(i), pe)
            }
        }
        // typed forms over u32 (bytes must be a multiple of 4 and both sides 4-aligned)
        14 if t0 => shmem::put_nbi(dest as *mut u32, src as *const u32, bytes / 4, pe),
        15 => shmem::get_block(dest as *mut u32, src as *const u32, bytes / 4, pe),
        _ => {}
    }
}

/// One block: PE me does `op` towards PE (me + shift) % n (puts: dest is
/// symmetric; gets: src is symmetric), then quiet + barrier.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn rma_ring(op: u32, dest: *mut u8, src: *const u8, bytes: u64, shift: u32) {
    let n = shmem::n_pes();
    let pe = (shmem::my_pe() + shift) % n;
    rma(op, dest, src, bytes as usize, pe);
    shmem::quiet_block();
    shmem::barrier_all_block();
}

/// One block: all-to-all. Puts: chunk k of `src` goes to PE k at slot `me`.
/// Gets: chunk `me` of PE k's `src` comes to local slot k.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn rma_alltoall(op: u32, dest: *mut u8, src: *const u8, chunk: u64) {
    let n = shmem::n_pes();
    let me = shmem::my_pe();
    let c = chunk as usize;
    let is_get = (6..=11).contains(&op) || op == 13 || op == 15;
    for k in 0..n {
        let pe = (me + k) % n; // stagger the targets
        if is_get {
            rma(op, dest.add(pe as usize * c), src.add(me as usize * c), c, pe);
        } else {
            rma(op, dest.add(me as usize * c), src.add(pe as usize * c), c, pe);
        }
    }
    shmem::quiet_block();
    shmem::barrier_all_block();
}

/// Barrier check: each round every PE writes `round` into its slot on every
/// PE (double-buffered by parity), barriers, then checks all slots. Counts
/// mismatches in `errors[0]`. `form`: 0 thread barrier_all, 1 block, 2 warp, 3 none (must fail).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn barrier_rounds(buf: *mut u64, rounds: u32, errors: *mut u32, form: u32) {
    let n = shmem::n_pes();
    let me = shmem::my_pe();
    let t = _thread_idx_x();
    for r in 1..=rounds as u64 {
        let half = buf.add((r as usize % 2) * n as usize);
        let mut pe = t;
        while pe < n {
            shmem::p(half.add(me as usize), r, pe);
            pe += _block_dim_x();
        }
        match form {
            0 => {
                shmem::quiet_block();
                if t == 0 {
                    shmem::barrier_all();
                }
                shmem::thread::sync_block();
            }
            1 => shmem::barrier_all_block(),
            2 => {
                shmem::quiet_block();
                if t < 32 {
                    shmem::barrier_all_warp();
                }
                shmem::thread::sync_block();
            }
            _ => shmem::thread::sync_block(),
        }
        let mut j = t;
        while j < n {
            if half.add(j as usize).read_volatile() != r {
                *errors += 1; // racy count is fine: any non-zero is a failure
            }
            j += _block_dim_x();
        }
    }
}

/// Calls `p` towards PE `pe` (used with an out-of-range PE and debug checks on).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn p_to(dest: *mut u32, pe: u32) {
    if _thread_idx_x() == 0 {
        shmem::p(dest, 7u32, pe);
    }
}

/// Waits for a flag that never comes (timeout test).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn wait_forever(flag: *mut u64) {
    if _thread_idx_x() == 0 {
        shmem::wait::wait_counter_reaches(flag, 1, c"wait_forever");
    }
}
