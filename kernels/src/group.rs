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
    /// Every thread of every block of the grid (native engine only: the
    /// `_grid` collectives and barriers). Its [`Group::sync`] syncs the
    /// block only; the cross-block sync is the engine's `team_sync_group`.
    #[cfg(not(feature = "nvshmem"))]
    Grid,
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

    /// Every thread of the grid (all must call; the kernel launched
    /// collectively so that every block is resident at once).
    #[inline(always)]
    #[cfg(not(feature = "nvshmem"))]
    pub fn grid() -> Self {
        let t = ptx::threads_in_block() as usize;
        Group {
            rank: block_rank() * t + ptx::thread_index_in_block() as usize,
            size: blocks_in_grid() * t,
            kind: Kind::Grid,
        }
    }

    /// Barrier over the group (nothing for a single thread); for
    /// [`Kind::Grid`] over the calling block only.
    #[inline(always)]
    pub fn sync(&self) {
        match self.kind {
            Kind::Thread => {}
            Kind::Warp => ptx::sync_warp(),
            Kind::Block => ptx::sync_block(),
            #[cfg(not(feature = "nvshmem"))]
            Kind::Grid => ptx::sync_block(),
        }
    }

    /// Whether this thread is the group's leader (rank 0).
    #[inline(always)]
    pub fn is_leader(&self) -> bool {
        self.rank == 0
    }
}

/// The calling block's linear index in the grid (x fastest).
#[inline(always)]
#[cfg(not(feature = "nvshmem"))]
pub(crate) fn block_rank() -> usize {
    let (x, y, z) = crate::thread::block_idx_xyz();
    let (gx, gy, _) = crate::thread::grid_dim_xyz();
    (z as usize * gy as usize + y as usize) * gx as usize + x as usize
}

/// Blocks in the grid.
#[inline(always)]
#[cfg(not(feature = "nvshmem"))]
pub(crate) fn blocks_in_grid() -> usize {
    let (gx, gy, gz) = crate::thread::grid_dim_xyz();
    gx as usize * gy as usize * gz as usize
}
