//! `gpushmem-run`, driven as a user would: shell one-liners as PEs, and this
//! test binary itself as PEs that bootstrap over the launcher's socket.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const RUN: &str = env!("CARGO_BIN_EXE_gpushmem-run");

/// A fresh directory of this test's own, for the PEs to write into; removed when dropped.
struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn scratch(test: &str) -> Scratch {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!("gpushmem-launcher-test-{}-{test}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    Scratch(d)
}

/// Runs the launcher with `args`, `OUT` set to `out` for the PEs; returns its output and run time.
fn launch(args: &[&str], out: &Path) -> (Output, Duration) {
    let t0 = Instant::now();
    let o = Command::new(RUN).args(args).env("OUT", out).stdin(Stdio::null()).output().unwrap();
    (o, t0.elapsed())
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn pes_get_their_environment() {
    let out = scratch("env");
    let script = r#"echo "$GPUSHMEM_RANK $GPUSHMEM_SIZE $GPUSHMEM_LOCAL_RANK $GPUSHMEM_LOCAL_SIZE" \
            "$GPUSHMEM_DEVICE $NVSHMEM_DISABLE_NVLS $NCCL_NVLS_ENABLE" > "$OUT/$GPUSHMEM_RANK"
        test -d "$(dirname "$GPUSHMEM_BOOTSTRAP")" && echo "$GPUSHMEM_BOOTSTRAP" > "$OUT/socket.$GPUSHMEM_RANK"
        read line && echo "stdin was not empty" >&2; exit 0"#;
    let (o, _) = launch(&["-n", "3", "--gpus", "4,5", "--", "sh", "-c", script], &out);
    assert!(o.status.success(), "{o:?}");
    let mut sockets = Vec::new();
    for rank in 0..3 {
        let line = std::fs::read_to_string(out.join(rank.to_string())).unwrap();
        let device = [4, 5][rank % 2];
        assert_eq!(line.trim(), format!("{rank} 3 {rank} 3 {device} 1 0"));
        sockets.push(std::fs::read_to_string(out.join(format!("socket.{rank}"))).unwrap());
    }
    assert!(sockets.iter().all(|s| s == &sockets[0]), "{sockets:?}");
    assert!(!Path::new(sockets[0].trim()).parent().unwrap().exists(), "the launcher's temp directory is left");
    assert!(!stderr(&o).contains("stdin"), "{}", stderr(&o));

    // Spelling variants; no --gpus: no device; NVLS settings the user made are kept.
    let out = scratch("env2");
    let t0 = Instant::now();
    let o = Command::new(RUN)
        .args(["--np=2", "sh", "-c", r#"echo "${GPUSHMEM_DEVICE-none} $NCCL_NVLS_ENABLE" > "$OUT/$GPUSHMEM_RANK""#])
        .env("OUT", &*out)
        .env("NCCL_NVLS_ENABLE", "1")
        .env_remove("GPUSHMEM_DEVICE")
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    for rank in 0..2 {
        assert_eq!(std::fs::read_to_string(out.join(rank.to_string())).unwrap().trim(), "none 1");
    }
    assert!(t0.elapsed() < Duration::from_secs(5));
}

#[test]
fn killed_pe_ends_the_job() {
    let out = scratch("kill");
    let script = r#"if [ "$GPUSHMEM_RANK" = 1 ]; then kill -9 $$; fi; sleep 30"#;
    let (o, took) = launch(&["-n", "3", "--", "sh", "-c", script], &out);
    let err = stderr(&o);
    assert!(err.contains("PE 1") && err.contains("signal 9") && err.contains("SIGKILL"), "{err}");
    assert_eq!(o.status.code(), Some(128 + 9), "{err}");
    assert!(took < Duration::from_secs(10), "the sleeping PEs were not ended: took {took:?}");
}

#[test]
fn pe_ignoring_sigterm_is_killed_after_the_grace_period() {
    let out = scratch("grace");
    // PE 0 fails only once PE 1 ignores SIGTERM.
    let script = r#"if [ "$GPUSHMEM_RANK" = 0 ]; then
            while [ ! -e "$OUT/ready" ]; do sleep 0.02; done; exit 5
        fi
        trap '' TERM; touch "$OUT/ready"; sleep 30"#;
    let (o, took) = launch(&["-n", "2", "--grace", "0.5", "--", "sh", "-c", script], &out);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(5), "{err}");
    assert!(err.contains("PE 0") && err.contains("exited with status 5"), "{err}");
    assert!(err.contains("PE 1") && err.contains("sending SIGKILL"), "{err}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
}

#[test]
fn wait_others_lets_survivors_end_on_their_own() {
    let out = scratch("wait-others");
    // PE 1 dies; PE 0 notices by itself (here: a file check) and fails with its own
    // status; PE 2 never ends and is killed after the grace period.
    let script = r#"case "$GPUSHMEM_RANK" in
        1) kill -9 $$ ;;
        0) sleep 0.3; echo "PE 0 saw its peer gone"; exit 7 ;;
        *) trap '' TERM; sleep 30 ;;
        esac"#;
    let (o, took) = launch(&["-n", "3", "--grace", "1", "--wait-others", "--", "sh", "-c", script], &out);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(128 + 9), "the first failure's status: {err}");
    assert!(err.contains("PE 1") && err.contains("signal 9"), "{err}");
    assert!(err.contains("waiting up to 1 s for the other 2 PE(s)"), "{err}");
    assert!(!err.contains("SIGTERM now"), "no SIGTERM with --wait-others: {err}");
    assert!(err.contains("PE 0") && err.contains("exited with status 7"), "survivor's own failure reported: {err}");
    assert!(err.contains("PE 2") && err.contains("after the first failure; sending SIGKILL"), "{err}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
}

#[test]
fn exit_status_is_propagated() {
    let out = scratch("status");
    let (o, _) = launch(&["-n", "3", "sh", "-c", r#"[ "$GPUSHMEM_RANK" = 2 ] && exit 3; exit 0"#], &out);
    assert_eq!(o.status.code(), Some(3), "{o:?}");
    assert!(stderr(&o).contains("PE 2 (pid"), "{}", stderr(&o));
    assert!(stderr(&o).contains("exited with status 3"), "{}", stderr(&o));

    let (o, _) = launch(&["-n4", "--", "true"], &out);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert!(o.stderr.is_empty(), "{}", stderr(&o));
}

#[test]
fn signals_are_passed_on() {
    let out = scratch("signal");
    let script = r#"touch "$OUT/started.$GPUSHMEM_RANK"; sleep 30"#;
    let t0 = Instant::now();
    let child = Command::new(RUN)
        .args(["-n", "2", "sh", "-c", script])
        .env("OUT", &*out)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    while !(0..2).all(|r| out.join(format!("started.{r}")).exists()) {
        assert!(t0.elapsed() < Duration::from_secs(10), "PEs did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
    // SAFETY: signals the launcher we started.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(128 + libc::SIGTERM), "{}", stderr(&o));
    assert!(stderr(&o).contains("SIGTERM"), "{}", stderr(&o));
    assert!(t0.elapsed() < Duration::from_secs(10), "took {:?}", t0.elapsed());
}

#[test]
fn unknown_program_exits_127() {
    let out = scratch("noprog");
    let (o, _) = launch(&["-n", "2", "--", "gpushmem-no-such-program"], &out);
    assert_eq!(o.status.code(), Some(127));
    assert!(stderr(&o).contains("gpushmem-no-such-program"), "{}", stderr(&o));
}

#[test]
fn bad_usage_exits_2() {
    let out = scratch("usage");
    for args in [
        &[][..],
        &["true"],
        &["-n", "0", "true"],
        &["-n", "x", "true"],
        &["-n"],
        &["-n", "2"],
        &["-n", "2", "--"],
        &["-n", "2", "--gpus", "0,,1", "true"],
        &["-n", "2", "--grace", "-1", "true"],
        &["-n", "2", "--frobnicate", "true"],
    ] {
        let (o, _) = launch(args, &out);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {o:?}");
        // clap's error: what is wrong, and where to read the usage.
        let err = stderr(&o);
        assert!(err.starts_with("error: ") && err.contains("--help"), "{args:?}: {err}");
    }
    let (o, _) = launch(&["--help"], &out);
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stdout).contains("Usage: gpushmem-run -n N"));
}

/// Set for PEs started by [`bootstrap_through_the_launcher`]: where they report.
const CHILD_VAR: &str = "GPUSHMEM_LAUNCHER_TEST_OUT";

/// Runs this test binary as PEs: each reads its `LaunchEnv`, connects the socket
/// bootstrap and allgathers.
fn run_self_as_pes(n: &str, out: &Path, mode: &str) -> (Output, Duration) {
    let exe = std::env::current_exe().unwrap();
    let t0 = Instant::now();
    let o = Command::new(RUN)
        .args(["-n", n, "--"])
        .arg(exe)
        .args(["--exact", "child_pe_entry_point", "--ignored", "--nocapture", "--test-threads=1"])
        .env(CHILD_VAR, out)
        .env("GPUSHMEM_CHILD_MODE", mode)
        .output()
        .unwrap();
    (o, t0.elapsed())
}

/// Not a test by itself: the body of a PE when this binary runs under the
/// launcher (run with `--ignored` by [`run_self_as_pes`]); a plain test run
/// lists it as ignored, so it never counts as a passing test.
#[test]
#[ignore = "helper, not a test: the body of a PE that bootstrap_through_the_launcher starts under gpushmem-run"]
fn child_pe_entry_point() {
    use gpushmem::bootstrap::{env::LaunchEnv, socket::SocketBootstrap, Bootstrap};
    let out = std::env::var_os(CHILD_VAR)
        .expect("child_pe_entry_point is a helper: bootstrap_through_the_launcher runs it under gpushmem-run");
    let env = LaunchEnv::from_env().unwrap().expect("launched PE without a launch environment");
    assert_eq!(env.source, "gpushmem-run");
    let die = std::env::var("GPUSHMEM_CHILD_MODE").as_deref() == Ok("die");
    if die {
        // Outlive the launcher's SIGTERM long enough to report the failure ourselves.
        // SAFETY: sets a signal to be ignored, before any other thread exists.
        unsafe { libc::signal(libc::SIGTERM, libc::SIG_IGN) };
    }
    // Display, not Debug: the launcher test checks the messages users see. Formatted
    // into one string first, so the panic writes it whole and the other PEs' output
    // cannot land inside it (all PEs share the launcher's stderr).
    let fail = |e: gpushmem::Error| -> ! {
        let msg = e.to_string();
        panic!("{msg}")
    };
    let b = SocketBootstrap::connect(&env, Duration::from_secs(20)).unwrap_or_else(|e| fail(e));
    if die && env.rank == 2 {
        std::process::exit(3);
    }
    let all = b.allgather(format!("PE {} of {}", env.rank, env.size).as_bytes()).unwrap_or_else(|e| fail(e));
    let text: Vec<String> = all.iter().map(|v| String::from_utf8_lossy(v).into_owned()).collect();
    std::fs::write(Path::new(&out).join(env.rank.to_string()), text.join(",")).unwrap();
    b.barrier().unwrap();
}

#[test]
fn bootstrap_through_the_launcher() {
    let out = scratch("bootstrap");
    let (o, _) = run_self_as_pes("3", &out, "ok");
    assert!(o.status.success(), "{}", stderr(&o));
    for rank in 0..3 {
        let got = std::fs::read_to_string(out.join(rank.to_string())).unwrap();
        assert_eq!(got, "PE 0 of 3,PE 1 of 3,PE 2 of 3");
    }

    // A PE that exits after connecting fails the others' allgather at once, naming it.
    let out = scratch("bootstrap-die");
    let (o, took) = run_self_as_pes("3", &out, "die");
    let err = stderr(&o);
    assert_ne!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("PE 2 (pid") && err.contains("exited with status 3"), "{err}");
    assert!(err.contains("PE 2 failed or left"), "{err}");
    assert!(took < Duration::from_secs(15), "took {took:?}");
}
