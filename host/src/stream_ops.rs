//! Stream-ordered host operations (NVSHMEM's `nvshmemx_*_on_stream`): each is
//! enqueued on the caller's stream and takes effect in stream order with the
//! kernels and copies around it.
//!
//! - `put`/`get`: `cuMemcpyDtoDAsync` between this PE's buffer and the peer's
//!   mapping of the symmetric one (the copy engines; no SM is used).
//! - `put_signal`: that copy, then a one-thread built-in kernel that issues
//!   `fence.sc.sys` and updates the signal with a release store/`red`; stream
//!   order puts the copy's completion before the kernel's start.
//! - `signal_op`, `signal_wait_until` (any [`Cmp`], bounded: the device
//!   timeout traps with a message instead of hanging the stream), `quiet`,
//!   `barrier_all`: built-in kernels of one block.
//!
//! They reach peers by loads, stores and copies, so only PEs of this node: on
//! the NVSHMEM engine, a call that would touch a PE of another node (see
//! [`Shmem::nodes`]) is [`crate::Error::Engine`] naming it, before anything is
//! enqueued; across nodes, use the device API in your kernels.
//!
//! The typed forms are safe: [`Shmem::put_on_stream`] and
//! [`Shmem::get_on_stream`] between symmetric slices,
//! [`Shmem::put_buf_on_stream`] and [`Shmem::get_buf_on_stream`] with an
//! ordinary device buffer (cudarc's `CudaSlice` or a view of it) as the local
//! side. The byte forms ([`Shmem::putmem_on_stream`],
//! [`Shmem::getmem_on_stream`], [`Shmem::putmem_signal_on_stream`]) take
//! addresses: a symmetric one (from [`SymSlice::as_kernel_ptr`], possibly plus
//! an offset) for the remote side, checked to be in the heap, and any device
//! address for the local side, which nothing can check: they are `unsafe`.

use crate::error::CudaContext as _;
use crate::launch::{launch_on, KernelArgs};
use crate::{Result, Shmem, SymSlice};
use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut, LaunchConfig};
use gpushmem_kernels::abi::{Cmp, SignalOp};

const ONE_WARP: LaunchConfig = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (32, 1, 1), shared_mem_bytes: 0 };

impl Shmem {
    fn builtin_on(&self, stream: &CudaStream, name: &str, args: impl KernelArgs) -> Result<()> {
        let k = self.builtin.kernel(name)?;
        self.context().bind_to_thread().cuda("cuCtxSetCurrent")?;
        // SAFETY: the built-in kernels' parameters are those passed by the callers below.
        unsafe { launch_on(self.owner(), stream.cu_stream(), &k, ONE_WARP, &args) }
    }

    /// `cuMemcpyDtoDAsync` of `bytes` from `src` to `dst` on `stream`.
    ///
    /// # Safety
    /// `[dst, +bytes)` and `[src, +bytes)` are device memory that stays
    /// allocated until the copy is done, and nothing else accesses `dst`
    /// meanwhile (or reads and writes are ordered so as not to race).
    unsafe fn copy_on(&self, stream: &CudaStream, dst: u64, src: u64, bytes: usize, what: &str) -> Result<()> {
        self.context().bind_to_thread().cuda("cuCtxSetCurrent")?;
        // SAFETY: the caller guarantees both ranges (see `# Safety`).
        unsafe { cudarc::driver::result::memcpy_dtod_async(dst, src, bytes, stream.cu_stream()) }.cuda(what)
    }

    /// Copies `bytes` from `src` (this PE) to the symmetric `dest` on `pe`, in
    /// stream order (`nvshmemx_putmem_on_stream`). Complete when the stream reaches its end.
    /// `[dest, +bytes)` is checked to be in the symmetric heap; see
    /// [`Shmem::put_on_stream`] and [`Shmem::put_buf_on_stream`] for safe forms.
    ///
    /// # Safety
    /// `[src, +bytes)` is device memory (of any context: addresses are
    /// unified) that stays allocated, and is not written, until the stream
    /// has done the copy.
    pub unsafe fn putmem_on_stream(
        &self,
        dest: u64,
        src: u64,
        bytes: usize,
        pe: usize,
        stream: &CudaStream,
    ) -> Result<()> {
        let remote = self.peer_address(dest, bytes as u64, pe)?;
        // SAFETY: the remote range was checked to be in PE `pe`'s heap (mapped
        // for the job's lifetime); the caller guarantees `src`.
        unsafe { self.copy_on(stream, remote, src, bytes, "cuMemcpyDtoDAsync (putmem_on_stream)") }
    }

    /// Copies `bytes` of the symmetric `src` on `pe` to `dest` (this PE), in
    /// stream order (`nvshmemx_getmem_on_stream`). `[src, +bytes)` is checked
    /// to be in the symmetric heap; see [`Shmem::get_on_stream`] and
    /// [`Shmem::get_buf_on_stream`] for safe forms.
    ///
    /// # Safety
    /// `[dest, +bytes)` is device memory (of any context) that stays
    /// allocated, and is not otherwise accessed, until the stream has done
    /// the copy.
    pub unsafe fn getmem_on_stream(
        &self,
        dest: u64,
        src: u64,
        bytes: usize,
        pe: usize,
        stream: &CudaStream,
    ) -> Result<()> {
        let remote = self.peer_address(src, bytes as u64, pe)?;
        // SAFETY: the remote range was checked to be in PE `pe`'s heap; the caller guarantees `dest`.
        unsafe { self.copy_on(stream, dest, remote, bytes, "cuMemcpyDtoDAsync (getmem_on_stream)") }
    }

    /// Typed [`Shmem::putmem_on_stream`]: all of `src` (this PE's copy) into `dest` on `pe`.
    pub fn put_on_stream<T: bytemuck::Pod>(
        &self,
        dest: &SymSlice<T>,
        src: &SymSlice<T>,
        pe: usize,
        stream: &CudaStream,
    ) -> Result<()> {
        crate::shmem::check_len("put_on_stream", dest.len(), src.len())?;
        self.heap.check_slice(src)?;
        // SAFETY: `src` was checked to be a slice of this PE's heap (device
        // memory allocated for the job's lifetime, like the remote side);
        // `dest` is checked by `putmem_on_stream`.
        unsafe {
            self.putmem_on_stream(dest.as_kernel_ptr(), src.as_kernel_ptr(), dest.byte_len() as usize, pe, stream)
        }
    }

    /// Typed [`Shmem::getmem_on_stream`]: all of `src` on `pe` into this PE's `dest`.
    pub fn get_on_stream<T: bytemuck::Pod>(
        &self,
        dest: &SymSlice<T>,
        src: &SymSlice<T>,
        pe: usize,
        stream: &CudaStream,
    ) -> Result<()> {
        crate::shmem::check_len("get_on_stream", dest.len(), src.len())?;
        self.heap.check_slice(dest)?;
        // SAFETY: `dest` was checked to be a slice of this PE's heap (allocated
        // for the job's lifetime); `src` is checked by `getmem_on_stream`.
        unsafe {
            self.getmem_on_stream(dest.as_kernel_ptr(), src.as_kernel_ptr(), dest.byte_len() as usize, pe, stream)
        }
    }

    /// [`Shmem::put_on_stream`] from an ordinary device buffer of this PE
    /// (cudarc's `CudaSlice<T>` or a view): all of `src` into `dest` on `pe`.
    /// cudarc's event tracking orders the copy after earlier writes of `src`
    /// and keeps `src` from being freed before the copy is done.
    pub fn put_buf_on_stream<T: bytemuck::Pod>(
        &self,
        dest: &SymSlice<T>,
        src: &impl DevicePtr<T>,
        pe: usize,
        stream: &CudaStream,
    ) -> Result<()> {
        crate::shmem::check_len("put_buf_on_stream", dest.len(), src.len())?;
        let (ptr, _record) = src.device_ptr(stream);
        // SAFETY: `src` is a live device buffer of `dest.len()` elements; cudarc
        // makes `stream` wait for its writes, and (when `_record` drops, after
        // the copy is enqueued) its later writes and its free wait for this read.
        unsafe { self.putmem_on_stream(dest.as_kernel_ptr(), ptr, dest.byte_len() as usize, pe, stream) }
    }

    /// [`Shmem::get_on_stream`] into an ordinary device buffer of this PE
    /// (cudarc's `CudaSlice<T>` or a mutable view): all of `src` on `pe` into `dest`.
    pub fn get_buf_on_stream<T: bytemuck::Pod>(
        &self,
        dest: &mut impl DevicePtrMut<T>,
        src: &SymSlice<T>,
        pe: usize,
        stream: &CudaStream,
    ) -> Result<()> {
        crate::shmem::check_len("get_buf_on_stream", src.len(), dest.len())?;
        let bytes = src.byte_len() as usize;
        let (ptr, _record) = dest.device_ptr_mut(stream);
        // SAFETY: `dest` is a live device buffer of `src.len()` elements, borrowed
        // mutably; cudarc makes `stream` wait for its earlier reads and writes,
        // and its later accesses and its free wait for this write.
        unsafe { self.getmem_on_stream(ptr, src.as_kernel_ptr(), bytes, pe, stream) }
    }

    /// Typed [`Shmem::putmem_signal_on_stream`]: all of `src` (this PE's copy)
    /// into `dest` on `pe`, then the signal `sig` (a symmetric address) on `pe`
    /// is updated; a consumer that sees the update sees the data.
    #[allow(clippy::too_many_arguments)]
    pub fn put_signal_on_stream<T: bytemuck::Pod>(
        &self,
        dest: &SymSlice<T>,
        src: &SymSlice<T>,
        sig: u64,
        value: u64,
        op: SignalOp,
        pe: usize,
        stream: &CudaStream,
    ) -> Result<()> {
        crate::shmem::check_len("put_signal_on_stream", dest.len(), src.len())?;
        self.heap.check_slice(src)?;
        let bytes = dest.byte_len() as usize;
        // SAFETY: `src` was checked to be a slice of this PE's heap (allocated
        // for the job's lifetime); `dest` and `sig` are checked there.
        unsafe {
            self.putmem_signal_on_stream(dest.as_kernel_ptr(), src.as_kernel_ptr(), bytes, sig, value, op, pe, stream)
        }
    }

    /// Put, then signal (`nvshmemx_putmem_signal_on_stream`): a consumer that
    /// sees the signal update sees the data. `dest` and `sig` are checked to be
    /// in the symmetric heap; [`Shmem::put_signal_on_stream`] is the safe form.
    ///
    /// # Safety
    /// As [`Shmem::putmem_on_stream`] for `[src, +bytes)`.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn putmem_signal_on_stream(
        &self,
        dest: u64,
        src: u64,
        bytes: usize,
        sig: u64,
        value: u64,
        op: SignalOp,
        pe: usize,
        stream: &CudaStream,
    ) -> Result<()> {
        self.peer_address(sig, 8, pe)?;
        // SAFETY: the caller guarantees `src`; `dest` is checked there.
        unsafe { self.putmem_on_stream(dest, src, bytes, pe, stream) }?;
        self.signal_op_on_stream(sig, value, op, pe, stream)
    }

    /// Updates the signal `sig` on `pe` in stream order, after everything
    /// earlier on the stream (`nvshmemx_signal_op_on_stream`).
    pub fn signal_op_on_stream(
        &self,
        sig: u64,
        value: u64,
        op: SignalOp,
        pe: usize,
        stream: &CudaStream,
    ) -> Result<()> {
        self.peer_address(sig, 8, pe)?;
        self.builtin_on(stream, "gpushmem_signal_op", (sig, value, op, pe as u32))
    }

    /// Holds the stream until this PE's signal `sig <cmp> value`
    /// (`nvshmemx_signal_wait_until_on_stream`). Bounded by the device timeout.
    pub fn signal_wait_until_on_stream(&self, sig: u64, cmp: Cmp, value: u64, stream: &CudaStream) -> Result<()> {
        self.peer_address(sig, 8, self.my_pe())?;
        self.builtin_on(stream, "gpushmem_signal_wait", (sig, cmp, value))
    }

    /// Completes this PE's earlier operations on the stream (`nvshmemx_quiet_on_stream`).
    pub fn quiet_on_stream(&self, stream: &CudaStream) -> Result<()> {
        self.builtin_on(stream, "gpushmem_quiet", ())
    }

    /// Device barrier over all PEs in stream order (`nvshmemx_barrier_all_on_stream`):
    /// completes earlier operations, then waits for every PE to reach it. Every
    /// PE must enqueue it, and at most one barrier per PE may run at a time.
    pub fn barrier_all_on_stream(&self, stream: &CudaStream) -> Result<()> {
        self.check_reach_all()?;
        self.builtin_on(stream, "gpushmem_barrier_all", ())
    }
}
