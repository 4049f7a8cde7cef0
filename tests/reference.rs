//! The GPU suite's reduction reference (tests/gpu/reference.rs), checked on
//! the CPU: known values worked out from the formats' definitions, exhaustive
//! round-trip and ties-to-even properties, and agreement with gpushmem-kernels'
//! own conversions and operators (the code the device runs).

#[path = "gpu/reference.rs"]
mod reference;

fn none(what: &str, bad: Vec<String>) {
    assert!(bad.is_empty(), "{what}: {} disagreements:\n{}", bad.len(), bad.join("\n"));
}

#[test]
fn known_values() {
    none("known values", reference::known_values());
}

#[test]
fn exhaustive_round_trip_and_ties_to_even() {
    none("exhaustive", reference::exhaustive());
}

#[test]
fn kernel_crate_agrees_with_reference() {
    none("agreement", reference::agreement::disagreements(&reference::agreement::probe_values(1 << 20)));
}

#[test]
fn gpu_start_check_passes() {
    assert_eq!(reference::agreement::checked(), Ok(()));
}
