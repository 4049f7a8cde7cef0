//! Who can join a socket bootstrap (issue: a bootstrap that lets no one else in).
//!
//! - Jobs with different secrets, or a PE without the job's secret, never join
//!   each other: the PE is refused with a clear error, and PE 0 keeps waiting
//!   for the real one.
//! - A process of another user gets nothing: at the default path it cannot
//!   enter this user's private directory; where a directory is shared, the
//!   connecting PE sees its uid and sends it no byte, and PE 0 closes its
//!   connection without a byte.
//!
//! - A PE 0 that cannot prove the job's secret is refused by the PE; a
//!   symbolic link at an explicit rendezvous path is refused by every PE.
//! - A flood of connections from another user neither holds PE 0 past its
//!   timeout nor makes its error unbounded.
//!
//! The tests with another user fork a child that drops to uid/gid 65534
//! (`nobody`), so they need root (CI runs as root); without root they fail
//! saying so, rather than pass without checking.

mod common;

use common::{env, env_with, socket_path, SECRET};
use gpushmem::bootstrap::env::LaunchEnv;
use gpushmem::bootstrap::socket::SocketBootstrap;
use gpushmem::bootstrap::Bootstrap;
use gpushmem::Error;
use std::ffi::CString;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The other user the squatter runs as.
const NOBODY: u32 = 65534;

fn connect(e: LaunchEnv, t: Duration) -> std::thread::JoinHandle<gpushmem::Result<SocketBootstrap>> {
    std::thread::spawn(move || SocketBootstrap::connect(&e, t))
}

fn refused_why(r: gpushmem::Result<SocketBootstrap>) -> String {
    match r {
        Err(Error::BootstrapRefused { why, .. }) => why,
        other => panic!("expected BootstrapRefused, got {:?}", other.map(|_| ())),
    }
}

#[test]
fn pe_without_the_job_secret_is_refused_and_the_job_goes_on() {
    let path = socket_path("secret");
    let t = Duration::from_secs(10);
    let root = connect(env(0, 2, &path), t);
    let t0 = Instant::now();
    // Another job's PE 1 (other secret), then one with no secret: both refused at once.
    let other = env_with(1, 2, &path, Some("another-jobs-secret-fedcba9876543210"));
    let why = refused_why(SocketBootstrap::connect(&other, t));
    assert!(why.contains("did not prove this job's secret") && why.contains("GPUSHMEM_BOOTSTRAP_SECRET"), "{why}");
    let why = refused_why(SocketBootstrap::connect(&env_with(1, 2, &path, None), t));
    assert!(why.contains("PE 0") && why.contains("refused this PE"), "{why}");
    assert!(t0.elapsed() < Duration::from_secs(3), "refusals took {:?}", t0.elapsed());
    // PE 0 was not disturbed: the job's real PE 1 joins.
    let me = SocketBootstrap::connect(&env(1, 2, &path), t).unwrap();
    let b0 = root.join().unwrap().unwrap();
    let h = std::thread::spawn(move || b0.allgather(b"zero").unwrap());
    assert_eq!(me.allgather(b"one").unwrap(), vec![b"zero".to_vec(), b"one".to_vec()]);
    h.join().unwrap();
}

#[test]
fn pe_zero_without_the_secret_is_not_trusted() {
    // PE 0 of a job without a secret (or another secret) at the same path: the
    // PE that has one does not take its "every PE connected".
    let path = socket_path("root-secret");
    let t = Duration::from_secs(5);
    let root = connect(env_with(0, 2, &path, None), t);
    let why = refused_why(SocketBootstrap::connect(&env(1, 2, &path), t));
    assert!(why.contains("refused this PE"), "{why}");
    // PE 0 names what it refused once its wait ends.
    match root.join().unwrap() {
        Err(Error::BootstrapTimeout { what, missing, .. }) => {
            assert_eq!(missing, vec![1]);
            assert!(what.contains("refused") && what.contains("did not prove"), "{what}");
        }
        other => panic!("expected a timeout naming the refusal, got {:?}", other.map(|_| ())),
    }
}

#[test]
fn default_rendezvous_is_a_private_directory() {
    let tmp = scratch_dir("default");
    let get = |rank: usize| {
        let tmp = tmp.to_str().unwrap().to_string();
        let vars = [
            ("PMI_RANK", rank.to_string()),
            ("PMI_SIZE", "2".into()),
            ("PMIX_NAMESPACE", "job-a".into()),
            ("TMPDIR", tmp),
            ("GPUSHMEM_BOOTSTRAP_SECRET", SECRET.into()),
        ];
        LaunchEnv::from_lookup(|k| vars.iter().find(|v| v.0 == k).map(|v| v.1.clone())).unwrap().unwrap()
    };
    let (e0, e1) = (get(0), get(1));
    let dir = e0.private_dir.clone().unwrap();
    assert_eq!(e0.rendezvous, dir.join("pmix-job-a.sock"));
    let t = Duration::from_secs(10);
    let (h0, h1) = (connect(e0, t), connect(e1, t));
    let (b0, b1) = (h0.join().unwrap().unwrap(), h1.join().unwrap().unwrap());
    assert_eq!(b0.size() + b1.size(), 4);
    let meta = std::fs::symlink_metadata(&dir).unwrap();
    assert!(meta.is_dir() && meta.permissions().mode() & 0o077 == 0, "{:o}", meta.permissions().mode());

    // The same directory opened up to others is refused, by every PE, naming it.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    for rank in 0..2 {
        match SocketBootstrap::connect(&get(rank), t) {
            Err(e @ Error::BootstrapRefused { .. }) => {
                let msg = e.to_string();
                assert!(msg.contains(&dir.display().to_string()) && msg.contains("0755"), "{msg}");
            }
            other => panic!("PE {rank}: expected BootstrapRefused, got {:?}", other.map(|_| ())),
        }
    }
    // A symlink in its place (to a private directory) is refused too.
    std::fs::remove_dir(&dir).unwrap();
    let elsewhere = tmp.join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::fs::set_permissions(&elsewhere, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &dir).unwrap();
    let why = refused_why(SocketBootstrap::connect(&get(1), t));
    assert!(why.contains("symbolic link"), "{why}");
    std::fs::remove_dir_all(&tmp).unwrap();
}

#[test]
fn squatter_of_another_user_at_the_default_path() {
    need_root();
    // The squatter comes first and makes the directory our default path lives in.
    let tmp = scratch_dir("squat-default");
    let vars = |rank: usize| {
        let vars = [
            ("SLURM_PROCID", rank.to_string()),
            ("SLURM_NTASKS", "2".into()),
            ("SLURM_JOB_ID", "4242".into()),
            ("SLURM_STEP_ID", "0".into()),
            ("TMPDIR", tmp.to_str().unwrap().to_string()),
        ];
        LaunchEnv::from_lookup(|k| vars.iter().find(|v| v.0 == k).map(|v| v.1.clone())).unwrap().unwrap()
    };
    let e1 = vars(1);
    let dir = e1.private_dir.clone().unwrap();
    let squatter = Squatter::listen(&e1.rendezvous, Some(&dir));
    assert_eq!(squatter.status, 0, "the squatter could not listen");
    for rank in [1, 0] {
        match SocketBootstrap::connect(&vars(rank), Duration::from_secs(5)) {
            Err(e @ Error::BootstrapRefused { .. }) => {
                let msg = e.to_string();
                assert!(msg.contains(&dir.display().to_string()) && msg.contains("uid 65534"), "{msg}");
            }
            other => panic!("PE {rank}: expected BootstrapRefused, got {:?}", other.map(|_| ())),
        }
    }
    // Refused before connecting: the squatter never even had a connection.
    assert_eq!(squatter.bytes_received(), None, "a PE connected to the squatter");

    // Once the directory is ours (as a first job makes it), the squatter cannot even listen there.
    let tmp2 = scratch_dir("squat-default-2");
    // SAFETY: geteuid cannot fail and touches no memory of ours.
    let dir2 = tmp2.join(format!("gpushmem-{}", unsafe { libc::geteuid() }));
    std::fs::create_dir(&dir2).unwrap();
    std::fs::set_permissions(&dir2, std::fs::Permissions::from_mode(0o700)).unwrap();
    let squatter2 = Squatter::listen(&dir2.join("slurm-4242.0.sock"), None);
    assert_eq!(squatter2.status, libc::EACCES, "the squatter got into our private directory");
    std::fs::remove_dir_all(&tmp).unwrap();
    std::fs::remove_dir_all(&tmp2).unwrap();
}

#[test]
fn squatter_of_another_user_at_a_shared_path_gets_nothing() {
    need_root();
    // GPUSHMEM_BOOTSTRAP pointing into a directory everyone may write (like /tmp).
    let tmp = scratch_dir("squat-shared");
    let path = tmp.join("job.sock");
    let squatter = Squatter::listen(&path, None);
    assert_eq!(squatter.status, 0, "the squatter could not listen");
    let t0 = Instant::now();
    let why = refused_why(SocketBootstrap::connect(&env(1, 2, &path), Duration::from_secs(10)));
    assert!(why.contains("uid 65534") && why.contains("nothing was sent"), "{why}");
    assert!(t0.elapsed() < Duration::from_secs(2), "took {:?}", t0.elapsed());
    // PE 0 will not take over the live squatter's socket either.
    match SocketBootstrap::connect(&env(0, 2, &path), Duration::from_secs(2)) {
        Err(Error::Config { why, .. }) => assert!(why.contains("uid 65534"), "{why}"),
        other => panic!("expected a Config error naming the squatter, got {:?}", other.map(|_| ())),
    }
    assert_eq!(squatter.bytes_received(), Some(0), "the squatter received bytes");
    std::fs::remove_dir_all(&tmp).unwrap();
}

#[test]
fn connection_from_another_user_gets_no_byte_from_pe_zero() {
    need_root();
    let tmp = scratch_dir("intruder");
    let path = tmp.join("job.sock");
    let t = Duration::from_secs(10);
    let root = connect(env(0, 2, &path), t);
    wait_for(&path);
    // As if PE 0's umask left the socket open to everyone.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777)).unwrap();
    // (The file appears at bind, before PE 0 listens: the intruder retries a refused connect.)
    let intruder = Intruder::connect(&path);
    assert_eq!(intruder.status, 0, "the intruder could not connect");
    assert_eq!(intruder.bytes_received(), Some(0), "PE 0 sent bytes to another user's process");
    // PE 0 goes on: the real PE 1 joins.
    let b1 = SocketBootstrap::connect(&env(1, 2, &path), t).unwrap();
    let b0 = root.join().unwrap().unwrap();
    let h = std::thread::spawn(move || b0.barrier());
    b1.barrier().unwrap();
    h.join().unwrap().unwrap();
    std::fs::remove_dir_all(&tmp).unwrap();
}

#[test]
fn flood_of_connections_from_another_user_does_not_hold_pe_zero() {
    need_root();
    let tmp = scratch_dir("flood");
    let path = tmp.join("job.sock");
    let t = Duration::from_secs(2);
    let t0 = Instant::now();
    // No PE 1 ever comes: PE 0 must time out on time, whatever else connects.
    let root = connect(env(0, 2, &path), t);
    wait_for(&path);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777)).unwrap();
    let flood = Child::flood(&path, Duration::from_secs(6));
    assert_eq!(flood.status, 0, "the flood could not start");
    let r = root.join().unwrap();
    let took = t0.elapsed();
    assert!(took < t + Duration::from_millis(1500), "PE 0 returned {took:?} after it started, timeout {t:?}");
    let msg = match r {
        Err(e @ Error::BootstrapTimeout { .. }) => e.to_string(),
        other => panic!("expected a timeout, got {:?}", other.map(|_| ())),
    };
    assert!(msg.len() < 4096, "the error is {} bytes long: {}…", msg.len(), &msg[..4096]);
    assert!(msg.contains(&path.display().to_string()), "the error does not name the path: {msg}");
    // "N connection(s) refused meanwhile: <8 reasons> … and N-8 more"
    let count: usize = msg
        .split(" connection(s) refused meanwhile")
        .next()
        .and_then(|head| head.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no refused count in: {msg}"));
    assert!(count > 8, "only {count} connections were refused: {msg}");
    assert!(msg.contains(&format!("… and {} more", count - 8)), "{msg}");
    assert_eq!(msg.matches("uid 65534").count(), 8, "{msg}");
    drop(flood);
    std::fs::remove_dir_all(&tmp).unwrap();
}

#[test]
fn pe_zero_that_cannot_prove_the_secret_is_refused() {
    // A fake PE 0 of this same user: it speaks the protocol, but its "every PE
    // connected" carries a proof made without the job's secret.
    let path = socket_path("fake-root");
    let listener = UnixListener::bind(&path).unwrap();
    let fake = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let challenge = [&MAGIC.to_le_bytes()[..], &[0x42; 16]].concat();
        s.write_all(&frame(CHALLENGE, 0, &challenge)).unwrap();
        let mut h = [0u8; 21];
        s.read_exact(&mut h).unwrap();
        let from = u32::from_le_bytes(h[1..5].try_into().unwrap());
        let len = u64::from_le_bytes(h[13..21].try_into().unwrap());
        assert_eq!((h[0], from, len), (HELLO, 1, 16 + 16 + 32), "not the hello of PE 1");
        let mut hello = vec![0u8; len as usize];
        s.read_exact(&mut hello).unwrap();
        assert_eq!(hello[..8], MAGIC.to_le_bytes());
        assert_eq!(u64::from_le_bytes(hello[8..16].try_into().unwrap()), 2);
        s.write_all(&frame(READY, 0, &[0x5a; 32])).unwrap();
        // Until PE 1 hangs up.
        let _ = s.read_to_end(&mut Vec::new());
    });
    let t0 = Instant::now();
    let why = refused_why(SocketBootstrap::connect(&env(1, 2, &path), Duration::from_secs(10)));
    assert!(why.contains("did not prove") && why.contains("GPUSHMEM_BOOTSTRAP_SECRET"), "{why}");
    assert!(t0.elapsed() < Duration::from_secs(3), "took {:?}", t0.elapsed());
    fake.join().unwrap();
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn symlink_at_an_explicit_path_is_refused() {
    let real = socket_path("symlink-target");
    let link = socket_path("symlink");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let t = Duration::from_secs(10);
    let is_link_refusal = |r: gpushmem::Result<SocketBootstrap>| match r {
        Err(e @ Error::BootstrapRefused { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains(&link.display().to_string()) && msg.contains("is a symbolic link"), "{msg}");
        }
        other => panic!("expected BootstrapRefused, got {:?}", other.map(|_| ())),
    };
    // PE 0 does not listen where the link leads.
    is_link_refusal(SocketBootstrap::connect(&env(0, 2, &link), t));
    assert!(std::fs::symlink_metadata(&real).is_err(), "PE 0 made a socket at the link's target");
    // A PE given the link does not connect through it, even to the real PE 0 of its job.
    let root = connect(env(0, 2, &real), t);
    wait_for(&real);
    let t0 = Instant::now();
    is_link_refusal(SocketBootstrap::connect(&env(1, 2, &link), t));
    assert!(t0.elapsed() < Duration::from_secs(2), "took {:?}", t0.elapsed());
    // PE 0 was not disturbed.
    let b1 = SocketBootstrap::connect(&env(1, 2, &real), t).unwrap();
    let b0 = root.join().unwrap().unwrap();
    let h = std::thread::spawn(move || b0.barrier());
    b1.barrier().unwrap();
    h.join().unwrap().unwrap();
    std::fs::remove_file(&link).unwrap();
}

// ---- helpers ----

/// The bootstrap's wire format, written by hand (see `socket.rs`).
const MAGIC: u64 = u64::from_le_bytes(*b"gpshmBS2");
const HELLO: u8 = 1;
const READY: u8 = 2;
const CHALLENGE: u8 = 8;

/// kind u8, from u32 LE, round u64 LE (0), length u64 LE, payload.
fn frame(kind: u8, from: u32, payload: &[u8]) -> Vec<u8> {
    [&[kind][..], &from.to_le_bytes(), &0u64.to_le_bytes(), &(payload.len() as u64).to_le_bytes(), payload].concat()
}

/// Waits (up to 10 s) until something exists at `path`.
fn wait_for(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::fs::symlink_metadata(path).is_err() {
        assert!(Instant::now() < deadline, "{} did not appear", path.display());
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn need_root() {
    // SAFETY: geteuid cannot fail and touches no memory of ours.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(euid, 0, "this test runs a process of another user and needs root (CI runs as root)");
}

/// A fresh directory that every user may write, like /tmp (mode 1777).
fn scratch_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("gpushmem-sec-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir(&d).unwrap();
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o1777)).unwrap();
    d
}

fn cstr(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap()
}

fn sockaddr(p: &Path) -> libc::sockaddr_un {
    // SAFETY: sockaddr_un is plain data; all zeroes is a valid value.
    let mut a: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    a.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let b = p.as_os_str().as_bytes();
    assert!(b.len() < a.sun_path.len());
    for (d, s) in a.sun_path.iter_mut().zip(b) {
        *d = *s as libc::c_char;
    }
    a
}

/// What the forked child does.
#[derive(Clone, Copy)]
enum Mode {
    /// Listens at the path, accepts one connection, counts its bytes, reports,
    /// and then keeps listening until killed (so the path stays a live socket).
    Listen,
    /// Connects (retrying a refused connect for up to 2 s), sends a hello-sized
    /// message, counts the bytes it receives and reports.
    Connect,
    /// Connects and closes, again and again, until this many milliseconds
    /// have passed; reports the number of connections made.
    Flood(i64),
}

/// A forked child running as uid/gid 65534 (no supplementary groups, no
/// descriptor of ours but its pipe): a squatter, an intruder or a flood
/// ([`Mode`]); it reports through a pipe. Between fork and `_exit` it makes
/// raw system calls only, as a fork of a multi-threaded process must.
struct Child {
    pid: libc::pid_t,
    rx: OwnedFd,
    /// 0: listening / connected / started; else the errno of the failed step.
    status: i32,
}

type Squatter = Child;
type Intruder = Child;

impl Child {
    /// Listens at `sock` as the other user; `make_dir`: first creates that
    /// directory (mode 0777) as the other user.
    fn listen(sock: &Path, make_dir: Option<&Path>) -> Child {
        Child::start(sock, make_dir, Mode::Listen)
    }

    /// Connects to `sock` as the other user and sends a few bytes first.
    fn connect(sock: &Path) -> Child {
        Child::start(sock, None, Mode::Connect)
    }

    /// Connects to `sock` and closes, as the other user, over and over for `within`.
    fn flood(sock: &Path, within: Duration) -> Child {
        Child::start(sock, None, Mode::Flood(within.as_millis() as i64))
    }

    fn start(sock: &Path, make_dir: Option<&Path>, mode: Mode) -> Child {
        let addr = sockaddr(sock);
        let sock_c = cstr(sock);
        let dir_c = make_dir.map(cstr);
        let mut fds = [0; 2];
        // SAFETY: pipe2 writes two descriptors into a live array of two.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        // SAFETY: the child makes async-signal-safe calls only, on data prepared above, then _exits.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            // SAFETY: raw system calls on live buffers; the process ends with _exit.
            unsafe { child_body(fds[1], &addr, &sock_c, dir_c.as_ref(), mode) }
        }
        // SAFETY: fds[1] is ours; the child holds its own copy.
        unsafe { libc::close(fds[1]) };
        // SAFETY: fds[0] is a fresh descriptor owned by nobody else.
        let rx = unsafe { OwnedFd::from_raw_fd(fds[0]) };
        let mut status = [0u8; 4];
        read_full(&rx, &mut status, Duration::from_secs(10));
        Child { pid, rx, status: i32::from_le_bytes(status) }
    }

    /// Bytes the child received on its one connection (it stops at the
    /// connection's end or after 3 s of silence); `None`: nobody connected to
    /// it within 5 s.
    fn bytes_received(self) -> Option<i64> {
        let mut n = [0u8; 8];
        read_full(&self.rx, &mut n, Duration::from_secs(20));
        Some(i64::from_le_bytes(n)).filter(|&v| v != -1)
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        // SAFETY: ends and reaps our own child.
        unsafe {
            libc::kill(self.pid, libc::SIGKILL);
            libc::waitpid(self.pid, std::ptr::null_mut(), 0);
        }
    }
}

fn read_full(fd: &OwnedFd, buf: &mut [u8], within: Duration) {
    let deadline = Instant::now() + within;
    let mut got = 0;
    while got < buf.len() {
        let mut p = libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        let left = deadline.saturating_duration_since(Instant::now()).as_millis() as i32;
        assert!(left > 0, "the child did not report in time");
        // SAFETY: polls one live pollfd; reads into the live rest of `buf`.
        let n = unsafe {
            libc::poll(&mut p, 1, left);
            libc::read(fd.as_raw_fd(), buf[got..].as_mut_ptr().cast(), buf.len() - got)
        };
        assert!(n > 0, "the child's pipe closed early");
        got += n as usize;
    }
}

/// The forked child. Only raw, async-signal-safe system calls.
///
/// # Safety
/// Call only in a freshly forked child; never returns.
unsafe fn child_body(
    tx: libc::c_int,
    addr: &libc::sockaddr_un,
    sock: &CString,
    dir: Option<&CString>,
    mode: Mode,
) -> ! {
    // SAFETY (whole body): system calls on live buffers prepared before the fork.
    unsafe {
        // Keep only stdio and the pipe (moved to fd 3): descriptors inherited from
        // other tests' threads (their sockets, their children's pipes) must not
        // stay open in this process, or their peers would never see them close.
        let tx = if tx == 3 || libc::dup2(tx, 3) == 3 { 3 } else { libc::_exit(1) };
        if libc::syscall(libc::SYS_close_range, 4u32, u32::MAX, 0u32) != 0 {
            for fd in 4..65536 {
                libc::close(fd);
            }
        }
        let report = |v: &[u8]| {
            libc::write(tx, v.as_ptr().cast(), v.len());
        };
        let errno = || *libc::__errno_location();
        let fail = |e: i32| -> ! {
            report(&e.to_le_bytes());
            report(&[0xff; 8]);
            libc::_exit(0)
        };
        let sleep_ms = |ms: i64| {
            let ts = libc::timespec { tv_sec: 0, tv_nsec: ms * 1_000_000 };
            libc::nanosleep(&ts, std::ptr::null_mut());
        };
        let now_ms = || {
            let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
            libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
            ts.tv_sec * 1000 + ts.tv_nsec / 1_000_000
        };
        // Drop root's groups too, not only its uid and gid.
        if libc::setgroups(0, std::ptr::null()) != 0 || libc::setgid(NOBODY) != 0 || libc::setuid(NOBODY) != 0 {
            fail(errno());
        }
        if let Some(d) = dir {
            libc::mkdir(d.as_ptr(), 0o777);
            libc::chmod(d.as_ptr(), 0o777);
        }
        let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
        let addr_p = (addr as *const libc::sockaddr_un).cast();
        let count = |conn: libc::c_int| -> i64 {
            let mut total: i64 = 0;
            let mut buf = [0u8; 256];
            loop {
                let mut p = libc::pollfd { fd: conn, events: libc::POLLIN, revents: 0 };
                if libc::poll(&mut p, 1, 3_000) != 1 {
                    break;
                }
                let n = libc::read(conn, buf.as_mut_ptr().cast(), buf.len());
                if n <= 0 {
                    break;
                }
                total += n as i64;
            }
            total
        };
        match mode {
            Mode::Listen => {
                let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
                if libc::bind(fd, addr_p, len) != 0 {
                    fail(errno());
                }
                libc::chmod(sock.as_ptr(), 0o777);
                libc::listen(fd, 4);
                report(&0i32.to_le_bytes());
                let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
                if libc::poll(&mut p, 1, 5_000) == 1 {
                    let conn = libc::accept(fd, std::ptr::null_mut(), std::ptr::null_mut());
                    report(&count(conn).to_le_bytes());
                } else {
                    report(&[0xff; 8]);
                }
                // Stay a live listener until killed: whoever looks at the path later
                // must find this process there, not a stale socket.
                loop {
                    libc::pause();
                }
            }
            Mode::Connect => {
                let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
                let mut tries = 0;
                while libc::connect(fd, addr_p, len) != 0 {
                    // The socket file exists from bind on, but refuses until listen.
                    if errno() != libc::ECONNREFUSED || tries == 200 {
                        fail(errno());
                    }
                    tries += 1;
                    sleep_ms(10);
                }
                // Pretend to be a PE: a hello-sized message.
                libc::send(fd, [1u8; 85].as_ptr().cast(), 85, libc::MSG_NOSIGNAL);
                report(&0i32.to_le_bytes());
                report(&count(fd).to_le_bytes());
                libc::_exit(0)
            }
            Mode::Flood(ms) => {
                report(&0i32.to_le_bytes());
                let until = now_ms() + ms;
                let mut made: i64 = 0;
                while now_ms() < until {
                    let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
                    if libc::connect(fd, addr_p, len) == 0 {
                        made += 1;
                    } else {
                        // Not there (yet or any more), or the backlog is full.
                        sleep_ms(1);
                    }
                    libc::close(fd);
                }
                report(&made.to_le_bytes());
                libc::_exit(0)
            }
        }
    }
}
