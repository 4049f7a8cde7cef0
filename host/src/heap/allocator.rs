//! The deterministic allocator over heap offsets.
//!
//! Every PE runs the same sequence of collective `malloc`/`free` calls, so a
//! deterministic allocator gives every PE the same offsets with no exchange.
//! First fit over an ordered free list, neighbours coalesced on free.

use crate::{Error, Result};
use std::collections::{BTreeMap, BTreeSet};

/// Every allocation starts at a multiple of this and its size is rounded up
/// to it (room for 16-byte vector accesses and whole cache lines).
pub const MIN_ALIGN: u64 = 256;

/// Offsets `[start, end)` of the allocatable part of a heap.
#[derive(Debug)]
pub struct Allocator {
    start: u64,
    end: u64,
    /// Free ranges: start → size.
    free: BTreeMap<u64, u64>,
    /// Live allocations: start → size (rounded).
    live: BTreeMap<u64, u64>,
    /// Starts of allocations freed and not handed out since: a second free there is a double free.
    freed: BTreeSet<u64>,
}

impl Allocator {
    /// An allocator over offsets `[start, end)`; `start` is rounded up to [`MIN_ALIGN`].
    pub fn new(start: u64, end: u64) -> Self {
        let start = start.next_multiple_of(MIN_ALIGN);
        let mut free = BTreeMap::new();
        if end > start {
            free.insert(start, end - start);
        }
        Allocator { start, end, free, live: BTreeMap::new(), freed: BTreeSet::new() }
    }

    /// Allocates `size` bytes (0 counts as 1) at a multiple of `align` (a power
    /// of two; at least [`MIN_ALIGN`]); returns the offset.
    pub fn alloc(&mut self, size: u64, align: u64) -> Result<u64> {
        if !align.is_power_of_two() {
            return Err(Error::Config {
                name: "align".into(),
                value: align.to_string(),
                why: "not a power of two".into(),
            });
        }
        let align = align.max(MIN_ALIGN);
        let rounded = size.max(1).checked_next_multiple_of(MIN_ALIGN).unwrap_or(u64::MAX);
        let found = self.free.iter().find_map(|(&at, &len)| {
            let start = at.checked_next_multiple_of(align)?;
            (start.checked_add(rounded)? <= at + len).then_some((at, len, start))
        });
        let Some((at, len, start)) = found else {
            return Err(Error::HeapExhausted {
                requested: size,
                align,
                largest_free: self.free.values().copied().max().unwrap_or(0),
                heap_size: self.end,
            });
        };
        self.free.remove(&at);
        if start > at {
            self.free.insert(at, start - at);
        }
        let tail = at + len - (start + rounded);
        if tail > 0 {
            self.free.insert(start + rounded, tail);
        }
        self.live.insert(start, rounded);
        self.freed.remove(&start);
        Ok(start)
    }

    /// Frees the allocation that starts at `offset`.
    pub fn free(&mut self, offset: u64) -> Result<()> {
        let Some(size) = self.live.remove(&offset) else {
            let why = if self.freed.contains(&offset) {
                "double free (this allocation was already freed)"
            } else if offset < self.start || offset >= self.end {
                "not an offset of the allocatable heap"
            } else {
                "not the start of a live allocation"
            };
            return Err(Error::BadFree { offset, why });
        };
        self.freed.insert(offset);
        let mut start = offset;
        let mut len = size;
        if let Some((&p, &plen)) = self.free.range(..offset).next_back() {
            if p + plen == offset {
                self.free.remove(&p);
                start = p;
                len += plen;
            }
        }
        if let Some(nlen) = self.free.remove(&(offset + size)) {
            len += nlen;
        }
        self.free.insert(start, len);
        Ok(())
    }

    /// Bytes free in total.
    #[cfg(test)]
    pub fn free_bytes(&self) -> u64 {
        self.free.values().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_sequence_same_offsets_and_coalescing() {
        let mut a = Allocator::new(1000, 1 << 20);
        let x = a.alloc(10, 1).unwrap();
        assert_eq!(x % MIN_ALIGN, 0);
        assert!(x >= 1000);
        let y = a.alloc(4096, 4096).unwrap();
        assert_eq!(y % 4096, 0);
        let z = a.alloc(1, 1).unwrap();
        let total = a.free_bytes();
        a.free(y).unwrap();
        a.free(x).unwrap();
        a.free(z).unwrap();
        assert_eq!(a.free.len(), 1, "all ranges coalesced: {:?}", a.free);
        assert!(a.free_bytes() > total);
        // Deterministic: a second allocator given the same calls agrees.
        let mut b = Allocator::new(1000, 1 << 20);
        assert_eq!(b.alloc(10, 1).unwrap(), x);
    }

    #[test]
    fn errors() {
        let mut a = Allocator::new(0, 4096);
        let x = a.alloc(4096, 1).unwrap();
        match a.alloc(1, 1) {
            Err(Error::HeapExhausted { largest_free: 0, .. }) => {}
            other => panic!("{other:?}"),
        }
        a.free(x).unwrap();
        assert!(matches!(a.free(x), Err(Error::BadFree { why, .. }) if why.contains("double")));
        assert!(matches!(a.free(x + 256), Err(Error::BadFree { why, .. }) if why.contains("not the start")));
        assert!(matches!(a.free(1 << 40), Err(Error::BadFree { why, .. }) if why.contains("not an offset")));
        assert!(a.alloc(1, 3).is_err());
        let mut big = Allocator::new(0, 1 << 20);
        assert!(matches!(big.alloc(u64::MAX - 10, 1), Err(Error::HeapExhausted { .. })));
    }

    #[test]
    fn random_alloc_free_keeps_invariants() {
        let mut a = Allocator::new(0, 1 << 24);
        let mut live: Vec<(u64, u64)> = Vec::new();
        let mut seed = 12345u64;
        let mut rnd = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..5000 {
            if rnd() % 3 != 0 || live.is_empty() {
                let size = rnd() % 100_000;
                let align = 1 << (rnd() % 14);
                if let Ok(off) = a.alloc(size, align) {
                    assert_eq!(off % align.max(MIN_ALIGN), 0);
                    for &(o, s) in &live {
                        assert!(off + size.max(1) <= o || o + s <= off, "overlap");
                    }
                    live.push((off, size.max(1)));
                }
            } else {
                let i = (rnd() as usize) % live.len();
                let (o, _) = live.swap_remove(i);
                a.free(o).unwrap();
            }
        }
        for (o, _) in live {
            a.free(o).unwrap();
        }
        assert_eq!(a.free_bytes(), 1 << 24);
    }
}
