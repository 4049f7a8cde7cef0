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
use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut, DeviceSlice, SyncOnDrop};
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

/// Orders `stream` after the PE's stream `pe` (see the module's rule) and
/// says what to do once the caller's work on `stream` is queued.
fn ordered_on<'a>(ptr: CUdeviceptr, pe: &CudaStream, stream: &'a CudaStream) -> (CUdeviceptr, SyncOnDrop<'a>) {
    // The driver's handle, not the Arc: a second `CudaStream` may wrap the same stream.
    if stream.cu_stream() == pe.cu_stream() {
        return (ptr, SyncOnDrop::Sync(None));
    }
    // cudarc's own slices report errors here the same way: on the context,
    // returned by its next checked call.
    let ctx = stream.context();
    match pe.record_event(None) {
        Ok(done) => ctx.record_err(stream.wait(&done)),
        Err(e) => ctx.record_err(Err::<(), _>(e)),
    }
    (ptr, SyncOnDrop::sync_stream(stream))
}

/// Part of a [`SymSlice`], elements `start..start + len`, borrowed shared (as
/// cudarc's `CudaView`): a cudarc `DevicePtr` with the slice's ordering (see
/// the module's docs), and a kernel argument that arrives as the part's `Sym<T>`.
#[derive(Debug)]
pub struct SymView<'a, T> {
    slice: &'a SymSlice<T>,
    start: usize,
    len: usize,
}

/// Part of a [`SymSlice`], borrowed exclusively (as cudarc's `CudaViewMut`):
/// also a cudarc `DevicePtrMut`, for copies into it.
#[derive(Debug)]
pub struct SymViewMut<'a, T> {
    slice: &'a mut SymSlice<T>,
    start: usize,
    len: usize,
}

/// `range` of a slice of `len` elements as (start, length); `None` when out of bounds.
fn bounds(range: impl RangeBounds<usize>, len: usize) -> Option<(usize, usize)> {
    let start = match range.start_bound() {
        Bound::Included(&s) => s,
        Bound::Excluded(&s) => s.checked_add(1)?,
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(&e) => e.checked_add(1)?,
        Bound::Excluded(&e) => e,
        Bound::Unbounded => len,
    };
    (start <= end && end <= len).then(|| (start, end - start))
}

impl<T> SymSlice<T> {
    /// Elements `range` as a view (`None` when the range is not inside).
    pub fn try_slice(&self, range: impl RangeBounds<usize>) -> Option<SymView<'_, T>> {
        bounds(range, self.len).map(|(start, len)| SymView { slice: self, start, len })
    }

    /// Elements `range` as a view.
    ///
    /// # Panics
    /// When `range` is not inside the slice (as Rust's and cudarc's slices do).
    pub fn slice(&self, range: impl RangeBounds<usize>) -> SymView<'_, T> {
        let shown = (range.start_bound().cloned(), range.end_bound().cloned());
        self.try_slice(range).unwrap_or_else(|| out_of_bounds("slice", shown, self.len))
    }

    /// Elements `range` as a mutable view (`None` when the range is not inside).
    pub fn try_slice_mut(&mut self, range: impl RangeBounds<usize>) -> Option<SymViewMut<'_, T>> {
        bounds(range, self.len).map(|(start, len)| SymViewMut { slice: self, start, len })
    }

    /// Elements `range` as a mutable view.
    ///
    /// # Panics
    /// When `range` is not inside the slice.
    pub fn slice_mut(&mut self, range: impl RangeBounds<usize>) -> SymViewMut<'_, T> {
        let (shown, len) = ((range.start_bound().cloned(), range.end_bound().cloned()), self.len);
        self.try_slice_mut(range).unwrap_or_else(|| out_of_bounds("slice_mut", shown, len))
    }
}

/// The panic of `slice`/`slice_mut` (the message is made only when it happens).
#[cold]
fn out_of_bounds(call: &str, range: (Bound<usize>, Bound<usize>), len: usize) -> ! {
    panic!("SymSlice::{call}: {range:?} is out of bounds of {len} elements")
}

/// The common part of both views.
macro_rules! view {
    ($view:ident) => {
        impl<T> $view<'_, T> {
            /// Number of elements.
            pub fn len(&self) -> usize {
                self.len
            }

            /// Whether it has no elements.
            pub fn is_empty(&self) -> bool {
                self.len == 0
            }

            /// The kernel's typed handle of this part (what passing `&view` as a
            /// kernel argument gives the kernel), the same on every PE.
            pub fn sym(&self) -> gpushmem_kernels::Sym<T> {
                self.slice.sym().slice(self.start, self.start + self.len)
            }

            /// This PE's device address of the part's first element.
            pub fn as_kernel_ptr(&self) -> u64 {
                self.slice.as_kernel_ptr() + (self.start * std::mem::size_of::<T>()) as u64
            }
        }

        impl<T> DeviceSlice<T> for $view<'_, T> {
            fn len(&self) -> usize {
                self.len
            }

            /// The PE's stream ([`crate::Shmem::stream`]).
            fn stream(&self) -> &Arc<CudaStream> {
                &self.slice.stream
            }
        }

        /// This PE's copy of the part, for reading on `stream`, ordered as
        /// [`SymSlice`]'s `DevicePtr`.
        impl<T> DevicePtr<T> for $view<'_, T> {
            fn device_ptr<'a>(&'a self, stream: &'a CudaStream) -> (CUdeviceptr, SyncOnDrop<'a>) {
                ordered_on(self.as_kernel_ptr(), &self.slice.stream, stream)
            }
        }

        /// A kernel argument: the kernel receives the part's `Sym<T>` handle.
        impl<T> crate::KernelArg for &$view<'_, T> {
            type Param = gpushmem_kernels::Sym<T>;
            fn param(&self) -> gpushmem_kernels::Sym<T> {
                self.sym()
            }
        }
    };
}
view!(SymView);
view!(SymViewMut);

/// This PE's copy of the part, for writing on `stream`, ordered as for reading.
impl<T> DevicePtrMut<T> for SymViewMut<'_, T> {
    fn device_ptr_mut<'a>(&'a mut self, stream: &'a CudaStream) -> (CUdeviceptr, SyncOnDrop<'a>) {
        ordered_on(self.as_kernel_ptr(), &self.slice.stream, stream)
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
    fn device_ptr<'a>(&'a self, stream: &'a CudaStream) -> (CUdeviceptr, SyncOnDrop<'a>) {
        ordered_on(self.as_kernel_ptr(), &self.stream, stream)
    }
}

/// This PE's copy of the allocation, for writing on `stream`: ordered as for
/// [`DevicePtr`] (reads and writes alike).
impl<T> DevicePtrMut<T> for SymSlice<T> {
    fn device_ptr_mut<'a>(&'a mut self, stream: &'a CudaStream) -> (CUdeviceptr, SyncOnDrop<'a>) {
        ordered_on(self.as_kernel_ptr(), &self.stream, stream)
    }
}

#[cfg(test)]
mod tests {
    use super::bounds;

    #[test]
    fn view_bounds() {
        assert_eq!(bounds(.., 10), Some((0, 10)));
        assert_eq!(bounds(2..5, 10), Some((2, 3)));
        assert_eq!(bounds(2..=5, 10), Some((2, 4)));
        assert_eq!(bounds(10.., 10), Some((10, 0)));
        assert_eq!(bounds(3..11, 10), None);
        let (from, to) = (5, 2);
        assert_eq!(bounds(from..to, 10), None);
        assert_eq!(bounds(..=usize::MAX, 10), None);
    }
}
