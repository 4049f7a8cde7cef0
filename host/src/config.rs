//! Settings, from the environment (like NVSHMEM's `NVSHMEM_*` variables) or set in code.
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `GPUSHMEM_SYMMETRIC_SIZE` | bytes of symmetric heap per PE (`k`/`m`/`g` suffixes, powers of 1024) | `1g` |
//! | `GPUSHMEM_BOOTSTRAP_TIMEOUT` | seconds a bootstrap wait may take before it fails naming the missing PEs; on the NVSHMEM engine, NVSHMEM's init may take twice this before the process is ended, saying so | `60` |
//! | `GPUSHMEM_TIMEOUT` | seconds a device-side wait (barrier, …) may make no progress before it traps with a message; `0` = wait forever | `60` |
//! | `GPUSHMEM_DEBUG_CHECKS` | `1`: device calls check PE numbers and heap bounds and trap with a message | `0` |
//! | `GPUSHMEM_ENGINE` | `native` (gpushmem's load/store path) or `nvshmem` (NVSHMEM's runtime; kernels built with the same setting) | `native` |
//! | `GPUSHMEM_DEBUG` | log level of the host's `log` records (`error`…`trace`, `1` = `debug`, `0`/`off`); see [`crate::init_logging`] | off |
//! | `GPUSHMEM_EXIT_TIMEOUT` | NVSHMEM engine: seconds an exiting process may take before a watchdog ends it; `0`: no watchdog | `30` |

use crate::{Error, Result};
use gpushmem_kernels::abi::RESERVED_HEAP_BYTES;
use std::time::Duration;

/// Run-time settings of one PE. [`Config::from_env`] reads the variables above.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Bytes of symmetric heap per PE, including the library's reserved sync area.
    pub heap_size: u64,
    /// How long a bootstrap wait may take.
    pub bootstrap_timeout: Duration,
    /// How long a device-side wait may make no progress before it traps; `None` = forever.
    pub device_timeout: Option<Duration>,
    /// Device-side argument checks.
    pub debug_checks: bool,
    /// Which engine moves the data.
    pub engine: crate::Engine,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            heap_size: 1 << 30,
            bootstrap_timeout: Duration::from_secs(60),
            device_timeout: Some(Duration::from_secs(60)),
            debug_checks: false,
            engine: crate::Engine::Native,
        }
    }
}

/// One setting as [`Config::from_env`] reads it, with the verdict `Shmem::init` would give.
#[derive(Debug)]
pub struct Setting {
    /// The environment variable.
    pub name: &'static str,
    /// Its value; `None` when unset (the default applies).
    pub value: Option<String>,
    /// What it means (`Ok`, e.g. "1073741824 bytes") or why init refuses it.
    pub verdict: Result<String>,
}

impl Config {
    /// The defaults, overridden by whichever variables are set. Fails with the
    /// first bad setting ([`Config::report_from_lookup`] gives every one).
    pub fn from_env() -> Result<Self> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// As [`Config::from_env`], reading variables through `get` (for tests).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let (c, report) = Self::report_from_lookup(get);
        match report.into_iter().find_map(|s| s.verdict.err()) {
            Some(e) => Err(e),
            None => Ok(c),
        }
    }

    /// Every setting this struct and the host's logger read, each with its
    /// verdict, and the configuration from the good ones (`gpushmem-info`
    /// prints this).
    pub fn report_from_lookup(get: impl Fn(&str) -> Option<String>) -> (Self, Vec<Setting>) {
        let mut c = Config::default();
        let mut report = Vec::new();
        let mut setting = |name: &'static str, default: String, read: &mut dyn FnMut(&str) -> Result<String>| {
            let value = get(name);
            let verdict = match &value {
                Some(v) => read(v),
                None => Ok(format!("{default} (default)")),
            };
            report.push(Setting { name, value, verdict });
        };
        setting("GPUSHMEM_SYMMETRIC_SIZE", format!("{} bytes", c.heap_size), &mut |v| {
            let size = parse_size(v).map_err(|why| bad("GPUSHMEM_SYMMETRIC_SIZE", v, why))?;
            if size <= RESERVED_HEAP_BYTES {
                let why = format!("must exceed the {RESERVED_HEAP_BYTES} bytes the library reserves");
                return Err(bad("GPUSHMEM_SYMMETRIC_SIZE", v, why));
            }
            c.heap_size = size;
            Ok(format!("{size} bytes"))
        });
        setting("GPUSHMEM_BOOTSTRAP_TIMEOUT", format!("{:?}", c.bootstrap_timeout), &mut |v| {
            let s = parse_seconds(v).map_err(|why| bad("GPUSHMEM_BOOTSTRAP_TIMEOUT", v, why))?;
            if s.is_zero() {
                return Err(bad("GPUSHMEM_BOOTSTRAP_TIMEOUT", v, "must be > 0".into()));
            }
            c.bootstrap_timeout = s;
            Ok(format!("{s:?}"))
        });
        setting("GPUSHMEM_TIMEOUT", "60s".into(), &mut |v| {
            let s = parse_seconds(v).map_err(|why| bad("GPUSHMEM_TIMEOUT", v, why))?;
            c.device_timeout = (!s.is_zero()).then_some(s);
            Ok(if s.is_zero() { "off: device waits can hang for ever".into() } else { format!("{s:?}") })
        });
        setting("GPUSHMEM_DEBUG_CHECKS", "off".into(), &mut |v| {
            c.debug_checks = parse_bool(v).map_err(|why| bad("GPUSHMEM_DEBUG_CHECKS", v, why))?;
            Ok(if c.debug_checks { "on" } else { "off" }.into())
        });
        setting("GPUSHMEM_ENGINE", "native".into(), &mut |v| {
            c.engine = crate::Engine::parse(v).map_err(|why| bad("GPUSHMEM_ENGINE", v, why))?;
            Ok(format!("{:?}", c.engine).to_lowercase())
        });
        setting("GPUSHMEM_DEBUG", "off".into(), &mut |v| match crate::logging::parse_level(v) {
            Ok(None) => Ok("off".into()),
            Ok(Some(l)) => Ok(format!("host log level {}", l.as_str().to_lowercase())),
            Err(why) => Err(bad("GPUSHMEM_DEBUG", v, why)),
        });
        setting("GPUSHMEM_EXIT_TIMEOUT", "30s".into(), &mut |v| {
            let s = parse_seconds(v).map_err(|why| bad("GPUSHMEM_EXIT_TIMEOUT", v, why))?;
            Ok(if s.is_zero() { "off: no exit watchdog".into() } else { format!("{s:?} (NVSHMEM engine)") })
        });
        (c, report)
    }
}

fn bad(name: &str, value: &str, why: String) -> Error {
    Error::Config { name: name.into(), value: value.into(), why }
}

/// Parses `123`, `64k`, `512M`, `1g`, `2T` (powers of 1024; `b`/`ib` suffixes allowed).
pub fn parse_size(s: &str) -> std::result::Result<u64, String> {
    let t = s.trim().to_ascii_lowercase();
    let t = t.strip_suffix("ib").or_else(|| t.strip_suffix('b')).unwrap_or(&t);
    let (num, shift) = match t.chars().last() {
        Some('k') => (&t[..t.len() - 1], 10),
        Some('m') => (&t[..t.len() - 1], 20),
        Some('g') => (&t[..t.len() - 1], 30),
        Some('t') => (&t[..t.len() - 1], 40),
        _ => (t, 0),
    };
    let n: u64 = num.trim().parse().map_err(|_| "expected a number with an optional k/m/g/t suffix".to_string())?;
    if n == 0 {
        return Err("must be > 0".into());
    }
    n.checked_mul(1u64 << shift).ok_or_else(|| "too large".to_string())
}

fn parse_seconds(s: &str) -> std::result::Result<Duration, String> {
    let v: f64 = s.trim().parse().map_err(|_| "expected seconds, e.g. 30 or 0.5".to_string())?;
    if !v.is_finite() || v < 0.0 {
        return Err("expected a non-negative number of seconds".into());
    }
    Ok(Duration::from_secs_f64(v))
}

fn parse_bool(s: &str) -> std::result::Result<bool, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" | "" => Ok(false),
        _ => Err("expected 0/1, true/false, yes/no or on/off".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("1g"), Ok(1 << 30));
        assert_eq!(parse_size("64K"), Ok(64 << 10));
        assert_eq!(parse_size("512MiB"), Ok(512 << 20));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("").is_err());
        assert!(parse_size("0").is_err());
        assert!(parse_size("12x").is_err());
        assert!(parse_size("99999999999999t").is_err());
    }

    #[test]
    fn the_report_gives_every_setting_and_each_bad_one() {
        let (c, report) = Config::report_from_lookup(|k| match k {
            "GPUSHMEM_SYMMETRIC_SIZE" => Some("1".into()),
            "GPUSHMEM_DEBUG" => Some("loud".into()),
            "GPUSHMEM_TIMEOUT" => Some("5".into()),
            _ => None,
        });
        let bad: Vec<_> = report.iter().filter(|s| s.verdict.is_err()).map(|s| s.name).collect();
        assert_eq!(bad, ["GPUSHMEM_SYMMETRIC_SIZE", "GPUSHMEM_DEBUG"]);
        assert!(report.iter().any(|s| s.name == "GPUSHMEM_ENGINE" && s.value.is_none() && s.verdict.is_ok()));
        // The good ones still apply; the bad ones leave the default.
        assert_eq!((c.device_timeout, c.heap_size), (Some(Duration::from_secs(5)), Config::default().heap_size));
        // What init refuses, from_lookup refuses: the size the library reserves.
        let e = Config::from_lookup(|k| (k == "GPUSHMEM_SYMMETRIC_SIZE").then(|| "2m".into())).unwrap_err();
        assert!(e.to_string().contains("must exceed"), "{e}");
    }

    #[test]
    fn env_overrides_and_errors() {
        let c = Config::from_lookup(|k| match k {
            "GPUSHMEM_SYMMETRIC_SIZE" => Some("4m".into()),
            "GPUSHMEM_TIMEOUT" => Some("0".into()),
            "GPUSHMEM_DEBUG_CHECKS" => Some("yes".into()),
            _ => None,
        })
        .unwrap();
        assert_eq!(c.heap_size, 4 << 20);
        assert_eq!(c.device_timeout, None);
        assert!(c.debug_checks);
        let e = Config::from_lookup(|k| (k == "GPUSHMEM_BOOTSTRAP_TIMEOUT").then(|| "soon".into())).unwrap_err();
        assert!(e.to_string().contains("GPUSHMEM_BOOTSTRAP_TIMEOUT"), "{e}");
        assert_eq!(Config::from_lookup(|_| None).unwrap().engine, crate::Engine::Native);
        let c = Config::from_lookup(|k| (k == "GPUSHMEM_ENGINE").then(|| "NVSHMEM".into())).unwrap();
        assert_eq!(c.engine, crate::Engine::Nvshmem);
        let e = Config::from_lookup(|k| (k == "GPUSHMEM_ENGINE").then(|| "ucx".into())).unwrap_err();
        assert!(e.to_string().contains("GPUSHMEM_ENGINE") && e.to_string().contains("nvshmem"), "{e}");
    }
}
