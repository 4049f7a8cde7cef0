//! Which engine gpushmem-perf runs on, and how it runs a job of PEs there.
//!
//! The benchmark kernels are built for one engine, the one `GPUSHMEM_ENGINE`
//! named when this binary was built (the root build.rs); at run time the host
//! must use the same one. `GPUSHMEM_ENGINE` unset at run time means the
//! kernels' engine; set to the other engine it is an [`EngineError::Mismatch`].
//!
//! On the native engine a job's PEs are threads of this process. On the
//! NVSHMEM engine (one PE per process) a job is this process's one PE, so
//! only the one-PE benchmarks run there (see `opts::ONE_PE`).

use gpushmem::{Config, Engine, Shmem, Threads};

/// The engine the bench kernels were built for (`native` or `nvshmem`), as
/// gpushmem-build reported it to the root build.rs.
pub const KERNELS: &str = env!("GPUSHMEM_ENGINE_GPUSHMEM_BENCH_KERNELS");

/// The NVSHMEM version whose device code was linked into the bench kernels
/// (NVSHMEM engine only, when gpushmem-build could tell).
pub const KERNELS_NVSHMEM: Option<&str> = option_env!("GPUSHMEM_NVSHMEM_VERSION_GPUSHMEM_BENCH_KERNELS");

/// The setting that picks the engine (at build time for the kernels, at run time for the host).
const ENGINE_VAR: &str = "GPUSHMEM_ENGINE";

/// Why gpushmem-perf cannot run on the engine asked for, or cannot run a job there.
#[derive(Debug)]
pub enum EngineError {
    /// `GPUSHMEM_ENGINE` at run time names another engine than the kernels were built for.
    Mismatch {
        /// The engine the bench kernels were built for.
        built: Engine,
        /// The engine `GPUSHMEM_ENGINE` asks for now.
        asked: Engine,
    },
    /// The settings in the environment could not be read (`GPUSHMEM_ENGINE` or another).
    Settings(gpushmem::Error),
    /// A job of more than one PE was asked for on the NVSHMEM engine, which has
    /// no PEs as threads (a benchmark without a one-PE form got through).
    NeedsThreads {
        /// PEs the job wanted.
        pes: usize,
    },
    /// On the NVSHMEM engine this process joined a job of several PEs (it was
    /// started under a launcher); every benchmark here is on one PE.
    NotOnePe {
        /// PEs in the job this process joined.
        pes: usize,
    },
}

impl std::fmt::Display for EngineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EngineError::Mismatch { built, asked } => write!(
                f,
                "this gpushmem-perf was built with its kernels for the {} engine, but GPUSHMEM_ENGINE={} at run \
                 time: run it with GPUSHMEM_ENGINE={} (or unset), or run the build for the {} engine \
                 (scripts/device.sh stages gpushmem-perf for native and gpushmem-perf-nvshmem for nvshmem; \
                 build one with GPUSHMEM_ENGINE=<engine> cargo build --release --bin gpushmem-perf)",
                name(*built),
                name(*asked),
                name(*built),
                name(*asked)
            ),
            EngineError::Settings(e) => write!(f, "reading the settings from the environment: {e}"),
            EngineError::NeedsThreads { pes } => write!(
                f,
                "a job of {pes} PEs cannot run on the NVSHMEM engine: gpushmem-perf runs its PEs as threads of \
                 one process, and the NVSHMEM engine has one PE per process (only the one-PE benchmarks run there)"
            ),
            EngineError::NotOnePe { pes } => write!(
                f,
                "this process joined a job of {pes} PEs: on the NVSHMEM engine run gpushmem-perf as one plain \
                 process (no gpushmem-run, mpirun or srun); every benchmark it runs there is on one PE"
            ),
        }
    }
}

impl std::error::Error for EngineError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            EngineError::Settings(e) => Some(e),
            _ => None,
        }
    }
}

/// `native` or `nvshmem`.
pub fn name(e: Engine) -> &'static str {
    match e {
        Engine::Native => "native",
        Engine::Nvshmem => "nvshmem",
    }
}

/// The engine the bench kernels were built for.
pub fn built() -> Engine {
    // The build script writes the engine's name; anything else is a build bug.
    Engine::parse(KERNELS).unwrap_or_else(|e| panic!("GPUSHMEM_ENGINE_GPUSHMEM_BENCH_KERNELS={KERNELS:?}: {e}"))
}

/// The engine to run on: the kernels' one. With `GPUSHMEM_ENGINE` unset on
/// a build for the NVSHMEM engine, sets it (so every PE's settings name it);
/// call it before any thread starts. An explicit other engine is an error.
pub fn resolve() -> Result<Engine, EngineError> {
    let built = built();
    let given = std::env::var_os(ENGINE_VAR).is_some();
    let asked = Config::from_env().map_err(EngineError::Settings)?.engine;
    if given && asked != built {
        return Err(EngineError::Mismatch { built, asked });
    }
    if !given && built == Engine::Nvshmem {
        std::env::set_var(ENGINE_VAR, name(built));
    }
    Ok(built)
}

/// Runs `f` on `n` PEs and returns their results in PE order: as threads of
/// this process on the native engine; on the NVSHMEM engine as this process's
/// one PE (`n` must be 1: [`EngineError::NeedsThreads`] otherwise).
pub fn job<T, F>(n: usize, config: Config, f: F) -> crate::common::BenchResult<Vec<T>>
where
    T: Send,
    F: Fn(&Shmem) -> gpushmem::Result<T> + Sync,
{
    if config.engine != Engine::Nvshmem {
        return Ok(Threads::new(n).config(config).run(f)?);
    }
    if n != 1 {
        return Err(EngineError::NeedsThreads { pes: n }.into());
    }
    let shmem = Shmem::init_with_config(config)?;
    if shmem.n_pes() != 1 {
        return Err(EngineError::NotOnePe { pes: shmem.n_pes() }.into());
    }
    let out = f(&shmem)?;
    shmem.finalize()?;
    Ok(vec![out])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_messages() {
        assert_eq!(Engine::parse(name(built())).unwrap(), built());
        let m = EngineError::Mismatch { built: Engine::Nvshmem, asked: Engine::Native }.to_string();
        assert!(
            m.contains("built with its kernels for the nvshmem engine") && m.contains("GPUSHMEM_ENGINE=native"),
            "{m}"
        );
        assert!(EngineError::NeedsThreads { pes: 2 }.to_string().contains("one PE per process"));
        assert!(EngineError::NotOnePe { pes: 4 }.to_string().contains("one plain process"));
    }
}
