//! Memory-model litmus tests (kernels: tests/kernels/src/litmus.rs).
//!
//! Each test runs at least 2^20 instances (instance × round; quick mode, see
//! `common::scaled`: 1/100 of the instances, the same rounds) with random
//! placement: every launch draws, from the run's seed, which PEs pair up,
//! which 32-byte cells of the buffer each instance uses and which threads
//! run it. Every test asserts zero violations of what OpenSHMEM and our
//! docs (kernels/src/sync.rs, signal.rs, atomic.rs; docs/guide.md §2)
//! guarantee, then runs once more with the ordering call removed and
//! reports the violations seen: non-zero shows that the test can see a
//! reordering; zero means this hardware did not reorder there (not a failure).
//!
//! PEs as threads share the GPU and run at the same time. PEs as processes on
//! one GPU only time-slice (a round trip costs milliseconds): the tests keep
//! to one-way instances there (writers never wait for readers), the
//! store-buffering sides do not run in lock-step, and the get test runs
//! fewer, wider rounds. Whether the kernels of two PEs ever overlap then
//! depends on the scheduler, so a run there mostly checks the final values.

use crate::common::*;
use gpushmem::{Kernel, KernelArgs, LaunchConfig, Shmem, SymSlice};
use litmus_ops::*;
use std::time::Instant;

// The cell size, the shapes and the task layout: the kernel crate's very file.
#[path = "../kernels/src/litmus_ops.rs"]
mod litmus_ops;

/// splitmix64: a reproducible stream of random numbers.
pub struct Rng(u64);

impl Rng {
    /// Stream `stream` of seed `seed`.
    pub fn new(seed: u64, stream: u64) -> Rng {
        Rng(seed ^ stream.wrapping_mul(0xD1B5_4A32_D192_ED03))
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            v.swap(i, self.below(i + 1));
        }
    }
}

/// PEs of every litmus test (so that instances pair PEs at random).
const PES: usize = 4;
const HEAP: u64 = 48 << 20;
/// Threads per block of the many-block kernels.
const BLOCK: u32 = 256;

/// Whether some PEs of this job are processes sharing one GPU (then their
/// kernels time-slice rather than run together). The same answer on every PE.
fn time_sliced(shmem: &Shmem) -> gpushmem::Result<bool> {
    if std::env::var_os(IN_JOB).is_none() {
        return Ok(false);
    }
    let all = shmem.bootstrap().allgather(&(shmem.device() as u64).to_le_bytes())?;
    let mut devices: Vec<&Vec<u8>> = all.iter().collect();
    devices.sort();
    devices.dedup();
    Ok(devices.len() < all.len())
}

/// One instance: PEs `a` ≠ `b`, `c` ≠ `a` (may be `b`), two cells, variant bits.
#[derive(Clone, Copy)]
struct Inst {
    a: usize,
    b: usize,
    c: usize,
    cell_a: u64,
    cell_b: u64,
    var: u64,
}

/// Cells in a buffer for `count` instances (two each, the rest left as gaps).
fn cells(count: usize) -> usize {
    4 * count
}

/// `count` instances drawn from stream `stream` of the run's seed.
fn place(stream: u64, count: usize) -> Vec<Inst> {
    let mut rng = Rng::new(seed(), stream);
    let mut free: Vec<u32> = (0..cells(count) as u32).collect();
    rng.shuffle(&mut free);
    (0..count)
        .map(|i| {
            let a = rng.below(PES);
            let b = (a + 1 + rng.below(PES - 1)) % PES;
            let c = (a + 1 + rng.below(PES - 1)) % PES;
            Inst { a, b, c, cell_a: free[2 * i] as u64, cell_b: free[2 * i + 1] as u64, var: rng.next() & 0xFF }
        })
        .collect()
}

/// The tasks of several roles laid out for launch: each list shuffled and
/// padded to whole warps (so a warp has one role: no reader spins beside a
/// writer in its warp), the warps in random order.
fn warp_grouped(rng: &mut Rng, lists: Vec<Vec<[u64; 2]>>) -> Vec<u64> {
    let mut warps: Vec<Vec<[u64; 2]>> = Vec::new();
    for mut l in lists {
        rng.shuffle(&mut l);
        while l.len() % 32 != 0 {
            l.push([0, 0]);
        }
        warps.extend(l.chunks(32).map(<[_]>::to_vec));
    }
    rng.shuffle(&mut warps);
    warps.into_iter().flatten().flatten().collect()
}

/// Enough blocks of [`BLOCK`] threads for `tasks` tasks.
fn grid(tasks: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (tasks.div_ceil(BLOCK as usize).max(1) as u32, 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// One PE's rig for a litmus test: whether the PEs time-slice, the cells
/// and counters (symmetric) and the kernel.
struct Rig<'a> {
    shmem: &'a Shmem,
    sliced: bool,
    buf: SymSlice<u64>,
    out: SymSlice<u64>,
    k: Kernel,
}

impl<'a> Rig<'a> {
    /// Cells for `instances` instances, the counters and the kernel `name` (collective).
    fn new(shmem: &'a Shmem, instances: usize, name: &str) -> gpushmem::Result<Rig<'a>> {
        let sliced = time_sliced(shmem)?;
        let buf = shmem.calloc::<u64>(cells(instances) * CELL)?;
        let out = shmem.calloc::<u64>(2)?;
        let k = kernels(shmem)?.kernel(name)?;
        Ok(Rig { shmem, sliced, buf, out, k })
    }

    /// The cells and the counters, as kernel arguments.
    fn ptrs(&self) -> (u64, u64) {
        (self.buf.as_kernel_ptr(), self.out.as_kernel_ptr())
    }

    /// Zeroes this PE's cells and counters, waits for every PE to have done
    /// so, runs the kernel with `args` on every PE and waits for it; returns
    /// this PE's counters.
    ///
    /// # Safety
    /// `args` are the kernel's parameters.
    unsafe fn launch(&self, cfg: LaunchConfig, args: impl KernelArgs) -> gpushmem::Result<Vec<u64>> {
        let shmem = self.shmem;
        shmem.write(&self.buf, &vec![0u64; self.buf.len()])?;
        shmem.write(&self.out, &[0u64; 2])?;
        shmem.bootstrap().barrier()?;
        shmem.launch_collective(&self.k, cfg, args)?;
        shmem.synchronize()?;
        shmem.read(&self.out)
    }
}

/// Runs `launch` on every PE once for each ordering of `orders` (its code),
/// with a [`Rig`] for `instances` instances of the kernel `name`, a barrier
/// after each (nobody zeroes its cells for the next launch while a peer may
/// still write them). Returns whether the PEs time-slice and every PE's
/// results, in PE order, each in the order of `orders`.
fn per_order<T>(
    orders: &[(u32, &str)],
    instances: usize,
    name: &str,
    launch: impl Fn(&Rig, u32) -> gpushmem::Result<T> + Sync,
) -> Result<(bool, Vec<Vec<T>>), libtest_mimic::Failed>
where
    T: Send + serde::Serialize + serde::de::DeserializeOwned,
{
    let rows = threads(PES, HEAP, |shmem| {
        let rig = Rig::new(shmem, instances, name)?;
        let mut runs = Vec::new();
        for &(order, _) in orders {
            runs.push(launch(&rig, order)?);
            shmem.bootstrap().barrier()?;
        }
        Ok((rig.sliced, runs))
    })?;
    Ok((rows[0].0, rows.into_iter().map(|r| r.1).collect()))
}

/// How the PEs ran.
fn mode(sliced: bool) -> &'static str {
    match (std::env::var_os(IN_JOB).is_some(), sliced) {
        (false, _) => "PEs as threads",
        (true, true) => "PEs as processes time-slicing one GPU",
        (true, false) => "PEs as processes on separate GPUs",
    }
}

/// Message-passing rounds per instance, instances per launch (quick mode: [`scaled`]).
const MP_ROUNDS: u32 = 64;
const MP_INSTANCES: usize = 16384;

/// One launch's totals: (shape, ordered, violations, observations) over all PEs.
type Counts = (u32, bool, u64, u64);

/// Runs `litmus_mp` for each shape: `launches` ordered launches (2 with
/// concurrent PEs, 1 time-sliced), then one with the ordering step removed.
fn mp_runs(shapes: &[u32], instances: usize) -> Result<(bool, Vec<Counts>), libtest_mimic::Failed> {
    let rows = threads(PES, HEAP, |shmem| {
        let me = shmem.my_pe();
        let rig = Rig::new(shmem, instances, "litmus_mp")?;
        let launches = if rig.sliced { 1 } else { 2 };
        let stream = shmem.stream();
        let mut counts = Vec::new();
        for &shape in shapes {
            for l in 0..=launches {
                let ordered = l < launches;
                let tag = 0x11_0000 | (shape as u64) << 8 | l as u64;
                let insts = place(tag, instances);
                let (mut writers, mut readers) = (Vec::new(), Vec::new());
                for i in &insts {
                    if i.a == me {
                        writers.push(task(1, i.b, i.var, i.cell_a, i.cell_b));
                    }
                    if i.b == me {
                        readers.push(task(2, i.a, i.var, i.cell_a, i.cell_b));
                    }
                }
                let tasks = warp_grouped(&mut Rng::new(seed(), tag << 8 | me as u64), vec![writers, readers]);
                let n = tasks.len() / 2;
                let tasks_d = stream.clone_htod(&tasks).cu("tasks")?;
                let (buf, out) = rig.ptrs();
                let args = (buf, dptr(&tasks_d, stream), n as u32, MP_ROUNDS, shape, ordered as u32, out);
                let o = unsafe { rig.launch(grid(n), args)? };
                counts.push((shape, ordered, o[0], o[1]));
                // Nobody zeroes its cells for the next launch while a peer may still write them.
                shmem.bootstrap().barrier()?;
            }
        }
        Ok((rig.sliced, counts))
    })?;
    let sliced = rows[0].0;
    let mut total = rows[0].1.clone();
    for (_, c) in &rows[1..] {
        for (t, x) in total.iter_mut().zip(c) {
            t.2 += x.2;
            t.3 += x.3;
        }
    }
    Ok((sliced, total))
}

/// Message-passing shapes: fails on any violation with the ordering step;
/// prints what the run without it saw.
fn mp(shapes: &[(u32, &str, &str)]) -> TestResult {
    let start = Instant::now();
    let codes: Vec<u32> = shapes.iter().map(|s| s.0).collect();
    let instances = scaled(MP_INSTANCES);
    let (sliced, counts) = mp_runs(&codes, instances)?;
    let msgs = instances as u64 * MP_ROUNDS as u64;
    let mut failures = Vec::new();
    for &(shape, name, removed) in shapes {
        let runs: Vec<&Counts> = counts.iter().filter(|c| c.0 == shape).collect();
        let ordered: Vec<&&Counts> = runs.iter().filter(|c| c.1).collect();
        let (v, seen) = ordered.iter().fold((0, 0), |(v, s), c| (v + c.2, s + c.3));
        let sent = msgs * ordered.len() as u64;
        if v != 0 {
            failures.push(format!("{name}: {v} of {seen} observed messages (of {sent} sent) saw stale data"));
        }
        if runs.iter().any(|c| c.3 < instances as u64) {
            failures.push(format!("{name}: a reader finished without seeing its last message ({runs:?})"));
        }
        let un = runs.iter().find(|c| !c.1).map_or((0, 0), |c| (c.2, c.3));
        println!(
            "  {name} ({}, {PES} PEs, random pairs and cells, seed {}): {sent} messages, {seen} observed by their \
             readers, {v} violations; {removed}: {msgs} messages, {} observed, {} violations{}",
            mode(sliced),
            seed(),
            un.1,
            un.0,
            match (un.0, sliced) {
                (0, false) => " (the hardware did not reorder here: this shape cannot be provoked on this machine)",
                (0, true) => " (time-sliced PEs barely overlap: a reordering cannot be provoked here)",
                _ => "",
            }
        );
    }
    println!("  in {:.1?}", start.elapsed());
    fail_if_any(&failures)
}

/// Data by `put_nbi`, `fence`, flag by `p` (all to the reader's PE): a reader
/// that sees flag = r (`wait_until`, acquire) sees every data word ≥ r.
/// OpenSHMEM: `fence` orders a PE's puts to the same PE (kernels/src/sync.rs).
pub fn mp_fence() -> TestResult {
    mp(&[(MP_FENCE, "MP put_nbi; fence; p", "without fence")])
}

/// Data by `put_nbi`, `quiet`, flag by `p`: the data is complete before the
/// flag is written, so a reader that sees the flag sees the data.
pub fn mp_quiet() -> TestResult {
    mp(&[(MP_QUIET, "MP put_nbi; quiet; p", "without quiet")])
}

/// `put_signal` / `put_signal_nbi`, signal SET r or ADD 1 (drawn per
/// instance): a reader that sees the signal (`signal_wait_until`) sees the
/// data (kernels/src/signal.rs: the signal is a release). Without the
/// ordering: `put_nbi`, then the signal by a plain `p` (SET) or a relaxed
/// `atomic_add` (ADD).
pub fn mp_put_signal() -> TestResult {
    mp(&[(MP_SIGNAL, "MP put_signal(_nbi), SET/ADD", "put_nbi then a relaxed signal write")])
}

/// Atomics against plain puts, both ways, ordered by `fence` (OpenSHMEM:
/// fence orders puts and AMOs to the same PE): data by `put_nbi`, `fence`,
/// flag by `atomic_add`; and a data counter by `atomic_add`, `fence`, flag
/// by `p`, the reader reading the counter with `atomic_fetch`.
pub fn amo_vs_put() -> TestResult {
    mp(&[
        (MP_AMO_FLAG, "MP put_nbi; fence; atomic_add flag", "without fence"),
        (MP_AMO_DATA, "MP atomic_add data; fence; p flag", "without fence"),
    ])
}

/// Store-buffering rounds per instance, instances per launch (quick mode: [`scaled`]).
const SB_ROUNDS: u32 = 64;
const SB_INSTANCES: usize = 16384;

/// Store buffering: two PEs each `p` their own variable, then an ordering
/// call, then `g` the other's (each variable lives on either PE, drawn per
/// instance). With `quiet` (`fence.sc.sys`, which kernels/src/sync.rs
/// documents as ordering later loads after earlier stores) at least one side
/// sees the other's write: both missing it is a failure. `fence` orders only
/// puts to one PE (OpenSHMEM; here `fence.acq_rel.sys`), so with `fence` or
/// nothing both may miss: reported, not asserted. With concurrent PEs the
/// two sides run each round in lock-step.
pub fn store_buffering() -> TestResult {
    let start = Instant::now();
    const ORDERS: [(u32, &str); 3] = [(2, "quiet"), (1, "fence"), (0, "nothing")];
    let instances = scaled(SB_INSTANCES);
    let (sliced, rows) = per_order(&ORDERS, instances, "litmus_sb", |rig, order| {
        let (shmem, stream) = (rig.shmem, rig.shmem.stream());
        let me = shmem.my_pe();
        let tag = 0x5B_0000 | order as u64;
        let insts = place(tag, instances);
        let mut sides = Vec::new();
        for (id, i) in insts.iter().enumerate() {
            // x (side a's) lives on b if bit 0, y (side b's) on a if bit 1.
            let (x_far, y_far) = (i.var & 1, i.var >> 1 & 1);
            if i.a == me {
                sides.push((id as u32, task(1, i.b, x_far | (1 - y_far) << 1, i.cell_a, i.cell_b)));
            }
            if i.b == me {
                sides.push((id as u32, task(1, i.a, y_far | (1 - x_far) << 1, i.cell_b, i.cell_a)));
            }
        }
        Rng::new(seed(), tag << 8 | me as u64).shuffle(&mut sides);
        let tasks: Vec<u64> = sides.iter().flat_map(|s| s.1).collect();
        let n = sides.len();
        let tasks_d = stream.clone_htod(&tasks).cu("tasks")?;
        let res_d = stream.alloc_zeros::<u64>(n.max(1)).cu("res")?;
        let (buf, out) = rig.ptrs();
        let args =
            (buf, dptr(&tasks_d, stream), n as u32, SB_ROUNDS, order, !rig.sliced as u32, dptr(&res_d, stream), out);
        let timeouts = unsafe { rig.launch(grid(n), args)? }[1];
        let res = stream.clone_dtoh(&res_d).cu("res")?;
        let masks: Vec<(u32, u64)> = sides.iter().zip(&res).map(|(s, &m)| (s.0, m)).collect();
        Ok((timeouts, masks))
    })?;
    let mut failures = Vec::new();
    let mut report = Vec::new();
    for (k, (order, name)) in ORDERS.iter().enumerate() {
        let mut first: Vec<Option<u64>> = vec![None; instances];
        let (mut both, mut missed, mut sides, mut timeouts) = (0u64, 0u64, 0usize, 0u64);
        for runs in &rows {
            timeouts += runs[k].0;
            for &(id, m) in &runs[k].1 {
                sides += 1;
                missed += m.count_ones() as u64;
                match first[id as usize] {
                    None => first[id as usize] = Some(m),
                    Some(o) => both += (o & m).count_ones() as u64,
                }
            }
        }
        if sides != 2 * instances || timeouts != 0 {
            failures
                .push(format!("SB {name}: {sides} sides ran (want {}), {timeouts} lock-step timeouts", 2 * instances));
        }
        if *order == 2 && both != 0 {
            failures.push(format!("SB with quiet: in {both} rounds both sides missed the other's write"));
        }
        report.push(format!("{name}: {both} both-missed ({missed} single misses)"));
    }
    println!(
        "  SB p; quiet|fence|nothing; g ({}, {PES} PEs, {}, seed {}): {} instances × {SB_ROUNDS} rounds each; {}. \
         quiet must give 0 both-missed; fence and nothing may not{}",
        mode(sliced),
        if sliced { "free-running" } else { "lock-step rounds" },
        seed(),
        instances,
        report.join(", "),
        if sliced { " (time-sliced PEs rarely overlap: the forbidden outcome cannot arise here)" } else { "" }
    );
    println!("  in {:.1?}", start.elapsed());
    fail_if_any(&failures)
}

/// Get after a remote `quiet` + barrier: writer W `put_nbi`s a round-tagged
/// pair to target T; `barrier_all_block` (quiet, then all arrive); getter G
/// (≠ W) `get`s the pair from T: it must be this round's. Reported without
/// the guarantee: `sync_all_block` (arrival without completion: OpenSHMEM
/// allows a stale get) and no inter-PE sync at all (a plain race, which must
/// show stale reads or the test could not see any).
pub fn get_after_quiet_barrier() -> TestResult {
    let start = Instant::now();
    const ORDERS: [(u32, &str); 3] = [(2, "barrier_all"), (1, "sync_all (no quiet)"), (0, "no barrier")];
    let (sliced, rows) = per_order(&ORDERS, scaled(65536), "litmus_get_after_barrier", |rig, order| {
        let (shmem, stream) = (rig.shmem, rig.shmem.stream());
        let me = shmem.my_pe();
        // A barrier costs a round trip: time-sliced, 16 wide rounds instead of 64.
        let (count, rounds) = if rig.sliced { (scaled(65536), 16u32) } else { (scaled(16384), 64u32) };
        let tag = 0x6E_0000 | order as u64;
        let insts = place(tag, count);
        let mut w: Vec<[u64; 2]> = insts.iter().filter(|i| i.a == me).map(|i| task(1, i.c, 0, i.cell_a, 0)).collect();
        let mut g: Vec<[u64; 2]> =
            insts.iter().filter(|i| i.b == me).map(|i| task(2, i.c, 0, i.cell_a, i.cell_b)).collect();
        let mut rng = Rng::new(seed(), tag << 8 | me as u64);
        rng.shuffle(&mut w);
        rng.shuffle(&mut g);
        // One spare task each: no zero-length allocation.
        let flat = |l: &[[u64; 2]]| l.iter().chain(&[[0, 0]]).flatten().copied().collect::<Vec<u64>>();
        let wd = stream.clone_htod(&flat(&w)).cu("tasks")?;
        let gd = stream.clone_htod(&flat(&g)).cu("tasks")?;
        let (buf, out) = rig.ptrs();
        let args = (buf, dptr(&wd, stream), w.len() as u32, dptr(&gd, stream), g.len() as u32, rounds, order, out);
        let o = unsafe { rig.launch(one_block(512), args)? };
        Ok((o[0], o[1], count as u64 * rounds as u64))
    })?;
    let mut failures = Vec::new();
    let mut report = Vec::new();
    for (k, (order, name)) in ORDERS.iter().enumerate() {
        let (v, seen) = rows.iter().fold((0, 0), |(v, s), r| (v + r[k].0, s + r[k].1));
        let want = rows[0][k].2;
        if seen != want {
            failures.push(format!("get test, {name}: {seen} gets checked, want {want}"));
        }
        if *order == 2 && v != 0 {
            failures.push(format!("get after put_nbi + barrier_all: {v} of {seen} gets returned stale data"));
        }
        report.push(format!("{name}: {v} stale of {seen}"));
    }
    let race = rows.iter().map(|r| r[2].0).sum::<u64>();
    println!(
        "  get after put_nbi + quiet + barrier ({}, {PES} PEs, random writer/target/getter and cells, seed {}): {}{}",
        mode(sliced),
        seed(),
        report.join("; "),
        if race == 0 { " (no stale read even without a barrier: the race did not show on this machine)" } else { "" }
    );
    println!("  in {:.1?}", start.elapsed());
    fail_if_any(&failures)
}
