//! Helpers shared by the bootstrap test binaries.
#![allow(dead_code)]

use gpushmem::bootstrap::address::Rendezvous;
use gpushmem::bootstrap::auth::Secret;
use gpushmem::bootstrap::env::LaunchEnv;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

/// The secret of the tests' jobs unless a test says otherwise.
pub const SECRET: &str = "test-secret-0123456789abcdef";

/// A socket path of its own for each test (tests run in parallel).
pub fn socket_path(test: &str) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("gpushmem-test-{}-{test}-{n}.sock", std::process::id()))
}

/// PE `rank` of a `size`-PE job meeting at `path`, with the job secret `secret`.
pub fn env_with(rank: usize, size: usize, path: &Path, secret: Option<&str>) -> LaunchEnv {
    env_at(rank, size, Rendezvous::Unix(path.to_path_buf()), secret)
}

/// PE `rank` of a `size`-PE job (one node's worth of local ranks) meeting at
/// `rendezvous`, with the job secret `secret`.
pub fn env_at(rank: usize, size: usize, rendezvous: Rendezvous, secret: Option<&str>) -> LaunchEnv {
    LaunchEnv {
        rank,
        size,
        local_rank: rank,
        local_size: size,
        device: None,
        rendezvous,
        private_dir: None,
        secret: secret.map(|s| Secret::from_text(s).expect("test secret too short")),
        source: "test",
    }
}

/// PE `rank` of a `size`-PE job meeting at `path`, with the tests' secret.
pub fn env(rank: usize, size: usize, path: &Path) -> LaunchEnv {
    env_with(rank, size, path, Some(SECRET))
}

/// Held by every test of a binary that forks a child, floods a socket or
/// asserts how long something took: such tests run one at a time, so that
/// none eats the CPU another one's timing depends on (CI has 2 cores).
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    // A failed test poisons the lock; the next one need not fail too.
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}
