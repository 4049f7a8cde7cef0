//! Kernel of the random-operation stress test (tests/gpu/stress.rs): one
//! block per PE runs a host-made table of operations round after round, then
//! checksums its own copy of the arena so the host can compare every round
//! with its model.

use core::arch::nvptx::*;
use gpushmem_kernels as shmem;
use shmem::atomic::AtomicWord;
use shmem::SignalOp;

/// `u64` words per operation record: `[kind | pe << 8 | lane << 16 | warp << 24,
/// dest offset, source offset, bytes or value, signal offset, signal value]`.
/// Offsets are bytes from `arena` (from `src` for a put's source).
const REC: usize = 6;
/// `warp` of an operation the whole block runs.
const BLOCK: u64 = 0xFF;

// Kinds; the host (tests/gpu/stress.rs, `Kind`) uses the same numbers.
// Thread forms run on lane `lane` of warp `warp`, warp forms on that warp,
// block forms on the whole block. Gets land in this PE's arena; puts read `src`.
const PUT: u64 = 0;
const PUT_NBI: u64 = 1;
const PUT_WARP: u64 = 2;
const PUT_NBI_WARP: u64 = 3;
const PUT_BLOCK: u64 = 4;
const PUT_NBI_BLOCK: u64 = 5;
const GET: u64 = 6;
const GET_NBI: u64 = 7;
const GET_WARP: u64 = 8;
const GET_NBI_WARP: u64 = 9;
const GET_BLOCK: u64 = 10;
const GET_NBI_BLOCK: u64 = 11;
const P: u64 = 12;
const G: u64 = 13;
const PUT_NBI_U32: u64 = 14;
const GET_U64_WARP: u64 = 15;
const ADD: u64 = 16;
const FETCH_ADD: u64 = 17;
const INC: u64 = 18;
const XOR: u64 = 19;
const PUT_SIGNAL: u64 = 20;
const PUT_SIGNAL_NBI: u64 = 21;
const PUT_SIGNAL_WARP: u64 = 22;
const PUT_SIGNAL_NBI_WARP: u64 = 23;
const PUT_SIGNAL_BLOCK: u64 = 24;
const PUT_SIGNAL_NBI_BLOCK: u64 = 25;
const SIGNAL_ADD: u64 = 26;

/// The checksum term of word `w` at index `i` of a part; the host's `term`
/// is the same function. A bijection of `w` for each `i`, so a single wrong
/// word always changes the sum.
#[inline(always)]
fn term(i: u64, w: u64) -> u64 {
    let mut z = w ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 31)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z ^ (z >> 29)
}

/// Runs one record. `one`: this thread is the one a thread form names.
#[inline(always)]
unsafe fn run(rec: *const u64, arena: *mut u8, src: *const u8, one: bool) {
    let w0 = *rec;
    let kind = w0 & 0xFF;
    let pe = ((w0 >> 8) & 0xFF) as u32;
    let d = arena.add(*rec.add(1) as usize);
    let s_off = *rec.add(2) as usize;
    let (s, sa) = (src.add(s_off), arena.add(s_off) as *const u8);
    let n = *rec.add(3) as usize;
    let sig = arena.add(*rec.add(4) as usize) as *mut u64;
    let sv = *rec.add(5);
    let add = SignalOp::Add;
    match kind {
        PUT if one => shmem::putmem(d, s, n, pe),
        PUT_NBI if one => shmem::putmem_nbi(d, s, n, pe),
        PUT_WARP => shmem::putmem_warp(d, s, n, pe),
        PUT_NBI_WARP => shmem::putmem_nbi_warp(d, s, n, pe),
        PUT_BLOCK => shmem::putmem_block(d, s, n, pe),
        PUT_NBI_BLOCK => shmem::putmem_nbi_block(d, s, n, pe),
        GET if one => shmem::getmem(d, sa, n, pe),
        GET_NBI if one => shmem::getmem_nbi(d, sa, n, pe),
        GET_WARP => shmem::getmem_warp(d, sa, n, pe),
        GET_NBI_WARP => shmem::getmem_nbi_warp(d, sa, n, pe),
        GET_BLOCK => shmem::getmem_block(d, sa, n, pe),
        GET_NBI_BLOCK => shmem::getmem_nbi_block(d, sa, n, pe),
        P if one => shmem::p(d as *mut u64, n as u64, pe),
        G if one => (d as *mut u64).write(shmem::g(sa as *const u64, pe)),
        PUT_NBI_U32 if one => shmem::put_nbi(d as *mut u32, s as *const u32, n / 4, pe),
        GET_U64_WARP => shmem::get_warp(d as *mut u64, sa as *const u64, n / 8, pe),
        ADD if one => shmem::atomic_add(d as *mut u64, n as u64, pe),
        FETCH_ADD if one => {
            shmem::atomic_fetch_add(d as *mut u64, n as u64, pe);
        }
        INC if one => shmem::atomic_inc(d as *mut u64, pe),
        XOR if one => shmem::atomic_xor(d as *mut u64, n as u64, pe),
        PUT_SIGNAL if one => shmem::putmem_signal(d, s, n, sig, sv, add, pe),
        PUT_SIGNAL_NBI if one => shmem::putmem_signal_nbi(d, s, n, sig, sv, add, pe),
        PUT_SIGNAL_WARP => shmem::putmem_signal_warp(d, s, n, sig, sv, add, pe),
        PUT_SIGNAL_NBI_WARP => shmem::putmem_signal_nbi_warp(d, s, n, sig, sv, add, pe),
        PUT_SIGNAL_BLOCK => shmem::putmem_signal_block(d, s, n, sig, sv, add, pe),
        PUT_SIGNAL_NBI_BLOCK => shmem::putmem_signal_nbi_block(d, s, n, sig, sv, add, pe),
        SIGNAL_ADD if one => shmem::signal_op(sig, sv, add, pe),
        _ => {}
    }
}

/// `rounds` rounds of the table `table` (`ops` records per round, see
/// [`REC`]), one block per PE (a multiple of 32 threads, warps numbered as
/// the host assumed). Each round: every warp runs its records in table order,
/// then the block runs the block records in order; `barrier_all_block`; the
/// block checksums each part `p` of its arena (`parts[2p]` byte offset,
/// `parts[2p + 1]` 16-byte units): Σ `term(i, word i)` added into
/// `sums[round * nparts + p]` (zeroed by the host); `sync_all_block`, so no
/// PE writes the next round into an arena still being summed.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn stress_rounds(
    arena: *mut u8,
    src: *const u8,
    table: *const u64,
    ops: u32,
    rounds: u32,
    parts: *const u64,
    nparts: u32,
    sums: *mut u64,
) {
    let t = _thread_idx_x() as usize;
    let bs = _block_dim_x() as usize;
    let warp = (t / 32) as u64;
    let lane = (t % 32) as u64;
    for r in 0..rounds as usize {
        let recs = table.add(r * ops as usize * REC);
        for j in 0..ops as usize {
            let rec = recs.add(j * REC);
            if (*rec >> 24) & 0xFF == warp {
                run(rec, arena, src, (*rec >> 16) & 0xFF == lane);
            }
        }
        for j in 0..ops as usize {
            let rec = recs.add(j * REC);
            if (*rec >> 24) & 0xFF == BLOCK {
                run(rec, arena, src, t == 0);
            }
        }
        shmem::barrier_all_block();
        for p in 0..nparts as usize {
            let base = arena.add(*parts.add(2 * p) as usize);
            let units = *parts.add(2 * p + 1) as usize;
            let mut acc = 0u64;
            let mut add = |u: usize, v: [u32; 4]| {
                let i = 2 * u as u64;
                acc = acc
                    .wrapping_add(term(i, v[0] as u64 | (v[1] as u64) << 32))
                    .wrapping_add(term(i + 1, v[2] as u64 | (v[3] as u64) << 32));
            };
            // Four independent 16-byte loads in flight per thread.
            let mut u = t;
            while u + 3 * bs < units {
                let v = [
                    shmem::ptx::ld_global_v4(base.add(16 * u)),
                    shmem::ptx::ld_global_v4(base.add(16 * (u + bs))),
                    shmem::ptx::ld_global_v4(base.add(16 * (u + 2 * bs))),
                    shmem::ptx::ld_global_v4(base.add(16 * (u + 3 * bs))),
                ];
                for (k, v) in v.into_iter().enumerate() {
                    add(u + k * bs, v);
                }
                u += 4 * bs;
            }
            while u < units {
                add(u, shmem::ptx::ld_global_v4(base.add(16 * u)));
                u += bs;
            }
            if acc != 0 {
                <u64 as AtomicWord>::add(sums.add(r * nparts as usize + p), acc);
            }
        }
        shmem::sync_all_block();
    }
}
