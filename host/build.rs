//! Builds the built-in kernels (host/builtin) to PTX for `Shmem`'s
//! stream-ordered operations (env GPUSHMEM_PTX_GPUSHMEM_BUILTIN_KERNELS).
fn main() {
    // Native on both engines: these kernels reach peers through gpushmem's own
    // peer table (on the NVSHMEM engine, filled from nvshmem_ptr).
    gpushmem_build::Builder::new("builtin").engine(gpushmem_build::Engine::Native).build_or_exit();
}
