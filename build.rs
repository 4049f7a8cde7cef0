//! Builds the test and example kernel crates to PTX
//! (env GPUSHMEM_PTX_GPUSHMEM_TEST_KERNELS, GPUSHMEM_PTX_RING_KERNELS,
//! GPUSHMEM_PTX_ALLREDUCE_KERNELS, GPUSHMEM_PTX_MOE_KERNELS, GPUSHMEM_PTX_HALO_KERNELS,
//! GPUSHMEM_PTX_GPUSHMEM_BENCH_KERNELS, and the GPUSHMEM_CUBIN_* beside them).
fn main() {
    gpushmem_build::Builder::new("tests/kernels").build_or_exit();
    gpushmem_build::Builder::new("examples/ring-kernels").build_or_exit();
    gpushmem_build::Builder::new("examples/allreduce-kernels").build_or_exit();
    gpushmem_build::Builder::new("examples/moe-kernels").build_or_exit();
    gpushmem_build::Builder::new("examples/halo-kernels").build_or_exit();
    gpushmem_build::Builder::new("bench/kernels").build_or_exit();
}
