//! Stream-ordered collectives (`nvshmemx_*_on_stream`): each launches a
//! built-in kernel (the device collective's `_grid` form) on the caller's
//! stream through the collective launch, so it takes effect in stream order.
//! The grid grows with the data, one block per [`BYTES_PER_BLOCK`] moved, up
//! to what [`Shmem::collective_launch_query_gridsize`] allows (the GPU's
//! resident blocks split among the PEs sharing it): small messages run on
//! one block (no grid barrier), large ones on every block the PE may keep
//! resident. Every member of the team makes the same call, so every member
//! picks the same grid. See the device crate's `collective` module for the
//! algorithm and its cost. Like the other stream-ordered operations they reach
//! the members by loads and stores: in a job of several nodes (NVSHMEM
//! engine) they are [`crate::Error::Engine`]; use the device collectives there.

use crate::args::{Collective, CollectiveSizes};
use crate::error::CudaContext as _;
use crate::launch::{co_resident_blocks, launch_on, KernelArgs};
use crate::module::Kernel;
use crate::{Error, Result, Shmem, SymSlice, Team};
use cudarc::driver::{CudaStream, LaunchConfig};
use gpushmem_kernels::reduce::{Bf16, ReduceOp, Reducible, F16};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Threads of the block each built-in collective runs with, at most: fewer
/// (whole warps) for a kernel whose register use allows fewer per block
/// (e.g. the 8-bit and f64 reductions).
const COLLECTIVE_THREADS: u32 = 512;

/// Bytes of data per block of a built-in collective's grid: below this
/// a call runs on one block; the grid is capped by co-residency.
const BYTES_PER_BLOCK: u64 = 64 << 10;

/// An element type the built-in reduction kernels exist for.
pub trait ReduceType: Reducible {
    /// The kernel-name suffix (`gpushmem_reduce_<NAME>`).
    const NAME: &'static str;
}

macro_rules! reduce_type {
    ($($t:ty => $n:literal),*) => {$(impl ReduceType for $t { const NAME: &'static str = $n; })*};
}
reduce_type!(u8 => "u8", i8 => "i8", u16 => "u16", i16 => "i16", u32 => "u32", i32 => "i32", u64 => "u64", i64 => "i64",
    f32 => "f32", f64 => "f64", F16 => "f16", Bf16 => "bf16");

/// A built-in collective kernel with its launch shape: the block size its
/// registers allow (at most [`COLLECTIVE_THREADS`]) and the co-resident blocks
/// per PE. Worked out once per kernel and PE: the driver queries behind it
/// (function attribute, occupancy) cost microseconds, which with eight PEs
/// as threads queueing on the driver dominated small collectives.
pub(crate) struct CollectiveShape {
    kernel: Kernel,
    threads: u32,
    resident: u64,
}

/// This PE's [`CollectiveShape`]s by kernel name.
#[derive(Default)]
pub(crate) struct CollectiveShapes(Mutex<HashMap<String, Arc<CollectiveShape>>>);

impl CollectiveShapes {
    fn get(&self, shmem: &Shmem, name: &str) -> Result<Arc<CollectiveShape>> {
        if let Some(s) = self.0.lock().unwrap_or_else(|e| e.into_inner()).get(name) {
            return Ok(s.clone());
        }
        let kernel = shmem.builtin.kernel(name)?;
        let threads = COLLECTIVE_THREADS.min(kernel.max_threads_per_block()? / 32 * 32).max(32);
        let (resident, _, _) = co_resident_blocks(shmem.context(), &kernel, threads, 0, shmem.pes_on_device())?;
        let shape = Arc::new(CollectiveShape { kernel, threads, resident });
        self.0.lock().unwrap_or_else(|e| e.into_inner()).insert(name.to_string(), shape.clone());
        Ok(shape)
    }
}

fn bad(call: &str, why: String) -> Error {
    Error::Config { name: call.into(), value: String::new(), why }
}

impl Shmem {
    /// Launches built-in collective `name` on `stream` with a grid sized for
    /// `bytes` of data (the same on every member).
    fn collective_on(&self, stream: &CudaStream, name: &str, bytes: u64, args: impl KernelArgs) -> Result<()> {
        self.check_reach_all()?;
        let shape = self.collective_shapes.get(self, name)?;
        let blocks = bytes.div_ceil(BYTES_PER_BLOCK).clamp(1, shape.resident.clamp(1, u32::MAX as u64)) as u32;
        let cfg = LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (shape.threads, 1, 1), shared_mem_bytes: 0 };
        self.context().bind_to_thread().cuda("cuCtxSetCurrent")?;
        // SAFETY: the arguments match the built-in kernel, checked by the callers below;
        // `blocks` is within the co-resident count of the shape.
        unsafe { launch_on(self.owner(), stream.cu_stream(), &shape.kernel, cfg, &args) }
    }

    /// Works out `which`'s counts for `nelems` on `team` ([`Collective::sizes`]),
    /// then fails unless this PE is in `team` and `dest` and `src` are
    /// symmetric slices of this heap that hold them without overlapping.
    fn check_collective<T>(
        &self,
        which: Collective,
        team: &Team,
        dest: &SymSlice<T>,
        src: &SymSlice<T>,
        nelems: usize,
    ) -> Result<CollectiveSizes> {
        let elem = std::mem::size_of::<T>();
        let sizes = which.sizes(elem, nelems, team.n_pes())?;
        if team.my_pe().is_none() {
            return Err(bad(which.call(), format!("PE {} is not a member of the team", self.my_pe())));
        }
        self.heap.check_slice(dest)?;
        self.heap.check_slice(src)?;
        which.check_buffers(elem, &sizes, (dest.as_kernel_ptr(), dest.len()), (src.as_kernel_ptr(), src.len()))?;
        Ok(sizes)
    }

    /// Copies `nelems` of `src` on team member `root` into `dest` on every member (collective over `team`).
    /// Checked, ordered and completed as [`Shmem::allreduce_on_stream`] says.
    pub fn broadcast_on_stream<T: bytemuck::Pod>(
        &self,
        team: &Team,
        dest: &SymSlice<T>,
        src: &SymSlice<T>,
        nelems: usize,
        root: usize,
        stream: &CudaStream,
    ) -> Result<()> {
        let sizes = self.check_collective(Collective::Broadcast, team, dest, src, nelems)?;
        if root >= team.n_pes() {
            return Err(Error::BadPe { pe: root, n_pes: team.n_pes() });
        }
        self.collective_on(
            stream,
            "gpushmem_broadcast",
            sizes.grid_bytes,
            (team.handle(), dest.as_kernel_ptr(), src.as_kernel_ptr(), sizes.kernel_size, root as u32),
        )
    }

    /// All-gather: member `k`'s `nelems` of `src` land at `dest[k * nelems..]` on every member.
    /// Checked, ordered and completed as [`Shmem::allreduce_on_stream`] says.
    pub fn fcollect_on_stream<T: bytemuck::Pod>(
        &self,
        team: &Team,
        dest: &SymSlice<T>,
        src: &SymSlice<T>,
        nelems: usize,
        stream: &CudaStream,
    ) -> Result<()> {
        let sizes = self.check_collective(Collective::Fcollect, team, dest, src, nelems)?;
        self.collective_on(
            stream,
            "gpushmem_fcollect",
            sizes.grid_bytes,
            (team.handle(), dest.as_kernel_ptr(), src.as_kernel_ptr(), sizes.kernel_size),
        )
    }

    /// All-to-all: block `j` of member `i`'s `src` lands at block `i` of member `j`'s `dest` (blocks of `nelems`).
    /// Checked, ordered and completed as [`Shmem::allreduce_on_stream`] says.
    pub fn alltoall_on_stream<T: bytemuck::Pod>(
        &self,
        team: &Team,
        dest: &SymSlice<T>,
        src: &SymSlice<T>,
        nelems: usize,
        stream: &CudaStream,
    ) -> Result<()> {
        let sizes = self.check_collective(Collective::Alltoall, team, dest, src, nelems)?;
        self.collective_on(
            stream,
            "gpushmem_alltoall",
            sizes.grid_bytes,
            (team.handle(), dest.as_kernel_ptr(), src.as_kernel_ptr(), sizes.kernel_size),
        )
    }

    #[allow(clippy::too_many_arguments)] // the two public callers fix all but the data arguments
    fn reduce_like<T: ReduceType>(
        &self,
        which: Collective,
        kernel: &str,
        team: &Team,
        dest: &SymSlice<T>,
        src: &SymSlice<T>,
        n: usize,
        op: ReduceOp,
        stream: &CudaStream,
    ) -> Result<()> {
        let sizes = self.check_collective(which, team, dest, src, n)?;
        if op.is_bitwise() && !T::INTEGER {
            return Err(bad(which.call(), format!("{op:?} needs an integer type, not {}", T::NAME)));
        }
        let name = format!("{kernel}_{}", T::NAME);
        self.collective_on(
            stream,
            &name,
            sizes.grid_bytes,
            (team.handle(), dest.as_kernel_ptr(), src.as_kernel_ptr(), sizes.kernel_size, op),
        )
    }

    /// All-reduce: `dest[i] = op` over every member's `src[i]`, `i < n`, the same bits on every member.
    ///
    /// The rules of every `*_on_stream` collective:
    /// - Every member of `team` makes the same call, with the same counts
    ///   (`n`, `nelems`), `op` and `root`, in the same order on its
    ///   stream; PEs outside the team do not call. With debug checks on
    ///   (`GPUSHMEM_DEBUG_CHECKS=1`) the kernel compares each member's
    ///   arguments with the next member's and traps, naming both, where they
    ///   differ; without, they are not compared (as in NVSHMEM), and a
    ///   mismatch gives wrong results or a sync that times out.
    /// - Counts whose totals do not fit (`n × team size` elements, or their
    ///   bytes, `× size_of::<T>()`, past `usize`/`u64`) are an
    ///   [`Error::ArgumentOverflow`] naming the call and its arguments
    ///   ([`crate::args::Collective::sizes`]), and nothing is launched.
    /// - `dest` and `src` need at least the elements the call uses (here `n`
    ///   each; the first `n` are used, the rest untouched) and must not
    ///   overlap; otherwise, or when this PE is not in `team`, an
    ///   [`Error::Config`] naming the call, and nothing is launched.
    /// - It returns once the kernel is queued: this member's `dest` is
    ///   complete for work queued after it on `stream`; before reading it on
    ///   the host, wait for the stream (`shmem.synchronize()` when `stream` is
    ///   `shmem.stream()`, as `read` needs anyway).
    pub fn allreduce_on_stream<T: ReduceType>(
        &self,
        team: &Team,
        dest: &SymSlice<T>,
        src: &SymSlice<T>,
        n: usize,
        op: ReduceOp,
        stream: &CudaStream,
    ) -> Result<()> {
        self.reduce_like(Collective::Allreduce, "gpushmem_reduce", team, dest, src, n, op, stream)
    }

    /// Reduce-scatter: member `k` gets `dest[i] = op` over every member's `src[k * n + i]`, `i < n`.
    /// Checked, ordered and completed as [`Shmem::allreduce_on_stream`] says.
    pub fn reducescatter_on_stream<T: ReduceType>(
        &self,
        team: &Team,
        dest: &SymSlice<T>,
        src: &SymSlice<T>,
        n: usize,
        op: ReduceOp,
        stream: &CudaStream,
    ) -> Result<()> {
        self.reduce_like(Collective::Reducescatter, "gpushmem_reducescatter", team, dest, src, n, op, stream)
    }
}
