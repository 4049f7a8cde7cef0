//! MoE-style token dispatch and combine with `put_signal_nbi`.
//!
//! Every PE holds `TOKENS` tokens of `HIDDEN` `f32`. Each round, every token
//! is routed to an "expert" PE by a deterministic hash of (PE, token, round).
//! The PEs exchange their per-expert counts (each PE's row of the count
//! matrix to every PE, `put_signal`), compute where each source's tokens
//! land in each expert's receive buffer, and send every token there with
//! `put_signal_nbi_warp` (signal ADD 1 per token; the expert waits for as
//! many as the count matrix announces). The expert multiplies each token by
//! `expert + 1` and sends it back to its original row on its owner (again
//! `put_signal_nbi_warp`, ADD 1), and the owner waits until all of its tokens
//! are back. A check launch adds every round's results into an accumulator
//! that every PE compares, element by element, with a CPU reference.
//!
//! The tokens are split into channels (one block each; block `b` of every PE
//! talks only to block `b` of the others). PE 0 prints rounds/s, tokens/s and
//! GB/s of the slowest PE.
//!
//! `cargo run --release --example moe [-- PES [TOKENS [HIDDEN [CHANNELS]]]]`
//! runs PEs as threads (default: one per GPU, at least 2); under
//! `gpushmem-run -n N` each process is one PE (`PES` is then ignored). Exit
//! status 0 iff every check passed on every PE; 2 without a GPU.

#[path = "common/mod.rs"]
mod common;
// The kernel crate's routing hash, the very file: the expected results use it.
#[path = "moe-kernels/src/route.rs"]
mod route;

use common::gather;
use gpushmem::{LaunchConfig, Shmem};
use route::route;
use std::process::ExitCode;
use std::time::Instant;

const PTX: &str = include_str!(env!("GPUSHMEM_PTX_MOE_KERNELS"));
const CUBIN: &[u8] = include_bytes!(env!("GPUSHMEM_CUBIN_MOE_KERNELS"));

/// Threads per channel (block): 8 warps, each moving one token at a time.
const THREADS: u32 = 256;
/// Rounds of the untimed warm-up, the timed launch and the check launch.
const WARMUP_ROUNDS: u64 = 3;
const TIMED_ROUNDS: u64 = 50;
const CHECK_ROUNDS: u64 = 4;

/// Element `h` of token `t` on PE `pe`: a small integer, so the products and sums are exact.
fn token_value(pe: usize, t: usize, h: usize) -> f32 {
    ((t * 5 + h * 3 + pe * 11) % 13) as f32 + 1.0
}

#[derive(Clone, Copy)]
struct Shape {
    tokens: usize,
    hidden: usize,
    channels: usize,
}

/// Runs the warm-up, timed and check launches on this PE; returns whether every PE's check passed.
fn moe(shmem: &Shmem, shape: Shape, mode: &str) -> gpushmem::Result<bool> {
    let (me, n) = (shmem.my_pe(), shmem.n_pes());
    let Shape { tokens, hidden, channels } = shape;
    let per_token = tokens * hidden;
    let cap = n * tokens.div_ceil(channels);
    let module = shmem.load_module_prebuilt("moe-kernels", PTX, CUBIN)?;
    let kernel = module.kernel("moe_rounds")?;
    // [x; out; acc], each tokens × hidden.
    let buf = shmem.malloc::<f32>(3 * per_token)?;
    let mut host = vec![0.0f32; 3 * per_token];
    for t in 0..tokens {
        for h in 0..hidden {
            host[t * hidden + h] = token_value(me, t, h);
        }
    }
    shmem.write(&buf, &host)?;
    let recv = shmem.malloc::<f32>(channels * cap * hidden)?;
    let meta = shmem.malloc::<u64>(channels * cap)?;
    let scratch = shmem.malloc::<u32>(2 * tokens + channels * n)?;
    let counts = shmem.malloc::<u32>(2 * channels * n * n)?;
    // Zeroed once: the signals only grow (round numbers, token counters).
    let sigs = shmem.calloc::<u64>(2 * channels * n + 4 * channels)?;
    let cfg = LaunchConfig { grid_dim: (channels as u32, 1, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 };
    let shape_arg = (tokens as u64) << 32 | hidden as u64;
    let launch = |first: u64, rounds: u64, check: u32| {
        // SAFETY: the arguments match `moe_rounds(tokens: Sym<f32>, recv: Sym<f32>,
        // meta: Sym<u64>, scratch: Sym<u32>, counts: Sym<u32>, sigs: Sym<u64>, shape,
        // first, rounds, check)` (each `&SymSlice` arrives as its `Sym`); every PE makes
        // the same launches in the same order with the same numbers.
        unsafe {
            shmem.launch_collective(
                &kernel,
                cfg,
                (&buf, &recv, &meta, &scratch, &counts, &sigs, shape_arg, first, rounds, check),
            )
        }
    };
    let mut next = 1u64;
    launch(next, WARMUP_ROUNDS, 0)?;
    next += WARMUP_ROUNDS;
    shmem.barrier_all()?;
    let t = Instant::now();
    launch(next, TIMED_ROUNDS, 0)?;
    next += TIMED_ROUNDS;
    shmem.synchronize()?;
    let secs = t.elapsed().as_secs_f64() / TIMED_ROUNDS as f64;

    let first = next;
    launch(first, CHECK_ROUNDS, 1)?;
    shmem.synchronize()?;
    let acc = shmem.read_at(&buf, 2 * per_token, per_token)?;
    let mut wrong_tokens = 0;
    for t in 0..tokens {
        let factor: f32 =
            (first..first + CHECK_ROUNDS).map(|r| (route(me as u32, t as u32, r, n as u32) + 1) as f32).sum();
        let bad = (0..hidden).find(|&h| acc[t * hidden + h] != token_value(me, t, h) * factor);
        if let Some(h) = bad {
            if wrong_tokens == 0 {
                common::say(format_args!(
                    "moe: PE {me}: token {t} element {h}: {} instead of {}",
                    acc[t * hidden + h],
                    token_value(me, t, h) * factor
                ));
            }
            wrong_tokens += 1;
        }
    }
    if wrong_tokens > 0 {
        common::say(format_args!("moe: PE {me}: {wrong_tokens} of {tokens} tokens came back WRONG"));
    }
    let (slowest, every) = gather(shmem, secs, wrong_tokens == 0)?;
    if me == 0 {
        let bytes = 2.0 * (per_token * 4) as f64;
        println!(
            "moe: {n} PEs ({mode}), {tokens} tokens × {hidden} f32 per PE, {channels} channels of {THREADS} threads"
        );
        println!(
            "moe: {TIMED_ROUNDS} rounds (count exchange + dispatch + expert + combine): {:.1} us per round (slowest PE)",
            slowest * 1e6
        );
        println!(
            "moe: {:.2} M tokens/s per PE ({:.2} M tokens/s in all), {:.1} GB/s per PE moved (dispatch + combine, \
             tokens routed to their own PE included)",
            tokens as f64 / slowest / 1e6,
            (tokens * n) as f64 / slowest / 1e6,
            bytes / slowest / 1e9
        );
        println!(
            "moe: check ({CHECK_ROUNDS} rounds, every element of every token on every PE): {}",
            if every { "ok" } else { "WRONG" }
        );
    }
    shmem.barrier_all()?;
    shmem.free(sigs)?;
    shmem.free(counts)?;
    shmem.free(scratch)?;
    shmem.free(meta)?;
    shmem.free(recv)?;
    shmem.free(buf)?;
    Ok(every)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, default: usize| common::arg(&args, i, default);
    let shape = match (arg(1, 4096), arg(2, 1024), arg(3, 8)) {
        (Some(tokens), Some(hidden), Some(channels))
            if hidden % 4 == 0 && tokens < u32::MAX as usize && hidden < u32::MAX as usize =>
        {
            Shape { tokens, hidden, channels: channels.min(tokens) }
        }
        _ => return common::usage("moe [PES [TOKENS [HIDDEN [CHANNELS]]]]  (all > 0, HIDDEN a multiple of 4)"),
    };
    common::run(
        "moe",
        &args,
        "every token on every PE came back right",
        "some tokens came back WRONG (see above)",
        |s, mode, _| moe(s, shape, mode),
    )
}
