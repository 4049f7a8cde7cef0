//! GPU test suite. Runs the GPU tests when a CUDA driver and GPU are present;
//! otherwise reports each as ignored (kind "needs GPU") and prints why — or,
//! with `GPUSHMEM_REQUIRE_GPU=1` (set by the GPU scripts), fails.
//! The same binary, built on a CPU machine, runs them on a GPU machine.
//! The `verdict::…` tests (tests/gpu/verdict.rs) need no GPU and run
//! everywhere: they feed made-up counts and bytes to the GPU tests' verdicts.
//!
//! With `GPUSHMEM_TEST_CHILD=<scenario>` the binary runs one scenario as a
//! child process instead (process-mode PEs, traps that poison a context).
//!
//! Quick mode, `GPUSHMEM_TEST_QUICK=1` (for compute-sanitizer runs, see
//! scripts/sanitize.sh): every test still covers every op, type, form, team
//! shape and PE count, but iteration and message counts are divided by 100
//! (`common::scaled`: 10^5 pipeline messages and CAS acquisitions → ~10^3,
//! litmus instances (fence_orders_puts pairs too) 16384 → 163 per launch,
//! stress 10^4 rounds → 100, barrier rounds 1000 → 10, alternating
//! collectives 10^4 → 100, team slot cycles 100 → 12, init/finalize cycles
//! 100 → 1) and transfers are capped at 128 KiB (`common::within_cap`,
//! `common::size_cap`: the ring sweep stops at 64 KiB + 3 B, the all-to-all
//! at 4099 B chunks, the 64 MiB collective test moves 128 KiB). Tests that are
//! small already (collective matrices, wait table, atomics contention), the
//! missing-barrier detection and the fault tests run as always. Test names
//! keep their full figures; printed summaries give the counts actually run.
//! Child and PE processes inherit the variable. Without it (or `=0`) every
//! test runs exactly at full size.

mod atomic;
mod bulk;
mod collective;
mod common;
mod errors;
mod faults;
mod interop;
mod litmus;
mod reference;
mod rma;
mod signal;
mod smoke;
mod stream;
mod stress;
mod sync;
mod team;
mod typed;
mod verdict;
mod wait;

use common::*;
use libtest_mimic::{Arguments, Trial};
use std::process::ExitCode;

/// A child scenario's exit status from the failures it found (printed, the
/// first 20, after `prefix`) or the error that stopped it.
fn report_failures(r: gpushmem::Result<Vec<String>>, prefix: &str) -> ExitCode {
    match r {
        Ok(f) if f.is_empty() => ExitCode::SUCCESS,
        Ok(f) => {
            for l in f.iter().take(20) {
                println!("{prefix}{l}");
            }
            ExitCode::from(1)
        }
        Err(e) => {
            println!("HOST-SAW-ERROR: {e}");
            ExitCode::from(1)
        }
    }
}

fn child_scenario(name: &str) -> ExitCode {
    let report = |r: gpushmem::Result<()>| match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            println!("HOST-SAW-ERROR: {e}");
            ExitCode::from(1)
        }
    };
    match name {
        "debug_pe_check" | "wait_timeout" | "debug_heap_check" | "debug_misaligned" => report((|| {
            let shmem = gpushmem::Shmem::init()?;
            let m = kernels(&shmem)?;
            let buf = shmem.calloc::<u64>(4)?;
            unsafe {
                if name == "debug_pe_check" {
                    shmem.launch(&m.kernel("p_to")?, one_block(32), (buf.as_kernel_ptr(), 5u32))?;
                } else if name == "debug_misaligned" {
                    // A u32 at 2 bytes past an 8-byte-aligned address.
                    shmem.launch(&m.kernel("p_to")?, one_block(32), (buf.as_kernel_ptr() + 2, 0u32))?;
                } else if name == "debug_heap_check" {
                    // One past the heap's end: not a symmetric address.
                    let s = shmem.device_state();
                    shmem.launch(&m.kernel("p_to")?, one_block(32), (s.heap_base + s.heap_size, 0u32))?;
                } else {
                    shmem.launch(&m.kernel("wait_forever")?, one_block(32), (buf.as_kernel_ptr(),))?;
                }
            }
            shmem.synchronize()?;
            println!("NO ERROR: the kernel returned normally");
            Ok(())
        })()),
        "init_only" => report(gpushmem::Shmem::init().map(|_| ())),
        "init_on" | "init_on_default_stream" => {
            report_failures(interop::init_on_child(name == "init_on_default_stream"), "FAILED: ")
        }
        other if other.starts_with("misuse_") => report(collective::misuse_child(other)),
        other if other.starts_with("typed_misuse_") => {
            report(typed::misuse_child(other["typed_misuse_".len()..].parse().unwrap_or(u32::MAX)))
        }
        "coll_debug_checks" => collective::debug_checks_child(),
        "signal_wait_timeout" => report(signal::signal_wait_timeout_child()),
        other if other.starts_with("die_in:") => faults::die_in(&other["die_in:".len()..]),
        "kill_pe1" => report((|| {
            let shmem = gpushmem::Shmem::init()?;
            if shmem.my_pe() == 1 {
                let _ = std::process::Command::new("kill").args(["-9", &std::process::id().to_string()]).status();
                std::thread::sleep(std::time::Duration::from_secs(30));
            }
            let m = kernels(&shmem)?;
            let buf = shmem.calloc::<u64>(2 * shmem.n_pes())?;
            let k = m.kernel("barrier_rounds")?;
            let errors = shmem.calloc::<u32>(1)?;
            loop {
                unsafe {
                    shmem.launch_collective(
                        &k,
                        one_block(32),
                        (buf.as_kernel_ptr(), 100u32, errors.as_kernel_ptr(), 1u32),
                    )?
                };
                shmem.barrier_all()?;
            }
        })()),
        "ring_processes" => report_failures(rma::ring_and_alltoall_process(), ""),
        other if other.starts_with("run-test:") => {
            let want = &other["run-test:".len()..];
            match gpu_tests().into_iter().find(|(n, _)| n == want) {
                Some((_, f)) => match f() {
                    Ok(()) => ExitCode::SUCCESS,
                    Err(e) => {
                        println!("FAILED: {want}: {}", e.message().unwrap_or("(no message)"));
                        ExitCode::from(1)
                    }
                },
                None => {
                    eprintln!("no test named {want:?}");
                    ExitCode::from(2)
                }
            }
        }
        other => {
            eprintln!("unknown GPUSHMEM_TEST_CHILD scenario {other:?}");
            ExitCode::from(2)
        }
    }
}

/// A test: its name and its body.
type Test = (String, std::sync::Arc<dyn Fn() -> TestResult + Send + Sync>);

fn test(name: impl Into<String>, f: impl Fn() -> TestResult + Send + Sync + 'static) -> Test {
    (name.into(), std::sync::Arc::new(f))
}

/// Tests that also run with one process per PE (their PE count), through
/// gpushmem-run: the same body, each process being one PE (see `common::threads`).
const PROCESS_VARIANTS: &[(&str, usize)] = &[
    ("signal::pipeline_2pe", 2),
    ("atomic::fetch_add_contention", 4),
    ("atomic::cas_lock_100k", 4),
    ("atomic::ops_results", 2),
    ("wait::table_2pe", 2),
    ("stream::ordered_ops_2pe", 2),
    ("stream::ordered_ops_4pe", 4),
    ("rma::strided_ring_2pe", 2),
    ("rma::host_ptr_2pe", 2),
    ("interop::cudarc_ptr_2pe", 2),
    ("rma::strided_ring_4pe", 4),
    ("sync::barrier_1000_rounds_2pe", 2),
    ("sync::barrier_1000_rounds_4pe", 4),
    ("collective::quick_2pe", 2),
    ("team::split_sharing_gpu_2pe", 2),
    ("typed::calls_2pe", 2),
    ("collective::grid_forms_2pe", 2),
    ("stream::collectives_large_3pe", 3),
    ("typed::calls_4pe", 4),
    ("collective::quick_4pe", 4),
    ("litmus::mp_fence_4pe", 4),
    ("litmus::mp_quiet_4pe", 4),
    ("litmus::mp_cross_pe_quiet_4pe", 4),
    ("litmus::mp_put_signal_4pe", 4),
    ("litmus::mp_signal_op_4pe", 4),
    ("litmus::amo_vs_put_4pe", 4),
    ("litmus::store_buffering_4pe", 4),
    ("litmus::get_after_quiet_barrier_4pe", 4),
];

fn gpu_tests() -> Vec<Test> {
    let mut t = vec![
        test("smoke::pattern_roundtrip", smoke::smoke_pattern),
        test("smoke::state_installed", || smoke::state_installed(1)),
        test("smoke::state_installed_2pe", || smoke::state_installed(2)),
        test("smoke::state_installed_4pe", || smoke::state_installed(4)),
        test("smoke::launch_query_gridsize", smoke::launch_query_gridsize),
        test("interop::cudarc_ptr_2pe", || interop::cudarc_ptr(2)),
        test("interop::init_on_2pe", interop::init_on_2pe),
        test("interop::threads_on_contexts_2pe", || interop::threads_on_contexts(2)),
        test("bulk::probe_copy", bulk::probe_copy),
        test("bulk::probe_dynamic", bulk::probe_dynamic),
        test("errors::host_bad_inputs", errors::host_bad_inputs),
        test("errors::kernel_of_another_pe", errors::kernel_of_another_pe),
        test("errors::device_pe_check_traps", errors::device_pe_check_traps),
        test("errors::device_heap_check_traps", errors::device_heap_check_traps),
        test("errors::device_misaligned_traps", errors::device_misaligned_traps),
        test("errors::device_wait_times_out", errors::device_wait_times_out),
        test("lifecycle::init_finalize_100_cycles", smoke::init_finalize_cycles),
        test("errors::bootstrap_missing_pe", errors::bootstrap_missing_pe),
        test("errors::killed_pe_is_reported", errors::killed_pe_is_reported),
        test("faults::killed_in_barrier", || faults::killed_in(faults::PHASES[0])),
        test("faults::killed_in_put_loop", || faults::killed_in(faults::PHASES[1])),
        test("faults::killed_in_malloc", || faults::killed_in(faults::PHASES[2])),
        test("faults::heap_larger_than_gpu", faults::heap_larger_than_gpu),
        test("faults::collective_called_by_some", faults::collective_called_by_some),
        test("faults::missing_gpu", faults::missing_gpu),
        test("faults::collective_bad_inputs", faults::collective_bad_inputs),
        test("sync::fence_orders_puts", sync::fence_orders_puts),
        test("sync::barrier_missing_is_detected", sync::barrier_missing_is_detected),
        test("errors::signal_wait_times_out", signal::signal_wait_times_out),
        test("atomic::fetch_add_contention", atomic::fetch_add_contention),
        test("atomic::cas_lock_100k", atomic::cas_lock),
        test("atomic::ops_results", atomic::ops_results),
        test("wait::table_2pe", || wait::table(2, 1)),
        test("wait::table_1pe_two_blocks", || wait::table(1, 0)),
    ];
    for n in [2usize, 4, 8] {
        t.push(test(format!("rma::ring_threads_{n}pe"), move || rma::ring(n)));
        t.push(test(format!("rma::alltoall_threads_{n}pe"), move || rma::alltoall(n)));
        t.push(test(format!("rma::host_ptr_{n}pe"), move || rma::host_ptr(n)));
        t.push(test(format!("sync::barrier_1000_rounds_{n}pe"), move || sync::barrier(n)));
    }
    for n in [2usize, 4] {
        t.push(test(format!("stream::ordered_ops_{n}pe"), move || stream::stream_ordered_ops(n)));
        t.push(test(format!("stream::collectives_{n}pe"), move || stream::collectives_on_stream(n, 4099)));
    }
    // Large enough for the multi-block grid and the two-shot allreduce (odd length: ragged chunks).
    for n in [3usize, 8] {
        t.push(test(format!("stream::collectives_large_{n}pe"), move || stream::collectives_on_stream(n, 397_603)));
    }
    for n in [2usize, 5, 8] {
        t.push(test(format!("collective::grid_forms_{n}pe"), move || collective::grid_forms(n)));
    }
    for n in [2usize, 4] {
        t.push(test(format!("rma::ring_alltoall_processes_{n}pe"), move || errors::processes_ring_alltoall(n)));
    }
    for n in [2usize, 8] {
        t.push(test(format!("signal::pipeline_{n}pe"), move || signal::pipeline(n)));
    }
    for n in [2usize, 4] {
        t.push(test(format!("rma::strided_ring_{n}pe"), move || signal::strided_ring(n)));
    }
    t.push(test("team::layout_8pe", team::layout));
    t.push(test("team::slots_4pe", team::slots));
    t.push(test("team::barrier_rounds_8pe", team::barrier_rounds));
    t.push(test("team::alternating_10k_8pe", team::alternating));
    t.push(test("team::split_sharing_gpu_2pe", team::split_sharing_gpu));
    for n in [2usize, 4] {
        t.push(test(format!("typed::calls_{n}pe"), move || typed::typed_calls(n)));
        t.push(test(format!("typed::p_g_{n}pe"), move || typed::p_g(n)));
    }
    t.push(test("errors::typed_misuse_traps", typed::misuse_traps));
    for n in [2usize, 4, 8] {
        t.push(test(format!("collective::matrix_{n}pe"), move || collective::matrix(n)));
    }
    for n in [2usize, 4] {
        t.push(test(format!("collective::quick_{n}pe"), move || collective::quick(n)));
    }
    t.push(test("collective::large_64mib_8pe", collective::large));
    t.push(test("collective::quick_debug_checks_8pe", collective::quick_debug_checks));
    t.push(test("errors::team_invalid_traps", collective::team_invalid_traps));
    t.push(test("errors::team_out_of_range_traps_unchecked", collective::team_out_of_range_traps_unchecked));
    t.push(test("errors::team_non_member_traps", collective::team_non_member_traps));
    t.push(test("errors::reduce_and_f32_traps", collective::reduce_and_f32_traps));
    t.push(test("errors::reduce_overlap_traps", collective::reduce_overlap_traps));
    t.push(test("errors::collective_sizes_differ_traps", collective::sizes_differ_traps));
    t.push(test("litmus::mp_fence_4pe", litmus::mp_fence));
    t.push(test("litmus::mp_quiet_4pe", litmus::mp_quiet));
    t.push(test("litmus::mp_cross_pe_quiet_4pe", litmus::mp_cross_pe_quiet));
    t.push(test("litmus::mp_put_signal_4pe", litmus::mp_put_signal));
    t.push(test("litmus::mp_signal_op_4pe", litmus::mp_signal_op));
    t.push(test("litmus::amo_vs_put_4pe", litmus::amo_vs_put));
    t.push(test("litmus::store_buffering_4pe", litmus::store_buffering));
    t.push(test("litmus::get_after_quiet_barrier_4pe", litmus::get_after_quiet_barrier));
    t.push(test("stress::random_ops_8pe", stress::random_ops));
    t
}

/// `GPUSHMEM_TEST_ALL_AS_PROCESSES=1`: the suite is the process-mode
/// variants only: [`PROCESS_VARIANTS`] plus an `::as_<N>_processes` variant of
/// every other multi-PE test named `…_<N>pe`. Made for compute-sanitizer (scripts/sanitize.sh): with PEs as threads all
/// PEs share one CUDA context, and the sanitizer now and then waits for the
/// context's running kernels inside a PE's CUDA call, while those kernels
/// spin waiting for that very PE (a stall no normal run has); one process per
/// PE gives every PE its own context and sanitizer instance.
const ALL_AS_PROCESSES_VAR: &str = "GPUSHMEM_TEST_ALL_AS_PROCESSES";

/// Tests that cannot be one PE of a process job: they spawn processes or
/// trap on purpose themselves, or measure the whole device.
fn has_own_processes(name: &str) -> bool {
    ["errors::", "faults::", "lifecycle::", "collective::quick_debug_checks", "interop::init_on", "interop::threads_on"]
        .iter()
        .any(|p| name.starts_with(p))
        || name.contains("processes")
}

/// The PE count in a test name `…_<N>pe`.
fn pes_in_name(name: &str) -> Option<usize> {
    name.strip_suffix("pe")?.rsplit('_').next()?.parse().ok()
}

fn all_as_processes() -> bool {
    std::env::var_os(ALL_AS_PROCESSES_VAR).is_some_and(|x| !x.is_empty() && x != "0")
}

/// The process-mode variants to run: [`PROCESS_VARIANTS`], plus with
/// [`ALL_AS_PROCESSES_VAR`] set every other multi-PE test.
fn process_variants(tests: &[Test]) -> Vec<(String, usize)> {
    let mut v: Vec<(String, usize)> = PROCESS_VARIANTS.iter().map(|&(name, n)| (name.to_string(), n)).collect();
    if all_as_processes() {
        for (name, _) in tests {
            let n = pes_in_name(name).filter(|&n| n >= 2);
            if let Some(n) = n.filter(|_| !has_own_processes(name) && !v.iter().any(|(x, _)| x == name)) {
                v.push((name.clone(), n));
            }
        }
    }
    v
}

/// Every test as a trial, then the process-mode variants.
fn trials() -> Vec<Trial> {
    let tests = gpu_tests();
    for (name, _) in PROCESS_VARIANTS {
        // Checked on every run (CPU machines too): a variant must name a test.
        assert!(tests.iter().any(|(n, _)| n == name), "PROCESS_VARIANTS names no test {name:?}");
    }
    let variants = process_variants(&tests);
    let mut t: Vec<Trial> = Vec::new();
    if !all_as_processes() {
        // NVSHMEM has one PE per process: there a multi-PE test runs only as
        // its process variant (GPUSHMEM_TEST_ALL_AS_PROCESSES=1).
        let nvshmem = common::engine() == gpushmem::Engine::Nvshmem;
        t.extend(tests.into_iter().map(|(name, f)| {
            let why = if !nvshmem {
                None
            } else if name.starts_with(NATIVE_ONLY.0) {
                Some(NATIVE_ONLY.1)
            } else if pes_in_name(&name).is_some_and(|n| n >= 2) {
                Some("PEs as threads: NVSHMEM engine runs it with GPUSHMEM_TEST_ALL_AS_PROCESSES=1")
            } else {
                None
            };
            let trial = Trial::test(name, move || f());
            match why {
                Some(why) => trial.with_kind(why).with_ignored_flag(true),
                None => trial,
            }
        }));
    }
    for (name, n) in variants {
        let label = format!("{name}::as_{n}_processes");
        let why = nvshmem_not_applicable(&name, n);
        let trial = Trial::test(label, move || errors::run_test_in_processes(&name, n));
        t.push(match why {
            Some(why) => trial.with_kind(why).with_ignored_flag(true),
            None => trial,
        });
    }
    t
}

/// Tests whose kernels exist only in the native engine's build, and why they
/// are ignored on the NVSHMEM engine (as threads and as processes alike).
const NATIVE_ONLY: (&str, &str) =
    ("bulk::", "NVSHMEM engine: the bulk-copy probe kernels are built for the native engine only");

/// Why a multi-PE test does not apply on the NVSHMEM engine (ignored with
/// this reason there), or `None` where it does (and on the native engine).
fn nvshmem_not_applicable(name: &str, n: usize) -> Option<&'static str> {
    if common::engine() != gpushmem::Engine::Nvshmem {
        return None;
    }
    let splits = ["team::layout", "team::slots", "team::barrier_rounds", "team::alternating"];
    if splits.iter().any(|p| name.starts_with(p)) && common::nvshmem_shares_gpu(n) {
        return Some("NVSHMEM engine, PEs sharing a GPU: NVSHMEM 3.4.5 cannot split teams there");
    }
    if name.starts_with(NATIVE_ONLY.0) {
        return Some(NATIVE_ONLY.1);
    }
    if name.starts_with("collective::grid_forms") {
        return Some("NVSHMEM engine: the _grid forms are native-engine only (NVSHMEM has no grid-scope collectives)");
    }
    if name.starts_with("collective::matrix") || name.starts_with("collective::large") {
        return Some("NVSHMEM engine: its test kernels carry only the quick matrix's reductions (ptxas time)");
    }
    None
}

/// `GPUSHMEM_REQUIRE_GPU=1`: no usable GPU is a failure, not a run of ignored
/// tests. Every GPU script sets it (scripts/device-run.sh, device-verify.sh), so
/// a GPU machine whose driver failed cannot pass as green; CPU CI leaves it
/// unset and sees the tests as ignored with the reason.
const REQUIRE_GPU_VAR: &str = "GPUSHMEM_REQUIRE_GPU";

fn require_gpu() -> bool {
    std::env::var_os(REQUIRE_GPU_VAR).is_some_and(|x| !x.is_empty() && x != "0")
}

fn main() -> ExitCode {
    if let Ok(name) = std::env::var("GPUSHMEM_TEST_CHILD") {
        return child_scenario(&name);
    }
    // The tests run jobs of up to 8 PEs as threads in this one process; the
    // first context decides the queue count (see gpushmem's `reserve_queues`).
    if std::env::var_os("CUDA_DEVICE_MAX_CONNECTIONS").is_none() {
        std::env::set_var("CUDA_DEVICE_MAX_CONNECTIONS", "16");
    }
    let mut args = Arguments::from_args();
    // GPU tests share one device and launch collective kernels: run them one at a time.
    args.test_threads = Some(1);
    let tests = match gpushmem::gpu_available() {
        Ok(n) => {
            println!("GPU tests: {n} CUDA device(s) found");
            let _ = seed();
            if quick() {
                println!(
                    "GPU tests: quick mode ({QUICK_VAR}): counts / {QUICK_DIVISOR}, sizes up to {}",
                    fmt_bytes(QUICK_MAX_BYTES)
                );
            }
            trials()
        }
        Err(e) if require_gpu() => {
            println!("GPU tests FAILED: {REQUIRE_GPU_VAR} is set, but no GPU can be used: {e}");
            return ExitCode::FAILURE;
        }
        Err(e) => {
            println!("GPU tests ignored: {e}");
            trials().into_iter().map(|t| t.with_kind("needs GPU").with_ignored_flag(true)).collect()
        }
    };
    let mut tests = tests;
    tests.extend(cpu_trials());
    libtest_mimic::run(&args, tests).exit_code()
}

/// The CPU tests of the GPU tests' verdicts ([`verdict`]), `verdict::…`:
/// ordinary tests that run with or without a GPU (not in the process-mode
/// suite of [`ALL_AS_PROCESSES_VAR`], which holds GPU jobs only).
fn cpu_trials() -> Vec<Trial> {
    if all_as_processes() {
        return Vec::new();
    }
    verdict::tests().into_iter().map(|(name, f)| Trial::test(format!("verdict::{name}"), f)).collect()
}
