//! The guide's example app (docs/guide.md) builds outside the workspace from
//! the guide's own code and runs (or says that no GPU was found), on the three
//! crates as packaged for crates.io (`scripts/check-guide.sh --packaged`, which
//! runs `scripts/package.sh`: each .crate also builds on its own).

#[test]
fn guide_example_builds_and_runs() {
    let root = env!("CARGO_MANIFEST_DIR");
    let dir = std::env::temp_dir().join(format!("gpushmem-guide-{}", std::process::id()));
    let out = std::process::Command::new("bash")
        .arg(format!("{root}/scripts/check-guide.sh"))
        .arg("--packaged")
        .arg(&dir)
        // The outer cargo's variables would leak into the nested build.
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("RUSTFLAGS")
        .output()
        .expect("running scripts/check-guide.sh");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("check-guide: built and ran") && text.contains("from the packaged crates"), "{text}");
}
