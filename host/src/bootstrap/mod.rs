//! Bootstrap: the out-of-band exchange PEs use before and beside the GPU
//! (heap handles, collective-call checks, host barriers).
//!
//! - [`threads::ThreadsBootstrap`]: PEs as threads of one process, in memory.
//! - [`socket::SocketBootstrap`]: one process per PE, over a Unix-domain socket
//!   (PE 0 serves, the others connect), as set up by `gpushmem-run` or an
//!   MPI/Slurm launcher ([`env::LaunchEnv`]).
//!
//! Only processes of this user that know the job's secret can join
//! ([`auth`]), and the default meeting place is a private directory
//! (module `rendezvous`: `gpushmem` in this user's runtime directory,
//! `$XDG_RUNTIME_DIR` or `/run/user/<uid>`, else `$TMPDIR/gpushmem-<uid>`;
//! mode 0700).
//!
//! Every wait has a timeout ([`crate::Config::bootstrap_timeout`]), connecting
//! included, and its error names the PEs that did not arrive; every message is
//! bounded ([`socket::MAX_CONTRIBUTION`]).

pub mod address;
pub mod auth;
mod conn;
pub mod env;
pub mod node;
pub(crate) mod rendezvous;
pub mod socket;
mod tcp;
pub mod threads;
mod unix;

use crate::Result;

/// Collective out-of-band operations over all PEs of a job.
pub trait Bootstrap: Send + Sync {
    /// This PE's number.
    fn rank(&self) -> usize;
    /// Number of PEs.
    fn size(&self) -> usize;
    /// Every PE contributes `mine`; returns all contributions in PE order.
    /// Contributions may differ in length; over a socket they are at most
    /// [`socket::MAX_CONTRIBUTION`] bytes each.
    fn allgather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>>;
    /// Returns once every PE has called it.
    fn barrier(&self) -> Result<()> {
        self.allgather(&[]).map(|_| ())
    }
    /// Tells the other PEs that this one failed, so that their waits end with
    /// [`crate::Error::PeerFailed`] rather than a timeout (best effort).
    fn abort(&self, why: &str);
}
