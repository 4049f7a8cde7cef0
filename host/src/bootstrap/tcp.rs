//! The TCP side of the socket bootstrap, for jobs whose PEs span nodes: PE 0's
//! listener and a PE's bounded, retried connect. Nothing over TCP says who
//! connected, so the job's secret is required ([`super::socket`] refuses to
//! start without one) and alone decides who joins.

use crate::{Error, Result};
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// The addresses `host:port` resolves to (getaddrinfo), IPv4 first, never
/// waiting past `deadline`: a resolver that does not answer is `TimedOut`
/// (the lookup runs on a thread of its own, left to finish on its own).
pub(super) fn resolve(host: &str, port: u16, deadline: Instant) -> io::Result<Vec<SocketAddr>> {
    if let Ok(ip) = host.parse::<std::net::IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let name = host.to_string();
    std::thread::Builder::new().name("gpushmem-resolve".into()).spawn(move || {
        let _ = tx.send((name.as_str(), port).to_socket_addrs().map(|a| a.collect::<Vec<SocketAddr>>()));
    })?;
    let left = deadline.saturating_duration_since(Instant::now());
    let mut addrs = match rx.recv_timeout(left) {
        Ok(r) => r?,
        Err(_) => {
            return Err(io::Error::new(io::ErrorKind::TimedOut, format!("resolving {host} took past the deadline")))
        }
    };
    addrs.sort_by_key(|a| a.is_ipv6());
    addrs.dedup();
    if addrs.is_empty() {
        return Err(io::Error::new(io::ErrorKind::NotFound, format!("{host} resolves to no address")));
    }
    Ok(addrs)
}

/// Whether `host` names this machine's loopback interface only: `localhost`
/// or a loopback address (a job on one machine, e.g. simulated nodes).
fn is_loopback_name(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// PE 0's TCP listener for a rendezvous at `host:port`: on the loopback
/// address when `host` is `localhost` or a loopback address, else on every
/// interface (IPv6 and IPv4 where the host has IPv6, else IPv4), since the
/// name other nodes know PE 0's node by often resolves on that node itself to
/// a loopback address (Debian and Ubuntu map a host's own name to 127.0.1.1 in
/// `/etc/hosts`). The job's secret, not the interface, keeps strangers out.
pub(super) fn listen_tcp(host: &str, port: u16) -> io::Result<TcpListener> {
    let l = if is_loopback_name(host) {
        let deadline = Instant::now() + Duration::from_secs(10);
        TcpListener::bind(resolve(host, port, deadline)?[0])?
    } else {
        // std sets SO_REUSEADDR (a port in TIME_WAIT after the last job is
        // free) and close-on-exec; a port another process listens on is
        // AddrInUse. `[::]` takes IPv4 too (Linux's default dual stack).
        match TcpListener::bind(SocketAddr::from(([0u16; 8], port))) {
            Ok(l) => l,
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => return Err(e),
            Err(_) => TcpListener::bind(SocketAddr::from(([0, 0, 0, 0], port)))?,
        }
    };
    l.set_nonblocking(true)?;
    Ok(l)
}

/// Connects to `addr`, never waiting past `deadline`: a host that does not
/// answer (its packets dropped) fails with `TimedOut` at the deadline.
pub(super) fn dial_tcp(addr: SocketAddr, deadline: Instant) -> io::Result<TcpStream> {
    let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
    let s = TcpStream::connect_timeout(&addr, left)?;
    let _ = s.set_nodelay(true);
    Ok(s)
}

/// PE 0's listener for a rendezvous at `host:port` ([`listen_tcp`]), with
/// errors that say what to change.
pub(super) fn listen_at(host: &str, port: u16) -> Result<TcpListener> {
    listen_tcp(host, port).map_err(|source| {
        let hint = match source.kind() {
            io::ErrorKind::AddrInUse => {
                "another process listens on this port (another job, or a stray server): choose another port"
            }
            io::ErrorKind::AddrNotAvailable => "PE 0's node has no such address: run rank 0 on the host named there",
            io::ErrorKind::PermissionDenied => "ports below 1024 need privileges: choose a port from 1024 up",
            _ => "check the host name and port",
        };
        Error::BootstrapIo { me: 0, what: format!("listen at tcp://{host}:{port} ({hint})"), source }
    })
}

/// PE `me` connecting to PE 0 at `host:port`: resolved and connected again
/// and again while PE 0 is not up yet (refused, unreachable), each attempt
/// bounded, never past `deadline`. The timeout names the address and the last
/// reason.
pub(super) fn dial_pe0(me: usize, host: &str, port: u16, timeout: Duration, deadline: Instant) -> Result<TcpStream> {
    let at = format!("tcp://{host}:{port}");
    // Resolved once, again only while resolving fails: the retries below wait
    // for PE 0 to listen, not for the name to change.
    let mut resolved: Option<Vec<SocketAddr>> = None;
    loop {
        if resolved.is_none() {
            resolved = resolve(host, port, deadline).ok();
        }
        let attempt =
            resolved.clone().ok_or_else(|| io::Error::other(format!("{host} did not resolve"))).and_then(|addrs| {
                let mut err = None;
                for a in addrs {
                    match dial_tcp(a, deadline) {
                        Ok(s) => return Ok(s),
                        Err(e) => err = Some(e),
                    }
                }
                Err(err.unwrap_or_else(|| io::ErrorKind::NotFound.into()))
            });
        let last = match attempt {
            Ok(s) => return Ok(s),
            // PE 0 not up yet, a route or a name (DNS of a node coming up) not
            // there yet, a full listen queue: worth another try until the
            // deadline. Lookup failures have no stable error kind: all retried.
            Err(e) => e,
        };
        let now = Instant::now();
        if now >= deadline {
            let what = format!(
                "connect to PE 0 at {at}: last attempt: {last} (is rank 0 running on {host}, and does this node \
                 reach it there?)"
            );
            return Err(Error::BootstrapTimeout { me, what, timeout, missing: vec![0] });
        }
        std::thread::sleep((deadline - now).min(Duration::from_millis(20)));
    }
}

#[cfg(test)]
mod tests {
    use super::super::conn::Listener;
    use super::*;

    #[test]
    fn loopback_listener_and_dial() {
        let l = listen_tcp("127.0.0.1", 0).unwrap();
        let addr = l.local_addr().unwrap();
        assert!(addr.ip().is_loopback());
        // A host name that is not a loopback literal: every interface, whatever it resolves to here.
        let any = listen_tcp("this-name-need-not-resolve", 0).unwrap();
        assert!(any.local_addr().unwrap().ip().is_unspecified(), "{:?}", any.local_addr());
        let deadline = Instant::now() + Duration::from_secs(5);
        let c = dial_tcp(addr, deadline).unwrap();
        let listener = Listener::Tcp(l);
        let s = loop {
            match listener.accept() {
                Ok(s) => break s,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(1)),
                Err(e) => panic!("{e}"),
            }
        };
        assert!(s.peer_cred().is_none());
        assert!(s.describe_peer().contains("127.0.0.1"), "{}", s.describe_peer());
        drop(c);
        // Nothing listens any more: refused, worth retrying.
        drop(listener);
        let e = dial_tcp(addr, deadline).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused, "{e}");
    }

    #[test]
    fn a_taken_port_is_addr_in_use() {
        let l = listen_tcp("127.0.0.1", 0).unwrap();
        let port = l.local_addr().unwrap().port();
        let e = listen_tcp("127.0.0.1", port).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse, "{e}");
    }
}
