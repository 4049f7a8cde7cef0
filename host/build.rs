//! Builds the built-in kernels (host/builtin) to PTX for `Shmem`'s
//! stream-ordered operations (env GPUSHMEM_PTX_GPUSHMEM_BUILTIN_KERNELS).
fn main() {
    gpushmem_build::Builder::new("builtin").build_or_exit();
}
