//! The socket bootstrap over TCP (loopback here; see `multinode.rs` for PEs in
//! separate simulated nodes): PEs meet and exchange, and every failure is an
//! error that names the address and what arrived, before or at the timeout:
//! no secret, a wrong secret, a PE that never arrives, a stray listener on the
//! port (holding it from PE 0, or answering the PEs), silent connections.

mod common;

use common::{serial, SECRET};
use gpushmem::bootstrap::address::Rendezvous;
use gpushmem::bootstrap::env::LaunchEnv;
use gpushmem::bootstrap::socket::SocketBootstrap;
use gpushmem::bootstrap::Bootstrap;
use gpushmem::Error;
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// A port nothing listens on now (bound and released: a small race remains).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn tcp_env(rank: usize, size: usize, port: u16, secret: Option<&str>) -> LaunchEnv {
    common::env_at(rank, size, Rendezvous::Tcp { host: "127.0.0.1".into(), port }, secret)
}

/// Connects PEs `ranks` of a `size`-PE job at `port`, each in its own thread, with
/// its secret; returns each one's result in the order of `ranks`.
fn connect_all(
    ranks: &[(usize, Option<&str>)],
    size: usize,
    port: u16,
    timeout: Duration,
) -> Vec<gpushmem::Result<SocketBootstrap>> {
    std::thread::scope(|s| {
        let hs: Vec<_> = ranks
            .iter()
            .map(|&(rank, secret)| {
                s.spawn(move || SocketBootstrap::connect(&tcp_env(rank, size, port, secret), timeout))
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

#[test]
fn four_pes_meet_over_tcp_and_exchange() {
    let _g = serial();
    let port = free_port();
    let ranks: Vec<_> = (0..4).map(|r| (r, Some(SECRET))).collect();
    let boots: Vec<SocketBootstrap> =
        connect_all(&ranks, 4, port, Duration::from_secs(20)).into_iter().map(Result::unwrap).collect();
    let all: Vec<Vec<Vec<u8>>> = std::thread::scope(|s| {
        let hs: Vec<_> = boots
            .iter()
            .map(|b| {
                s.spawn(move || {
                    b.barrier().unwrap();
                    b.allgather(&vec![b.rank() as u8; 1000 * b.rank()]).unwrap()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for got in &all {
        for (pe, v) in got.iter().enumerate() {
            assert_eq!(v, &vec![pe as u8; 1000 * pe]);
        }
    }
}

#[test]
fn no_secret_is_refused_at_once_saying_how_to_set_it() {
    let t0 = Instant::now();
    for rank in [0, 1] {
        match SocketBootstrap::connect(&tcp_env(rank, 2, free_port(), None), Duration::from_secs(30)) {
            Err(Error::Config { name, why, .. }) => {
                assert_eq!(name, "GPUSHMEM_BOOTSTRAP_SECRET");
                assert!(why.contains("openssl rand -hex 32") && why.contains("tcp://127.0.0.1:"), "{why}");
            }
            other => panic!("PE {rank} without a secret over TCP: {:?}", other.map(|_| ())),
        }
    }
    assert!(t0.elapsed() < Duration::from_secs(5), "took {:?}", t0.elapsed());
    // One PE alone needs nobody: no secret needed.
    SocketBootstrap::connect(&tcp_env(0, 1, free_port(), None), Duration::from_secs(1)).unwrap();
}

#[test]
fn a_wrong_secret_is_refused_by_both_ends() {
    let _g = serial();
    let port = free_port();
    let other = "another-jobs-secret-0123456789";
    let r = connect_all(&[(0, Some(SECRET)), (1, Some(other))], 2, port, Duration::from_secs(3));
    match &r[1] {
        Err(Error::BootstrapRefused { why, path, .. }) => {
            assert_eq!(path.to_str(), Some(format!("tcp://127.0.0.1:{port}").as_str()));
            assert!(why.contains("did not prove this job's secret"), "{why}");
        }
        other => panic!("PE 1 with a wrong secret: {:?}", other.as_ref().map(|_| ())),
    }
    match &r[0] {
        Err(Error::BootstrapTimeout { what, missing, .. }) => {
            assert_eq!(missing, &[1]);
            assert!(
                what.contains(&format!("tcp://127.0.0.1:{port}")) && what.contains("1 connection(s) refused"),
                "{what}"
            );
        }
        other => panic!("PE 0: {:?}", other.as_ref().map(|_| ())),
    }
}

#[test]
fn a_pe_that_never_arrives_times_out_naming_it_and_the_address() {
    let _g = serial();
    let port = free_port();
    let t0 = Instant::now();
    let r = connect_all(&[(0, Some(SECRET)), (1, Some(SECRET))], 3, port, Duration::from_secs(2));
    // PE 0 at its timeout; PE 1 at PE 0's report, within its grace.
    assert!(t0.elapsed() < Duration::from_secs(6), "took {:?}", t0.elapsed());
    for (pe, res) in r.iter().enumerate() {
        match res {
            Err(Error::BootstrapTimeout { missing, what, .. }) => {
                assert_eq!(missing, &[2], "PE {pe}");
                assert!(what.contains(&format!("tcp://127.0.0.1:{port}")), "PE {pe}: {what}");
            }
            other => panic!("PE {pe}: {:?}", other.as_ref().map(|_| ())),
        }
    }
    // And a PE whose PE 0 never comes: its timeout names the address.
    let t0 = Instant::now();
    match SocketBootstrap::connect(&tcp_env(1, 2, free_port(), Some(SECRET)), Duration::from_secs(1)) {
        Err(Error::BootstrapTimeout { missing, what, .. }) => {
            assert_eq!(missing, [0]);
            assert!(
                what.contains("connect to PE 0 at tcp://127.0.0.1:") && what.contains("is rank 0 running"),
                "{what}"
            );
        }
        other => panic!("{:?}", other.map(|_| ())),
    }
    assert!(t0.elapsed() < Duration::from_secs(3), "took {:?}", t0.elapsed());
}

#[test]
fn a_stray_listener_on_the_port_fails_the_job_clearly() {
    let _g = serial();
    let stray = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = stray.local_addr().unwrap().port();
    // PE 0 cannot listen there: said at once.
    match SocketBootstrap::connect(&tcp_env(0, 2, port, Some(SECRET)), Duration::from_secs(10)) {
        Err(Error::BootstrapIo { what, source, .. }) => {
            assert_eq!(source.kind(), std::io::ErrorKind::AddrInUse);
            assert!(what.contains("another process listens on this port"), "{what}");
        }
        other => panic!("PE 0 on a taken port: {:?}", other.map(|_| ())),
    }
    // A PE that reaches a stray which talks: not a gpushmem PE 0, said when it talks.
    let t0 = Instant::now();
    let talker = std::thread::spawn(move || {
        let (mut c, _) = stray.accept().unwrap();
        c.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n").unwrap();
        std::thread::sleep(Duration::from_millis(500));
        stray
    });
    match SocketBootstrap::connect(&tcp_env(1, 2, port, Some(SECRET)), Duration::from_secs(10)) {
        Err(e @ Error::BootstrapIo { .. }) => assert!(e.to_string().contains("message"), "{e}"),
        other => panic!("PE 1 at a talking stray: {:?}", other.map(|_| ())),
    }
    assert!(t0.elapsed() < Duration::from_secs(5), "took {:?}", t0.elapsed());
    // A stray that accepts and says nothing: the PE's timeout, naming what it waited for.
    let stray = talker.join().unwrap();
    let silent = std::thread::spawn(move || {
        let c = stray.accept().unwrap();
        std::thread::sleep(Duration::from_secs(4));
        drop(c);
    });
    match SocketBootstrap::connect(&tcp_env(1, 2, port, Some(SECRET)), Duration::from_secs(1)) {
        Err(Error::BootstrapTimeout { what, missing, .. }) => {
            assert_eq!(missing, [0]);
            assert!(what.contains("challenge"), "{what}");
        }
        other => panic!("PE 1 at a silent stray: {:?}", other.map(|_| ())),
    }
    silent.join().unwrap();
}

#[test]
fn silent_tcp_connections_do_not_hold_pe_zero() {
    let _g = serial();
    let port = free_port();
    let pe0 = std::thread::spawn(move || {
        SocketBootstrap::connect(&tcp_env(0, 2, port, Some(SECRET)), Duration::from_secs(20))
    });
    // Connections from anyone who reaches the port, saying nothing.
    let mut idle = Vec::new();
    let t0 = Instant::now();
    // More than PE 0 handshakes with at once (64): over TCP the oldest silent ones make room.
    while idle.len() < 100 && t0.elapsed() < Duration::from_secs(10) {
        match TcpStream::connect(("127.0.0.1", port)) {
            Ok(c) => idle.push(c),
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
    assert_eq!(idle.len(), 100);
    let t1 = Instant::now();
    let pe1 = SocketBootstrap::connect(&tcp_env(1, 2, port, Some(SECRET)), Duration::from_secs(20)).unwrap();
    assert!(t1.elapsed() < Duration::from_secs(10), "PE 1 joined after {:?}", t1.elapsed());
    let pe0 = pe0.join().unwrap().unwrap();
    std::thread::scope(|s| {
        let h = s.spawn(|| pe0.allgather(b"zero").unwrap());
        assert_eq!(pe1.allgather(b"one").unwrap(), [b"zero".to_vec(), b"one".to_vec()]);
        h.join().unwrap();
    });
    drop(idle);
}
