//! Types shared by the host and the device, laid out once, `#[repr(C)]`.
//!
//! Like NVSHMEM's device state, the struct carries a version and its own size,
//! and its layout is pinned by compile-time asserts: a host and a kernel built
//! from different versions are refused at module load (the host checks both
//! the symbol's size and the version it writes).

use bytemuck::{Pod, Zeroable};

/// Version of [`State`]'s layout; bump on any change.
pub const STATE_VERSION: u32 = 2;

/// Name of the device-state global in every kernel module.
pub const STATE_SYMBOL: &str = "GPUSHMEM_STATE";

/// [`State::flags`] bit: check PE numbers and heap bounds in every call, trap with a message.
pub const FLAG_DEBUG_CHECKS: u32 = 1;

/// [`State::flags`] bit: every PE of the job runs on this PE's GPU, so device-
/// scope (`.gpu`) fences and release/acquire operations order everything the
/// PEs can observe (PTX ISA 8.5: the `.gpu` scope is every thread of the
/// device); without it they use `.sys` (other GPUs and the host included).
pub const FLAG_ONE_GPU: u32 = 2;

/// From this many bytes per member up, the native engine's all-reduce runs
/// two-shot (reduce-scatter, then all-gather: each member reads about twice
/// the data) instead of one-shot (each member reads every member's data, one
/// sync fewer). Public so that tools can model the traffic of each call.
pub const REDUCE_TWO_SHOT_MIN_BYTES: usize = 256 << 10;

/// Largest number of PEs a team's sync slot has flags for.
pub const MAX_PES: u32 = 4096;

/// Number of team slots (the world team is slot 0); `team_split_*` fails when all are in use.
pub const MAX_TEAMS: u32 = 32;

/// Where, from [`State::teams`], the `[i32; MAX_TEAMS]` of engine team
/// handles starts: on the NVSHMEM engine slot `t`'s `nvshmem_team_t`
/// ([`ENGINE_TEAM_INVALID`] on a PE outside the team or for an unused slot);
/// the native engine leaves them all invalid.
pub const ENGINE_TEAMS_OFFSET: u64 = MAX_TEAMS as u64 * core::mem::size_of::<TeamDesc>() as u64;

/// Bytes of the whole device team table: descriptors, then engine handles.
pub const TEAM_TABLE_BYTES: u64 = ENGINE_TEAMS_OFFSET + 4 * MAX_TEAMS as u64;

/// An engine team handle naming no team (`NVSHMEM_TEAM_INVALID`).
pub const ENGINE_TEAM_INVALID: i32 = -1;

/// Bytes of one team's sync slot in the heap: see [`sync_area`].
pub const TEAM_SLOT_BYTES: u64 = (sync_area::BARRIER_FLAGS + 8 * MAX_PES as u64).next_multiple_of(256);

/// Bytes at the start of every PE's heap that the library keeps for itself
/// (the team sync slots, [`sync_area`]); user allocations start after it.
pub const RESERVED_HEAP_BYTES: u64 = 2 << 20;

/// The per-PE device state.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct State {
    /// [`STATE_VERSION`] when installed; 0 while no host has installed it.
    pub version: u32,
    /// `size_of::<State>()` as the host saw it.
    pub size: u32,
    /// This PE's number, `0..n_pes`.
    pub my_pe: u32,
    /// Number of PEs in the job.
    pub n_pes: u32,
    /// Device address of this PE's heap.
    pub heap_base: u64,
    /// Bytes in each PE's heap (the same on every PE).
    pub heap_size: u64,
    /// Device address of a `[u64; n_pes]` table: where each PE's heap is
    /// mapped in this PE's address space; 0 where a PE is not reachable by
    /// loads and stores (room for a proxy transport later).
    pub peer_bases: u64,
    /// [`FLAG_DEBUG_CHECKS`] and future flags.
    pub flags: u32,
    /// Reserved, zero.
    pub reserved0: u32,
    /// Bounded waits trap after this many nanoseconds without progress; 0 waits forever.
    pub timeout_ns: u64,
    /// Device address of this PE's `[TeamDesc; MAX_TEAMS]` table, followed
    /// by `[i32; MAX_TEAMS]`: each slot's team handle in the engine
    /// ([`ENGINE_TEAMS_OFFSET`]).
    pub teams: u64,
    /// Reserved for later versions, zero.
    pub reserved: [u64; 3],
}

/// One team as one PE sees it (entry `t` of the table at [`State::teams`];
/// a kernel names a team by its slot `t`). Slot 0 is the world team.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct TeamDesc {
    /// World PE of team member 0.
    pub start: u32,
    /// World-PE distance between consecutive members.
    pub stride: u32,
    /// Members; 0 for an unused slot.
    pub size: u32,
    /// This PE's index in the team, or [`NOT_A_MEMBER`].
    pub my_index: u32,
}

/// [`TeamDesc::my_index`] of a PE outside the team.
pub const NOT_A_MEMBER: u32 = u32::MAX;

impl TeamDesc {
    /// World PE of member `i`.
    #[inline(always)]
    pub fn world_pe(&self, i: u32) -> u32 {
        self.start + i * self.stride
    }

    /// Member index of world PE `pe`, if it is a member.
    #[inline(always)]
    pub fn index_of(&self, pe: u32) -> Option<u32> {
        if self.size == 0 || pe < self.start || !(pe - self.start).is_multiple_of(self.stride.max(1)) {
            return None;
        }
        let i = (pe - self.start) / self.stride.max(1);
        (i < self.size).then_some(i)
    }

    /// Heap offset of this team's sync slot, for slot `t`.
    #[inline(always)]
    pub fn slot_offset(t: u32) -> u64 {
        t as u64 * TEAM_SLOT_BYTES
    }
}

/// Comparison of a waited-on word with a value (`NVSHMEM_CMP_*`): shared by
/// device waits and the host's stream-ordered waits.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmp {
    /// `==`
    Eq = 0,
    /// `!=`
    Ne = 1,
    /// `>`
    Gt = 2,
    /// `>=`
    Ge = 3,
    /// `<`
    Lt = 4,
    /// `<=`
    Le = 5,
}

impl Cmp {
    /// Whether `seen <cmp> value` holds.
    #[inline(always)]
    pub fn holds<T: PartialOrd>(self, seen: T, value: T) -> bool {
        match self {
            Cmp::Eq => seen == value,
            Cmp::Ne => seen != value,
            Cmp::Gt => seen > value,
            Cmp::Ge => seen >= value,
            Cmp::Lt => seen < value,
            Cmp::Le => seen <= value,
        }
    }

    /// The comparison with this code (as passed through kernel parameters), if any.
    #[inline(always)]
    pub fn from_u32(code: u32) -> Option<Cmp> {
        Some(match code {
            0 => Cmp::Eq,
            1 => Cmp::Ne,
            2 => Cmp::Gt,
            3 => Cmp::Ge,
            4 => Cmp::Lt,
            5 => Cmp::Le,
            _ => return None,
        })
    }

    /// The operator, for messages.
    pub fn symbol(self) -> &'static str {
        ["==", "!=", ">", ">=", "<", "<="][self as usize]
    }
}

/// How `put_signal`/`signal_op` update the signal word (`NVSHMEM_SIGNAL_SET/ADD`).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SignalOp {
    /// The signal becomes the value.
    Set = 0,
    /// The value is added to the signal.
    Add = 1,
}

impl SignalOp {
    /// The operation with this code (as passed through kernel parameters), if any.
    #[inline(always)]
    pub fn from_u32(code: u32) -> Option<SignalOp> {
        match code {
            0 => Some(SignalOp::Set),
            1 => Some(SignalOp::Add),
            _ => None,
        }
    }
}

/// Layout of one team's sync slot (slot `t` at heap offset `t * TEAM_SLOT_BYTES`;
/// the world team's is slot 0).
///
/// `barrier_flags[j]` on a member is written only by member j with the
/// sequence number of the barrier it arrived at; sequence numbers only grow,
/// so no flag needs resetting between back-to-back barriers (no reset race).
/// The host zeroes a slot when it gives it to a new team.
pub mod sync_area {
    /// Offset of this PE's own barrier sequence counter (u64, written only locally).
    pub const BARRIER_SEQ: u64 = 0;
    /// Offset of this PE's count of native collectives on the team run with
    /// debug checks on (u64, written by this PE with release, read by the
    /// previous member; see [`COLL_ARGS`]).
    pub const COLL_SEQ: u64 = 8;
    /// Offset of the arguments of this PE's latest such collective (two u64:
    /// size in bytes; kind, operator and root), which the previous member
    /// compares with its own so that members passing different sizes trap
    /// with both sets named instead of computing a wrong result or hanging.
    pub const COLL_ARGS: u64 = 16;
    /// Offset of the grid barrier's arrival count (u32, local atomics only):
    /// blocks of this PE's grid that reached the current grid barrier.
    pub const GRID_ARRIVE: u64 = 32;
    /// Offset of the grid barrier's generation (u32, local only): bumped by
    /// the last block to arrive, once the PEs' barrier is done.
    pub const GRID_GEN: u64 = 64;
    /// Offset of `barrier_flags: [u64; team size]` (own cache line).
    pub const BARRIER_FLAGS: u64 = 128;
}

const _: () = {
    assert!(core::mem::size_of::<State>() == 88);
    assert!(core::mem::offset_of!(State, teams) == 56);
    assert!(core::mem::size_of::<TeamDesc>() == 16);
    assert!(MAX_TEAMS as u64 * TEAM_SLOT_BYTES <= RESERVED_HEAP_BYTES);
    assert!(core::mem::align_of::<State>() == 8);
    assert!(core::mem::offset_of!(State, heap_base) == 16);
    assert!(core::mem::offset_of!(State, peer_bases) == 32);
    assert!(core::mem::offset_of!(State, timeout_ns) == 48);
};

impl State {
    /// The state before the host installs it: version 0, which device code
    /// treats as "not initialised".
    pub const UNINIT: State = State {
        version: 0,
        size: 0,
        my_pe: 0,
        n_pes: 0,
        heap_base: 0,
        heap_size: 0,
        peer_bases: 0,
        flags: 0,
        reserved0: 0,
        timeout_ns: 0,
        teams: 0,
        reserved: [0; 3],
    };
}
