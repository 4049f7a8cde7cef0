//! Bootstrap for one process per PE, over a Unix-domain socket on one node.
//!
//! PE 0 listens at [`LaunchEnv::rendezvous`] and every other PE connects to it:
//! a star.
//!
//! Joining is authenticated before any payload moves:
//! 1. both ends read the other's user id from the kernel (`SO_PEERCRED`); a
//!    process of another user gets nothing ([`Error::BootstrapRefused`] for
//!    the connecting PE; PE 0 closes such a connection and keeps waiting, and
//!    a flood of them neither holds it past its timeout nor fills its memory:
//!    it accepts in bounded batches and keeps only the first few reasons and a
//!    count);
//! 2. PE 0 sends a challenge (a fresh nonce); the PE answers with its rank,
//!    the job size, a nonce of its own and an HMAC over both nonces keyed with
//!    the job's secret ([`super::auth`]); PE 0 refuses a wrong proof;
//! 3. PE 0's "every PE connected" carries its own proof, which the PE checks:
//!    neither end takes the other's word without the secret.
//!
//! An allgather is one round trip: each PE sends its contribution to
//! PE 0, which answers every PE with all contributions in PE order. Messages
//! carry a round number, so a PE out of step is an error, never mixed data.
//!
//! Failures end every PE's wait promptly rather than at the timeout:
//! - a PE whose connection closes (process died, bootstrap dropped) is named in
//!   [`Error::PeerFailed`] by PE 0, which tells every other PE;
//! - PE 0 closing its connections fails every other PE naming PE 0;
//! - [`Bootstrap::abort`] sends an abort message that PE 0 forwards;
//! - when PE 0's wait times out it tells the others which PEs it was missing,
//!   so every PE reports [`Error::BootstrapTimeout`] naming the same PEs.
//!
//! After a failure the bootstrap is unusable: later calls fail at once with
//! [`Error::PeerFailed`] naming the PE of the first failure.

use super::auth::{nonce, peer_cred, prove, verify, PeerCred, NONCE, PROOF, SECRET_VAR};
use super::env::LaunchEnv;
use super::rendezvous::{ensure_private_dir, my_euid};
use super::Bootstrap;
use crate::{Error, Result};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Identifies the protocol (and its version) in a hello, so that a stray
/// connection to the socket is ignored rather than taken for a PE.
const MAGIC: u64 = u64::from_le_bytes(*b"gpshmBS2");

/// kind (1) + from (4) + round (8) + payload length (8).
const HEADER: usize = 21;

/// Largest hello accepted: a stray client cannot make PE 0 allocate much.
const MAX_HELLO: u64 = 128;

/// Hello payload: magic, job size, the PE's nonce, its proof.
const HELLO_LEN: usize = 16 + NONCE + PROOF;

/// Labels of the two proofs, so that neither can stand for the other.
const PROOF_HELLO: &[u8] = b"gpushmem bootstrap: PE to PE 0";
const PROOF_READY: &[u8] = b"gpushmem bootstrap: PE 0 to PE";

/// How long PE 0 waits for one connection's hello: a silent stray connection
/// must not hold up the PEs behind it.
const HELLO_WAIT: Duration = Duration::from_secs(5);

/// Most connections PE 0 accepts per wake-up while PEs connect, so that it
/// looks at its deadline and its connected PEs between batches.
const ACCEPTS_PER_WAKE: usize = 32;

/// How many refused connections PE 0 describes (and logs); the rest are counted.
const REFUSALS_KEPT: usize = 8;

/// Message kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// PE → PE 0: magic and job size; `from` is the PE's rank.
    Hello = 1,
    /// PE 0 → PE: every PE has connected.
    Ready = 2,
    /// PE → PE 0: a contribution to round `round`.
    Contrib = 3,
    /// PE 0 → PE: all contributions of round `round`.
    Result = 4,
    /// Either way: PE `from` failed; payload = why.
    Abort = 5,
    /// PE 0 → PE: PE 0's wait timed out; payload = the missing PEs and the operation.
    Timeout = 6,
    /// PE 0 → PE: PEs disagree about the job; payload = the details.
    Mismatch = 7,
    /// PE 0 → connecting process, first: magic and PE 0's nonce.
    Challenge = 8,
    /// PE 0 → connecting process: not admitted; payload = why.
    Refused = 9,
}

impl Kind {
    fn from_u8(b: u8) -> Option<Kind> {
        [
            Kind::Hello,
            Kind::Ready,
            Kind::Contrib,
            Kind::Result,
            Kind::Abort,
            Kind::Timeout,
            Kind::Mismatch,
            Kind::Challenge,
            Kind::Refused,
        ]
        .into_iter()
        .find(|k| *k as u8 == b)
    }
}

struct Frame {
    kind: Kind,
    from: usize,
    round: u64,
    payload: Vec<u8>,
}

/// Why a transfer on one connection stopped.
#[derive(Debug)]
enum Stop {
    /// The other end closed the connection.
    Closed,
    /// The deadline passed.
    TimedOut,
    /// This PE's own [`Bootstrap::abort`] was called.
    Woken,
    /// Any other OS error.
    Io(io::Error),
    /// Bytes that are not this protocol.
    Garbled(String),
}

/// One PE's end of a socket bootstrap; make it with [`SocketBootstrap::connect`].
pub struct SocketBootstrap {
    rank: usize,
    size: usize,
    timeout: Duration,
    /// Serializes collective calls; holds the connections.
    state: Mutex<State>,
    /// The first failure, as (PE to blame, why): later calls fail with it at once.
    failed: Mutex<Option<(usize, String)>>,
    /// Self-pipe: [`Bootstrap::abort`] writes to it so that a wait of this PE in
    /// another thread ends at once (every wait polls the read end).
    wake_rx: OwnedFd,
    wake_tx: OwnedFd,
}

struct State {
    /// Number of the next allgather round.
    round: u64,
    /// PE 0: one per other PE, in PE order; other PEs: the one to PE 0.
    links: Vec<Link>,
    /// This PE's abort message went out already.
    abort_sent: bool,
}

struct Link {
    /// The PE at the other end.
    pe: usize,
    stream: UnixStream,
}

impl SocketBootstrap {
    /// Joins the job `env` describes: PE 0 listens at `env.rendezvous` (removing a
    /// stale socket file there) and waits for the others; the others connect,
    /// retrying while PE 0 is not up yet. A symbolic link at that path is
    /// [`Error::BootstrapRefused`] for every PE. Returns once every PE has connected,
    /// or fails after `timeout` naming the PEs that did not.
    pub fn connect(env: &LaunchEnv, timeout: Duration) -> Result<SocketBootstrap> {
        if env.size == 0 || env.rank >= env.size {
            return Err(Error::Config {
                name: "LaunchEnv".into(),
                value: format!("rank {} of {}", env.rank, env.size),
                why: "rank must be less than size".into(),
            });
        }
        let (wake_rx, wake_tx) = pipe().map_err(|source| Error::BootstrapIo {
            me: env.rank,
            what: "create the wake-up pipe".into(),
            source,
        })?;
        if let (Some(dir), true) = (&env.private_dir, env.size > 1) {
            ensure_private_dir(dir, env.rank)?;
        }
        let links = match (env.size, env.rank) {
            (1, _) => Vec::new(),
            (_, 0) => serve(env, timeout)?,
            _ => join(env, timeout)?,
        };
        Ok(SocketBootstrap {
            rank: env.rank,
            size: env.size,
            timeout,
            state: Mutex::new(State { round: 0, links, abort_sent: false }),
            failed: Mutex::new(None),
            wake_rx,
            wake_tx,
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere leaves nothing half-written that matters: a broken
        // connection shows up as an error on the next transfer.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn failed(&self) -> MutexGuard<'_, Option<(usize, String)>> {
        self.failed.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records the first failure; later calls report it.
    fn remember(&self, peer: usize, why: impl Into<String>) {
        self.failed().get_or_insert_with(|| (peer, why.into()));
    }

    /// The error a call gets once this bootstrap has failed (or was aborted).
    fn sticky(&self) -> Option<Error> {
        let f = self.failed();
        f.as_ref().map(|(peer, why)| Error::PeerFailed { me: self.rank, peer: *peer, why: why.clone() })
    }

    /// Records that `peer` failed and returns the error naming it.
    fn peer_failed(&self, peer: usize, why: String) -> Error {
        self.remember(peer, why.clone());
        Error::PeerFailed { me: self.rank, peer, why }
    }

    fn timed_out(&self, what: &str, missing: Vec<usize>) -> Error {
        let why = format!("bootstrap {what} timed out after {:?} waiting for PE(s) {missing:?}", self.timeout);
        self.remember(missing.first().copied().unwrap_or(self.rank), why);
        Error::BootstrapTimeout { me: self.rank, what: what.into(), timeout: self.timeout, missing }
    }

    fn io_failed(&self, what: String, source: io::Error) -> Error {
        self.remember(self.rank, format!("bootstrap I/O error during {what}: {source}"));
        Error::BootstrapIo { me: self.rank, what, source }
    }

    /// Sends a message to every connection but `skip`'s, best effort and briefly:
    /// used to spread a failure, when nothing more can go wrong that matters.
    fn tell(&self, st: &State, kind: Kind, from: usize, round: u64, payload: &[u8], skip: Option<usize>) {
        let deadline = Instant::now() + self.timeout.min(Duration::from_secs(1));
        for l in st.links.iter().filter(|l| Some(l.pe) != skip) {
            if let Err(e) = write_frame(&l.stream, kind, from, round, payload, None, deadline) {
                log::debug!("PE {}: could not tell PE {} about a failure ({kind:?}): {e:?}", self.rank, l.pe);
            }
        }
    }

    /// Maps a transfer's end on the connection to `pe` to an error; PE 0 tells
    /// the other PEs about it.
    fn stopped(&self, st: &mut State, stop: Stop, pe: usize, what: &str, round: u64, missing: Vec<usize>) -> Error {
        let is_root = self.rank == 0;
        match stop {
            Stop::Woken => self.sticky().unwrap_or_else(|| self.peer_failed(self.rank, "aborted".into())),
            Stop::Closed => {
                let why = format!(
                    "PE {pe} closed its bootstrap connection during {what} round {round} \
                     (the process exited or crashed, or dropped its bootstrap)"
                );
                if is_root {
                    self.tell(st, Kind::Abort, pe, 0, why.as_bytes(), Some(pe));
                }
                self.peer_failed(pe, why)
            }
            Stop::TimedOut => {
                if is_root {
                    self.tell(st, Kind::Timeout, 0, round, &encode_timeout(what, &missing), None);
                } else {
                    let why = format!("PE {} timed out after {:?} waiting for PE 0 in {what}", self.rank, self.timeout);
                    self.tell(st, Kind::Abort, self.rank, 0, why.as_bytes(), None);
                }
                self.timed_out(what, missing)
            }
            Stop::Io(e) => {
                let why = format!("PE {}: bootstrap I/O error with PE {pe} during {what}: {e}", self.rank);
                self.tell(st, Kind::Abort, self.rank, 0, why.as_bytes(), Some(pe));
                self.io_failed(format!("{what} round {round} with PE {pe}"), e)
            }
            Stop::Garbled(detail) => {
                let why = format!("PE {}: protocol error from PE {pe} during {what}: {detail}", self.rank);
                self.tell(st, Kind::Abort, self.rank, 0, why.as_bytes(), None);
                self.io_failed(
                    format!("{what} round {round} with PE {pe}"),
                    io::Error::new(io::ErrorKind::InvalidData, detail),
                )
            }
        }
    }

    /// Allgather (or barrier, named `what` in errors).
    fn exchange(&self, what: &'static str, mine: &[u8]) -> Result<Vec<Vec<u8>>> {
        if let Some(e) = self.sticky() {
            return Err(e);
        }
        if self.size == 1 {
            return Ok(vec![mine.to_vec()]);
        }
        let mut st = self.state();
        // Checked again: abort() may have run while this call waited for the lock.
        if let Some(e) = self.sticky() {
            return Err(e);
        }
        let round = st.round;
        st.round += 1;
        log::trace!("PE {}: {what} round {round} ({} bytes)", self.rank, mine.len());
        if self.rank == 0 {
            self.root_exchange(&mut st, what, round, mine)
        } else {
            self.leaf_exchange(&mut st, what, round, mine)
        }
    }

    fn root_exchange(&self, st: &mut State, what: &str, round: u64, mine: &[u8]) -> Result<Vec<Vec<u8>>> {
        let deadline = Instant::now() + self.timeout;
        let mut slots: Vec<Option<Vec<u8>>> = vec![None; self.size];
        slots[0] = Some(mine.to_vec());
        let missing =
            |slots: &[Option<Vec<u8>>]| slots.iter().enumerate().filter(|s| s.1.is_none()).map(|s| s.0).collect();
        let mut waiting = self.size - 1;
        while waiting > 0 {
            // Every connection is watched, not only the missing PEs': one that
            // already contributed may still close or abort.
            let mut fds: Vec<libc::pollfd> =
                st.links.iter().map(|l| pollfd(l.stream.as_raw_fd(), libc::POLLIN)).collect();
            fds.push(pollfd(self.wake_rx.as_raw_fd(), libc::POLLIN));
            match poll(&mut fds, deadline) {
                Ok(true) => {}
                Ok(false) => return Err(self.stopped(st, Stop::TimedOut, 0, what, round, missing(&slots))),
                Err(e) => return Err(self.stopped(st, Stop::Io(e), 0, what, round, Vec::new())),
            }
            let n = st.links.len();
            for (i, ready) in fds[..n].iter().enumerate() {
                if ready.revents == 0 {
                    continue;
                }
                let pe = st.links[i].pe;
                let f = match read_frame(&st.links[i].stream, None, deadline, u64::MAX) {
                    Ok(f) => f,
                    Err(stop) => return Err(self.stopped(st, stop, pe, what, round, missing(&slots))),
                };
                match f.kind {
                    Kind::Contrib if f.round == round && slots[pe].is_none() => {
                        slots[pe] = Some(f.payload);
                        waiting -= 1;
                    }
                    Kind::Abort => {
                        let why = String::from_utf8_lossy(&f.payload).into_owned();
                        log::debug!("PE 0: PE {} aborted ({why}); telling the others", f.from);
                        self.tell(st, Kind::Abort, f.from, 0, &f.payload, Some(pe));
                        return Err(self.peer_failed(f.from, why));
                    }
                    _ => {
                        let detail = format!(
                            "unexpected {:?} for round {} while in round {round} (PEs out of step)",
                            f.kind, f.round
                        );
                        return Err(self.stopped(st, Stop::Garbled(detail), pe, what, round, Vec::new()));
                    }
                }
            }
            if fds[st.links.len()].revents != 0 {
                return Err(self.stopped(st, Stop::Woken, 0, what, round, Vec::new()));
            }
        }
        let all: Vec<Vec<u8>> = slots.into_iter().map(Option::unwrap_or_default).collect();
        let payload = encode_all(&all);
        for i in 0..st.links.len() {
            let pe = st.links[i].pe;
            let sent =
                write_frame(&st.links[i].stream, Kind::Result, 0, round, &payload, Some(&self.wake_rx), deadline);
            if let Err(stop) = sent {
                return Err(self.stopped(st, stop, pe, what, round, vec![pe]));
            }
        }
        Ok(all)
    }

    fn leaf_exchange(&self, st: &mut State, what: &str, round: u64, mine: &[u8]) -> Result<Vec<Vec<u8>>> {
        let deadline = Instant::now() + self.timeout;
        let wake = Some(&self.wake_rx);
        match write_frame(&st.links[0].stream, Kind::Contrib, self.rank, round, mine, wake, deadline) {
            // PE 0 gone: it may have said why before closing; the read below finds out.
            Ok(()) | Err(Stop::Closed) => {}
            Err(stop) => return Err(self.stopped(st, stop, 0, what, round, vec![0])),
        }
        // PE 0 waits `timeout` from when it joins the round and then reports who
        // was missing; wait a little longer so that its report, naming the PE
        // really at fault, arrives first.
        let f = match read_frame(&st.links[0].stream, wake, deadline + grace(self.timeout), u64::MAX) {
            Ok(f) => f,
            Err(stop) => return Err(self.stopped(st, stop, 0, what, round, vec![0])),
        };
        match f.kind {
            Kind::Result if f.round == round => match decode_all(&f.payload, self.size) {
                Ok(all) => Ok(all),
                Err(detail) => Err(self.stopped(st, Stop::Garbled(detail), 0, what, round, Vec::new())),
            },
            _ => Err(self.leaf_told(st, f, what, round)),
        }
    }

    /// The error for a message from PE 0 other than the expected answer.
    fn leaf_told(&self, st: &mut State, f: Frame, what: &str, round: u64) -> Error {
        let text = || String::from_utf8_lossy(&f.payload).into_owned();
        match f.kind {
            Kind::Abort => self.peer_failed(f.from, text()),
            Kind::Timeout => {
                let (op, missing) = decode_timeout(&f.payload);
                self.timed_out(&format!("{op} (reported by PE 0)"), missing)
            }
            Kind::Mismatch => {
                self.remember(0, text());
                Error::Mismatch { me: self.rank, call: "bootstrap connect", detail: text() }
            }
            _ => {
                let detail =
                    format!("unexpected {:?} for round {} while in round {round} (PEs out of step)", f.kind, f.round);
                self.stopped(st, Stop::Garbled(detail), 0, what, round, Vec::new())
            }
        }
    }
}

impl Bootstrap for SocketBootstrap {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn allgather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>> {
        self.exchange("allgather", mine)
    }

    fn barrier(&self) -> Result<()> {
        self.exchange("barrier", &[]).map(|_| ())
    }

    fn abort(&self, why: &str) {
        self.remember(self.rank, format!("PE {} aborted: {why}", self.rank));
        // End a wait of this PE in another thread, which holds the state lock.
        // SAFETY: writes one byte from a live buffer to a pipe we own.
        unsafe { libc::write(self.wake_tx.as_raw_fd(), b"!".as_ptr().cast(), 1) };
        let mut st = self.state();
        if st.abort_sent {
            return;
        }
        st.abort_sent = true;
        log::debug!("PE {}: aborting: {why}", self.rank);
        // PE 0 tells everyone; another PE tells PE 0, which forwards it.
        self.tell(&st, Kind::Abort, self.rank, 0, why.as_bytes(), None);
    }
}

/// Extra wait of a PE other than 0 beyond `timeout`, for PE 0's own report.
fn grace(timeout: Duration) -> Duration {
    (timeout / 2).min(Duration::from_secs(2))
}

/// PE 0's side of connecting: listen, admit `size - 1` PEs, say Ready.
fn serve(env: &LaunchEnv, timeout: Duration) -> Result<Vec<Link>> {
    let (size, path) = (env.size, env.rendezvous.as_path());
    let io_err = |what: String, source| Error::BootstrapIo { me: 0, what, source };
    let deadline = Instant::now() + timeout;
    claim(path)?;
    let listener = UnixListener::bind(path).map_err(|e| io_err(format!("listen at {}", path.display()), e))?;
    // Everyone is connected (or the job failed) when this returns: nobody else needs the file.
    let _unlink = RemoveOnDrop(path);
    listener.set_nonblocking(true).map_err(|e| io_err("set the listening socket non-blocking".into(), e))?;
    log::debug!("PE 0: listening at {} for {} PEs", path.display(), size - 1);
    // Per PE: its connection and the proof its Ready carries.
    let mut links: Vec<Option<(UnixStream, [u8; PROOF])>> = (0..size).map(|_| None).collect();
    // Connections turned away, for the error should PEs then be missing.
    let mut refused = Refusals::default();
    let mut joined = 1;
    // Sends `kind` to every PE connected so far and returns `err`.
    let fail_all =
        |links: &[Option<(UnixStream, [u8; PROOF])>], kind: Kind, from: usize, payload: &[u8], err: Error| {
            let until = Instant::now() + timeout.min(Duration::from_secs(1));
            for (s, _) in links.iter().flatten() {
                let _ = write_frame(s, kind, from, 0, payload, None, until);
            }
            err
        };
    let timed_out = |links: &[Option<(UnixStream, [u8; PROOF])>], refused: &Refusals| {
        let missing: Vec<usize> = (1..size).filter(|&pe| links[pe].is_none()).collect();
        let what = match refused.summary() {
            None => format!("connect (PE 0 listening at {})", path.display()),
            Some(r) => format!("connect (PE 0 listening at {}; {r})", path.display()),
        };
        let payload = encode_timeout(&what, &missing);
        let err = Error::BootstrapTimeout { me: 0, what, timeout, missing };
        fail_all(links, Kind::Timeout, 0, &payload, err)
    };
    while joined < size {
        // Checked before polling too: a listener that is always readable (a
        // flood of connections) must not keep PE 0 past its deadline.
        if Instant::now() >= deadline {
            return Err(timed_out(&links, &refused));
        }
        // Watch the connected PEs too: one that dies now fails the job at once.
        let connected: Vec<usize> = (1..size).filter(|&pe| links[pe].is_some()).collect();
        let mut fds: Vec<libc::pollfd> = connected
            .iter()
            .map(|&pe| pollfd(links[pe].as_ref().map_or(-1, |l| l.0.as_raw_fd()), libc::POLLIN))
            .collect();
        fds.push(pollfd(listener.as_raw_fd(), libc::POLLIN));
        match poll(&mut fds, deadline) {
            Ok(true) => {}
            Ok(false) => return Err(timed_out(&links, &refused)),
            Err(e) => return Err(io_err("wait for PEs to connect".into(), e)),
        }
        if let Some(i) = fds[..connected.len()].iter().position(|p| p.revents != 0) {
            // Nothing is expected from a connected PE before Ready.
            let pe = connected[i];
            let why = format!(
                "PE {pe} closed its bootstrap connection before every PE had connected (the process exited or crashed?)"
            );
            links[pe] = None;
            let err = Error::PeerFailed { me: 0, peer: pe, why: why.clone() };
            return Err(fail_all(&links, Kind::Abort, pe, why.as_bytes(), err));
        }
        // A bounded batch per wake-up, and never past the deadline or once every
        // PE is in: a stray connection then neither delays Ready nor counts as a PE.
        for _ in 0..ACCEPTS_PER_WAKE {
            if joined == size || Instant::now() >= deadline {
                break;
            }
            let stream = match listener.accept() {
                Ok((s, _)) => s,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted || e.kind() == io::ErrorKind::ConnectionAborted => {
                    continue
                }
                Err(e) => {
                    return Err(fail_all(&links, Kind::Abort, 0, b"PE 0 failed to accept", io_err("accept".into(), e)))
                }
            };
            let (pe, their_size, ready) = match admit(&stream, env, deadline) {
                Ok(a) => a,
                Err(Turned::Away(why)) => {
                    refused.add(path, why);
                    continue;
                }
                // A probe (see `claim`) or a PE that died at once; a PE that is really gone shows up as missing.
                Err(Turned::Silent(stop)) => {
                    log::debug!("PE 0: ignoring a connection that sent no hello: {stop:?}");
                    continue;
                }
            };
            let problem = if their_size != size as u64 {
                Some(format!("PE {pe} was started for a job of {their_size} PEs, PE 0 for {size} PEs"))
            } else if pe == 0 || pe >= size {
                Some(format!("a process connected as PE {pe}, but PE 0 expects PEs 1..{size}"))
            } else if links[pe].is_some() {
                Some(format!("two processes claim to be PE {pe}"))
            } else {
                None
            };
            if let Some(detail) = problem {
                let detail = format!("{detail} (check the launcher's rank/size variables and GPUSHMEM_BOOTSTRAP)");
                let until = Instant::now() + timeout.min(Duration::from_secs(1));
                let _ = write_frame(&stream, Kind::Mismatch, 0, 0, detail.as_bytes(), None, until);
                let err = Error::Mismatch { me: 0, call: "bootstrap connect", detail: detail.clone() };
                return Err(fail_all(&links, Kind::Mismatch, 0, detail.as_bytes(), err));
            }
            links[pe] = Some((stream, ready));
            joined += 1;
            log::debug!("PE 0: PE {pe} connected ({joined}/{size})");
        }
    }
    let links: Vec<(Link, [u8; PROOF])> = links
        .into_iter()
        .enumerate()
        .filter_map(|(pe, l)| l.map(|(stream, ready)| (Link { pe, stream }, ready)))
        .collect();
    for (l, ready) in &links {
        match write_frame(&l.stream, Kind::Ready, 0, 0, ready, None, deadline) {
            Ok(()) => {}
            Err(stop) => {
                let why = format!("PE {} left while connecting: {stop:?}", l.pe);
                let until = Instant::now() + timeout.min(Duration::from_secs(1));
                for (other, _) in links.iter().filter(|o| o.0.pe != l.pe) {
                    let _ = write_frame(&other.stream, Kind::Abort, l.pe, 0, why.as_bytes(), None, until);
                }
                return Err(Error::PeerFailed { me: 0, peer: l.pe, why });
            }
        }
    }
    log::debug!("PE 0: all {size} PEs connected");
    Ok(links.into_iter().map(|(l, _)| l).collect())
}

/// The connections PE 0 turned away while PEs connected: the first
/// [`REFUSALS_KEPT`] reasons and a count, so that a flood of connections costs
/// neither memory nor an endless log.
#[derive(Default)]
struct Refusals {
    first: Vec<String>,
    total: usize,
}

impl Refusals {
    fn add(&mut self, path: &Path, why: String) {
        self.total += 1;
        if self.first.len() < REFUSALS_KEPT {
            log::warn!("PE 0: refused a connection to {}: {why}", path.display());
            self.first.push(why);
        } else if self.total == REFUSALS_KEPT + 1 {
            log::warn!("PE 0: refusing more connections to {}; counting them without logging each", path.display());
        }
    }

    /// "N connection(s) refused meanwhile: why; why … and M more", or `None`.
    fn summary(&self) -> Option<String> {
        if self.total == 0 {
            return None;
        }
        let more = match self.total - self.first.len() {
            0 => String::new(),
            n => format!(" … and {n} more"),
        };
        Some(format!("{} connection(s) refused meanwhile: {}{more}", self.total, self.first.join("; ")))
    }
}

/// Why PE 0 did not admit a connection.
enum Turned {
    /// Refused (another user, no proof of the secret, not this protocol): the reason.
    Away(String),
    /// Went quiet or closed before its hello.
    Silent(Stop),
}

/// Authenticates one accepted connection (its user, then its proof of the
/// secret) and returns the PE's rank, its job size and the proof for its Ready.
fn admit(
    stream: &UnixStream,
    env: &LaunchEnv,
    deadline: Instant,
) -> std::result::Result<(usize, u64, [u8; PROOF]), Turned> {
    let cred = peer_cred(stream).map_err(|e| Turned::Away(format!("cannot read its credentials: {e}")))?;
    if cred.uid != my_euid() {
        // Another user's process gets nothing, not even the challenge.
        return Err(Turned::Away(format!(
            "a process of uid {} (pid {}) connected; only this user's (uid {}) may join",
            cred.uid,
            cred.pid,
            my_euid()
        )));
    }
    let until = deadline.min(Instant::now() + HELLO_WAIT);
    let mine = nonce().map_err(|e| Turned::Away(format!("no random nonce for pid {}: {e}", cred.pid)))?;
    write_frame(stream, Kind::Challenge, 0, 0, &[&MAGIC.to_le_bytes()[..], &mine].concat(), None, until)
        .map_err(Turned::Silent)?;
    let f = match read_frame(stream, None, until, MAX_HELLO) {
        Ok(f) if f.kind == Kind::Hello && f.payload.len() == HELLO_LEN && f.payload[..8] == MAGIC.to_le_bytes() => f,
        Ok(_) | Err(Stop::Garbled(_)) => {
            return Err(Turned::Away(format!("pid {} is not a gpushmem PE of this version", cred.pid)))
        }
        Err(stop) => return Err(Turned::Silent(stop)),
    };
    let their_size = u64::from_le_bytes(f.payload[8..16].try_into().unwrap_or_default());
    let (theirs, proof) = f.payload[16..].split_at(NONCE);
    let size = usize::try_from(their_size).unwrap_or(usize::MAX);
    if !verify(env.secret.as_ref(), PROOF_HELLO, (&mine, theirs), f.from, size, proof) {
        let why = format!(
            "pid {} (as PE {}) did not prove this job's secret: it was started with a different or no \
             {SECRET_VAR} (another job at the same rendezvous path?)",
            cred.pid, f.from
        );
        let _ = write_frame(stream, Kind::Refused, 0, 0, why.as_bytes(), None, until);
        return Err(Turned::Away(why));
    }
    Ok((f.from, their_size, prove(env.secret.as_ref(), PROOF_READY, (&mine, theirs), f.from, size)))
}

/// Makes `path` free for PE 0's socket: removes a stale socket file, but
/// refuses to take over one that a live process is listening on, and refuses
/// a symbolic link there.
fn claim(path: &Path) -> Result<()> {
    refuse_symlink(0, path)?;
    match UnixStream::connect(path) {
        Ok(s) => Err(Error::Config {
            name: "bootstrap rendezvous path (GPUSHMEM_BOOTSTRAP)".into(),
            value: path.display().to_string(),
            why: format!(
                "another process ({}) is already serving as PE 0 there: two jobs share this path, \
                 or two processes were given rank 0",
                peer_cred(&s).map_or_else(|e| format!("credentials unknown: {e}"), describe)
            ),
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        // Never delete what is not a socket: the path may be a mistake.
        Err(_) if !std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket()) => Err(Error::Config {
            name: "bootstrap rendezvous path (GPUSHMEM_BOOTSTRAP)".into(),
            value: path.display().to_string(),
            why: "exists and is not a socket".into(),
        }),
        Err(_) => match std::fs::remove_file(path) {
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

/// "uid U, pid P", as errors name a process.
fn describe(c: PeerCred) -> String {
    format!("uid {}, pid {}", c.uid, c.pid)
}

/// Removes a file when dropped.
struct RemoveOnDrop<'a>(&'a Path);

impl Drop for RemoveOnDrop<'_> {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.0);
    }
}

/// A PE other than 0 connecting: connect (retrying), check who listens,
/// answer the challenge, wait for Ready and check PE 0's proof.
fn join(env: &LaunchEnv, timeout: Duration) -> Result<Vec<Link>> {
    let (me, path) = (env.rank, env.rendezvous.as_path());
    let start = Instant::now();
    let deadline = start + timeout;
    let stream = loop {
        // Checked before every attempt: PE 0 may not have made the path yet.
        refuse_symlink(me, path)?;
        match UnixStream::connect(path) {
            Ok(s) => break s,
            // PE 0 is not listening yet (no file, or a stale one).
            Err(e) if matches!(e.kind(), io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused) => {
                let now = Instant::now();
                if now >= deadline {
                    return Err(Error::BootstrapTimeout {
                        me,
                        what: format!("connect to PE 0 at {}", path.display()),
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
    log::debug!("PE {me}: connected to PE 0 at {} after {:?}", path.display(), start.elapsed());
    let refuse = |why: String| Error::BootstrapRefused { me, path: path.to_path_buf(), why };
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
    let what = "connect (waiting for PE 0's challenge)";
    let challenge = read_frame(&stream, None, deadline + grace(timeout), MAX_HELLO)
        .map_err(|stop| join_stopped(me, what, timeout, stop))?;
    let theirs = match challenge.payload.split_at_checked(8) {
        Some((magic, nonce))
            if challenge.kind == Kind::Challenge && magic == MAGIC.to_le_bytes() && nonce.len() == NONCE =>
        {
            nonce
        }
        _ => {
            let detail = format!(
                "the process at {} ({}) is not a gpushmem PE 0 of this version: it sent {:?}",
                path.display(),
                describe(cred),
                challenge.kind
            );
            return Err(Error::BootstrapIo {
                me,
                what: what.into(),
                source: io::Error::new(io::ErrorKind::InvalidData, detail),
            });
        }
    };
    let mine = nonce().map_err(|source| Error::BootstrapIo { me, what: "draw a random nonce".into(), source })?;
    let proof = prove(env.secret.as_ref(), PROOF_HELLO, (theirs, &mine), me, env.size);
    let hello = [&MAGIC.to_le_bytes()[..], &(env.size as u64).to_le_bytes(), &mine, &proof].concat();
    let reply = match write_frame(&stream, Kind::Hello, me, 0, &hello, None, deadline) {
        // PE 0 may have answered before closing: read it.
        Ok(()) | Err(Stop::Closed) => read_frame(&stream, None, deadline + grace(timeout), 1 << 20),
        Err(stop) => Err(stop),
    };
    let what = "connect (waiting for PE 0 to report that every PE connected)";
    let f = reply.map_err(|stop| join_stopped(me, what, timeout, stop))?;
    let text = || String::from_utf8_lossy(&f.payload).into_owned();
    match f.kind {
        Kind::Ready if verify(env.secret.as_ref(), PROOF_READY, (theirs, &mine), me, env.size, &f.payload) => {
            log::debug!("PE {me}: every PE connected");
            Ok(vec![Link { pe: 0, stream }])
        }
        Kind::Ready => Err(refuse(format!(
            "PE 0 ({}) did not prove this job's secret: it was started with a different or no {SECRET_VAR} \
             (another job at the same rendezvous path?)",
            describe(cred)
        ))),
        Kind::Refused => Err(refuse(format!("PE 0 ({}) refused this PE: {}", describe(cred), text()))),
        Kind::Abort => Err(Error::PeerFailed { me, peer: f.from, why: text() }),
        Kind::Mismatch => Err(Error::Mismatch { me, call: "bootstrap connect", detail: text() }),
        Kind::Timeout => {
            let (op, missing) = decode_timeout(&f.payload);
            Err(Error::BootstrapTimeout { me, what: format!("{op} (reported by PE 0)"), timeout, missing })
        }
        k => Err(Error::BootstrapIo {
            me,
            what: what.into(),
            source: io::Error::new(io::ErrorKind::InvalidData, format!("unexpected {k:?} from PE 0")),
        }),
    }
}

/// The error of a PE whose transfer with PE 0 stopped while joining.
fn join_stopped(me: usize, what: &str, timeout: Duration, stop: Stop) -> Error {
    let what = what.to_string();
    match stop {
        Stop::Closed => {
            Error::PeerFailed { me, peer: 0, why: "PE 0 closed the bootstrap connection during connect".into() }
        }
        Stop::TimedOut => Error::BootstrapTimeout { me, what, timeout, missing: vec![0] },
        Stop::Io(source) => Error::BootstrapIo { me, what, source },
        Stop::Garbled(d) => Error::BootstrapIo { me, what, source: io::Error::new(io::ErrorKind::InvalidData, d) },
        // No wake-up pipe is watched while connecting.
        Stop::Woken => Error::BootstrapIo { me, what, source: io::ErrorKind::Interrupted.into() },
    }
}

// ---- wire format ----

fn encode_all(all: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + all.iter().map(|v| 8 + v.len()).sum::<usize>());
    out.extend_from_slice(&(all.len() as u64).to_le_bytes());
    for v in all {
        out.extend_from_slice(&(v.len() as u64).to_le_bytes());
        out.extend_from_slice(v);
    }
    out
}

fn decode_all(mut b: &[u8], size: usize) -> std::result::Result<Vec<Vec<u8>>, String> {
    let mut take = |n: usize| -> std::result::Result<&[u8], String> {
        if b.len() < n {
            return Err("truncated allgather result".into());
        }
        let (head, rest) = b.split_at(n);
        b = rest;
        Ok(head)
    };
    let count = u64::from_le_bytes(take(8)?.try_into().unwrap_or_default());
    if count != size as u64 {
        return Err(format!("allgather result has {count} contributions, expected {size}"));
    }
    (0..size)
        .map(|_| {
            let len = u64::from_le_bytes(take(8)?.try_into().unwrap_or_default());
            Ok(take(usize::try_from(len).map_err(|_| "bad length")?)?.to_vec())
        })
        .collect()
}

fn encode_timeout(what: &str, missing: &[usize]) -> Vec<u8> {
    let mut out = (missing.len() as u64).to_le_bytes().to_vec();
    for &pe in missing {
        out.extend_from_slice(&(pe as u64).to_le_bytes());
    }
    out.extend_from_slice(what.as_bytes());
    out
}

fn decode_timeout(b: &[u8]) -> (String, Vec<usize>) {
    let word =
        |i: usize| b.get(i * 8..i * 8 + 8).map(|w| u64::from_le_bytes(w.try_into().unwrap_or_default()) as usize);
    let n = word(0).unwrap_or(0).min(b.len() / 8);
    let missing: Vec<usize> = (1..=n).filter_map(word).collect();
    let what = b.get((n + 1) * 8..).map(|w| String::from_utf8_lossy(w).into_owned()).unwrap_or_default();
    (what, missing)
}

// ---- low-level transfers, every one bounded by a deadline ----

fn pollfd(fd: RawFd, events: libc::c_short) -> libc::pollfd {
    libc::pollfd { fd, events, revents: 0 }
}

/// Waits until one of `fds` is ready (true) or `deadline` passes (false).
fn poll(fds: &mut [libc::pollfd], deadline: Instant) -> io::Result<bool> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        // Round up: a zero timeout would spin until the deadline.
        let ms = left.as_micros().div_ceil(1000).min(i32::MAX as u128) as libc::c_int;
        // SAFETY: `fds` is a live, correctly sized array of pollfd.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        if n > 0 {
            return Ok(true);
        }
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        } else if Instant::now() >= deadline {
            return Ok(false);
        }
    }
}

/// Waits for `events` on `fd`; a readable `wake` ends the wait with [`Stop::Woken`].
fn wait(fd: RawFd, events: libc::c_short, wake: Option<&OwnedFd>, deadline: Instant) -> std::result::Result<(), Stop> {
    let mut fds = [pollfd(fd, events), pollfd(wake.map_or(-1, |w| w.as_raw_fd()), libc::POLLIN)];
    match poll(&mut fds, deadline) {
        Ok(true) if fds[1].revents != 0 => Err(Stop::Woken),
        Ok(true) => Ok(()),
        Ok(false) => Err(Stop::TimedOut),
        Err(e) => Err(Stop::Io(e)),
    }
}

fn is_closed(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EPIPE) | Some(libc::ECONNRESET))
}

/// Receives exactly `buf.len()` bytes: data already there is taken even after a wake-up.
fn recv_exact(
    s: &UnixStream,
    buf: &mut [u8],
    wake: Option<&OwnedFd>,
    deadline: Instant,
) -> std::result::Result<(), Stop> {
    let mut got = 0;
    while got < buf.len() {
        let rest = &mut buf[got..];
        // SAFETY: receives into a live buffer of the given length.
        let n = unsafe { libc::recv(s.as_raw_fd(), rest.as_mut_ptr().cast(), rest.len(), libc::MSG_DONTWAIT) };
        if n > 0 {
            got += n as usize;
        } else if n == 0 {
            return Err(Stop::Closed);
        } else {
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::WouldBlock => wait(s.as_raw_fd(), libc::POLLIN, wake, deadline)?,
                io::ErrorKind::Interrupted => {}
                _ if is_closed(&e) => return Err(Stop::Closed),
                _ => return Err(Stop::Io(e)),
            }
        }
    }
    Ok(())
}

/// Sends all of `buf`; MSG_NOSIGNAL: a dead peer is an error, not SIGPIPE.
fn send_all(s: &UnixStream, buf: &[u8], wake: Option<&OwnedFd>, deadline: Instant) -> std::result::Result<(), Stop> {
    let mut sent = 0;
    while sent < buf.len() {
        let rest = &buf[sent..];
        let flags = libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL;
        // SAFETY: sends from a live buffer of the given length.
        let n = unsafe { libc::send(s.as_raw_fd(), rest.as_ptr().cast(), rest.len(), flags) };
        if n >= 0 {
            sent += n as usize;
        } else {
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::WouldBlock => wait(s.as_raw_fd(), libc::POLLOUT, wake, deadline)?,
                io::ErrorKind::Interrupted => {}
                _ if is_closed(&e) => return Err(Stop::Closed),
                _ => return Err(Stop::Io(e)),
            }
        }
    }
    Ok(())
}

fn write_frame(
    s: &UnixStream,
    kind: Kind,
    from: usize,
    round: u64,
    payload: &[u8],
    wake: Option<&OwnedFd>,
    deadline: Instant,
) -> std::result::Result<(), Stop> {
    let mut buf = Vec::with_capacity(HEADER + payload.len());
    buf.push(kind as u8);
    buf.extend_from_slice(&(from as u32).to_le_bytes());
    buf.extend_from_slice(&round.to_le_bytes());
    buf.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    buf.extend_from_slice(payload);
    send_all(s, &buf, wake, deadline)
}

fn read_frame(
    s: &UnixStream,
    wake: Option<&OwnedFd>,
    deadline: Instant,
    max_len: u64,
) -> std::result::Result<Frame, Stop> {
    let mut h = [0u8; HEADER];
    recv_exact(s, &mut h, wake, deadline)?;
    let kind = Kind::from_u8(h[0]).ok_or_else(|| Stop::Garbled(format!("unknown message kind {}", h[0])))?;
    let from = u32::from_le_bytes([h[1], h[2], h[3], h[4]]) as usize;
    let round = u64::from_le_bytes(h[5..13].try_into().unwrap_or_default());
    let len = u64::from_le_bytes(h[13..21].try_into().unwrap_or_default());
    if len > max_len {
        return Err(Stop::Garbled(format!("{kind:?} message of {len} bytes is too long")));
    }
    let mut payload = vec![0u8; len as usize];
    recv_exact(s, &mut payload, wake, deadline)?;
    Ok(Frame { kind, from, round, payload })
}

/// A non-blocking, close-on-exec pipe: (read end, write end).
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 writes two descriptors into a live array of two.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors are fresh and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_round_trips() {
        let all = vec![vec![1u8, 2, 3], vec![], vec![9; 1000]];
        assert_eq!(decode_all(&encode_all(&all), 3).unwrap(), all);
        assert!(decode_all(&encode_all(&all), 4).is_err());
        assert!(decode_all(&encode_all(&all)[..20], 3).is_err());
        assert_eq!(decode_timeout(&encode_timeout("barrier", &[2, 5])), ("barrier".to_string(), vec![2, 5]));
        assert_eq!(decode_timeout(&[1, 2]), (String::new(), vec![]));
    }
}
