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

/// `a × b` as a `u64`, or `None` where it does not fit.
fn mul_u64(a: usize, b: usize) -> Option<u64> {
    u64::try_from(a).ok()?.checked_mul(u64::try_from(b).ok()?)
}

/// Bytes of `len` elements of `elem_size` bytes, for an allocation by `call`.
pub fn alloc_bytes(call: &'static str, len: usize, elem_size: usize) -> Result<u64> {
    mul_u64(len, elem_size).ok_or_else(|| {
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
    mul_u64(start, elem_size).ok_or_else(|| {
        overflow(
            call,
            format!("start {start}, element size {elem_size}"),
            "start × element size overflows a 64-bit byte offset",
        )
    })
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
        let err = |why: &str| {
            overflow(self.call(), format!("nelems {nelems}, team of {n_pes} PEs, element size {elem_size}"), why)
        };
        let blocks = || nelems.checked_mul(n_pes).ok_or_else(|| err("nelems × team size overflows usize"));
        let (dest_elems, src_elems) = match self {
            Collective::Broadcast | Collective::Allreduce => (nelems, nelems),
            Collective::Fcollect => (blocks()?, nelems),
            Collective::Alltoall => (blocks()?, blocks()?),
            Collective::Reducescatter => (nelems, blocks()?),
        };
        let bytes = |elems: usize| mul_u64(elems, elem_size).ok_or_else(|| err("a byte count overflows u64"));
        // The larger buffer's bytes bound every other byte count of the call.
        let (dest_bytes, src_bytes) = (bytes(dest_elems)?, bytes(src_elems)?);
        let block_bytes = bytes(nelems)?;
        let (kernel_size, grid_bytes) = match self {
            Collective::Broadcast => (block_bytes, block_bytes),
            Collective::Fcollect => (block_bytes, dest_bytes),
            Collective::Alltoall => (block_bytes, src_bytes),
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
        // Exact ends: a range that would pass the end of the address space still overlaps.
        let end = |at: u64, elems: usize| at as u128 + elems as u128 * elem_size as u128;
        if (d as u128) < end(s, sizes.src_elems) && (s as u128) < end(d, sizes.dest_elems) {
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
    let stride = if size == 1 { 1 } else { stride };
    // A member's layout fits (it is inside the parent); one outside the parent must fit too.
    let fits = last.and_then(|l| u32::try_from(l).ok()).is_some();
    match (u32::try_from(start), u32::try_from(stride), u32::try_from(size)) {
        (Ok(a), Ok(b), Ok(c)) if fits => Ok((a, b, c)),
        _ => Err(overflow(call, args(), "the team's layout does not fit the device's 32-bit PE numbers")),
    }
}

/// `team_split_2d(parent, xrange)`: the rows' length, `xrange` clamped to the
/// parent's `parent_size` members; an [`Error::Config`] for `xrange` 0.
pub fn team_split_2d(xrange: usize, parent_size: u32) -> Result<u32> {
    let bad = |why: &str| Error::Config {
        name: "team_split_2d".into(),
        value: format!("xrange {xrange} of a team of {parent_size}"),
        why: why.into(),
    };
    if xrange == 0 {
        return Err(bad("must be at least 1"));
    }
    if parent_size == 0 {
        return Err(bad("the parent team has no members"));
    }
    // Clamped in `usize`, then narrowed: `parent_size` fits.
    Ok(xrange.min(parent_size as usize) as u32)
}

/// Threads per block and blocks of a collective launch's `grid_dim` and
/// `block_dim` (each `(x, y, z)`), for the co-residency check of `kernel`.
pub fn launch_shape(kernel: &str, grid_dim: (u32, u32, u32), block_dim: (u32, u32, u32)) -> Result<(u32, u64)> {
    let block = block_dim.0.checked_mul(block_dim.1).and_then(|x| x.checked_mul(block_dim.2));
    let blocks = (grid_dim.0 as u64 * grid_dim.1 as u64).checked_mul(grid_dim.2 as u64);
    match (block, blocks) {
        (Some(block), Some(blocks)) => Ok((block, blocks)),
        _ => Err(overflow(
            "launch_collective",
            format!("kernel {kernel}, grid_dim {grid_dim:?}, block_dim {block_dim:?}"),
            "threads per block overflow u32, or blocks overflow u64",
        )),
    }
}

/// Fails unless a job of `n_pes` PEs can run: at least one, at most
/// [`MAX_PES`] (the PEs a team's sync slot has flags for). `call` names what
/// asked for the job.
pub fn job_size(call: &'static str, n_pes: usize) -> Result<()> {
    let why = if n_pes == 0 {
        "need at least one PE".to_string()
    } else if n_pes > MAX_PES as usize {
        format!("at most {MAX_PES} PEs (gpushmem_kernels::abi::MAX_PES: the flags of a team's sync slot)")
    } else {
        return Ok(());
    };
    Err(Error::Config { name: call.into(), value: n_pes.to_string(), why })
}

/// Fails when a device list ([`crate::Threads::devices`]) is given and empty;
/// checked before the driver is asked anything.
pub fn device_list(devices: Option<&[usize]>) -> Result<()> {
    match devices {
        Some([]) => Err(Error::Config {
            name: "Threads::devices".into(),
            value: "[]".into(),
            why: "needs at least one GPU ordinal (leave it out for PE k on GPU k % device count)".into(),
        }),
        _ => Ok(()),
    }
}

/// The GPU ordinal of each of `n_pes` PEs as threads: `devices[pe % len]`, or
/// `pe % device_count` without a list. Fails as [`job_size`] and
/// [`device_list`] do, and when an ordinal is not one of the `device_count` GPUs.
pub fn pe_devices(n_pes: usize, devices: Option<&[usize]>, device_count: usize) -> Result<Vec<usize>> {
    job_size("Threads::new", n_pes)?;
    device_list(devices)?;
    let list: Vec<usize> = match devices {
        Some(d) => d.to_vec(),
        None => (0..device_count.min(n_pes)).collect(),
    };
    if let Some(&g) = list.iter().find(|&&g| g >= device_count) {
        return Err(Error::Config {
            name: "Threads::devices".into(),
            value: format!("{list:?}"),
            why: format!("GPU {g} does not exist: this machine has {device_count} GPU(s)"),
        });
    }
    if list.is_empty() {
        return Err(Error::NoGpu("no GPU to put the PEs on (device count 0)".into()));
    }
    Ok((0..n_pes).map(|pe| list[pe % list.len()]).collect())
}
