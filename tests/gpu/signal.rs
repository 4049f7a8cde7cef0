//! Signals: a producer/consumer ring through every put-with-signal form (SET
//! and ADD, acknowledgements by `signal_op`), every payload word checked; a
//! `signal_wait_until` that is never satisfied ends with the timeout message;
//! strided `iput`/`iget` in every group form, positive and negative strides,
//! poisoned destinations, every element checked.

use crate::common::*;
use gpushmem::{LaunchConfig, Shmem};
use std::time::{Duration, Instant};

/// (code in the kernel `p2p_pipeline`, name)
const FORMS: &[(u32, &str)] = &[
    (0, "put_signal::<u32>"),
    (1, "put_signal_nbi::<u32>"),
    (2, "put_signal_warp::<u32>"),
    (3, "putmem_signal_nbi_warp"),
    (4, "putmem_signal_block"),
    (5, "put_signal_nbi_block::<u32>"),
    (6, "putmem_signal"),
    (7, "putmem_signal_nbi"),
    (8, "put_signal_block::<u32>"),
    (9, "put_signal_nbi_warp::<u32>"),
];

/// One pipeline run: `msgs` messages of `words` u32 with put-signal form `form` and signal op `op` (0 SET, 1 ADD).
struct Run {
    form: u32,
    op: u32,
    msgs: u32,
    words: u32,
}

/// Ring buffer slots per receiver.
const SLOTS: u32 = 16;

impl Run {
    fn name(&self) -> String {
        format!(
            "{} {} × {} B {}",
            FORMS[self.form as usize].1,
            self.msgs,
            self.words * 4,
            if self.op == 0 { "SET" } else { "ADD" }
        )
    }
}

/// The first run is the long one (10^5 messages); then every form with 10^4,
/// SET and ADD each on thread, warp and block forms, sizes from 20 B to 1 KiB
/// (odd word counts exercise the copy's ragged tails). Quick mode: 10^3 and 10^2.
fn runs() -> Vec<Run> {
    let r = |form, op, msgs: usize, words| Run { form, op, msgs: scaled(msgs) as u32, words };
    vec![
        r(1, 0, 100_000, 16),
        r(0, 1, 10_000, 16),
        r(0, 0, 10_000, 16),
        r(1, 1, 10_000, 16),
        r(2, 0, 10_000, 64),
        r(3, 1, 10_000, 67),
        r(4, 1, 10_000, 256),
        r(5, 0, 10_000, 259),
        r(6, 0, 10_000, 5),
        r(7, 1, 10_000, 16),
        r(8, 0, 10_000, 128),
        r(9, 1, 10_000, 33),
    ]
}

/// Runs every pipeline run on this PE; returns the time of each (launch to
/// synchronize) and the failures seen.
fn pipeline_on_pe(shmem: &Shmem, runs: &[Run]) -> gpushmem::Result<(Vec<Duration>, Vec<String>)> {
    let me = shmem.my_pe();
    let n = shmem.n_pes();
    let max_words = runs.iter().map(|r| r.words).max().unwrap_or(1) as usize;
    let buf = shmem.malloc::<u32>(2 * SLOTS as usize * max_words)?;
    let ctl_len = SLOTS as usize + 5;
    let ctl = shmem.calloc::<u64>(ctl_len)?;
    let module = kernels(shmem)?;
    let k = module.kernel("p2p_pipeline")?;
    let cfg = LaunchConfig { grid_dim: (2, 1, 1), block_dim: (128, 1, 1), shared_mem_bytes: 0 };
    let mut times = Vec::new();
    let mut failures = Vec::new();
    for run in runs {
        // Signals and acks start at zero on every PE before any PE sends.
        shmem.write(&ctl, &vec![0u64; ctl_len])?;
        shmem.bootstrap().barrier()?;
        let start = Instant::now();
        let args = (buf.as_kernel_ptr(), ctl.as_kernel_ptr(), run.msgs, SLOTS, run.words, run.form, run.op);
        unsafe { shmem.launch_collective(&k, cfg, args)? };
        shmem.synchronize()?;
        times.push(start.elapsed());
        let out = shmem.read_at(&ctl, SLOTS as usize + 1, 4)?;
        let (recv_errors, received, send_errors, sent) = (out[0], out[1], out[2], out[3]);
        if recv_errors != 0 || received != run.msgs as u64 || send_errors != 0 || sent != run.msgs as u64 {
            failures.push(format!(
                "PE {me}/{n} {}: receiver saw {recv_errors} wrong payload words or signal values and finished {received} \
                 messages; sender finished {sent} messages, final ack wrong: {send_errors}",
                run.name()
            ));
        }
        shmem.bootstrap().barrier()?;
    }
    shmem.free(ctl)?;
    shmem.free(buf)?;
    Ok((times, failures))
}

/// `n` PEs in a ring, each sending to the next: 10^5 messages with
/// `put_signal_nbi` (SET), then every put-signal form with 10^4 (quick mode: / 100).
pub fn pipeline(n: usize) -> TestResult {
    let runs = runs();
    let per_pe = threads(n, 16 << 20, |shmem| pipeline_on_pe(shmem, &runs))?;
    let failures: Vec<String> = per_pe.iter().flat_map(|(_, f)| f.iter().cloned()).collect();
    fail_if_any(&failures)?;
    // The slowest PE's time per run.
    let slowest = |i: usize| per_pe.iter().map(|(t, _)| t[i]).max().unwrap_or_default();
    let first = slowest(0);
    let rest: Duration = (1..runs.len()).map(slowest).sum();
    println!(
        "  pipeline {n} PEs: {} in {first:.1?} ({:.2} µs/message); {} more runs (every put_signal form, SET/ADD) \
         in {rest:.1?}; every payload word and signal checked, 0 errors",
        runs[0].name(),
        first.as_secs_f64() * 1e6 / runs[0].msgs as f64,
        runs.len() - 1
    );
    Ok(())
}

/// Child scenario `signal_wait_timeout`: one PE waits for a signal that never
/// comes; prints the signal's address first (`SIGNAL-AT 0x…`).
pub fn signal_wait_timeout_child() -> gpushmem::Result<()> {
    let shmem = Shmem::init()?;
    let m = kernels(&shmem)?;
    let sig = shmem.calloc::<u64>(1)?;
    println!("SIGNAL-AT 0x{:x}", sig.as_kernel_ptr());
    unsafe { shmem.launch(&m.kernel("signal_wait_forever")?, one_block(32), (sig.as_kernel_ptr(),))? };
    shmem.synchronize()?;
    println!("NO ERROR: the kernel returned normally");
    Ok(())
}

/// `signal_wait_until(sig, ==, 1)` with a 1 s timeout and no signal: the
/// kernel traps with a message naming the PE, the signal's address, the
/// awaited condition and the last value seen (run in a child: the trap poisons the context).
pub fn signal_wait_times_out() -> TestResult {
    let (_, text, took) =
        crate::errors::child("signal_wait_timeout", &[("GPUSHMEM_TIMEOUT", "1")], Duration::from_secs(60))?;
    let addr = text
        .lines()
        .find_map(|l| l.strip_prefix("SIGNAL-AT "))
        .map(|a| a.trim().to_string())
        .ok_or_else(|| format!("signal_wait_timeout: no SIGNAL-AT line in its output:\n{text}"))?;
    let needles = [
        "gpushmem: PE 0: ".to_string(),
        "timed out after 1000 ms".to_string(),
        format!("waiting at {addr} for a value == 1 (last seen 0)"),
        "HOST-SAW-ERROR".to_string(),
    ];
    for n in &needles {
        if !text.contains(n.as_str()) {
            return Err(format!("signal_wait_timeout: expected {n:?} in its output:\n{text}").into());
        }
    }
    println!(
        "  signal_wait_timeout ({took:.1?}): {}",
        text.lines().filter(|l| l.contains("gpushmem")).take(3).collect::<Vec<_>>().join(" | ")
    );
    Ok(())
}

/// (code in the kernels `strided_ring_*`, name, is a get)
const STRIDED_OPS: &[(u32, &str, bool)] = &[
    (0, "iput", false),
    (1, "iput_warp", false),
    (2, "iput_block", false),
    (3, "iget", true),
    (4, "iget_warp", true),
    (5, "iget_block", true),
];

/// (elements, destination stride, source stride), strides in elements.
/// Quick mode drops the cases of more than [`QUICK_MAX_BYTES`] of u64 (the 50 000-element one).
const STRIDED_CASES: &[(usize, i64, i64)] = &[
    (0, 2, 3),
    (1, 1, 1),
    (1, -4, 7),
    (5, 2, 3),
    (1000, 1, 3),
    (1000, 3, 1),
    (777, 2, 5),
    (4099, 7, 2),
    (50_000, 1, 1),
    (1000, -2, 3),
    (999, 3, -1),
    (100, -1, -1),
    (513, -5, -2),
];

/// Elements a strided range of `n` elements with stride `s` spans (1 for n = 0).
fn span(n: usize, s: i64) -> usize {
    n.saturating_sub(1) * s.unsigned_abs() as usize + 1
}

/// Index, in the spanned range, of element `i` (element 0 is at the high end for a negative stride).
fn pos(n: usize, s: i64, i: usize) -> usize {
    let first = if s < 0 { n.saturating_sub(1) * s.unsigned_abs() as usize } else { 0 };
    (first as i64 + i as i64 * s) as usize
}

/// Whether a strided case of `nel` elements runs in this mode (the same answer for u16 and u64).
fn strided_case_runs(nel: usize) -> bool {
    within_cap(nel * 8)
}

fn elements<T: bytemuck::Pod>(seed: u64, stream: u64, len: usize) -> Vec<T> {
    let size = std::mem::size_of::<T>();
    random_bytes(seed, stream, len * size).chunks(size).map(bytemuck::pod_read_unaligned).collect()
}

fn strided_on_pe<T: bytemuck::Pod + PartialEq + std::fmt::Debug>(
    shmem: &Shmem,
    kernel: &str,
    type_tag: u64,
) -> gpushmem::Result<Vec<String>> {
    let n = shmem.n_pes();
    let me = shmem.my_pe();
    let size = std::mem::size_of::<T>();
    let max_src = STRIDED_CASES.iter().map(|&(e, _, s)| span(e, s)).max().unwrap_or(1);
    let max_dst = STRIDED_CASES.iter().map(|&(e, d, _)| span(e, d)).max().unwrap_or(1);
    let src = shmem.malloc::<T>(max_src)?;
    let dst = shmem.malloc::<T>(max_dst)?;
    let module = kernels(shmem)?;
    let k = module.kernel(kernel)?;
    let mut failures = Vec::new();
    for (ci, &(nel, ds, ss)) in STRIDED_CASES.iter().enumerate() {
        if !strided_case_runs(nel) {
            continue;
        }
        let (slen, dlen) = (span(nel, ss), span(nel, ds));
        for &(op, name, is_get) in STRIDED_OPS {
            let stream_of = |pe: usize| type_tag << 48 | (ci as u64) << 32 | (op as u64) << 16 | pe as u64;
            // put: I receive from me - 1; get: I fetch from me + 1.
            let from = if is_get { (me + 1) % n } else { (me + n - 1) % n };
            let mine: Vec<T> = elements(seed(), stream_of(me), slen);
            let theirs: Vec<T> = elements(seed(), stream_of(from), slen);
            // Gaps keep their random poison; written places start as the bitwise NOT of what should arrive.
            let mut want: Vec<T> = elements(seed(), stream_of(me) | 1 << 47, dlen);
            let mut init = want.clone();
            for i in 0..nel {
                let v = theirs[pos(nel, ss, i)];
                let p = pos(nel, ds, i);
                want[p] = v;
                let not: Vec<u8> = bytemuck::bytes_of(&v).iter().map(|b| !b).collect();
                init[p] = bytemuck::pod_read_unaligned(&not);
            }
            shmem.write_at(&src, 0, &mine)?;
            shmem.write_at(&dst, 0, &init)?;
            shmem.bootstrap().barrier()?;
            let d0 = dst.as_kernel_ptr() + (pos(nel, ds, 0) * size) as u64;
            let s0 = src.as_kernel_ptr() + (pos(nel, ss, 0) * size) as u64;
            unsafe { shmem.launch_collective(&k, one_block(128), (op, d0, s0, ds, ss, nel as u64, 1u32))? };
            shmem.synchronize()?;
            let got = shmem.read_at(&dst, 0, dlen)?;
            let bad: Vec<usize> = (0..dlen).filter(|&i| got[i] != want[i]).collect();
            if let Some(&i) = bad.first() {
                failures.push(format!(
                    "PE {me}/{n}: {name}::<{}> nelems={nel} dst={ds} sst={ss}: {} of {dlen} elements wrong; \
                     first at {i}: got {:?}, want {:?}",
                    std::any::type_name::<T>(),
                    bad.len(),
                    got[i],
                    want[i]
                ));
            }
            shmem.bootstrap().barrier()?;
        }
    }
    shmem.free(dst)?;
    shmem.free(src)?;
    Ok(failures)
}

/// Strided put/get around a ring of `n` PEs, u16 and u64 elements.
pub fn strided_ring(n: usize) -> TestResult {
    let start = Instant::now();
    let per_pe = threads(n, 16 << 20, |shmem| {
        let mut f = strided_on_pe::<u16>(shmem, "strided_ring_u16", 16)?;
        f.extend(strided_on_pe::<u64>(shmem, "strided_ring_u64", 64)?);
        Ok(f)
    })?;
    let all: Vec<String> = per_pe.into_iter().flatten().collect();
    fail_if_any(&all)?;
    println!(
        "  strided ring {n} PEs: {} cases × {} ops × 2 types (u16, u64), strides -5..7, every element checked, in {:.1?}",
        STRIDED_CASES.iter().filter(|c| strided_case_runs(c.0)).count(),
        STRIDED_OPS.len(),
        start.elapsed()
    );
    Ok(())
}
