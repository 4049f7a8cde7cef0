//! Tells the crates that depend on this one where its source is
//! (`DEP_GPUSHMEM_KERNELS_ROOT`, through `links`): gpushmem's build script
//! builds its built-in kernels against this very copy of the device API,
//! wherever cargo keeps it (a checkout, the registry, a vendor directory).
fn main() {
    println!("cargo::metadata=root={}", env!("CARGO_MANIFEST_DIR"));
    println!("cargo::rerun-if-changed=build.rs");
}
