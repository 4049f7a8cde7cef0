//! The symmetric heap: one device allocation per PE, the same size on every
//! PE, handed out by collective `malloc`/`calloc`/`align`/`free` at the same
//! offsets on every PE (see [`allocator`]).
//!
//! The first [`RESERVED_HEAP_BYTES`] of every heap are the library's (barrier
//! flags and other sync words, zeroed at init); user allocations follow.

pub mod allocator;
mod cudarc_interop;
pub use cudarc_interop::{SymView, SymViewMut};

use crate::driver;
use crate::{Error, Result};
use allocator::Allocator;
use cudarc::driver::CudaStream;
use gpushmem_kernels::abi::RESERVED_HEAP_BYTES;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};

/// `len` elements of `T` in the symmetric heap: the same offset on every PE.
///
/// Pass `&slice` in a launch's argument tuple: the kernel receives it as its
/// `Sym<T>` handle (offset and length), whose safe calls (`dest.put_nbi(src,
/// pe)`, …) check bounds and the PE. [`SymSlice::as_kernel_ptr`] gives the raw
/// address instead, for kernels that take pointers (`unsafe` device calls such
/// as `putmem_nbi(dest_ptr, …, pe)` translate it to PE `pe`'s copy). Free it with
/// [`crate::Shmem::free`] (collective); it is not freed on drop, since a drop
/// is not collective (the whole heap is released at finalize).
///
/// It is also a cudarc device slice (`DevicePtr`/`DevicePtrMut`): pass it to
/// cudarc's copies, launches and cuBLAS calls; see the `DevicePtr` impl for the
/// ordering it gives.
#[derive(Debug)]
pub struct SymSlice<T> {
    offset: u64,
    len: usize,
    heap_base: u64,
    /// The PE's stream ([`crate::Shmem::stream`]): the stream whose order
    /// cudarc calls on other streams are made to follow.
    stream: Arc<CudaStream>,
    _t: PhantomData<T>,
}

impl<T> SymSlice<T> {
    pub(crate) fn new(offset: u64, len: usize, heap_base: u64, stream: Arc<CudaStream>) -> Self {
        SymSlice { offset, len, heap_base, stream, _t: PhantomData }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes it spans.
    pub fn byte_len(&self) -> u64 {
        // Exact: only an allocation makes a slice, and its byte count was
        // checked to fit (`args::alloc_bytes`) before the heap held it.
        self.len as u64 * std::mem::size_of::<T>() as u64
    }

    /// Offset from the heap base (the same on every PE).
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The kernel's typed handle of this allocation (what passing `&slice` as a
    /// kernel argument gives the kernel): offset and length, the same on every PE.
    /// `.slice(a, b)` on it names part of it.
    pub fn sym(&self) -> gpushmem_kernels::Sym<T> {
        // SAFETY: the allocator made `offset .. offset + len * size_of::<T>()`
        // inside every PE's heap (collective, same offsets), aligned for `T`.
        unsafe { gpushmem_kernels::Sym::from_raw_parts(self.offset, self.len as u64) }
    }

    /// This PE's device address of element 0, as a kernel argument for kernels
    /// that take raw pointers (prefer passing `&slice`: the kernel gets a `Sym<T>`).
    pub fn as_kernel_ptr(&self) -> u64 {
        self.heap_base + self.offset
    }

    pub(crate) fn heap_base(&self) -> u64 {
        self.heap_base
    }
}

/// One PE's heap memory (freed on drop) and its allocator.
pub(crate) struct Heap {
    /// Device address of the heap (`mem.ptr`, kept at hand).
    pub base: u64,
    pub size: u64,
    pub alloc: Mutex<Allocator>,
    /// The memory, when this heap owns it (native engine); NVSHMEM's heap is
    /// freed by the NVSHMEM runtime.
    _mem: Option<driver::DeviceBuffer>,
}

impl Heap {
    /// Allocates and zeroes (on `stream`) `size` bytes of device memory in the current context.
    pub fn new(
        ctx: &std::sync::Arc<cudarc::driver::CudaContext>,
        size: u64,
        stream: cudarc::driver::sys::CUstream,
    ) -> Result<Heap> {
        Self::check_size(size)?;
        let mem = driver::DeviceBuffer::alloc(ctx, size).map_err(|e| {
            e.in_context(|| {
                format!(
                    "allocating the {size}-byte symmetric heap (GPUSHMEM_SYMMETRIC_SIZE; free device memory: {} bytes)",
                    cudarc::driver::result::mem_get_info().map(|m| m.0).unwrap_or(0)
                )
            })
        })?;
        // SAFETY: just allocated, `size` bytes (freed by `mem`'s drop on an error).
        unsafe { driver::zero(stream, mem.ptr, size) }?;
        Ok(Heap { base: mem.ptr, size, alloc: Mutex::new(Allocator::new(RESERVED_HEAP_BYTES, size)), _mem: Some(mem) })
    }

    /// A heap over `size` bytes at `base` that someone else owns (NVSHMEM's
    /// symmetric heap), zeroed on `stream`.
    pub fn adopt(base: u64, size: u64, stream: cudarc::driver::sys::CUstream) -> Result<Heap> {
        Self::check_size(size)?;
        // SAFETY: the caller hands over `size` bytes of device memory at `base`, live as long as this heap.
        unsafe { driver::zero(stream, base, size) }?;
        Ok(Heap { base, size, alloc: Mutex::new(Allocator::new(RESERVED_HEAP_BYTES, size)), _mem: None })
    }

    fn check_size(size: u64) -> Result<()> {
        if size <= RESERVED_HEAP_BYTES {
            return Err(Error::Config {
                name: "GPUSHMEM_SYMMETRIC_SIZE".into(),
                value: size.to_string(),
                why: format!("must exceed the {RESERVED_HEAP_BYTES} bytes the library reserves"),
            });
        }
        Ok(())
    }

    /// Fails unless `[addr, addr + len)` is inside this heap.
    pub fn check_range(&self, addr: u64, len: u64) -> Result<()> {
        let inside = addr >= self.base && (addr - self.base).checked_add(len).is_some_and(|e| e <= self.size);
        if inside {
            Ok(())
        } else {
            Err(Error::NotSymmetric { addr, len, base: self.base, size: self.size })
        }
    }

    /// Fails unless `s` was allocated from this heap (not another PE's or job's).
    pub fn check_slice<T>(&self, s: &SymSlice<T>) -> Result<()> {
        if s.heap_base() != self.base {
            return Err(Error::NotSymmetric {
                addr: s.as_kernel_ptr(),
                len: s.byte_len(),
                base: self.base,
                size: self.size,
            });
        }
        self.check_range(s.as_kernel_ptr(), s.byte_len())
    }
}
