//! The operation records of the random-operation stress test, in one file
//! for both sides: the kernel (tests/kernels/src/stress.rs) runs them, the
//! host (tests/gpu/stress.rs) makes them and models them; each includes this
//! same file with `#[path]`. Plain `core` Rust with no imports, so it builds
//! for nvptx (`no_std`) and for the host alike.

// Each side uses its part: the host encodes records, the kernel decodes them.
#![allow(dead_code)]

/// `u64` words per operation record: `[head, dest offset, source offset,
/// bytes or value, signal offset, signal value]`, `head` as [`head`] makes it.
/// Offsets are bytes from the arena (from the put source for a put's source).
pub const REC: usize = 6;
/// `warp` of an operation the whole block runs.
pub const BLOCK: u64 = 0xFF;

// Kinds. Thread forms run on lane `lane` of warp `warp`, warp forms on that
// warp, block forms on the whole block. Gets land in the running PE's arena;
// puts read the put source. The put, get and put-with-signal forms each come
// in the order thread, thread nbi, warp, warp nbi, block, block nbi.
pub const PUT: u64 = 0;
pub const PUT_NBI: u64 = 1;
pub const PUT_WARP: u64 = 2;
pub const PUT_NBI_WARP: u64 = 3;
pub const PUT_BLOCK: u64 = 4;
pub const PUT_NBI_BLOCK: u64 = 5;
pub const GET: u64 = 6;
pub const GET_NBI: u64 = 7;
pub const GET_WARP: u64 = 8;
pub const GET_NBI_WARP: u64 = 9;
pub const GET_BLOCK: u64 = 10;
pub const GET_NBI_BLOCK: u64 = 11;
pub const P: u64 = 12;
pub const G: u64 = 13;
pub const PUT_NBI_U32: u64 = 14;
pub const GET_U64_WARP: u64 = 15;
pub const ADD: u64 = 16;
pub const FETCH_ADD: u64 = 17;
pub const INC: u64 = 18;
pub const XOR: u64 = 19;
pub const PUT_SIGNAL: u64 = 20;
pub const PUT_SIGNAL_NBI: u64 = 21;
pub const PUT_SIGNAL_WARP: u64 = 22;
pub const PUT_SIGNAL_NBI_WARP: u64 = 23;
pub const PUT_SIGNAL_BLOCK: u64 = 24;
pub const PUT_SIGNAL_NBI_BLOCK: u64 = 25;
pub const SIGNAL_ADD: u64 = 26;
/// How many kinds there are.
pub const KINDS: usize = 27;

/// A record's first word: `kind | pe << 8 | lane << 16 | warp << 24`
/// (`warp` [`BLOCK`] for a block form).
#[inline(always)]
pub const fn head(kind: u64, pe: u64, lane: u64, warp: u64) -> u64 {
    kind | pe << 8 | lane << 16 | warp << 24
}

/// The kind of a record's first word.
#[inline(always)]
pub const fn kind(head: u64) -> u64 {
    head & 0xFF
}

/// The target PE of a record's first word.
#[inline(always)]
pub const fn pe(head: u64) -> u64 {
    (head >> 8) & 0xFF
}

/// The lane of a record's first word (thread forms).
#[inline(always)]
pub const fn lane(head: u64) -> u64 {
    (head >> 16) & 0xFF
}

/// The warp of a record's first word.
#[inline(always)]
pub const fn warp(head: u64) -> u64 {
    (head >> 24) & 0xFF
}

/// The checksum term of word `w` at index `i` of a part. A bijection of `w`
/// for each `i`, so a single wrong word always changes the sum.
#[inline(always)]
pub fn term(i: u64, w: u64) -> u64 {
    let mut z = w ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 31)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z ^ (z >> 29)
}
