//! Issue 40, step 3: the Hopper bulk-copy engine (`cp.async.bulk`, "TMA")
//! from Rust's nvptx target, before any library API is built on it. What had
//! to be shown possible, each used below:
//! - **static shared memory**: a `.shared` array declared inside an `asm!`
//!   block (PTX allows `.shared` variables at function scope; a block of its
//!   own keeps the name local) and its address taken with `cvta.shared`;
//!   static shared memory is capped at 48 KiB per block;
//! - **dynamic shared memory**: `.extern .shared` must be at module scope,
//!   which `global_asm!` gives on nvptx (the launch's `shared_mem_bytes` sizes it);
//! - **32-bit shared addresses** for `cp.async.bulk` and `mbarrier` operands
//!   (`cvta.to.shared` of the generic address, then `cvt.u32.u64`);
//! - **no labels in `asm!`**: an `asm!` body may be duplicated (inlined,
//!   unrolled) and Rust escapes LLVM's `${:uid}`, so waits loop in Rust on a
//!   predicate that one `asm!` returns (`selp`).
//!
//! Native engine only (left out of the NVSHMEM engine's build).

use core::arch::asm;
use core::arch::nvptx::*;

/// Bytes per bulk copy (a multiple of 16, as `cp.async.bulk` requires).
const CHUNK: u32 = 8192;
/// Chunks in flight per block: loads of the next ones overlap the store of this one.
const DEPTH: u32 = 4;

/// This block's staging area (DEPTH chunks) and its DEPTH mbarriers, as
/// 32-bit shared-window addresses. PTX ISA 5.1.5 (`.shared` state space),
/// 9.7.9.21 (`cvta`).
#[inline(always)]
fn stage() -> (u32, u32) {
    let (buf, bar): (u32, u32);
    // SAFETY: declares block-private shared arrays and converts their
    // addresses; reads and writes nothing.
    unsafe {
        asm!(
            "{{",
            ".reg .b64 %gs_t;",
            ".shared .align 128 .b8 gs_bulk_stage[{bytes}];",
            ".shared .align 8 .b64 gs_bulk_bar[{depth}];",
            "mov.u64 %gs_t, gs_bulk_stage;",
            "cvt.u32.u64 {buf}, %gs_t;",
            "mov.u64 %gs_t, gs_bulk_bar;",
            "cvt.u32.u64 {bar}, %gs_t;",
            "}}",
            bytes = const CHUNK * DEPTH,
            depth = const DEPTH,
            buf = out(reg32) buf,
            bar = out(reg32) bar,
        );
    }
    (buf, bar)
}

/// Starts the bulk load of `n` bytes at `src` into shared `dst`, completing on
/// the mbarrier `bar` (its expected transaction count raised by `n` first).
/// PTX ISA 9.7.9.25.4.1 (`cp.async.bulk`), 9.7.13.15.11 (`mbarrier.arrive`).
///
/// # Safety
/// `src..src+n` is readable global memory; `dst`, `bar` are this block's
/// stage and mbarrier; `n` and both addresses are multiples of 16.
#[inline(always)]
unsafe fn load(dst: u32, src: u64, n: u32, bar: u32) {
    // SAFETY: the caller's contract.
    unsafe {
        asm!(
            "mbarrier.arrive.expect_tx.shared::cta.b64 _, [{bar}], {n};",
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [{dst}], [{src}], {n}, [{bar}];",
            bar = in(reg32) bar,
            dst = in(reg32) dst,
            src = in(reg64) src,
            n = in(reg32) n,
        )
    };
}

/// Waits until phase `parity` of mbarrier `bar` has completed (its loads have
/// landed). PTX ISA 9.7.13.15.16 (`mbarrier.try_wait`).
#[inline(always)]
fn wait(bar: u32, parity: u32) {
    loop {
        let done: u32;
        // SAFETY: polls an mbarrier of this block's stage.
        unsafe {
            asm!(
                "{{ .reg .pred %gs_p; mbarrier.try_wait.parity.shared::cta.b64 %gs_p, [{bar}], {parity}; selp.u32 {done}, 1, 0, %gs_p; }}",
                bar = in(reg32) bar,
                parity = in(reg32) parity,
                done = out(reg32) done,
            )
        };
        if done != 0 {
            return;
        }
    }
}

/// `dst[0..bytes) = src[0..bytes)` through the bulk-copy engine: the blocks
/// take chunks round robin; in each, thread 0 keeps DEPTH loads in flight and
/// stores each chunk as it lands; the kernel returns once every store is
/// complete. `bytes`, `dst` and `src` are multiples of 16.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn bulk_probe_copy(dst: *mut u8, src: *const u8, bytes: u64) {
    let (buf, bar) = stage();
    if _thread_idx_x() != 0 {
        return;
    }
    let (block, blocks) = (_block_idx_x() as u64, _grid_dim_x() as u64);
    for i in 0..DEPTH {
        // SAFETY: initialises this block's mbarriers (one arrival per phase).
        // PTX ISA 9.7.13.15.9 (`mbarrier.init`), 9.7.13.4 (`fence.mbarrier_init`).
        unsafe { asm!("mbarrier.init.shared::cta.b64 [{b}], 1;", b = in(reg32) bar + 8 * i) };
    }
    // SAFETY: makes the inits visible to the async proxy before any bulk copy uses them.
    unsafe { asm!("fence.mbarrier_init.release.cluster;") };
    let chunks = bytes.div_ceil(CHUNK as u64);
    let mine = if block < chunks { (chunks - block).div_ceil(blocks) } else { 0 };
    let at = |j: u64| (block + j * blocks) * CHUNK as u64;
    let len = |j: u64| (bytes - at(j)).min(CHUNK as u64) as u32;
    for j in 0..mine.min(DEPTH as u64) {
        let b = j as u32 % DEPTH;
        // SAFETY: chunk j of `src` into stage slot b (in bounds by `len`).
        unsafe { load(buf + b * CHUNK, src as u64 + at(j), len(j), bar + 8 * b) };
    }
    for j in 0..mine {
        let b = j as u32 % DEPTH;
        wait(bar + 8 * b, (j / DEPTH as u64) as u32 & 1);
        // SAFETY: stage slot b holds chunk j; writes dst's chunk j. PTX ISA
        // 9.7.9.25.4.1 (`cp.async.bulk` shared::cta → global, bulk_group),
        // 9.7.9.25.4.4/5 (`commit_group`, `wait_group`).
        unsafe {
            asm!(
                "cp.async.bulk.global.shared::cta.bulk_group [{dst}], [{src}], {n};",
                "cp.async.bulk.commit_group;",
                dst = in(reg64) dst as u64 + at(j),
                src = in(reg32) buf + b * CHUNK,
                n = in(reg32) len(j),
            )
        };
        if j + (DEPTH as u64) < mine {
            // Slot b is loaded again only once the store of chunk j has read it.
            // SAFETY: waits for this thread's own bulk groups.
            unsafe { asm!("cp.async.bulk.wait_group.read 0;") };
            let k = j + DEPTH as u64;
            // SAFETY: chunk k of `src` into the slot chunk j's store has left.
            unsafe { load(buf + b * CHUNK, src as u64 + at(k), len(k), bar + 8 * b) };
        }
    }
    // SAFETY: waits until every store of this thread is complete.
    unsafe { asm!("cp.async.bulk.wait_group 0;") };
}

// Dynamic shared memory: module scope, which only `global_asm!` reaches.
core::arch::global_asm!(".extern .shared .align 16 .b8 gs_probe_dynamic[];");

/// Writes `i * 3 + 1` into word i of the dynamic shared memory for
/// `i < words` (the launch gives `4 * words` bytes), then copies it to `out`:
/// dynamic shared memory works from Rust.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn bulk_probe_dynamic(out: *mut u32, words: u32) {
    let base: u64;
    // SAFETY: takes the generic address of the dynamic shared array.
    unsafe { asm!("cvta.shared.u64 {}, gs_probe_dynamic;", out(reg64) base) };
    let smem = base as *mut u32;
    let t = _thread_idx_x();
    let step = _block_dim_x();
    let mut i = t;
    while i < words {
        // SAFETY: word i < words of the launch's dynamic shared memory.
        unsafe { smem.add(i as usize).write_volatile(i * 3 + 1) };
        i += step;
    }
    _syncthreads();
    let mut i = t;
    while i < words {
        // SAFETY: as above; `out` has `words` words (the caller's contract).
        unsafe { out.add(i as usize).write(smem.add(i as usize).read_volatile()) };
        i += step;
    }
}
