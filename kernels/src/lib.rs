//! # gpushmem-kernels — the device side of gpushmem
//!
//! NVSHMEM's device-initiated communication for Rust kernels built with
//! rustc's `nvptx64-nvidia-cuda` target: `put_nbi`, `get`, `quiet`, `fence`,
//! `barrier_all`… on pointers into the **symmetric heap**, which become
//! NVLink (or same-GPU) loads and stores with system-scope ordering.
//!
//! Layout, by topic:
//! - [`abi`] — the `#[repr(C)]` types shared with the host (device state, layout of the
//!   library's own sync area). Compiles for the host too.
//! - `pe` — `my_pe`, `n_pes`, `ptr` (address of a symmetric object on another PE).
//! - `rma` — `p`/`g`, `put`/`get`, `put_nbi`/`get_nbi` and the byte (`putmem`) forms, each
//!   with `_warp` and `_block` variants.
//! - `sync` — `fence`, `quiet`, `barrier_all`, `sync_all`.
//! - `team` — `Team`, `TEAM_WORLD`, `team_my_pe`, `team_n_pes`, `team_translate_pe`.
//! - `signal` — `put_signal(_nbi)` (thread/warp/block), `signal_op`, `signal_fetch`,
//!   `signal_wait_until`, and the relaxed `signal_op_relaxed` / `signal_wait_until_relaxed`.
//! - `collective` — `broadcast`, `fcollect`, `alltoall`, `reduce`, `reducescatter` over a team.
//! - [`sym`] — [`Sym<T>`], the typed handle of a symmetric array that the host passes to
//!   kernels, and the safe device calls on it (RMA, signals, atomics, waits, collectives).
//!   The pointer forms below remain for code that needs raw addresses.
//! - [`reduce`](mod@reduce) — reduction operators and element types (`F16`, `Bf16`), shared with the host.
//! - `atomic` — remote atomics on `u32`/`u64`/`i32`/`i64` (and float add), on the
//!   words `AtomicWord`/`AtomicFloat` (defined in the internal `word`, below the engine).
//! - `wait` — `wait_until*`/`test*` on local symmetric memory, and the bounded
//!   spin every wait uses (traps with a message after the state's timeout).
//! - `thread` — `thread_idx`, `block_idx`, `block_dim`, `grid_dim`, `global_idx`,
//!   `sync_block`, `sync_warp`: the launch geometry and block/warp sync, safe.
//!
//! - `debug`, `ptx` (internal) — the argument checks (PE range, heap bounds, behind
//!   the state's debug flag) and the inline-PTX primitives, each citing the PTX ISA.
//! - `engine` (internal) — the seam: the few operations every topic module
//!   calls, one file per engine (below).
//! - `state` (internal) — [`GPUSHMEM_STATE`], the device state the host installs,
//!   and the accessor every module reads it with; `panic` (internal) — the
//!   `#[panic_handler]` (feature `panic-handler`).
//!
//! The device modules exist only when compiling for `nvptx64`.
//!
//! ## Engines (chosen at build time)
//! - **native** (default): everything below — our device state and heap,
//!   loads and stores over the peer table, our barrier, bounded waits.
//! - **nvshmem** (cargo feature `nvshmem`): each call lowers to NVSHMEM's device
//!   function of the same meaning (`nvshmem_putmem_nbi`, `nvshmemx_putmem_nbi_block`,
//!   `nvshmem_quiet`, `nvshmemx_barrier_all_block`, `nvshmem_uint64_atomic_fetch_add`…),
//!   declared `extern "C"` and resolved when the builder links NVSHMEM's LLVM
//!   bitcode (NVSHMEM 3.4.5's `libnvshmem_device.bc` defines every one used).
//!   The argument checks (`debug`) and the bounded waits (`wait_until*`,
//!   `test*`, `signal_wait_until`, on local memory) are this crate's on both
//!   engines: the host installs [`GPUSHMEM_STATE`] on both, with NVSHMEM's heap.
//!   Teams and collectives lower to NVSHMEM's team functions on the team's
//!   `nvshmem_team_t` (which the host makes with `nvshmem_team_split_*`); the
//!   team queries (`team_my_pe`, `team_n_pes`, `team_translate_pe`) stay ours.
//!   Differences, documented per call: `signal_op` issues `nvshmem_fence`
//!   before `nvshmemx_signal_op` to keep its release guarantee
//!   (`signal_op_relaxed` is `nvshmemx_signal_op` alone); `p`/`g` and
//!   `iput`/`iget` need an element of a size NVSHMEM has a function for, with
//!   alignment equal to its size (else a compile error); float atomic add is a
//!   compare-and-swap loop; the table below describes the native engine, and
//!   NVSHMEM gives the same guarantees or stronger.
//!
//! ## Memory model (single node, load/store transport)
//! | call | guarantee |
//! |---|---|
//! | `put_nbi` | stores issued, weak; the data is visible at the target, and the source may be changed, only after `quiet` (or a barrier): the native engine reads the source during the call, the NVSHMEM engine's network transports later |
//! | `put` | as `put_nbi`, and the source may be reused on return |
//! | `get`, `g` | the data is in the destination on return |
//! | `fence` | this PE's earlier puts are ordered before its later puts to the same PE (`fence.acq_rel.sys`) |
//! | `quiet` | all earlier puts/gets of this thread (group, for `_block`/`_warp`) are complete and visible system-wide (`fence.sc.sys`) |
//! | `barrier_all` | `quiet`, then every PE arrives before any leaves |
//! | `sync_all` | every PE arrives before any leaves; orders but does not complete earlier puts |
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(stdarch_nvptx, asm_experimental_arch))]
#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod abi;
pub mod reduce;
pub mod sym;
pub use sym::Sym;

#[cfg(target_arch = "nvptx64")]
pub mod atomic;
#[cfg(target_arch = "nvptx64")]
pub mod collective;
#[cfg(all(target_arch = "nvptx64", not(feature = "nvshmem")))]
mod copy;
// The NVSHMEM engine uses a subset of the checks and primitives the native
// engine needs.
#[cfg(target_arch = "nvptx64")]
#[cfg_attr(feature = "nvshmem", allow(dead_code))]
mod debug;
#[cfg(target_arch = "nvptx64")]
mod engine;
#[cfg(target_arch = "nvptx64")]
mod group;
#[cfg(all(target_arch = "nvptx64", feature = "panic-handler"))]
mod panic;
#[cfg(target_arch = "nvptx64")]
pub mod pe;
#[cfg(target_arch = "nvptx64")]
#[cfg_attr(feature = "nvshmem", allow(dead_code))]
mod ptx;
#[cfg(target_arch = "nvptx64")]
pub mod rma;
#[cfg(target_arch = "nvptx64")]
pub mod signal;
#[cfg(target_arch = "nvptx64")]
mod state;
#[cfg(target_arch = "nvptx64")]
pub mod sync;
#[cfg(target_arch = "nvptx64")]
pub mod team;
#[cfg(target_arch = "nvptx64")]
pub mod thread;
#[cfg(target_arch = "nvptx64")]
pub mod wait;
#[cfg(target_arch = "nvptx64")]
mod word;

#[cfg(target_arch = "nvptx64")]
pub use {
    abi::{Cmp, SignalOp},
    atomic::*,
    pe::*,
    reduce::{Bf16, ReduceOp, Reducible, F16},
    rma::*,
    signal::*,
    sync::*,
    wait::{
        test, test_all, test_all_vector, test_any, test_any_vector, test_some, test_some_vector, wait_until,
        wait_until_all, wait_until_all_vector, wait_until_any, wait_until_any_vector, wait_until_some,
        wait_until_some_vector,
    },
};
#[cfg(target_arch = "nvptx64")]
pub use {collective::*, state::GPUSHMEM_STATE, team::*};
