//! One tiny kernel per primitive, so the PTX tests can check that each emits
//! the instruction it promises (tests/ptx).

use gpushmem_kernels as shmem;

#[no_mangle]
pub unsafe extern "ptx-kernel" fn probe_fence() {
    shmem::fence();
}

#[no_mangle]
pub unsafe extern "ptx-kernel" fn probe_quiet() {
    shmem::quiet();
}

#[no_mangle]
pub unsafe extern "ptx-kernel" fn probe_quiet_block() {
    shmem::quiet_block();
}

#[no_mangle]
pub unsafe extern "ptx-kernel" fn probe_barrier_all() {
    shmem::barrier_all();
}

#[no_mangle]
pub unsafe extern "ptx-kernel" fn probe_barrier_all_block() {
    shmem::barrier_all_block();
}

#[no_mangle]
pub unsafe extern "ptx-kernel" fn probe_sync_all() {
    shmem::sync_all();
}

#[no_mangle]
pub unsafe extern "ptx-kernel" fn probe_put_nbi_block(dest: *mut u8, src: *const u8, n: u64, pe: u32) {
    shmem::putmem_nbi_block(dest, src, n as usize, pe);
}

#[no_mangle]
pub unsafe extern "ptx-kernel" fn probe_get_warp(dest: *mut u8, src: *const u8, n: u64, pe: u32) {
    shmem::getmem_warp(dest, src, n as usize, pe);
}

#[no_mangle]
pub unsafe extern "ptx-kernel" fn probe_wait(flag: *mut u64, v: u64) {
    shmem::wait::wait_counter_reaches(flag, v, c"probe");
}

#[no_mangle]
pub unsafe extern "ptx-kernel" fn probe_ptr(sym: *mut u64, pe: u32, out: *mut u64) {
    *out = shmem::ptr(sym, pe) as u64;
}

// Signals, atomics, waits (the device API of issue 4). Runtime operands
// (kernel parameters) keep each operation from being folded away.

#[no_mangle]
pub unsafe extern "ptx-kernel" fn probe_atomic_fetch_add_u64(dest: *mut u64, v: u64, pe: u32, out: *mut u64) {
    *out = shmem::atomic_fetch_add(dest, v, pe);
}

#[no_mangle]
pub unsafe extern "ptx-kernel" fn probe_atomic_add_u32(dest: *mut u32, v: u32, pe: u32) {
    shmem::atomic_add(dest, v, pe);
}

#[no_mangle]
pub unsafe extern "ptx-kernel" fn probe_atomic_fetch_add_i32(dest: *mut i32, v: i32, pe: u32, out: *mut i32) {
    *out = shmem::atomic_fetch_add(dest, v, pe);
}

#[no_mangle]
pub unsafe extern "ptx-kernel" fn probe_atomic_compare_swap_u64(
    dest: *mut u64,
    cond: u64,
    v: u64,
    pe: u32,
    out: *mut u64,
) {
    *out = shmem::atomic_compare_swap(dest, cond, v, pe);
}

#[no_mangle]
pub unsafe extern "ptx-kernel" fn probe_atomic_swap_i32(dest: *mut i32, v: i32, pe: u32, out: *mut i32) {
    *out = shmem::atomic_swap(dest, v, pe);
}

#[no_mangle]
pub unsafe extern "ptx-kernel" fn probe_atomic_fetch_and_u32(dest: *mut u32, v: u32, pe: u32, out: *mut u32) {
    *out = shmem::atomic_fetch_and(dest, v, pe);
}

#[no_mangle]
pub unsafe extern "ptx-kernel" fn probe_atomic_fetch_or_u64(dest: *mut u64, v: u64, pe: u32, out: *mut u64) {
    *out = shmem::atomic_fetch_or(dest, v, pe);
}

#[no_mangle]
pub unsafe extern "ptx-kernel" fn probe_atomic_fetch_xor_i64(dest: *mut i64, v: i64, pe: u32, out: *mut i64) {
    *out = shmem::atomic_fetch_xor(dest, v, pe);
}

#[no_mangle]
pub unsafe extern "ptx-kernel" fn probe_atomic_fetch_u64(src: *mut u64, pe: u32, out: *mut u64) {
    *out = shmem::atomic_fetch(src, pe);
}

#[no_mangle]
pub unsafe extern "ptx-kernel" fn probe_atomic_set_u32(dest: *mut u32, v: u32, pe: u32) {
    shmem::atomic_set(dest, v, pe);
}

#[no_mangle]
pub unsafe extern "ptx-kernel" fn probe_atomic_set_u64(dest: *mut u64, v: u64, pe: u32) {
    shmem::atomic_set(dest, v, pe);
}

#[no_mangle]
pub unsafe extern "ptx-kernel" fn probe_atomic_fetch_add_f32(dest: *mut f32, v: f32, pe: u32, out: *mut f32) {
    *out = shmem::atomic_fetch_add_float(dest, v, pe);
}

#[no_mangle]
pub unsafe extern "ptx-kernel" fn probe_atomic_fetch_add_f64(dest: *mut f64, v: f64, pe: u32, out: *mut f64) {
    *out = shmem::atomic_fetch_add_float(dest, v, pe);
}

#[no_mangle]
pub unsafe extern "ptx-kernel" fn probe_signal_op_set(sig: *mut u64, v: u64, pe: u32) {
    shmem::signal_op(sig, v, shmem::SignalOp::Set, pe);
}

#[no_mangle]
pub unsafe extern "ptx-kernel" fn probe_signal_op_add(sig: *mut u64, v: u64, pe: u32) {
    shmem::signal_op(sig, v, shmem::SignalOp::Add, pe);
}

#[no_mangle]
pub unsafe extern "ptx-kernel" fn probe_putmem_signal_block(
    dest: *mut u8,
    src: *const u8,
    n: u64,
    sig: *mut u64,
    v: u64,
    pe: u32,
) {
    shmem::putmem_signal_block(dest, src, n as usize, sig, v, shmem::SignalOp::Set, pe);
}

#[no_mangle]
pub unsafe extern "ptx-kernel" fn probe_put_signal_nbi_add(
    dest: *mut u64,
    src: *const u64,
    n: u64,
    sig: *mut u64,
    v: u64,
    pe: u32,
) {
    shmem::put_signal_nbi(dest, src, n as usize, sig, v, shmem::SignalOp::Add, pe);
}

/// The comparison with code `c` (runtime, so no branch of the wait is folded away).
#[inline(always)]
fn cmp_of(c: u32) -> shmem::Cmp {
    use shmem::Cmp::*;
    [Eq, Ne, Gt, Ge, Lt, Le][(c as usize).min(5)]
}

#[no_mangle]
pub unsafe extern "ptx-kernel" fn probe_signal_wait_until(sig: *mut u64, cmp: u32, v: u64, out: *mut u64) {
    *out = shmem::signal_wait_until(sig, cmp_of(cmp), v);
}

/// The relaxed pair: `signal_op_relaxed` (SET) to `pe`, then the relaxed wait
/// on this PE's word (no release, no acquire).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn probe_signal_relaxed(sig: *mut u64, v: u64, pe: u32, out: *mut u64) {
    shmem::signal_op_relaxed(sig, v, shmem::SignalOp::Set, pe);
    *out = shmem::signal_wait_until_relaxed(sig, shmem::Cmp::Ge, v);
}

#[no_mangle]
pub unsafe extern "ptx-kernel" fn probe_signal_fetch(sig: *mut u64, out: *mut u64) {
    *out = shmem::signal_fetch(sig);
}

#[no_mangle]
pub unsafe extern "ptx-kernel" fn probe_wait_until_i32(ivar: *mut i32, cmp: u32, v: i32, out: *mut i32) {
    *out = shmem::wait_until(ivar, cmp_of(cmp), v);
}

#[no_mangle]
pub unsafe extern "ptx-kernel" fn probe_test_u64(ivar: *mut u64, cmp: u32, v: u64, out: *mut u32) {
    *out = shmem::test(ivar, cmp_of(cmp), v) as u32;
}

#[no_mangle]
pub unsafe extern "ptx-kernel" fn probe_test_any_u32(
    ivars: *mut u32,
    n: u64,
    status: *const i32,
    cmp: u32,
    v: u32,
    out: *mut u64,
) {
    *out = shmem::test_any(ivars, n as usize, status, cmp_of(cmp), v) as u64;
}

#[no_mangle]
pub unsafe extern "ptx-kernel" fn probe_wait_until_all_u64(
    ivars: *mut u64,
    n: u64,
    status: *const i32,
    cmp: u32,
    v: u64,
) {
    shmem::wait_until_all(ivars, n as usize, status, cmp_of(cmp), v);
}

#[no_mangle]
pub unsafe extern "ptx-kernel" fn probe_iput_block(
    dest: *mut u32,
    src: *const u32,
    dst: i64,
    sst: i64,
    n: u64,
    pe: u32,
) {
    shmem::iput_block(dest, src, dst as isize, sst as isize, n as usize, pe);
}

/// Team and collective probes.
mod team_probes {
    use super::*;

    #[no_mangle]
    pub unsafe extern "ptx-kernel" fn probe_team_barrier(team: u32) {
        shmem::barrier(shmem::Team(team));
    }

    #[no_mangle]
    pub unsafe extern "ptx-kernel" fn probe_reduce_block_f32(
        team: u32,
        dest: *mut f32,
        src: *const f32,
        n: u64,
        op: u32,
    ) {
        shmem::reduce_block(
            shmem::Team(team),
            dest,
            src,
            n as usize,
            shmem::ReduceOp::from_u32(op).unwrap_or(shmem::ReduceOp::Sum),
        );
    }

    #[no_mangle]
    pub unsafe extern "ptx-kernel" fn probe_fcollect_warp(team: u32, dest: *mut u8, src: *const u8, n: u64) {
        shmem::fcollect_warp(shmem::Team(team), dest, src, n as usize);
    }

    // Teams and collectives (issue 5).

    #[no_mangle]
    pub unsafe extern "ptx-kernel" fn probe_team_sync_warp(team: u32) {
        shmem::team_sync_warp(shmem::Team(team));
    }

    #[no_mangle]
    pub unsafe extern "ptx-kernel" fn probe_broadcast_block(
        team: u32,
        dest: *mut u32,
        src: *const u32,
        n: u64,
        root: u32,
    ) {
        shmem::broadcast_block(shmem::Team(team), dest, src, n as usize, root);
    }

    #[no_mangle]
    pub unsafe extern "ptx-kernel" fn probe_alltoall_block(team: u32, dest: *mut u64, src: *const u64, n: u64) {
        shmem::alltoall_block(shmem::Team(team), dest, src, n as usize);
    }

    #[no_mangle]
    pub unsafe extern "ptx-kernel" fn probe_reduce_f16(
        team: u32,
        dest: *mut shmem::F16,
        src: *const shmem::F16,
        n: u64,
        op: u32,
    ) {
        shmem::reduce(
            shmem::Team(team),
            dest,
            src,
            n as usize,
            shmem::ReduceOp::from_u32(op).unwrap_or(shmem::ReduceOp::Sum),
        );
    }

    #[no_mangle]
    pub unsafe extern "ptx-kernel" fn probe_reduce_warp_bf16(
        team: u32,
        dest: *mut shmem::Bf16,
        src: *const shmem::Bf16,
        n: u64,
        op: u32,
    ) {
        shmem::reduce_warp(
            shmem::Team(team),
            dest,
            src,
            n as usize,
            shmem::ReduceOp::from_u32(op).unwrap_or(shmem::ReduceOp::Sum),
        );
    }

    #[no_mangle]
    pub unsafe extern "ptx-kernel" fn probe_reducescatter_block_i32(
        team: u32,
        dest: *mut i32,
        src: *const i32,
        n: u64,
        op: u32,
    ) {
        shmem::reducescatter_block(
            shmem::Team(team),
            dest,
            src,
            n as usize,
            shmem::ReduceOp::from_u32(op).unwrap_or(shmem::ReduceOp::Sum),
        );
    }
}
