//! Built-in kernels behind the host's stream-ordered operations
//! (`Shmem::*_on_stream`). Each is launched with one block of 32 threads.
#![no_std]
#![feature(abi_ptx, stdarch_nvptx)]

use gpushmem_kernels::{self as shmem, Cmp, SignalOp};

/// Completes what earlier work on the stream wrote (`fence.sc.sys`), then
/// updates the signal on `pe` with release semantics.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn gpushmem_signal_op(sig: *mut u64, value: u64, op: u32, pe: u32) {
    if core::arch::nvptx::_thread_idx_x() == 0 {
        shmem::quiet();
        // Codes come from the host's `SignalOp as u32`; anything else is SET.
        shmem::signal_op(sig, value, SignalOp::from_u32(op).unwrap_or(SignalOp::Set), pe);
    }
}

/// Bounded wait until `*sig <cmp> value` (traps with a message at the timeout).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn gpushmem_signal_wait(sig: *const u64, cmp: u32, value: u64) {
    if core::arch::nvptx::_thread_idx_x() == 0 {
        shmem::signal_wait_until(sig, Cmp::from_u32(cmp).unwrap_or(Cmp::Eq), value);
    }
}

/// `quiet`: completes this PE's earlier operations on the stream.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn gpushmem_quiet() {
    shmem::quiet_block();
}

/// `barrier_all` for the stream.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn gpushmem_barrier_all() {
    shmem::barrier_all_block();
}
