//! Jobs across simulated nodes (issue 38): `gpushmem-run --simulate-nodes 2`
//! starts each node's PEs in a mount and UTS namespace of their own (private
//! `/tmp`, `/dev/shm`, `/run/user`, own hostname), so that PEs of different
//! nodes share no file and no Unix socket and must meet over TCP; they still
//! share this machine's network (loopback) and kernel. No GPU is needed: the
//! PEs run `gpushmem-info --join` (the bootstrap and the node census) or
//! `--init` (`Shmem::init`, which refuses a native-engine job of two nodes
//! before it touches a GPU).
//!
//! Making namespaces needs root, so these tests are ignored by a plain `cargo
//! test`; `scripts/test.sh` (CI runs as root) runs them with `--ignored` where
//! namespaces can be made.

use std::process::Command;

/// `gpushmem-info`, copied where the simulated nodes still see it (each node
/// gets fresh `/tmp`, `/dev/shm` and `/run/user`, and a checkout, so the build,
/// may well lie under `/tmp`); removed again when dropped.
struct VisibleInfo(std::path::PathBuf);

impl VisibleInfo {
    fn new() -> VisibleInfo {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::path::Path::new("/var/tmp").join(format!("gpushmem-multinode-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("making a directory under /var/tmp");
        std::fs::copy(env!("CARGO_BIN_EXE_gpushmem-info"), dir.join("gpushmem-info")).expect("copying gpushmem-info");
        VisibleInfo(dir)
    }
}

impl Drop for VisibleInfo {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `gpushmem-run --simulate-nodes 2 [launcher args] -n 4 -- sh -c SCRIPT`, with
/// `gpushmem-info` as `$INFO`: (exit ok, stdout + stderr).
fn two_by_two(launcher_args: &[&str], script: &str) -> (bool, String) {
    let info = VisibleInfo::new();
    let out = Command::new(env!("CARGO_BIN_EXE_gpushmem-run"))
        .args(["--simulate-nodes", "2", "--grace", "10"])
        .args(launcher_args)
        .args(["-n", "4", "--", "sh", "-c", script])
        // The working directory too must not be one that a node replaces.
        .current_dir("/")
        .env("INFO", info.0.join("gpushmem-info"))
        .env("GPUSHMEM_BOOTSTRAP_TIMEOUT", "5")
        .env_remove("GPUSHMEM_ENGINE")
        .output()
        .expect("running gpushmem-run");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

fn lines_with<'a>(text: &'a str, what: &str) -> Vec<&'a str> {
    text.lines().filter(|l| l.contains(what)).collect()
}

#[test]
#[ignore = "needs root (mount and UTS namespaces); scripts/test.sh runs it as root"]
fn two_nodes_of_two_pes_meet_over_tcp() {
    let (ok, text) = two_by_two(&[], "exec $INFO --join");
    assert!(ok, "{text}");
    let joined = lines_with(&text, "joined at tcp://127.0.0.1:");
    assert_eq!(joined.len(), 4, "{text}");
    for pe in 0..4 {
        let line = joined.iter().find(|l| l.starts_with(&format!("PE {pe} of 4:"))).expect(&text);
        assert!(
            line.contains("2 node(s): ") && line.contains("-node0: PEs 0-1") && line.contains("-node1: PEs 2-3"),
            "{line}"
        );
        assert!(line.contains("native engine: refuses it") && line.contains("GPUSHMEM_ENGINE=nvshmem"), "{line}");
    }
    // The nodes share no /tmp: a Unix socket there reaches only PE 0's node,
    // and the PEs of the other node time out (naming PE 0) instead of meeting.
    let (ok, text) = two_by_two(&[], "GPUSHMEM_BOOTSTRAP=/tmp/gpushmem-sim.sock exec $INFO --join");
    assert!(!ok, "{text}");
    assert!(text.contains("did not arrive"), "{text}");
}

#[test]
#[ignore = "needs root (mount and UTS namespaces); scripts/test.sh runs it as root"]
fn native_engine_refuses_a_job_of_two_nodes_on_every_pe() {
    let (ok, text) = two_by_two(&["--wait-others"], "exec $INFO --init");
    assert!(!ok, "{text}");
    let refused = lines_with(&text, "the native engine's loads and stores reach one node; this job spans 2 nodes");
    assert_eq!(refused.len(), 4, "{text}");
    assert!(refused.iter().all(|l| l.contains("build and run with GPUSHMEM_ENGINE=nvshmem")), "{text}");
    // With one hostname the census sees one node: the native engine goes on (to the GPU check).
    let (_, text) = two_by_two(&["--same-hostname"], "exec $INFO --join");
    assert_eq!(lines_with(&text, "1 node(s)").len(), 4, "{text}");
}

#[test]
#[ignore = "needs root (mount and UTS namespaces); scripts/test.sh runs it as root"]
fn failures_across_nodes_are_errors_naming_what_and_where() {
    // No secret: every PE refuses to start, saying how to set it.
    // (--wait-others: the launcher lets every PE end on its own, and say why.)
    let (ok, text) = two_by_two(&["--wait-others"], "unset GPUSHMEM_BOOTSTRAP_SECRET; exec $INFO --join");
    assert!(!ok);
    assert_eq!(lines_with(&text, "GPUSHMEM_BOOTSTRAP_SECRET=$(openssl rand -hex 32)").len(), 4, "{text}");
    // A wrong secret on node 1's PE 3: refused; PE 0 names the refusal and the missing PE.
    let wrong = "[ $GPUSHMEM_RANK = 3 ] && export GPUSHMEM_BOOTSTRAP_SECRET=another-jobs-secret-0123456789; \
                 exec $INFO --join";
    let (ok, text) = two_by_two(&["--wait-others"], wrong);
    assert!(!ok);
    assert!(text.contains("PE 3: bootstrap refused tcp://127.0.0.1:") && text.contains("did not prove"), "{text}");
    assert!(text.contains("PE(s) [3] did not arrive") && text.contains("refused meanwhile"), "{text}");
    // A node that never arrives: node 1's PEs exit at once; node 0's time out naming them and the address.
    let (ok, text) = two_by_two(&["--wait-others"], "[ $GPUSHMEM_RANK -ge 2 ] && exit 0; exec $INFO --join");
    assert!(!ok);
    let missing = lines_with(&text, "PE(s) [2, 3] did not arrive");
    assert_eq!(missing.len(), 2, "{text}");
    assert!(missing.iter().all(|l| l.contains("tcp://127.0.0.1:")), "{text}");
    // A stray listener on the rendezvous port: PE 0 cannot listen and says why; nobody waits long.
    let stray = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = stray.local_addr().unwrap().port().to_string();
    let t0 = std::time::Instant::now();
    let (ok, text) = two_by_two(&["--bootstrap-port", &port], "exec $INFO --join");
    assert!(!ok);
    assert!(text.contains("another process listens on this port"), "{text}");
    assert!(t0.elapsed() < std::time::Duration::from_secs(30), "took {:?}: {text}", t0.elapsed());
    drop(stray);
}

/// Two network namespaces joined by a veth pair (10.77.<n>.1 and .2), removed when dropped.
struct Network {
    names: [String; 2],
}

impl Network {
    fn new() -> Network {
        let tag = std::process::id() % 10000;
        let names = [format!("gsim{tag}-0"), format!("gsim{tag}-1")];
        let net = Network { names: names.clone() };
        let (v0, v1) = (format!("gs{tag}a"), format!("gs{tag}b"));
        let subnet = format!("10.77.{}", tag % 250);
        let ip = |args: &[&str]| {
            let out = Command::new("ip").args(args).output().expect("running ip");
            assert!(out.status.success(), "ip {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        };
        for n in &names {
            ip(&["netns", "add", n]);
        }
        ip(&["link", "add", &v0, "type", "veth", "peer", "name", &v1]);
        for (k, v) in [&v0, &v1].into_iter().enumerate() {
            ip(&["link", "set", v, "netns", &names[k]]);
            ip(&["-n", &names[k], "addr", "add", &format!("{subnet}.{}/24", k + 1), "dev", v]);
            ip(&["-n", &names[k], "link", "set", v, "up"]);
            ip(&["-n", &names[k], "link", "set", "lo", "up"]);
        }
        net
    }

    /// The `--node-netns` prefix (node k's namespace is `<prefix><k>`).
    fn prefix(&self) -> String {
        self.names[0].trim_end_matches('0').to_string()
    }

    /// Node 0's address.
    fn node0(&self) -> String {
        format!("10.77.{}.1", std::process::id() % 10000 % 250)
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        for n in &self.names {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
    }
}

#[test]
#[ignore = "needs root and iproute2 (network namespaces); scripts/test.sh runs it where `ip netns` works"]
fn two_nodes_in_separate_network_namespaces_meet_over_a_veth_pair() {
    let net = Network::new();
    let (prefix, host) = (net.prefix(), net.node0());
    let (ok, text) = two_by_two(&["--node-netns", &prefix, "--bootstrap-host", &host], "exec $INFO --join");
    assert!(ok, "{text}");
    let joined = lines_with(&text, &format!("joined at tcp://{host}:"));
    assert_eq!(joined.len(), 4, "{text}");
    assert!(joined.iter().all(|l| l.contains("2 node(s)")), "{text}");
    // Node 1 has no loopback path to node 0: 127.0.0.1 there is its own.
    let (ok, text) =
        two_by_two(&["--node-netns", &prefix, "--bootstrap-host", "127.0.0.1", "--wait-others"], "exec $INFO --join");
    assert!(!ok);
    assert_eq!(lines_with(&text, "PE(s) [2, 3] did not arrive").len(), 2, "{text}");
}
