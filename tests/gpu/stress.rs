//! Stress (kernel: tests/kernels/src/stress.rs): 8 PEs as threads run
//! random operations — put/get in thread, warp and block forms, blocking and
//! nbi, `p`/`g`, typed forms, atomic add/fetch_add/inc/xor, put-with-signal
//! and `signal_op` (ADD) — of random sizes (1 B to 64 KiB; thread forms to
//! 4 KiB) at random offsets and alignments, towards random PEs, 10^4 rounds
//! (100 per launch; quick mode: 100 rounds, one launch). After every round
//! each PE checksums its whole arena on the device; the host compares every
//! checksum with a CPU model that applies the same operations, and at the end
//! compares the arenas byte for byte. `GPUSHMEM_SOAK_MINUTES=N` runs it for N minutes instead.
//!
//! The content stays deterministic: in round r, PE s puts only into its own
//! region of half r % 2 of each target's arena, its operations of one round
//! never overlap, gets read half (r + 1) % 2 (not written in round r) into
//! the getter's own get buffer, and the atomics and signals only add or xor
//! (order-independent).

use crate::common::*;
use crate::litmus::Rng;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use stress_ops::*;

// The record layout, the kinds and the checksum term: the kernel crate's very file.
#[path = "../kernels/src/stress_ops.rs"]
mod stress_ops;

const PES: usize = 8;
/// Warps of the one block per PE (the kernel uses ~255 registers: at most 256 threads).
const WARPS: usize = 8;
/// Operation slots per PE per round.
const OPS: usize = 12;
/// Bytes of one source PE's region in one half of each arena.
const REG: usize = 96 << 10;
const HALF: usize = PES * REG;
const GBUF: usize = 128 << 10;
const CTRS: usize = 256;
const OFF_GBUF: usize = 2 * HALF;
const OFF_ADD: usize = OFF_GBUF + GBUF;
const OFF_XOR: usize = OFF_ADD + 8 * CTRS;
const OFF_SIG: usize = OFF_XOR + 8 * CTRS;
const ARENA: usize = OFF_SIG + 8 * CTRS;
/// The checksummed parts of an arena: (offset, bytes, name), in address order.
const PARTS: [(usize, usize, &str); 6] = [
    (0, HALF, "region half 0"),
    (HALF, HALF, "region half 1"),
    (OFF_GBUF, GBUF, "get buffer"),
    (OFF_ADD, 8 * CTRS, "add counters"),
    (OFF_XOR, 8 * CTRS, "xor counters"),
    (OFF_SIG, 8 * CTRS, "signals"),
];
/// Bytes of each PE's put source (static random data).
const SRC: usize = 1 << 20;
const ROUNDS_PER_LAUNCH: usize = 100;
const ROUNDS: usize = 10_000;
const HEAP: u64 = 16 << 20;

/// An empty slot: no kind, a warp number no warp has.
const EMPTY: [u64; REC] = [head(0xFF, 0, 0, 0xFE), 0, 0, 0, 0, 0];

#[derive(Clone, Copy, PartialEq)]
enum Group {
    Thread,
    Warp,
    Block,
}

fn group(kind: u64) -> Group {
    match kind {
        PUT_WARP | PUT_NBI_WARP | GET_WARP | GET_NBI_WARP | GET_U64_WARP | PUT_SIGNAL_WARP | PUT_SIGNAL_NBI_WARP => {
            Group::Warp
        }
        PUT_BLOCK | PUT_NBI_BLOCK | GET_BLOCK | GET_NBI_BLOCK | PUT_SIGNAL_BLOCK | PUT_SIGNAL_NBI_BLOCK => Group::Block,
        _ => Group::Thread,
    }
}

fn is_put(kind: u64) -> bool {
    matches!(kind, PUT | PUT_NBI | PUT_WARP | PUT_NBI_WARP | PUT_BLOCK | PUT_NBI_BLOCK | PUT_NBI_U32)
        || is_put_signal(kind)
}

fn is_put_signal(kind: u64) -> bool {
    matches!(
        kind,
        PUT_SIGNAL | PUT_SIGNAL_NBI | PUT_SIGNAL_WARP | PUT_SIGNAL_NBI_WARP | PUT_SIGNAL_BLOCK | PUT_SIGNAL_NBI_BLOCK
    )
}

fn is_get(kind: u64) -> bool {
    matches!(kind, GET | GET_NBI | GET_WARP | GET_NBI_WARP | GET_BLOCK | GET_NBI_BLOCK | GET_U64_WARP)
}

fn has_signal(kind: u64) -> bool {
    is_put_signal(kind) || kind == SIGNAL_ADD
}

/// A size: mostly small, some up to `max`.
fn size(rng: &mut Rng, max: usize) -> usize {
    let (lo, hi) = match rng.below(100) {
        0..45 => (1, 64),
        45..80 => (65, 2048),
        80..95 => (2049, 16384),
        _ => (16385, 65536),
    };
    let hi = hi.min(max);
    let lo = lo.min(hi);
    lo + rng.below(hi - lo + 1)
}

/// Places `n` bytes (aligned to `align`) after `*cur` plus a random gap, within `cap`.
fn alloc(rng: &mut Rng, cur: &mut usize, cap: usize, n: usize, align: usize) -> Option<usize> {
    let off = (*cur + rng.below(64)).next_multiple_of(align);
    if off + n > cap {
        return None;
    }
    *cur = off + n;
    Some(off)
}

/// PE `s`'s operation records of round `r` (at most [`OPS`]).
fn round_ops(s: usize, r: usize) -> Vec<[u64; REC]> {
    let mut rng = Rng::new(seed(), 0x5_7E55 << 44 ^ (s as u64) << 36 ^ r as u64);
    let (hw, hr) = (r % 2, 1 - r % 2);
    let mut cur = [0usize; PES];
    let mut gcur = 0usize;
    let mut recs = Vec::new();
    for _ in 0..OPS / 2 + rng.below(OPS / 2 + 1) {
        let kind = rng.below(KINDS) as u64;
        let t = rng.below(PES);
        let grp = group(kind);
        let mut n = size(&mut rng, if grp == Group::Thread { 4096 } else { 65536 });
        let mut rec = [0u64; REC];
        let placed = if is_put(kind) {
            let align = if kind == PUT_NBI_U32 { 4 } else { 1 };
            n = n.next_multiple_of(align);
            alloc(&mut rng, &mut cur[t], REG, n, align).map(|off| {
                let src = rng.below(SRC - n + 1) / align * align;
                rec[1..4].copy_from_slice(&[(hw * HALF + s * REG + off) as u64, src as u64, n as u64]);
            })
        } else if is_get(kind) {
            let align = if kind == GET_U64_WARP { 8 } else { 1 };
            n = n.next_multiple_of(align);
            alloc(&mut rng, &mut gcur, GBUF, n, align).map(|off| {
                let src = hr * HALF + rng.below(HALF - n + 1) / align * align;
                rec[1..4].copy_from_slice(&[(OFF_GBUF + off) as u64, src as u64, n as u64]);
            })
        } else {
            match kind {
                P => alloc(&mut rng, &mut cur[t], REG, 8, 8).map(|off| {
                    rec[1] = (hw * HALF + s * REG + off) as u64;
                    rec[3] = rng.next();
                }),
                G => alloc(&mut rng, &mut gcur, GBUF, 8, 8).map(|off| {
                    rec[1] = (OFF_GBUF + off) as u64;
                    rec[2] = (hr * HALF + 8 * rng.below(HALF / 8)) as u64;
                }),
                ADD | FETCH_ADD | INC | XOR => {
                    let base = if kind == XOR { OFF_XOR } else { OFF_ADD };
                    rec[1] = (base + 8 * rng.below(CTRS)) as u64;
                    rec[3] = rng.next();
                    Some(())
                }
                _ => Some(()), // SIGNAL_ADD: the signal below
            }
        };
        if placed.is_none() {
            continue;
        }
        if has_signal(kind) {
            rec[4] = (OFF_SIG + 8 * rng.below(CTRS)) as u64;
            rec[5] = 1 + rng.below(1000) as u64;
        }
        let warp = if grp == Group::Block { BLOCK } else { rng.below(WARPS) as u64 };
        rec[0] = head(kind, t as u64, rng.below(32) as u64, warp);
        recs.push(rec);
    }
    recs
}

/// The arenas as they should be, with each part's checksum kept up to date.
struct Model {
    mem: Vec<Vec<u8>>,
    src: Vec<Vec<u8>>,
    sums: Vec<[u64; 6]>,
}

fn initial_arena(pe: usize) -> Vec<u8> {
    random_bytes(seed(), 0xA7E_0000 | pe as u64, ARENA)
}

fn source(pe: usize) -> Vec<u8> {
    random_bytes(seed(), 0x5C_0000 | pe as u64, SRC)
}

fn word(m: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(m[off..off + 8].try_into().unwrap())
}

/// Writes `data` at `off` of arena `m`, updating the checksum of its part.
fn write(m: &mut [u8], sums: &mut [u64; 6], off: usize, data: &[u8]) {
    let p = PARTS.iter().rposition(|q| off >= q.0).unwrap_or(0);
    let base = PARTS[p].0;
    let words = (off - base) / 8..(off + data.len() - base).div_ceil(8);
    let mut s = sums[p];
    for w in words.clone() {
        s = s.wrapping_sub(term(w as u64, word(m, base + 8 * w)));
    }
    m[off..off + data.len()].copy_from_slice(data);
    for w in words {
        s = s.wrapping_add(term(w as u64, word(m, base + 8 * w)));
    }
    sums[p] = s;
}

impl Model {
    fn new() -> Model {
        let mem: Vec<Vec<u8>> = (0..PES).map(initial_arena).collect();
        let sums = mem
            .iter()
            .map(|m| {
                PARTS.map(|(off, bytes, _)| {
                    (0..bytes / 8).fold(0u64, |s, w| s.wrapping_add(term(w as u64, word(m, off + 8 * w))))
                })
            })
            .collect();
        Model { mem, src: (0..PES).map(source).collect(), sums }
    }

    fn add_word(&mut self, pe: usize, off: usize, f: impl Fn(u64) -> u64) {
        let v = f(word(&self.mem[pe], off));
        write(&mut self.mem[pe], &mut self.sums[pe], off, &v.to_le_bytes());
    }

    /// Applies PE `s`'s record; returns the bytes it moved.
    fn apply(&mut self, s: usize, rec: &[u64; REC]) -> usize {
        let kind = kind(rec[0]);
        let t = pe(rec[0]) as usize;
        let (dst, src, n) = (rec[1] as usize, rec[2] as usize, rec[3] as usize);
        let moved = if is_put(kind) {
            write(&mut self.mem[t], &mut self.sums[t], dst, &self.src[s][src..src + n]);
            n
        } else if is_get(kind) || kind == G {
            let n = if kind == G { 8 } else { n };
            let data = self.mem[t][src..src + n].to_vec();
            write(&mut self.mem[s], &mut self.sums[s], dst, &data);
            n
        } else {
            match kind {
                P => write(&mut self.mem[t], &mut self.sums[t], dst, &rec[3].to_le_bytes()),
                ADD | FETCH_ADD => self.add_word(t, dst, |v| v.wrapping_add(rec[3])),
                INC => self.add_word(t, dst, |v| v.wrapping_add(1)),
                XOR => self.add_word(t, dst, |v| v ^ rec[3]),
                _ => {}
            }
            8
        };
        if has_signal(kind) {
            self.add_word(t, rec[4] as usize, |v| v.wrapping_add(rec[5]));
        }
        moved
    }

    /// The next `rounds` rounds from `first`: every PE's tables and checksums.
    fn batch(&mut self, first: usize, rounds: usize) -> Batch {
        let mut b = Batch {
            first,
            rounds,
            tables: (0..PES).map(|_| Vec::with_capacity(ROUNDS_PER_LAUNCH * OPS * REC)).collect(),
            sums: (0..PES).map(|_| Vec::with_capacity(rounds)).collect(),
            ops: 0,
            bytes: 0,
        };
        for r in first..first + rounds {
            for s in 0..PES {
                let recs = round_ops(s, r);
                for rec in &recs {
                    b.bytes += self.apply(s, rec);
                }
                b.ops += recs.len();
                let table = &mut b.tables[s];
                table.extend(recs.iter().chain(std::iter::repeat_n(&EMPTY, OPS - recs.len())).flatten());
            }
            for pe in 0..PES {
                b.sums[pe].push(self.sums[pe]);
            }
        }
        for t in &mut b.tables {
            t.resize(ROUNDS_PER_LAUNCH * OPS * REC, 0);
        }
        b
    }
}

/// One launch's worth of rounds.
struct Batch {
    first: usize,
    rounds: usize,
    /// Per PE: `ROUNDS_PER_LAUNCH × OPS` records (unused rounds zero, never run).
    tables: Vec<Vec<u64>>,
    /// Per PE, per round: each part's checksum after the round.
    sums: Vec<Vec<[u64; 6]>>,
    ops: usize,
    bytes: usize,
}

/// How long to run.
#[derive(Clone, Copy)]
enum Limit {
    Rounds(usize),
    Until(Instant),
}

/// The batches, made once by whichever PE thread asks first (while the GPU
/// runs the previous one), in order, from the one model.
struct Plan {
    limit: Limit,
    state: Mutex<PlanState>,
}

struct PlanState {
    model: Model,
    next: usize,
    batches: BTreeMap<usize, Option<Arc<Batch>>>,
    rounds: usize,
    ops: usize,
    bytes: usize,
    model_time: Duration,
    last_report: Instant,
}

impl Plan {
    fn new(limit: Limit) -> Plan {
        let t = Instant::now();
        let model = Model::new();
        let state = PlanState {
            model,
            next: 0,
            batches: BTreeMap::new(),
            rounds: 0,
            ops: 0,
            bytes: 0,
            model_time: t.elapsed(),
            last_report: Instant::now(),
        };
        Plan { limit, state: Mutex::new(state) }
    }

    /// Batch `b`, or `None` once the run is over (the same answer for every PE).
    fn batch(&self, b: usize) -> Option<Arc<Batch>> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        while st.next <= b {
            let i = st.next;
            let first = i * ROUNDS_PER_LAUNCH;
            let rounds = match self.limit {
                Limit::Rounds(n) => n.saturating_sub(first).min(ROUNDS_PER_LAUNCH),
                Limit::Until(end) if Instant::now() < end => ROUNDS_PER_LAUNCH,
                Limit::Until(_) => 0,
            };
            let t = Instant::now();
            let made = (rounds > 0).then(|| Arc::new(st.model.batch(first, rounds)));
            st.model_time += t.elapsed();
            if let Some(m) = &made {
                st.rounds += m.rounds;
                st.ops += m.ops;
                st.bytes += m.bytes;
            }
            if matches!(self.limit, Limit::Until(_)) && st.last_report.elapsed() > Duration::from_secs(60) {
                st.last_report = Instant::now();
                println!("  soak: {} rounds, {} operations made so far", st.rounds, st.ops);
            }
            st.batches.insert(i, made);
            st.next += 1;
            // A PE asks for batch b + 1 only after its launch of b, which
            // runs only when every PE has launched b - 1 (the kernel's
            // barriers): nobody asks for a batch below i - 2 any more.
            st.batches.retain(|&k, _| k + 4 > i);
        }
        st.batches.get(&b).cloned().flatten()
    }
}

/// Where byte `off` of an arena is, in words.
fn locate(off: usize) -> String {
    if off < OFF_GBUF {
        let (h, o) = (off / HALF, off % HALF);
        format!("half {h}, region of source PE {}, byte {}", o / REG, o % REG)
    } else {
        let p = PARTS.iter().rposition(|q| off >= q.0).unwrap_or(0);
        format!("{}, byte {}", PARTS[p].2, off - PARTS[p].0)
    }
}

/// Runs the plan on 8 PEs; returns (rounds, mismatches, first failures) summed over PEs.
fn run(plan: &Plan) -> Result<(usize, u64, Vec<String>), libtest_mimic::Failed> {
    let rows = threads(PES, HEAP, |shmem| {
        let me = shmem.my_pe();
        let stream = shmem.stream();
        let arena = shmem.align::<u8>(256, ARENA)?;
        let src = shmem.align::<u8>(256, SRC)?;
        shmem.write(&arena, &initial_arena(me))?;
        shmem.write(&src, &source(me))?;
        let module = kernels(shmem)?; // collective: every arena is written before anyone launches
        let k = module.kernel("stress_rounds")?;
        let parts: Vec<u64> = PARTS.iter().flat_map(|&(off, bytes, _)| [off as u64, bytes as u64 / 16]).collect();
        let parts_d = stream.clone_htod(&parts).cu("parts")?;
        let mut table_d = stream.alloc_zeros::<u64>(ROUNDS_PER_LAUNCH * OPS * REC).cu("table")?;
        let mut sums_d = stream.alloc_zeros::<u64>(ROUNDS_PER_LAUNCH * PARTS.len()).cu("sums")?;
        let (mut mismatches, mut failures, mut rounds) = (0u64, Vec::new(), 0usize);
        let mut b = 0;
        let mut cur = plan.batch(0);
        while let Some(batch) = cur {
            stream.memcpy_htod(&batch.tables[me], &mut table_d).cu("table")?;
            stream.memset_zeros(&mut sums_d).cu("sums")?;
            let args = (
                arena.as_kernel_ptr(),
                src.as_kernel_ptr(),
                dptr(&table_d, stream),
                OPS as u32,
                batch.rounds as u32,
                dptr(&parts_d, stream),
                PARTS.len() as u32,
                dptr(&sums_d, stream),
            );
            unsafe { shmem.launch_collective(&k, one_block(32 * WARPS as u32), args)? };
            let next = plan.batch(b + 1); // the model runs ahead while the GPU works
            shmem.synchronize()?;
            let got = stream.clone_dtoh(&sums_d).cu("sums")?;
            for (r, want) in batch.sums[me].iter().enumerate() {
                for (p, &w) in want.iter().enumerate() {
                    let g = got[r * PARTS.len() + p];
                    if g != w {
                        mismatches += 1;
                        if failures.len() < 8 {
                            let f = format!(
                                "PE {me}, round {}: {} checksum {g:#018x}, model {w:#018x}",
                                batch.first + r,
                                PARTS[p].2
                            );
                            println!("  MISMATCH {f}"); // at once: a soak may run for hours
                            failures.push(f);
                        }
                    }
                }
            }
            rounds += batch.rounds;
            cur = next;
            b += 1;
        }
        // The last round ended with barriers on every PE: nothing writes any more.
        let got = shmem.read(&arena)?;
        let st = plan.state.lock().unwrap_or_else(|p| p.into_inner());
        let want = &st.model.mem[me];
        if let Some(i) = got.iter().zip(want).position(|(g, w)| g != w) {
            let bad = got.iter().zip(want).filter(|(g, w)| g != w).count();
            mismatches += 1;
            failures.push(format!(
                "PE {me}, final arena: {bad} bytes differ from the model; first at {} ({}): got {:#04x}, want {:#04x}",
                i,
                locate(i),
                got[i],
                want[i]
            ));
        }
        Ok((rounds, mismatches, failures))
    })?;
    let rounds = rows[0].0;
    let mismatches = rows.iter().map(|r| r.1).sum();
    Ok((rounds, mismatches, rows.into_iter().flat_map(|r| r.2).collect()))
}

/// 8 PEs, 10^4 rounds (quick mode: 100) of random operations (or
/// `GPUSHMEM_SOAK_MINUTES` minutes): every round's checksum of every PE's
/// arena equals the model's, and the final arenas equal it byte for byte.
pub fn random_ops() -> TestResult {
    let start = Instant::now();
    let soak = std::env::var("GPUSHMEM_SOAK_MINUTES").ok().and_then(|m| m.parse::<f64>().ok());
    let limit = match soak {
        Some(m) => Limit::Until(Instant::now() + Duration::from_secs_f64(m * 60.0)),
        None => Limit::Rounds(scaled(ROUNDS)),
    };
    let plan = Plan::new(limit);
    let (rounds, mismatches, failures) = run(&plan)?;
    let st = plan.state.lock().unwrap_or_else(|p| p.into_inner());
    if mismatches != 0 {
        return Err(format!(
            "{mismatches} checksum mismatches (seed {}, {rounds} rounds):\n{}",
            seed(),
            failures.join("\n")
        )
        .into());
    }
    println!(
        "  stress {PES} PEs{}: {rounds} rounds in {} launches, {} operations ({} kinds: put/get thread/warp/block, \
         nbi, p/g, typed, atomics, put_signal/signal_op ADD), {:.1} MiB moved; {} checksums (every PE's {:.1} MiB \
         arena, every round) and the final arenas equal the CPU model, seed {}; {:.1?} (model {:.1?})",
        soak.map_or(String::new(), |m| format!(", soak {m} min")),
        rounds.div_ceil(ROUNDS_PER_LAUNCH),
        st.ops,
        KINDS,
        st.bytes as f64 / (1 << 20) as f64,
        rounds * PES * PARTS.len(),
        ARENA as f64 / (1 << 20) as f64,
        seed(),
        start.elapsed(),
        st.model_time
    );
    Ok(())
}
