//! Builds the examples' kernel crates to PTX (env GPUSHMEM_PTX_RING_KERNELS,
//! GPUSHMEM_PTX_ALLREDUCE_KERNELS, GPUSHMEM_PTX_MOE_KERNELS,
//! GPUSHMEM_PTX_HALO_KERNELS, and the GPUSHMEM_CUBIN_* beside them).
//!
//! The ring, moe and halo kernels follow `GPUSHMEM_ENGINE` (`nvshmem`: built
//! for the NVSHMEM engine, see docs/multinode.md); the allreduce example
//! compares with the native engine's `reduce_block` and runs its PEs as
//! threads, so its kernels are always built for the native engine.
use gpushmem_build::{Builder, Engine};

fn main() {
    Builder::new("ring-kernels").build_or_exit();
    Builder::new("allreduce-kernels").engine(Engine::Native).build_or_exit();
    Builder::new("moe-kernels").build_or_exit();
    Builder::new("halo-kernels").build_or_exit();
}
