//! Typed symmetric handles: [`Sym<T>`], an array of `T` in the symmetric heap
//! as a kernel receives it — its offset in the heap (the same on every PE) and
//! its length, not a pointer.
//!
//! The host passes one straight from its `gpushmem::SymSlice<T>`
//! (`shmem.launch(&k, cfg, (&dest, &src))`). Device code cannot make one from
//! a pointer or an integer (the fields are private; the one constructor is
//! `unsafe`), so a handle always names memory inside every PE's heap, and the
//! safe calls on it need no `unsafe` in the kernel:
//!
//! | call | what, guarantee |
//! |---|---|
//! | `read`, `write`, `slice`, `elem`, `split_at` | this PE's element (a weak load/store); sub-handles |
//! | `put`, `put_nbi`, `get`, `get_nbi` (`_warp`, `_block`) | RMA from/into `self` on this PE and the same range of `src` on `pe`; guarantees of the pointer forms (module `rma`) |
//! | `put_signal`, `put_signal_nbi` (`_warp`, `_block`) | data, then the signal on `pe`: whoever sees the signal sees the data |
//! | `signal_op`, `signal_op_relaxed`, `signal_fetch`, `signal_wait_until`, `signal_wait_until_relaxed` | on a `Sym<u64>` of one element |
//! | `atomic_*`, `wait_until`, `test` | on a one-element handle of an `AtomicWord` (`u32`, `u64`, `i32`, `i64`) |
//! | `broadcast`, `fcollect`, `alltoall`, `reduce`, `reducescatter` (`_warp`, `_block`) | team collectives with `self` as destination |
//!
//! Every call checks what the pointer forms leave to the caller, whether or
//! not debug checks are on, and traps with a message naming the call when it
//! fails (one compare each): `pe < n_pes()`, equal lengths where the call
//! copies one range onto another, one element for signals and atomics, the
//! length rules of each collective, source and destination not overlapping.
//! Calls that need every thread of a group (the `_warp`/`_block` forms,
//! collectives) still hang if some threads skip them: that is a hang, not
//! undefined behaviour, and the waits' timeout reports it.
//!
//! The type and its slicing also compile for the host (so the host crate can
//! hand them out); the device calls exist only for `nvptx64`.

use core::marker::PhantomData;

/// An array of `T` in the symmetric heap: `len` elements from byte `offset`
/// of every PE's heap. `#[repr(C)]`: 16 bytes, `{ offset: u64, len: u64 }`.
///
/// Made by the host (from a `gpushmem::SymSlice<T>` passed as a kernel
/// argument, or `SymSlice::sym()`), never from a pointer:
///
/// ```compile_fail
/// use gpushmem_kernels::sym::Sym;
/// fn kernel_body(dest: Sym<u8>) { let _ = dest.len(); }
/// let raw: *mut u8 = core::ptr::null_mut();
/// kernel_body(raw); // a raw device pointer is not a handle
/// ```
///
/// ```compile_fail
/// use gpushmem_kernels::sym::Sym;
/// let forged = Sym::<u8> { offset: 0, len: 1 << 40, _t: core::marker::PhantomData }; // private fields
/// ```
#[repr(C)]
pub struct Sym<T> {
    offset: u64,
    len: u64,
    _t: PhantomData<fn() -> T>,
}

impl<T> Clone for Sym<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Sym<T> {}

impl<T> core::fmt::Debug for Sym<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Sym<{}> {{ offset: {}, len: {} }}", core::any::type_name::<T>(), self.offset, self.len)
    }
}

impl<T> Sym<T> {
    /// The handle of `len` elements from byte `offset` of the symmetric heap.
    ///
    /// # Safety
    /// `offset .. offset + len * size_of::<T>()` lies inside every PE's
    /// heap, in memory allocated for `T`s, and `offset` is aligned for `T`
    /// (the host's `SymSlice<T>` guarantees all three).
    #[inline(always)]
    pub const unsafe fn from_raw_parts(offset: u64, len: u64) -> Sym<T> {
        Sym { offset, len, _t: PhantomData }
    }

    /// Number of elements.
    #[inline(always)]
    pub const fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether it has no elements.
    #[inline(always)]
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Byte offset of element 0 in the symmetric heap (the same on every PE).
    #[inline(always)]
    pub const fn offset(&self) -> u64 {
        self.offset
    }

    /// Elements `start..end` as a handle of their own; unless `start <= end
    /// <= len` it fails (on the device: prints the range and traps; on the
    /// host: panics).
    #[inline(always)]
    pub fn slice(&self, start: usize, end: usize) -> Sym<T> {
        if start > end || end > self.len() {
            out_of_bounds(c"Sym::slice", start, end, self.len())
        }
        Sym {
            offset: self.offset + (start * core::mem::size_of::<T>()) as u64,
            len: (end - start) as u64,
            _t: PhantomData,
        }
    }

    /// Element `i` as a one-element handle (what signals and atomics take);
    /// fails as [`Sym::slice`] unless `i < len`.
    #[inline(always)]
    pub fn elem(&self, i: usize) -> Sym<T> {
        self.slice(i, i + 1)
    }

    /// Elements `..mid` and `mid..`; fails as [`Sym::slice`] unless `mid <= len`.
    #[inline(always)]
    pub fn split_at(&self, mid: usize) -> (Sym<T>, Sym<T>) {
        (self.slice(0, mid), self.slice(mid, self.len()))
    }

    /// Whether the byte ranges of `self` and `other` share a byte.
    #[inline(always)]
    pub fn overlaps<U>(&self, other: &Sym<U>) -> bool {
        let (a0, a1) = (self.offset, self.offset + self.len * core::mem::size_of::<T>() as u64);
        let (b0, b1) = (other.offset, other.offset + other.len * core::mem::size_of::<U>() as u64);
        a0 < b1 && b0 < a1 && a0 < a1 && b0 < b1
    }
}

/// The failure of a range check on a handle: on the device a message with
/// the call, the range, the length and the PE, then a trap; on the host a panic.
#[cold]
#[inline(never)]
pub(crate) fn out_of_bounds(call: &'static core::ffi::CStr, start: usize, end: usize, len: usize) -> ! {
    #[cfg(target_arch = "nvptx64")]
    crate::debug::fail(
        c"gpushmem: %s: range %llu..%llu is out of bounds of a Sym of %llu elements, on PE %llu\n",
        &[call.as_ptr() as u64, start as u64, end as u64, len as u64, crate::state::state().my_pe as u64],
    );
    #[cfg(not(target_arch = "nvptx64"))]
    panic!("{}: range {start}..{end} is out of bounds of a Sym of {len} elements", call.to_str().unwrap_or("Sym"));
}

// The device calls: methods on `Sym<T>`.
#[cfg(target_arch = "nvptx64")]
mod device;

#[cfg(test)]
mod tests {
    use super::Sym;

    fn sym(offset: u64, len: u64) -> Sym<u32> {
        // SAFETY: never dereferenced (host test of the arithmetic).
        unsafe { Sym::from_raw_parts(offset, len) }
    }

    #[test]
    fn slicing_keeps_offsets_in_elements() {
        let s = sym(4096, 10);
        let t = s.slice(2, 7);
        assert_eq!((t.offset(), t.len()), (4096 + 8, 5));
        assert_eq!((s.elem(9).offset(), s.elem(9).len()), (4096 + 36, 1));
        let (a, b) = s.split_at(4);
        assert_eq!((a.len(), b.offset(), b.len()), (4, 4096 + 16, 6));
        assert!(s.slice(10, 10).is_empty());
    }

    #[test]
    fn overlap_is_by_bytes() {
        let s = sym(0, 8);
        assert!(s.slice(0, 4).overlaps(&s.slice(3, 8)));
        assert!(!s.slice(0, 4).overlaps(&s.slice(4, 8)));
        assert!(!s.slice(2, 2).overlaps(&s), "an empty range overlaps nothing");
    }

    #[test]
    #[should_panic(expected = "Sym::slice: range 3..11 is out of bounds of a Sym of 10 elements")]
    fn out_of_bounds_slice_panics_on_the_host() {
        let _ = sym(0, 10).slice(3, 11);
    }
}
