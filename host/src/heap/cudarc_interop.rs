//! [`SymSlice`] as a cudarc device slice, so that symmetric memory goes
//! straight into cudarc's copies (`memcpy_dtoh`, `memcpy_htod`, …), launches
//! (`launch_builder().arg(&slice)`) and the libraries on cudarc (cuBLAS).
//!
//! cudarc orders a `CudaSlice` by events it keeps per slice. A `SymSlice` is
//! also written by kernels on the PE's stream and by other PEs, which no event
//! of ours can follow, so the rule is the PE's stream ([`crate::Shmem::stream`]):
//! - on **that stream**, a cudarc call is ordered like a `Shmem::launch` on it
//!   (stream order; nothing is added, nothing waits);
//! - on **another stream** of the same context, the call first waits for
//!   everything queued on the PE's stream so far (an event), and when the call
//!   has been queued, the host waits for that other stream (cudarc's
//!   `SyncOnDrop::Sync`), so that later work on the PE's stream sees the result.
//!
//! Writes by other PEs (puts into this PE's heap) are ordered by gpushmem's own
//! means, as in a kernel: a barrier or a signal the data was sent with.

use super::SymSlice;
use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut, DeviceSlice, SyncOnDrop};
use std::sync::Arc;

impl<T> SymSlice<T> {
    /// Orders `stream` after the PE's stream (see the module's rule) and says
    /// what to do once the caller's work is queued.
    fn ordered_on<'a>(&'a self, stream: &'a CudaStream) -> (cudarc::driver::sys::CUdeviceptr, SyncOnDrop<'a>) {
        let ptr = self.as_kernel_ptr();
        // The driver's handle, not the Arc: a second `CudaStream` may wrap the same stream.
        if stream.cu_stream() == self.stream.cu_stream() {
            return (ptr, SyncOnDrop::Sync(None));
        }
        // cudarc's own slices report errors here the same way: on the context,
        // returned by its next checked call.
        let ctx = stream.context();
        match self.stream.record_event(None) {
            Ok(done) => ctx.record_err(stream.wait(&done)),
            Err(e) => ctx.record_err(Err::<(), _>(e)),
        }
        (ptr, SyncOnDrop::sync_stream(stream))
    }
}

impl<T> DeviceSlice<T> for SymSlice<T> {
    fn len(&self) -> usize {
        self.len
    }

    /// The PE's stream ([`crate::Shmem::stream`]).
    fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }
}

/// This PE's copy of the allocation, for reading on `stream`: on the PE's
/// stream in stream order; on another stream after the PE's stream's work so
/// far, and the host waits for `stream` once the read is queued.
impl<T> DevicePtr<T> for SymSlice<T> {
    fn device_ptr<'a>(&'a self, stream: &'a CudaStream) -> (cudarc::driver::sys::CUdeviceptr, SyncOnDrop<'a>) {
        self.ordered_on(stream)
    }
}

/// This PE's copy of the allocation, for writing on `stream`: ordered as for
/// [`DevicePtr`] (reads and writes alike).
impl<T> DevicePtrMut<T> for SymSlice<T> {
    fn device_ptr_mut<'a>(&'a mut self, stream: &'a CudaStream) -> (cudarc::driver::sys::CUdeviceptr, SyncOnDrop<'a>) {
        self.ordered_on(stream)
    }
}
