//! Bounds on NVSHMEM calls that a process cannot get out of: its init, and
//! its exit.
//!
//! NVSHMEM's proxy thread stops serving when a transport fails it (seen:
//! `process_channel_amo: aborting` over UCX without GDRCopy, during
//! `nvshmemx_hostlib_init_attr`), and in places ends the process with
//! `exit(-1)`. The thread that waits for the proxy (init's own exchanges, or
//! a kernel waiting inside NVSHMEM's device code for an atomic's fetched value)
//! then waits for ever: a wait gpushmem does not own, so neither its bootstrap
//! timeout nor its device timeout can end it, and the launcher waits too.
//!
//! - [`bounded`] runs such a call with a watchdog thread that ends the process
//!   (saying what was stuck) when the call has not returned in time.
//! - [`install`]: once `exit` starts (an `atexit` handler registered before
//!   NVSHMEM's init completes, hence run before the CUDA runtime's own
//!   teardown, which waits for a running kernel), a watchdog gives the process
//!   [`GRACE`] (or `GPUSHMEM_EXIT_TIMEOUT` seconds; `0`: no watchdog) to end,
//!   and then ends it with `_exit` and the status `exit` was given, saying why.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::Once;
use std::time::Duration;

/// How long an exiting process may take before the watchdog ends it, unless
/// `GPUSHMEM_EXIT_TIMEOUT` says otherwise (seconds; `0`: never).
pub const GRACE: Duration = Duration::from_secs(30);

/// Exit status of a process the watchdog ends when the status `exit` was
/// given is unknown.
pub const EXIT_CODE: i32 = 70;

/// The status `exit` was called with (glibc's `on_exit` tells), else [`EXIT_CODE`].
static STATUS: AtomicI32 = AtomicI32::new(EXIT_CODE);
/// The write end of the watchdog's pipe, once installed (`u64::MAX`: none).
static WAKE: AtomicU64 = AtomicU64::new(u64::MAX);

/// Arms the watchdog. Async-signal-safe and lock-free: `exit` may be called
/// from any thread, or in a child that `fork` made while another thread held a lock.
fn arm(status: i32) {
    STATUS.store(status, Ordering::SeqCst);
    let fd = WAKE.load(Ordering::SeqCst);
    if fd != u64::MAX {
        // SAFETY: writes one byte from a live buffer to a pipe this process keeps open.
        unsafe { libc::write(fd as i32, b"x".as_ptr().cast(), 1) };
    }
}

#[cfg(target_env = "gnu")]
extern "C" fn on_exit_status(status: libc::c_int, _: *mut libc::c_void) {
    arm(status);
}

#[cfg(target_env = "gnu")]
extern "C" {
    // glibc: like `atexit`, with the status `exit` was given.
    fn on_exit(f: extern "C" fn(libc::c_int, *mut libc::c_void), arg: *mut libc::c_void) -> libc::c_int;
}

#[cfg(not(target_env = "gnu"))]
extern "C" fn on_exit_plain() {
    arm(EXIT_CODE);
}

/// Runs `f`, a call into NVSHMEM that cannot be interrupted, and ends the
/// process with [`EXIT_CODE`], saying on stderr that `what` was stuck and what
/// sets the bound (`knob`), if it has not returned after `limit`. Ending the
/// process is the only way out: the stuck thread is inside NVSHMEM.
pub fn bounded<T>(what: &str, limit: Duration, knob: &str, f: impl FnOnce() -> T) -> T {
    let (done, wait) = std::sync::mpsc::channel::<()>();
    let msg = format!(
        "gpushmem: {what} has not returned after {limit:?}: NVSHMEM is stuck (most likely its proxy thread \
         stopped: NVSHMEM's own error above says why); ending this process ({knob} sets this bound)\n"
    );
    let watcher = std::thread::Builder::new().name("gpushmem-call-guard".into()).spawn(move || {
        if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = wait.recv_timeout(limit) {
            // SAFETY: writes a live buffer to stderr, then ends the process at once:
            // nothing can be torn down while a thread is stuck inside NVSHMEM.
            unsafe {
                libc::write(2, msg.as_ptr().cast(), msg.len());
                libc::_exit(EXIT_CODE);
            }
        }
    });
    if let Err(e) = &watcher {
        log::warn!("no watchdog for {what} (cannot start its thread: {e}): a stuck call would hang");
    }
    let result = f();
    // Disconnects the channel: the watcher returns at once.
    drop(done);
    if let Ok(w) = watcher {
        let _ = w.join();
    }
    result
}

/// The grace `GPUSHMEM_EXIT_TIMEOUT` sets (seconds, `0`: no watchdog), else `default`.
pub fn grace_from_env(default: Duration) -> Option<Duration> {
    match std::env::var("GPUSHMEM_EXIT_TIMEOUT").ok().and_then(|v| v.trim().parse::<f64>().ok()) {
        Some(0.0) => None,
        Some(s) if s.is_finite() && s > 0.0 => Some(Duration::from_secs_f64(s)),
        _ => Some(default),
    }
}

/// Installs the watchdog, once per process: from then on an `exit` that has
/// not ended the process after `grace` ends it with the status `exit` was
/// given (glibc), saying why on stderr.
pub fn install(grace: Duration) {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: pipe2 writes two descriptors into a live array of two.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            log::warn!("no exit watchdog (no pipe: {}): a stuck exit would hang", std::io::Error::last_os_error());
            return;
        }
        // SAFETY: both descriptors are fresh and ours; the write end stays open for the process's life.
        let (rx, tx) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let spawned = std::thread::Builder::new().name("gpushmem-exit-guard".into()).spawn(move || {
            let mut b = [0u8; 1];
            // Blocks until `exit` arms it (EINTR: try again).
            // SAFETY: reads into a live one-byte buffer from our pipe.
            while unsafe { libc::read(rx.as_raw_fd(), b.as_mut_ptr().cast(), 1) } != 1 {}
            log::debug!("exit({}) called: the process ends within {grace:?}", STATUS.load(Ordering::SeqCst));
            std::thread::sleep(grace);
            let status = STATUS.load(Ordering::SeqCst);
            let msg = format!(
                "gpushmem: this process called exit({status}) {grace:?} ago and has not ended: a kernel is still \
                 running, most likely waiting inside NVSHMEM's device code for its proxy thread, which ended the \
                 process (NVSHMEM's error above says why); ending it now (GPUSHMEM_EXIT_TIMEOUT sets this bound)\n"
            );
            // SAFETY: writes a live buffer to stderr, then ends the process at once: the
            // teardown that is stuck is exactly what must not run.
            unsafe {
                libc::write(2, msg.as_ptr().cast(), msg.len());
                libc::_exit(status);
            }
        });
        if let Err(e) = spawned {
            log::warn!("no exit watchdog (cannot start its thread: {e}): a stuck exit would hang");
            return;
        }
        WAKE.store(tx.as_raw_fd() as u64, Ordering::SeqCst);
        log::debug!("exit watchdog installed: an exit that has not ended the process after {grace:?} is ended");
        std::mem::forget(tx);
        // SAFETY: registers a handler that only stores an integer and writes one byte to a pipe.
        #[cfg(target_env = "gnu")]
        unsafe {
            on_exit(on_exit_status, std::ptr::null_mut());
        }
        // SAFETY: as above.
        #[cfg(not(target_env = "gnu"))]
        unsafe {
            libc::atexit(on_exit_plain);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    const CHILD: &str = "GPUSHMEM_EXIT_GUARD_CHILD";

    extern "C" fn stuck_teardown() {
        // What the CUDA runtime's teardown does behind a kernel that never ends.
        loop {
            std::thread::sleep(Duration::from_secs(1));
        }
    }

    /// Run as a child by the test below: an exit whose teardown never ends.
    #[test]
    #[ignore = "run as a child process by exit_that_never_ends_is_ended_after_the_grace"]
    fn child_with_a_stuck_exit() {
        if std::env::var_os(CHILD).is_none() {
            return;
        }
        // SAFETY: registers a handler (run after the watchdog's, registered later).
        unsafe { libc::atexit(stuck_teardown) };
        install(Duration::from_millis(300));
        std::process::exit(3);
    }

    /// Run as a child by the test below: a call that never returns.
    #[test]
    #[ignore = "run as a child process by a_call_that_never_returns_is_ended"]
    fn child_with_a_stuck_call() {
        if std::env::var_os(CHILD).is_none() {
            return;
        }
        bounded("stuck_call", Duration::from_millis(300), "TEST_KNOB", || loop {
            std::thread::sleep(Duration::from_secs(1));
        });
    }

    /// Runs the ignored test `child` of this module as a child process: its
    /// exit status and stderr, after checking it ended within 20 s.
    fn run_child(child: &str) -> (Option<i32>, String) {
        let t0 = Instant::now();
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", &format!("nvshmem::exit_guard::tests::{child}"), "--ignored", "--nocapture"])
            .env(CHILD, "1")
            .output()
            .unwrap();
        assert!(t0.elapsed() < Duration::from_secs(20), "{child} took {:?}", t0.elapsed());
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    }

    #[test]
    fn a_call_that_never_returns_is_ended() {
        let (code, err) = run_child("child_with_a_stuck_call");
        assert_eq!(code, Some(EXIT_CODE), "{err}");
        assert!(err.contains("stuck_call has not returned") && err.contains("TEST_KNOB"), "{err}");
        // A call that returns in time is not ended.
        assert_eq!(bounded("quick", Duration::from_secs(30), "K", || 7), 7);
    }

    #[test]
    fn exit_that_never_ends_is_ended_after_the_grace() {
        let (code, err) = run_child("child_with_a_stuck_exit");
        // The status exit() was given (glibc's on_exit tells it).
        assert_eq!(code, Some(if cfg!(target_env = "gnu") { 3 } else { EXIT_CODE }), "{err}");
        assert!(err.contains("has not ended") && err.contains("NVSHMEM"), "{err}");
    }
}
