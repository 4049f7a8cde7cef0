//! Thin result-style layer over the CUDA driver calls cudarc's safe API does
//! not wrap (IPC, peer access, raw allocations), plus GPU detection.
//!
//! Each function names the driver call it makes; see the CUDA Driver API
//! reference, sections "Memory Management" (`cuMemAlloc`, `cuIpc*`) and
//! "Peer Context Memory Access" (`cuCtxEnablePeerAccess`).

use crate::error::CudaContext as _;
use crate::{Error, Result};
use cudarc::driver::{result, sys};

/// Asks the driver for enough hardware work queues per context for
/// `pes_per_gpu` PEs as threads (`CUDA_DEVICE_MAX_CONNECTIONS`, read when a
/// context is created), unless the user set it. The default is 8 queues: with
/// more streams in a context than queues, streams share a queue and a kernel
/// can wait behind another stream's kernel. PEs as threads put one stream per
/// PE in one context and their kernels wait for each other, so sharing a queue
/// can deadlock (suspected cause of one 8-PE hang on the H200, after many
/// tests in one process). Two queues per PE (16 for 8 PEs, at most 32, the
/// driver's limit); more queues make context creation slower.
///
/// Only the first context of the process sees the value, so the first job
/// decides it: a later job of more PEs per GPU than it was sized for is an
/// [`Error::Config`] saying what to set, never a possible hang.
pub(crate) fn reserve_queues(pes_per_gpu: usize) -> Result<()> {
    use std::sync::OnceLock;
    // (queues the process's context was made with, whether the user chose them).
    static FIRST: OnceLock<(usize, bool)> = OnceLock::new();
    let &(queues, user_set) = FIRST.get_or_init(|| {
        let user = std::env::var("CUDA_DEVICE_MAX_CONNECTIONS").ok().and_then(|v| v.trim().parse().ok());
        match user {
            Some(q) => (q, true),
            None if pes_per_gpu <= 4 => (DEFAULT_QUEUES, false),
            None => {
                let q = queues_for(pes_per_gpu);
                // Before this library starts its PE threads.
                std::env::set_var("CUDA_DEVICE_MAX_CONNECTIONS", q.to_string());
                log::debug!(
                    "CUDA_DEVICE_MAX_CONNECTIONS={q}: {pes_per_gpu} PEs' streams in one context must not share a queue"
                );
                (q, false)
            }
        }
    });
    check_queues(queues, user_set, pes_per_gpu)
}

/// The driver's default number of hardware queues per context.
const DEFAULT_QUEUES: usize = 8;

/// Queues for `pes_per_gpu` PEs as threads: two each, a power of two in 8..=32.
fn queues_for(pes_per_gpu: usize) -> usize {
    (pes_per_gpu * 2).next_power_of_two().clamp(DEFAULT_QUEUES, 32)
}

/// Whether a context made with `queues` queues can host `pes_per_gpu` PEs as threads.
fn check_queues(queues: usize, user_set: bool, pes_per_gpu: usize) -> Result<()> {
    if user_set || pes_per_gpu <= 4 || queues >= queues_for(pes_per_gpu) {
        return Ok(());
    }
    Err(Error::Config {
        name: "CUDA_DEVICE_MAX_CONNECTIONS".into(),
        value: queues.to_string(),
        why: format!(
            "this process made its CUDA context for a smaller job ({queues} hardware queues); {pes_per_gpu} PEs as threads \
             on one GPU need {} (PEs sharing a queue can deadlock). Run the largest job first, or set \
             CUDA_DEVICE_MAX_CONNECTIONS={} before the first",
            queues_for(pes_per_gpu),
            queues_for(pes_per_gpu)
        ),
    })
}

/// Number of CUDA devices, or [`Error::NoGpu`] with the reason when the
/// driver library is missing, fails to initialise, or sees no device.
pub fn device_count() -> Result<usize> {
    // SAFETY: only tries to dlopen the library.
    if !unsafe { sys::is_culib_present() } {
        return Err(Error::NoGpu("the CUDA driver library (libcuda.so) was not found".into()));
    }
    result::init().map_err(|e| Error::NoGpu(format!("cuInit failed: {e}")))?;
    let n = result::device::get_count().map_err(|e| Error::NoGpu(format!("cuDeviceGetCount failed: {e}")))?;
    if n <= 0 {
        return Err(Error::NoGpu("the CUDA driver reports no device".into()));
    }
    Ok(n as usize)
}

/// Device memory from [`mem_alloc`] in `ctx`, freed (with `ctx` bound) on drop.
pub(crate) struct DeviceBuffer {
    /// The device address.
    pub ptr: u64,
    ctx: std::sync::Arc<cudarc::driver::CudaContext>,
}

impl DeviceBuffer {
    /// `bytes` of device memory in `ctx` (bound to this thread first).
    pub fn alloc(ctx: &std::sync::Arc<cudarc::driver::CudaContext>, bytes: u64) -> Result<DeviceBuffer> {
        ctx.bind_to_thread().cuda("cuCtxSetCurrent")?;
        Ok(DeviceBuffer { ptr: mem_alloc(bytes)?, ctx: ctx.clone() })
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        // SAFETY: owned allocation; its users (kernels, peers) are done by the time it drops.
        if let Err(e) = unsafe { mem_free(self.ptr) } {
            log::warn!("freeing device memory at {:#x}: {e}", self.ptr);
        }
    }
}

/// `cuMemAlloc`: `bytes` of device memory in the current context.
pub(crate) fn mem_alloc(bytes: u64) -> Result<u64> {
    // SAFETY: plain allocation; the caller frees it with `mem_free`.
    unsafe { result::malloc_sync(bytes as usize) }.cuda(format!("cuMemAlloc({bytes} bytes)"))
}

/// `cuMemFree`.
///
/// # Safety
/// `ptr` came from [`mem_alloc`] in the current context and is not in use.
pub(crate) unsafe fn mem_free(ptr: u64) -> Result<()> {
    // SAFETY: the caller guarantees `ptr` is a live allocation of the current context, not in use.
    unsafe { result::free_sync(ptr) }.cuda("cuMemFree")
}

/// `cuMemsetD8Async` on `stream`, then waits for the stream: zeroes `bytes` at `ptr`.
///
/// Every host↔heap transfer goes through the PE's own (non-blocking) stream
/// and waits for it: the synchronous `cuMemcpyHtoD`/`cuMemsetD8` may return
/// before the data lands (pageable source: once staged), and a peer writing
/// into the same range after the next bootstrap barrier would then be
/// overwritten by the late DMA — seen on the H200 as puts that "vanished".
///
/// # Safety
/// `[ptr, ptr + bytes)` is device memory of the current context.
pub(crate) unsafe fn zero(stream: sys::CUstream, ptr: u64, bytes: u64) -> Result<()> {
    // SAFETY: the caller guarantees the range is device memory of the current context.
    unsafe { result::memset_d8_async(ptr, 0, bytes as usize, stream) }.cuda("cuMemsetD8Async")?;
    // SAFETY: `stream` is a stream of the current context.
    unsafe { result::stream::synchronize(stream) }.cuda("cuStreamSynchronize (after memset)")
}

/// `cuMemcpyHtoDAsync` on `stream`, then waits for the stream (see [`zero`] for why).
///
/// # Safety
/// `[dst, dst + size_of_val(src))` is device memory of the current context.
pub(crate) unsafe fn copy_htod<T>(stream: sys::CUstream, dst: u64, src: &[T]) -> Result<()> {
    // SAFETY: the caller guarantees the destination range; `src` is borrowed
    // until the stream is synchronized below, so the async copy reads live memory.
    unsafe { result::memcpy_htod_async(dst, src, stream) }.cuda("cuMemcpyHtoDAsync")?;
    // SAFETY: `stream` is a stream of the current context.
    unsafe { result::stream::synchronize(stream) }.cuda("cuStreamSynchronize (after a host-to-device copy)")
}

/// `cuMemcpyDtoHAsync` on `stream`, then waits for the stream.
///
/// # Safety
/// `[src, src + size_of_val(dst))` is device memory of the current context.
pub(crate) unsafe fn copy_dtoh<T>(stream: sys::CUstream, dst: &mut [T], src: u64) -> Result<()> {
    // SAFETY: the caller guarantees the source range; `dst` is borrowed mutably
    // until the stream is synchronized below, so the async copy writes live memory.
    unsafe { result::memcpy_dtoh_async(dst, src, stream) }.cuda("cuMemcpyDtoHAsync")?;
    // SAFETY: `stream` is a stream of the current context.
    unsafe { result::stream::synchronize(stream) }.cuda("cuStreamSynchronize (after a device-to-host copy)")
}

/// An IPC handle's 64 bytes, as they travel through the bootstrap.
pub(crate) type IpcBytes = [u8; 64];

/// `cuIpcGetMemHandle` for an allocation made with [`mem_alloc`].
pub(crate) fn ipc_get_handle(ptr: u64) -> Result<IpcBytes> {
    let mut h = sys::CUipcMemHandle_st { reserved: [0; 64] };
    // SAFETY: `ptr` is the base of a cuMemAlloc allocation.
    unsafe { sys::cuIpcGetMemHandle(&mut h, ptr) }.result().cuda("cuIpcGetMemHandle")?;
    Ok(h.reserved.map(|c| c as u8))
}

/// `cuIpcOpenMemHandle` (lazy peer access): maps another process's allocation.
pub(crate) fn ipc_open(handle: &IpcBytes) -> Result<u64> {
    let h = sys::CUipcMemHandle_st { reserved: handle.map(|b| b as core::ffi::c_char) };
    let mut ptr = 0;
    let flags = sys::CUipcMem_flags::CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS as u32;
    // SAFETY: the handle came from cuIpcGetMemHandle in a live process of this job.
    unsafe { sys::cuIpcOpenMemHandle_v2(&mut ptr, h, flags) }.result().cuda("cuIpcOpenMemHandle")?;
    Ok(ptr)
}

/// `cuIpcCloseMemHandle`.
///
/// # Safety
/// `ptr` came from [`ipc_open`] and is no longer used.
pub(crate) unsafe fn ipc_close(ptr: u64) -> Result<()> {
    // SAFETY: the caller guarantees `ptr` came from `ipc_open` and is no longer used.
    unsafe { sys::cuIpcCloseMemHandle(ptr) }.result().cuda("cuIpcCloseMemHandle")
}

/// `cuDeviceCanAccessPeer` then `cuCtxEnablePeerAccess` from the current
/// context to `peer_ctx` (already enabled counts as success).
pub(crate) fn enable_peer_access(dev: sys::CUdevice, peer_dev: sys::CUdevice, peer_ctx: sys::CUcontext) -> Result<()> {
    let mut can = 0;
    // SAFETY: plain queries on valid device handles.
    unsafe { sys::cuDeviceCanAccessPeer(&mut can, dev, peer_dev) }.result().cuda("cuDeviceCanAccessPeer")?;
    if can == 0 {
        return Err(Error::Cuda {
            call: format!("peer access from device {dev} to device {peer_dev} (cuDeviceCanAccessPeer says no)"),
            source: cudarc::driver::DriverError(sys::cudaError_enum::CUDA_ERROR_PEER_ACCESS_UNSUPPORTED),
        });
    }
    // SAFETY: `peer_ctx` is a live context.
    match unsafe { sys::cuCtxEnablePeerAccess(peer_ctx, 0) } {
        sys::cudaError_enum::CUDA_SUCCESS | sys::cudaError_enum::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => Ok(()),
        e => Err(Error::Cuda { call: "cuCtxEnablePeerAccess".into(), source: cudarc::driver::DriverError(e) }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_context_sized_for_a_smaller_job_is_refused() {
        assert_eq!((queues_for(5), queues_for(8), queues_for(16), queues_for(64)), (16, 16, 32, 32));
        assert!(check_queues(8, false, 4).is_ok());
        assert!(check_queues(16, false, 8).is_ok());
        let e = check_queues(8, false, 8).unwrap_err().to_string();
        assert!(e.contains("CUDA_DEVICE_MAX_CONNECTIONS=16") && e.contains("largest job first"), "{e}");
        // The user's own choice stands (the docs say what it risks).
        assert!(check_queues(8, true, 8).is_ok());
    }
}
