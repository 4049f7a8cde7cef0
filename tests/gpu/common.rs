//! Shared pieces of the GPU tests.

use gpushmem::{Config, LaunchConfig, Module, Shmem, Threads};

pub const PTX: &str = include_str!(env!("GPUSHMEM_PTX_GPUSHMEM_TEST_KERNELS"));

/// The test kernels assembled by ptxas at build time (empty when it was not found: then PTX is JIT-compiled).
pub const CUBIN: &[u8] = include_bytes!(env!("GPUSHMEM_CUBIN_GPUSHMEM_TEST_KERNELS"));

/// A test's outcome: `Err` carries the message libtest-mimic prints.
pub type TestResult = Result<(), libtest_mimic::Failed>;

/// Settings for test jobs: a small heap, short timeouts (a hang becomes an
/// error): device waits 20 s, or `GPUSHMEM_TEST_TIMEOUT` whole seconds (> 0)
/// where it is set — scripts/sanitize.sh sets 600: under compute-sanitizer
/// a PE can start far later than the others. A test-only variable, so that
/// the library's own `GPUSHMEM_TIMEOUT` (0 = wait forever) never turns a
/// test's hang into a silent one.
pub fn config(heap: u64) -> Config {
    let wait_s = device_wait_s();
    Config {
        heap_size: heap,
        // Under the sanitizer a PE process can also reach init far later.
        bootstrap_timeout: std::time::Duration::from_secs(wait_s.max(60)),
        device_timeout: Some(std::time::Duration::from_secs(wait_s)),
        debug_checks: false,
        // GPUSHMEM_ENGINE=nvshmem runs the suite on the NVSHMEM engine (with test kernels built for it).
        engine: engine(),
    }
}

/// The engine the suite runs on (`GPUSHMEM_ENGINE`, default native).
pub fn engine() -> gpushmem::Engine {
    Config::from_env().map(|c| c.engine).unwrap_or_default()
}

/// The tests' device wait limit in seconds: `GPUSHMEM_TEST_TIMEOUT`, else 20.
pub fn device_wait_s() -> u64 {
    std::env::var("GPUSHMEM_TEST_TIMEOUT").ok().and_then(|s| s.parse().ok()).filter(|&s: &u64| s > 0).unwrap_or(20)
}

/// Set in the PE processes of a test's process-mode variant (see `main.rs`).
pub const IN_JOB: &str = "GPUSHMEM_TEST_IN_JOB";

/// Whether a job of `n` PEs on the NVSHMEM engine puts several PEs on one
/// GPU (more PEs than GPUs): NVSHMEM 3.4.5 cannot split teams there, so
/// `team_split_*` refuses with `Error::Engine` and the tests use the world only.
pub fn nvshmem_shares_gpu(n: usize) -> bool {
    engine() == gpushmem::Engine::Nvshmem && gpushmem::gpu_available().map_or(true, |g| n > g)
}

/// Runs `f` on `n` PEs and returns every PE's result, in PE order; any error is a test failure.
///
/// Normally the PEs are threads of this process. In a process-mode variant
/// (`IN_JOB` set, one process per PE under gpushmem-run) this process is one
/// PE: it runs `f` once and gathers the other PEs' results through the
/// bootstrap, so the test's checks run unchanged in every process.
pub fn threads<T>(
    n: usize,
    heap: u64,
    f: impl Fn(&Shmem) -> gpushmem::Result<T> + Sync,
) -> Result<Vec<T>, libtest_mimic::Failed>
where
    T: Send + serde::Serialize + serde::de::DeserializeOwned,
{
    // The NVSHMEM engine has no PEs as threads: one PE is this process.
    if std::env::var_os(IN_JOB).is_some() || (n == 1 && engine() == gpushmem::Engine::Nvshmem) {
        return in_job(n, heap, f).map_err(|e| format!("{n} PEs (processes): {e}").into());
    }
    Threads::new(n).config(config(heap)).run(f).map_err(|e| format!("{n} PEs: {e}").into())
}

fn in_job<T>(n: usize, heap: u64, f: impl Fn(&Shmem) -> gpushmem::Result<T>) -> Result<Vec<T>, String>
where
    T: serde::Serialize + serde::de::DeserializeOwned,
{
    let shmem = Shmem::init_with_config(config(heap)).map_err(|e| e.to_string())?;
    if shmem.n_pes() != n {
        return Err(format!("the test wants {n} PEs, the job has {}", shmem.n_pes()));
    }
    let mine = f(&shmem).map_err(|e| e.to_string())?;
    let bytes = serde_json::to_vec(&mine).map_err(|e| e.to_string())?;
    let all = shmem.bootstrap().allgather(&bytes).map_err(|e| e.to_string())?;
    shmem.finalize().map_err(|e| e.to_string())?;
    all.iter().map(|b| serde_json::from_slice(b).map_err(|e| format!("a PE's result: {e}"))).collect()
}

/// The test kernels, loaded into this PE.
pub fn kernels(shmem: &Shmem) -> gpushmem::Result<Module> {
    shmem.load_module_prebuilt("gpushmem-test-kernels", PTX, CUBIN)
}

/// One block of `threads` threads.
pub fn one_block(threads: u32) -> LaunchConfig {
    LaunchConfig { grid_dim: (1, 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: 0 }
}

/// splitmix64: reproducible random bytes from (seed, stream).
pub fn random_bytes(seed: u64, stream: u64, len: usize) -> Vec<u8> {
    let mut x = seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        out.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// `len` reproducible `f32`s in [-1, 1], in steps of 1/1000, from (seed, stream).
pub fn random_unit_f32s(seed: u64, stream: u64, len: usize) -> Vec<f32> {
    random_bytes(seed, stream, len * 4)
        .chunks(4)
        .map(|c| (u32::from_le_bytes(c.try_into().unwrap()) % 2001) as f32 / 1000.0 - 1.0)
        .collect()
}

/// A seed for this run: `GPUSHMEM_TEST_SEED` or the clock; printed so a failure can be replayed.
pub fn seed() -> u64 {
    static SEED: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *SEED.get_or_init(|| {
        let s = std::env::var("GPUSHMEM_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1)
        });
        println!("GPU tests: GPUSHMEM_TEST_SEED={s}");
        s
    })
}

/// The variable that turns quick mode on (see [`quick`]).
pub const QUICK_VAR: &str = "GPUSHMEM_TEST_QUICK";

/// Quick mode: `GPUSHMEM_TEST_QUICK=1` (any value but empty or `0`), read
/// once. Made for runs under compute-sanitizer, which slows kernels 30-100×:
/// every test still runs every op, type, form, team shape and PE count, but
/// the heavy ones move far less data and loop far fewer times ([`scaled`]
/// counts, sizes capped by [`within_cap`] and [`size_cap`]). Off, every test
/// is exactly its full self. Test names keep their full-mode figures
/// (`cas_lock_100k`); the printed summaries state what actually ran.
pub fn quick() -> bool {
    static QUICK: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *QUICK.get_or_init(|| std::env::var_os(QUICK_VAR).is_some_and(|v| !v.is_empty() && v != "0"))
}

/// Quick mode divides iteration and message counts by this.
pub const QUICK_DIVISOR: usize = 100;

/// A count of messages, rounds, acquisitions, instances or cycles: `n`, or in
/// quick mode `n / 100` (at least 1): 10^5 messages become 10^3, 1000
/// barrier rounds 10.
pub fn scaled(n: usize) -> usize {
    if quick() {
        (n / QUICK_DIVISOR).max(1)
    } else {
        n
    }
}

/// The largest transfer (bytes) quick mode keeps. 64 KiB + a ragged tail
/// already reaches every path of the copy engine (16/8/4/2/1-byte units,
/// head and tail bytes, the 4-way unrolled loop of a block); the MiB sizes
/// only add volume.
pub const QUICK_MAX_BYTES: usize = 128 << 10;

/// Whether a size of a sweep runs: always, or in quick mode only up to [`QUICK_MAX_BYTES`].
pub fn within_cap(bytes: usize) -> bool {
    !quick() || bytes <= QUICK_MAX_BYTES
}

/// A single buffer's size: `bytes`, or in quick mode at most [`QUICK_MAX_BYTES`]
/// (add odd tails after capping: `size_cap(4 << 20) / 4 + 5`).
pub fn size_cap(bytes: usize) -> usize {
    if quick() {
        bytes.min(QUICK_MAX_BYTES)
    } else {
        bytes
    }
}

/// A byte count as printed in summaries: `64 MiB`, `128 KiB`, `4101 B`.
pub fn fmt_bytes(bytes: usize) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else if bytes >= 1 << 10 && bytes.is_multiple_of(1 << 10) {
        format!("{} KiB", bytes >> 10)
    } else {
        format!("{bytes} B")
    }
}

/// First mismatch between `got` and `want`, as a message.
pub fn compare(what: &str, got: &[u8], want: &[u8]) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!("{what}: length {} != {}", got.len(), want.len()));
    }
    match got.iter().zip(want).position(|(g, w)| g != w) {
        None => Ok(()),
        Some(i) => {
            let bad = got.iter().zip(want).filter(|(g, w)| g != w).count();
            Err(format!(
                "{what}: {bad} of {} bytes wrong; first at {i}: got {:#04x}, want {:#04x}",
                want.len(),
                got[i],
                want[i]
            ))
        }
    }
}

/// `?` for cudarc results inside PE closures.
pub trait CuExt<T> {
    /// Wraps a driver error with what was being done.
    fn cu(self, what: &str) -> gpushmem::Result<T>;
}

impl<T> CuExt<T> for Result<T, gpushmem::cudarc::driver::DriverError> {
    fn cu(self, what: &str) -> gpushmem::Result<T> {
        self.map_err(|source| gpushmem::Error::Cuda { call: what.to_string(), source })
    }
}

/// Device address of a cudarc buffer, as a kernel argument.
pub fn dptr<T>(buf: &gpushmem::cudarc::driver::CudaSlice<T>, stream: &gpushmem::cudarc::driver::CudaStream) -> u64 {
    use gpushmem::cudarc::driver::DevicePtr;
    buf.device_ptr(stream).0
}

/// Fails listing (the first 30 of) `failures`, if there are any.
pub fn fail_if_any(failures: &[String]) -> TestResult {
    if failures.is_empty() {
        return Ok(());
    }
    let shown: Vec<&str> = failures.iter().take(30).map(String::as_str).collect();
    Err(format!("{} failures:\n{}", failures.len(), shown.join("\n")).into())
}
