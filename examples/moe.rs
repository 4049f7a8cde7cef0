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

use gpushmem::{LaunchConfig, Shmem, Threads};
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

/// The expert of token `token` of PE `pe` in `round`: the kernel crate's `route`, bit for bit.
fn route(pe: u32, token: u32, round: u64, n_pes: u32) -> u32 {
    let mut h =
        pe.wrapping_mul(0x9E37_79B1) ^ token.wrapping_mul(0x85EB_CA77) ^ (round as u32).wrapping_mul(0xC2B2_AE3D);
    h ^= h >> 16;
    h = h.wrapping_mul(0x7FEB_352D);
    h ^= h >> 15;
    h = h.wrapping_mul(0x846C_A68B);
    h ^= h >> 16;
    h % n_pes
}

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

/// The slowest PE's time and whether every PE passed (host all-gather over the bootstrap).
fn gather(shmem: &Shmem, secs: f64, ok: bool) -> gpushmem::Result<(f64, bool)> {
    let mut mine = secs.to_le_bytes().to_vec();
    mine.push(ok as u8);
    let all = shmem.bootstrap().allgather(&mine)?;
    Ok(all.iter().fold((0.0f64, true), |(slowest, every), b| {
        let s = f64::from_le_bytes(b[..8].try_into().expect("8 bytes of time"));
        (slowest.max(s), every && b[8] == 1)
    }))
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
        // SAFETY: the arguments match `moe_rounds`'s parameters; every buffer is a
        // symmetric allocation of the size its docs ask for (hidden a multiple of 4);
        // every PE makes the same launches in the same order with the same numbers.
        unsafe {
            shmem.launch_collective(
                &kernel,
                cfg,
                (
                    buf.as_kernel_ptr(),
                    recv.as_kernel_ptr(),
                    meta.as_kernel_ptr(),
                    scratch.as_kernel_ptr(),
                    counts.as_kernel_ptr(),
                    sigs.as_kernel_ptr(),
                    shape_arg,
                    first,
                    rounds,
                    check,
                ),
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
                eprintln!(
                    "moe: PE {me}: token {t} element {h}: {} instead of {}",
                    acc[t * hidden + h],
                    token_value(me, t, h) * factor
                );
            }
            wrong_tokens += 1;
        }
    }
    if wrong_tokens > 0 {
        eprintln!("moe: PE {me}: {wrong_tokens} of {tokens} tokens came back WRONG");
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

/// How the PEs run, for the report, and whether processes share a GPU: their
/// kernels then take turns on it (time slices of milliseconds) instead of
/// running side by side, so every exchange waits for a context switch.
fn process_mode(n_pes: usize, gpus: usize) -> (String, bool) {
    if gpus > 0 && n_pes > gpus {
        let mode = format!(
            "one process each, {} per GPU: kernels of different processes time-slice, \
             so expect milliseconds per exchange (run PEs as threads to measure the exchange)",
            n_pes.div_ceil(gpus)
        );
        (mode, true)
    } else {
        ("one process each".to_string(), false)
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, default: usize| -> Option<usize> {
        match args.get(i) {
            Some(s) => s.parse().ok().filter(|&v| v > 0),
            None => Some(default),
        }
    };
    let shape = match (arg(1, 4096), arg(2, 1024), arg(3, 8)) {
        (Some(tokens), Some(hidden), Some(channels))
            if hidden % 4 == 0 && tokens < u32::MAX as usize && hidden < u32::MAX as usize =>
        {
            Shape { tokens, hidden, channels: channels.min(tokens) }
        }
        _ => {
            eprintln!("usage: moe [PES [TOKENS [HIDDEN [CHANNELS]]]]  (all > 0, HIDDEN a multiple of 4)");
            return ExitCode::from(2);
        }
    };
    let gpus = match gpushmem::gpu_available() {
        Ok(n) => n,
        Err(e) => {
            eprintln!("moe: {e}");
            return ExitCode::from(2);
        }
    };
    let launched = std::env::var_os("GPUSHMEM_RANK").is_some() || std::env::var_os("OMPI_COMM_WORLD_RANK").is_some();
    let result = if launched {
        Shmem::init().and_then(|s| {
            let ok = moe(&s, shape, &process_mode(s.n_pes(), gpus).0)?;
            let me = s.my_pe();
            s.finalize()?;
            Ok(vec![(me, ok)])
        })
    } else {
        let pes = args.first().and_then(|s| s.parse().ok()).unwrap_or(gpus.max(2));
        let mode = format!("threads on {gpus} GPU(s)");
        Threads::new(pes).run(|s| Ok((s.my_pe(), moe(s, shape, &mode)?)))
    };
    match result {
        Ok(rows) if rows.iter().all(|&(_, ok)| ok) => {
            if rows.iter().any(|&(pe, _)| pe == 0) {
                println!("moe: every token on every PE came back right");
            }
            ExitCode::SUCCESS
        }
        Ok(_) => {
            eprintln!("moe: some tokens came back WRONG (see above)");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("moe: {e}");
            ExitCode::from(1)
        }
    }
}
