//! In-memory bootstrap for PEs that are threads of one process.

use super::Bootstrap;
use crate::{Error, Result};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// State shared by the threads of one job.
struct Shared {
    size: usize,
    timeout: Duration,
    round: Mutex<Round>,
    changed: Condvar,
}

struct Round {
    /// Completed rounds; a waiter leaves when this passes the round it joined.
    generation: u64,
    slots: Vec<Option<Vec<u8>>>,
    arrived: usize,
    result: Arc<Vec<Vec<u8>>>,
    /// Set by [`Bootstrap::abort`]: (failed PE, why).
    failed: Option<(usize, String)>,
}

/// One PE's handle on an in-memory bootstrap; make all of a job's with [`ThreadsBootstrap::group`].
#[derive(Clone)]
pub struct ThreadsBootstrap {
    rank: usize,
    shared: Arc<Shared>,
}

impl ThreadsBootstrap {
    /// Handles for `size` PEs (index = PE number) that exchange through memory;
    /// each wait fails after `timeout`, naming the PEs that did not arrive.
    pub fn group(size: usize, timeout: Duration) -> Vec<ThreadsBootstrap> {
        let shared = Arc::new(Shared {
            size,
            timeout,
            round: Mutex::new(Round {
                generation: 0,
                slots: vec![None; size],
                arrived: 0,
                result: Arc::new(Vec::new()),
                failed: None,
            }),
            changed: Condvar::new(),
        });
        (0..size).map(|rank| ThreadsBootstrap { rank, shared: shared.clone() }).collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Round> {
        // A panicking PE thread poisons nothing we cannot read: keep going.
        self.shared.round.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Bootstrap for ThreadsBootstrap {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.shared.size
    }

    fn allgather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>> {
        let mut r = self.lock();
        let failed = |r: &Round| {
            r.failed.as_ref().map(|(peer, why)| Error::PeerFailed { me: self.rank, peer: *peer, why: why.clone() })
        };
        if let Some(e) = failed(&r) {
            return Err(e);
        }
        let gen = r.generation;
        r.slots[self.rank] = Some(mine.to_vec());
        r.arrived += 1;
        if r.arrived == self.shared.size {
            let all = r.slots.iter_mut().map(|s| s.take().unwrap_or_default()).collect();
            r.result = Arc::new(all);
            r.arrived = 0;
            r.generation += 1;
            self.shared.changed.notify_all();
            return Ok(r.result.as_ref().clone());
        }
        let deadline = Instant::now() + self.shared.timeout;
        while r.generation == gen {
            if let Some(e) = failed(&r) {
                return Err(e);
            }
            let now = Instant::now();
            if now >= deadline {
                let missing = r.slots.iter().enumerate().filter(|(_, s)| s.is_none()).map(|(i, _)| i).collect();
                return Err(Error::BootstrapTimeout {
                    me: self.rank,
                    what: "allgather".into(),
                    timeout: self.shared.timeout,
                    missing,
                });
            }
            r = self.shared.changed.wait_timeout(r, deadline - now).unwrap_or_else(|p| p.into_inner()).0;
        }
        Ok(r.result.as_ref().clone())
    }

    fn abort(&self, why: &str) {
        let mut r = self.lock();
        if r.failed.is_none() {
            r.failed = Some((self.rank, why.to_string()));
        }
        self.shared.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allgather_in_order_many_rounds() {
        let g = ThreadsBootstrap::group(4, Duration::from_secs(10));
        let hs: Vec<_> = g
            .into_iter()
            .map(|b| {
                std::thread::spawn(move || {
                    for round in 0..200u32 {
                        let mine = [b.rank() as u8, round as u8];
                        let all = b.allgather(&mine).unwrap();
                        for (pe, v) in all.iter().enumerate() {
                            assert_eq!(v, &[pe as u8, round as u8]);
                        }
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
    }

    #[test]
    fn timeout_names_missing_pe() {
        let g = ThreadsBootstrap::group(3, Duration::from_millis(200));
        let h: Vec<_> = g[..2].iter().cloned().map(|b| std::thread::spawn(move || b.barrier())).collect();
        for r in h {
            match r.join().unwrap() {
                Err(Error::BootstrapTimeout { missing, .. }) => assert_eq!(missing, vec![2]),
                other => panic!("expected timeout, got {other:?}"),
            }
        }
    }

    #[test]
    fn abort_wakes_waiters() {
        let g = ThreadsBootstrap::group(2, Duration::from_secs(30));
        let b0 = g[0].clone();
        let h = std::thread::spawn(move || b0.barrier());
        std::thread::sleep(Duration::from_millis(50));
        g[1].abort("test failure");
        match h.join().unwrap() {
            Err(Error::PeerFailed { peer: 1, .. }) => {}
            other => panic!("expected PeerFailed, got {other:?}"),
        }
    }
}
