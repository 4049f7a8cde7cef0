//! Who may join a socket bootstrap: a process of this user (its peer credentials,
//! checked by both ends before any payload) that knows the job's secret
//! ([`Secret`], proved by an HMAC-SHA256 over fresh nonces, never sent).
//!
//! Without a secret (a launcher that sets none) the proofs use an empty key:
//! the peer-credential check still keeps other users out, and a PE started
//! with a secret never accepts one started without it, nor the reverse.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::fmt;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use subtle::ConstantTimeEq;

/// The variable through which a launcher hands every PE the job's secret.
pub const SECRET_VAR: &str = "GPUSHMEM_BOOTSTRAP_SECRET";

/// Shortest secret accepted, in bytes of its text.
pub const MIN_SECRET_LEN: usize = 16;

/// Length of a nonce, in bytes.
pub(crate) const NONCE: usize = 16;

/// Length of a proof (HMAC-SHA256), in bytes.
pub(crate) const PROOF: usize = 32;

/// A job's bootstrap secret. Its `Debug` output never shows the value, and
/// comparing two takes the same time wherever they differ.
#[derive(Clone)]
pub struct Secret(Vec<u8>);

impl PartialEq for Secret {
    /// Constant-time in the contents (the lengths are not secret).
    fn eq(&self, other: &Secret) -> bool {
        self.0.ct_eq(&other.0).into()
    }
}

impl Eq for Secret {}

impl Secret {
    /// The secret whose text is `text` (as read from [`SECRET_VAR`]);
    /// `None` when shorter than [`MIN_SECRET_LEN`] bytes.
    pub fn from_text(text: &str) -> Option<Secret> {
        (text.len() >= MIN_SECRET_LEN).then(|| Secret(text.as_bytes().to_vec()))
    }

    /// A fresh random secret's text (256 bits, hex), for a launcher to put in
    /// [`SECRET_VAR`].
    pub fn generate_text() -> io::Result<String> {
        Ok(random::<32>()?.iter().map(|x| format!("{x:02x}")).collect())
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// A fresh random nonce.
pub(crate) fn nonce() -> io::Result<[u8; NONCE]> {
    random()
}

/// `N` bytes from the operating system's random source.
fn random<const N: usize>() -> io::Result<[u8; N]> {
    let mut b = [0u8; N];
    getrandom::fill(&mut b)?;
    Ok(b)
}

/// What each proof covers: who proves (`label`), both nonces, and the PE's
/// rank and the job's size, so that no proof can be replayed elsewhere.
fn keyed(secret: Option<&Secret>, label: &[u8], nonces: (&[u8], &[u8]), rank: usize, size: usize) -> Hmac<Sha256> {
    let key = secret.map_or(&[][..], |s| &s.0);
    // HMAC takes keys of any length: this cannot fail.
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC accepts any key length");
    for part in [label, nonces.0, nonces.1, &(rank as u64).to_le_bytes(), &(size as u64).to_le_bytes()] {
        m.update(part);
    }
    m
}

/// The proof that one end knows the secret; `label` says which end.
pub(crate) fn prove(
    secret: Option<&Secret>,
    label: &[u8],
    nonces: (&[u8], &[u8]),
    rank: usize,
    size: usize,
) -> [u8; PROOF] {
    keyed(secret, label, nonces, rank, size).finalize().into_bytes().into()
}

/// Checks a proof made by [`prove`], in constant time.
pub(crate) fn verify(
    secret: Option<&Secret>,
    label: &[u8],
    nonces: (&[u8], &[u8]),
    rank: usize,
    size: usize,
    proof: &[u8],
) -> bool {
    keyed(secret, label, nonces, rank, size).verify_slice(proof).is_ok()
}

/// The user and process at the other end of a connected Unix socket, as the
/// kernel recorded them (`SO_PEERCRED`: at `connect`, or for a listener's
/// connections at `listen`); the peer cannot forge them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PeerCred {
    /// The peer's effective user id.
    pub uid: u32,
    /// The peer's process id.
    pub pid: i32,
}

/// Reads the credentials of the process at the other end of `s`.
pub(crate) fn peer_cred(s: &UnixStream) -> io::Result<PeerCred> {
    let mut cred = libc::ucred { pid: 0, uid: 0, gid: 0 };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `cred`, a live ucred.
    let rc = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(PeerCred { uid: cred.uid, pid: cred.pid })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proofs_bind_secret_label_nonces_rank_and_size() {
        let s = Secret::from_text("0123456789abcdef0123").unwrap();
        let other = Secret::from_text("0123456789abcdef0124").unwrap();
        let (a, b) = ([1u8; NONCE], [2u8; NONCE]);
        let p = prove(Some(&s), b"hello", (&a, &b), 3, 4);
        assert!(verify(Some(&s), b"hello", (&a, &b), 3, 4, &p));
        assert!(!verify(Some(&other), b"hello", (&a, &b), 3, 4, &p));
        assert!(!verify(None, b"hello", (&a, &b), 3, 4, &p));
        assert!(!verify(Some(&s), b"ready", (&a, &b), 3, 4, &p));
        assert!(!verify(Some(&s), b"hello", (&b, &a), 3, 4, &p));
        assert!(!verify(Some(&s), b"hello", (&a, &b), 2, 4, &p));
        assert!(!verify(Some(&s), b"hello", (&a, &b), 3, 5, &p));
        assert!(!verify(Some(&s), b"hello", (&a, &b), 3, 4, &p[..31]));
        // No secret on either side still verifies (peer credentials alone then).
        let q = prove(None, b"hello", (&a, &b), 3, 4);
        assert!(verify(None, b"hello", (&a, &b), 3, 4, &q));
    }

    #[test]
    fn secrets_are_long_random_and_never_printed() {
        assert!(Secret::from_text("short").is_none());
        let t = Secret::generate_text().unwrap();
        assert_eq!(t.len(), 64);
        assert_ne!(t, Secret::generate_text().unwrap());
        let s = Secret::from_text(&t).unwrap();
        assert!(!format!("{s:?}").contains(&t));
        assert_eq!(s, Secret::from_text(&t).unwrap());
        assert_ne!(s, Secret::from_text(&Secret::generate_text().unwrap()).unwrap());
        assert_ne!(s, Secret::from_text(&t[..40]).unwrap());
    }

    #[test]
    fn peer_credentials_of_a_socket_pair_are_ours() {
        let (a, _b) = UnixStream::pair().unwrap();
        let c = peer_cred(&a).unwrap();
        assert_eq!(c.uid, crate::bootstrap::rendezvous::my_euid());
        assert_eq!(c.pid, std::process::id() as i32);
    }
}
