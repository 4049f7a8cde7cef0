//! PEs as threads of one process (NVSHMEM cannot do this): on one GPU this
//! is how PEs run concurrently (kernels of different processes on one GPU
//! only time-slice), and on several GPUs it needs no launcher.

use crate::bootstrap::{threads::ThreadsBootstrap, Bootstrap};
use crate::error::CudaContext as _;
use crate::shmem::Gpu;
use crate::{args, driver, Config, Error, Result, Shmem};
use cudarc::driver::CudaContext;
use std::sync::Arc;

/// A job of `n` PEs as threads of this process.
///
/// ```no_run
/// let results = gpushmem::Threads::new(4).run(|shmem| Ok(shmem.my_pe()))?;
/// assert_eq!(results, vec![0, 1, 2, 3]);
/// # Ok::<(), gpushmem::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Threads {
    n: usize,
    config: Option<Config>,
    devices: Option<Vec<usize>>,
    contexts: Option<Vec<Arc<CudaContext>>>,
    under_launcher: bool,
}

impl Threads {
    /// `n` PEs; PE k runs on GPU `k % device_count` unless [`Threads::devices`] says otherwise.
    pub fn new(n: usize) -> Self {
        Threads { n, config: None, devices: None, contexts: None, under_launcher: false }
    }

    /// Settings for every PE (default: [`Config::from_env`]).
    pub fn config(mut self, config: Config) -> Self {
        self.config = Some(config);
        self
    }

    /// GPU ordinal of each PE (index = PE; a shorter list wraps around).
    /// An empty list, or an ordinal that is not a GPU of this machine, makes
    /// [`Threads::run`] fail with [`Error::Config`] naming `Threads::devices`.
    pub fn devices(mut self, devices: Vec<usize>) -> Self {
        self.devices = Some(devices);
        self
    }

    /// The program's own CUDA contexts (e.g. candle's): PE k runs on
    /// `contexts[k % len]`, on a stream of its own made there (its
    /// [`Shmem::stream`]), instead of on the GPU's primary context that
    /// gpushmem retains itself. Replaces [`Threads::devices`] (each context's
    /// GPU is the PE's); an empty list, or both given, makes [`Threads::run`]
    /// fail with [`Error::Config`].
    pub fn contexts(mut self, contexts: Vec<Arc<CudaContext>>) -> Self {
        self.contexts = Some(contexts);
        self
    }

    /// Lets [`Threads::run`] start in a process that a launcher started as one
    /// rank of several (default: refused, see there): each rank then runs
    /// a `Threads` job of its own, independent of the other ranks'.
    pub fn allow_under_launcher(mut self, yes: bool) -> Self {
        self.under_launcher = yes;
        self
    }

    /// Runs `f` on every PE, each in its own thread with its own [`Shmem`],
    /// and returns the results in PE order. When one PE fails (error or
    /// panic) the others' bootstrap waits end at once; the error returned is
    /// the first PE's own failure (not the others' "peer failed").
    ///
    /// # Errors
    /// Before the driver is asked anything, [`Error::Config`] for a job of 0
    /// PEs or of more than [`crate::abi::MAX_PES`], an empty device or
    /// context list, or both lists,
    /// and for a process that a launcher (`gpushmem-run`, `mpirun`, `srun`, …)
    /// started as one rank of several ([`crate::launched`]): every rank would
    /// start its own, independent job — such a program wants [`Shmem::init`]
    /// (unless [`Threads::allow_under_launcher`]);
    /// then [`Error::NoGpu`] without a GPU, [`Error::Config`] for a device
    /// ordinal this machine does not have ([`crate::args::pe_devices`]), and
    /// the first PE's own error.
    pub fn run<T, F>(self, f: F) -> Result<Vec<T>>
    where
        T: Send,
        F: Fn(&Shmem) -> Result<T> + Sync,
    {
        crate::logging::init();
        // The arguments first: before the driver is asked anything.
        args::job_size("Threads::new", self.n)?;
        args::device_list(self.devices.as_deref())?;
        if !self.under_launcher {
            if let Ok(Some(env)) = crate::bootstrap::env::LaunchEnv::from_env() {
                if env.size > 1 {
                    return Err(Error::Config {
                        name: "Threads::run".into(),
                        value: format!("{} PEs as threads", self.n),
                        why: format!(
                            "this process is rank {} of {} of a {} launch, so every rank would start its own \
                             independent Threads job: call Shmem::init in a launched process (see \
                             gpushmem::launched), or Threads::allow_under_launcher(true) for one job per rank",
                            env.rank, env.size, env.source
                        ),
                    });
                }
            }
        }
        let config = match self.config {
            Some(c) => c,
            None => Config::from_env()?,
        };
        if config.engine == crate::Engine::Nvshmem {
            return Err(Error::Engine {
                why: "PEs as threads cannot run on the NVSHMEM engine (NVSHMEM has one PE per process): start one \
                      process per PE (gpushmem-run, mpirun, srun), or use GPUSHMEM_ENGINE=native"
                    .into(),
            });
        }
        if let Some(c) = self.contexts.as_ref().filter(|c| c.is_empty() || self.devices.is_some()) {
            return Err(Error::Config {
                name: "Threads::contexts".into(),
                value: format!("{} context(s)", c.len()),
                why: if c.is_empty() {
                    "the list is empty: give at least one context".into()
                } else {
                    "Threads::devices is given too: the contexts name the PEs' GPUs, give one or the other".into()
                },
            });
        }
        let n_dev = driver::device_count()?;
        let device_of = match &self.contexts {
            None => args::pe_devices(self.n, self.devices.as_deref(), n_dev)?,
            Some(c) => (0..self.n).map(|pe| c[pe % c.len()].ordinal()).collect(),
        };
        let most_on_one_gpu = (0..n_dev).map(|g| device_of.iter().filter(|&&d| d == g).count()).max();
        driver::reserve_queues(most_on_one_gpu.unwrap_or(self.n))?;
        let boots = ThreadsBootstrap::group(self.n, config.bootstrap_timeout);
        let outcomes: Vec<Result<T>> = std::thread::scope(|scope| {
            let handles: Vec<_> = boots
                .into_iter()
                .enumerate()
                .map(|(pe, boot)| {
                    let device = device_of[pe];
                    let ctx = self.contexts.as_ref().map(|c| c[pe % c.len()].clone());
                    let config = config.clone();
                    let f = &f;
                    std::thread::Builder::new()
                        .name(format!("gpushmem-pe{pe}"))
                        .spawn_scoped(scope, move || {
                            let guard = boot.clone();
                            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                                let gpu = match ctx {
                                    Some(ctx) => {
                                        let stream = ctx.new_stream().cuda("cuStreamCreate (Threads::contexts)")?;
                                        Some(Gpu { ctx, stream })
                                    }
                                    None => None,
                                };
                                let shmem = Shmem::init_on_gpu(Box::new(boot), config, Some(device), pe, gpu)?;
                                let out = f(&shmem);
                                if out.is_err() {
                                    // Others may wait in a collective for us: release them now.
                                    shmem.bootstrap().abort("its function returned an error");
                                }
                                let out = out?;
                                shmem.finalize()?;
                                Ok(out)
                            }));
                            match r {
                                Ok(r) => r,
                                Err(p) => {
                                    let message = p
                                        .downcast_ref::<&str>()
                                        .map(|s| s.to_string())
                                        .or_else(|| p.downcast_ref::<String>().cloned())
                                        .unwrap_or_else(|| "non-string panic".into());
                                    guard.abort(&format!("panicked: {message}"));
                                    Err(Error::Panic { pe, message })
                                }
                            }
                        })
                        .expect("spawning a PE thread")
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("PE thread result")).collect()
        });
        // Report the root cause: a PE's own error before the others' "peer failed".
        let mut results = Vec::with_capacity(outcomes.len());
        let mut cause: Option<Error> = None;
        for r in outcomes {
            match r {
                Ok(v) => results.push(v),
                Err(e) => {
                    let is_echo = matches!(e, Error::PeerFailed { .. });
                    if cause.as_ref().is_none_or(|c| matches!(c, Error::PeerFailed { .. }) && !is_echo) {
                        cause = Some(e);
                    }
                }
            }
        }
        match cause {
            Some(e) => Err(e),
            None => Ok(results),
        }
    }
}
