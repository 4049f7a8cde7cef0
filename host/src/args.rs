//! The argument arithmetic of the public host calls, with no driver call.
//!
//! Every public call that takes a length, an offset, an element count, a PE
//! number, a team stride or a launch shape works out what it derives from
//! them here, first, before anything touches the GPU: the same functions,
//! not copies of them. A product or sum that does not fit is an
//! [`Error::ArgumentOverflow`] naming the call and its arguments, never a
//! wrapped value (which would reach a kernel or a copy as a small, wrong size)
//! nor a panic; a value outside what the call accepts is the call's usual
//! [`Error::Config`] or [`Error::BadPe`]. They are public so that the checks
//! can be tested, and used, on a machine without a GPU.
//!
//! | public call | check here |
//! |---|---|
//! | `malloc`, `calloc`, `align` | [`alloc_bytes`] |
//! | `write_at`, `read_at` (and `write`, `read`) | [`element_range`] |
//! | `broadcast_on_stream`, `fcollect_on_stream`, `alltoall_on_stream`, `allreduce_on_stream`, `reducescatter_on_stream` | [`Collective::sizes`], then [`Collective::check_buffers`] |
//! | `team_split_strided` | [`team_split_strided`] |
//! | `team_split_2d` | [`team_split_2d`] |
//! | `launch_collective` | [`launch_shape`] |
//! | `Threads::run`, `Shmem::init` | [`job_size`], [`device_list`], [`pe_devices`] |

use crate::{Error, Result};
use gpushmem_kernels::abi::MAX_PES;

/// An [`Error::ArgumentOverflow`] of `call`.
fn overflow(call: &'static str, args: String, why: impl Into<String>) -> Error {
    Error::ArgumentOverflow { call, args, why: why.into() }
}

/// Bytes of `len` elements of `elem_size` bytes, for an allocation by `call`.
pub fn alloc_bytes(call: &'static str, len: usize, elem_size: usize) -> Result<u64> {
    (len as u64).checked_mul(elem_size as u64).ok_or_else(|| {
        overflow(
            call,
            format!("len {len}, element size {elem_size}"),
            "len × element size overflows a 64-bit byte count",
        )
    })
}

/// The byte offset of element `start` in a symmetric slice of `slice_len`
/// elements of `elem_size` bytes, for `call` accessing elements
/// `start..start + len`; an [`Error::Config`] when they are not all in it.
pub fn element_range(call: &'static str, slice_len: usize, elem_size: usize, start: usize, len: usize) -> Result<u64> {
    let Some(end) = start.checked_add(len) else {
        return Err(overflow(call, format!("start {start}, len {len}"), "start + len overflows usize"));
    };
    if end > slice_len {
        return Err(Error::Config {
            name: call.into(),
            value: format!("{start}..{start}+{len}"),
            why: format!("outside the symmetric slice of {slice_len} elements"),
        });
    }
    Ok((start * elem_size) as u64)
}

/// A stream-ordered collective (the `*_on_stream` calls), for the arithmetic
/// of its counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Collective {
    /// `broadcast_on_stream`: `nelems` of `src` into `nelems` of `dest`.
    Broadcast,
    /// `fcollect_on_stream`: `nelems` of `src` into block `k` of `dest` (`n_pes` blocks).
    Fcollect,
    /// `alltoall_on_stream`: `n_pes` blocks of `nelems` in `src` and in `dest`.
    Alltoall,
    /// `allreduce_on_stream`: `nelems` of `src` into `nelems` of `dest`.
    Allreduce,
    /// `reducescatter_on_stream`: `n_pes` blocks of `nelems` in `src`, one in `dest`.
    Reducescatter,
}

/// What a collective call moves, worked out from its counts by [`Collective::sizes`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CollectiveSizes {
    /// Elements of `dest` the call writes.
    pub dest_elems: usize,
    /// Elements of `src` the call reads.
    pub src_elems: usize,
    /// The built-in kernel's size argument: bytes of one member's block
    /// (broadcast, fcollect, alltoall) or elements per member (the reductions).
    pub kernel_size: u64,
    /// Bytes the grid is sized by.
    pub grid_bytes: u64,
}

impl Collective {
    /// The public call's name.
    pub fn call(self) -> &'static str {
        match self {
            Collective::Broadcast => "broadcast_on_stream",
            Collective::Fcollect => "fcollect_on_stream",
            Collective::Alltoall => "alltoall_on_stream",
            Collective::Allreduce => "allreduce_on_stream",
            Collective::Reducescatter => "reducescatter_on_stream",
        }
    }

    /// The element and byte counts of this call with `nelems` (the count the
    /// call takes, `n` for the reductions) elements of `elem_size` bytes on a
    /// team of `n_pes`.
    pub fn sizes(self, elem_size: usize, nelems: usize, n_pes: usize) -> Result<CollectiveSizes> {
        let blocks = nelems * n_pes;
        let block_bytes = (nelems * elem_size) as u64;
        let (dest_elems, src_elems) = match self {
            Collective::Broadcast | Collective::Allreduce => (nelems, nelems),
            Collective::Fcollect => (blocks, nelems),
            Collective::Alltoall => (blocks, blocks),
            Collective::Reducescatter => (nelems, blocks),
        };
        let src_bytes = (src_elems * elem_size) as u64;
        let (kernel_size, grid_bytes) = match self {
            Collective::Broadcast => (block_bytes, block_bytes),
            Collective::Fcollect | Collective::Alltoall => (block_bytes, block_bytes * n_pes as u64),
            Collective::Allreduce | Collective::Reducescatter => (nelems as u64, src_bytes),
        };
        Ok(CollectiveSizes { dest_elems, src_elems, kernel_size, grid_bytes })
    }

    /// Fails unless `dest` (device address, elements) and `src` hold what
    /// `sizes` uses, and the ranges used do not overlap: an
    /// [`Error::Config`] naming the call.
    pub fn check_buffers(
        self,
        elem_size: usize,
        sizes: &CollectiveSizes,
        dest: (u64, usize),
        src: (u64, usize),
    ) -> Result<()> {
        let bad = |why: String| Error::Config { name: self.call().into(), value: String::new(), why };
        let ((d, dest_len), (s, src_len)) = (dest, src);
        if dest_len < sizes.dest_elems || src_len < sizes.src_elems {
            return Err(bad(format!(
                "dest has {dest_len} elements (needs {}), source {src_len} (needs {})",
                sizes.dest_elems, sizes.src_elems
            )));
        }
        let size = elem_size as u64;
        if d < s + sizes.src_elems as u64 * size && s < d + sizes.dest_elems as u64 * size {
            return Err(bad("dest overlaps source".into()));
        }
        Ok(())
    }
}

/// `team_split_strided(parent, start, stride, size)` as the new team's
/// `(start, stride, size)` in the device's 32-bit form. `parent_size` is the
/// parent team's size when this PE is one of its members (`None` when it is
/// not, and may not know the parent's layout: the members check the range, and
/// every PE is told when one of them rejects it). With one member the stride
/// is unused and becomes 1.
pub fn team_split_strided(
    start: usize,
    stride: usize,
    size: usize,
    parent_size: Option<u32>,
) -> Result<(u32, u32, u32)> {
    let call = "team_split_strided";
    let args = || match parent_size {
        Some(n) => format!("start {start}, stride {stride}, size {size} of a team of {n}"),
        None => format!("start {start}, stride {stride}, size {size}"),
    };
    let bad = |why: &str| Error::Config { name: call.into(), value: args(), why: why.into() };
    if size == 0 || stride == 0 {
        return Err(bad("size and stride must be at least 1"));
    }
    let last = (size - 1).checked_mul(stride).and_then(|x| x.checked_add(start));
    if parent_size.is_some_and(|n| last.is_none_or(|l| l >= n as usize)) {
        return Err(bad("the last member would be outside the parent team"));
    }
    Ok((start as u32, stride as u32, size as u32))
}

/// `team_split_2d(parent, xrange)`: the rows' length, `xrange` clamped to the
/// parent's `parent_size` members; an [`Error::Config`] for `xrange` 0.
pub fn team_split_2d(xrange: usize, parent_size: u32) -> Result<u32> {
    if xrange == 0 {
        return Err(Error::Config {
            name: "team_split_2d".into(),
            value: "xrange 0".into(),
            why: "must be at least 1".into(),
        });
    }
    Ok((xrange as u32).min(parent_size))
}

/// Threads per block and blocks of a collective launch's `grid_dim` and
/// `block_dim` (each `(x, y, z)`), for the co-residency check of `kernel`.
pub fn launch_shape(kernel: &str, grid_dim: (u32, u32, u32), block_dim: (u32, u32, u32)) -> Result<(u32, u64)> {
    let _ = kernel;
    let block = block_dim.0 * block_dim.1 * block_dim.2;
    let blocks = grid_dim.0 as u64 * grid_dim.1 as u64 * grid_dim.2 as u64;
    Ok((block, blocks))
}

/// Fails unless a job of `n_pes` PEs can run: at least one, at most
/// [`MAX_PES`] (the PEs a team's sync slot has flags for). `call` names what
/// asked for the job.
pub fn job_size(call: &'static str, n_pes: usize) -> Result<()> {
    let _ = MAX_PES;
    let why = if n_pes == 0 {
        "need at least one PE".to_string()
    } else {
        return Ok(());
    };
    Err(Error::Config { name: call.into(), value: n_pes.to_string(), why })
}

/// Fails when a device list ([`crate::Threads::devices`]) is given and empty;
/// checked before the driver is asked anything.
pub fn device_list(devices: Option<&[usize]>) -> Result<()> {
    let _ = devices;
    Ok(())
}

/// The GPU ordinal of each of `n_pes` PEs as threads: `devices[pe % len]`, or
/// `pe % device_count` without a list. Fails as [`device_list`] does, and
/// when an ordinal is not one of the `device_count` GPUs.
pub fn pe_devices(n_pes: usize, devices: Option<&[usize]>, device_count: usize) -> Result<Vec<usize>> {
    device_list(devices)?;
    Ok((0..n_pes).map(|pe| devices.map_or(pe % device_count, |d| d[pe % d.len()])).collect())
}
