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
//! process [`GRACE`] to end and then ends it with `_exit`, saying why.

use std::sync::{Condvar, Mutex, Once};
use std::time::Duration;

/// How long an exiting process may take before the watchdog ends it.
pub const GRACE: Duration = Duration::from_secs(10);

/// Exit status of a process the watchdog ends.
pub const EXIT_CODE: i32 = 70;

static EXITING: (Mutex<bool>, Condvar) = (Mutex::new(false), Condvar::new());

extern "C" fn on_exit() {
    let (lock, cv) = &EXITING;
    *lock.lock().unwrap_or_else(|p| p.into_inner()) = true;
    cv.notify_all();
}

/// Installs the watchdog, once per process: from then on an `exit` that has not
/// ended the process after `grace` ends it with status [`EXIT_CODE`].
pub fn install(grace: Duration) {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let spawned = std::thread::Builder::new().name("gpushmem-exit-guard".into()).spawn(move || {
            let (lock, cv) = &EXITING;
            let mut exiting = lock.lock().unwrap_or_else(|p| p.into_inner());
            while !*exiting {
                exiting = cv.wait(exiting).unwrap_or_else(|p| p.into_inner());
            }
            drop(exiting);
            std::thread::sleep(grace);
            let msg = format!(
                "gpushmem: this process called exit() {grace:?} ago and has not ended: a kernel is still running, \
                 most likely waiting inside NVSHMEM's device code for its proxy thread, which ended the process \
                 (NVSHMEM's error above says why); ending it now with status {EXIT_CODE}\n"
            );
            // SAFETY: writes a live buffer to stderr, then ends the process at once: the
            // teardown that is stuck is exactly what must not run.
            unsafe {
                libc::write(2, msg.as_ptr().cast(), msg.len());
                libc::_exit(EXIT_CODE);
            }
        });
        match spawned {
            // SAFETY: registers a handler that only sets a flag and signals a condition variable.
            Ok(_) => unsafe {
                libc::atexit(on_exit);
            },
            Err(e) => log::warn!("no exit watchdog (cannot start its thread: {e}): a stuck exit would hang"),
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
        assert_eq!(out.status.code(), Some(EXIT_CODE), "{err}");
        assert!(err.contains("has not ended") && err.contains("NVSHMEM"), "{err}");
        assert!(t0.elapsed() < Duration::from_secs(20), "took {:?}", t0.elapsed());
    }
}
