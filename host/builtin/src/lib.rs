//! Built-in kernels behind the host's stream-ordered operations
//! (`Shmem::*_on_stream`): one block of 32 threads for the signal and sync
//! kernels; the collectives run their `_grid` forms on as many blocks of
//! `COLLECTIVE_THREADS` as the host launches (host/src/collective_ops.rs).
#![no_std]
#![feature(abi_ptx, stdarch_nvptx)]
// Kernel entry points: each one's safety contract is its launch arguments,
// which the host code that launches it (host/src/stream.rs) upholds.
#![allow(clippy::missing_safety_doc)]

use gpushmem_kernels::{self as shmem, Cmp, SignalOp};

// The host always builds these kernels for the native engine (host/build.rs).
// `scripts/test.sh` also lints every kernel crate for the NVSHMEM engine, where
// the `_grid` forms do not exist: there the block forms stand in.
#[cfg(gpushmem_nvshmem)]
use shmem::{
    alltoall_block as alltoall_grid, broadcast_block as broadcast_grid, fcollect_block as fcollect_grid,
    reduce_block as reduce_grid, reducescatter_block as reducescatter_grid,
};
#[cfg(not(gpushmem_nvshmem))]
use shmem::{alltoall_grid, broadcast_grid, fcollect_grid, reduce_grid, reducescatter_grid};

/// Completes what earlier work on the stream wrote (`fence.sc.sys`), then
/// updates the signal on `pe` with release semantics.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn gpushmem_signal_op(sig: *mut u64, value: u64, op: SignalOp, pe: u32) {
    if core::arch::nvptx::_thread_idx_x() == 0 {
        shmem::quiet();
        shmem::signal_op(sig, value, op, pe);
    }
}

/// Bounded wait until `*sig <cmp> value` (traps with a message at the timeout).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn gpushmem_signal_wait(sig: *const u64, cmp: Cmp, value: u64) {
    if core::arch::nvptx::_thread_idx_x() == 0 {
        shmem::signal_wait_until(sig, cmp, value);
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

/// `broadcast_grid` of bytes (the host's `broadcast_on_stream`).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn gpushmem_broadcast(team: u32, dest: *mut u8, src: *const u8, bytes: u64, root: u32) {
    broadcast_grid(shmem::Team(team), dest, src, bytes as usize, root);
}

/// `fcollect_grid` of bytes (the host's `fcollect_on_stream`).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn gpushmem_fcollect(team: u32, dest: *mut u8, src: *const u8, bytes: u64) {
    fcollect_grid(shmem::Team(team), dest, src, bytes as usize);
}

/// `alltoall_grid` of bytes (the host's `alltoall_on_stream`).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn gpushmem_alltoall(team: u32, dest: *mut u8, src: *const u8, bytes: u64) {
    alltoall_grid(shmem::Team(team), dest, src, bytes as usize);
}

/// `reduce_grid` and `reducescatter_grid` for one element type: kernels
/// `gpushmem_reduce_<type>` and `gpushmem_reducescatter_<type>`.
macro_rules! reduce_kernels {
    ($($t:ty => $reduce:ident, $scatter:ident;)*) => {$(
        /// `reduce_grid` (the host's `allreduce_on_stream`).
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $reduce(team: u32, dest: *mut $t, src: *const $t, n: u64, op: shmem::ReduceOp) {
            reduce_grid(shmem::Team(team), dest, src, n as usize, op);
        }

        /// `reducescatter_grid` (the host's `reducescatter_on_stream`).
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $scatter(team: u32, dest: *mut $t, src: *const $t, n: u64, op: shmem::ReduceOp) {
            reducescatter_grid(shmem::Team(team), dest, src, n as usize, op);
        }
    )*};
}

reduce_kernels! {
    u8 => gpushmem_reduce_u8, gpushmem_reducescatter_u8;
    i8 => gpushmem_reduce_i8, gpushmem_reducescatter_i8;
    u16 => gpushmem_reduce_u16, gpushmem_reducescatter_u16;
    i16 => gpushmem_reduce_i16, gpushmem_reducescatter_i16;
    u32 => gpushmem_reduce_u32, gpushmem_reducescatter_u32;
    i32 => gpushmem_reduce_i32, gpushmem_reducescatter_i32;
    u64 => gpushmem_reduce_u64, gpushmem_reducescatter_u64;
    i64 => gpushmem_reduce_i64, gpushmem_reducescatter_i64;
    f32 => gpushmem_reduce_f32, gpushmem_reducescatter_f32;
    f64 => gpushmem_reduce_f64, gpushmem_reducescatter_f64;
    shmem::F16 => gpushmem_reduce_f16, gpushmem_reducescatter_f16;
    shmem::Bf16 => gpushmem_reduce_bf16, gpushmem_reducescatter_bf16;
}
