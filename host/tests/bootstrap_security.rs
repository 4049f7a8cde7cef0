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
//! - Every wait is bounded (issue 37): a listener of another user that never
//!   accepts fails both PEs at their timeout; silent connections of this user
//!   do not hold PE 0 (handshakes run side by side) and are counted; a message
//!   longer than the protocol needs fails that connection only, without
//!   allocating it.
//! - No check-then-use: a path that leads to another socket through a link
//!   (however late it appeared) is refused after connecting, from the
//!   listener's own address; a squatted default directory says what to do; PE
//!   0's socket file is mode 0600.
//!
//! Every test here holds [`common::serial`]: they fork children, flood a
//! socket or assert how long things took, and must not share the CPU (2 cores
//! on CI) with one another.
//!
//! The tests with another user fork a child that drops to uid/gid 65534
//! (`nobody`), so they need root (CI runs as root); without root they fail
//! saying so, rather than pass without checking.

mod common;

use common::{env, env_with, serial, socket_path, SECRET};
use gpushmem::bootstrap::env::LaunchEnv;
use gpushmem::bootstrap::socket::SocketBootstrap;
use gpushmem::bootstrap::Bootstrap;
use gpushmem::Error;
use std::ffi::CString;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
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
    let _serial = serial();
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
    assert!(t0.elapsed() < Duration::from_secs(5), "refusals took {:?}", t0.elapsed());
    // PE 0 was not disturbed: the job's real PE 1 joins.
    let me = SocketBootstrap::connect(&env(1, 2, &path), t).unwrap();
    let b0 = root.join().unwrap().unwrap();
    let h = std::thread::spawn(move || b0.allgather(b"zero").unwrap());
    assert_eq!(me.allgather(b"one").unwrap(), vec![b"zero".to_vec(), b"one".to_vec()]);
    h.join().unwrap();
}

#[test]
fn pe_zero_without_the_secret_is_not_trusted() {
    let _serial = serial();
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
    let _serial = serial();
    let tmp = scratch_dir("default");
    let get = |rank: usize| {
        let tmp = tmp.to_str().unwrap().to_string();
        let vars = [
            ("PMI_RANK", rank.to_string()),
            ("PMI_SIZE", "2".into()),
            ("PMIX_NAMESPACE", "job-a".into()),
            ("TMPDIR", tmp.clone()),
            // Set but not private (mode 1777): the temporary directory, whatever this machine has.
            ("XDG_RUNTIME_DIR", tmp),
            ("GPUSHMEM_BOOTSTRAP_SECRET", SECRET.into()),
        ];
        LaunchEnv::from_lookup(|k| vars.iter().find(|v| v.0 == k).map(|v| v.1.clone())).unwrap().unwrap()
    };
    let (e0, e1) = (get(0), get(1));
    let dir = e0.private_dir.clone().unwrap();
    assert_eq!(e0.rendezvous.unix_path(), Some(dir.join("pmix-job-a.sock").as_path()));
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
    let _serial = serial();
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
            // Set but not private (mode 1777): the temporary directory, whatever this machine has.
            ("XDG_RUNTIME_DIR", tmp.to_str().unwrap().to_string()),
        ];
        LaunchEnv::from_lookup(|k| vars.iter().find(|v| v.0 == k).map(|v| v.1.clone())).unwrap().unwrap()
    };
    let e1 = vars(1);
    let dir = e1.private_dir.clone().unwrap();
    let squatter = Squatter::listen(e1.rendezvous.unix_path().unwrap(), Some(&dir));
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
    let _serial = serial();
    need_root();
    // GPUSHMEM_BOOTSTRAP pointing into a directory everyone may write (like /tmp).
    let tmp = scratch_dir("squat-shared");
    let path = tmp.join("job.sock");
    let squatter = Squatter::listen(&path, None);
    assert_eq!(squatter.status, 0, "the squatter could not listen");
    let t0 = Instant::now();
    let why = refused_why(SocketBootstrap::connect(&env(1, 2, &path), Duration::from_secs(10)));
    assert!(why.contains("uid 65534") && why.contains("nothing was sent"), "{why}");
    assert!(t0.elapsed() < Duration::from_secs(4), "took {:?}", t0.elapsed());
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
    let _serial = serial();
    need_root();
    let tmp = scratch_dir("intruder");
    let path = tmp.join("job.sock");
    let t = Duration::from_secs(10);
    let root = connect(env(0, 2, &path), t);
    wait_listening(&path);
    // As if PE 0 had left the socket open to everyone.
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
    let _serial = serial();
    need_root();
    let tmp = scratch_dir("flood");
    let path = tmp.join("job.sock");
    let t = Duration::from_secs(2);
    let t0 = Instant::now();
    // No PE 1 ever comes: PE 0 must time out on time, whatever else connects.
    let root = connect(env(0, 2, &path), t);
    wait_listening(&path);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777)).unwrap();
    let flood = Child::flood(&path, Duration::from_secs(6));
    assert_eq!(flood.status, 0, "the flood could not start");
    let r = root.join().unwrap();
    let took = t0.elapsed();
    assert!(took < t + Duration::from_secs(3), "PE 0 returned {took:?} after it started, timeout {t:?}");
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
    let _serial = serial();
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
    assert!(t0.elapsed() < Duration::from_secs(5), "took {:?}", t0.elapsed());
    fake.join().unwrap();
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn symlink_at_an_explicit_path_is_refused() {
    let _serial = serial();
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
    assert!(t0.elapsed() < Duration::from_secs(4), "took {:?}", t0.elapsed());
    // PE 0 was not disturbed.
    let b1 = SocketBootstrap::connect(&env(1, 2, &real), t).unwrap();
    let b0 = root.join().unwrap().unwrap();
    let h = std::thread::spawn(move || b0.barrier());
    b1.barrier().unwrap();
    h.join().unwrap().unwrap();
    std::fs::remove_file(&link).unwrap();
}

#[test]
fn tarpit_of_another_user_fails_both_pes_at_their_timeout() {
    let _serial = serial();
    need_root();
    // Another user listens at the explicit path with a full backlog and never
    // accepts: a plain connect would block both PEs for good.
    let tmp = scratch_dir("tarpit");
    let path = tmp.join("job.sock");
    let tarpit = Child::tarpit(&path);
    assert_eq!(tarpit.status, 0, "the tarpit could not fill its backlog");
    let t = Duration::from_secs(2);
    let t0 = Instant::now();
    let (p0, p1) = (path.clone(), path.clone());
    let pe0 = within(t + Duration::from_secs(6), "PE 0", move || SocketBootstrap::connect(&env(0, 2, &p0), t));
    let pe1 = within(t + Duration::from_secs(6), "PE 1", move || SocketBootstrap::connect(&env(1, 2, &p1), t));
    let name = path.display().to_string();
    // PE 1 waits for PE 0 until its timeout, then names the path and who listens there.
    let msg = match pe1.wait() {
        Err(e @ Error::BootstrapTimeout { .. }) => e.to_string(),
        other => panic!("PE 1: expected a timeout, got {:?}", other.map(|_| ())),
    };
    assert!(msg.contains(&name) && msg.contains("uid 65534"), "{msg}");
    // PE 0 will not take the path over: a process listens there.
    let msg = match pe0.wait() {
        Err(e) => e.to_string(),
        Ok(_) => panic!("PE 0 served at a path where another user listens"),
    };
    assert!(msg.contains(&name) && msg.contains("uid 65534"), "{msg}");
    // PE 1 waits its timeout and a grace for PE 0's report (1 s here).
    assert!(t0.elapsed() < t + Duration::from_secs(4), "took {:?}", t0.elapsed());
    drop(tarpit);
    std::fs::remove_dir_all(&tmp).unwrap();
}

#[test]
fn path_through_another_users_symlink_does_not_merge_two_jobs() {
    let _serial = serial();
    need_root();
    // Two jobs of this user, without secrets. Job B meets at b/job.sock. Job A was
    // told to meet at evil/a/job.sock, and another user made evil/a a symbolic
    // link to b before job A's PE 0 came up: PE 1 of job A must not join job B.
    let tmp = scratch_dir("symlink-flip");
    let dir_b = tmp.join("b");
    std::fs::create_dir(&dir_b).unwrap();
    let sock_b = dir_b.join("job.sock");
    let evil = tmp.join("evil");
    let flip = Child::symlink(&evil.join("a"), &dir_b, Some(&evil));
    assert_eq!(flip.status, 0, "the other user could not make its link");
    let sock_a = evil.join("a").join("job.sock");
    let t = Duration::from_secs(5);
    let root_b = connect(env_with(0, 2, &sock_b, None), t);
    wait_listening(&sock_b);
    let t0 = Instant::now();
    let msg = match SocketBootstrap::connect(&env_with(1, 2, &sock_a, None), t) {
        Err(e @ Error::BootstrapRefused { .. }) => e.to_string(),
        other => panic!("PE 1 of job A: expected BootstrapRefused, got {:?}", other.map(|_| ())),
    };
    assert!(msg.contains(&sock_b.display().to_string()) && msg.contains("nothing was sent"), "{msg}");
    assert!(t0.elapsed() < Duration::from_secs(4), "took {:?}", t0.elapsed());
    // Job B was not disturbed: its own PE 1 joins it.
    let b1 = SocketBootstrap::connect(&env_with(1, 2, &sock_b, None), t).unwrap();
    let b0 = root_b.join().unwrap().unwrap();
    let h = std::thread::spawn(move || b0.allgather(b"b0").unwrap());
    assert_eq!(b1.allgather(b"b1").unwrap(), vec![b"b0".to_vec(), b"b1".to_vec()]);
    h.join().unwrap();

    // The same with the link as the last component, placed before PE 1 connects.
    let job_c = tmp.join("c.sock");
    let root_c = connect(env_with(0, 2, &job_c, None), t);
    wait_listening(&job_c);
    let link = evil.join("d.sock");
    let flip2 = Child::symlink(&link, &job_c, None);
    assert_eq!(flip2.status, 0, "the other user could not make its link");
    let why = refused_why(SocketBootstrap::connect(&env_with(1, 2, &link, None), t));
    assert!(why.contains("symbolic link"), "{why}");
    let c1 = SocketBootstrap::connect(&env_with(1, 2, &job_c, None), t).unwrap();
    let c0 = root_c.join().unwrap().unwrap();
    let h = std::thread::spawn(move || c0.barrier());
    c1.barrier().unwrap();
    h.join().unwrap().unwrap();
    drop((flip, flip2));
    std::fs::remove_dir_all(&tmp).unwrap();
}

#[test]
fn oversize_frames_fail_that_connection_only() {
    let _serial = serial();
    // An authenticated peer (this user, no secret) announcing frames of absurd length.
    for len in [u64::MAX, 1 << 40] {
        // To PE 0, as PE 1, after joining.
        let path = socket_path("oversize-contrib");
        let root = connect(env_with(0, 2, &path, None), Duration::from_secs(5));
        let mut fake = FakePe::join(&path, 1, 2);
        let b0 = root.join().unwrap().unwrap();
        let h = std::thread::spawn(move || b0.allgather(b"zero"));
        fake.send_header(CONTRIB, 1, 0, len);
        let msg = match h.join().expect("PE 0 panicked on an oversize frame") {
            Err(e @ Error::BootstrapIo { .. }) => e.to_string(),
            other => panic!("PE 0: expected BootstrapIo, got {other:?}"),
        };
        assert!(msg.contains("PE 1") && msg.contains(&len.to_string()) && msg.contains("at most"), "{msg}");

        // To PE 1, as PE 0, in the allgather's answer.
        let path = socket_path("oversize-result");
        let fake = fake_root(&path, 2, move |s| {
            let _contrib = read_frame_raw(s);
            s.write_all(&header(RESULT, 0, 0, len)).unwrap();
        });
        let b1 = SocketBootstrap::connect(&env_with(1, 2, &path, None), Duration::from_secs(5)).unwrap();
        let msg = match std::thread::spawn(move || b1.allgather(b"one")).join() {
            Ok(Err(e @ Error::BootstrapIo { .. })) => e.to_string(),
            Ok(other) => panic!("PE 1: expected BootstrapIo, got {other:?}"),
            Err(_) => panic!("PE 1 panicked on an oversize frame"),
        };
        assert!(msg.contains("PE 0") && msg.contains(&len.to_string()) && msg.contains("at most"), "{msg}");
        fake.join().unwrap();
    }

    // Contributing more than the cap is an error on that PE, and fails the others at once.
    let path = socket_path("oversize-mine");
    let t = Duration::from_secs(10);
    let root = connect(env(0, 2, &path), t);
    let b1 = SocketBootstrap::connect(&env(1, 2, &path), t).unwrap();
    let b0 = root.join().unwrap().unwrap();
    let t0 = Instant::now();
    let h = std::thread::spawn(move || b0.allgather(b"zero"));
    let too_long = vec![0u8; gpushmem::bootstrap::socket::MAX_CONTRIBUTION + 1];
    match b1.allgather(&too_long) {
        Err(Error::Config { why, .. }) => assert!(why.contains("at most 16777216 bytes"), "{why}"),
        other => panic!("PE 1: expected a Config error, got {:?}", other.map(|_| ())),
    }
    match h.join().unwrap() {
        Err(Error::PeerFailed { peer: 1, why, .. }) => assert!(why.contains("16777217 bytes"), "{why}"),
        other => panic!("PE 0: expected PeerFailed naming PE 1, got {:?}", other.map(|_| ())),
    }
    assert!(t0.elapsed() < Duration::from_secs(5), "took {:?}", t0.elapsed());

    // An oversize hello turns that connection away; the job goes on.
    let path = socket_path("oversize-hello");
    let t = Duration::from_secs(5);
    let root = connect(env(0, 2, &path), t);
    let mut stray = connect_retry(&path);
    let _challenge = read_frame_raw(&mut stray);
    stray.write_all(&header(HELLO, 1, 0, u64::MAX)).unwrap();
    let b1 = SocketBootstrap::connect(&env(1, 2, &path), t).unwrap();
    let b0 = root.join().unwrap().unwrap();
    let h = std::thread::spawn(move || b0.barrier());
    b1.barrier().unwrap();
    h.join().unwrap().unwrap();
}

#[test]
fn silent_connections_do_not_hold_pe_zero() {
    let _serial = serial();
    // Three connections of this user that never say hello, then the real PE 1.
    let path = socket_path("silent");
    // Under the 5 s a silent connection is waited for: were handshakes one
    // at a time, PE 0 would time out before it reached PE 1's.
    let t = Duration::from_secs(4);
    let t0 = Instant::now();
    let root = connect(env(0, 2, &path), t);
    let silent: Vec<_> = (0..3).map(|_| connect_retry(&path)).collect();
    let b1 = SocketBootstrap::connect(&env(1, 2, &path), t).unwrap_or_else(|e| panic!("PE 1: {e}"));
    let b0 = root.join().unwrap().unwrap_or_else(|e| panic!("PE 0: {e}"));
    assert!(t0.elapsed() < t, "PE 1 was admitted after {:?}", t0.elapsed());
    let h = std::thread::spawn(move || b0.barrier());
    b1.barrier().unwrap();
    h.join().unwrap().unwrap();
    drop(silent);

    // Without PE 1, PE 0's timeout error counts them.
    let path = socket_path("silent-count");
    let t = Duration::from_secs(2);
    let t0 = Instant::now();
    let root = connect(env(0, 2, &path), t);
    let silent: Vec<_> = (0..3).map(|_| connect_retry(&path)).collect();
    let msg = match root.join().unwrap() {
        Err(e @ Error::BootstrapTimeout { .. }) => e.to_string(),
        other => panic!("expected a timeout, got {:?}", other.map(|_| ())),
    };
    assert!(t0.elapsed() < t + Duration::from_secs(3), "took {:?}", t0.elapsed());
    assert!(msg.contains("3 silent connection(s)") && msg.contains("[1]"), "{msg}");
    drop(silent);
}

#[test]
fn many_slow_handshakes_are_all_admitted() {
    let _serial = serial();
    // A job of 101 PEs on a loaded machine: PE 0 accepts every connection long
    // before any PE has answered its challenge. None may be pushed out.
    let path = socket_path("slow-hellos");
    let n: u32 = 100;
    let t = Duration::from_secs(20);
    let root = connect(env_with(0, n as usize + 1, &path, None), t);
    wait_listening(&path);
    let pes: Vec<_> = (1..=n)
        .map(|rank| {
            let path = path.clone();
            std::thread::spawn(move || FakePe::try_join(&path, rank, n as u64 + 1, Duration::from_millis(50)))
        })
        .collect();
    let joined: Vec<Result<FakePe, String>> = pes.into_iter().map(|h| h.join().unwrap()).collect();
    let failed: Vec<&String> = joined.iter().filter_map(|r| r.as_ref().err()).collect();
    assert!(failed.is_empty(), "{} of {n} PEs were not admitted, e.g.: {}", failed.len(), failed[0]);
    match root.join().unwrap() {
        Ok(b0) => assert_eq!(b0.size(), n as usize + 1),
        Err(e) => panic!("PE 0: {e}"),
    }
}

#[test]
fn stray_announcing_a_huge_message_before_its_hello_is_turned_away_at_once() {
    let _serial = serial();
    // A connection of this user, without the secret, that answers its
    // challenge with a header of another kind and a huge length, then streams.
    // PE 0 of a large job must refuse it from the header, storing nothing.
    for (kind, len) in [(RESULT, 1u64 << 30), (CONTRIB, 16 << 20)] {
        let path = socket_path("stray-huge");
        let t = Duration::from_secs(3);
        let root = connect(env(0, 100, &path), t);
        let mut stray = connect_retry(&path);
        let _challenge = read_frame_raw(&mut stray);
        stray.set_write_timeout(Some(Duration::from_secs(1))).unwrap();
        stray.write_all(&header(kind, 1, 0, len)).unwrap();
        let t0 = Instant::now();
        let chunk = vec![0u8; 64 << 10];
        let mut sent: u64 = 0;
        // Streams until PE 0 closes the connection, 5 s, or 64 MiB (PE 0 is buffering it).
        while sent < 64 << 20 && t0.elapsed() < Duration::from_secs(5) {
            match stray.write(&chunk) {
                Ok(n) => sent += n as u64,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(_) => break,
            }
        }
        assert!(sent < 4 << 20, "PE 0 took {sent} bytes of a {len}-byte message of kind {kind} before a hello");
        assert!(t0.elapsed() < Duration::from_secs(4), "PE 0 kept the connection open for {:?}", t0.elapsed());
        let msg = match root.join().unwrap() {
            Err(e @ Error::BootstrapTimeout { .. }) => e.to_string(),
            other => panic!("expected a timeout, got {:?}", other.map(|_| ())),
        };
        assert!(msg.contains("refused") && msg.contains("not a gpushmem PE"), "{msg}");
    }
}

#[test]
fn socket_of_another_user_closed_to_this_one_is_not_taken_for_stale() {
    let _serial = serial();
    need_root();
    // Another user's live listener, its socket file mode 0600, in a directory
    // everyone may write and without the sticky bit: connecting fails with
    // EACCES. PE 0 must not unlink it as stale (taking over a live listener),
    // and a PE must say whose it is.
    let tmp = scratch_dir("eacces");
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o777)).unwrap();
    let path = tmp.join("job.sock");
    let listener = UnixListener::bind(&path).unwrap();
    std::os::unix::fs::chown(&path, Some(NOBODY), Some(NOBODY)).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let p = path.clone();
    let (pe0, pe1) = std::thread::spawn(move || {
        // This thread, still uid 0, is held to file permissions like any other user.
        drop_this_threads_capabilities();
        let t = Duration::from_secs(2);
        let pe0 = SocketBootstrap::connect(&env(0, 2, &p), t).map(|_| ());
        let pe1 = SocketBootstrap::connect(&env(1, 2, &p), t).map(|_| ());
        (pe0, pe1)
    })
    .join()
    .unwrap();
    match pe0 {
        Err(Error::Config { why, .. }) => {
            assert!(why.contains("uid 65534") && why.contains("holds this path"), "{why}")
        }
        other => panic!("PE 0: expected a Config error naming the owner, got {other:?}"),
    }
    let meta = std::fs::symlink_metadata(&path).expect("PE 0 removed another user's live socket");
    assert_eq!(meta.uid(), NOBODY, "the socket file at the path is no longer the other user's");
    match pe1 {
        Err(Error::BootstrapRefused { why, .. }) => assert!(why.contains("uid 65534"), "{why}"),
        other => panic!("PE 1: expected BootstrapRefused naming the owner, got {other:?}"),
    }
    // The other user's listener still gets its connections.
    let _c = UnixStream::connect(&path).unwrap();
    listener.accept().unwrap();
    std::fs::remove_dir_all(&tmp).unwrap();
}

#[test]
fn squatted_default_directory_says_what_to_do() {
    let _serial = serial();
    need_root();
    // Another user made our default directory first: say what we can do about it.
    let tmp = scratch_dir("squat-hint");
    let vars = [
        ("PMI_RANK", "1".to_string()),
        ("PMI_SIZE", "2".into()),
        ("PMIX_NAMESPACE", "job-h".into()),
        ("TMPDIR", tmp.to_str().unwrap().to_string()),
        // Set but not private: the temporary directory is the default.
        ("XDG_RUNTIME_DIR", tmp.to_str().unwrap().to_string()),
    ];
    let e1 = LaunchEnv::from_lookup(|k| vars.iter().find(|v| v.0 == k).map(|v| v.1.clone())).unwrap().unwrap();
    let dir = e1.private_dir.clone().unwrap();
    assert!(dir.starts_with(&tmp), "{}", dir.display());
    let squatter = Squatter::listen(e1.rendezvous.unix_path().unwrap(), Some(&dir));
    assert_eq!(squatter.status, 0, "the squatter could not listen");
    let msg = match SocketBootstrap::connect(&e1, Duration::from_secs(2)) {
        Err(e @ Error::BootstrapRefused { .. }) => e.to_string(),
        other => panic!("expected BootstrapRefused, got {:?}", other.map(|_| ())),
    };
    assert!(msg.contains("uid 65534") && msg.contains("administrator"), "{msg}");
    for var in ["XDG_RUNTIME_DIR", "TMPDIR", "GPUSHMEM_BOOTSTRAP"] {
        assert!(msg.contains(var), "the hint does not name {var}: {msg}");
    }
    assert!(!msg.contains("if it is yours"), "{msg}");
    drop(squatter);
    std::fs::remove_dir_all(&tmp).unwrap();
}

#[test]
fn socket_file_is_private_to_this_user() {
    let _serial = serial();
    let path = socket_path("mode");
    let t = Duration::from_secs(5);
    let root = connect(env(0, 2, &path), t);
    wait_listening(&path);
    let mode = std::fs::symlink_metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "PE 0's socket has mode {mode:04o}");
    let b1 = SocketBootstrap::connect(&env(1, 2, &path), t).unwrap();
    let b0 = root.join().unwrap().unwrap();
    let h = std::thread::spawn(move || b0.barrier());
    b1.barrier().unwrap();
    h.join().unwrap().unwrap();
}

// ---- helpers ----

/// The bootstrap's wire format, written by hand (see `socket.rs`).
const MAGIC: u64 = u64::from_le_bytes(*b"gpshmBS2");
const HELLO: u8 = 1;
const READY: u8 = 2;
const CONTRIB: u8 = 3;
const RESULT: u8 = 4;
const CHALLENGE: u8 = 8;
const PROOF_HELLO: &[u8] = b"gpushmem bootstrap: PE to PE 0";
const PROOF_READY: &[u8] = b"gpushmem bootstrap: PE 0 to PE";

/// kind u8, from u32 LE, round u64 LE, payload length u64 LE.
fn header(kind: u8, from: u32, round: u64, len: u64) -> Vec<u8> {
    [&[kind][..], &from.to_le_bytes(), &round.to_le_bytes(), &len.to_le_bytes()].concat()
}

/// A whole frame of round 0.
fn frame(kind: u8, from: u32, payload: &[u8]) -> Vec<u8> {
    [header(kind, from, 0, payload.len() as u64), payload.to_vec()].concat()
}

/// Reads one frame: (kind, from, payload).
fn read_frame_raw(s: &mut UnixStream) -> (u8, u32, Vec<u8>) {
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut h = [0u8; 21];
    s.read_exact(&mut h).unwrap();
    let len = u64::from_le_bytes(h[13..21].try_into().unwrap());
    assert!(len < 1 << 20, "a frame of {len} bytes");
    let mut payload = vec![0u8; len as usize];
    s.read_exact(&mut payload).unwrap();
    (h[0], u32::from_le_bytes(h[1..5].try_into().unwrap()), payload)
}

/// A proof as a job without a secret makes it: HMAC-SHA256 with an empty key.
fn proof(label: &[u8], root_nonce: &[u8], pe_nonce: &[u8], rank: u64, size: u64) -> Vec<u8> {
    use hmac::Mac;
    let mut m = <hmac::Hmac<sha2::Sha256> as Mac>::new_from_slice(&[]).unwrap();
    for part in [label, root_nonce, pe_nonce, &rank.to_le_bytes(), &size.to_le_bytes()] {
        m.update(part);
    }
    m.finalize().into_bytes().to_vec()
}

/// A PE of this user written by hand, joined to a job without a secret.
struct FakePe(UnixStream);

impl FakePe {
    /// Joins as PE `rank`, answering the challenge after `delay`; `Err`: why not admitted.
    fn try_join(path: &Path, rank: u32, size: u64, delay: Duration) -> Result<FakePe, String> {
        let mut s = connect_retry(path);
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut h = [0u8; 21];
        s.read_exact(&mut h).map_err(|e| format!("PE {rank}: no challenge: {e}"))?;
        let mut challenge = vec![0u8; u64::from_le_bytes(h[13..21].try_into().unwrap()).min(64) as usize];
        s.read_exact(&mut challenge).map_err(|e| format!("PE {rank}: no challenge: {e}"))?;
        assert_eq!(h[0], CHALLENGE);
        std::thread::sleep(delay);
        let mine = [0x17u8; 16];
        let p = proof(PROOF_HELLO, &challenge[8..], &mine, rank as u64, size);
        let hello = [&MAGIC.to_le_bytes()[..], &size.to_le_bytes(), &mine, &p].concat();
        s.write_all(&frame(HELLO, rank, &hello)).map_err(|e| format!("PE {rank}: hello not sent: {e}"))?;
        s.read_exact(&mut h).map_err(|e| format!("PE {rank}: no answer to its hello: {e}"))?;
        if h[0] != READY {
            return Err(format!("PE {rank}: answered with kind {} instead of Ready", h[0]));
        }
        Ok(FakePe(s))
    }

    fn join(path: &Path, rank: u32, size: u64) -> FakePe {
        let mut s = connect_retry(path);
        let (kind, _, challenge) = read_frame_raw(&mut s);
        assert_eq!(kind, CHALLENGE);
        let mine = [0x17u8; 16];
        let p = proof(PROOF_HELLO, &challenge[8..], &mine, rank as u64, size);
        let hello = [&MAGIC.to_le_bytes()[..], &size.to_le_bytes(), &mine, &p].concat();
        s.write_all(&frame(HELLO, rank, &hello)).unwrap();
        let (kind, _, _) = read_frame_raw(&mut s);
        assert_eq!(kind, READY, "PE 0 did not admit the fake PE");
        FakePe(s)
    }

    fn send_header(&mut self, kind: u8, from: u32, round: u64, len: u64) {
        self.0.write_all(&header(kind, from, round, len)).unwrap();
    }
}

/// A PE 0 of this user written by hand, for a job of `size` without a secret:
/// admits one PE 1, then runs `then` on its connection and waits for it to close.
fn fake_root(
    path: &Path,
    size: u64,
    then: impl FnOnce(&mut UnixStream) + Send + 'static,
) -> std::thread::JoinHandle<()> {
    let listener = UnixListener::bind(path).unwrap();
    let path = path.to_path_buf();
    std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mine = [0x42u8; 16];
        s.write_all(&frame(CHALLENGE, 0, &[&MAGIC.to_le_bytes()[..], &mine].concat())).unwrap();
        let (kind, from, hello) = read_frame_raw(&mut s);
        assert_eq!((kind, from), (HELLO, 1));
        s.write_all(&frame(READY, 0, &proof(PROOF_READY, &mine, &hello[16..32], 1, size))).unwrap();
        then(&mut s);
        let _ = s.read_to_end(&mut Vec::new());
        let _ = std::fs::remove_file(&path);
    })
}

/// Connects to `path`, retrying while nothing listens there yet (up to 10 s).
fn connect_retry(path: &Path) -> UnixStream {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match UnixStream::connect(path) {
            Ok(s) => return s,
            Err(e) => assert!(Instant::now() < deadline, "could not connect to {}: {e}", path.display()),
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Waits until PE 0 listens at `path` (and has set up its socket file).
fn wait_listening(path: &Path) {
    drop(connect_retry(path));
}

/// A call running in a thread of its own, waited for at most `limit`.
struct Within<T> {
    rx: std::sync::mpsc::Receiver<T>,
    start: Instant,
    limit: Duration,
    what: &'static str,
}

fn within<T: Send + 'static>(limit: Duration, what: &'static str, f: impl FnOnce() -> T + Send + 'static) -> Within<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    Within { rx, start: Instant::now(), limit, what }
}

impl<T> Within<T> {
    fn wait(self) -> T {
        let left = self.limit.saturating_sub(self.start.elapsed());
        self.rx.recv_timeout(left).unwrap_or_else(|_| panic!("{} still blocked after {:?}", self.what, self.limit))
    }
}

/// Waits (up to 10 s) until something exists at `path`.
fn wait_for(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::fs::symlink_metadata(path).is_err() {
        assert!(Instant::now() < deadline, "{} did not appear", path.display());
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Clears the calling thread's effective capabilities (capabilities are per
/// thread on Linux): root's thread keeps uid 0 but no longer bypasses file
/// permissions, as another user would not.
fn drop_this_threads_capabilities() {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: libc::c_int,
    }
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    // _LINUX_CAPABILITY_VERSION_3: two Data, for capabilities 0-31 and 32-63; pid 0: this thread.
    let mut h = Header { version: 0x2008_0522, pid: 0 };
    let mut d = [Data::default(); 2];
    // SAFETY: capget writes a version-3 header and two Data into live structs of that layout.
    assert_eq!(unsafe { libc::syscall(libc::SYS_capget, &mut h, d.as_mut_ptr()) }, 0, "capget failed");
    for set in &mut d {
        set.effective = 0;
    }
    // SAFETY: capset reads a version-3 header and two Data from live structs of that layout.
    assert_eq!(unsafe { libc::syscall(libc::SYS_capset, &mut h, d.as_ptr()) }, 0, "capset failed");
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
    /// Connects and closes, again and again (1 ms apart), until this many
    /// milliseconds have passed; reports the number of connections made.
    Flood(i64),
    /// Listens at the path with a backlog it fills itself, and never accepts:
    /// a connect there waits for room that never comes. Reports once full.
    Tarpit,
    /// Makes a symbolic link at the path to the target, reports, and exits.
    Symlink,
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
        Child::start(sock, make_dir, None, Mode::Listen)
    }

    /// Connects to `sock` as the other user and sends a few bytes first.
    fn connect(sock: &Path) -> Child {
        Child::start(sock, None, None, Mode::Connect)
    }

    /// Connects to `sock` and closes, as the other user, over and over for `within`.
    fn flood(sock: &Path, within: Duration) -> Child {
        Child::start(sock, None, None, Mode::Flood(within.as_millis() as i64))
    }

    /// Listens at `sock` as the other user with a full backlog, never accepting.
    fn tarpit(sock: &Path) -> Child {
        Child::start(sock, None, None, Mode::Tarpit)
    }

    /// Makes `link` a symbolic link to `target` as the other user; `make_dir`:
    /// first creates that directory (mode 0777) as the other user.
    fn symlink(link: &Path, target: &Path, make_dir: Option<&Path>) -> Child {
        Child::start(link, make_dir, Some(target), Mode::Symlink)
    }

    fn start(sock: &Path, make_dir: Option<&Path>, target: Option<&Path>, mode: Mode) -> Child {
        let addr = sockaddr(sock);
        let sock_c = cstr(sock);
        let dir_c = make_dir.map(cstr);
        let target_c = target.map(cstr);
        let mut fds = [0; 2];
        // SAFETY: pipe2 writes two descriptors into a live array of two.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        // SAFETY: the child makes async-signal-safe calls only, on data prepared above, then _exits.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            // SAFETY: raw system calls on live buffers; the process ends with _exit.
            unsafe { child_body(fds[1], &addr, &sock_c, dir_c.as_ref(), target_c.as_ref(), mode) }
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
    target: Option<&CString>,
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
                        // Paced: a flood, not a busy loop that starves the other tests' processes.
                        sleep_ms(1);
                    } else {
                        // Not there (yet or any more), or the backlog is full.
                        sleep_ms(1);
                    }
                    libc::close(fd);
                }
                report(&made.to_le_bytes());
                libc::_exit(0)
            }
            Mode::Tarpit => {
                let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
                if libc::bind(fd, addr_p, len) != 0 {
                    fail(errno());
                }
                libc::chmod(sock.as_ptr(), 0o777);
                // Backlog 0 holds one pending connection: fill it with our own.
                libc::listen(fd, 0);
                let mut full = false;
                for _ in 0..16 {
                    let c = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_NONBLOCK, 0);
                    if libc::connect(c, addr_p, len) != 0 {
                        if errno() != libc::EAGAIN {
                            fail(errno());
                        }
                        full = true;
                        break;
                    }
                }
                if !full {
                    fail(libc::EALREADY);
                }
                report(&0i32.to_le_bytes());
                loop {
                    libc::pause();
                }
            }
            Mode::Symlink => {
                let Some(target) = target else { fail(libc::EINVAL) };
                if libc::symlink(target.as_ptr(), sock.as_ptr()) != 0 {
                    fail(errno());
                }
                report(&0i32.to_le_bytes());
                libc::_exit(0)
            }
        }
    }
}
