//! The device calls on [`Sym<T>`]: each checks what its pointer form leaves
//! to the caller (see the module docs), then calls that form.

use super::Sym;
use crate::abi::{Cmp, SignalOp};
use crate::debug;
use crate::reduce::{ReduceOp, Reducible};
use crate::signal::PeerSignal;
use crate::state::state;
use crate::team::Team;
use crate::word::AtomicWord;
use core::ffi::CStr;

/// Traps naming `call` unless `pe < n_pes()`.
#[inline(always)]
fn check_pe(pe: u32, call: &CStr) {
    let s = state();
    if pe >= s.n_pes {
        fail_pe(pe, s.n_pes, call)
    }
}

#[cold]
#[inline(never)]
fn fail_pe(pe: u32, n: u32, call: &CStr) -> ! {
    debug::fail(
        c"gpushmem: %s: PE %llu is out of range (the job has %llu PEs), on PE %llu\n",
        &[call.as_ptr() as u64, pe as u64, n as u64, state().my_pe as u64],
    )
}

/// Traps naming `call` unless `got == want` (element counts of `what`).
#[inline(always)]
fn check_len(got: usize, want: usize, what: &CStr, call: &CStr) {
    if got != want {
        fail_len(got, want, what, call)
    }
}

#[cold]
#[inline(never)]
fn fail_len(got: usize, want: usize, what: &CStr, call: &CStr) -> ! {
    debug::fail(
        c"gpushmem: %s: %s has %llu elements, the call needs %llu, on PE %llu\n",
        &[call.as_ptr() as u64, what.as_ptr() as u64, got as u64, want as u64, state().my_pe as u64],
    )
}

/// Traps naming `call` if `a` and `b` share a byte.
#[inline(always)]
fn check_disjoint<T, U>(a: &Sym<T>, b: &Sym<U>, call: &CStr) {
    if a.overlaps(b) {
        fail_overlap(a.offset, b.offset, call)
    }
}

#[cold]
#[inline(never)]
fn fail_overlap(a: u64, b: u64, call: &CStr) -> ! {
    debug::fail(
        c"gpushmem: %s: the destination (heap offset %llu) and the source (heap offset %llu) overlap, on PE %llu\n",
        &[call.as_ptr() as u64, a, b, state().my_pe as u64],
    )
}

impl<T> Sym<T> {
    /// This PE's address of element 0, for the pointer API (`put_nbi(ptr, …)`
    /// and friends) and for code of your own. Reading or writing through it
    /// is `unsafe` and yours to get right.
    #[inline(always)]
    pub fn as_ptr(&self) -> *mut T {
        (state().heap_base + self.offset) as *mut T
    }
}

impl<T: bytemuck::Pod> Sym<T> {
    /// Element `i` on this PE: one weak load (`ld.volatile`), not ordered
    /// with other PEs' writes (order with a wait, `quiet` or a barrier);
    /// traps with a message unless `i < len`.
    #[inline(always)]
    pub fn read(&self, i: usize) -> T {
        if i >= self.len() {
            super::out_of_bounds(c"Sym::read", i, i + 1, self.len())
        }
        // SAFETY: `i < len`, and the handle names heap memory of `T`s on this
        // PE (its constructor's contract); volatile, so no Rust reference to
        // memory other PEs write is made.
        unsafe { self.as_ptr().add(i).read_volatile() }
    }

    /// Sets element `i` on this PE: one weak store (`st.volatile`), visible
    /// to other PEs after a `fence`/`quiet`/barrier of this thread; traps
    /// with a message unless `i < len`.
    #[inline(always)]
    pub fn write(&self, i: usize, v: T) {
        if i >= self.len() {
            super::out_of_bounds(c"Sym::write", i, i + 1, self.len())
        }
        // SAFETY: as in `read`.
        unsafe { self.as_ptr().add(i).write_volatile(v) }
    }
}

impl<T: bytemuck::Pod> Sym<T> {
    /// Sets element `i` on PE `pe` (`nvshmem_p`): one store, which, like a
    /// put, is complete at this thread's next `quiet` (ordered by `fence`);
    /// traps with a message unless `i < len` and `pe < n_pes()`.
    #[inline(always)]
    pub fn p(&self, i: usize, value: T, pe: u32) {
        if i >= self.len() {
            super::out_of_bounds(c"Sym::p", i, i + 1, self.len())
        }
        check_pe(pe, c"Sym::p");
        // SAFETY: element `i` is inside the handle's heap range of `T`s, which
        // is symmetric (the handle's contract); `pe` is in range (checked).
        unsafe { crate::rma::p(self.as_ptr().add(i), value, pe) }
    }

    /// Element `i` on PE `pe` (`nvshmem_g`): one load, returned when it has
    /// completed (blocking); traps with a message unless `i < len` and
    /// `pe < n_pes()`.
    #[inline(always)]
    pub fn g(&self, i: usize, pe: u32) -> T {
        if i >= self.len() {
            super::out_of_bounds(c"Sym::g", i, i + 1, self.len())
        }
        check_pe(pe, c"Sym::g");
        // SAFETY: as in `p`.
        unsafe { crate::rma::g(self.as_ptr().add(i), pe) }
    }
}

/// The put/get methods of one group and mode, over the pointer forms.
macro_rules! rma_methods {
    ($($(#[$doc:meta])* $name:ident => $raw:path, $dir:ident;)*) => {
        impl<T: bytemuck::Pod> Sym<T> {
            $(
                $(#[$doc])*
                ///
                /// Checked always: `pe < n_pes()`, `src.len() == self.len()`, and, when `pe` is
                /// this PE, that the two do not overlap.
                #[inline(always)]
                pub fn $name(&self, src: Sym<T>, pe: u32) {
                    const NAME: &str = concat!("Sym::", stringify!($name), "\0");
                    // SAFETY: NAME ends with its only NUL.
                    let call = unsafe { CStr::from_bytes_with_nul_unchecked(NAME.as_bytes()) };
                    check_pe(pe, call);
                    check_len(src.len(), self.len(), c"src", call);
                    if pe == state().my_pe {
                        check_disjoint(self, &src, call);
                    }
                    rma_methods!(@call $dir, $raw, self, src, pe);
                }
            )*
        }
    };
    (@call put, $raw:path, $dest:ident, $src:ident, $pe:ident) => {
        // SAFETY: both handles name heap ranges of `len` elements on every PE;
        // `pe` is in range and the ranges do not overlap (checked above).
        unsafe { $raw($dest.as_ptr(), $src.as_ptr(), $dest.len(), $pe) }
    };
    (@call get, $raw:path, $dest:ident, $src:ident, $pe:ident) => {
        // SAFETY: as for puts: `dest` is local, `src` symmetric on `pe`.
        unsafe { $raw($dest.as_ptr(), $src.as_ptr(), $dest.len(), $pe) }
    };
}

rma_methods! {
    /// Puts this PE's `src` into `self` on `pe`, one thread (`nvshmem_put`); `src` reusable on return.
    put => crate::rma::put, put;
    /// [`Sym::put`] by a warp (every lane calls with the same arguments).
    put_warp => crate::rma::put_warp, put;
    /// [`Sym::put`] by a block (every thread calls with the same arguments).
    put_block => crate::rma::put_block, put;
    /// Non-blocking put (`nvshmem_put_nbi`): `src` is read and the data
    /// visible on `pe` only after `quiet` (or a barrier).
    put_nbi => crate::rma::put_nbi, put;
    /// [`Sym::put_nbi`] by a warp.
    put_nbi_warp => crate::rma::put_nbi_warp, put;
    /// [`Sym::put_nbi`] by a block.
    put_nbi_block => crate::rma::put_nbi_block, put;
    /// Gets `src` on `pe` into `self` on this PE, one thread (`nvshmem_get`): the data is here on return.
    get => crate::rma::get, get;
    /// [`Sym::get`] by a warp.
    get_warp => crate::rma::get_warp, get;
    /// [`Sym::get`] by a block.
    get_block => crate::rma::get_block, get;
    /// Non-blocking get (`nvshmem_get_nbi`): the data is in `self` after `quiet`.
    get_nbi => crate::rma::get_nbi, get;
    /// [`Sym::get_nbi`] by a warp.
    get_nbi_warp => crate::rma::get_nbi_warp, get;
    /// [`Sym::get_nbi`] by a block.
    get_nbi_block => crate::rma::get_nbi_block, get;
}

/// The put-with-signal methods.
macro_rules! put_signal_methods {
    ($($(#[$doc:meta])* $name:ident => $raw:path;)*) => {
        impl<T: bytemuck::Pod> Sym<T> {
            $(
                $(#[$doc])*
                ///
                /// `sig` is one `u64` (`s.elem(i)`). Checked always: `pe < n_pes()`, equal
                /// lengths, one signal word, and no overlap when `pe` is this PE.
                #[inline(always)]
                pub fn $name(&self, src: Sym<T>, sig: Sym<u64>, value: u64, op: SignalOp, pe: u32) {
                    const NAME: &str = concat!("Sym::", stringify!($name), "\0");
                    // SAFETY: NAME ends with its only NUL.
                    let call = unsafe { CStr::from_bytes_with_nul_unchecked(NAME.as_bytes()) };
                    check_pe(pe, call);
                    check_len(src.len(), self.len(), c"src", call);
                    check_len(sig.len(), 1, c"sig", call);
                    if pe == state().my_pe {
                        check_disjoint(self, &src, call);
                        check_disjoint(self, &sig, call);
                    }
                    // SAFETY: symmetric ranges of the checked sizes, `pe` in range.
                    unsafe { $raw(self.as_ptr(), src.as_ptr(), self.len(), sig.as_ptr(), value, op, pe) }
                }
            )*
        }
    };
}

put_signal_methods! {
    /// Puts `src` into `self` on `pe`, then updates `sig` on `pe` (`nvshmem_put_signal`):
    /// whoever sees the signal sees the data; `src` reusable on return.
    put_signal => crate::signal::put_signal;
    /// [`Sym::put_signal`] by a warp.
    put_signal_warp => crate::signal::put_signal_warp;
    /// [`Sym::put_signal`] by a block.
    put_signal_block => crate::signal::put_signal_block;
    /// Non-blocking [`Sym::put_signal`] (`nvshmem_put_signal_nbi`): the same ordering.
    put_signal_nbi => crate::signal::put_signal_nbi;
    /// [`Sym::put_signal_nbi`] by a warp.
    put_signal_nbi_warp => crate::signal::put_signal_nbi_warp;
    /// [`Sym::put_signal_nbi`] by a block.
    put_signal_nbi_block => crate::signal::put_signal_nbi_block;
}

impl Sym<u64> {
    /// Updates this signal word on `pe` (`nvshmemx_signal_op`), ordered after this
    /// thread's earlier operations (release). One element; `pe < n_pes()`.
    #[inline(always)]
    pub fn signal_op(&self, value: u64, op: SignalOp, pe: u32) {
        check_pe(pe, c"Sym::signal_op");
        check_len(self.len(), 1, c"the signal", c"Sym::signal_op");
        // SAFETY: one symmetric u64, `pe` in range.
        unsafe { crate::signal::signal_op(self.as_ptr(), value, op, pe) }
    }

    /// [`Sym::signal_op`] with no ordering (relaxed), for flags that carry no
    /// data: see [`crate::signal::signal_op_relaxed`] for the exact guarantee.
    #[inline(always)]
    pub fn signal_op_relaxed(&self, value: u64, op: SignalOp, pe: u32) {
        check_pe(pe, c"Sym::signal_op_relaxed");
        check_len(self.len(), 1, c"the signal", c"Sym::signal_op_relaxed");
        // SAFETY: one symmetric u64, `pe` in range.
        unsafe { crate::signal::signal_op_relaxed(self.as_ptr(), value, op, pe) }
    }

    /// This signal word on `pe`, translated once (a [`PeerSignal`]): its
    /// `signal_op`/`signal_op_relaxed` skip the per-call address translation
    /// of [`Sym::signal_op`]/[`Sym::signal_op_relaxed`] (a relaxed ping-pong
    /// on the H200: 0.615 → 0.585 µs per round trip); make it before a loop
    /// that signals this word on `pe` often. One element; `pe < n_pes()`.
    #[inline(always)]
    pub fn peer_signal(&self, pe: u32) -> PeerSignal {
        check_pe(pe, c"Sym::peer_signal");
        check_len(self.len(), 1, c"the signal", c"Sym::peer_signal");
        // SAFETY: one symmetric u64, `pe` in range.
        unsafe { crate::signal::peer_signal(self.as_ptr(), pe) }
    }

    /// This PE's signal value, with acquire semantics (`nvshmem_signal_fetch`).
    #[inline(always)]
    pub fn signal_fetch(&self) -> u64 {
        check_len(self.len(), 1, c"the signal", c"Sym::signal_fetch");
        // SAFETY: one u64 of this PE's heap.
        unsafe { crate::signal::signal_fetch(self.as_ptr()) }
    }

    /// Waits until this PE's signal `<cmp> value` (`nvshmem_signal_wait_until`);
    /// bounded by the job's timeout; acquire on return; returns the value.
    /// Per thread, as [`crate::signal::signal_wait_until`] (one thread waiting,
    /// then `sync_block`, is the block form).
    #[inline(always)]
    pub fn signal_wait_until(&self, cmp: Cmp, value: u64) -> u64 {
        check_len(self.len(), 1, c"the signal", c"Sym::signal_wait_until");
        // SAFETY: one u64 of this PE's heap.
        unsafe { crate::signal::signal_wait_until(self.as_ptr(), cmp, value) }
    }

    /// [`Sym::signal_wait_until`] without the acquire (see
    /// [`crate::signal::signal_wait_until_relaxed`]).
    #[inline(always)]
    pub fn signal_wait_until_relaxed(&self, cmp: Cmp, value: u64) -> u64 {
        check_len(self.len(), 1, c"the signal", c"Sym::signal_wait_until_relaxed");
        // SAFETY: one u64 of this PE's heap.
        unsafe { crate::signal::signal_wait_until_relaxed(self.as_ptr(), cmp, value) }
    }
}

/// One-element atomic methods over the pointer forms.
macro_rules! atomic_methods {
    ($($(#[$doc:meta])* $name:ident($($arg:ident: $t:ty),*) -> $ret:ty => $raw:path;)*) => {
        impl<T: AtomicWord> Sym<T> {
            $(
                $(#[$doc])*
                ///
                /// One element; `pe < n_pes()` (checked always).
                #[inline(always)]
                pub fn $name(&self, $($arg: $t,)* pe: u32) -> $ret {
                    const NAME: &str = concat!("Sym::", stringify!($name), "\0");
                    // SAFETY: NAME ends with its only NUL.
                    let call = unsafe { CStr::from_bytes_with_nul_unchecked(NAME.as_bytes()) };
                    check_pe(pe, call);
                    check_len(self.len(), 1, c"the word", call);
                    // SAFETY: one aligned symmetric word, `pe` in range.
                    unsafe { $raw(self.as_ptr(), $($arg,)* pe) }
                }
            )*
        }
    };
}

atomic_methods! {
    /// Adds `value` to the word on `pe`; returns the old value (`nvshmem_atomic_fetch_add`). Relaxed.
    atomic_fetch_add(value: T) -> T => crate::atomic::atomic_fetch_add;
    /// Adds `value` to the word on `pe` (`nvshmem_atomic_add`). Relaxed.
    atomic_add(value: T) -> () => crate::atomic::atomic_add;
    /// Adds one; returns the old value (`nvshmem_atomic_fetch_inc`). Relaxed.
    atomic_fetch_inc() -> T => crate::atomic::atomic_fetch_inc;
    /// Adds one (`nvshmem_atomic_inc`). Relaxed.
    atomic_inc() -> () => crate::atomic::atomic_inc;
    /// Stores `value` if the word equals `cond`; returns the old value (`nvshmem_atomic_compare_swap`). Relaxed.
    atomic_compare_swap(cond: T, value: T) -> T => crate::atomic::atomic_compare_swap;
    /// Stores `value`; returns the old value (`nvshmem_atomic_swap`). Relaxed.
    atomic_swap(value: T) -> T => crate::atomic::atomic_swap;
    /// Reads the word on `pe` atomically (`nvshmem_atomic_fetch`). Relaxed.
    atomic_fetch() -> T => crate::atomic::atomic_fetch;
    /// Writes the word on `pe` atomically (`nvshmem_atomic_set`). Relaxed.
    atomic_set(value: T) -> () => crate::atomic::atomic_set;
}

impl<T: AtomicWord> Sym<T> {
    /// Waits until this PE's word `<cmp> value` (`nvshmem_wait_until`); bounded
    /// by the job's timeout; acquire on return; returns the value seen.
    #[inline(always)]
    pub fn wait_until(&self, cmp: Cmp, value: T) -> T {
        check_len(self.len(), 1, c"the word", c"Sym::wait_until");
        // SAFETY: one aligned word of this PE's heap.
        unsafe { crate::wait::wait_until(self.as_ptr(), cmp, value) }
    }

    /// Whether this PE's word `<cmp> value` now (`nvshmem_test`); acquire when true.
    #[inline(always)]
    pub fn test(&self, cmp: Cmp, value: T) -> bool {
        check_len(self.len(), 1, c"the word", c"Sym::test");
        // SAFETY: one aligned word of this PE's heap.
        unsafe { crate::wait::test(self.as_ptr(), cmp, value) }
    }
}

/// The element counts a collective needs, given `n` team members.
#[derive(Clone, Copy)]
enum Shape {
    /// `dest` and `source` of the same length.
    Same,
    /// `dest` has `n` times `source`'s elements (fcollect).
    Gather,
    /// `source` has `n` times `dest`'s elements (reducescatter).
    Scatter,
    /// Both the same length, a multiple of `n` (alltoall).
    Blocks,
}

/// Checks `dest` and `source` for a collective of `shape` on `team`; returns
/// the per-call element count the pointer form takes.
#[inline(always)]
fn collective_count<T>(team: Team, dest: &Sym<T>, source: &Sym<T>, shape: Shape, call: &CStr) -> usize {
    let n = crate::team::team_n_pes(team).max(1) as usize;
    check_disjoint(dest, source, call);
    match shape {
        Shape::Same => {
            check_len(source.len(), dest.len(), c"source", call);
            dest.len()
        }
        Shape::Gather => {
            check_len(dest.len(), n * source.len(), c"dest (team size x source)", call);
            source.len()
        }
        Shape::Scatter => {
            check_len(source.len(), n * dest.len(), c"source (team size x dest)", call);
            dest.len()
        }
        Shape::Blocks => {
            check_len(source.len(), dest.len(), c"source", call);
            check_len(dest.len() % n, 0, c"dest's length modulo the team size", call);
            dest.len() / n
        }
    }
}

/// The collective methods of one group, over the pointer forms.
macro_rules! collective_methods {
    ($broadcast:ident, $fcollect:ident, $alltoall:ident, $reduce:ident, $reducescatter:ident, $group:literal) => {
        impl<T: bytemuck::Pod> Sym<T> {
            #[doc = concat!("Broadcast ", $group, ": `source` of team member `root` lands in `self` on every member (`nvshmem_broadcast`). Lengths equal; every member calls.")]
            #[inline(always)]
            pub fn $broadcast(&self, team: Team, source: Sym<T>, root: u32) {
                const NAME: &str = concat!("Sym::", stringify!($broadcast), "\0");
                // SAFETY: NAME ends with its only NUL.
                let call = unsafe { CStr::from_bytes_with_nul_unchecked(NAME.as_bytes()) };
                let n = collective_count(team, self, &source, Shape::Same, call);
                // SAFETY: symmetric, disjoint, of the checked lengths; team checked by the call.
                unsafe { crate::collective::$broadcast(team, self.as_ptr(), source.as_ptr(), n, root) }
            }

            #[doc = concat!("All-gather ", $group, ": member `k`'s `source` lands at `self[k * source.len()..]` on every member (`nvshmem_fcollect`). `self.len() == team size * source.len()`.")]
            #[inline(always)]
            pub fn $fcollect(&self, team: Team, source: Sym<T>) {
                const NAME: &str = concat!("Sym::", stringify!($fcollect), "\0");
                // SAFETY: NAME ends with its only NUL.
                let call = unsafe { CStr::from_bytes_with_nul_unchecked(NAME.as_bytes()) };
                let n = collective_count(team, self, &source, Shape::Gather, call);
                // SAFETY: as above.
                unsafe { crate::collective::$fcollect(team, self.as_ptr(), source.as_ptr(), n) }
            }

            #[doc = concat!("All-to-all ", $group, ": block `j` of member `i`'s `source` lands at block `i` of member `j`'s `self` (`nvshmem_alltoall`). Equal lengths, a multiple of the team size.")]
            #[inline(always)]
            pub fn $alltoall(&self, team: Team, source: Sym<T>) {
                const NAME: &str = concat!("Sym::", stringify!($alltoall), "\0");
                // SAFETY: NAME ends with its only NUL.
                let call = unsafe { CStr::from_bytes_with_nul_unchecked(NAME.as_bytes()) };
                let n = collective_count(team, self, &source, Shape::Blocks, call);
                // SAFETY: as above.
                unsafe { crate::collective::$alltoall(team, self.as_ptr(), source.as_ptr(), n) }
            }
        }

        impl<T: Reducible> Sym<T> {
            #[doc = concat!("All-reduce ", $group, ": `self[i] = op` over every member's `source[i]`, the same bits on every member (`nvshmem_<op>_reduce`). Equal lengths; bitwise `op` only on integers.")]
            #[inline(always)]
            pub fn $reduce(&self, team: Team, source: Sym<T>, op: ReduceOp) {
                const NAME: &str = concat!("Sym::", stringify!($reduce), "\0");
                // SAFETY: NAME ends with its only NUL.
                let call = unsafe { CStr::from_bytes_with_nul_unchecked(NAME.as_bytes()) };
                let n = collective_count(team, self, &source, Shape::Same, call);
                // SAFETY: as above.
                unsafe { crate::collective::$reduce(team, self.as_ptr(), source.as_ptr(), n, op) }
            }

            #[doc = concat!("Reduce-scatter ", $group, ": member `k` gets `self[i] = op` over every member's `source[k * self.len() + i]` (`nvshmem_<op>_reducescatter`). `source.len() == team size * self.len()`.")]
            #[inline(always)]
            pub fn $reducescatter(&self, team: Team, source: Sym<T>, op: ReduceOp) {
                const NAME: &str = concat!("Sym::", stringify!($reducescatter), "\0");
                // SAFETY: NAME ends with its only NUL.
                let call = unsafe { CStr::from_bytes_with_nul_unchecked(NAME.as_bytes()) };
                let n = collective_count(team, self, &source, Shape::Scatter, call);
                // SAFETY: as above.
                unsafe { crate::collective::$reducescatter(team, self.as_ptr(), source.as_ptr(), n, op) }
            }
        }
    };
}

collective_methods!(broadcast, fcollect, alltoall, reduce, reducescatter, "(one thread)");
collective_methods!(broadcast_warp, fcollect_warp, alltoall_warp, reduce_warp, reducescatter_warp, "(a warp)");
collective_methods!(broadcast_block, fcollect_block, alltoall_block, reduce_block, reducescatter_block, "(a block)");
// Native engine only: see the requirements of `crate::collective::reduce_grid`
// (collective launch, a grid that is co-resident).
#[cfg(not(feature = "nvshmem"))]
collective_methods!(
    broadcast_grid,
    fcollect_grid,
    alltoall_grid,
    reduce_grid,
    reducescatter_grid,
    "(every thread of the grid; native engine only; launch collectively with a co-resident grid, see `collective::reduce_grid`)"
);
