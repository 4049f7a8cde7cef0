//! What the `ring`, `allreduce`, `moe` and `halo` examples share: the parsing of
//! their numeric arguments, the host all-gather of their results and the
//! driver of their `main` (GPU check, PEs as threads or as processes under
//! `gpushmem-run`, exit status).
//!
//! Each example includes this file with `#[path = "common/mod.rs"] mod common;`.
//! It is a `mod.rs`, not a `main.rs`, so Cargo does not take `examples/common`
//! for an example of its own.

use gpushmem::{Shmem, Threads};
use std::io::Write;
use std::process::ExitCode;

/// Writes `line` and a newline to stderr in one `write` (`eprintln!` writes
/// its pieces one by one): the PEs of a job share one stderr, and one write of
/// under `PIPE_BUF` bytes to a pipe is not split by another PE's.
pub fn say(line: std::fmt::Arguments) {
    let _ = std::io::stderr().lock().write_all(format!("{line}\n").as_bytes());
}

/// Prints `usage: <text>` and returns exit status 2, for arguments an example cannot take.
pub fn usage(text: &str) -> ExitCode {
    say(format_args!("usage: {text}"));
    ExitCode::from(2)
}

/// `s` as a whole number greater than 0, or `None`.
pub fn positive(s: &str) -> Option<usize> {
    s.parse().ok().filter(|&v| v > 0)
}

/// Argument `i` as a number greater than 0: `default` where it is absent,
/// `None` where it is there but not such a number.
pub fn arg(args: &[String], i: usize, default: usize) -> Option<usize> {
    match args.get(i) {
        Some(s) => positive(s),
        None => Some(default),
    }
}

/// The slowest PE's time and whether every PE passed (collective: a host
/// all-gather, [`Shmem::allgather_host`]).
pub fn gather(shmem: &Shmem, secs: f64, ok: bool) -> gpushmem::Result<(f64, bool)> {
    let all = shmem.allgather_host([secs, if ok { 1.0 } else { 0.0 }])?;
    Ok(all.iter().fold((0.0f64, true), |(slowest, every), &[s, passed]| (slowest.max(s), every && passed == 1.0)))
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

/// The driver of an example's `main`, after its arguments are parsed.
///
/// Without a GPU it prints `<name>: <why>` and returns exit status 2.
/// Launched by `gpushmem-run`, `mpirun`, `srun`, … ([`gpushmem::launched`]),
/// this process is one PE: `Shmem::init`, `body`, `finalize`.
/// Otherwise it runs PEs as threads, as many as `args[0]` says (default: one
/// per GPU, at least 2) — except on the NVSHMEM engine (`GPUSHMEM_ENGINE=nvshmem`),
/// which has one PE per process: then this process is a job of one PE.
/// `body(shmem, mode, shared)` runs the example on one PE and returns whether
/// every PE's check passed; `mode` says how the PEs run, for the report, and
/// `shared` is true where processes share a GPU (see `process_mode`).
///
/// Exit status 0 when every PE passed (PE 0's process prints
/// `<name>: <passed>`), else 1 with `<name>: <failed>` or the error.
pub fn run(
    name: &str,
    args: &[String],
    passed: &str,
    failed: &str,
    body: impl Fn(&Shmem, &str, bool) -> gpushmem::Result<bool> + Sync,
) -> ExitCode {
    let gpus = match gpushmem::gpu_available() {
        Ok(n) => n,
        Err(e) => {
            say(format_args!("{name}: {e}"));
            return ExitCode::from(2);
        }
    };
    let launched = gpushmem::launched();
    // NVSHMEM has one PE per process: unlaunched, this process is a job of one PE.
    let nvshmem = gpushmem::Config::from_env().is_ok_and(|c| c.engine == gpushmem::Engine::Nvshmem);
    if nvshmem && !launched {
        println!("{name}: NVSHMEM engine: one PE in this process (start more with gpushmem-run -n N)");
    }
    let result = if launched || nvshmem {
        Shmem::init().and_then(|s| {
            let (mode, shared) = process_mode(s.n_pes(), gpus);
            let ok = body(&s, &mode, shared)?;
            let me = s.my_pe();
            s.finalize()?;
            Ok(vec![(me, ok)])
        })
    } else {
        let Some(pes) = arg(args, 0, gpus.max(2)) else {
            say(format_args!("{name}: PES {:?} is not a number greater than 0", args[0]));
            return ExitCode::from(2);
        };
        let mode = format!("threads on {gpus} GPU(s)");
        Threads::new(pes).run(|s| Ok((s.my_pe(), body(s, &mode, false)?)))
    };
    match result {
        Ok(rows) if rows.iter().all(|&(_, ok)| ok) => {
            if rows.iter().any(|&(pe, _)| pe == 0) {
                println!("{name}: {passed}");
            }
            ExitCode::SUCCESS
        }
        Ok(_) => {
            say(format_args!("{name}: {failed}"));
            ExitCode::from(1)
        }
        Err(e) => {
            say(format_args!("{name}: {e}"));
            ExitCode::from(1)
        }
    }
}
