//! Bootstrap for one process per PE, over a Unix-domain socket (PEs of one
//! node) or TCP (PEs on any nodes).
//!
//! PE 0 listens at [`LaunchEnv::rendezvous`] and every other PE connects to it:
//! a star. The protocol below is the same over both; what differs is who may
//! connect at all: over a Unix socket only processes of this user (step 1),
//! over TCP anyone who reaches the port, which is why TCP requires the job's
//! secret (steps 2 and 3 then keep everyone else out).
//!
//! Joining is authenticated before any payload moves:
//! 1. (Unix) both ends read the other's user id from the kernel (`SO_PEERCRED`); a
//!    process of another user gets nothing ([`Error::BootstrapRefused`] for
//!    the connecting PE; PE 0 closes such a connection and keeps waiting, and
//!    a flood of them neither holds it past its timeout nor fills its memory:
//!    it accepts in bounded batches and keeps only the first few reasons and a
//!    count). The connecting PE also checks that the listener it reached is
//!    bound at the very path it was given (its address, read from the
//!    connection): a path that led elsewhere through a symbolic link, however
//!    late the link appeared, is refused before a byte is sent;
//! 2. PE 0 sends a challenge (a fresh nonce); the PE answers with its rank,
//!    the job size, a nonce of its own and an HMAC over both nonces keyed with
//!    the job's secret ([`super::auth`]); PE 0 refuses a wrong proof;
//! 3. PE 0's "every PE connected" carries its own proof, which the PE checks:
//!    neither end takes the other's word without the secret.
//!
//! PE 0 handshakes with up to 64 connections at once: a
//! connection that stays silent holds only itself (for a few seconds at most),
//! and PE 0's timeout error counts such connections. Past that many, further
//! connections wait in the kernel's queue; none is pushed out. PE 0's socket file has mode 0600 from its
//! creation. Every connect has a deadline: a listener that never accepts
//! (another user's, with a full queue) fails the PE at its timeout, naming the
//! path and the socket file's owner.
//!
//! Every message must be of a kind that can come at that point (before its
//! hello, a connection may send only a hello) and is bounded by what the
//! protocol can need for its kind (see [`MAX_CONTRIBUTION`]), both checked
//! from its header before a byte of it is stored; its payload is stored as it
//! arrives, a few chunks per read: a length that lies costs nothing. A longer message
//! is a protocol error of that connection (turned away while connecting; the
//! job's error naming that PE once it is one).
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

use super::address::Rendezvous;
use super::auth::{nonce, prove, verify, NONCE, PROOF, SECRET_VAR};
use super::conn::{Conn, Listener};
use super::env::LaunchEnv;
use super::rendezvous::{ensure_private_dir, my_euid, shared_dir_warning};
use super::unix::describe;
use super::Bootstrap;
use crate::{Error, Result};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Identifies the protocol (and its version) in a hello, so that a stray
/// connection to the socket is ignored rather than taken for a PE.
const MAGIC: u64 = u64::from_le_bytes(*b"gpshmBS2");

/// kind (1) + from (4) + round (8) + payload length (8).
const HEADER: usize = 21;

/// Largest contribution of one PE to one allgather (or barrier) over a socket
/// bootstrap, 16 MiB: the runtime's own contributions are at most a few
/// hundred bytes (a heap description, a collective call's arguments, a host
/// value of `allgather_host`). A larger one is an error on the PE that makes it
/// (and, as a message, a protocol error of the PE that sends it).
pub const MAX_CONTRIBUTION: usize = 16 << 20;

/// Largest text (why a PE aborted, a mismatch's details) in a message; longer
/// texts are cut when sent.
const MAX_TEXT: usize = 64 << 10;

/// Most bytes of a payload stored per read, so that memory grows with the
/// bytes that arrived, not with the length a message announced.
const CHUNK: usize = 64 << 10;

/// Most connections PE 0 handshakes with at once. With this many pending, PE 0
/// accepts no more: further connections wait in the kernel's queue (their PEs
/// wait for the challenge until their deadline and a grace) until a pending
/// one says hello, is refused, or stays silent for [`HELLO_WAIT`]. No pending
/// connection is ever pushed out for a newer one: on a loaded machine dozens of
/// real PEs may be pending before one of them has computed its proof.
const MAX_PENDING: usize = 64;

/// Most payload chunks ([`CHUNK`]) one [`Incoming::advance`] stores before it
/// returns, so that its caller looks at its deadline between them even while
/// a sender keeps the connection full.
const CHUNKS_PER_ADVANCE: usize = 4;

/// Hello payload: magic, job size, the PE's nonce, its proof.
const HELLO_LEN: usize = 16 + NONCE + PROOF;

/// Labels of the two proofs, so that neither can stand for the other.
const PROOF_HELLO: &[u8] = b"gpushmem bootstrap: PE to PE 0";
const PROOF_READY: &[u8] = b"gpushmem bootstrap: PE 0 to PE";

/// Over TCP, with [`MAX_PENDING`] connections pending, how long the oldest
/// may have been silent before PE 0 drops it to admit a newer one: anyone who
/// reaches the port can connect, so a flood of silent connections must not
/// keep real PEs waiting in the kernel's queue. A real PE answers the
/// challenge at once (one HMAC), well within this.
const TCP_PENDING_EVICT: Duration = Duration::from_secs(1);

/// How long PE 0 waits for one connection's hello before dropping it (PE 0
/// handshakes with every connection at once, so a silent one holds up no other).
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
    /// The most payload bytes a message of this kind can need in a job of
    /// `size` PEs.
    fn max_payload(self, size: usize) -> u64 {
        let size = size as u64;
        let (contrib, text) = (MAX_CONTRIBUTION as u64, MAX_TEXT as u64);
        match self {
            Kind::Hello => HELLO_LEN as u64,
            Kind::Challenge => (8 + NONCE) as u64,
            Kind::Ready => PROOF as u64,
            Kind::Contrib => contrib,
            // A count, then a length and a contribution per PE (`encode_all`).
            Kind::Result => size.saturating_mul(8 + contrib).saturating_add(8),
            // A count, the missing PEs, a text (`encode_timeout`).
            Kind::Timeout => size.saturating_add(1).saturating_mul(8).saturating_add(text),
            Kind::Abort | Kind::Mismatch | Kind::Refused => text,
        }
    }

    /// What PE 0 takes from a connection before it is a PE: its hello only.
    const BEFORE_HELLO: &'static [Kind] = &[Kind::Hello];
    /// What a connecting PE takes first: the challenge only.
    const CHALLENGE: &'static [Kind] = &[Kind::Challenge];
    /// What a connecting PE takes in answer to its hello (`join`).
    const AFTER_HELLO: &'static [Kind] = &[Kind::Ready, Kind::Refused, Kind::Abort, Kind::Mismatch, Kind::Timeout];
    /// What PE 0 takes from a PE in a round (`root_exchange`).
    const TO_ROOT: &'static [Kind] = &[Kind::Contrib, Kind::Abort];
    /// What a PE takes from PE 0 in a round (`leaf_exchange`, `leaf_told`).
    const FROM_ROOT: &'static [Kind] = &[Kind::Result, Kind::Abort, Kind::Timeout, Kind::Mismatch];

    /// Every kind of message.
    const ALL: [Kind; 9] = [
        Kind::Hello,
        Kind::Ready,
        Kind::Contrib,
        Kind::Result,
        Kind::Abort,
        Kind::Timeout,
        Kind::Mismatch,
        Kind::Challenge,
        Kind::Refused,
    ];

    fn from_u8(b: u8) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| *k as u8 == b)
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
    stream: Conn,
}

impl SocketBootstrap {
    /// Joins the job `env` describes: PE 0 listens at `env.rendezvous` (removing a
    /// stale socket file there) and waits for the others; the others connect,
    /// retrying while PE 0 is not up yet. A symbolic link at that path, or a
    /// listener bound at another path (reached through a link), is
    /// [`Error::BootstrapRefused`]. Returns once every PE has connected, or
    /// fails after `timeout` naming the PEs that did not. A path given in
    /// `GPUSHMEM_BOOTSTRAP` whose directory others may write is used, with a
    /// warning in the log. Over TCP ([`Rendezvous::Tcp`]) PE 0 listens on the
    /// port and the others connect to `host:port`, retrying the same way; a
    /// job of more than one PE without a secret is [`Error::Config`] naming
    /// `GPUSHMEM_BOOTSTRAP_SECRET` there. A size of 0 or over
    /// [`crate::abi::MAX_PES`], or a rank not below the size, is
    /// [`Error::Config`] before anything else.
    pub fn connect(env: &LaunchEnv, timeout: Duration) -> Result<SocketBootstrap> {
        // A LaunchEnv made by hand, not by `from_lookup`: checked the same way,
        // before PE 0 makes a slot per PE.
        crate::args::job_size("LaunchEnv::size", env.size)?;
        if env.rank >= env.size {
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
        match (&env.rendezvous, &env.private_dir, env.size > 1) {
            (_, _, false) => {}
            (Rendezvous::Tcp { .. }, _, true) if env.secret.is_none() => {
                return Err(Error::Config {
                    name: SECRET_VAR.into(),
                    value: "unset".into(),
                    why: format!(
                        "required when PEs meet over TCP ({}): TCP says nothing of who connects, so only the \
                         job's secret keeps others out. Give every rank the same fresh value, e.g. \
                         {SECRET_VAR}=$(openssl rand -hex 32) passed on by the launcher (mpirun -x \
                         {SECRET_VAR}; srun passes the environment on by default)",
                        env.rendezvous
                    ),
                });
            }
            (Rendezvous::Tcp { .. }, _, true) => {}
            (Rendezvous::Unix(_), Some(dir), true) => ensure_private_dir(dir, env.rank)?,
            (Rendezvous::Unix(path), None, true) => {
                if let Some(why) = shared_dir_warning(path) {
                    log::warn!("PE {}: {why}", env.rank);
                }
            }
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
        if mine.len() > MAX_CONTRIBUTION {
            // Every other PE would refuse the message: fail them now, saying why.
            let why = format!(
                "PE {}'s {what} contribution is {} bytes; the socket bootstrap carries at most {MAX_CONTRIBUTION} \
                 bytes per PE",
                self.rank,
                mine.len()
            );
            self.remember(self.rank, why.clone());
            self.tell(&st, Kind::Abort, self.rank, 0, why.as_bytes(), None);
            return Err(Error::Config {
                name: format!("bootstrap {what}"),
                value: format!("{} bytes", mine.len()),
                why,
            });
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
                let f = match read_frame(&st.links[i].stream, None, deadline, self.size, Kind::TO_ROOT) {
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
        let until = deadline + grace(self.timeout);
        let f = match read_frame(&st.links[0].stream, wake, until, self.size, Kind::FROM_ROOT) {
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

/// PE 0's per-PE slot while PEs connect: the connection and the proof its Ready carries.
type Slot = Option<(Conn, [u8; PROOF])>;

/// PE 0's side of connecting: listen, admit `size - 1` PEs, say Ready.
///
/// Handshakes run side by side: every accepted connection of this user gets its
/// challenge at once and joins the pending ones, whose hellos are read as they
/// arrive; one that stays silent for [`HELLO_WAIT`] is dropped and counted.
fn serve(env: &LaunchEnv, timeout: Duration) -> Result<Vec<Link>> {
    let size = env.size;
    let at = env.rendezvous.to_string();
    let over_tcp = env.rendezvous.is_tcp();
    let deadline = Instant::now() + timeout;
    // Everyone is connected (or the job failed) when this returns: nobody else
    // needs a socket file (`_unlink` removes it).
    let (listener, _unlink) = match &env.rendezvous {
        Rendezvous::Unix(path) => {
            let (l, unlink) = super::unix::listen_at(path, deadline)?;
            (Listener::Unix(l), Some(unlink))
        }
        Rendezvous::Tcp { host, port } => (Listener::Tcp(super::tcp::listen_at(host, *port)?), None),
    };
    let io_err = |what: String, source| Error::BootstrapIo { me: 0, what, source };
    log::debug!("PE 0: listening at {at} for {} PEs", size - 1);
    let mut links: Vec<Slot> = (0..size).map(|_| None).collect();
    // Connections turned away, for the error should PEs then be missing.
    let mut refused = Refusals::default();
    // Connections of this user waiting to say hello, oldest first.
    let mut pending: Vec<Pending> = Vec::new();
    // Connections that never said hello (in time).
    let mut silent = 0;
    let mut joined = 1;
    // Sends `kind` to every PE connected so far and returns `err`.
    let fail_all = |links: &[Slot], kind: Kind, from: usize, payload: &[u8], err: Error| {
        let until = Instant::now() + timeout.min(Duration::from_secs(1));
        for (s, _) in links.iter().flatten() {
            let _ = write_frame(s, kind, from, 0, payload, None, until);
        }
        err
    };
    let timed_out = |links: &[Slot], refused: &Refusals, silent: usize| {
        let missing: Vec<usize> = (1..size).filter(|&pe| links[pe].is_none()).collect();
        let mut what = format!("connect (PE 0 listening at {at}");
        if silent > 0 {
            what += &format!(
                "; {silent} silent connection(s){}: connected but sent no hello (not PEs of this \
                 job, or stuck)",
                if over_tcp { "" } else { " of this user" }
            );
        }
        if let Some(r) = refused.summary() {
            what += &format!("; {r}");
        }
        what += ")";
        let payload = encode_timeout(&what, &missing);
        let err = Error::BootstrapTimeout { me: 0, what, timeout, missing };
        fail_all(links, Kind::Timeout, 0, &payload, err)
    };
    while joined < size {
        // Checked before polling too: a listener that is always readable (a
        // flood of connections) must not keep PE 0 past its deadline.
        let now = Instant::now();
        if now >= deadline {
            return Err(timed_out(&links, &refused, silent + pending.len()));
        }
        let before = pending.len();
        pending.retain(|p| p.until > now);
        // Over TCP a full set of pending handshakes makes room: the oldest
        // silent one goes (see `TCP_PENDING_EVICT`).
        if over_tcp && pending.len() >= MAX_PENDING && now >= pending[0].since + TCP_PENDING_EVICT {
            pending.remove(0);
        }
        silent += before - pending.len();
        // Watch the connected PEs too: one that dies now fails the job at once.
        let connected: Vec<usize> = (1..size).filter(|&pe| links[pe].is_some()).collect();
        let mut fds: Vec<libc::pollfd> = connected
            .iter()
            .map(|&pe| pollfd(links[pe].as_ref().map_or(-1, |l| l.0.as_raw_fd()), libc::POLLIN))
            .chain(pending.iter().map(|p| pollfd(p.stream.as_raw_fd(), libc::POLLIN)))
            .collect();
        // With MAX_PENDING pending, new connections wait in the kernel's queue:
        // the listener is not watched (it would wake PE 0 for nothing).
        if pending.len() < MAX_PENDING {
            fds.push(pollfd(listener.as_raw_fd(), libc::POLLIN));
        }
        let mut wake_at = pending.iter().map(|p| p.until).fold(deadline, Instant::min);
        if over_tcp && pending.len() >= MAX_PENDING {
            wake_at = wake_at.min(pending[0].since + TCP_PENDING_EVICT);
        }
        if let Err(e) = poll(&mut fds, wake_at) {
            // Tell the PEs connected so far, rather than leave them to their timeout.
            let why = format!("PE 0 failed waiting for PEs to connect: {e}");
            let err = io_err("wait for PEs to connect".into(), e);
            return Err(fail_all(&links, Kind::Abort, 0, why.as_bytes(), err));
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
        // Hellos, as far as they have arrived. Backwards, so that removing one
        // leaves the indices of those still to look at.
        let ready: Vec<usize> = (0..pending.len()).filter(|&i| fds[connected.len() + i].revents != 0).rev().collect();
        for i in ready {
            if joined == size {
                break;
            }
            let Pending { stream, hello, .. } = &mut pending[i];
            let hello = match hello.advance(stream, size, Kind::BEFORE_HELLO) {
                Ok(None) => continue,
                Ok(Some(f)) => f,
                Err(Stop::Garbled(detail)) => {
                    let p = pending.remove(i);
                    refused.add(&at, format!("{} is not a gpushmem PE of this version: {detail}", p.who));
                    continue;
                }
                Err(stop) => {
                    // A probe (see `claim`) or a PE that died at once; a PE that is really gone shows up as missing.
                    log::debug!("PE 0: dropping a connection that sent no hello: {stop:?}");
                    pending.remove(i);
                    continue;
                }
            };
            let p = pending.remove(i);
            let (pe, their_size, ready) = match p.check_hello(hello, env) {
                Ok(a) => a,
                Err(why) => {
                    refused.add(&at, why);
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
                let _ = write_frame(&p.stream, Kind::Mismatch, 0, 0, detail.as_bytes(), None, until);
                let err = Error::Mismatch { me: 0, call: "bootstrap connect", detail: detail.clone() };
                return Err(fail_all(&links, Kind::Mismatch, 0, detail.as_bytes(), err));
            }
            links[pe] = Some((p.stream, ready));
            joined += 1;
            log::debug!("PE 0: PE {pe} connected ({joined}/{size})");
        }
        // A bounded batch per wake-up, and never past the deadline or once every
        // PE is in: a stray connection then neither delays Ready nor counts as a PE.
        for _ in 0..ACCEPTS_PER_WAKE {
            if joined == size || pending.len() >= MAX_PENDING || Instant::now() >= deadline {
                break;
            }
            let stream = match listener.accept() {
                Ok(s) => s,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted || e.kind() == io::ErrorKind::ConnectionAborted => {
                    continue
                }
                Err(e) => {
                    return Err(fail_all(&links, Kind::Abort, 0, b"PE 0 failed to accept", io_err("accept".into(), e)))
                }
            };
            match Pending::challenge(stream, deadline) {
                Ok(p) => pending.push(p),
                Err(Turned::Away(why)) => refused.add(&at, why),
                Err(Turned::Silent(stop)) => log::debug!("PE 0: could not challenge a connection: {stop:?}"),
            }
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
    fn add(&mut self, at: &str, why: String) {
        self.total += 1;
        if self.first.len() < REFUSALS_KEPT {
            log::warn!("PE 0: refused a connection to {at}: {why}");
            self.first.push(why);
        } else if self.total == REFUSALS_KEPT + 1 {
            log::warn!("PE 0: refusing more connections to {at}; counting them without logging each");
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
    /// Refused (another user, not this protocol): the reason.
    Away(String),
    /// Closed or stuck before its challenge went out.
    Silent(Stop),
}

/// A connection that PE 0 challenged and whose hello it awaits: of this user
/// (Unix), or of anyone who can reach the port (TCP: the hello's proof of the
/// secret decides).
struct Pending {
    stream: Conn,
    /// The other end as PE 0's errors name it ("pid P", or a TCP address).
    who: String,
    /// PE 0's nonce in the challenge.
    nonce: [u8; NONCE],
    /// The hello, as far as it has arrived.
    hello: Incoming,
    /// When PE 0 stops waiting for the hello.
    until: Instant,
    /// When PE 0 challenged it.
    since: Instant,
}

impl Pending {
    /// Checks who connected (over a Unix socket, another user's process gets
    /// nothing, not even the challenge) and sends the challenge.
    fn challenge(stream: Conn, deadline: Instant) -> std::result::Result<Pending, Turned> {
        let who = match stream.peer_cred() {
            Some(cred) => {
                let cred = cred.map_err(|e| Turned::Away(format!("cannot read its credentials: {e}")))?;
                if cred.uid != my_euid() {
                    return Err(Turned::Away(format!(
                        "a process of uid {} (pid {}) connected; only this user's (uid {}) may join",
                        cred.uid,
                        cred.pid,
                        my_euid()
                    )));
                }
                format!("pid {}", cred.pid)
            }
            None => stream.describe_peer(),
        };
        let until = deadline.min(Instant::now() + HELLO_WAIT);
        let nonce = nonce().map_err(|e| Turned::Away(format!("no random nonce for {who}: {e}")))?;
        // A fresh connection's buffer has room for it: this does not wait.
        write_frame(&stream, Kind::Challenge, 0, 0, &[&MAGIC.to_le_bytes()[..], &nonce].concat(), None, until)
            .map_err(Turned::Silent)?;
        Ok(Pending { stream, who, nonce, hello: Incoming::default(), until, since: Instant::now() })
    }

    /// Checks a complete hello (its form, then its proof of the secret) and
    /// returns the PE's rank, its job size and the proof for its Ready; else
    /// why it is refused.
    fn check_hello(&self, f: Frame, env: &LaunchEnv) -> std::result::Result<(usize, u64, [u8; PROOF]), String> {
        let who = &self.who;
        if f.kind != Kind::Hello || f.payload.len() != HELLO_LEN || f.payload[..8] != MAGIC.to_le_bytes() {
            return Err(format!("{who} is not a gpushmem PE of this version"));
        }
        let their_size = u64::from_le_bytes(f.payload[8..16].try_into().unwrap_or_default());
        let (theirs, proof) = f.payload[16..].split_at(NONCE);
        let size = usize::try_from(their_size).unwrap_or(usize::MAX);
        let mine = &self.nonce[..];
        if !verify(env.secret.as_ref(), PROOF_HELLO, (mine, theirs), f.from, size, proof) {
            let why = format!(
                "{who} (as PE {}) did not prove this job's secret: it was started with a different or no \
                 {SECRET_VAR} (another job at the same rendezvous?)",
                f.from
            );
            let until = Instant::now() + Duration::from_secs(1);
            let _ = write_frame(&self.stream, Kind::Refused, 0, 0, why.as_bytes(), None, until);
            return Err(why);
        }
        Ok((f.from, their_size, prove(env.secret.as_ref(), PROOF_READY, (mine, theirs), f.from, size)))
    }
}

/// A PE other than 0 connecting: connect (retrying), check who listens,
/// answer the challenge, wait for Ready and check PE 0's proof.
fn join(env: &LaunchEnv, timeout: Duration) -> Result<Vec<Link>> {
    let me = env.rank;
    let at = env.rendezvous.to_string();
    let start = Instant::now();
    let deadline = start + timeout;
    // The connection, and PE 0 as errors name it.
    let (stream, pe0) = match &env.rendezvous {
        Rendezvous::Unix(path) => {
            let (s, cred) = super::unix::dial_pe0(me, path, timeout, deadline)?;
            (Conn::Unix(s), describe(cred))
        }
        Rendezvous::Tcp { host, port } => {
            let s = super::tcp::dial_pe0(me, host, *port, timeout, deadline)?;
            let pe0 = s.peer_addr().map_or_else(|_| at.clone(), |a| a.to_string());
            (Conn::Tcp(s), pe0)
        }
    };
    log::debug!("PE {me}: connected to PE 0 at {at} after {:?}", start.elapsed());
    let refuse = |why: String| Error::BootstrapRefused { me, path: at.clone().into(), why };
    let what = "connect (waiting for PE 0's challenge)";
    let challenge = read_frame(&stream, None, deadline + grace(timeout), env.size, Kind::CHALLENGE)
        .map_err(|stop| join_stopped(me, what, timeout, stop))?;
    let theirs = match challenge.payload.split_at_checked(8) {
        Some((magic, nonce))
            if challenge.kind == Kind::Challenge && magic == MAGIC.to_le_bytes() && nonce.len() == NONCE =>
        {
            nonce
        }
        _ => {
            let detail = format!(
                "the process at {at} ({pe0}) is not a gpushmem PE 0 of this version: it sent {:?}",
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
        Ok(()) | Err(Stop::Closed) => read_frame(&stream, None, deadline + grace(timeout), env.size, Kind::AFTER_HELLO),
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
             (another job at the same rendezvous?)",
            pe0
        ))),
        Kind::Refused => Err(refuse(format!("PE 0 ({}) refused this PE: {}", pe0, text()))),
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
    // Within what a Timeout message may carry (`Kind::max_payload`).
    out.extend_from_slice(&what.as_bytes()[..what.len().min(MAX_TEXT)]);
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

/// Receives what is there into `buf` without waiting: `Some(n)` bytes, or
/// `None` when nothing is there yet.
fn recv_some(s: &impl AsRawFd, buf: &mut [u8]) -> std::result::Result<Option<usize>, Stop> {
    loop {
        // SAFETY: receives into a live buffer of the given length.
        let n = unsafe { libc::recv(s.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) };
        if n > 0 {
            return Ok(Some(n as usize));
        }
        if n == 0 {
            return Err(Stop::Closed);
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::WouldBlock => return Ok(None),
            io::ErrorKind::Interrupted => {}
            _ if is_closed(&e) => return Err(Stop::Closed),
            _ => return Err(Stop::Io(e)),
        }
    }
}

/// Sends all of `buf`; MSG_NOSIGNAL: a dead peer is an error, not SIGPIPE.
fn send_all(s: &impl AsRawFd, buf: &[u8], wake: Option<&OwnedFd>, deadline: Instant) -> std::result::Result<(), Stop> {
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
    s: &impl AsRawFd,
    kind: Kind,
    from: usize,
    round: u64,
    payload: &[u8],
    wake: Option<&OwnedFd>,
    deadline: Instant,
) -> std::result::Result<(), Stop> {
    // Texts are cut to what the other end accepts; a contribution too long was
    // refused before it got here.
    let payload = &payload[..payload.len().min(usize::try_from(kind.max_payload(usize::MAX)).unwrap_or(usize::MAX))];
    let mut buf = Vec::with_capacity(HEADER + payload.len());
    buf.push(kind as u8);
    buf.extend_from_slice(&(from as u32).to_le_bytes());
    buf.extend_from_slice(&round.to_le_bytes());
    buf.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    buf.extend_from_slice(payload);
    send_all(s, &buf, wake, deadline)
}

/// Reads one message of one of the kinds `allowed` from `s` (of a job of
/// `size` PEs), waiting until `deadline`; data already there is taken even
/// after a wake-up. A message of another kind is [`Stop::Garbled`] from its
/// header alone; one still arriving at `deadline` is [`Stop::TimedOut`].
fn read_frame(
    s: &impl AsRawFd,
    wake: Option<&OwnedFd>,
    deadline: Instant,
    size: usize,
    allowed: &[Kind],
) -> std::result::Result<Frame, Stop> {
    let mut incoming = Incoming::default();
    loop {
        if let Some(f) = incoming.advance(s, size, allowed)? {
            return Ok(f);
        }
        // A sender that keeps the connection full never lets `wait` wait.
        if Instant::now() >= deadline {
            return Err(Stop::TimedOut);
        }
        wait(s.as_raw_fd(), libc::POLLIN, wake, deadline)?;
    }
}

/// A message read as its bytes arrive: its header, then its payload, stored
/// [`CHUNK`] by [`CHUNK`] once its kind is known to be one the reader expects
/// and its length within what that kind can need ([`Kind::max_payload`]).
#[derive(Default)]
struct Incoming {
    head: [u8; HEADER],
    /// Header bytes received.
    got: usize,
    /// Once the header is in: kind, sender, round and payload length.
    meta: Option<(Kind, usize, u64, usize)>,
    payload: Vec<u8>,
}

impl Incoming {
    /// Takes what has arrived on `s` without waiting, at most
    /// [`CHUNKS_PER_ADVANCE`] chunks of payload per call; the message once it
    /// is whole. A kind not in `allowed`, or a length over what the kind can
    /// need in a job of `size` PEs, is [`Stop::Garbled`] from the header
    /// alone, before any payload byte is stored.
    fn advance(&mut self, s: &impl AsRawFd, size: usize, allowed: &[Kind]) -> std::result::Result<Option<Frame>, Stop> {
        while self.got < HEADER {
            match recv_some(s, &mut self.head[self.got..])? {
                Some(n) => self.got += n,
                None => return Ok(None),
            }
        }
        let (kind, from, round, len) = match self.meta {
            Some(m) => m,
            None => {
                let h = &self.head;
                let kind =
                    Kind::from_u8(h[0]).ok_or_else(|| Stop::Garbled(format!("unknown message kind {}", h[0])))?;
                if !allowed.contains(&kind) {
                    return Err(Stop::Garbled(format!("a {kind:?} message where only {allowed:?} may come")));
                }
                let from = u32::from_le_bytes([h[1], h[2], h[3], h[4]]) as usize;
                let round = u64::from_le_bytes(h[5..13].try_into().unwrap_or_default());
                let len = u64::from_le_bytes(h[13..21].try_into().unwrap_or_default());
                let max = kind.max_payload(size);
                if len > max {
                    return Err(Stop::Garbled(format!(
                        "a {kind:?} message of {len} bytes, but a {kind:?} message is at most {max} bytes \
                         in a job of {size} PEs"
                    )));
                }
                // Within `max`, which fits in memory's address space on every target we build for.
                let len = usize::try_from(len).map_err(|_| Stop::Garbled(format!("{len} bytes do not fit")))?;
                self.meta = Some((kind, from, round, len));
                (kind, from, round, len)
            }
        };
        for _ in 0..CHUNKS_PER_ADVANCE {
            if self.payload.len() == len {
                break;
            }
            let start = self.payload.len();
            self.payload.resize(start + (len - start).min(CHUNK), 0);
            let got = recv_some(s, &mut self.payload[start..]);
            self.payload.truncate(start + got.as_ref().map_or(0, |n| n.unwrap_or(0)));
            if got?.is_none() {
                return Ok(None);
            }
        }
        if self.payload.len() < len {
            return Ok(None);
        }
        Ok(Some(Frame { kind, from, round, payload: std::mem::take(&mut self.payload) }))
    }
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
    use std::os::unix::net::UnixStream;

    #[test]
    fn wire_round_trips() {
        let all = vec![vec![1u8, 2, 3], vec![], vec![9; 1000]];
        assert_eq!(decode_all(&encode_all(&all), 3).unwrap(), all);
        assert!(decode_all(&encode_all(&all), 4).is_err());
        assert!(decode_all(&encode_all(&all)[..20], 3).is_err());
        assert_eq!(decode_timeout(&encode_timeout("barrier", &[2, 5])), ("barrier".to_string(), vec![2, 5]));
        assert_eq!(decode_timeout(&[1, 2]), (String::new(), vec![]));
    }

    #[test]
    fn frames_are_read_as_they_arrive_and_capped_by_kind() {
        let (a, b) = UnixStream::pair().unwrap();
        let far = Instant::now() + Duration::from_secs(10);
        // One byte at a time: nothing is lost between reads.
        let mut bytes = Vec::new();
        bytes.push(Kind::Contrib as u8);
        bytes.extend_from_slice(&3u32.to_le_bytes());
        bytes.extend_from_slice(&7u64.to_le_bytes());
        bytes.extend_from_slice(&5u64.to_le_bytes());
        bytes.extend_from_slice(b"hello");
        let mut incoming = Incoming::default();
        for (i, byte) in bytes.iter().enumerate() {
            send_all(&a, &[*byte], None, far).unwrap();
            let f = incoming.advance(&b, 4, Kind::TO_ROOT).unwrap();
            assert_eq!(f.is_some(), i + 1 == bytes.len(), "after byte {i}");
            if let Some(f) = f {
                assert_eq!((f.kind, f.from, f.round, &f.payload[..]), (Kind::Contrib, 3, 7, &b"hello"[..]));
            }
        }
        // A length over the kind's cap is refused from the header alone.
        let all = Kind::ALL;
        for (kind, len) in [(Kind::Contrib, MAX_CONTRIBUTION as u64 + 1), (Kind::Ready, 33), (Kind::Abort, u64::MAX)] {
            write_header(&a, kind, len);
            match read_frame(&b, None, far, 4, &all) {
                Err(Stop::Garbled(d)) => assert!(d.contains(&len.to_string()) && d.contains("at most"), "{d}"),
                other => panic!("{kind:?} of {len} bytes: {:?}", other.map(|f| f.kind)),
            }
        }
        // A kind the reader does not expect there is refused from the header
        // alone, however short: before its hello, a connection may send only a hello.
        for kind in [Kind::Result, Kind::Contrib, Kind::Abort] {
            write_header(&a, kind, 1 << 30);
            let mut incoming = Incoming::default();
            match incoming.advance(&b, 100, Kind::BEFORE_HELLO) {
                Err(Stop::Garbled(d)) => assert!(d.contains(&format!("a {kind:?} message where only [Hello]")), "{d}"),
                other => panic!("{kind:?} before a hello: {:?}", other.map(|f| f.map(|f| f.kind))),
            }
            assert!(incoming.payload.capacity() == 0, "{kind:?}: payload stored");
        }
        // A Result may be as long as every PE's contribution together.
        let most = Kind::Result.max_payload(4);
        assert_eq!(most, 8 + 4 * (8 + MAX_CONTRIBUTION as u64));
        assert_eq!(Kind::Result.max_payload(usize::MAX), u64::MAX);
    }

    #[test]
    fn allgather_host_carries_max_host_value_bytes_between_processes() {
        // What `allgather_host` sends for a value of `n` bytes, over a 2-PE socket bootstrap.
        let path = std::env::temp_dir().join(format!("gpushmem-socket-unit-max-{}.sock", std::process::id()));
        let env = |rank| LaunchEnv {
            rank,
            size: 2,
            local_rank: rank,
            local_size: 2,
            device: None,
            rendezvous: Rendezvous::Unix(path.clone()),
            private_dir: None,
            secret: None,
            source: "test",
        };
        let t = Duration::from_secs(10);
        let e0 = env(0);
        let root = std::thread::spawn(move || SocketBootstrap::connect(&e0, t).unwrap());
        let b1 = SocketBootstrap::connect(&env(1), t).unwrap();
        let b0 = root.join().unwrap();
        let send = |b: &SocketBootstrap, n: usize| {
            let args = [("value size in bytes", n as u64)];
            crate::shmem::agree_exchange(b, "allgather_host", &args, Ok(()), &vec![7u8; n]).map(|all| all.len())
        };
        let most = crate::Shmem::MAX_HOST_VALUE;
        assert_eq!(most, MAX_CONTRIBUTION - 24);
        std::thread::scope(|s| {
            let h = s.spawn(|| send(&b0, most));
            assert_eq!(send(&b1, most).unwrap(), 2);
            assert_eq!(h.join().unwrap().unwrap(), 2);
            let h = s.spawn(|| send(&b0, most));
            match send(&b1, most + 1) {
                Err(Error::Config { why, .. }) => assert!(why.contains("at most 16777216 bytes"), "{why}"),
                other => panic!("one byte over: expected a Config error, got {other:?}"),
            }
            assert!(matches!(h.join().unwrap(), Err(Error::PeerFailed { peer: 1, .. })));
        });
    }

    /// Sends the header of a `kind` message announcing `len` payload bytes, and no payload.
    fn write_header(s: &UnixStream, kind: Kind, len: u64) {
        let mut h = vec![kind as u8];
        h.extend_from_slice(&[0; 12]);
        h.extend_from_slice(&len.to_le_bytes());
        send_all(s, &h, None, Instant::now() + Duration::from_secs(10)).unwrap();
    }
}
