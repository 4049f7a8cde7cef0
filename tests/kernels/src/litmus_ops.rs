//! What the host (tests/gpu/litmus.rs) and the kernels
//! (tests/kernels/src/litmus.rs) of the litmus tests agree on, in one file
//! for both sides: the cell size, the layout of a task and the
//! message-passing shapes. Each includes this same file with `#[path]`.
//! Plain `core` Rust with no imports, so it builds for nvptx (`no_std`) and
//! for the host alike.

// Each side uses its part: the host encodes tasks, the kernels decode them.
#![allow(dead_code)]

/// `u64` words per cell.
pub const CELL: usize = 4;

/// A thread's task: word 0 = role (bits 0..8) | peer PE (8..16) | variant
/// bits (16..24); word 1 = cell a (bits 0..32) | cell b (32..64).
pub struct Task {
    pub role: u64,
    pub peer: u32,
    pub var: u64,
    pub a: usize,
    pub b: usize,
}

impl Task {
    /// The task in words `w0`, `w1` (as [`task`] makes them).
    #[inline(always)]
    pub fn from_words(w0: u64, w1: u64) -> Task {
        Task {
            role: w0 & 0xFF,
            peer: ((w0 >> 8) & 0xFF) as u32,
            var: (w0 >> 16) & 0xFF,
            a: (w1 & 0xFFFF_FFFF) as usize,
            b: (w1 >> 32) as usize,
        }
    }
}

/// The two words of a task (see [`Task`]).
pub fn task(role: u64, peer: usize, var: u64, a: u64, b: u64) -> [u64; 2] {
    [role | (peer as u64) << 8 | var << 16, a | b << 32]
}

/// Shapes of the kernel `litmus_mp`.
pub const MP_FENCE: u32 = 0;
pub const MP_QUIET: u32 = 1;
pub const MP_SIGNAL: u32 = 2;
pub const MP_AMO_FLAG: u32 = 3;
pub const MP_AMO_DATA: u32 = 4;
/// Data by one `p` per word (blocking single-element puts), `fence`, flag
/// by `p`: the pattern of `sync::fence_orders_puts`.
pub const MP_FENCE_P: u32 = 5;
/// Data by `put_nbi`, flag by `signal_op` SET r (variant bit 0 clear) or
/// ADD 1 (set); unordered: `signal_op_relaxed` instead (the relaxed signal
/// is exactly that: it orders nothing before it).
pub const MP_SIGNAL_OP: u32 = 6;
/// Cross-PE message passing: data by `put_nbi` to a third PE (the writer's
/// variant bits name it; the reader's peer is it), `quiet`, flag by `p` to
/// the reader; the reader reads the data from the third PE with `g`.
pub const MP_CROSS_QUIET: u32 = 7;
/// [`MP_CROSS_QUIET`] with `fence` as the ordering step (ordered) instead of `quiet`.
pub const MP_CROSS_FENCE: u32 = 8;

/// Orders of the kernel `litmus_get_after_barrier`: what stands between
/// the writers' puts and the getters' gets.
pub const GET_NO_BARRIER: u32 = 0;
pub const GET_SYNC_ALL: u32 = 1;
pub const GET_BARRIER_ALL: u32 = 2;
/// An arrival of the test's own with no fence on either side: the flags
/// are plain stores and plain polls (what a barrier that lost every fence does).
pub const GET_UNFENCED: u32 = 3;

/// Words of the symmetric counters of every litmus kernel: `[violations,
/// observations, timeouts]`, then one arrival flag per PE (up to [`MAX_PES`]).
pub const OUT_WORDS: usize = 3 + MAX_PES;
/// PEs the arrival flags of [`GET_UNFENCED`] allow for.
pub const MAX_PES: usize = 8;
