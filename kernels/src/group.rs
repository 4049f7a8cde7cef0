//! The thread groups that `_warp`/`_block` variants split work over.

use crate::ptx;

/// A set of threads that call a collective-style device function together.
#[derive(Clone, Copy)]
pub(crate) struct Group {
    /// This thread's rank in the group.
    pub rank: usize,
    /// Threads in the group (the NVSHMEM engine's group functions split the work themselves).
    #[cfg_attr(feature = "nvshmem", allow(dead_code))]
    pub size: usize,
    /// Which group this is (the NVSHMEM engine picks its `_warp`/`_block` function by it).
    pub kind: Kind,
}

/// The shape of a [`Group`].
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// One thread.
    Thread,
    /// A warp (32 lanes).
    Warp,
    /// A block.
    Block,
}

impl Group {
    /// Just the calling thread.
    #[inline(always)]
    pub fn thread() -> Self {
        Group { rank: 0, size: 1, kind: Kind::Thread }
    }

    /// The calling warp (all 32 lanes must call).
    #[inline(always)]
    pub fn warp() -> Self {
        Group { rank: ptx::lane_id() as usize, size: 32, kind: Kind::Warp }
    }

    /// The calling block (all its threads must call).
    #[inline(always)]
    pub fn block() -> Self {
        Group { rank: ptx::thread_index_in_block() as usize, size: ptx::threads_in_block() as usize, kind: Kind::Block }
    }

    /// Barrier over the group (nothing for a single thread).
    #[inline(always)]
    pub fn sync(&self) {
        match self.kind {
            Kind::Thread => {}
            Kind::Warp => ptx::sync_warp(),
            Kind::Block => ptx::sync_block(),
        }
    }

    /// Whether this thread is the group's leader (rank 0).
    #[inline(always)]
    pub fn is_leader(&self) -> bool {
        self.rank == 0
    }
}
