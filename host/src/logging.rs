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
        // A bad value is reported by Config (Shmem::init fails with it); here: debug.
        let level = match std::env::var("GPUSHMEM_DEBUG").map(|v| parse_level(&v)) {
            Err(_) | Ok(Ok(None)) => return,
            Ok(Ok(Some(l))) => l,
            Ok(Err(_)) => log::LevelFilter::Debug,
        };
        if log::set_logger(&LOGGER).is_ok() {
            log::set_max_level(level);
        }
    });
}

/// `GPUSHMEM_DEBUG`'s value as a level: `None` for off (`""`, `0`, `off`),
/// `1` for debug, or a level name; an error for anything else.
pub(crate) fn parse_level(v: &str) -> std::result::Result<Option<log::LevelFilter>, String> {
    Ok(Some(match v.trim().to_ascii_lowercase().as_str() {
        "" | "0" | "off" => return Ok(None),
        "error" => log::LevelFilter::Error,
        "warn" => log::LevelFilter::Warn,
        "info" => log::LevelFilter::Info,
        "1" | "debug" => log::LevelFilter::Debug,
        "trace" => log::LevelFilter::Trace,
        _ => return Err("expected off/0, error, warn, info, debug/1 or trace".into()),
    }))
}
