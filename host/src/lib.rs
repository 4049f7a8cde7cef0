//! # gpushmem — host runtime
//!
//! Allocates the symmetric heap on every PE, maps every peer's heap, installs
//! the device state into each loaded kernel module, and launches kernels.
//! The device API is the crate `gpushmem-kernels`.
//!
//! Layout, by subsystem: [`bootstrap`] (PEs find each other), `heap`
//! (symmetric allocation), `peer` (mapping peers' heaps), `module` (loading
//! PTX, installing the device state), `launch` (plain and collective launch),
//! [`Shmem`] (one PE), [`Threads`] (PEs as threads of one process).
//!
//! The one recipe (docs/guide.md walks through it; the kernel crate is
//! `my-kernels`, whose build gives `GPUSHMEM_PTX_MY_KERNELS` and
//! `GPUSHMEM_CUBIN_MY_KERNELS`):
//!
//! ```no_run
//! use gpushmem::{LaunchConfig, Shmem};
//! const PTX: &str = "…"; // include_str!(env!("GPUSHMEM_PTX_MY_KERNELS"))
//! const CUBIN: &[u8] = b""; // include_bytes!(env!("GPUSHMEM_CUBIN_MY_KERNELS"))
//! let shmem = Shmem::init()?;                 // joins the job (gpushmem-run / mpirun / srun / 1 PE)
//! let n = 1 << 20;
//! let src = shmem.malloc::<u8>(n)?;           // collective, same offset on every PE
//! let dst = shmem.calloc::<u8>(n)?;
//! let module = shmem.load_module_prebuilt("my-kernels", PTX, CUBIN)?; // collective
//! let k = module.kernel("ring_shift")?;       // ring_shift(dest: Sym<u8>, src: Sym<u8>)
//! let one = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (512, 1, 1), shared_mem_bytes: 0 };
//! // SAFETY: the arguments match the kernel: each `&SymSlice<u8>` arrives as its `Sym<u8>`.
//! unsafe { shmem.launch_collective(&k, one, (&dst, &src))? };
//! shmem.synchronize()?;
//! # Ok::<(), gpushmem::Error>(())
//! ```
//!
//! Misuse the compiler rejects (see `docs/errors.md` for the rest): a slice
//! used after `free`, and a `Shmem` used after `finalize`, both of which take
//! their argument by value; a stream-ordered copy to or from a raw local
//! address outside `unsafe` (the typed forms, `get_on_stream` and
//! `get_buf_on_stream`, are safe).
//!
//! ```compile_fail,E0382
//! let shmem = gpushmem::Shmem::init()?;
//! let buf = shmem.calloc::<u32>(16)?;
//! shmem.free(buf)?;
//! let _ = shmem.read(&buf); // use after free
//! # Ok::<(), gpushmem::Error>(())
//! ```
//!
//! ```compile_fail,E0382
//! let shmem = gpushmem::Shmem::init()?;
//! shmem.finalize()?;
//! let _ = shmem.malloc::<u8>(16); // use after finalize
//! # Ok::<(), gpushmem::Error>(())
//! ```
//!
//! ```compile_fail,E0133
//! let shmem = gpushmem::Shmem::init()?;
//! let buf = shmem.calloc::<u8>(16)?;
//! // Nothing can check a raw local address: the byte form is `unsafe`.
//! shmem.getmem_on_stream(0xdead_0000, buf.as_kernel_ptr(), 16, 0, shmem.stream())?;
//! # Ok::<(), gpushmem::Error>(())
//! ```
#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod args;
pub mod bootstrap;
mod collective_ops;
mod config;
pub mod driver;
mod error;
mod heap;
mod launch;
mod logging;
mod module;
mod nvshmem;
mod peer;
mod shmem;
mod stream_ops;
mod team;
mod threads;

/// The `Pod` bound of heap elements and host collectives (`malloc::<T>`,
/// `read`, `allgather_host`): plain numbers, arrays of them, and your own
/// `#[repr(C)]` structs with `#[derive(Clone, Copy, bytemuck::Pod,
/// bytemuck::Zeroable)]` (add `bytemuck = { version = "1", features =
/// ["derive"] }`); tuples are not `Pod` (their layout is not fixed).
pub use bytemuck;
pub use collective_ops::ReduceType;
pub use config::{parse_size, Config, Setting};
pub use cudarc;
/// A kernel launch's shape: `grid_dim`, `block_dim` (each `(x, y, z)`) and
/// `shared_mem_bytes` of dynamic shared memory (cudarc's, re-exported).
#[doc(no_inline)]
pub use cudarc::driver::LaunchConfig;
pub use error::{Error, Result};
pub use gpushmem_kernels::abi;
pub use gpushmem_kernels::abi::{Cmp, SignalOp};
pub use gpushmem_kernels::reduce::{Bf16, ReduceOp, F16};
pub use gpushmem_kernels::Sym;
pub use heap::{allocator::MIN_ALIGN, SymSlice, SymView, SymViewMut};
pub use launch::{KernelArg, KernelArgs};
pub use logging::init as init_logging;
pub use module::{Kernel, Module};
pub use nvshmem::Engine;
pub use shmem::{Shmem, BUILTIN_CUBIN, BUILTIN_PTX};
pub use team::Team;
pub use threads::Threads;

/// Whether a usable CUDA driver and GPU are present; `Err` says why not.
pub fn gpu_available() -> Result<usize> {
    driver::device_count()
}

/// Whether a launcher (`gpushmem-run`, `mpirun`, `srun`, …) started this
/// process as a PE of a multi-process job, by the same variables
/// [`Shmem::init`] reads ([`bootstrap::env`]): a program's `main` calls
/// `Shmem::init` when this is true and may run PEs as [`Threads`] otherwise.
/// Variables that are set but wrong count as launched, so that `Shmem::init`
/// reports them.
pub fn launched() -> bool {
    !matches!(bootstrap::env::LaunchEnv::from_env(), Ok(None))
}
