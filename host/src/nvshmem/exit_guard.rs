//! A bound on how long a process of the NVSHMEM engine may take to exit.
//!
//! NVSHMEM's proxy thread ends the process with `exit(-1)` when a transport
//! fails it (seen: `process_channel_amo: aborting` over UCX without GDRCopy).
//! A kernel may then be waiting, inside NVSHMEM's device code, for the
//! proxy's answer (an atomic's fetched value): a wait gpushmem does not own,
//! so its device timeout cannot end it. `exit` then runs the CUDA runtime's
//! teardown, which waits for that kernel, for ever: the process neither works
//! nor ends, and the launcher waits for it.
//!
//! So once `exit` starts (an `atexit` handler registered after NVSHMEM's
//! init, hence run before the CUDA runtime's own), a watchdog thread gives the
//! process [`GRACE`] (or `GPUSHMEM_EXIT_TIMEOUT` seconds; `0`: no watchdog) to
//! end, and then ends it with `_exit` and the status `exit` was given, saying why.

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

    #[test]
    fn exit_that_never_ends_is_ended_after_the_grace() {
        let t0 = Instant::now();
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "nvshmem::exit_guard::tests::child_with_a_stuck_exit", "--ignored", "--nocapture"])
            .env(CHILD, "1")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        // The status exit() was given (glibc's on_exit tells it).
        assert_eq!(out.status.code(), Some(if cfg!(target_env = "gnu") { 3 } else { EXIT_CODE }), "{err}");
        assert!(err.contains("has not ended") && err.contains("NVSHMEM"), "{err}");
        assert!(t0.elapsed() < Duration::from_secs(20), "took {:?}", t0.elapsed());
    }
}
