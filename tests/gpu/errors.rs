//! Bad input gets a clear error (host) or a trap with a message (device).

use crate::common::*;
use gpushmem::Error;
use std::process::Command;
use std::time::{Duration, Instant};

fn expect<T: std::fmt::Debug>(
    what: &str,
    r: gpushmem::Result<T>,
    ok: impl Fn(&Error) -> bool,
) -> Result<String, String> {
    match r {
        Err(e) if ok(&e) => Ok(e.to_string()),
        other => Err(format!("{what}: expected a specific error, got {other:?}")),
    }
}

/// Host-side misuse in threads mode: each PE returns the error text it got.
pub fn host_bad_inputs() -> TestResult {
    let msgs = threads(2, 4 << 20, |shmem| {
        let me = shmem.my_pe();
        let mut out = Vec::new();
        let r = shmem.malloc::<u8>(if me == 0 { 100 } else { 200 });
        // The message names the argument that differs and each PE's value.
        let named = "`size in bytes` differs (PE 0: 100, PE 1: 200)";
        out.push(expect("malloc size mismatch", r, |e| matches!(e, Error::Mismatch { detail, .. } if detail == named)));
        let r = shmem.malloc::<u8>(64 << 20);
        out.push(expect("heap exhausted", r, |e| matches!(e, Error::HeapExhausted { .. })));
        let s = shmem.malloc::<u64>(10)?;
        let p = s.as_kernel_ptr();
        shmem.free(s)?;
        out.push(expect(
            "double free",
            shmem.free_ptr(p),
            |e| matches!(e, Error::BadFree { why, .. } if why.contains("double")),
        ));
        let foreign = shmem.stream().alloc_zeros::<u8>(64).cu("alloc")?;
        let fp = dptr(&foreign, shmem.stream());
        out.push(expect("foreign pointer", shmem.free_ptr(fp), |e| matches!(e, Error::NotSymmetric { .. })));
        let s = shmem.malloc::<u32>(4)?;
        out.push(expect("write length", shmem.write(&s, &[1u32, 2, 3]), |e| matches!(e, Error::Config { .. })));
        shmem.free(s)?;
        let module = kernels(shmem)?;
        let k = module.kernel("barrier_rounds")?;
        let huge = gpushmem::LaunchConfig { grid_dim: (1_000_000, 1, 1), block_dim: (1024, 1, 1), shared_mem_bytes: 0 };
        let r = unsafe { shmem.launch_collective(&k, huge, (0u64, 0u32, 0u64, 0u32)) };
        out.push(expect(
            "collective launch too large",
            r,
            |e| matches!(e, Error::Launch { why, .. } if why.contains("co-resident")),
        ));
        out.push(expect("missing kernel", module.kernel("no_such_kernel").map(|_| ()), |e| {
            matches!(e, Error::Module { .. })
        }));
        let bare = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry nothing() { ret; }\n";
        out.push(expect(
            "module without state",
            shmem.load_module("bare", bare).map(|_| ()),
            |e| matches!(e, Error::Module { why, .. } if why.contains("GPUSHMEM_STATE")),
        ));
        Ok(out)
    })?;
    let mut bad = Vec::new();
    for (pe, rows) in msgs.iter().enumerate() {
        for r in rows {
            match r {
                Ok(m) => println!("  PE {pe}: {m}"),
                Err(e) => bad.push(format!("PE {pe}: {e}")),
            }
        }
    }
    if bad.is_empty() {
        Ok(())
    } else {
        Err(bad.join("\n").into())
    }
}

/// PEs as threads: PE 1 launching a kernel that PE 0 loaded (its module holds
/// PE 0's device state, so it would run as PE 0) gets `Error::Launch` naming
/// PE 0's Shmem, through `launch`, `launch_on_stream` and `launch_collective`;
/// its own copy of the same kernel launches.
pub fn kernel_of_another_pe() -> TestResult {
    let pe0_kernel: std::sync::Mutex<Option<gpushmem::Kernel>> = std::sync::Mutex::new(None);
    let msgs = threads(2, 4 << 20, |shmem| {
        let module = kernels(shmem)?; // collective
        let mine = module.kernel("smoke_pattern")?;
        if shmem.my_pe() == 0 {
            *pe0_kernel.lock().unwrap_or_else(|p| p.into_inner()) = Some(mine.clone());
        }
        shmem.barrier_all()?; // PE 0 has handed its kernel over
        let mut out = Vec::new();
        if shmem.my_pe() == 1 {
            let theirs = pe0_kernel.lock().unwrap_or_else(|p| p.into_inner()).take();
            let theirs = theirs.ok_or_else(|| gpushmem::Error::Config {
                name: "test".into(),
                value: String::new(),
                why: "PE 0 did not hand over its kernel".into(),
            })?;
            // n = 0: smoke_pattern would touch no memory, even if it ran.
            let nothing = (0u64, 0u64, 0u64, 0u32);
            let from_pe0 = |e: &Error| matches!(e, Error::Launch { why, .. } if why.contains("loaded by PE 0's Shmem"));
            // SAFETY (all three): the arguments match smoke_pattern's, and with n = 0 it accesses nothing.
            let r = unsafe { shmem.launch(&theirs, one_block(32), nothing) };
            out.push(expect("launch of PE 0's kernel", r, from_pe0));
            let r = unsafe { shmem.launch_on_stream(&theirs, one_block(32), nothing, shmem.stream()) };
            out.push(expect("launch_on_stream of PE 0's kernel", r, from_pe0));
            let r = unsafe { shmem.launch_collective(&theirs, one_block(32), nothing) };
            out.push(expect("launch_collective of PE 0's kernel", r, from_pe0));
            let r = unsafe { shmem.launch(&mine, one_block(32), nothing) };
            out.push(r.map(|()| "PE 1's own kernel launches".to_string()).map_err(|e| format!("own kernel: {e}")));
        }
        shmem.barrier_all()?; // waits for the stream too
        Ok(out)
    })?;
    let mut bad = Vec::new();
    for (pe, rows) in msgs.iter().enumerate() {
        for r in rows {
            match r {
                Ok(m) => println!("  PE {pe}: {m}"),
                Err(e) => bad.push(format!("PE {pe}: {e}")),
            }
        }
    }
    if msgs.get(1).map_or(0, Vec::len) != 4 {
        bad.push(format!("PE 1 made {} checks, want 4", msgs.get(1).map_or(0, Vec::len)));
    }
    if bad.is_empty() {
        Ok(())
    } else {
        Err(bad.join("\n").into())
    }
}

/// Runs this test binary as a child scenario (see `main.rs`), with `env` set; returns (exit ok, stdout+stderr).
pub fn child(scenario: &str, env: &[(&str, &str)], timeout: Duration) -> Result<(bool, String, Duration), String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut cmd = Command::new(exe);
    cmd.env("GPUSHMEM_TEST_CHILD", scenario);
    run_with_timeout(cmd, env, timeout)
}

/// Runs `cmd` with `env`, killed after `timeout`; returns (success, output, elapsed).
pub fn run_with_timeout(
    mut cmd: Command,
    env: &[(&str, &str)],
    timeout: Duration,
) -> Result<(bool, String, Duration), String> {
    // One PE per child process: the queue count the parent chose for its
    // 8-PE thread jobs would only slow the children's context creation.
    cmd.env_remove("CUDA_DEVICE_MAX_CONNECTIONS");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out_path = std::env::temp_dir().join(format!("gpushmem-child-{}-{}.log", std::process::id(), rand_tag()));
    let f = std::fs::File::create(&out_path).map_err(|e| e.to_string())?;
    cmd.stdout(f.try_clone().map_err(|e| e.to_string())?).stderr(f).stdin(std::process::Stdio::null());
    let start = Instant::now();
    let mut child = cmd.spawn().map_err(|e| format!("spawning {cmd:?}: {e}"))?;
    let status = loop {
        if let Some(s) = child.try_wait().map_err(|e| e.to_string())? {
            break s;
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            let text = std::fs::read_to_string(&out_path).unwrap_or_default();
            return Err(format!("{cmd:?} did not end within {timeout:?} (a hang). Output:\n{text}"));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut text = std::fs::read_to_string(&out_path).unwrap_or_default();
    let _ = std::fs::remove_file(&out_path);
    if !status.success() {
        // A job that died without a word (a device crash) still says how it ended.
        text.push_str(&format!("[{} ended: {status}]\n", cmd.get_program().to_string_lossy()));
    }
    Ok((status.success(), text, start.elapsed()))
}

fn rand_tag() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

fn expect_child(scenario: &str, env: &[(&str, &str)], needles: &[&str]) -> TestResult {
    let (_, text, took) = child(scenario, env, Duration::from_secs(60))?;
    for n in needles {
        if !text.contains(n) {
            return Err(format!("{scenario}: expected {n:?} in its output:\n{text}").into());
        }
    }
    println!(
        "  {scenario} ({took:.1?}): {}",
        text.lines().filter(|l| l.contains("gpushmem")).take(3).collect::<Vec<_>>().join(" | ")
    );
    Ok(())
}

/// Debug checks on: `p` to PE 5 of a 1-PE job traps with a message naming the call and the PE.
pub fn device_pe_check_traps() -> TestResult {
    expect_child(
        "debug_pe_check",
        &[("GPUSHMEM_DEBUG_CHECKS", "1")],
        &["p: PE 5 out of range (n_pes = 1)", "HOST-SAW-ERROR"],
    )
}

/// Debug checks on: `p` to an address outside the heap traps naming the call and the address.
pub fn device_heap_check_traps() -> TestResult {
    expect_child(
        "debug_heap_check",
        &[("GPUSHMEM_DEBUG_CHECKS", "1")],
        &["p: address 0x", "is outside the symmetric heap", "HOST-SAW-ERROR"],
    )
}

/// Debug checks on: `p` of a `u32` at a misaligned address traps naming the call, the address and the alignment.
pub fn device_misaligned_traps() -> TestResult {
    expect_child(
        "debug_misaligned",
        &[("GPUSHMEM_DEBUG_CHECKS", "1")],
        &["p: address 0x", "is not aligned to 4 bytes", "HOST-SAW-ERROR"],
    )
}

/// A wait whose flag never comes ends with the timeout message, not a hang.
pub fn device_wait_times_out() -> TestResult {
    expect_child(
        "wait_timeout",
        &[("GPUSHMEM_TIMEOUT", "1")],
        &["wait_forever timed out after 1000 ms", "last seen 0", "HOST-SAW-ERROR"],
    )
}

/// PE 1 never starts: PE 0's init fails with a timeout naming PE 1.
pub fn bootstrap_missing_pe() -> TestResult {
    let sock = std::env::temp_dir().join(format!("gpushmem-missing-{}.sock", rand_tag()));
    let sock = sock.to_string_lossy().into_owned();
    expect_child(
        "init_only",
        &[
            ("GPUSHMEM_RANK", "0"),
            ("GPUSHMEM_SIZE", "2"),
            ("GPUSHMEM_LOCAL_RANK", "0"),
            ("GPUSHMEM_LOCAL_SIZE", "2"),
            ("GPUSHMEM_BOOTSTRAP", &sock),
            ("GPUSHMEM_BOOTSTRAP_TIMEOUT", "2"),
        ],
        &["timed out", "[1]", "HOST-SAW-ERROR"],
    )
}

/// The launcher binary: `GPUSHMEM_RUN`, else beside this test binary or one folder up.
pub fn launcher() -> Result<std::path::PathBuf, String> {
    if let Some(p) = std::env::var_os("GPUSHMEM_RUN") {
        return Ok(p.into());
    }
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    exe.ancestors()
        .skip(1)
        .take(3)
        .map(|d| d.join("gpushmem-run"))
        .find(|p| p.is_file())
        .ok_or_else(|| format!("gpushmem-run not found near {} (set GPUSHMEM_RUN)", exe.display()))
}

/// `gpushmem-run -n N -- <this test binary>` running `scenario` in every PE.
pub fn launch_processes(
    n: usize,
    scenario: &str,
    env: &[(&str, &str)],
    timeout: Duration,
) -> Result<(bool, String, Duration), String> {
    launch_processes_with(n, scenario, env, &["--grace", "5"], timeout)
}

/// [`launch_processes`] with the launcher options `launcher_args`.
pub fn launch_processes_with(
    n: usize,
    scenario: &str,
    env: &[(&str, &str)],
    launcher_args: &[&str],
    timeout: Duration,
) -> Result<(bool, String, Duration), String> {
    let mut cmd = Command::new(launcher()?);
    // GPUSHMEM_TEST_LAUNCHER_ARGS: more launcher options for every job of the
    // suite, e.g. "--simulate-nodes 2 --same-hostname" (docs/multinode.md).
    let extra = std::env::var("GPUSHMEM_TEST_LAUNCHER_ARGS").unwrap_or_default();
    cmd.args(["-n", &n.to_string()]).args(launcher_args).args(extra.split_whitespace()).arg("--");
    cmd.arg(std::env::current_exe().map_err(|e| e.to_string())?);
    cmd.env("GPUSHMEM_TEST_CHILD", scenario);
    // Every process must draw the same random data.
    cmd.env("GPUSHMEM_TEST_SEED", seed().to_string());
    run_with_timeout(cmd, env, timeout)
}

/// A PE process killed with SIGKILL: the launcher names it and ends the job; nothing hangs.
pub fn killed_pe_is_reported() -> TestResult {
    let (ok, text, took) = launch_processes(
        2,
        "kill_pe1",
        &[("GPUSHMEM_TIMEOUT", "5"), ("GPUSHMEM_BOOTSTRAP_TIMEOUT", "10")],
        Duration::from_secs(90),
    )?;
    if ok || !text.contains("PE 1") || !text.contains("signal 9") {
        return Err(format!("expected the launcher to fail naming PE 1 and signal 9 (ok={ok}):\n{text}").into());
    }
    println!(
        "  job ended in {took:.1?}: {}",
        text.lines().filter(|l| l.contains("gpushmem-run")).collect::<Vec<_>>().join(" | ")
    );
    Ok(())
}

/// Ring and all-to-all, every variant, with PEs as processes through gpushmem-run.
pub fn processes_ring_alltoall(n: usize) -> TestResult {
    let (ok, text, took) =
        launch_processes(n, "ring_processes", &[("GPUSHMEM_SYMMETRIC_SIZE", "160m")], Duration::from_secs(150))?;
    if !ok {
        return Err(format!("{n} processes failed:\n{text}").into());
    }
    println!("  {n} processes: passed in {took:.1?}");
    Ok(())
}

/// Runs the test `name` with `n` PE processes through gpushmem-run (each process is one PE of it).
pub fn run_test_in_processes(name: &str, n: usize) -> TestResult {
    let scenario = format!("run-test:{name}");
    // A job that outlives the PEs' own device waits is a hang (longer limit under the sanitizer).
    let limit = Duration::from_secs(150.max(device_wait_s() + 60));
    let (ok, text, took) = launch_processes(n, &scenario, &[(IN_JOB, "1")], limit)?;
    if !ok {
        return Err(format!("{name} with {n} processes failed:\n{text}").into());
    }
    let figures: Vec<&str> = text.lines().filter(|l| l.starts_with("  ")).take(2).collect();
    println!("  {name}, {n} processes, {took:.1?}: {}", figures.join(" | ").trim());
    Ok(())
}
