//! Memory-model litmus tests (kernels: tests/kernels/src/litmus.rs).
//!
//! Each test runs at least 2^20 instances (instance × round; quick mode, see
//! `common::scaled`: 1/100 of the instances, the same rounds) with random
//! placement: every launch draws, from the run's seed, which PEs pair up,
//! which 32-byte cells of the buffer each instance uses and which threads
//! run it. Every test asserts zero violations of what OpenSHMEM and our
//! docs (kernels/src/sync.rs, signal.rs, atomic.rs; docs/guide.md §2)
//! guarantee, and that every task ran and reported.
//!
//! Controls. A test that sees no violation only shows something if it
//! could have seen one: each test also runs *controls*, the same kernel
//! with the ordering call removed or weakened ([`CONTROLS`], one table).
//! [`control_runs`] repeats a control, each run with a fresh placement,
//! until it shows a violation or its budget ([`CONTROL_MAX_RUNS`] runs,
//! [`CONTROL_MAX_SECS`]) is spent; [`judge`] then fails the test if a
//! [`Expect::MustTrip`] control never tripped, and prints an `UNVERIFIED:`
//! line naming the property for a [`Expect::NotYetShown`] control that did
//! not (the test passes; the property does not count as shown).
//!
//! PEs as threads share the GPU and run at the same time. PEs as processes on
//! one GPU only time-slice (a round trip costs milliseconds): the tests keep
//! to one-way instances there (writers never wait for readers), the
//! store-buffering sides do not run in lock-step, and the get test runs
//! fewer, wider rounds. Their kernels barely overlap, so nothing can be
//! reordered between PEs: process-mode runs are smoke tests (the final
//! values and the plumbing), not litmus evidence; each control runs once
//! and is never asserted (the same in quick mode, whose runs are too small
//! to demand a reordering).

use crate::common::*;
use gpushmem::{Kernel, KernelArgs, LaunchConfig, Shmem, SymSlice};
pub use litmus_ops::*;
use serde::{Deserialize, Serialize};
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
/// The sparse store-buffering buffer (32 MiB) and the counters fit.
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

/// Cells in a buffer for `count` instances (two each, the rest left as gaps),
/// `spread` times as many for a sparse placement ([`SPREAD`]).
fn cells(count: usize, spread: usize) -> usize {
    4 * count * spread
}

/// A sparse placement: 16 × as many cells as the compact one (32 MiB for
/// 16384 instances), so an instance's two cells lie on different pages and
/// DRAM channels as well as different L2 slices, and the cells of nearby
/// threads do not share lines.
const SPREAD: usize = 16;

/// `count` instances drawn from stream `stream` of the run's seed, in a
/// buffer of `cells(count, spread)` cells.
fn place(stream: u64, count: usize, spread: usize) -> Vec<Inst> {
    let mut rng = Rng::new(seed(), stream);
    let mut free: Vec<u32> = (0..cells(count, spread) as u32).collect();
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
    /// Cells for `instances` instances (`spread`: see [`place`]), the
    /// counters and the kernel `name` (collective).
    fn new(shmem: &'a Shmem, instances: usize, spread: usize, name: &str) -> gpushmem::Result<Rig<'a>> {
        let sliced = time_sliced(shmem)?;
        let buf = shmem.calloc::<u64>(cells(instances, spread) * CELL)?;
        let out = shmem.calloc::<u64>(OUT_WORDS)?;
        let k = kernels(shmem)?.kernel(name)?;
        Ok(Rig { shmem, sliced, buf, out, k })
    }

    /// The cells and the counters, as kernel arguments.
    fn ptrs(&self) -> (u64, u64) {
        (self.buf.as_kernel_ptr(), self.out.as_kernel_ptr())
    }

    /// Zeroes this PE's cells and counters, waits for every PE to have done
    /// so, runs the kernel with `args` on every PE and waits for it; returns
    /// this PE's counters. Callers pass every PE's results through
    /// [`sum_over_pes`] before the next launch: nobody zeroes its cells while
    /// a peer may still write them.
    ///
    /// # Safety
    /// `args` are the kernel's parameters.
    unsafe fn launch(&self, cfg: LaunchConfig, args: impl KernelArgs) -> gpushmem::Result<Vec<u64>> {
        let shmem = self.shmem;
        shmem.write(&self.buf, &vec![0u64; self.buf.len()])?;
        shmem.write(&self.out, &[0u64; OUT_WORDS])?;
        shmem.bootstrap().barrier()?;
        shmem.launch_collective(&self.k, cfg, args)?;
        shmem.synchronize()?;
        shmem.read(&self.out)
    }
}

/// How the PEs ran.
fn mode(sliced: bool) -> &'static str {
    match (std::env::var_os(IN_JOB).is_some(), sliced) {
        (false, _) => "PEs as threads",
        (true, true) => "PEs as processes time-slicing one GPU",
        (true, false) => "PEs as processes on separate GPUs",
    }
}

/// Whether a control must show a violation on this GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// The test fails if the control shows none within its budget: it
    /// tripped in every GPU run so far, so a test that stops seeing it has
    /// lost its power to tell the right implementation from a wrong one.
    MustTrip,
    /// Report only: not yet seen to trip on this GPU. A run that shows none
    /// prints `UNVERIFIED:` with the property; the test still passes.
    NotYetShown,
}
use Expect::*;

/// The controls of the litmus tests and of `sync::fence_orders_puts`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ctl {
    MpFence,
    MpQuiet,
    MpSignal,
    MpSignalOp,
    AmoFlag,
    AmoData,
    FencePuts,
    SbNothing,
    SbFence,
    GetNoBarrier,
    GetSyncAll,
    GetUnfenced,
    CrossFence,
    CrossNothing,
}

/// A control: which, whether it must trip, the property it shows when it
/// trips, the variant run, and what its tripping shows to be needed.
pub struct Control {
    pub ctl: Ctl,
    pub expect: Expect,
    pub property: &'static str,
    pub variant: &'static str,
    pub needed: &'static str,
}

const fn c(ctl: Ctl, expect: Expect, property: &'static str, variant: &'static str, needed: &'static str) -> Control {
    Control { ctl, expect, property, variant, needed }
}

/// Every control, in one table: after a GPU run shows a `NotYetShown`
/// control trip (its line says so), flip it to `MustTrip` here. What each
/// control showed in the logged GPU runs: the table of docs/verification.md
/// (made from the logs under docs/runs/ by a script, so no figure is copied
/// here to go stale); the `NotYetShown` ones never tripped there
/// (docs/verification.md says why they may never). `CrossNothing` tripped in
/// its first GPU runs (H100, 2026-12-07: 17 violations in one run, twice) and is
/// `MustTrip`; `CrossFence` showed 0 in 64 runs there, as expected on the
/// native engine (see [`mp_cross_pe_quiet`]).
pub const CONTROLS: &[Control] = &[
    c(Ctl::MpFence, MustTrip, "fence orders put_nbi before a later p to one PE", "without fence", "fence is needed"),
    c(Ctl::MpQuiet, MustTrip, "quiet completes put_nbi before a later p", "without quiet", "quiet is needed"),
    c(
        Ctl::MpSignal,
        MustTrip,
        "put_signal(_nbi) delivers the data before the signal",
        "put_nbi then a relaxed signal write",
        "put_signal's ordering is needed",
    ),
    c(
        Ctl::MpSignalOp,
        MustTrip,
        "signal_op orders an earlier put_nbi before the signal (release)",
        "signal_op_relaxed",
        "signal_op's release is needed: a relaxed signal must not publish data",
    ),
    c(
        Ctl::AmoFlag,
        MustTrip,
        "fence orders put_nbi before a later atomic_add to one PE",
        "without fence",
        "fence is needed",
    ),
    c(
        Ctl::AmoData,
        MustTrip,
        "fence orders an atomic_add before a later p to one PE",
        "without fence",
        "fence is needed",
    ),
    c(
        Ctl::FencePuts,
        MustTrip,
        "fence orders p's to one PE (sync::fence_orders_puts)",
        "without fence",
        "fence is needed",
    ),
    c(
        Ctl::SbNothing,
        MustTrip,
        "the store-buffering test sees a g pass an earlier p",
        "nothing between p and g",
        "an ordering call is needed",
    ),
    c(
        Ctl::SbFence,
        NotYetShown,
        "quiet orders a later g after an earlier p (which fence need not)",
        "fence instead of quiet",
        "quiet, not only fence, is needed",
    ),
    c(Ctl::GetNoBarrier, MustTrip, "the get test sees a get race the puts", "no barrier", "a barrier is needed"),
    c(
        Ctl::GetSyncAll,
        NotYetShown,
        "barrier_all completes puts before the gets (its quiet)",
        "sync_all, no quiet",
        "barrier_all's quiet is needed",
    ),
    c(
        Ctl::GetUnfenced,
        NotYetShown,
        "barrier_all orders the puts before its arrival (its fences)",
        "an arrival with no fence",
        "the barrier's fences are needed",
    ),
    c(
        Ctl::CrossFence,
        NotYetShown,
        "fence does not order puts to different PEs (quiet does)",
        "fence instead of quiet",
        "quiet, not only fence, is needed for data and flag on different PEs",
    ),
    c(
        Ctl::CrossNothing,
        MustTrip,
        "the cross-PE message-passing test sees the flag pass the data",
        "nothing between data and flag",
        "an ordering call is needed between puts to different PEs",
    ),
];

/// The declaration of `ctl`.
pub fn control(ctl: Ctl) -> &'static Control {
    CONTROLS.iter().find(|c| c.ctl == ctl).expect("every control is declared in CONTROLS")
}

/// The most runs of one control, and the most time (checked after each run).
pub const CONTROL_MAX_RUNS: u64 = 64;
pub const CONTROL_MAX_SECS: f64 = 30.0;

/// What some launches saw, summed over PEs (and over runs).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct Tally {
    /// Outcomes the guarantee forbids.
    pub violations: u64,
    /// Messages (rounds, gets) a reader actually saw and checked.
    pub observed: u64,
    /// Messages (rounds, gets) sent.
    pub sent: u64,
    /// Tasks that reported they ran to the end, of `tasks`.
    pub ran: u64,
    pub tasks: u64,
    /// Device-side waits that gave up.
    pub timeouts: u64,
    /// Launches, and the slowest PE's seconds.
    pub runs: u64,
    pub secs: f64,
}

impl Tally {
    fn add(&mut self, o: &Tally) {
        self.violations += o.violations;
        self.observed += o.observed;
        self.sent += o.sent;
        self.ran += o.ran;
        self.tasks += o.tasks;
        self.timeouts += o.timeouts;
        self.runs += o.runs;
        self.secs += o.secs;
    }

    /// `observed / sent` in percent.
    fn pct(&self) -> f64 {
        100.0 * self.observed as f64 / self.sent.max(1) as f64
    }
}

/// Every PE's `mine` summed (times: the slowest), the same on every PE.
/// The allgather is also the barrier after a launch (see [`Rig::launch`]).
fn sum_over_pes(shmem: &Shmem, mine: &Tally) -> gpushmem::Result<Tally> {
    let bytes = serde_json::to_vec(mine).expect("a Tally serializes");
    let mut total = Tally::default();
    let mut secs = 0f64;
    for b in shmem.bootstrap().allgather(&bytes)? {
        let t: Tally = serde_json::from_slice(&b).expect("a Tally from a PE of this binary");
        secs = secs.max(t.secs);
        total.add(&t);
    }
    total.runs = mine.runs;
    total.secs = secs;
    Ok(total)
}

/// Launches `once(k)` for k in `0..runs` (each launches on every PE and
/// returns this PE's part of the tally); the sum over PEs and runs.
fn ordered_runs(
    shmem: &Shmem,
    runs: u64,
    mut once: impl FnMut(u64) -> gpushmem::Result<Tally>,
) -> gpushmem::Result<Tally> {
    let mut total = Tally::default();
    for k in 0..runs {
        let start = Instant::now();
        let mut t = once(k)?;
        t.runs = 1;
        t.secs = start.elapsed().as_secs_f64();
        total.add(&sum_over_pes(shmem, &t)?);
    }
    Ok(total)
}

/// Why controls are only smoke-tested here, if they are: PEs as processes
/// (their kernels time-slice one GPU, or were never calibrated across GPUs),
/// or quick mode (too few messages to demand a reordering).
pub fn smoke_only() -> Option<&'static str> {
    if std::env::var_os(IN_JOB).is_some() {
        Some("PEs as processes: their kernels barely overlap, so nothing can be reordered between PEs")
    } else if quick() {
        Some("quick mode: too few messages to demand a reordering")
    } else {
        None
    }
}

/// Runs a control on every PE: `once(k)` launches run k of it (a fresh
/// placement each) and returns this PE's part. Repeats until the summed
/// violations are non-zero or [`CONTROL_MAX_RUNS`] runs or
/// [`CONTROL_MAX_SECS`] are spent; in [`smoke_only`] runs, once. Every PE
/// takes the same decisions (they see the same sums).
pub fn control_runs(shmem: &Shmem, mut once: impl FnMut(u64) -> gpushmem::Result<Tally>) -> gpushmem::Result<Tally> {
    let max_runs = if smoke_only().is_some() { 1 } else { CONTROL_MAX_RUNS };
    let mut total = Tally::default();
    let start = Instant::now();
    while total.runs < max_runs {
        let mut t = once(total.runs)?;
        t.runs = 1;
        t.secs = start.elapsed().as_secs_f64();
        let all = sum_over_pes(shmem, &t)?;
        let secs = all.secs;
        total.add(&all);
        total.secs = secs;
        if total.violations > 0 || secs > CONTROL_MAX_SECS {
            break;
        }
    }
    Ok(total)
}

/// Fails unless every task of `t` reported it ran to the end and no wait timed out.
pub fn check_ran(what: &str, t: &Tally, failures: &mut Vec<String>) {
    if t.ran != t.tasks || t.timeouts != 0 || t.tasks == 0 {
        failures.push(format!(
            "{what}: {} of {} tasks reported that they ran to the end, {} waits timed out",
            t.ran, t.tasks, t.timeouts
        ));
    }
}

/// Prints what control `ctl` saw; a `MustTrip` control that never tripped is
/// a failure (outside [`smoke_only`] runs). `unit`: what was observed ("messages").
pub fn judge(ctl: Ctl, t: &Tally, unit: &str, failures: &mut Vec<String>) {
    println!("{}", judge_in(control(ctl), t, unit, smoke_only(), failures));
}

/// [`judge`] for control `c`, with `smoke` the reason this run is a smoke
/// test (or `None`): the verdict without the environment, so that the CPU
/// tests (`crate::verdict`) run it on made-up tallies. Returns the line to
/// print.
pub fn judge_in(c: &Control, t: &Tally, unit: &str, smoke: Option<&str>, failures: &mut Vec<String>) -> String {
    check_ran(&format!("control {:?}", c.ctl), t, failures);
    let seen = format!(
        "{} violations in {} observed {unit} (of {} sent), {} run{} ({:.2} s)",
        t.violations,
        t.observed,
        t.sent,
        t.runs,
        if t.runs == 1 { "" } else { "s" },
        t.secs
    );
    if let Some(why) = smoke {
        format!("  SMOKE TEST, not litmus evidence ({why}): control {:?} ({}): {seen}; not asserted", c.ctl, c.variant)
    } else if t.violations > 0 {
        let flip = if c.expect == NotYetShown {
            " [declared NotYetShown: flip it to MustTrip in litmus::CONTROLS]"
        } else {
            ""
        };
        format!("  control tripped: {}: the {} control showed {seen}{flip}", c.property, c.variant)
    } else if c.expect == MustTrip {
        failures.push(format!(
            "control {:?} ({}) is MustTrip but showed {seen}: the test can no longer tell whether {}",
            c.ctl, c.variant, c.needed
        ));
        format!("FAILED CONTROL: {}: the {} control showed {seen}", c.property, c.variant)
    } else {
        format!(
            "UNVERIFIED: {}: the {} control showed {seen}; this GPU did not show that {}",
            c.property, c.variant, c.needed
        )
    }
}

/// Message-passing rounds per instance, instances per launch (quick mode: [`scaled`]).
const MP_ROUNDS: u32 = 64;
const MP_INSTANCES: usize = 16384;

/// The smallest share of the sent messages the readers of the ordered runs
/// must observe (PEs running together). Readers skip the messages sent
/// while they check one, so they observe only part (the shares of the logged
/// runs: each test's printed summary, collected in docs/verification.md; the
/// control runs, whose writers go faster, observe less: not asserted, a
/// tripped control counts however few it observed). 25 % leaves room for
/// slower GPUs and still catches readers that stopped early or barely
/// overlapped their writers.
const MIN_OBSERVED_PCT: f64 = 25.0;

/// One `litmus_mp` launch of `instances` instances of `shape`, placement
/// from stream `tag`; this PE's part of the tally.
fn mp_launch(rig: &Rig, shape: u32, ordered: bool, tag: u64, instances: usize) -> gpushmem::Result<Tally> {
    let (shmem, stream) = (rig.shmem, rig.shmem.stream());
    let me = shmem.my_pe();
    let insts = place(tag, instances, 1);
    let (mut writers, mut readers) = (Vec::new(), Vec::new());
    let cross = shape == MP_CROSS_QUIET || shape == MP_CROSS_FENCE;
    for i in &insts {
        // Cross-PE shapes: the data goes to a third PE `d` (the writer's
        // variant bits name it, the reader's peer is it), the flag to the reader.
        let d = third_pe(i.a, i.b, i.var);
        let (wvar, rpeer) = if cross { (d as u64, d) } else { (i.var, i.a) };
        if i.a == me {
            writers.push(task(1, i.b, wvar, i.cell_a, i.cell_b));
        }
        if i.b == me {
            readers.push(task(2, rpeer, i.var, i.cell_a, i.cell_b));
        }
    }
    let tasks = warp_grouped(&mut Rng::new(seed(), tag << 8 | me as u64), vec![writers, readers]);
    let n = tasks.len() / 2;
    let tasks_d = stream.clone_htod(&tasks).cu("tasks")?;
    let res_d = stream.alloc_zeros::<u64>(n.max(1)).cu("res")?;
    let (buf, out) = rig.ptrs();
    let args = (buf, dptr(&tasks_d, stream), n as u32, MP_ROUNDS, shape, ordered as u32, dptr(&res_d, stream), out);
    // SAFETY: the arguments of `litmus_mp`; `res_d` has a word per task.
    let o = unsafe { rig.launch(grid(n), args)? };
    let res = stream.clone_dtoh(&res_d).cu("res")?;
    let rounds = MP_ROUNDS as u64;
    let mut t = Tally { violations: o[0], timeouts: o[2], ..Tally::default() };
    for (k, &r) in res.iter().enumerate().take(n) {
        match tasks[2 * k] & 0xFF {
            1 => {
                t.tasks += 1;
                t.sent += r;
                t.ran += (r == rounds) as u64;
            }
            2 => {
                t.tasks += 1;
                t.observed += r;
                // A reader observes at least the last message, at most every one.
                t.ran += (1..=rounds).contains(&r) as u64;
            }
            _ => {}
        }
    }
    Ok(t)
}

/// A PE other than `a` and `b` (≠ `a`), chosen by `var`: where the
/// cross-PE shapes put their data.
fn third_pe(a: usize, b: usize, var: u64) -> usize {
    let others: Vec<usize> = (0..PES).filter(|&p| p != a && p != b).collect();
    others[var as usize % others.len()]
}

/// The launch of control `ctl` of the message-passing kernel: its shape and
/// whether the ordering step stays. Most controls drop the step (`ordered`
/// false); the cross-PE `fence` control replaces `quiet` by `fence`.
fn mp_control_launch(ctl: Ctl, shape: u32) -> (u32, bool) {
    match ctl {
        Ctl::CrossFence => (MP_CROSS_FENCE, true),
        _ => (shape, false),
    }
}

/// The verdict on the ordered (asserted) runs of a message-passing shape:
/// every task placed (`want_tasks`) and reported, no violation, and with PEs
/// running together (not `sliced`) at least [`MIN_OBSERVED_PCT`] of the
/// messages observed. Pure, so the CPU tests (`crate::verdict`) run it.
pub fn mp_verdict(name: &str, ordered: &Tally, want_tasks: u64, sliced: bool, failures: &mut Vec<String>) {
    if ordered.tasks != want_tasks {
        failures.push(format!("{name}: {} tasks placed, want {want_tasks}", ordered.tasks));
    }
    check_ran(name, ordered, failures);
    if ordered.violations != 0 {
        failures.push(format!(
            "{name}: {} violations in {} observed messages (of {} sent): a reader saw stale data",
            ordered.violations, ordered.observed, ordered.sent
        ));
    }
    // Time-sliced PEs: a reader may run after its writer finished and see only the last message.
    if !sliced && ordered.pct() < MIN_OBSERVED_PCT {
        failures.push(format!(
            "{name}: the readers observed {} of {} messages ({:.1} %, want ≥ {MIN_OBSERVED_PCT} %)",
            ordered.observed,
            ordered.sent,
            ordered.pct()
        ));
    }
}

/// Message-passing shapes `(shape, name, controls)`: fails on any violation
/// with the ordering step, on a task that did not report, on readers that
/// observed too few messages ([`mp_verdict`]); then runs each of the shape's
/// controls ([`mp_control_launch`], judged by [`judge`]).
pub fn mp(shapes: &[(u32, &str, &[Ctl])]) -> TestResult {
    let start = Instant::now();
    let instances = scaled(MP_INSTANCES);
    if let Some(why) = smoke_only() {
        println!("  SMOKE TEST, not litmus evidence ({why}): the controls run once and are not asserted");
    }
    let rows = threads(PES, HEAP, |shmem| {
        let rig = Rig::new(shmem, instances, 1, "litmus_mp")?;
        let launches = if rig.sliced { 1 } else { 2 };
        let mut tallies = Vec::new();
        for &(shape, _, ctls) in shapes {
            // Launch k of a shape draws placement stream (shape, k): ordered
            // runs first, then each control's runs from its own range.
            let tag = |k: u64| 0x11_0000_0000 | (shape as u64) << 16 | k;
            let ordered = ordered_runs(shmem, launches, |k| mp_launch(&rig, shape, true, tag(k), instances))?;
            let mut controls = Vec::new();
            for (j, &ctl) in ctls.iter().enumerate() {
                let (cshape, cordered) = mp_control_launch(ctl, shape);
                let first = launches + j as u64 * CONTROL_MAX_RUNS;
                controls.push(control_runs(shmem, |k| mp_launch(&rig, cshape, cordered, tag(first + k), instances))?);
            }
            tallies.push((ordered, controls));
        }
        Ok((rig.sliced, tallies))
    })?;
    let (sliced, tallies) = &rows[0];
    let mut failures = Vec::new();
    for (&(_, name, ctls), (ordered, controls)) in shapes.iter().zip(tallies) {
        mp_verdict(name, ordered, 2 * instances as u64 * ordered.runs, *sliced, &mut failures);
        println!(
            "  {name} ({}, {PES} PEs, random pairs and cells, seed {}): {} violations in {} observed messages (of \
             {} sent, {:.1} % observed; every one of {} readers and writers reported)",
            mode(*sliced),
            seed(),
            ordered.violations,
            ordered.observed,
            ordered.sent,
            ordered.pct(),
            ordered.tasks
        );
        for (&ctl, control) in ctls.iter().zip(controls) {
            judge(ctl, control, "messages", &mut failures);
        }
    }
    println!("  in {:.1?}", start.elapsed());
    fail_if_any(&failures)
}

/// Data by `put_nbi`, `fence`, flag by `p` (all to the reader's PE): a reader
/// that sees flag = r (`wait_until`, acquire) sees every data word ≥ r.
/// OpenSHMEM: `fence` orders a PE's puts to the same PE (kernels/src/sync.rs).
pub fn mp_fence() -> TestResult {
    mp(&[(MP_FENCE, "MP put_nbi; fence; p", &[Ctl::MpFence])])
}

/// Data by `put_nbi`, `quiet`, flag by `p`: the data is complete before the
/// flag is written, so a reader that sees the flag sees the data. Both go to
/// the reader's PE, where `fence` would pass too: [`mp_cross_pe_quiet`]
/// sends them to different PEs, which only `quiet` covers.
pub fn mp_quiet() -> TestResult {
    mp(&[(MP_QUIET, "MP put_nbi; quiet; p", &[Ctl::MpQuiet])])
}

/// `put_signal` / `put_signal_nbi`, signal SET r or ADD 1 (drawn per
/// instance): a reader that sees the signal (`signal_wait_until`) sees the
/// data (kernels/src/signal.rs: the signal is a release). Control: `put_nbi`,
/// then the signal by a plain `p` (SET) or a relaxed `atomic_add` (ADD).
pub fn mp_put_signal() -> TestResult {
    mp(&[(MP_SIGNAL, "MP put_signal(_nbi), SET/ADD", &[Ctl::MpSignal])])
}

/// Data by `put_nbi`, then `signal_op` SET r or ADD 1 (drawn per instance):
/// a reader that sees the signal (`signal_wait_until`) sees the data, since
/// `signal_op` releases. Control: the same with `signal_op_relaxed`, which
/// orders nothing; this is why the default signal stays ordered.
pub fn mp_signal_op() -> TestResult {
    mp(&[(MP_SIGNAL_OP, "MP put_nbi; signal_op, SET/ADD", &[Ctl::MpSignalOp])])
}

/// Atomics against plain puts, both ways, ordered by `fence` (OpenSHMEM:
/// fence orders puts and AMOs to the same PE): data by `put_nbi`, `fence`,
/// flag by `atomic_add`; and a data counter by `atomic_add`, `fence`, flag
/// by `p`, the reader reading the counter with `atomic_fetch`.
pub fn amo_vs_put() -> TestResult {
    mp(&[
        (MP_AMO_FLAG, "MP put_nbi; fence; atomic_add flag", &[Ctl::AmoFlag]),
        (MP_AMO_DATA, "MP atomic_add data; fence; p flag", &[Ctl::AmoData]),
    ])
}

/// Message passing with the data and the flag on different PEs: writer W
/// `put_nbi`s the data to PE D, `quiet`, then `p`s the flag to the reader's
/// PE R (W, D, R three different PEs, drawn per instance); R waits for the
/// flag (`wait_until`, acquire) and reads the data from D with `g`: every
/// word must be at least the flag's value. `quiet` completes the put to D
/// before the flag is written; `MP_QUIET` sends both to one PE, where a
/// `fence` would do as well, so it cannot tell the two apart.
///
/// Controls:
/// - `fence` instead of `quiet` (`CrossFence`). OpenSHMEM's `fence` orders
///   puts to one PE only, so a violation is allowed. It is not expected on
///   this hardware: on the native engine `fence` is `fence.acq_rel` at the
///   job's scope (kernels/src/engine/native.rs), which by the PTX memory
///   model orders the thread's earlier stores to every address before its
///   later ones, so 0 is the likely count on every GPU run; a zero shows
///   nothing against the test, and the test passes without it. Only a
///   transport whose `fence` is per destination could trip it.
///   `NotYetShown` (report only): 0 in 64 runs on an H100 (2026-12-07).
/// - nothing between data and flag (`CrossNothing`), `MustTrip`: the test
///   sees a reordering at all (17 violations in one run on an H100,
///   2026-12-07, in each of two suite runs).
pub fn mp_cross_pe_quiet() -> TestResult {
    mp(&[(MP_CROSS_QUIET, "MP put_nbi to D; quiet; p flag to R", &[Ctl::CrossFence, Ctl::CrossNothing])])
}

/// Store-buffering rounds per instance, instances per launch (quick mode: [`scaled`]).
const SB_ROUNDS: u32 = 64;
const SB_INSTANCES: usize = 16384;

/// One `litmus_sb` launch: `order` (2 quiet, 1 fence, 0 nothing), placement
/// from stream `tag`, `spread` (see [`place`]). Every PE gathers every
/// side's misses to pair them; PE 0 reports the pairs (violations: rounds in
/// which both sides missed the other's write; observed: rounds both sides
/// ran), every PE its own sides.
fn sb_launch(rig: &Rig, order: u32, tag: u64, instances: usize, spread: usize) -> gpushmem::Result<Tally> {
    let (shmem, stream) = (rig.shmem, rig.shmem.stream());
    let me = shmem.my_pe();
    let insts = place(tag, instances, spread);
    let mut sides = Vec::new();
    for (id, i) in insts.iter().enumerate() {
        // x (side a's) lives on b if bit 0, y (side b's) on a if bit 1.
        let (x_far, y_far) = (i.var & 1, i.var >> 1 & 1);
        if i.a == me {
            sides.push((id as u64, task(1, i.b, x_far | (1 - y_far) << 1, i.cell_a, i.cell_b)));
        }
        if i.b == me {
            sides.push((id as u64, task(1, i.a, y_far | (1 - x_far) << 1, i.cell_b, i.cell_a)));
        }
    }
    Rng::new(seed(), tag << 8 | me as u64).shuffle(&mut sides);
    let tasks: Vec<u64> = sides.iter().flat_map(|s| s.1).collect();
    let n = sides.len();
    let tasks_d = stream.clone_htod(&tasks).cu("tasks")?;
    let res_d = stream.alloc_zeros::<u64>(2 * n.max(1)).cu("res")?;
    let (buf, out) = rig.ptrs();
    let args = (buf, dptr(&tasks_d, stream), n as u32, SB_ROUNDS, order, !rig.sliced as u32, dptr(&res_d, stream), out);
    // SAFETY: the arguments of `litmus_sb`; `res_d` has two words per task.
    let o = unsafe { rig.launch(grid(n), args)? };
    let res = stream.clone_dtoh(&res_d).cu("res")?;
    let rounds = SB_ROUNDS.min(64) as u64;
    let mut t = Tally { timeouts: o[2], tasks: n as u64, ..Tally::default() };
    // (instance, missed mask, rounds done) of each side, as little-endian words.
    let mut mine = Vec::with_capacity(24 * n);
    for (k, s) in sides.iter().enumerate() {
        let done = res[2 * k + 1];
        t.ran += (done == rounds) as u64;
        for w in [s.0, res[2 * k], done] {
            mine.extend_from_slice(&w.to_le_bytes());
        }
    }
    let all = shmem.bootstrap().allgather(&mine)?;
    if me == 0 {
        let mut first: Vec<Option<(u64, u64)>> = vec![None; instances];
        for b in &all {
            for side in b.chunks_exact(24) {
                let w = |j: usize| u64::from_le_bytes(side[8 * j..8 * j + 8].try_into().expect("8 bytes"));
                let (id, mask, done) = (w(0) as usize, w(1), w(2));
                match first[id] {
                    None => first[id] = Some((mask, done)),
                    Some((m, d)) => {
                        // Rounds both sides ran: the bits below min(done) of both masks.
                        let both = d.min(done);
                        let valid = if both >= 64 { u64::MAX } else { (1u64 << both) - 1 };
                        t.violations += (m & mask & valid).count_ones() as u64;
                        t.observed += both;
                    }
                }
            }
        }
        t.sent = instances as u64 * rounds;
    }
    Ok(t)
}

/// Store buffering: two PEs each `p` their own variable, then an ordering
/// call, then `g` the other's (each variable lives on either PE, drawn per
/// instance). With `quiet` (`fence.sc`, which kernels/src/sync.rs documents
/// as ordering later loads after earlier stores) at least one side sees the
/// other's write: both missing it is a failure; asserted over a compact and
/// a sparse placement ([`SPREAD`]). Controls: nothing between (must trip),
/// and `fence` (`fence.acq_rel`: OpenSHMEM orders only puts to one PE with
/// it) instead of `quiet`, its runs alternating compact and sparse cells.
/// With concurrent PEs the two sides run each round in lock-step.
pub fn store_buffering() -> TestResult {
    let start = Instant::now();
    let instances = scaled(SB_INSTANCES);
    if let Some(why) = smoke_only() {
        println!("  SMOKE TEST, not litmus evidence ({why}): the controls run once and are not asserted");
    }
    let spread = |k: u64| if k.is_multiple_of(2) { 1 } else { SPREAD };
    let rows = threads(PES, HEAP, |shmem| {
        let rig = Rig::new(shmem, instances, SPREAD, "litmus_sb")?;
        let tag = |order: u32, k: u64| 0x5B_0000_0000 | (order as u64) << 16 | k;
        let quiet = ordered_runs(shmem, 2, |k| sb_launch(&rig, 2, tag(2, k), instances, spread(k)))?;
        let nothing = control_runs(shmem, |k| sb_launch(&rig, 0, tag(0, k), instances, 1))?;
        let fence = control_runs(shmem, |k| sb_launch(&rig, 1, tag(1, k), instances, spread(k)))?;
        Ok((rig.sliced, [quiet, nothing, fence]))
    })?;
    let (sliced, [quiet, nothing, fence]) = &rows[0];
    let mut failures = Vec::new();
    check_ran("SB with quiet", quiet, &mut failures);
    if quiet.violations != 0 {
        failures.push(format!(
            "SB with quiet: in {} of {} rounds both sides missed the other's write",
            quiet.violations, quiet.observed
        ));
    }
    println!(
        "  SB p; quiet; g ({}, {PES} PEs, {}, seed {}): {} instances × {SB_ROUNDS} rounds, compact and sparse cells: \
         {} both-missed in {} observed rounds (of {} run)",
        mode(*sliced),
        if *sliced { "free-running" } else { "lock-step rounds" },
        seed(),
        instances,
        quiet.violations,
        quiet.observed,
        quiet.sent
    );
    judge(Ctl::SbNothing, nothing, "rounds", &mut failures);
    judge(Ctl::SbFence, fence, "rounds", &mut failures);
    println!("  in {:.1?}", start.elapsed());
    fail_if_any(&failures)
}

/// One `litmus_get_after_barrier` launch with `order` ([`GET_BARRIER_ALL`] …),
/// placement from stream `tag`; this PE's part (sent: this PE's gets).
fn get_launch(rig: &Rig, order: u32, tag: u64) -> gpushmem::Result<Tally> {
    let (shmem, stream) = (rig.shmem, rig.shmem.stream());
    let me = shmem.my_pe();
    // A barrier costs a round trip: time-sliced, 16 wide rounds instead of 64.
    let (count, rounds) = if rig.sliced { (scaled(65536), 16u32) } else { (scaled(16384), 64u32) };
    let insts = place(tag, count, 1);
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
    // SAFETY: the arguments of `litmus_get_after_barrier`.
    let o = unsafe { rig.launch(one_block(512), args)? };
    let gets = g.len() as u64 * rounds as u64;
    // Every get of every round is checked: `ran` counts them against `tasks`.
    Ok(Tally {
        violations: o[0],
        observed: o[1],
        sent: gets,
        ran: o[1],
        tasks: gets,
        timeouts: o[2],
        ..Tally::default()
    })
}

/// Get after a remote `quiet` + barrier: writer W `put_nbi`s a round-tagged
/// pair to target T; `barrier_all_block` (quiet, then all arrive); getter G
/// (≠ W) `get`s the pair from T: it must be this round's. Controls: no
/// inter-PE sync at all (a plain race: must show stale reads, or the test
/// could not see any); `sync_all_block` (arrival without completion:
/// OpenSHMEM allows a stale get); an arrival with no fence at all.
pub fn get_after_quiet_barrier() -> TestResult {
    let start = Instant::now();
    if let Some(why) = smoke_only() {
        println!("  SMOKE TEST, not litmus evidence ({why}): the controls run once and are not asserted");
    }
    let rows = threads(PES, HEAP, |shmem| {
        let rig = Rig::new(shmem, scaled(65536), 1, "litmus_get_after_barrier")?;
        let tag = |order: u32, k: u64| 0x6E_0000_0000 | (order as u64) << 16 | k;
        let barrier = ordered_runs(shmem, 1, |k| get_launch(&rig, GET_BARRIER_ALL, tag(GET_BARRIER_ALL, k)))?;
        let mut controls = Vec::new();
        for order in [GET_NO_BARRIER, GET_SYNC_ALL, GET_UNFENCED] {
            controls.push(control_runs(shmem, |k| get_launch(&rig, order, tag(order, k)))?);
        }
        Ok((rig.sliced, barrier, controls))
    })?;
    let (sliced, barrier, controls) = &rows[0];
    let mut failures = Vec::new();
    check_ran("get after barrier_all", barrier, &mut failures);
    if barrier.violations != 0 {
        failures.push(format!(
            "get after put_nbi + barrier_all: {} of {} gets returned stale data",
            barrier.violations, barrier.observed
        ));
    }
    println!(
        "  get after put_nbi + quiet + barrier ({}, {PES} PEs, random writer/target/getter and cells, seed {}): \
         barrier_all: {} stale in {} observed gets (of {} sent)",
        mode(*sliced),
        seed(),
        barrier.violations,
        barrier.observed,
        barrier.sent
    );
    for (ctl, t) in [Ctl::GetNoBarrier, Ctl::GetSyncAll, Ctl::GetUnfenced].into_iter().zip(controls) {
        judge(ctl, t, "gets", &mut failures);
    }
    println!("  in {:.1?}", start.elapsed());
    fail_if_any(&failures)
}
