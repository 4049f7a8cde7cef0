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
//! Addresses are this PE's device addresses: a symmetric one (from
//! [`SymSlice::as_kernel_ptr`], possibly plus an offset) for the remote side,
//! any device memory of this PE's context for the local side.

use crate::error::CudaContext as _;
use crate::launch::{launch_on, KernelArgs};
use crate::{Result, Shmem, SymSlice};
use cudarc::driver::{CudaStream, LaunchConfig};
use gpushmem_kernels::abi::{Cmp, SignalOp};

const ONE_WARP: LaunchConfig = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (32, 1, 1), shared_mem_bytes: 0 };

impl Shmem {
    fn builtin_on(&self, stream: &CudaStream, name: &str, args: impl KernelArgs) -> Result<()> {
        let k = self.builtin.kernel(name)?;
        self.context().bind_to_thread().cuda("cuCtxSetCurrent")?;
        // SAFETY: the built-in kernels' parameters are those passed by the callers below.
        unsafe { launch_on(stream.cu_stream(), &k, ONE_WARP, &args) }
    }

    fn copy_on(&self, stream: &CudaStream, dst: u64, src: u64, bytes: usize, what: &str) -> Result<()> {
        self.context().bind_to_thread().cuda("cuCtxSetCurrent")?;
        // SAFETY: both ranges were checked (symmetric side) or are the caller's device memory.
        unsafe { cudarc::driver::result::memcpy_dtod_async(dst, src, bytes, stream.cu_stream()) }.cuda(what)
    }

    /// Copies `bytes` from `src` (this PE) to the symmetric `dest` on `pe`, in
    /// stream order (`nvshmemx_putmem_on_stream`). Complete when the stream reaches its end.
    pub fn putmem_on_stream(&self, dest: u64, src: u64, bytes: usize, pe: usize, stream: &CudaStream) -> Result<()> {
        let remote = self.peer_address(dest, bytes as u64, pe)?;
        self.copy_on(stream, remote, src, bytes, "cuMemcpyDtoDAsync (putmem_on_stream)")
    }

    /// Copies `bytes` of the symmetric `src` on `pe` to `dest` (this PE), in
    /// stream order (`nvshmemx_getmem_on_stream`).
    pub fn getmem_on_stream(&self, dest: u64, src: u64, bytes: usize, pe: usize, stream: &CudaStream) -> Result<()> {
        let remote = self.peer_address(src, bytes as u64, pe)?;
        self.copy_on(stream, dest, remote, bytes, "cuMemcpyDtoDAsync (getmem_on_stream)")
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
        self.putmem_on_stream(dest.as_kernel_ptr(), src.as_kernel_ptr(), dest.byte_len() as usize, pe, stream)
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
        self.getmem_on_stream(dest.as_kernel_ptr(), src.as_kernel_ptr(), dest.byte_len() as usize, pe, stream)
    }

    /// Put, then signal (`nvshmemx_putmem_signal_on_stream`): a consumer that
    /// sees the signal update sees the data.
    #[allow(clippy::too_many_arguments)]
    pub fn putmem_signal_on_stream(
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
        self.putmem_on_stream(dest, src, bytes, pe, stream)?;
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
        self.builtin_on(stream, "gpushmem_signal_op", (sig, value, op as u32, pe as u32))
    }

    /// Holds the stream until this PE's signal `sig <cmp> value`
    /// (`nvshmemx_signal_wait_until_on_stream`). Bounded by the device timeout.
    pub fn signal_wait_until_on_stream(&self, sig: u64, cmp: Cmp, value: u64, stream: &CudaStream) -> Result<()> {
        self.peer_address(sig, 8, self.my_pe())?;
        self.builtin_on(stream, "gpushmem_signal_wait", (sig, cmp as u32, value))
    }

    /// Completes this PE's earlier operations on the stream (`nvshmemx_quiet_on_stream`).
    pub fn quiet_on_stream(&self, stream: &CudaStream) -> Result<()> {
        self.builtin_on(stream, "gpushmem_quiet", ())
    }

    /// Device barrier over all PEs in stream order (`nvshmemx_barrier_all_on_stream`):
    /// completes earlier operations, then waits for every PE to reach it. Every
    /// PE must enqueue it, and at most one barrier per PE may run at a time.
    pub fn barrier_all_on_stream(&self, stream: &CudaStream) -> Result<()> {
        self.builtin_on(stream, "gpushmem_barrier_all", ())
    }
}
