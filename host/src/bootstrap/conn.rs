//! A bootstrap connection and PE 0's listener, over a Unix-domain socket (one
//! node) or TCP (any node): the protocol in [`super::socket`] only sends and
//! receives bytes on their descriptors, alike for both.

use super::auth::{peer_cred, PeerCred};
use std::io;
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};

/// One end of a bootstrap connection.
pub(crate) enum Conn {
    /// To or from a process of this node (its user known from the kernel).
    Unix(UnixStream),
    /// To or from a process anywhere (nothing known of it but its address).
    Tcp(TcpStream),
}

impl AsRawFd for Conn {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            Conn::Unix(s) => s.as_raw_fd(),
            Conn::Tcp(s) => s.as_raw_fd(),
        }
    }
}

impl Conn {
    /// The other end's user and process, from the kernel: Unix sockets only.
    pub(crate) fn peer_cred(&self) -> Option<io::Result<PeerCred>> {
        match self {
            Conn::Unix(s) => Some(peer_cred(s)),
            Conn::Tcp(_) => None,
        }
    }

    /// The other end as errors name it: "pid P" (Unix) or its address (TCP).
    pub(crate) fn describe_peer(&self) -> String {
        match self {
            Conn::Unix(s) => peer_cred(s)
                .map_or_else(|e| format!("a process (credentials unknown: {e})"), |c| format!("pid {}", c.pid)),
            Conn::Tcp(s) => {
                s.peer_addr().map_or_else(|e| format!("a TCP peer (address unknown: {e})"), |a| format!("{a} (TCP)"))
            }
        }
    }
}

/// PE 0's listening socket, non-blocking.
pub(crate) enum Listener {
    /// At a path (`unix::listen_at`).
    Unix(UnixListener),
    /// On a TCP port (`tcp::listen_at`).
    Tcp(TcpListener),
}

impl AsRawFd for Listener {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            Listener::Unix(l) => l.as_raw_fd(),
            Listener::Tcp(l) => l.as_raw_fd(),
        }
    }
}

impl Listener {
    /// Accepts one waiting connection (`WouldBlock` when none waits).
    pub(crate) fn accept(&self) -> io::Result<Conn> {
        match self {
            Listener::Unix(l) => l.accept().map(|(s, _)| Conn::Unix(s)),
            Listener::Tcp(l) => {
                let (s, _) = l.accept()?;
                // Small messages, each awaited: no Nagle delay.
                let _ = s.set_nodelay(true);
                Ok(Conn::Tcp(s))
            }
        }
    }
}
