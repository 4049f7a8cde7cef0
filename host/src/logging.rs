//! Host logging to stderr, switched on by `GPUSHMEM_DEBUG` (like `NVSHMEM_DEBUG`).

use std::sync::Once;

struct StderrLogger;

impl log::Log for StderrLogger {
    fn enabled(&self, m: &log::Metadata) -> bool {
        m.level() <= log::max_level() && m.target().starts_with("gpushmem")
    }

    fn log(&self, r: &log::Record) {
        if self.enabled(r.metadata()) {
            eprintln!("[gpushmem {}] {}", r.level(), r.args());
        }
    }

    fn flush(&self) {}
}

static LOGGER: StderrLogger = StderrLogger;
static INIT: Once = Once::new();

/// Installs gpushmem's stderr logger at the level `GPUSHMEM_DEBUG` names
/// (`error`, `warn`, `info`, `debug`, `trace`; `1` = `debug`), unless the
/// program installed a `log` logger of its own (then that one gets our records).
/// Called by [`crate::Shmem::init`] and [`crate::Threads::run`].
pub fn init() {
    INIT.call_once(|| {
        let level = match std::env::var("GPUSHMEM_DEBUG").ok().as_deref().map(str::to_ascii_lowercase).as_deref() {
            None | Some("") | Some("0") | Some("off") => return,
            Some("error") => log::LevelFilter::Error,
            Some("warn") => log::LevelFilter::Warn,
            Some("info") => log::LevelFilter::Info,
            Some("trace") => log::LevelFilter::Trace,
            _ => log::LevelFilter::Debug,
        };
        if log::set_logger(&LOGGER).is_ok() {
            log::set_max_level(level);
        }
    });
}
