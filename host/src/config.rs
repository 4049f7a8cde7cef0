//! Settings, from the environment (like NVSHMEM's `NVSHMEM_*` variables) or set in code.
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `GPUSHMEM_SYMMETRIC_SIZE` | bytes of symmetric heap per PE (`k`/`m`/`g` suffixes, powers of 1024) | `1g` |
//! | `GPUSHMEM_BOOTSTRAP_TIMEOUT` | seconds a bootstrap wait may take before it fails naming the missing PEs | `60` |
//! | `GPUSHMEM_TIMEOUT` | seconds a device-side wait (barrier, …) may make no progress before it traps with a message; `0` = wait forever | `60` |
//! | `GPUSHMEM_DEBUG_CHECKS` | `1`: device calls check PE numbers and heap bounds and trap with a message | `0` |
//! | `GPUSHMEM_ENGINE` | `native` (gpushmem's load/store path) or `nvshmem` (NVSHMEM's runtime; kernels built with the same setting) | `native` |
//! | `GPUSHMEM_DEBUG` | log level of the host's `log` records (`error`…`trace`); see [`crate::init_logging`] | off |

use crate::{Error, Result};
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

impl Config {
    /// The defaults, overridden by whichever variables are set.
    pub fn from_env() -> Result<Self> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// As [`Config::from_env`], reading variables through `get` (for tests).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let mut c = Config::default();
        if let Some(v) = get("GPUSHMEM_SYMMETRIC_SIZE") {
            c.heap_size = parse_size(&v).map_err(|why| bad("GPUSHMEM_SYMMETRIC_SIZE", &v, why))?;
        }
        if let Some(v) = get("GPUSHMEM_BOOTSTRAP_TIMEOUT") {
            let s = parse_seconds(&v).map_err(|why| bad("GPUSHMEM_BOOTSTRAP_TIMEOUT", &v, why))?;
            if s.is_zero() {
                return Err(bad("GPUSHMEM_BOOTSTRAP_TIMEOUT", &v, "must be > 0".into()));
            }
            c.bootstrap_timeout = s;
        }
        if let Some(v) = get("GPUSHMEM_TIMEOUT") {
            let s = parse_seconds(&v).map_err(|why| bad("GPUSHMEM_TIMEOUT", &v, why))?;
            c.device_timeout = (!s.is_zero()).then_some(s);
        }
        if let Some(v) = get("GPUSHMEM_DEBUG_CHECKS") {
            c.debug_checks = parse_bool(&v).map_err(|why| bad("GPUSHMEM_DEBUG_CHECKS", &v, why))?;
        }
        if let Some(v) = get("GPUSHMEM_ENGINE") {
            c.engine = crate::Engine::parse(&v).map_err(|why| bad("GPUSHMEM_ENGINE", &v, why))?;
        }
        Ok(c)
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
    fn env_overrides_and_errors() {
        let c = Config::from_lookup(|k| match k {
            "GPUSHMEM_SYMMETRIC_SIZE" => Some("2m".into()),
            "GPUSHMEM_TIMEOUT" => Some("0".into()),
            "GPUSHMEM_DEBUG_CHECKS" => Some("yes".into()),
            _ => None,
        })
        .unwrap();
        assert_eq!(c.heap_size, 2 << 20);
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
