//! Where the PEs of a job meet ([`Rendezvous`]): a Unix-domain socket path,
//! which reaches the PEs of one node, or a TCP address, which reaches every
//! node; and how a Slurm step's meeting place is worked out from what Slurm
//! sets (the first node of the step, a port from the job and step ids).

use crate::{Error, Result};
use std::fmt;
use std::path::PathBuf;

/// The variable that chooses the port of a TCP rendezvous worked out from a
/// launcher's node list (Slurm), instead of the port derived from the job.
pub const PORT_VAR: &str = "GPUSHMEM_BOOTSTRAP_PORT";

/// Lowest port a derived TCP rendezvous uses; derived ports are in
/// `DERIVED_PORTS_START..DERIVED_PORTS_START + 10000`, below Linux's
/// ephemeral range (32768–60999), so that no outgoing connection holds one.
pub const DERIVED_PORTS_START: u16 = 20000;

/// The meeting place of a job's PEs: PE 0 listens there, the others connect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rendezvous {
    /// A Unix-domain socket at this path: one node only. Peer credentials
    /// (same user) and, where set, the job's secret decide who may join.
    Unix(PathBuf),
    /// TCP: PE 0 listens on `port` (on every interface, or on the loopback
    /// address when `host` is one), the others connect to `host:port`. No peer
    /// credentials exist over TCP: the job's secret is required.
    Tcp {
        /// Host name or address of the node PE 0 runs on.
        host: String,
        /// TCP port, 1–65535.
        port: u16,
    },
}

impl Rendezvous {
    /// Parses a `GPUSHMEM_BOOTSTRAP` value: `tcp://HOST:PORT` (an IPv6
    /// address in brackets: `tcp://[2001:db8::7]:29500`), `unix:PATH`, or a path.
    pub fn parse(value: &str) -> Result<Rendezvous> {
        let bad = |why: String| Error::Config { name: "GPUSHMEM_BOOTSTRAP".into(), value: value.into(), why };
        if let Some(rest) = value.strip_prefix("tcp://") {
            let rest = rest.strip_suffix('/').unwrap_or(rest);
            let (host, port) = rest
                .rsplit_once(':')
                .ok_or_else(|| bad("expected tcp://HOST:PORT (the port of PE 0's node to meet at)".into()))?;
            let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
            if host.is_empty() || host.contains(['/', '[', ']']) || (host.contains(':') && !rest.starts_with('[')) {
                return Err(bad(format!(
                    "{host:?} is not a host name or address (an IPv6 address goes in brackets: tcp://[::1]:29500)"
                )));
            }
            let port = port
                .parse::<u16>()
                .ok()
                .filter(|&p| p > 0)
                .ok_or_else(|| bad(format!("{port:?} is not a TCP port (1-65535)")))?;
            return Ok(Rendezvous::Tcp { host: host.to_string(), port });
        }
        let path = value.strip_prefix("unix:").unwrap_or(value);
        if path.contains("://") {
            return Err(bad("unknown scheme: use tcp://HOST:PORT, unix:PATH or a socket path".into()));
        }
        if path.is_empty() {
            return Err(bad("empty socket path".into()));
        }
        Ok(Rendezvous::Unix(PathBuf::from(path)))
    }

    /// Whether PEs meet over TCP (and so may span nodes).
    pub fn is_tcp(&self) -> bool {
        matches!(self, Rendezvous::Tcp { .. })
    }

    /// The socket path of a Unix rendezvous.
    pub fn unix_path(&self) -> Option<&std::path::Path> {
        match self {
            Rendezvous::Unix(p) => Some(p),
            Rendezvous::Tcp { .. } => None,
        }
    }
}

impl fmt::Display for Rendezvous {
    /// A path as it is, or `tcp://host:port` (IPv6 addresses in brackets):
    /// the form `GPUSHMEM_BOOTSTRAP` takes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rendezvous::Unix(p) => write!(f, "{}", p.display()),
            Rendezvous::Tcp { host, port } if host.contains(':') => write!(f, "tcp://[{host}]:{port}"),
            Rendezvous::Tcp { host, port } => write!(f, "tcp://{host}:{port}"),
        }
    }
}

/// The first host of a Slurm host list (`SLURM_STEP_NODELIST`,
/// `SLURM_JOB_NODELIST`): `node[07-09,12],gpu3` → `node07`,
/// `rack[1-2]-n[001-004]` → `rack1-n001`. `None` for an empty or malformed list.
pub fn slurm_first_host(list: &str) -> Option<String> {
    let mut host = String::new();
    let mut rest = list.trim();
    loop {
        let stop = rest.find(['[', ',', ']']).unwrap_or(rest.len());
        host.push_str(&rest[..stop]);
        rest = &rest[stop..];
        match rest.chars().next() {
            None | Some(',') => break,
            Some(']') => return None,
            // A bracketed range list: its first number, leading zeros kept.
            Some(_) => {
                let close = rest.find(']')?;
                let first = rest[1..close].split([',', '-']).next()?;
                if first.is_empty() || !first.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                host.push_str(first);
                rest = &rest[close + 1..];
            }
        }
    }
    (!host.is_empty()).then_some(host)
}

/// The port of a Slurm step's derived TCP rendezvous: stable for every rank
/// of the step, different for concurrent steps of a job (and, mostly, of
/// jobs): `DERIVED_PORTS_START + FNV-1a("job.step") % 10000`.
pub fn derived_port(job: &str, step: &str) -> u16 {
    let key = format!("{job}.{step}");
    // FNV-1a: stable across processes and builds, unlike std's hasher.
    let hash = key.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3));
    DERIVED_PORTS_START + (hash % 10000) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tcp_unix_and_paths() {
        let tcp = |h: &str, p| Rendezvous::Tcp { host: h.into(), port: p };
        assert_eq!(Rendezvous::parse("tcp://node7:29500").unwrap(), tcp("node7", 29500));
        assert_eq!(Rendezvous::parse("tcp://10.0.0.2:1/").unwrap(), tcp("10.0.0.2", 1));
        assert_eq!(Rendezvous::parse("tcp://[::1]:4000").unwrap(), tcp("::1", 4000));
        assert_eq!(tcp("::1", 4000).to_string(), "tcp://[::1]:4000");
        assert_eq!(tcp("n1", 5).to_string(), "tcp://n1:5");
        assert_eq!(Rendezvous::parse("/run/x.sock").unwrap(), Rendezvous::Unix("/run/x.sock".into()));
        assert_eq!(Rendezvous::parse("unix:rel.sock").unwrap(), Rendezvous::Unix("rel.sock".into()));
        for bad in
            ["tcp://node7", "tcp://:80", "tcp://n:0", "tcp://n:65536", "tcp://n:x", "tcp://::1:80", "http://a:1", ""]
        {
            match Rendezvous::parse(bad) {
                Err(Error::Config { name, .. }) => assert_eq!(name, "GPUSHMEM_BOOTSTRAP", "{bad}"),
                other => panic!("{bad:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn slurm_host_lists() {
        let first = |s| slurm_first_host(s);
        assert_eq!(first("node[07-09,12],gpu3").as_deref(), Some("node07"));
        assert_eq!(first("gpu3,node[1-2]").as_deref(), Some("gpu3"));
        assert_eq!(first("rack[1-2]-n[001-004]").as_deref(), Some("rack1-n001"));
        assert_eq!(first("a[5,1]").as_deref(), Some("a5"));
        assert_eq!(first("single").as_deref(), Some("single"));
        for bad in ["", "n[", "n[]", "n[x-y]", "n]1"] {
            assert_eq!(first(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn derived_ports_are_stable_and_in_range() {
        let p = derived_port("1234", "0");
        assert_eq!(p, derived_port("1234", "0"));
        assert_ne!(p, derived_port("1234", "1"));
        for job in 0..500 {
            let p = derived_port(&job.to_string(), "0");
            assert!((DERIVED_PORTS_START..DERIVED_PORTS_START + 10000).contains(&p));
        }
    }
}
