//! The Unix-socket bootstrap with PEs as threads of this process, each with its
//! own connection and `LaunchEnv`, as separate processes would have them.
//!
//! Every test holds [`common::serial`]: most assert how long a failure took
//! to show, which another test eating the CPU (2 cores on CI) would upset.

mod common;

use common::{env, serial, socket_path};
use gpushmem::bootstrap::socket::SocketBootstrap;
use gpushmem::bootstrap::Bootstrap;
use gpushmem::Error;
use std::path::Path;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Runs `f(bootstrap)` for each of `ranks` of a `size`-PE job on its own thread.
fn spawn_pes<T: Send + 'static>(
    ranks: impl IntoIterator<Item = usize>,
    size: usize,
    path: &Path,
    timeout: Duration,
    f: impl Fn(gpushmem::Result<SocketBootstrap>) -> T + Send + Sync + Clone + 'static,
) -> Vec<JoinHandle<T>> {
    ranks
        .into_iter()
        .map(|rank| {
            let (e, f) = (env(rank, size, path), f.clone());
            std::thread::spawn(move || f(SocketBootstrap::connect(&e, timeout)))
        })
        .collect()
}

fn join_all<T>(hs: Vec<JoinHandle<T>>) -> Vec<T> {
    hs.into_iter().map(|h| h.join().expect("PE thread panicked")).collect()
}

#[test]
fn allgather_many_rounds_with_different_lengths() {
    let _serial = serial();
    let path = socket_path("rounds");
    let hs = spawn_pes(0..4, 4, &path, Duration::from_secs(10), |b| {
        let b = b.unwrap();
        let me = b.rank();
        for round in 0..300usize {
            // Lengths differ across PEs and rounds; PE 2 sometimes sends nothing.
            let len = (me * 7 + round) % 13 * (me != 2 || round % 3 != 0) as usize;
            let mine: Vec<u8> = (0..len).map(|i| (me * 31 + round + i) as u8).collect();
            let all = b.allgather(&mine).unwrap();
            assert_eq!(all.len(), 4);
            for (pe, v) in all.iter().enumerate() {
                let len = (pe * 7 + round) % 13 * (pe != 2 || round % 3 != 0) as usize;
                let want: Vec<u8> = (0..len).map(|i| (pe * 31 + round + i) as u8).collect();
                assert_eq!(v, &want, "PE {me} round {round}: contribution of PE {pe}");
            }
            if round % 50 == 0 {
                b.barrier().unwrap();
            }
        }
        // A large contribution does not fit in a socket buffer at once.
        let big = vec![me as u8; 3 << 20];
        let all = b.allgather(&big).unwrap();
        assert!(all.iter().enumerate().all(|(pe, v)| v.len() == 3 << 20 && v.iter().all(|&x| x == pe as u8)));
    });
    join_all(hs);
    assert!(!path.exists(), "PE 0 should remove the socket file once everyone is connected");
}

#[test]
fn single_pe_needs_no_socket() {
    let _serial = serial();
    let path = socket_path("single");
    let b = SocketBootstrap::connect(&env(0, 1, &path), Duration::from_millis(100)).unwrap();
    assert_eq!(b.allgather(b"x").unwrap(), vec![b"x".to_vec()]);
    b.barrier().unwrap();
    assert!(!path.exists());
}

#[test]
fn stale_socket_file_is_replaced() {
    let _serial = serial();
    let path = socket_path("stale");
    // A listener dropped without unlinking leaves a dead socket file, as a crashed job would.
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    assert!(path.exists());
    let hs = spawn_pes(0..3, 3, &path, Duration::from_secs(10), |b| b.unwrap().allgather(b"hi").unwrap());
    assert!(join_all(hs).iter().all(|all| all.len() == 3));
}

#[test]
fn missing_pe_at_connect_is_named_by_every_pe() {
    let _serial = serial();
    let path = socket_path("missing-connect");
    let t0 = Instant::now();
    let hs = spawn_pes(0..3, 4, &path, Duration::from_secs(1), |b| b.map(|_| ()));
    for (rank, r) in join_all(hs).into_iter().enumerate() {
        match r {
            Err(Error::BootstrapTimeout { missing, .. }) => assert_eq!(missing, vec![3], "PE {rank}"),
            other => panic!("PE {rank}: expected a timeout naming PE 3, got {other:?}"),
        }
    }
    assert!(t0.elapsed() < Duration::from_secs(5), "took {:?}", t0.elapsed());
    assert!(!path.exists());
}

#[test]
fn missing_root_is_named() {
    let _serial = serial();
    let path = socket_path("missing-root");
    let hs = spawn_pes(1..3, 3, &path, Duration::from_millis(300), |b| b.map(|_| ()));
    for r in join_all(hs) {
        match r {
            Err(Error::BootstrapTimeout { missing, .. }) => assert_eq!(missing, vec![0]),
            other => panic!("expected a timeout naming PE 0, got {other:?}"),
        }
    }
}

#[test]
fn pe_missing_from_allgather_is_named_by_every_pe() {
    let _serial = serial();
    let path = socket_path("missing-round");
    let t0 = Instant::now();
    let hs = spawn_pes(0..4, 4, &path, Duration::from_secs(1), |b| {
        let b = b.unwrap();
        b.barrier().unwrap();
        if b.rank() == 2 {
            // Connected and alive, but late for the next round.
            std::thread::sleep(Duration::from_millis(2500));
            return None;
        }
        Some(b.allgather(&[1, 2, 3]))
    });
    for (rank, r) in join_all(hs).into_iter().enumerate() {
        match r {
            None => assert_eq!(rank, 2),
            Some(Err(Error::BootstrapTimeout { missing, what, .. })) => {
                assert_eq!(missing, vec![2], "PE {rank}");
                assert!(what.contains("allgather"), "{what}");
            }
            Some(other) => panic!("PE {rank}: expected a timeout naming PE 2, got {other:?}"),
        }
    }
    assert!(t0.elapsed() < Duration::from_secs(5), "took {:?}", t0.elapsed());
}

#[test]
fn dropped_pe_is_reported_promptly() {
    let _serial = serial();
    let path = socket_path("drop");
    // A long timeout: the failure must come from the closed connection, not a timeout.
    let hs = spawn_pes(0..4, 4, &path, Duration::from_secs(30), |b| {
        let b = b.unwrap();
        for _ in 0..5 {
            b.barrier().unwrap();
        }
        if b.rank() == 2 {
            drop(b);
            return None;
        }
        let t0 = Instant::now();
        let r = b.barrier();
        let took = t0.elapsed();
        // Later calls fail at once, naming the same PE.
        let again = b.allgather(b"x");
        Some((r, again, took))
    });
    for (rank, r) in join_all(hs).into_iter().enumerate() {
        let Some((r, again, took)) = r else { continue };
        match r {
            Err(Error::PeerFailed { peer: 2, .. }) => {}
            other => panic!("PE {rank}: expected PeerFailed naming PE 2, got {other:?}"),
        }
        assert!(matches!(again, Err(Error::PeerFailed { peer: 2, .. })), "PE {rank}: {again:?}");
        assert!(took < Duration::from_secs(5), "PE {rank} took {took:?}");
    }
}

#[test]
fn dropped_root_is_reported_promptly() {
    let _serial = serial();
    let path = socket_path("drop-root");
    let hs = spawn_pes(0..3, 3, &path, Duration::from_secs(30), |b| {
        let b = b.unwrap();
        b.barrier().unwrap();
        if b.rank() == 0 {
            return None;
        }
        let t0 = Instant::now();
        Some((b.barrier(), t0.elapsed()))
    });
    for r in join_all(hs).into_iter().flatten() {
        assert!(matches!(r.0, Err(Error::PeerFailed { peer: 0, .. })), "{:?}", r.0);
        assert!(r.1 < Duration::from_secs(5), "took {:?}", r.1);
    }
}

#[test]
fn abort_propagates_from_any_pe() {
    let _serial = serial();
    for aborter in [1, 0] {
        let path = socket_path("abort");
        let hs = spawn_pes(0..4, 4, &path, Duration::from_secs(30), move |b| {
            let b = b.unwrap();
            b.barrier().unwrap();
            if b.rank() == aborter {
                std::thread::sleep(Duration::from_millis(100));
                b.abort("out of coffee");
                return None;
            }
            let t0 = Instant::now();
            Some((b.allgather(b"data"), t0.elapsed()))
        });
        for (rank, r) in join_all(hs).into_iter().enumerate() {
            let Some((r, took)) = r else { continue };
            match r {
                Err(Error::PeerFailed { peer, why, .. }) => {
                    assert_eq!(peer, aborter, "PE {rank}");
                    assert!(why.contains("out of coffee"), "PE {rank}: {why}");
                }
                other => panic!("PE {rank}: expected PeerFailed naming PE {aborter}, got {other:?}"),
            }
            assert!(took < Duration::from_secs(5), "PE {rank} took {took:?}");
        }
    }
}

#[test]
fn abort_ends_a_wait_of_the_same_pe() {
    let _serial = serial();
    let path = socket_path("abort-self");
    let hs = spawn_pes(0..2, 2, &path, Duration::from_secs(30), |b| {
        let b = std::sync::Arc::new(b.unwrap());
        if b.rank() == 0 {
            // PE 0 never joins the round: PE 1's wait can only end by its own abort.
            std::thread::sleep(Duration::from_millis(800));
            return None;
        }
        let waiter = {
            let b = b.clone();
            std::thread::spawn(move || {
                let t0 = Instant::now();
                (b.barrier(), t0.elapsed())
            })
        };
        std::thread::sleep(Duration::from_millis(100));
        b.abort("giving up");
        Some(waiter.join().unwrap())
    });
    let (r, took) = join_all(hs).pop().flatten().unwrap();
    assert!(matches!(r, Err(Error::PeerFailed { peer: 1, .. })), "{r:?}");
    assert!(took < Duration::from_secs(5), "took {took:?}");
}

#[test]
fn size_mismatch_and_duplicate_rank_fail_clearly() {
    let _serial = serial();
    let path = socket_path("mismatch");
    let t = Duration::from_secs(5);
    let root = {
        let e = env(0, 3, &path);
        std::thread::spawn(move || SocketBootstrap::connect(&e, t).map(|_| ()))
    };
    let wrong = {
        let e = env(1, 4, &path);
        std::thread::spawn(move || SocketBootstrap::connect(&e, t).map(|_| ()))
    };
    for r in [root.join().unwrap(), wrong.join().unwrap()] {
        match r {
            Err(Error::Mismatch { detail, .. }) => {
                assert!(detail.contains("4 PEs") && detail.contains("3 PEs"), "{detail}")
            }
            other => panic!("expected a mismatch, got {other:?}"),
        }
    }

    let path = socket_path("duplicate");
    let hs: Vec<_> = [0, 1, 1]
        .into_iter()
        .map(|rank| {
            let e = env(rank, 3, &path);
            std::thread::spawn(move || SocketBootstrap::connect(&e, t).map(|_| ()))
        })
        .collect();
    let results = join_all(hs);
    assert!(matches!(&results[0], Err(Error::Mismatch { detail, .. }) if detail.contains("PE 1")), "{:?}", results[0]);
    // Both claimants fail (one told of the mismatch), none hangs.
    assert!(results[1..].iter().all(|r| matches!(r, Err(Error::Mismatch { .. }))), "{results:?}");
}

#[test]
fn rendezvous_path_that_is_not_a_socket_is_left_alone() {
    let _serial = serial();
    let path = socket_path("not-a-socket");
    std::fs::write(&path, b"precious").unwrap();
    match SocketBootstrap::connect(&env(0, 2, &path), Duration::from_millis(200)) {
        Err(Error::Config { why, .. }) => assert!(why.contains("not a socket"), "{why}"),
        other => panic!("expected a Config error, got {:?}", other.map(|_| ())),
    }
    assert_eq!(std::fs::read(&path).unwrap(), b"precious");
    std::fs::remove_file(&path).unwrap();
}

/// Jobs made one after another on the same rendezvous path (as the GPU tests'
/// process mode does: one `Shmem` per test step), with PE 0 the slowest to come
/// back: the later PEs must wait for its new listener, not reach a stale one.
#[test]
fn sequential_jobs_on_one_path() {
    let _serial = serial();
    let path = socket_path("sequential");
    let handles = spawn_pes(0..3, 3, &path, Duration::from_secs(10), |_| ());
    for h in handles {
        h.join().unwrap();
    }
    for round in 0..5u8 {
        let hs: Vec<_> = (0..3usize)
            .map(|rank| {
                let path = path.clone();
                std::thread::spawn(move || {
                    if rank == 0 {
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    let b = SocketBootstrap::connect(&env(rank, 3, &path), Duration::from_secs(10)).unwrap();
                    let all = b.allgather(&[rank as u8, round]).unwrap();
                    assert_eq!(all, vec![vec![0, round], vec![1, round], vec![2, round]]);
                    b.barrier().unwrap();
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
    }
}
