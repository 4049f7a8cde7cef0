//! Faults: a PE process killed with SIGKILL in the middle of a barrier, of a
//! put loop and of a collective malloc; a heap larger than the GPU; a
//! collective call made by only some PEs. The launcher must name the dead PE,
//! and every other PE must end with its own error — a bounded device wait or
//! a bootstrap error — within the test's limit: nothing hangs, nobody needs
//! to be killed (`gpushmem-run --wait-others` sends the survivors nothing).

use crate::common::{kernels, one_block, threads};
use crate::errors::launch_processes_with;
use gpushmem::{Config, Error, Shmem, Threads};
use libtest_mimic::Failed;
use std::process::ExitCode;
use std::time::Duration;

type TestResult = Result<(), Failed>;

/// Where PE 1 dies in [`killed_in`].
pub const PHASES: [&str; 3] = ["barrier", "put_loop", "malloc"];

/// Two PE processes; PE 1 kills itself with SIGKILL during `phase`. PE 0 must
/// report an error of its own (device wait timeout after 5 s, or the
/// bootstrap's lost connection) and exit, and the launcher must name PE 1.
pub fn killed_in(phase: &'static str) -> TestResult {
    let env = [("GPUSHMEM_TIMEOUT", "5"), ("GPUSHMEM_BOOTSTRAP_TIMEOUT", "15")];
    let (ok, text, took) = launch_processes_with(
        2,
        &format!("die_in:{phase}"),
        &env,
        &["--wait-others", "--grace", "60"],
        Duration::from_secs(120),
    )?;
    let launcher: Vec<&str> = text.lines().filter(|l| l.contains("gpushmem-run")).collect();
    let survivor: Vec<&str> = text.lines().filter(|l| l.contains("HOST-SAW-ERROR")).collect();
    let named = launcher.iter().any(|l| l.contains("PE 1") && l.contains("signal 9"));
    let pe0_ended = launcher.iter().any(|l| l.contains("PE 0") && l.contains("exited with status 1"));
    let killed = text.contains("sending SIGKILL");
    if ok || !named || !pe0_ended || killed || survivor.is_empty() {
        return Err(format!(
            "PE 1 killed during {phase}: expected the launcher to name PE 1 (signal 9) and PE 0 to exit \
             with its own error, nobody killed by the launcher (ok={ok}, named={named}, pe0_ended={pe0_ended}, \
             killed={killed}); output:\n{text}"
        )
        .into());
    }
    println!("  {phase}: job ended in {took:.1?}; {}", survivor[0].trim());
    Ok(())
}

/// The child side of [`killed_in`] (`GPUSHMEM_TEST_CHILD=die_in:<phase>`, one process per PE).
pub fn die_in(phase: &str) -> ExitCode {
    let r = (|| -> gpushmem::Result<()> {
        let shmem = Shmem::init()?;
        let me = shmem.my_pe();
        let die = || {
            let _ = std::process::Command::new("kill").args(["-9", &std::process::id().to_string()]).status();
            std::thread::sleep(Duration::from_secs(60));
        };
        match phase {
            "barrier" => {
                let m = kernels(&shmem)?;
                let k = m.kernel("barrier_rounds")?;
                let buf = shmem.calloc::<u64>(2 * shmem.n_pes())?;
                let errors = shmem.calloc::<u32>(1)?;
                // Far more rounds than can finish before PE 1 dies (processes time-slice the GPU).
                let args = (buf.as_kernel_ptr(), 100_000_000u32, errors.as_kernel_ptr(), 1u32);
                unsafe { shmem.launch_collective(&k, one_block(32), args)? };
                if me == 1 {
                    std::thread::sleep(Duration::from_millis(1500));
                    die();
                }
                shmem.synchronize()?;
            }
            "put_loop" => {
                let bytes = 1 << 20;
                let src = shmem.calloc::<u8>(bytes)?;
                let dst = shmem.calloc::<u8>(bytes)?;
                let peer = 1 - me;
                for i in 0..u64::MAX {
                    // SAFETY: `src` is a symmetric slice of `bytes` bytes of this PE's
                    // heap, never freed in this loop.
                    unsafe {
                        shmem.putmem_on_stream(dst.as_kernel_ptr(), src.as_kernel_ptr(), bytes, peer, shmem.stream())?
                    };
                    if i % 16 == 15 {
                        shmem.barrier_all()?;
                    }
                    if me == 1 && i == 200 {
                        die();
                    }
                }
            }
            "malloc" => {
                if me == 1 {
                    die();
                }
                std::thread::sleep(Duration::from_millis(300));
                let _ = shmem.malloc::<u8>(1 << 30)?;
            }
            other => panic!("unknown phase {other}"),
        }
        println!("NO ERROR: PE {me} finished {phase} normally");
        Ok(())
    })();
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            println!("HOST-SAW-ERROR: {e}");
            ExitCode::from(1)
        }
    }
}

/// A heap larger than the GPU's memory: init fails naming the heap size setting.
pub fn heap_larger_than_gpu() -> TestResult {
    let config = Config { heap_size: 1 << 50, ..Config::from_env().unwrap_or_default() };
    match Threads::new(1).config(config).run(|_| Ok(())) {
        Ok(_) => Err("a 1 PiB heap was accepted".into()),
        Err(e) => {
            let text = e.to_string();
            if !text.contains("GPUSHMEM_SYMMETRIC_SIZE") || !text.contains("symmetric heap") {
                return Err(format!("the error does not name the heap setting: {text}").into());
            }
            println!("  {text}");
            Ok(())
        }
    }
}

/// PE 0 calls `malloc` while PE 1 calls `barrier_all`: both fail with a
/// mismatch naming each PE's call, instead of PE 1 passing a "barrier" that
/// PE 0 took for its malloc.
pub fn collective_called_by_some() -> TestResult {
    let rows = threads(2, 16 << 20, |shmem| {
        let r = if shmem.my_pe() == 0 { shmem.malloc::<u8>(4096).map(|_| ()) } else { shmem.barrier_all() };
        Ok(match r {
            Err(Error::Mismatch { detail, .. }) if detail.contains("different collective calls") => Ok(detail),
            Err(e) => Err(format!("PE {}: wrong error: {e}", shmem.my_pe())),
            Ok(()) => Err(format!("PE {}: no error", shmem.my_pe())),
        })
    })?;
    let mut bad = Vec::new();
    for r in rows {
        match r {
            Ok(d) => println!("  {d}"),
            Err(e) => bad.push(e),
        }
    }
    crate::common::fail_if_any(&bad)
}

/// A GPU ordinal that does not exist: init fails with exactly the setting
/// error naming it and the GPUs present (docs/errors.md), both for 64 and for
/// the first ordinal past the last GPU (the boundary).
pub fn missing_gpu() -> TestResult {
    let n_dev = gpushmem::gpu_available().map_err(|e| format!("counting GPUs: {e}"))?;
    for ordinal in [64, n_dev] {
        // `Threads::run` plans every PE's GPU before it starts one (gpushmem::args::pe_devices).
        let want = format!(
            "bad setting Threads::devices=\"[{ordinal}]\": GPU {ordinal} does not exist: this machine has {n_dev} GPU(s)"
        );
        match Threads::new(1).devices(vec![ordinal]).run(|_| Ok(())) {
            Ok(_) => return Err(format!("GPU {ordinal} was accepted ({n_dev} present)").into()),
            Err(e @ Error::Config { .. }) if e.to_string() == want => println!("  {e}"),
            Err(e) => return Err(format!("GPU {ordinal}: wrong error {e:?} ({e}), want {want:?}").into()),
        }
    }
    Ok(())
}

/// Host collective calls with bad arguments fail on the calling PE before
/// anything is launched: a destination too small, `dest` overlapping
/// `source`, a bitwise reduction of floats, a PE outside the team.
pub fn collective_bad_inputs() -> TestResult {
    use gpushmem::ReduceOp;
    let rows = threads(2, 16 << 20, |shmem| {
        let me = shmem.my_pe();
        let world = shmem.team_world();
        let first = shmem.team_split_strided(&world, 0, 1, 1)?;
        let small = shmem.calloc::<f32>(4)?;
        let src = shmem.calloc::<f32>(8)?;
        let stream = shmem.stream();
        let mut out = Vec::new();
        let mut expect = |what: &str, r: gpushmem::Result<()>, needle: &str| {
            out.push(match r {
                Err(e) if e.to_string().contains(needle) => Ok(format!("PE {me}: {what}: {e}")),
                Err(e) => Err(format!("PE {me}: {what}: wrong error: {e}")),
                Ok(()) => Err(format!("PE {me}: {what}: accepted")),
            })
        };
        expect("dest too small", shmem.allreduce_on_stream(&world, &small, &src, 8, ReduceOp::Sum, stream), "needs 8");
        expect("overlap", shmem.allreduce_on_stream(&world, &src, &src, 8, ReduceOp::Sum, stream), "overlaps");
        expect("and on f32", shmem.allreduce_on_stream(&world, &small, &src, 4, ReduceOp::And, stream), "integer type");
        if me == 1 {
            expect(
                "not a member",
                shmem.allreduce_on_stream(&first, &small, &src, 4, ReduceOp::Sum, stream),
                "not a member",
            );
        }
        shmem.synchronize()?;
        shmem.team_destroy(first)?;
        Ok(out)
    })?;
    let mut bad = Vec::new();
    for r in rows.into_iter().flatten() {
        match r {
            Ok(m) => println!("  {m}"),
            Err(e) => bad.push(e),
        }
    }
    crate::common::fail_if_any(&bad)
}
