//! The seam between the device API and the engine that moves the data,
//! chosen at build time (DESIGN.md, "Two engines"):
//!
//! - [`native`] (default): our state, our heap, loads and stores over the
//!   peer table, our barrier.
//! - `nvshmem` (cargo feature `nvshmem`): each operation calls NVSHMEM's device
//!   function of the same meaning, declared `extern "C"` and resolved when the
//!   builder links NVSHMEM's LLVM bitcode (`libnvshmem_device.bc`).
//!
//! Both files define the same few crate-internal operations, with the same
//! signatures; the topic modules (`pe`, `rma`, `signal`, `sync`, `atomic`,
//! `wait`) call only these and stay engine-free. The topic modules run the
//! argument checks ([`crate::debug`]) before calling in; an engine never
//! checks again. The operations:
//!
//! | operation | meaning |
//! |---|---|
//! | `my_pe`, `n_pes`, `ptr` | who am I, how many, load/store address of a symmetric object on a PE |
//! | `put`, `get` | `nelems` of `T` over a [`Group`](crate::group::Group), [`Mode::Blocking`] or [`Mode::Nbi`] |
//! | `p`, `g` | one element |
//! | `iput`, `iget` | strided, blocking |
//! | `fence`, `quiet` | ordering, completion (quiet over a group) |
//! | `barrier_all` | every PE arrives (over a group; `complete`: quiet first) |
//! | `team_sync_group` | every member of a team arrives (over a group; `complete`: quiet first) |
//! | `broadcast`, `fcollect`, `alltoall`, `reduce`, `reducescatter` | the team collectives (`native_collective.rs`, `nvshmem_collective.rs`) |
//! | `put_signal`, `signal_op`, `signal_fetch` | signals (`signal_op` releases on both engines) |
//! | `signal_op_relaxed` | a signal update with no ordering (NVSHMEM's `signal_op` as it is) |
//! | `atomic_fetch_op`, `atomic_op`, `atomic_compare_swap`, `atomic_fetch`, `atomic_fetch_add_float` | remote atomics |
//! | `after_wait` | what a wait or test that succeeded does after its acquire |

#[cfg(not(feature = "nvshmem"))]
pub(crate) mod native;
#[cfg(not(feature = "nvshmem"))]
pub(crate) use native::*;

#[cfg(not(feature = "nvshmem"))]
mod native_collective;
#[cfg(not(feature = "nvshmem"))]
pub(crate) use native_collective::*;

#[cfg(feature = "nvshmem")]
mod nvshmem;
#[cfg(feature = "nvshmem")]
pub(crate) use nvshmem::*;
#[cfg(feature = "nvshmem")]
mod nvshmem_collective;
#[cfg(feature = "nvshmem")]
pub(crate) use nvshmem_collective::*;

/// One relaxed system-scope store (`SET`, `st.volatile`) or `red.relaxed.sys.add`
/// (`ADD`) at the load/store address `p` of a signal word: atomic, unordered.
/// What both engines' relaxed signal does where it has the peer's address.
///
/// # Safety
/// `p` is a valid, 8-byte-aligned global address.
#[inline(always)]
pub(crate) unsafe fn signal_relaxed(p: *mut u64, value: u64, op: crate::abi::SignalOp) {
    use crate::word::AtomicWord;
    // SAFETY: `p` is a valid, 8-byte-aligned global address of a `u64` (this fn's
    // contract), which is what `store_volatile` and `add` require.
    unsafe {
        match op {
            crate::abi::SignalOp::Set => <u64 as AtomicWord>::store_volatile(p, value),
            crate::abi::SignalOp::Add => <u64 as AtomicWord>::add(p, value),
        }
    }
}

/// Blocking (the source may be reused, or the data is in `dest`, on return)
/// or non-blocking (complete after `quiet`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// `put`, `get`, `put_signal`.
    Blocking,
    /// `put_nbi`, `get_nbi`, `put_signal_nbi`.
    Nbi,
}

/// A remote atomic that returns the old value.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum FetchOp {
    /// `+ value`.
    Add,
    /// `+ 1` (the value passed is one).
    Inc,
    /// `& value`.
    And,
    /// `| value`.
    Or,
    /// `^ value`.
    Xor,
    /// becomes `value`.
    Swap,
}

/// A remote atomic without a result.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    /// `+ value`.
    Add,
    /// `+ 1` (the value passed is one).
    Inc,
    /// `& value`.
    And,
    /// `| value`.
    Or,
    /// `^ value`.
    Xor,
    /// becomes `value`.
    Set,
}
