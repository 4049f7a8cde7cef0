//! The one error type of the host crate.

use std::time::Duration;

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong on the host, with the context to act on it.
///
/// `#[non_exhaustive]`: new causes get their own variant (as
/// [`Error::ArgumentOverflow`] did), so a `match` needs a `_` arm.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No CUDA driver library could be loaded, or it reports no GPU.
    #[error("no CUDA driver/GPU found: {0}")]
    NoGpu(String),
    /// A CUDA driver call failed.
    #[error("CUDA error in {call}: {source}")]
    Cuda {
        /// What was being done.
        call: String,
        /// The driver's error.
        source: cudarc::driver::DriverError,
    },
    /// A setting (environment variable or builder option) has a bad value.
    #[error("bad setting {name}={value:?}: {why}")]
    Config {
        /// The variable or option.
        name: String,
        /// Its value.
        value: String,
        /// What is wrong with it.
        why: String,
    },
    /// A bootstrap wait ran out of time.
    #[error("PE {me}: bootstrap {what} timed out after {timeout:?}; PE(s) {missing:?} did not arrive")]
    BootstrapTimeout {
        /// The PE that waited.
        me: usize,
        /// The operation (allgather, barrier, connect…).
        what: String,
        /// How long it waited.
        timeout: Duration,
        /// The PEs that did not arrive (empty when not known).
        missing: Vec<usize>,
    },
    /// Another PE failed or left, so a collective operation cannot complete.
    #[error("PE {me}: PE {peer} failed or left: {why}")]
    PeerFailed {
        /// The PE that noticed.
        me: usize,
        /// The PE that failed.
        peer: usize,
        /// What is known of it.
        why: String,
    },
    /// The bootstrap's transport failed.
    #[error("PE {me}: bootstrap I/O error during {what}: {source}")]
    BootstrapIo {
        /// The PE.
        me: usize,
        /// What was being done.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The bootstrap refused a rendezvous or a peer: a meeting place others can
    /// control, a process of another user, or one that does not know the
    /// job's secret. Nothing was sent to the refused peer.
    #[error("PE {me}: bootstrap refused {}: {why}", path.display())]
    BootstrapRefused {
        /// The PE.
        me: usize,
        /// The rendezvous path or directory.
        path: std::path::PathBuf,
        /// What is wrong, with the other process's uid and pid where known.
        why: String,
    },
    /// PEs made the same collective call with different arguments.
    #[error("PE {me}: {call} arguments differ across PEs: {detail}")]
    Mismatch {
        /// The PE that noticed (every PE reports it).
        me: usize,
        /// The call.
        call: &'static str,
        /// Each PE's arguments.
        detail: String,
    },
    /// The symmetric heap has no free range of the asked size.
    #[error("symmetric heap exhausted: {requested} bytes (align {align}) asked, largest free range {largest_free} of {heap_size} bytes; raise GPUSHMEM_SYMMETRIC_SIZE")]
    HeapExhausted {
        /// Bytes asked for.
        requested: u64,
        /// Alignment asked for.
        align: u64,
        /// The largest free range.
        largest_free: u64,
        /// The heap's size.
        heap_size: u64,
    },
    /// `free` of an offset that is not the start of a live allocation.
    #[error("free of heap offset {offset:#x}: {why}")]
    BadFree {
        /// The heap offset.
        offset: u64,
        /// Double free, or not an allocation start.
        why: &'static str,
    },
    /// A pointer or range that is not in the symmetric heap.
    #[error("address {addr:#x} (+{len} bytes) is not inside the symmetric heap [{base:#x}, +{size:#x})")]
    NotSymmetric {
        /// The address.
        addr: u64,
        /// The length.
        len: u64,
        /// The heap's base.
        base: u64,
        /// The heap's size.
        size: u64,
    },
    /// A PE number outside `0..n_pes`.
    #[error("PE {pe} out of range (n_pes = {n_pes})")]
    BadPe {
        /// The PE.
        pe: usize,
        /// Number of PEs.
        n_pes: usize,
    },
    /// A module that gpushmem cannot use.
    #[error("module {name}: {why}")]
    Module {
        /// The module's name.
        name: String,
        /// What is wrong.
        why: String,
    },
    /// A launch that cannot be made as asked.
    #[error("launch of {kernel}: {why}")]
    Launch {
        /// The kernel.
        kernel: String,
        /// Why.
        why: String,
    },
    /// The NVSHMEM engine cannot run as asked: its host library is missing or
    /// failed, or the job asks for what NVSHMEM cannot do (PEs as threads).
    #[error("NVSHMEM engine: {why}")]
    Engine {
        /// What is wrong, and what to do.
        why: String,
    },
    /// The CUDA context or stream given to [`crate::Shmem::init_on`] cannot
    /// carry a PE.
    #[error("Shmem::init_on: {why}")]
    Context {
        /// What is wrong, and what to pass instead.
        why: String,
    },
    /// A PE thread panicked (threads mode).
    #[error("PE {pe} panicked: {message}")]
    Panic {
        /// The PE.
        pe: usize,
        /// The panic message.
        message: String,
    },
    /// A host call's arguments give a size, count or offset that does not fit
    /// (a product or sum past `usize`/`u64`, or a value past what the device
    /// ABI holds): rejected before anything is launched or copied, where
    /// unchecked it would have wrapped to a small value (see [`crate::args`]).
    #[error("{call}: arguments out of range ({args}): {why}")]
    ArgumentOverflow {
        /// The public call.
        call: &'static str,
        /// Its arguments, each named with its value.
        args: String,
        /// What does not fit.
        why: String,
    },
}

impl Error {
    /// Puts `context` in front of a CUDA error's description of the call
    /// (what the caller was doing); other errors pass through unchanged.
    pub(crate) fn in_context(self, context: impl FnOnce() -> String) -> Error {
        match self {
            Error::Cuda { call, source } => Error::Cuda { call: format!("{}: {call}", context()), source },
            other => other,
        }
    }
}

/// A driver error from the application's own cudarc calls (CUDA events,
/// streams, copies), so that `?` works in functions returning
/// [`Result`]; the call is recorded as "a cudarc call of the application".
/// Inside gpushmem every driver error names its call instead.
impl From<cudarc::driver::DriverError> for Error {
    fn from(source: cudarc::driver::DriverError) -> Error {
        Error::Cuda { call: "a cudarc call of the application".into(), source }
    }
}

/// Wraps a driver error with the call it came from.
pub(crate) trait CudaContext<T> {
    /// Adds the call's description.
    fn cuda(self, call: impl Into<String>) -> Result<T>;
}

impl<T> CudaContext<T> for std::result::Result<T, cudarc::driver::DriverError> {
    fn cuda(self, call: impl Into<String>) -> Result<T> {
        self.map_err(|source| Error::Cuda { call: call.into(), source })
    }
}
