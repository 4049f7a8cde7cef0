//! [`Shmem`]: one PE's handle on the job — heap, peers, modules, launches.

use crate::args;
use crate::bootstrap::node::{census, Nodes};
use crate::bootstrap::socket::{SocketBootstrap, MAX_CONTRIBUTION};
use crate::bootstrap::{env::LaunchEnv, threads::ThreadsBootstrap, Bootstrap};
use crate::error::CudaContext as _;
use crate::heap::{Heap, SymSlice};
use crate::launch::{check_co_resident, co_resident_blocks, launch_on, KernelArgs};
use crate::module::{check_owner, Kernel, Module, Owner};
use crate::nvshmem::Runtime;
use crate::peer::PeerMap;
use crate::team::TeamTable;
use crate::{driver, Config, Engine, Error, Result};
use cudarc::driver::{CudaContext, CudaStream, LaunchConfig};
use gpushmem_kernels::abi::{State, FLAG_DEBUG_CHECKS, FLAG_ONE_GPU, STATE_VERSION};
use std::sync::Arc;

/// One PE: its GPU context and stream, its symmetric heap, the mapping of
/// every peer's heap, and the bootstrap to the other PEs.
///
/// Make one with [`Shmem::init`] (one process per PE) or through
/// [`crate::Threads`] (PEs as threads of one process). Calls documented as
/// *collective* must be made by every PE, in the same order, with the same
/// arguments; a mismatch is an [`Error::Mismatch`] on every PE.
pub struct Shmem {
    /// This `Shmem`'s process-wide unique id and PE: the modules it loads
    /// carry it, and only kernels that carry it may be launched through it.
    owner: Owner,
    config: Config,
    /// The built-in kernels of the stream-ordered operations.
    pub(crate) builtin: Module,
    /// The built-in collectives' launch shapes, worked out on first use.
    pub(crate) collective_shapes: crate::collective_ops::CollectiveShapes,
    device: usize,
    pes_on_device: usize,
    /// Which node each PE runs on (the census at init).
    nodes: Nodes,
    pub(crate) teams: TeamTable,
    // Drop order matters: peers (unmapped) before heap (freed) before the context.
    peers: PeerMap,
    pub(crate) heap: Heap,
    /// The NVSHMEM engine's runtime (after the heap, which lives in its memory,
    /// and before the context it runs on).
    pub(crate) nvshmem: Option<Arc<crate::nvshmem::Runtime>>,
    stream: Arc<CudaStream>,
    ctx: Arc<CudaContext>,
    bootstrap: Box<dyn Bootstrap>,
    finalized: bool,
}

impl Shmem {
    /// Joins the job this process was started in (collective): by
    /// `gpushmem-run`, `mpirun` or `srun` (see [`LaunchEnv`]), else as a
    /// job of one PE. Settings come from the environment ([`Config::from_env`]).
    pub fn init() -> Result<Shmem> {
        Self::init_with_config(Config::from_env()?)
    }

    /// [`Shmem::init`] with the given settings instead of the environment's.
    pub fn init_with_config(config: Config) -> Result<Shmem> {
        Self::join(config, None)
    }

    /// [`Shmem::init`] on a CUDA context and stream the program already has
    /// (one that candle or other cudarc code made), instead of making its own:
    /// the heap, the peers' mappings and gpushmem's kernels live in `ctx`, and
    /// [`Shmem::stream`] is `stream`, where [`Shmem::launch`], the heap copies
    /// and the `*_on_stream` operations are queued (so the program's own work
    /// on `stream` is ordered with them; [`SymSlice`] is a cudarc `DevicePtr`
    /// for its copies and launches).
    ///
    /// Requires: `stream` belongs to `ctx` and is not the legacy default
    /// stream (make one with `ctx.new_stream()`: PEs that share a GPU would
    /// wait on each other behind it); when the launcher names this PE's GPU
    /// (`GPUSHMEM_DEVICE`), `ctx` is on that GPU. Otherwise
    /// [`Error::Context`], on every PE (collective, like `init`). The context
    /// must stay current-able (cudarc binds it to the calling thread) and
    /// outlives nothing gpushmem needs: `Shmem` keeps its own `Arc`s.
    pub fn init_on(ctx: Arc<CudaContext>, stream: Arc<CudaStream>) -> Result<Shmem> {
        Self::init_on_with_config(ctx, stream, Config::from_env()?)
    }

    /// [`Shmem::init_on`] with the given settings instead of the environment's.
    pub fn init_on_with_config(ctx: Arc<CudaContext>, stream: Arc<CudaStream>, config: Config) -> Result<Shmem> {
        Self::join(config, Some(Gpu { ctx, stream }))
    }

    /// Joins the launcher's job (or a job of one PE) on `gpu`, else on a context of its own.
    fn join(config: Config, gpu: Option<Gpu>) -> Result<Shmem> {
        crate::logging::init();
        match LaunchEnv::from_env()? {
            Some(env) => {
                log::debug!("PE {}/{}: joining through {} at {}", env.rank, env.size, env.source, env.rendezvous);
                let boot = SocketBootstrap::connect(&env, config.bootstrap_timeout)?;
                Self::init_on_gpu(Box::new(boot), config, env.device, env.local_rank, gpu)
            }
            None => {
                let boot = ThreadsBootstrap::group(1, config.bootstrap_timeout).remove(0);
                Self::init_on_gpu(Box::new(boot), config, None, 0, gpu)
            }
        }
    }

    /// Sets up a PE over an existing bootstrap (collective), on the program's
    /// context and stream (`gpu`) if given, else on the primary context of
    /// `device` (default: `local_rank` modulo the number of GPUs). On an error
    /// this PE aborts the bootstrap, so the other PEs fail at once rather than
    /// at their timeout.
    pub(crate) fn init_on_gpu(
        bootstrap: Box<dyn Bootstrap>,
        config: Config,
        device: Option<usize>,
        local_rank: usize,
        gpu: Option<Gpu>,
    ) -> Result<Shmem> {
        let owner = Owner::new(bootstrap.rank());
        match Self::setup(owner, bootstrap.as_ref(), &config, device, local_rank, gpu) {
            Ok(p) => {
                let pes_on_device = p.peers.pes_on_device(bootstrap.rank());
                let s = Shmem {
                    owner,
                    config,
                    builtin: p.builtin,
                    collective_shapes: Default::default(),
                    device: p.device,
                    pes_on_device,
                    nodes: p.nodes,
                    teams: p.teams,
                    peers: p.peers,
                    heap: p.heap,
                    nvshmem: p.nvshmem,
                    stream: p.stream,
                    ctx: p.ctx,
                    bootstrap,
                    finalized: false,
                };
                log::debug!(
                    "PE {}/{}: device {}, heap {:#x}+{:#x}, {} PE(s) on this GPU",
                    s.my_pe(),
                    s.n_pes(),
                    s.device,
                    s.heap.base,
                    s.heap.size,
                    s.pes_on_device
                );
                Ok(s)
            }
            Err(e) => {
                bootstrap.abort(&format!("init failed: {e}"));
                Err(e)
            }
        }
    }

    /// Context, stream, heap, peers, teams and the built-in module, in that
    /// order; on an error what was made so far is released by its `Drop`.
    fn setup(
        owner: Owner,
        boot: &dyn Bootstrap,
        config: &Config,
        device: Option<usize>,
        local_rank: usize,
        gpu: Option<Gpu>,
    ) -> Result<Parts> {
        let me = boot.rank();
        args::job_size("init", boot.size())?;
        // A context or stream that cannot carry a PE fails every PE alike.
        let usable = gpu.as_ref().map_or(Ok(()), |g| g.check(device));
        // The device code's checks must be alike on every PE: the collectives'
        // argument comparison (debug checks) waits for every member's arguments.
        let checks = [("GPUSHMEM_DEBUG_CHECKS", config.debug_checks as u64)];
        agree_exchange(boot, "init", &checks, usable, &[])?;
        // Before any GPU work: a job the engine cannot run fails alike on every PE.
        let nodes = census(boot)?;
        if config.engine == Engine::Native {
            nodes.check_native()?;
        }
        let (ctx, stream, device) = match gpu {
            Some(Gpu { ctx, stream }) => {
                let device = ctx.ordinal();
                (ctx, stream, device)
            }
            None => {
                let n_dev = driver::device_count()?;
                let device = device.unwrap_or(local_rank % n_dev);
                if device >= n_dev {
                    return Err(Error::Config {
                        name: "GPUSHMEM_DEVICE".into(),
                        value: device.to_string(),
                        why: format!("this machine has {n_dev} GPU(s)"),
                    });
                }
                let ctx = CudaContext::new(device).cuda(format!("creating the context on device {device}"))?;
                let stream = ctx.new_stream().cuda("cuStreamCreate")?;
                (ctx, stream, device)
            }
        };
        let nvshmem = match config.engine {
            Engine::Native => None,
            Engine::Nvshmem => Some(Arc::new(Runtime::init(
                boot,
                &ctx,
                config.heap_size,
                nodes.count() == 1,
                config.bootstrap_timeout,
            )?)),
        };
        let heap = match &nvshmem {
            None => Heap::new(&ctx, config.heap_size, stream.cu_stream())?,
            Some(rt) => Heap::adopt(rt.heap_base(), config.heap_size, stream.cu_stream())?,
        };
        let peers = PeerMap::build(boot, &ctx, &stream, device, &heap, nvshmem.as_deref())?;
        let engine_world = if nvshmem.is_some() { 0 } else { gpushmem_kernels::abi::ENGINE_TEAM_INVALID };
        let teams = TeamTable::new(&ctx, &stream, me, boot.size(), engine_world)?;
        // Before the barrier: module loading waits for running kernels (see `load_module`).
        let state = make_state(boot, config, &heap, &peers, &teams);
        let builtin = Module::load(
            owner,
            &ctx,
            &stream,
            "gpushmem-builtin",
            BUILTIN_PTX,
            Some(BUILTIN_CUBIN),
            &state,
            nvshmem.as_ref(),
        )?;
        boot.barrier()?;
        log::trace!("PE {me}: init complete");
        Ok(Parts { ctx, stream, heap, nvshmem, peers, teams, device, builtin, nodes })
    }

    /// This PE's number (`nvshmem_my_pe`).
    pub fn my_pe(&self) -> usize {
        self.bootstrap.rank()
    }

    /// Number of PEs (`nvshmem_n_pes`).
    pub fn n_pes(&self) -> usize {
        self.bootstrap.size()
    }

    /// The GPU ordinal this PE runs on.
    pub fn device(&self) -> usize {
        self.device
    }

    /// The settings this PE runs with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// This PE's CUDA context (cudarc), for allocations and copies of ordinary device memory.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// This PE's stream: [`Shmem::launch`] and the heap copies run on it.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// The bootstrap (out-of-band exchange with the other PEs).
    pub fn bootstrap(&self) -> &dyn Bootstrap {
        self.bootstrap.as_ref()
    }

    /// The device state this PE installs into every module it loads.
    pub fn device_state(&self) -> State {
        make_state(self.bootstrap.as_ref(), &self.config, &self.heap, &self.peers, &self.teams)
    }

    /// This `Shmem`'s identity, which the modules it loads carry.
    pub(crate) fn owner(&self) -> Owner {
        self.owner
    }

    /// Number of PEs that share this PE's GPU (collective launches split it among them).
    /// How many PEs of the job share this PE's GPU, itself included (they
    /// split its SMs and its memory bandwidth; see
    /// [`Shmem::collective_launch_query_gridsize`]). The same on every PE of a GPU.
    pub fn pes_on_device(&self) -> usize {
        self.pes_on_device
    }

    /// Fails unless `pe` is a PE of this job.
    pub(crate) fn check_pe(&self, pe: usize) -> Result<()> {
        if pe < self.n_pes() {
            Ok(())
        } else {
            Err(Error::BadPe { pe, n_pes: self.n_pes() })
        }
    }

    /// Where PE `pe` has the symmetric object `s`, as an address this PE's GPU
    /// can use (`nvshmem_ptr` on the host): in kernels, and in `cuMemcpy*`
    /// calls (with unified addressing a copy to it is a peer copy when `pe`
    /// is on another GPU). Same process: the peer's heap through peer access;
    /// other processes: the CUDA IPC mapping made at init. No ordering is
    /// implied: accesses through it are plain loads, stores and copies.
    ///
    /// # Errors
    /// [`Error::BadPe`] for a PE outside the job; an error naming the range
    /// when `s` is not in this PE's heap (e.g. freed, or from another job).
    pub fn ptr<T>(&self, s: &SymSlice<T>, pe: usize) -> Result<u64> {
        self.peer_address(s.as_kernel_ptr(), s.byte_len(), pe)
    }

    /// Checks that `[addr, addr + len)` is in this PE's heap and returns where PE `pe` has it.
    pub(crate) fn peer_address(&self, addr: u64, len: u64, pe: usize) -> Result<u64> {
        self.check_pe(pe)?;
        self.heap.check_range(addr, len)?;
        self.check_reach(pe)?;
        Ok(self.peers.bases[pe] + (addr - self.heap.base))
    }

    /// [`Error::Engine`] unless this PE's loads and stores reach `pe`'s heap:
    /// on the NVSHMEM engine a PE of another node is reached only through
    /// NVSHMEM's device calls, never by the host's stream-ordered operations.
    fn check_reach(&self, pe: usize) -> Result<()> {
        if self.peers.bases[pe] != 0 {
            return Ok(());
        }
        let node = self.nodes.names.get(self.nodes.of_pe[pe]).map_or("?", String::as_str);
        Err(Error::Engine {
            why: format!(
                "PE {pe} is on another node ({node}; this job spans {} nodes): the stream-ordered operations \
                 reach peers by loads and stores, on one node only; across nodes use the device API in your \
                 kernels (NVSHMEM's transports carry it)",
                self.nodes.count()
            ),
        })
    }

    /// [`Shmem::check_reach`] for every PE: for the stream-ordered operations
    /// that touch every PE's heap (barrier, collectives).
    pub(crate) fn check_reach_all(&self) -> Result<()> {
        (0..self.n_pes()).try_for_each(|pe| self.check_reach(pe))
    }

    /// Which node each PE runs on, as the census at init found it (host name
    /// and boot id). The native engine runs only jobs of one node.
    pub fn nodes(&self) -> &Nodes {
        &self.nodes
    }

    /// Each PE's heap base in this PE's address space (index = PE).
    pub fn peer_heap_bases(&self) -> &[u64] {
        &self.peers.bases
    }

    /// Checks that every PE made the same collective call with the same arguments.
    pub(crate) fn agree(&self, call: &'static str, args: &[(&str, u64)]) -> Result<()> {
        self.agree_checked(call, args, Ok(()))
    }

    /// [`Shmem::agree`] for a call whose arguments each PE also checks locally
    /// (`local`): the verdicts travel with the arguments, so when any PE
    /// rejects its arguments every PE fails — the rejecting PE with its own
    /// error, the others naming it — and no PE is left waiting in the exchange.
    pub(crate) fn agree_checked(&self, call: &'static str, args: &[(&str, u64)], local: Result<()>) -> Result<()> {
        agree_exchange(self.bootstrap.as_ref(), call, args, local, &[]).map(|_| ())
    }
    fn alloc_raw<T>(&self, call: &'static str, op: u64, len: usize, align: u64) -> Result<SymSlice<T>> {
        // An overflowing size is this PE's verdict in the exchange: every PE fails, none waits.
        let (bytes, local) = match args::alloc_bytes(call, len, std::mem::size_of::<T>()) {
            Ok(b) => (b, Ok(())),
            Err(e) => (u64::MAX, Err(e)),
        };
        self.agree_checked(call, &[("kind", op), ("size in bytes", bytes), ("alignment", align)], local)?;
        let off = self.heap.alloc.lock().unwrap_or_else(|p| p.into_inner()).alloc(bytes, align)?;
        Ok(SymSlice::new(off, len, self.heap.base, self.stream.clone()))
    }

    /// Collective: `len` elements of `T` in the symmetric heap, at the same
    /// offset on every PE (`nvshmem_malloc`); contents undefined. Every PE
    /// checks that all asked for the same size.
    ///
    /// # Errors
    /// [`Error::ArgumentOverflow`] when `len × size_of::<T>()` does not fit a
    /// 64-bit byte count ([`crate::args::alloc_bytes`]), on every PE (the others
    /// name the PE that rejected it); [`Error::Mismatch`] when PEs ask for
    /// different sizes; [`Error::HeapExhausted`] when no free range is large enough.
    pub fn malloc<T: bytemuck::Pod>(&self, len: usize) -> Result<SymSlice<T>> {
        self.alloc_raw("malloc", 1, len, std::mem::align_of::<T>() as u64)
    }

    /// Collective: as [`Shmem::malloc`], aligned to `align` bytes (a power of two; `nvshmem_align`).
    /// Errors as [`Shmem::malloc`], and [`Error::Config`] for an `align` that is not a power of two.
    pub fn align<T: bytemuck::Pod>(&self, align: usize, len: usize) -> Result<SymSlice<T>> {
        self.alloc_raw("align", 2, len, align.max(std::mem::align_of::<T>()) as u64)
    }

    /// Collective: as [`Shmem::malloc`], zeroed on every PE before any PE returns (`nvshmem_calloc`).
    /// Errors as [`Shmem::malloc`].
    pub fn calloc<T: bytemuck::Pod>(&self, len: usize) -> Result<SymSlice<T>> {
        let s = self.alloc_raw("calloc", 3, len, std::mem::align_of::<T>() as u64)?;
        self.ctx.bind_to_thread().cuda("cuCtxSetCurrent")?;
        // SAFETY: a fresh allocation in this PE's heap.
        unsafe { driver::zero(self.stream.cu_stream(), s.as_kernel_ptr(), s.byte_len()) }?;
        self.bootstrap.barrier()?;
        Ok(s)
    }

    /// Collective: frees `s` on every PE (`nvshmem_free`). Errors: a slice
    /// of another heap, a double free, PEs freeing different allocations.
    pub fn free<T>(&self, s: SymSlice<T>) -> Result<()> {
        self.heap.check_slice(&s)?;
        self.agree("free", &[("kind", 4), ("heap offset", s.offset())])?;
        self.heap.alloc.lock().unwrap_or_else(|p| p.into_inner()).free(s.offset())
    }

    /// Frees the allocation at device address `ptr` of this heap (collective);
    /// for pointers that came back from device code.
    pub fn free_ptr(&self, ptr: u64) -> Result<()> {
        self.heap.check_range(ptr, 1)?;
        let off = ptr - self.heap.base;
        self.agree("free", &[("kind", 4), ("heap offset", off)])?;
        self.heap.alloc.lock().unwrap_or_else(|p| p.into_inner()).free(off)
    }

    /// Copies `data` into this PE's copy of `s` (blocking; `data.len()` must equal `s.len()`).
    pub fn write<T: bytemuck::Pod>(&self, s: &SymSlice<T>, data: &[T]) -> Result<()> {
        check_len("write", s.len(), data.len())?;
        self.write_at(s, 0, data)
    }

    /// Copies `data` into elements `start..start + data.len()` of this PE's copy of `s` (blocking).
    ///
    /// # Errors
    /// [`Error::ArgumentOverflow`] when `start + data.len()` or the byte
    /// offset of `start` overflows; [`Error::Config`] when the range is not
    /// inside `s` ([`crate::args::element_range`]); [`Error::NotSymmetric`]
    /// for a slice of another heap.
    pub fn write_at<T: bytemuck::Pod>(&self, s: &SymSlice<T>, start: usize, data: &[T]) -> Result<()> {
        let addr = self.element_range("write_at", s, start, data.len())?;
        // SAFETY: the range was checked to be inside this PE's heap.
        unsafe { driver::copy_htod(self.stream.cu_stream(), addr, data) }
    }

    /// Copies this PE's copy of `s` to the host (blocking).
    pub fn read<T: bytemuck::Pod>(&self, s: &SymSlice<T>) -> Result<Vec<T>> {
        self.read_at(s, 0, s.len())
    }

    /// Copies elements `start..start + len` of this PE's copy of `s` to the host (blocking).
    /// Errors as [`Shmem::write_at`].
    pub fn read_at<T: bytemuck::Pod>(&self, s: &SymSlice<T>, start: usize, len: usize) -> Result<Vec<T>> {
        let addr = self.element_range("read_at", s, start, len)?;
        let mut out = vec![T::zeroed(); len];
        // SAFETY: as in `write_at`.
        unsafe { driver::copy_dtoh(self.stream.cu_stream(), &mut out, addr) }?;
        Ok(out)
    }

    /// Checks that `s` is of this heap and `start..start + len` within it; binds the context; returns the address.
    fn element_range<T>(&self, call: &'static str, s: &SymSlice<T>, start: usize, len: usize) -> Result<u64> {
        let at = args::element_range(call, s.len(), std::mem::size_of::<T>(), start, len)?;
        self.heap.check_slice(s)?;
        self.ctx.bind_to_thread().cuda("cuCtxSetCurrent")?;
        Ok(s.as_kernel_ptr() + at)
    }

    /// Collective: loads a PTX module and installs this PE's device state
    /// into it; returns once every PE has loaded it.
    ///
    /// Collective because loading a module waits for kernels running in the
    /// same context: with PEs as threads on one GPU, a PE still loading while
    /// another's kernel already waits for it in a barrier would deadlock.
    pub fn load_module(&self, name: &str, ptx: &str) -> Result<Module> {
        self.load_module_prebuilt(name, ptx, &[])
    }

    /// Collective: [`Shmem::load_module`] that loads `cubin` (the
    /// `GPUSHMEM_CUBIN_<CRATE>` file gpushmem-build writes) when it is
    /// non-empty and built for this GPU, skipping the driver's PTX JIT
    /// (seconds for a large module, in every fresh process); otherwise the PTX.
    /// Kernel names are read from `ptx`.
    pub fn load_module_prebuilt(&self, name: &str, ptx: &str, cubin: &[u8]) -> Result<Module> {
        let state = self.device_state();
        let m =
            Module::load(self.owner, &self.ctx, &self.stream, name, ptx, Some(cubin), &state, self.nvshmem.as_ref());
        // Arrive even on failure, so the others are not left waiting for this PE.
        let arrived = self.bootstrap.barrier();
        let m = m?;
        arrived?;
        Ok(m)
    }

    /// Launches `k` on this PE's stream (asynchronous; see [`Shmem::synchronize`]).
    ///
    /// # Errors
    /// [`Error::Launch`] when `k` was loaded by another `Shmem` (another PE
    /// of a job whose PEs are threads, or another job): its module holds
    /// that PE's device state, so it would run as that PE.
    ///
    /// # Safety
    /// `args` match the kernel's parameters; pointers in them are valid for what the kernel does.
    pub unsafe fn launch(&self, k: &Kernel, cfg: LaunchConfig, args: impl KernelArgs) -> Result<()> {
        // SAFETY: the caller's guarantees are those `launch_on_stream` needs.
        unsafe { self.launch_on_stream(k, cfg, args, &self.stream) }
    }

    /// Launches `k` on `stream` (a stream of this PE's context). Errors as [`Shmem::launch`].
    ///
    /// # Safety
    /// As [`Shmem::launch`].
    pub unsafe fn launch_on_stream(
        &self,
        k: &Kernel,
        cfg: LaunchConfig,
        args: impl KernelArgs,
        stream: &CudaStream,
    ) -> Result<()> {
        check_owner(&k.name, k.owner, self.owner)?;
        self.ctx.bind_to_thread().cuda("cuCtxSetCurrent")?;
        // SAFETY: the caller guarantees that `args` match the kernel's parameters.
        unsafe { launch_on(self.owner, stream.cu_stream(), k, cfg, &args) }
    }

    /// The largest grid (blocks) a [`Shmem::launch_collective`] of `k` with
    /// blocks of `block_threads` threads and `shared_mem_bytes` of dynamic
    /// shared memory may use on this PE (`nvshmemx_collective_launch_query_gridsize`):
    /// the blocks the GPU holds at once, split evenly among the PEs that share
    /// it, so every PE's grid is co-resident. The same answer on every PE of a
    /// GPU; not collective. Fails with [`Error::Launch`] when one such block
    /// does not fit on an SM (too many threads, registers or shared memory).
    pub fn collective_launch_query_gridsize(
        &self,
        k: &Kernel,
        block_threads: u32,
        shared_mem_bytes: u32,
    ) -> Result<u32> {
        check_owner(&k.name, k.owner, self.owner)?;
        let (fits, _, _) = co_resident_blocks(&self.ctx, k, block_threads, shared_mem_bytes, self.pes_on_device)?;
        Ok(fits.min(u32::MAX as u64) as u32)
    }

    /// Launches a kernel that synchronizes with other blocks or PEs (barriers,
    /// waits) on this PE's stream ([`Shmem::stream`], as [`Shmem::launch`];
    /// asynchronous, so work queued after it on that stream, such as an
    /// `*_on_stream` collective, runs after it): first checks that the whole grid can be resident at once, with
    /// the GPU split among the PEs that share it, and fails with
    /// [`Error::Launch`] if not (such a kernel would otherwise hang), or if
    /// `k` was loaded by another `Shmem` (as [`Shmem::launch`]); a
    /// `block_dim` whose threads overflow `u32` (or a grid whose blocks
    /// overflow `u64`) is an [`Error::ArgumentOverflow`] ([`crate::args::launch_shape`]).
    ///
    /// # Safety
    /// As [`Shmem::launch`]; every PE launches its part.
    pub unsafe fn launch_collective(&self, k: &Kernel, cfg: LaunchConfig, args: impl KernelArgs) -> Result<()> {
        check_owner(&k.name, k.owner, self.owner)?;
        check_co_resident(&self.ctx, k, &cfg, self.pes_on_device)?;
        // SAFETY: the caller's guarantees are those `launch` needs.
        unsafe { self.launch(k, cfg, args) }
    }

    /// Waits for this PE's stream. A kernel that trapped (a failed device
    /// check or a timed-out wait, whose message was printed) shows here as
    /// `CUDA_ERROR_LAUNCH_FAILED`, and the context stays unusable.
    pub fn synchronize(&self) -> Result<()> {
        self.stream.synchronize().map_err(|source| Error::Cuda {
            call: format!("PE {}: waiting for its stream (a device-side message above may say why)", self.my_pe()),
            source,
        })
    }

    /// Host barrier: waits for this PE's stream, then for every PE to arrive (collective).
    /// A PE that is in another collective call (say `malloc`) makes every PE fail with
    /// [`Error::Mismatch`] naming each PE's call.
    pub fn barrier_all(&self) -> Result<()> {
        self.synchronize()?;
        self.agree("barrier_all", &[])
    }

    /// Largest value (`size_of::<T>()`, in bytes) that
    /// [`Shmem::allgather_host`] carries between processes: the socket
    /// bootstrap's per-PE [`MAX_CONTRIBUTION`] less the 24 bytes that travel
    /// with the value so that every PE can check the call (a verdict, the
    /// call's name and the value's size). 16 MiB − 24 = 16 777 192 bytes.
    pub const MAX_HOST_VALUE: usize = MAX_CONTRIBUTION - agree_overhead(ALLGATHER_HOST, 1);

    /// Collective, host only: every PE's `value`, in PE order (PE `i`'s at
    /// index `i`); for gathering small per-PE results (a time, a verdict) on
    /// the host. It goes over the bootstrap, not the GPU: it neither waits
    /// for nor orders anything on the streams. `T` is any [`bytemuck::Pod`]
    /// value (a number, an array, a `#[repr(C)]` struct deriving `Pod`; see
    /// [`crate::bytemuck`]); gather a pair as a `[u64; 2]` or such a struct.
    ///
    /// Checked like every collective call: a PE in another collective call
    /// (say `malloc`), or gathering a type of another size, makes every PE
    /// fail with [`Error::Mismatch`]. Between processes a value is at most
    /// [`Shmem::MAX_HOST_VALUE`] bytes (16 MiB less 24): a larger one is
    /// [`Error::Config`] on that PE and [`Error::PeerFailed`] on the others.
    pub fn allgather_host<T: bytemuck::Pod>(&self, value: T) -> Result<Vec<T>> {
        allgather_values(self.bootstrap.as_ref(), value)
    }

    /// Collective, host only: PE `root`'s `value` on every PE (the other PEs'
    /// `value` is ignored). Over the bootstrap, like [`Shmem::allgather_host`],
    /// and checked the same way: a PE in another collective call, or with
    /// another `root` or size of `T`, makes every PE fail with
    /// [`Error::Mismatch`]; a `root` outside the job is an [`Error::BadPe`].
    pub fn broadcast_host<T: bytemuck::Pod>(&self, value: T, root: usize) -> Result<T> {
        broadcast_value(self.bootstrap.as_ref(), value, root)
    }

    /// Collective: waits for every PE's work, unmaps the peers' heaps and
    /// frees this PE's (`nvshmem_finalize`). Dropping a `Shmem` does the same
    /// but can only log errors.
    pub fn finalize(mut self) -> Result<()> {
        self.finalized = true;
        self.barrier_all()
    }
}

/// What `setup` makes.
/// The program's own context and stream, for [`Shmem::init_on`].
pub(crate) struct Gpu {
    pub(crate) ctx: Arc<CudaContext>,
    pub(crate) stream: Arc<CudaStream>,
}

impl Gpu {
    /// Whether this context and stream can carry a PE (`device`: the GPU the launcher names).
    fn check(&self, device: Option<usize>) -> Result<()> {
        let why = if !Arc::ptr_eq(self.stream.context(), &self.ctx) {
            format!(
                "the stream belongs to another context (device {}) than the one given (device {})",
                self.stream.context().ordinal(),
                self.ctx.ordinal()
            )
        } else if self.stream.cu_stream().is_null() {
            "the stream is the legacy default stream (ctx.default_stream()): pass a stream of its own, \
             ctx.new_stream(), since PEs that share a GPU would wait on each other behind it"
                .to_string()
        } else if let Some(d) = device.filter(|&d| d != self.ctx.ordinal()) {
            format!(
                "the context is on device {}, but the launcher gives this PE device {d} (GPUSHMEM_DEVICE)",
                self.ctx.ordinal()
            )
        } else {
            return Ok(());
        };
        Err(Error::Context { why })
    }
}

struct Parts {
    builtin: Module,
    teams: TeamTable,
    peers: PeerMap,
    heap: Heap,
    nvshmem: Option<Arc<Runtime>>,
    stream: Arc<CudaStream>,
    ctx: Arc<CudaContext>,
    device: usize,
    nodes: Nodes,
}

/// The built-in kernels' PTX (host/builtin, built by host/build.rs); public for tools that check PTX.
pub const BUILTIN_PTX: &str = include_str!(env!("GPUSHMEM_PTX_GPUSHMEM_BUILTIN_KERNELS"));

/// The built-in kernels assembled for the build's GPU architecture (empty without ptxas at build time,
/// when [`BUILTIN_PTX`] is JIT-compiled instead); public for tools that measure what loading them costs.
pub const BUILTIN_CUBIN: &[u8] = include_bytes!(env!("GPUSHMEM_CUBIN_GPUSHMEM_BUILTIN_KERNELS"));

fn make_state(boot: &dyn Bootstrap, config: &Config, heap: &Heap, peers: &PeerMap, teams: &TeamTable) -> State {
    State {
        version: STATE_VERSION,
        size: std::mem::size_of::<State>() as u32,
        my_pe: boot.rank() as u32,
        n_pes: boot.size() as u32,
        heap_base: heap.base,
        heap_size: heap.size,
        peer_bases: peers.table.as_ref().map_or(0, |t| t.ptr),
        flags: if config.debug_checks { FLAG_DEBUG_CHECKS } else { 0 } | if peers.one_gpu() { FLAG_ONE_GPU } else { 0 },
        reserved0: 0,
        timeout_ns: config.device_timeout.map_or(0, |d| d.as_nanos().min(u64::MAX as u128) as u64),
        teams: teams.table.ptr,
        reserved: [0; 3],
    }
}

/// Bytes [`agree_exchange`] sends before the payload of `call` with `n_args`
/// arguments: a verdict, the name's length, the name (at most 255 bytes) and
/// 8 bytes per argument.
pub(crate) const fn agree_overhead(call: &str, n_args: usize) -> usize {
    let name = if call.len() < 255 { call.len() } else { 255 };
    2 + name + 8 * n_args
}

/// The collective call's name [`Shmem::allgather_host`] sends (with one
/// argument, the value's size: see [`Shmem::MAX_HOST_VALUE`]).
const ALLGATHER_HOST: &str = "allgather_host";

/// [`Shmem::agree_checked`] over `boot`, that also exchanges `payload`: once
/// every PE is known to be in the same collective call with the same
/// arguments, returns every PE's payload in PE order.
pub(crate) fn agree_exchange(
    boot: &dyn Bootstrap,
    call: &'static str,
    args: &[(&str, u64)],
    local: Result<()>,
    payload: &[u8],
) -> Result<Vec<Vec<u8>>> {
    let me = boot.rank();
    // [verdict][name length][name][args][payload]: the name catches PEs that are
    // in different collective calls (one in malloc, another in barrier_all).
    let mut mine: Vec<u8> = Vec::with_capacity(agree_overhead(call, args.len()) + payload.len());
    mine.extend([local.is_ok() as u8, call.len().min(255) as u8]);
    mine.extend(&call.as_bytes()[..call.len().min(255)]);
    let head = mine.len();
    mine.extend(args.iter().flat_map(|a| a.1.to_le_bytes()));
    let tail = head + 8 * args.len();
    debug_assert_eq!(tail, agree_overhead(call, args.len()));
    mine.extend(payload);
    let all = boot.allgather(&mine)?;
    let name_of = |b: &[u8]| -> String {
        let len = b.get(1).copied().unwrap_or(0) as usize;
        String::from_utf8_lossy(b.get(2..2 + len).unwrap_or(b"?")).into_owned()
    };
    if all.iter().any(|b| name_of(b) != call) {
        let calls: Vec<String> = all.iter().enumerate().map(|(pe, b)| format!("PE {pe}: {}", name_of(b))).collect();
        return Err(Error::Mismatch {
            me,
            call,
            detail: format!(
                "PEs are in different collective calls ({}); every PE must make the same collective calls in the same order",
                calls.join(", ")
            ),
        });
    }
    local?;
    if let Some(pe) = all.iter().position(|b| b.first() != Some(&1)) {
        return Err(Error::Mismatch {
            me,
            call,
            detail: format!("PE {pe} rejected its arguments (its own error says why)"),
        });
    }
    let values = |b: &[u8]| -> Vec<u64> {
        b.get(head..tail.min(b.len()))
            .unwrap_or_default()
            .chunks(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
            .collect()
    };
    let payloads: Vec<Vec<u8>> = all.iter().map(|b| b.get(tail..).unwrap_or_default().to_vec()).collect();
    let all: Vec<Vec<u64>> = all.iter().map(|b| values(b)).collect();
    // Name each argument that differs, with every PE's value of it.
    let differ: Vec<String> = args
        .iter()
        .enumerate()
        .filter(|&(i, _)| all.iter().any(|v| v.get(i) != all[0].get(i)))
        .map(|(i, (name, _))| {
            let per_pe: Vec<String> = all
                .iter()
                .enumerate()
                .map(|(pe, v)| format!("PE {pe}: {}", v.get(i).map_or("?".into(), |x| x.to_string())))
                .collect();
            format!("`{name}` differs ({})", per_pe.join(", "))
        })
        .collect();
    if !differ.is_empty() {
        return Err(Error::Mismatch { me, call, detail: differ.join("; ") });
    }
    Ok(payloads)
}

/// PE `pe`'s contribution to a host collective of `call` as a `T`.
fn value_from<T: bytemuck::Pod>(me: usize, call: &'static str, pe: usize, bytes: &[u8]) -> Result<T> {
    bytemuck::try_pod_read_unaligned(bytes).map_err(|_| Error::Mismatch {
        me,
        call,
        detail: format!("PE {pe} sent {} bytes, a value is {}", bytes.len(), std::mem::size_of::<T>()),
    })
}

/// [`Shmem::allgather_host`] over `boot`.
pub(crate) fn allgather_values<T: bytemuck::Pod>(boot: &dyn Bootstrap, value: T) -> Result<Vec<T>> {
    let call = ALLGATHER_HOST;
    let size = std::mem::size_of::<T>() as u64;
    let all = agree_exchange(boot, call, &[("value size in bytes", size)], Ok(()), bytemuck::bytes_of(&value))?;
    all.iter().enumerate().map(|(pe, b)| value_from(boot.rank(), call, pe, b)).collect()
}

/// [`Shmem::broadcast_host`] over `boot`: only `root` sends its value.
pub(crate) fn broadcast_value<T: bytemuck::Pod>(boot: &dyn Bootstrap, value: T, root: usize) -> Result<T> {
    let call = "broadcast_host";
    let size = std::mem::size_of::<T>() as u64;
    let n_pes = boot.size();
    let local = if root < n_pes { Ok(()) } else { Err(Error::BadPe { pe: root, n_pes }) };
    let mine: &[u8] = if boot.rank() == root { bytemuck::bytes_of(&value) } else { &[] };
    let all = agree_exchange(boot, call, &[("value size in bytes", size), ("root", root as u64)], local, mine)?;
    value_from(boot.rank(), call, root, &all[root])
}

/// Fails unless a host slice has as many elements as the symmetric slice.
pub(crate) fn check_len(call: &'static str, want: usize, got: usize) -> Result<()> {
    if want != got {
        return Err(Error::Config {
            name: call.into(),
            value: got.to_string(),
            why: format!("host slice has {got} elements, the symmetric slice {want}"),
        });
    }
    Ok(())
}

impl Drop for Shmem {
    fn drop(&mut self) {
        if !self.finalized {
            // Peers may still read our heap: wait for them, bounded by the bootstrap timeout.
            if let Err(e) = self.barrier_all() {
                log::warn!("PE {}: finalize on drop: {e}", self.my_pe());
            }
        }
        // Then the fields drop in declaration order: the built-in module, the
        // team table, the peer mappings, the heap (freed), the stream, the context.
    }
}

#[cfg(test)]
mod tests {
    use super::{agree_exchange, allgather_values, broadcast_value};
    use crate::bootstrap::{threads::ThreadsBootstrap, Bootstrap};
    use crate::{Error, Result};
    use std::time::Duration;

    /// Runs `f` on `n` PEs (threads over an in-memory bootstrap); results in PE order.
    fn on_pes<R: Send>(n: usize, f: impl Fn(&dyn Bootstrap) -> R + Sync) -> Vec<R> {
        let group = ThreadsBootstrap::group(n, Duration::from_secs(10));
        std::thread::scope(|s| {
            let hs: Vec<_> = group.iter().map(|b| s.spawn(|| f(b))).collect();
            hs.into_iter().map(|h| h.join().expect("PE thread panicked")).collect()
        })
    }

    fn mismatch(r: &Result<impl std::fmt::Debug>, needle: &str) -> bool {
        matches!(r, Err(Error::Mismatch { detail, .. }) if detail.contains(needle))
    }

    #[test]
    fn allgather_host_gathers_in_pe_order() {
        let got = on_pes(3, |b| allgather_values(b, (b.rank() as u64 + 1) * 10));
        for r in got {
            assert_eq!(r.unwrap(), [10, 20, 30]);
        }
        let got = on_pes(2, |b| allgather_values(b, [b.rank() as f32, 0.5]));
        for r in got {
            assert_eq!(r.unwrap(), [[0.0, 0.5], [1.0, 0.5]]);
        }
    }

    #[test]
    fn broadcast_host_takes_roots_value() {
        let got = on_pes(3, |b| broadcast_value(b, 100 + b.rank() as u32, 2));
        for r in got {
            assert_eq!(r.unwrap(), 102);
        }
    }

    #[test]
    fn host_collectives_check_the_call() {
        // PE 0 gathers while PE 1 broadcasts: both fail, naming each PE's call.
        let got = on_pes(2, |b| {
            if b.rank() == 0 {
                allgather_values(b, 1u64).map(|_| ())
            } else {
                broadcast_value(b, 1u64, 0).map(|_| ())
            }
        });
        for r in &got {
            assert!(mismatch(r, "PE 0: allgather_host, PE 1: broadcast_host"), "{r:?}");
        }
        // Different value sizes.
        let got = on_pes(2, |b| {
            if b.rank() == 0 {
                allgather_values(b, 1u64).map(|_| ())
            } else {
                allgather_values(b, 1u32).map(|_| ())
            }
        });
        for r in &got {
            assert!(mismatch(r, "`value size in bytes` differs (PE 0: 8, PE 1: 4)"), "{r:?}");
        }
        // Different roots.
        let got = on_pes(2, |b| broadcast_value(b, 7u16, b.rank()));
        for r in &got {
            assert!(mismatch(r, "`root` differs (PE 0: 0, PE 1: 1)"), "{r:?}");
        }
        // A root outside the job: every PE rejects it itself.
        let got = on_pes(2, |b| broadcast_value(b, 7u16, 5));
        for r in &got {
            assert!(matches!(r, Err(Error::BadPe { pe: 5, n_pes: 2 })), "{r:?}");
        }
    }

    #[test]
    fn agree_exchange_names_the_rejecting_pe() {
        let got = on_pes(2, |b| {
            let local = if b.rank() == 1 { Err(Error::BadPe { pe: 9, n_pes: 2 }) } else { Ok(()) };
            agree_exchange(b, "test_call", &[("x", 1)], local, b"payload")
        });
        assert!(mismatch(&got[0], "PE 1 rejected its arguments"), "{:?}", got[0]);
        assert!(matches!(got[1], Err(Error::BadPe { pe: 9, .. })), "{:?}", got[1]);
        let got = on_pes(2, |b| agree_exchange(b, "test_call", &[("x", 1)], Ok(()), &[b.rank() as u8; 3]));
        for r in got {
            assert_eq!(r.unwrap(), [vec![0u8; 3], vec![1u8; 3]]);
        }
    }
}
