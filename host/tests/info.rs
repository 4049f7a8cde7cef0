//! gpushmem-info runs anywhere: without a GPU it says so; a bad setting is an error naming it.

use std::process::Command;

fn info(env: &[(&str, &str)]) -> (bool, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gpushmem-info"));
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().expect("running gpushmem-info");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn reports_toolchain_gpus_and_settings() {
    let (ok, text) = info(&[("GPUSHMEM_SYMMETRIC_SIZE", "2g")]);
    assert!(ok, "{text}");
    assert!(text.contains("kernel toolchain:"), "{text}");
    assert!(text.contains("ptxas:"), "{text}");
    assert!(text.contains("GPUs:"), "{text}");
    // Either a device list or the reason there is none.
    assert!(text.contains("device(s)") || text.contains("no CUDA driver/GPU found"), "{text}");
    assert!(text.contains("symmetric heap per PE: 2147483648 bytes"), "{text}");
}

#[test]
fn a_bad_setting_is_named() {
    let (ok, text) = info(&[("GPUSHMEM_TIMEOUT", "soon")]);
    assert!(!ok);
    assert!(text.contains("GPUSHMEM_TIMEOUT"), "{text}");
}
