//! Which node each PE runs on, as every PE learns it at init (the node
//! census, one allgather): PEs whose host reports the same host name and boot
//! id share a node, as NCCL and NVSHMEM tell nodes apart.
//!
//! The native engine reaches one node (its loads and stores go over NVLink /
//! CUDA IPC), so a job of several nodes needs the NVSHMEM engine; the census is
//! how every PE finds out, alike, before anything touches a GPU.

use super::Bootstrap;
use crate::{Error, Result};

/// Where each PE of a job runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nodes {
    /// The node of each PE (index into `names`), in PE order.
    pub of_pe: Vec<usize>,
    /// Each node's host name, in order of its lowest PE.
    pub names: Vec<String>,
}

impl Nodes {
    /// Number of nodes the job spans.
    pub fn count(&self) -> usize {
        self.names.len()
    }

    /// The nodes of `identities` (one per PE, in PE order; equal ones are one node).
    pub fn from_identities(identities: &[Identity]) -> Nodes {
        let mut seen: Vec<&Identity> = Vec::new();
        let of_pe = identities
            .iter()
            .map(|id| {
                seen.iter().position(|s| *s == id).unwrap_or_else(|| {
                    seen.push(id);
                    seen.len() - 1
                })
            })
            .collect();
        Nodes { of_pe, names: seen.iter().map(|s| s.host.clone()).collect() }
    }

    /// "host-a: PEs 0-1; host-b: PEs 2-3" (PE lists cut after a few ranges).
    pub fn describe(&self) -> String {
        let node = |n: usize| -> String {
            let pes: Vec<usize> = (0..self.of_pe.len()).filter(|&p| self.of_pe[p] == n).collect();
            let mut ranges: Vec<String> = Vec::new();
            let mut i = 0;
            while i < pes.len() {
                let mut j = i;
                while j + 1 < pes.len() && pes[j + 1] == pes[j] + 1 {
                    j += 1;
                }
                ranges.push(if i == j { pes[i].to_string() } else { format!("{}-{}", pes[i], pes[j]) });
                i = j + 1;
            }
            let shown = if ranges.len() > 4 { format!("{}, …", ranges[..4].join(", ")) } else { ranges.join(", ") };
            format!("{}: PE{} {shown}", self.names[n], if pes.len() == 1 { "" } else { "s" })
        };
        let all: Vec<String> = (0..self.count().min(8)).map(node).collect();
        let more = if self.count() > 8 { format!("; … {} more nodes", self.count() - 8) } else { String::new() };
        format!("{}{more}", all.join("; "))
    }

    /// [`Error::Config`] naming `GPUSHMEM_ENGINE` unless the native engine can
    /// run this job: its PEs must all be on one node. Every PE gets the same
    /// answer from the same census.
    pub fn check_native(&self) -> Result<()> {
        if self.count() <= 1 {
            return Ok(());
        }
        Err(Error::Config {
            name: "GPUSHMEM_ENGINE".into(),
            value: "native".into(),
            why: format!(
                "the native engine's loads and stores reach one node; this job spans {} nodes ({}): build and \
                 run with GPUSHMEM_ENGINE=nvshmem",
                self.count(),
                self.describe()
            ),
        })
    }
}

/// What tells one node from another: its host name and boot id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The host name (`gethostname`).
    pub host: String,
    /// The kernel's boot id (`/proc/sys/kernel/random/boot_id`; empty where there is none).
    pub boot: String,
}

impl Identity {
    /// This process's node.
    pub fn here() -> Identity {
        let mut buf = [0u8; 256];
        // SAFETY: gethostname writes at most `buf.len()` bytes into our buffer.
        let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
        let host = if rc == 0 {
            let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
            String::from_utf8_lossy(&buf[..end]).into_owned()
        } else {
            "unknown-host".into()
        };
        let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default().trim().to_string();
        Identity { host, boot }
    }

    fn encode(&self) -> Vec<u8> {
        [self.host.as_bytes(), b"\n", self.boot.as_bytes()].concat()
    }

    fn decode(b: &[u8]) -> Identity {
        let text = String::from_utf8_lossy(b);
        let (host, boot) = text.split_once('\n').unwrap_or((&text, ""));
        Identity { host: host.into(), boot: boot.into() }
    }
}

/// The node census (collective): every PE's [`Identity`], gathered.
pub fn census(boot: &dyn Bootstrap) -> Result<Nodes> {
    let all = boot.allgather(&Identity::here().encode())?;
    let ids: Vec<Identity> = all.iter().map(|b| Identity::decode(b)).collect();
    Ok(Nodes::from_identities(&ids))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(host: &str, boot: &str) -> Identity {
        Identity { host: host.into(), boot: boot.into() }
    }

    #[test]
    fn nodes_from_identities() {
        let n = Nodes::from_identities(&[id("a", "1"), id("a", "1"), id("b", "2"), id("b", "2"), id("a", "1")]);
        assert_eq!(n.of_pe, [0, 0, 1, 1, 0]);
        assert_eq!(n.describe(), "a: PEs 0-1, 4; b: PEs 2-3");
        let e = n.check_native().unwrap_err().to_string();
        assert!(e.contains("this job spans 2 nodes") && e.contains("GPUSHMEM_ENGINE=nvshmem"), "{e}");
        // One host name, two boots: two machines that share a name are two nodes.
        assert_eq!(Nodes::from_identities(&[id("a", "1"), id("a", "2")]).count(), 2);
        let one = Nodes::from_identities(&vec![id("a", "1"); 3]);
        assert_eq!(one.describe(), "a: PEs 0-2");
        one.check_native().unwrap();
        assert_eq!(Identity::decode(&id("h", "b").encode()), id("h", "b"));
        assert!(!Identity::here().host.is_empty());
    }

    #[test]
    fn census_over_threads() {
        let boots = super::super::threads::ThreadsBootstrap::group(3, std::time::Duration::from_secs(10));
        let nodes: Vec<Nodes> = std::thread::scope(|s| {
            let hs: Vec<_> = boots.iter().map(|b| s.spawn(move || census(b).unwrap())).collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(nodes.iter().all(|n| n.count() == 1 && n.of_pe == [0, 0, 0]));
    }
}
