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
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
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
    let tmp = scratch_dir("squat-default-2");
    let dir = tmp.join(format!("gpushmem-{}", unsafe { libc::getuid() }));
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let squatter = Squatter::listen(&dir.join("slurm-4242.0.sock"), None);
    assert_eq!(squatter.status, libc::EACCES, "the squatter got into our private directory");
    std::fs::remove_dir_all(&tmp).unwrap();
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
    while !path.exists() {
        std::thread::sleep(Duration::from_millis(5));
    }
    // As if PE 0's umask left the socket open to everyone.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777)).unwrap();
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

// ---- helpers ----

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

/// A forked child running as uid/gid 65534: it listens at a path (a squatter)
/// or connects to one (an intruder), counts the bytes it receives, and reports
/// through a pipe. Between fork and `_exit` it makes raw system calls only, as
/// a fork of a multi-threaded process must.
struct Child {
    pid: libc::pid_t,
    rx: OwnedFd,
    /// 0: listening / connected; else the errno of the failed step.
    status: i32,
}

type Squatter = Child;
type Intruder = Child;

impl Child {
    /// Listens at `sock` as the other user; `make_dir`: first creates that
    /// directory (mode 0777) as the other user.
    fn listen(sock: &Path, make_dir: Option<&Path>) -> Child {
        Child::start(sock, make_dir, true)
    }

    /// Connects to `sock` as the other user and sends a few bytes first.
    fn connect(sock: &Path) -> Child {
        Child::start(sock, None, false)
    }

    fn start(sock: &Path, make_dir: Option<&Path>, listen: bool) -> Child {
        let addr = sockaddr(sock);
        let sock_c = cstr(sock);
        let dir_c = make_dir.map(cstr);
        let mut fds = [0; 2];
        // SAFETY: pipe writes two descriptors into a live array of two.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: the child makes async-signal-safe calls only, on data prepared above, then _exits.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            // SAFETY: raw system calls on live buffers; the process ends with _exit.
            unsafe { child_body(fds[1], &addr, &sock_c, dir_c.as_ref(), listen) }
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
    listen: bool,
) -> ! {
    // SAFETY (whole body): system calls on live buffers prepared before the fork.
    unsafe {
        let report = |v: &[u8]| {
            libc::write(tx, v.as_ptr().cast(), v.len());
        };
        let errno = || *libc::__errno_location();
        let fail = |e: i32| -> ! {
            report(&e.to_le_bytes());
            report(&[0xff; 8]);
            libc::_exit(0)
        };
        if libc::setgid(NOBODY) != 0 || libc::setuid(NOBODY) != 0 {
            fail(errno());
        }
        if let Some(d) = dir {
            libc::mkdir(d.as_ptr(), 0o777);
            libc::chmod(d.as_ptr(), 0o777);
        }
        let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
        let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
        let addr_p = (addr as *const libc::sockaddr_un).cast();
        let conn = if listen {
            if libc::bind(fd, addr_p, len) != 0 {
                fail(errno());
            }
            libc::chmod(sock.as_ptr(), 0o777);
            libc::listen(fd, 4);
            report(&0i32.to_le_bytes());
            let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
            if libc::poll(&mut p, 1, 5_000) != 1 {
                report(&[0xff; 8]);
                libc::_exit(0);
            }
            libc::accept(fd, std::ptr::null_mut(), std::ptr::null_mut())
        } else {
            if libc::connect(fd, addr_p, len) != 0 {
                fail(errno());
            }
            // Pretend to be a PE: a hello-sized message.
            libc::send(fd, [1u8; 85].as_ptr().cast(), 85, libc::MSG_NOSIGNAL);
            report(&0i32.to_le_bytes());
            fd
        };
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
        report(&total.to_le_bytes());
        libc::_exit(0)
    }
}
