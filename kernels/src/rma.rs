//! Remote memory access: `p`/`g`, `put`/`get`, `put_nbi`/`get_nbi`, typed over
//! `T: Pod` and as bytes (`putmem`…), in thread, `_warp` and `_block` forms.
//!
//! The `_warp`/`_block` forms must be called by every thread of the warp/block
//! with the same arguments; they split the bytes among the threads.
//!
//! Guarantees (load/store transport):
//! - `put_nbi*`: the stores are issued (weak). The data is visible at the
//!   target after `quiet` (or `barrier_all`); on this transport the source may
//!   be reused on return, but portable code waits for `quiet`.
//! - `put*`: as `put_nbi*`; the group form also waits for the whole group, so
//!   every thread may reuse the source on return.
//! - `get*`: the data is in `dest` on return (for the group forms, for every thread of the group).
//! - `get_nbi*`: the data is in `dest` after `quiet`.
//!
//! On the NVSHMEM engine (feature `nvshmem`) each call is NVSHMEM's of the
//! same meaning (`nvshmem_putmem(_nbi)`, `nvshmemx_putmem(_nbi)_warp/_block`,
//! `nvshmem_getmem(_nbi)`…, with `nelems * size_of::<T>()` bytes), with
//! NVSHMEM's guarantees, which are these or stronger (its group forms sync the
//! group before and after). There `p`/`g` are `nvshmem_uint{8,16,32,64}_p/_g`
//! on the element's bits and `iput`/`iget` are `nvshmem(x)_iput{8..128}(_warp/_block)`:
//! both need an element whose size is 1, 2, 4, 8 (or 16, strided only)
//! bytes and whose alignment equals its size, else the kernel does not
//! compile; NVSHMEM 3.4.5 implements `iput`/`iget` only between PEs that
//! reach each other by loads and stores (it asserts on other transports).

use crate::debug;
use crate::engine::{self, Mode};
use crate::group::Group;
use core::ffi::CStr;

/// Checks (debug mode) and puts `nelems` of `T` from `src` to `dest` on `pe`, over `g`.
///
/// # Safety
/// `dest` is a symmetric-heap range of `nelems` `T`s; `src` is valid global memory of the
/// same size; they do not overlap; `pe < n_pes()`.
#[inline(always)]
unsafe fn put_elems<T: bytemuck::Pod>(
    dest: *mut T,
    src: *const T,
    nelems: usize,
    pe: u32,
    g: Group,
    mode: Mode,
    call: &CStr,
) {
    debug::check_remote(dest.cast(), nelems * core::mem::size_of::<T>(), pe, call);
    // SAFETY: the caller upholds this function's contract, which is the engine's `put`'s.
    unsafe { engine::put(dest, src, nelems, pe, g, mode, call) };
}

/// Checks (debug mode) and gets `nelems` of `T` from `src` on `pe` to `dest`, over `g`.
///
/// # Safety
/// `src` is a symmetric-heap range of `nelems` `T`s; `dest` is valid global memory of the
/// same size; they do not overlap; `pe < n_pes()`.
#[inline(always)]
unsafe fn get_elems<T: bytemuck::Pod>(
    dest: *mut T,
    src: *const T,
    nelems: usize,
    pe: u32,
    g: Group,
    mode: Mode,
    call: &CStr,
) {
    debug::check_remote(src.cast(), nelems * core::mem::size_of::<T>(), pe, call);
    // SAFETY: the caller upholds this function's contract, which is the engine's `get`'s.
    unsafe { engine::get(dest, src, nelems, pe, g, mode, call) };
}

/// Writes one element to `dest` on `pe` (`nvshmem_p`): a single store.
///
/// # Safety
/// `dest` is a symmetric address of a `T`; `pe < n_pes()`.
#[inline(always)]
pub unsafe fn p<T: bytemuck::Pod>(dest: *mut T, value: T, pe: u32) {
    debug::check_remote_elem(dest, pe, c"p");
    // SAFETY: the caller upholds this function's contract: `dest` is a symmetric address
    // of a `T` and `pe < n_pes()`.
    unsafe { engine::p(dest, value, pe, c"p") };
}

/// Reads one element from `src` on `pe` (`nvshmem_g`): a single load; the value is returned.
///
/// # Safety
/// `src` is a symmetric address of a `T`; `pe < n_pes()`.
#[inline(always)]
pub unsafe fn g<T: bytemuck::Pod>(src: *const T, pe: u32) -> T {
    debug::check_remote_elem(src, pe, c"g");
    // SAFETY: the caller upholds this function's contract: `src` is a symmetric address
    // of a `T` and `pe < n_pes()`.
    unsafe { engine::g(src, pe, c"g") }
}

/// Generates the typed (`nelems` of `T`) and byte (`bytes`) forms of one
/// operation in one group shape, with their docs.
macro_rules! rma_fns {
    ($(#[$doc:meta])* $typed:ident, $mem:ident, $group:ident, $core:ident, $mode:ident) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// The symmetric side is a symmetric-heap range of this size; the local side
        /// is valid global memory of the same size; they do not overlap; `pe < n_pes()`.
        #[inline(always)]
        pub unsafe fn $typed<T: bytemuck::Pod>(dest: *mut T, src: *const T, nelems: usize, pe: u32) {
            let g = Group::$group();
            // SAFETY: the caller upholds this function's contract, which is `$core`'s
            // (for the symmetric side `dest` of a put, `src` of a get); the name's NUL, below.
            unsafe {
                $core(dest, src, nelems, pe, g, Mode::$mode, {
                    const NAME: &str = concat!(stringify!($typed), "\0");
                    // In the `unsafe` block above; sound: NAME ends with its only NUL.
                    CStr::from_bytes_with_nul_unchecked(NAME.as_bytes())
                })
            };
        }

        $(#[$doc])*
        /// Byte form.
        ///
        /// # Safety
        /// As the typed form, with `bytes` bytes.
        #[inline(always)]
        pub unsafe fn $mem(dest: *mut u8, src: *const u8, bytes: usize, pe: u32) {
            let g = Group::$group();
            // SAFETY: the caller upholds this function's contract, which is `$core`'s
            // (in bytes, for the symmetric side `dest` of a put, `src` of a get); the name's NUL, below.
            unsafe {
                $core(dest, src, bytes, pe, g, Mode::$mode, {
                    const NAME: &str = concat!(stringify!($mem), "\0");
                    // In the `unsafe` block above; sound: NAME ends with its only NUL.
                    CStr::from_bytes_with_nul_unchecked(NAME.as_bytes())
                })
            };
        }
    };
}

rma_fns!(/// Non-blocking put by one thread (`nvshmem_put_nbi`): data visible at `pe`, and the source reusable, after `quiet`.
    put_nbi, putmem_nbi, thread, put_elems, Nbi);
rma_fns!(/// Non-blocking put by a warp (`nvshmemx_put_nbi_warp`): data visible, and the source reusable, after `quiet_warp`.
    put_nbi_warp, putmem_nbi_warp, warp, put_elems, Nbi);
rma_fns!(/// Non-blocking put by a block (`nvshmemx_put_nbi_block`): data visible, and the source reusable, after `quiet_block`.
    put_nbi_block, putmem_nbi_block, block, put_elems, Nbi);
rma_fns!(/// Blocking put by one thread (`nvshmem_put`): the source may be reused on return.
    put, putmem, thread, put_elems, Blocking);
rma_fns!(/// Blocking put by a warp: every lane may reuse the source on return.
    put_warp, putmem_warp, warp, put_elems, Blocking);
rma_fns!(/// Blocking put by a block: every thread may reuse the source on return.
    put_block, putmem_block, block, put_elems, Blocking);
rma_fns!(/// Non-blocking get by one thread (`nvshmem_get_nbi`): data valid after `quiet`.
    get_nbi, getmem_nbi, thread, get_elems, Nbi);
rma_fns!(/// Non-blocking get by a warp: data valid after `quiet_warp`.
    get_nbi_warp, getmem_nbi_warp, warp, get_elems, Nbi);
rma_fns!(/// Non-blocking get by a block: data valid after `quiet_block`.
    get_nbi_block, getmem_nbi_block, block, get_elems, Nbi);
rma_fns!(/// Blocking get by one thread (`nvshmem_get`): data in `dest` on return.
    get, getmem, thread, get_elems, Blocking);
rma_fns!(/// Blocking get by a warp: data in `dest` for every lane on return.
    get_warp, getmem_warp, warp, get_elems, Blocking);
rma_fns!(/// Blocking get by a block: data in `dest` for every thread on return.
    get_block, getmem_block, block, get_elems, Blocking);

macro_rules! strided_fns {
    ($(#[$doc:meta])* $name:ident, $group:ident, $is_put:expr) => {
        $(#[$doc])*
        ///
        /// Element `i` goes from `src[i * sst]` to `dest[i * dst]` (strides in elements).
        ///
        /// # Safety
        /// The symmetric side's elements are in the symmetric heap; both sides' elements are
        /// valid, naturally aligned and do not overlap; `pe < n_pes()`.
        #[inline(always)]
        pub unsafe fn $name<T: bytemuck::Pod>(dest: *mut T, src: *const T, dst: isize, sst: isize, nelems: usize, pe: u32) {
            let g = Group::$group();
            const NAME: &str = concat!(stringify!($name), "\0");
            // SAFETY: NAME ends with its only NUL.
            let call = unsafe { CStr::from_bytes_with_nul_unchecked(NAME.as_bytes()) };
            if nelems > 0 {
                let span = |stride: isize| ((nelems - 1) as isize * stride.abs()) as usize * core::mem::size_of::<T>() + core::mem::size_of::<T>();
                // The range's low end, for the heap check, whatever the stride's sign.
                // SAFETY (of the `offset`): the side's `nelems` elements at `stride` are valid
                // (this fn's contract), so its last one is in the same allocation as `p`.
                let low = |p: *const T, stride: isize| if stride < 0 { unsafe { p.offset((nelems - 1) as isize * stride) } } else { p };
                if $is_put {
                    debug::check_remote(low(dest, dst).cast(), span(dst), pe, call);
                } else {
                    debug::check_remote(low(src, sst).cast(), span(sst), pe, call);
                }
            }
            // SAFETY: the caller upholds this function's contract, which is the engine's
            // `iput`/`iget`'s: the elements are valid, aligned, disjoint, `pe < n_pes()`.
            unsafe {
                if $is_put {
                    engine::iput(dest, src, dst, sst, nelems, pe, g, call);
                } else {
                    engine::iget(dest, src, dst, sst, nelems, pe, g, call);
                }
            }
        }
    };
}

strided_fns!(/// Strided put by one thread (`nvshmem_iput`): issued on return, visible after `quiet`.
    iput, thread, true);
strided_fns!(/// Strided put by a warp.
    iput_warp, warp, true);
strided_fns!(/// Strided put by a block.
    iput_block, block, true);
strided_fns!(/// Strided get by one thread (`nvshmem_iget`): data in `dest` on return.
    iget, thread, false);
strided_fns!(/// Strided get by a warp.
    iget_warp, warp, false);
strided_fns!(/// Strided get by a block.
    iget_block, block, false);
