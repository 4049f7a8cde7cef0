//! The Unix-domain side of the socket bootstrap: PE 0's socket file (claimed,
//! made with mode 0600, removed when done) and the checks that a connecting PE
//! reached a listener of this user bound at the very path it was given.

use super::auth::{peer_cred, PeerCred};
use super::rendezvous::my_euid;
use crate::{Error, Result};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::time::{Duration, Instant};

/// Makes `path` free for PE 0's socket: removes a stale socket file, but
/// refuses to take over one that a live process is listening on (whether or
/// not it accepts), and refuses a symbolic link there.
fn claim(path: &Path, deadline: Instant) -> Result<()> {
    refuse_symlink(0, path)?;
    let taken = |why: String| Error::Config {
        name: "bootstrap rendezvous path (GPUSHMEM_BOOTSTRAP)".into(),
        value: path.display().to_string(),
        why,
    };
    let e = match dial(path, deadline) {
        Ok(s) => {
            return Err(taken(format!(
                "another process ({}) is already serving as PE 0 there: two jobs share this path, \
                 or two processes were given rank 0",
                peer_cred(&s).map_or_else(|e| format!("credentials unknown: {e}"), describe)
            )))
        }
        Err(e) => e,
    };
    if let Some(why) = held(path, &e) {
        return Err(taken(format!("{why}: another job, or another user's process, holds this path; choose another")));
    }
    match e {
        e if e.kind() == io::ErrorKind::NotFound => Ok(()),
        // Never delete what is not a socket: the path may be a mistake.
        _ if !std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket()) => {
            Err(taken("exists and is not a socket".into()))
        }
        _ => match std::fs::remove_file(path) {
            Ok(()) => {
                log::debug!("PE 0: removed stale socket {}", path.display());
                Ok(())
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(Error::BootstrapIo {
                me: 0,
                what: format!("remove the stale socket file {}", path.display()),
                source,
            }),
        },
    }
}

/// [`Error::BootstrapRefused`] for PE `me` if `path` is a symbolic link: the
/// bootstrap meets at the path it was given, never where a link leads (which
/// whoever could write the link's directory chose).
///
/// This check comes before the path is used, so it only makes the common case
/// clear: a link put there after it is what [`check_listener`] catches.
fn refuse_symlink(me: usize, path: &Path) -> Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => {
            let target = std::fs::read_link(path).map_or_else(|_| "?".into(), |t| t.display().to_string());
            Err(Error::BootstrapRefused {
                me,
                path: path.to_path_buf(),
                why: format!(
                    "is a symbolic link (to {target}); the bootstrap does not follow links: set \
                     GPUSHMEM_BOOTSTRAP to the socket path itself"
                ),
            })
        }
        _ => Ok(()),
    }
}

/// [`Error::BootstrapRefused`] for PE `me` unless the listener `stream` reached
/// (running as `cred`) is bound at `path` itself.
///
/// `connect` follows symbolic links, in the last component and in the
/// directories above it, and a check of the path before connecting can always
/// be undone before the connect (another user flipping a file into a link to
/// another job's socket). The listener's address, read from the connection
/// (`getpeername`: the path its owner gave to `bind`), cannot: it is a property
/// of the socket reached, not of the path walked. A socket of this user bound
/// at exactly this path was put there by a process of this user that was told
/// to meet here; the job's secret decides the rest. A hard link to another
/// socket is caught the same way.
fn check_listener(me: usize, path: &Path, stream: &UnixStream, cred: PeerCred) -> Result<()> {
    let bound = stream.peer_addr().ok().and_then(|a| a.as_pathname().map(Path::to_path_buf));
    if bound.as_deref() == Some(path) {
        return Ok(());
    }
    let at = bound.map_or_else(|| "no path".into(), |b| b.display().to_string());
    Err(Error::BootstrapRefused {
        me,
        path: path.to_path_buf(),
        why: format!(
            "the process listening there ({}) is bound at {at}, not at this path: the path led to another \
             socket (through a symbolic link or a link made after it was checked), perhaps another job's; \
             nothing was sent to it",
            describe(cred)
        ),
    })
}

/// Why a failed [`dial`] of `path` (failing with `e`) shows that a process
/// holds the path, naming the socket file's owner; `None` when it does not (no
/// file, or a stale one: `ECONNREFUSED`). Two cases: a listener that accepted
/// nothing until the deadline (`WouldBlock`), and a socket this user may not
/// connect to (`EACCES`: another user's socket of mode 0600, a live listener
/// as far as anyone but its owner can tell, and never to be removed as stale).
fn held(path: &Path, e: &io::Error) -> Option<String> {
    match e.kind() {
        io::ErrorKind::WouldBlock => Some(format!(
            "a process listens there but accepted no connection before the timeout (the socket file is owned by {})",
            owner(path)
        )),
        io::ErrorKind::PermissionDenied => Some(format!(
            "this user may not connect to the socket there (the socket file is owned by {}; connecting \
             failed: {e})",
            owner(path)
        )),
        _ => None,
    }
}

/// "uid U" of the owner of the file at `path` (not following a link), as
/// errors name who holds a socket that does not answer.
fn owner(path: &Path) -> String {
    std::fs::symlink_metadata(path).map_or_else(|e| format!("an unknown user ({e})"), |m| format!("uid {}", m.uid()))
}

/// "uid U, pid P", as errors name a process.
pub(super) fn describe(c: PeerCred) -> String {
    format!("uid {}, pid {}", c.uid, c.pid)
}

/// Removes a file when dropped.
pub(super) struct RemoveOnDrop<'a>(&'a Path);

impl Drop for RemoveOnDrop<'_> {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.0);
    }
}

/// The address of a Unix socket at `path`, and its length.
fn socket_addr(path: &Path) -> io::Result<(libc::sockaddr_un, libc::socklen_t)> {
    // SAFETY: sockaddr_un is plain data; all zeroes is a valid value.
    let mut a: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    a.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let b = path.as_os_str().as_bytes();
    if b.is_empty() || b.len() >= a.sun_path.len() || b.contains(&0) {
        let why = format!("not a socket address: empty, over {} bytes, or with a NUL byte", a.sun_path.len() - 1);
        return Err(io::Error::new(io::ErrorKind::InvalidInput, why));
    }
    for (d, s) in a.sun_path.iter_mut().zip(b) {
        *d = *s as libc::c_char;
    }
    let len = std::mem::offset_of!(libc::sockaddr_un, sun_path) + b.len() + 1;
    Ok((a, len as libc::socklen_t))
}

/// A fresh Unix stream socket, close-on-exec and non-blocking.
fn unix_socket() -> io::Result<OwnedFd> {
    let kind = libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK;
    // SAFETY: socket takes no pointers.
    let fd = unsafe { libc::socket(libc::AF_UNIX, kind, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Connects to the socket at `path`, never waiting past `deadline`.
///
/// A blocking `connect` to a listener whose queue is full waits until it
/// accepts, for ever if it never does. Non-blocking, that is `WouldBlock` at
/// once: retried until `deadline`, then returned. Nothing listening (no file,
/// a stale one) fails at once, for the caller to retry or not.
fn dial(path: &Path, deadline: Instant) -> io::Result<UnixStream> {
    let (addr, len) = socket_addr(path)?;
    let fd = unix_socket()?;
    loop {
        // SAFETY: connects our own descriptor to a live sockaddr_un of `len` bytes.
        let rc = unsafe { libc::connect(fd.as_raw_fd(), (&addr as *const libc::sockaddr_un).cast(), len) };
        if rc == 0 {
            return Ok(UnixStream::from(fd));
        }
        let e = io::Error::last_os_error();
        let now = Instant::now();
        match e.kind() {
            io::ErrorKind::Interrupted => {}
            io::ErrorKind::WouldBlock if now < deadline => {
                std::thread::sleep((deadline - now).min(Duration::from_millis(5)))
            }
            _ => return Err(e),
        }
    }
}

/// PE 0's listening socket at `path`, non-blocking, its file of mode 0600.
///
/// The mode is the socket's own, set before `bind`, which on Linux makes the
/// file with it (less the umask): there is no moment when the file is open to
/// others. Should a kernel not do so, the file is set to 0600 after `bind`,
/// still before `listen` lets anyone connect.
fn listen(path: &Path) -> io::Result<UnixListener> {
    let (addr, len) = socket_addr(path)?;
    let fd = unix_socket()?;
    // SAFETY: changes the mode of our own descriptor.
    if unsafe { libc::fchmod(fd.as_raw_fd(), 0o600) } != 0 {
        log::debug!("PE 0: fchmod of the socket failed: {}", io::Error::last_os_error());
    }
    // SAFETY: binds our own descriptor to a live sockaddr_un of `len` bytes.
    if unsafe { libc::bind(fd.as_raw_fd(), (&addr as *const libc::sockaddr_un).cast(), len) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let meta = std::fs::symlink_metadata(path)?;
    if meta.file_type().is_socket() && meta.uid() == my_euid() && meta.mode() & 0o077 != 0 {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    }
    // SAFETY: listens on our own, bound descriptor.
    if unsafe { libc::listen(fd.as_raw_fd(), libc::SOMAXCONN) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(UnixListener::from(fd))
}

/// PE 0's listener at `path`, once `path` is free ([`claim`]); the file is
/// removed when the returned guard drops.
pub(super) fn listen_at(path: &Path, deadline: Instant) -> Result<(UnixListener, RemoveOnDrop<'_>)> {
    claim(path, deadline)?;
    let l = listen(path).map_err(|source| Error::BootstrapIo {
        me: 0,
        what: format!("listen at {}", path.display()),
        source,
    })?;
    Ok((l, RemoveOnDrop(path)))
}

/// PE `me` connecting to PE 0 at `path` (retrying while PE 0 is not up yet,
/// never past `deadline`), then checking that the listener runs as this user
/// and is bound at `path` itself: the stream and PE 0's credentials.
pub(super) fn dial_pe0(me: usize, path: &Path, timeout: Duration, deadline: Instant) -> Result<(UnixStream, PeerCred)> {
    let refuse = |why: String| Error::BootstrapRefused { me, path: path.to_path_buf(), why };
    let stream = loop {
        // Checked before every attempt: PE 0 may not have made the path yet.
        refuse_symlink(me, path)?;
        match dial(path, deadline) {
            Ok(s) => break s,
            // A listener that accepted nothing until the deadline.
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let why = held(path, &e).unwrap_or_default();
                let what = format!("connect to PE 0 at {} ({why})", path.display());
                return Err(Error::BootstrapTimeout { me, what, timeout, missing: vec![0] });
            }
            // Another user's socket: not this job's PE 0, whatever waits there.
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                let why = held(path, &e).unwrap_or_default();
                return Err(Error::BootstrapRefused {
                    me,
                    path: path.to_path_buf(),
                    why: format!("{why}: it is not this job's PE 0, and nothing was sent to it"),
                });
            }
            // PE 0 is not listening yet (no file, or a stale one).
            Err(e) if matches!(e.kind(), io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused) => {
                let now = Instant::now();
                if now >= deadline {
                    return Err(Error::BootstrapTimeout {
                        me,
                        what: format!(
                            "connect to PE 0 at {} (a socket of this node: a job whose PEs span nodes meets \
                             over TCP, GPUSHMEM_BOOTSTRAP=tcp://HOST:PORT)",
                            path.display()
                        ),
                        timeout,
                        missing: vec![0],
                    });
                }
                std::thread::sleep((deadline - now).min(Duration::from_millis(10)));
            }
            Err(source) => {
                return Err(Error::BootstrapIo { me, what: format!("connect to {}", path.display()), source })
            }
        }
    };
    let cred = peer_cred(&stream).map_err(|source| Error::BootstrapIo {
        me,
        what: format!("read the credentials of the process at {}", path.display()),
        source,
    })?;
    if cred.uid != my_euid() {
        return Err(refuse(format!(
            "the process listening there ({}) runs as another user, not as this one (uid {}): \
             it is not this job's PE 0, and nothing was sent to it",
            describe(cred),
            my_euid()
        )));
    }
    check_listener(me, path, &stream, cred)?;
    Ok((stream, cred))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listener_bound_elsewhere_is_refused_after_connecting() {
        // What a link put in place after the path was checked leads to: the
        // connect follows it, and the listener's own address gives it away.
        let dir = std::env::temp_dir().join(format!("gpushmem-socket-unit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        let (real, link, hard) = (dir.join("real.sock"), dir.join("link.sock"), dir.join("hard.sock"));
        let _listener = UnixListener::bind(&real).unwrap();
        std::os::unix::fs::symlink(&real, &link).unwrap();
        std::fs::hard_link(&real, &hard).unwrap();
        for via in [&link, &hard] {
            let s = UnixStream::connect(via).unwrap();
            let e = check_listener(1, via, &s, peer_cred(&s).unwrap()).unwrap_err().to_string();
            assert!(e.contains(&format!("bound at {}", real.display())) && e.contains("nothing was sent"), "{e}");
        }
        let s = UnixStream::connect(&real).unwrap();
        check_listener(1, &real, &s, peer_cred(&s).unwrap()).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
