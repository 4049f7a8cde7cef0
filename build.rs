//! Builds the test and benchmark kernel crates to PTX, and the example kernel
//! crates again for tests/ptx's checks of every kernel crate (the examples
//! package, examples/, builds its own)
//! (env GPUSHMEM_PTX_GPUSHMEM_TEST_KERNELS, GPUSHMEM_PTX_RING_KERNELS,
//! GPUSHMEM_PTX_ALLREDUCE_KERNELS, GPUSHMEM_PTX_MOE_KERNELS, GPUSHMEM_PTX_HALO_KERNELS,
//! GPUSHMEM_PTX_GPUSHMEM_BENCH_KERNELS, and the GPUSHMEM_CUBIN_* beside them).
//!
//! The test kernels, the benchmark kernels and the ring, moe and halo example
//! kernels follow `GPUSHMEM_ENGINE` (`nvshmem`: built for the NVSHMEM engine,
//! see docs/multinode.md); the allreduce example compares with the native
//! engine's `reduce_block` and runs its PEs as threads, so its kernels are
//! always built for the native engine.
use gpushmem_build::{Builder, Engine};

fn main() {
    // Follows GPUSHMEM_ENGINE; its team/collective kernels are left out on the
    // NVSHMEM engine (cfg(gpushmem_nvshmem)), and the tests that need them with them.
    Builder::new("tests/kernels").build_or_exit();
    Builder::new("examples/ring-kernels").build_or_exit();
    // Compares with the library's reduce_block: a collective, native only for now.
    Builder::new("examples/allreduce-kernels").engine(Engine::Native).build_or_exit();
    Builder::new("examples/moe-kernels").build_or_exit();
    Builder::new("examples/halo-kernels").build_or_exit();
    // Follows GPUSHMEM_ENGINE (gpushmem-perf's one-PE benchmarks run on either engine);
    // kernels needing device teams or collectives sit under cfg(not(gpushmem_nvshmem)).
    Builder::new("bench/kernels").build_or_exit();
}
