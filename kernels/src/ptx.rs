//! Inline-PTX primitives. Every block cites the PTX ISA (8.0) section it
//! relies on; none carries `nomem`/`readonly`/`pure`, so the compiler keeps
//! their order against other memory accesses.

use core::arch::asm;

/// This thread's index in its block, flattened (x fastest).
#[inline(always)]
pub fn thread_index_in_block() -> u32 {
    use core::arch::nvptx::*;
    // SAFETY: reading special registers (PTX ISA 10: %tid, %ntid).
    unsafe {
        _thread_idx_x() as u32
            + _block_dim_x() as u32 * (_thread_idx_y() as u32 + _block_dim_y() as u32 * _thread_idx_z() as u32)
    }
}

/// Threads in this block.
#[inline(always)]
pub fn threads_in_block() -> u32 {
    use core::arch::nvptx::*;
    // SAFETY: special registers (PTX ISA 10.2 %ntid).
    unsafe { (_block_dim_x() * _block_dim_y() * _block_dim_z()) as u32 }
}

/// Lane of this thread in its warp (PTX ISA 10.3 `%laneid`).
#[inline(always)]
pub fn lane_id() -> u32 {
    let l: u32;
    // SAFETY: reads a special register.
    unsafe { asm!("mov.u32 {l}, %laneid;", l = out(reg32) l) };
    l
}

/// `barrier.sync 0` — all threads of the block (PTX ISA 9.7.12.1); also
/// orders memory among them at CTA scope. The non-`.aligned` form (`bar.sync`
/// is `barrier.sync.aligned`): threads may reach it from divergent code, as
/// after `if tid == 0 { barrier_all() }`; with `.aligned` that is undefined
/// and was seen to release the block early and then hang.
#[inline(always)]
pub fn sync_block() {
    // SAFETY: a block-wide barrier; callers are documented to call it from every thread.
    unsafe { asm!("barrier.sync 0;") };
}

/// `bar.warp.sync 0xffffffff` — all threads of the warp (PTX ISA 9.7.12.3).
#[inline(always)]
pub fn sync_warp() {
    // SAFETY: a warp-wide barrier; callers are documented to call it from every lane.
    unsafe { asm!("bar.warp.sync -1;") };
}

/// `fence.sc.sys` (PTX ISA 9.7.12.4; `membar.sys` is its synonym on sm_70+):
/// sequentially consistent fence at system scope.
#[inline(always)]
pub fn fence_sc_sys() {
    // SAFETY: a fence only orders memory operations.
    unsafe { asm!("fence.sc.sys;") };
}

/// `fence.acq_rel.sys` (PTX ISA 9.7.12.4): lightweight release/acquire fence at system scope.
#[inline(always)]
pub fn fence_acq_rel_sys() {
    // SAFETY: a fence only orders memory operations.
    unsafe { asm!("fence.acq_rel.sys;") };
}

/// `st.relaxed.sys.global.u64` (PTX ISA 9.7.8.10 st).
///
/// # Safety
/// `p` is a valid, 8-byte-aligned global address.
#[inline(always)]
pub unsafe fn st_relaxed_sys_u64(p: *mut u64, v: u64) {
    // SAFETY: `p` is a valid, 8-byte-aligned global address (this fn's contract);
    // the asm writes only that word (PTX ISA 9.7.8.10 st).
    unsafe { asm!("st.relaxed.sys.global.u64 [{p}], {v};", p = in(reg64) p, v = in(reg64) v) };
}

/// `st.release.sys.global.u64` (PTX ISA 9.7.8.10).
///
/// # Safety
/// `p` is a valid, 8-byte-aligned global address.
#[inline(always)]
pub unsafe fn st_release_sys_u64(p: *mut u64, v: u64) {
    // SAFETY: `p` is a valid, 8-byte-aligned global address (this fn's contract);
    // the asm writes only that word (PTX ISA 9.7.8.10 st).
    unsafe { asm!("st.release.sys.global.u64 [{p}], {v};", p = in(reg64) p, v = in(reg64) v) };
}

/// Whether the job's PEs all share this GPU ([`crate::abi::FLAG_ONE_GPU`]):
/// the ordering operations below then use the `.gpu` scope, else `.sys`.
/// Measured on one H200 (ping-pong round trip, `gpushmem-perf scopes`): a
/// release store and an acquire fence at `.gpu` cost 1.93 µs, at `.sys` 2.85 µs.
#[inline(always)]
pub fn one_gpu() -> bool {
    crate::state::state().flags & crate::abi::FLAG_ONE_GPU != 0
}

/// `fence.sc` at the job's scope (see [`one_gpu`]; PTX ISA 9.7.12.4).
#[inline(always)]
pub fn fence_sc() {
    if one_gpu() {
        // SAFETY: a fence only orders memory operations.
        unsafe { asm!("fence.sc.gpu;") };
    } else {
        fence_sc_sys();
    }
}

/// `fence.acq_rel` at the job's scope (see [`one_gpu`]; PTX ISA 9.7.12.4).
#[inline(always)]
pub fn fence_acq_rel() {
    if one_gpu() {
        // SAFETY: a fence only orders memory operations.
        unsafe { asm!("fence.acq_rel.gpu;") };
    } else {
        fence_acq_rel_sys();
    }
}

/// `st.release` of a u64 at the job's scope (PTX ISA 9.7.8.10).
///
/// # Safety
/// `p` is a valid, 8-byte-aligned global address.
#[inline(always)]
pub unsafe fn st_release_u64(p: *mut u64, v: u64) {
    // SAFETY: `p` is a valid, 8-byte-aligned global address (this fn's contract,
    // which is `st_release_sys_u64`'s); the asm writes only that word (PTX ISA 9.7.8.10 st).
    unsafe {
        if one_gpu() {
            asm!("st.release.gpu.global.u64 [{p}], {v};", p = in(reg64) p, v = in(reg64) v);
        } else {
            st_release_sys_u64(p, v);
        }
    }
}

/// `red.release.add.u64` at the job's scope (PTX ISA 9.7.13.6).
///
/// # Safety
/// `p` is a valid, 8-byte-aligned global address.
#[inline(always)]
pub unsafe fn red_release_add_u64(p: *mut u64, v: u64) {
    // SAFETY: `p` is a valid, 8-byte-aligned global address (this fn's contract);
    // either asm only reads and writes that word, atomically (PTX ISA 9.7.13.6 red).
    unsafe {
        if one_gpu() {
            asm!("red.release.gpu.global.add.u64 [{p}], {v};", p = in(reg64) p, v = in(reg64) v);
        } else {
            asm!("red.release.sys.global.add.u64 [{p}], {v};", p = in(reg64) p, v = in(reg64) v);
        }
    }
}

/// Loads a `T` that no thread writes while any kernel of the module runs (the
/// device state, the peer-base and team tables, all written by the host
/// between launches), as `ld.global.nc.u32` words (PTX ISA 9.7.8.8: the
/// non-coherent path is valid for data read-only for the kernel's lifetime).
///
/// The asm is declared pure and memory-free, which is true of data that is
/// constant for the whole kernel: LLVM may then load it once and keep it in
/// registers across loops and fences (a coherent load after a
/// `fence.acq_rel` misses L1 and costs an L2 round trip each time: about
/// 0.5 µs per hop of a signal ping-pong, measured).
///
/// # Safety
/// `p` is valid, 4-byte aligned global memory that does not change while a
/// kernel of this module runs. (`T`'s size a multiple of 4 and its alignment
/// at least 4, which the word copy needs, are checked at compile time.)
#[inline(always)]
// `nomem` on purpose: the memory read is invariant for the kernel (the
// contract above), which is what lets LLVM keep the value across fences.
#[allow(clippy::pointers_in_nomem_asm_block)]
pub unsafe fn ld_invariant<T: bytemuck::Pod>(p: *const T) -> T {
    // The word-by-word copy below writes aligned `u32`s into `out`.
    const { assert!(core::mem::size_of::<T>().is_multiple_of(4) && core::mem::align_of::<T>() >= 4) };
    let mut out = T::zeroed();
    let words = core::mem::size_of::<T>() / 4;
    let (src, dst) = (p as *const u32, &mut out as *mut T as *mut u32);
    for i in 0..words {
        let w: u32;
        // SAFETY: `i < size_of::<T>() / 4`, so `src.add(i)` is a 4-byte-aligned word of
        // the valid `*p`, which no thread writes while the kernel runs (this fn's
        // contract; PTX ISA 9.7.8.8 allows `.nc` for such data), and `dst.add(i)` a word
        // inside the local `out`, 4-byte aligned (the const assertion above), and
        // `T: Pod` makes any bits a valid `T`.
        unsafe {
            asm!("ld.global.nc.u32 {w}, [{p}];", w = out(reg32) w, p = in(reg64) src.add(i),
                options(pure, nomem, nostack, preserves_flags));
            dst.add(i).write(w);
        }
    }
    out
}

/// 16 bytes as one vector load, `ld.global.v4.u32` (PTX ISA 9.7.8.8, vector operands 6.4.2).
///
/// # Safety
/// `p` is a valid, 16-byte-aligned global address.
#[inline(always)]
pub unsafe fn ld_global_v4(p: *const u8) -> [u32; 4] {
    let (a, b, c, d): (u32, u32, u32, u32);
    // SAFETY: `p` is a valid, 16-byte-aligned global address (this fn's contract), as the
    // vector load requires; the asm reads only those 16 bytes (PTX ISA 9.7.8.8 ld).
    unsafe {
        asm!("ld.global.v4.u32 {{{a}, {b}, {c}, {d}}}, [{p}];",
            a = out(reg32) a, b = out(reg32) b, c = out(reg32) c, d = out(reg32) d, p = in(reg64) p)
    };
    [a, b, c, d]
}

/// 16 bytes as one vector store, `st.global.v4.u32` (PTX ISA 9.7.8.10).
///
/// # Safety
/// `p` is a valid, 16-byte-aligned global address.
#[inline(always)]
pub unsafe fn st_global_v4(p: *mut u8, v: [u32; 4]) {
    // SAFETY: `p` is a valid, 16-byte-aligned global address (this fn's contract), as the
    // vector store requires; the asm writes only those 16 bytes (PTX ISA 9.7.8.10 st).
    unsafe {
        asm!("st.global.v4.u32 [{p}], {{{a}, {b}, {c}, {d}}};",
            p = in(reg64) p, a = in(reg32) v[0], b = in(reg32) v[1], c = in(reg32) v[2], d = in(reg32) v[3])
    };
}

/// `%globaltimer` (PTX ISA 10.32): nanoseconds, coarse ticks.
#[inline(always)]
pub fn global_timer_ns() -> u64 {
    let t: u64;
    // SAFETY: reads a special register.
    unsafe { asm!("mov.u64 {t}, %globaltimer;", t = out(reg64) t) };
    t
}

/// `trap` (PTX ISA 9.7.19.1): aborts the kernel; the context stays failed.
#[inline(always)]
pub fn trap() -> ! {
    // SAFETY: ends execution.
    unsafe { asm!("trap;", options(noreturn)) }
}
