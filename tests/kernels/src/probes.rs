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
