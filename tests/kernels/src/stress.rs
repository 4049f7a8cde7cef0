//! Kernel of the random-operation stress test (tests/gpu/stress.rs): one
//! block per PE runs a host-made table of operations round after round, then
//! checksums its own copy of the arena so the host can compare every round
//! with its model.

use core::arch::nvptx::*;
use gpushmem_kernels as shmem;
use shmem::atomic::AtomicWord;
use shmem::SignalOp;

/// 16 bytes, 16-aligned: read as one `ld.global.v4.u32`.
#[repr(C, align(16))]
#[derive(Clone, Copy)]
struct V4([u32; 4]);

/// The 16 bytes at `p` in one vector load.
///
/// # Safety
/// `p` is valid and 16-byte aligned.
#[inline(always)]
unsafe fn ld_v4(p: *const u8) -> [u32; 4] {
    p.cast::<V4>().read().0
}

// The record layout, the kinds and the checksum term: the host's very file.
#[path = "stress_ops.rs"]
mod stress_ops;
use stress_ops::*;

/// `match kind { arms }`, where an arm may also be a whole operation that
/// comes in six forms: `six (args): KIND function, …` with the six kinds and
/// `shmem` functions in the kinds' order (thread, thread nbi, warp, warp nbi,
/// block, block nbi) stands for an arm per form calling its function with
/// `args`, the thread forms only where `one`. The arms keep their order.
macro_rules! match_kind {
    (@ $kind:tt $one:tt [$($arms:tt)*]) => {
        match $kind { $($arms)* }
    };
    (@ $kind:tt $one:tt [$($arms:tt)*]
        six $args:tt: $t:ident $tf:ident, $tn:ident $tnf:ident, $w:ident $wf:ident, $wn:ident $wnf:ident,
            $b:ident $bf:ident, $bn:ident $bnf:ident; $($more:tt)*) => {
        match_kind!(@ $kind $one [$($arms)*
            $t if $one => shmem::$tf $args,
            $tn if $one => shmem::$tnf $args,
            $w => shmem::$wf $args,
            $wn => shmem::$wnf $args,
            $b => shmem::$bf $args,
            $bn => shmem::$bnf $args,
        ] $($more)*)
    };
    (@ $kind:tt $one:tt [$($arms:tt)*] $p:pat $(if $g:expr)? => $body:expr, $($more:tt)*) => {
        match_kind!(@ $kind $one [$($arms)* $p $(if $g)? => $body,] $($more)*)
    };
    ($kind:tt, $one:tt; $($arms:tt)*) => {
        match_kind!(@ $kind $one [] $($arms)*)
    };
}

/// Runs one record. `one`: this thread is the one a thread form names.
#[inline(always)]
unsafe fn run(rec: *const u64, arena: *mut u8, src: *const u8, one: bool) {
    let kind = kind(*rec);
    let pe = pe(*rec) as u32;
    let d = arena.add(*rec.add(1) as usize);
    let s_off = *rec.add(2) as usize;
    let (s, sa) = (src.add(s_off), arena.add(s_off) as *const u8);
    let n = *rec.add(3) as usize;
    let sig = arena.add(*rec.add(4) as usize) as *mut u64;
    let sv = *rec.add(5);
    let add = SignalOp::Add;
    match_kind!(kind, one;
        six (d, s, n, pe): PUT putmem, PUT_NBI putmem_nbi, PUT_WARP putmem_warp, PUT_NBI_WARP putmem_nbi_warp,
            PUT_BLOCK putmem_block, PUT_NBI_BLOCK putmem_nbi_block;
        six (d, sa, n, pe): GET getmem, GET_NBI getmem_nbi, GET_WARP getmem_warp, GET_NBI_WARP getmem_nbi_warp,
            GET_BLOCK getmem_block, GET_NBI_BLOCK getmem_nbi_block;
        P if one => shmem::p(d as *mut u64, n as u64, pe),
        G if one => (d as *mut u64).write(shmem::g(sa as *const u64, pe)),
        PUT_NBI_U32 if one => shmem::put_nbi(d as *mut u32, s as *const u32, n / 4, pe),
        GET_U64_WARP => shmem::get_warp(d as *mut u64, sa as *const u64, n / 8, pe),
        ADD if one => shmem::atomic_add(d as *mut u64, n as u64, pe),
        FETCH_ADD if one => {
            shmem::atomic_fetch_add(d as *mut u64, n as u64, pe);
        },
        INC if one => shmem::atomic_inc(d as *mut u64, pe),
        XOR if one => shmem::atomic_xor(d as *mut u64, n as u64, pe),
        six (d, s, n, sig, sv, add, pe): PUT_SIGNAL putmem_signal, PUT_SIGNAL_NBI putmem_signal_nbi,
            PUT_SIGNAL_WARP putmem_signal_warp, PUT_SIGNAL_NBI_WARP putmem_signal_nbi_warp,
            PUT_SIGNAL_BLOCK putmem_signal_block, PUT_SIGNAL_NBI_BLOCK putmem_signal_nbi_block;
        SIGNAL_ADD if one => shmem::signal_op(sig, sv, add, pe),
        _ => {},
    )
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
            if stress_ops::warp(*rec) == warp {
                run(rec, arena, src, stress_ops::lane(*rec) == lane);
            }
        }
        for j in 0..ops as usize {
            let rec = recs.add(j * REC);
            if stress_ops::warp(*rec) == BLOCK {
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
                    ld_v4(base.add(16 * u)),
                    ld_v4(base.add(16 * (u + bs))),
                    ld_v4(base.add(16 * (u + 2 * bs))),
                    ld_v4(base.add(16 * (u + 3 * bs))),
                ];
                for (k, v) in v.into_iter().enumerate() {
                    add(u + k * bs, v);
                }
                u += 4 * bs;
            }
            while u < units {
                add(u, ld_v4(base.add(16 * u)));
                u += bs;
            }
            if acc != 0 {
                <u64 as AtomicWord>::add(sums.add(r * nparts as usize + p), acc);
            }
        }
        shmem::sync_all_block();
    }
}
