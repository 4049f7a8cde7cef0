//! barrier_all / sync_all and fence tests.

use crate::common::*;
use crate::litmus;

/// `rounds` barrier rounds in one kernel; returns the mismatch count summed over PEs.
fn barrier_errors(n: usize, rounds: u32, form: u32) -> Result<u64, libtest_mimic::Failed> {
    let errs = threads(n, 8 << 20, |shmem| {
        let buf = shmem.calloc::<u64>(2 * n)?;
        let stream = shmem.stream();
        let errors = stream.alloc_zeros::<u32>(1).cu("alloc")?;
        let module = kernels(shmem)?; // collective: nobody launches before everyone is ready
        let k = module.kernel("barrier_rounds")?;
        unsafe {
            shmem.launch_collective(&k, one_block(128), (buf.as_kernel_ptr(), rounds, dptr(&errors, stream), form))?
        };
        shmem.synchronize()?;
        let e = stream.clone_dtoh(&errors).cu("dtoh")?[0] as u64;
        shmem.free(buf)?;
        Ok(e)
    })?;
    Ok(errs.iter().sum())
}

/// 1000 rounds (quick mode: 10) of put → barrier → check pass for each barrier form.
pub fn barrier(n: usize) -> TestResult {
    let rounds = scaled(1000);
    for (form, name) in [(0, "barrier_all"), (1, "barrier_all_block"), (2, "barrier_all_warp")] {
        let e = barrier_errors(n, rounds as u32, form)?;
        if e != 0 {
            return Err(format!("{name}, {n} PEs: {e} stale slots seen over {rounds} rounds").into());
        }
    }
    Ok(())
}

/// Without the barrier the same check must see stale slots: the test can detect a missing barrier.
/// Full 1000 rounds in quick mode too: fewer would make seeing none (a false failure) likelier,
/// and rounds without a barrier cost next to nothing.
pub fn barrier_missing_is_detected() -> TestResult {
    let e = barrier_errors(4, 1000, 3)?;
    println!("missing barrier, 4 PEs, 1000 rounds: {e} stale slots seen");
    if e == 0 {
        return Err("without a barrier no stale slot was seen: the barrier test cannot tell".into());
    }
    Ok(())
}

/// Data then flag to the same PE, ordered by `fence`: the flag is never
/// seen without the data. The data goes by one `p` per word, the flag by
/// `p` (the kernel `litmus_mp`, shape `MP_FENCE_P`), as 16384 writer/reader
/// pairs over 4 PEs, random cells, 64 rounds each, twice (2 × 2^20
/// messages; quick mode: 1/100 of the pairs). Its control, the same without
/// `fence`, runs through the litmus tests' control mechanism
/// (`litmus::control_runs`; declared in `litmus::CONTROLS`). The former
/// single writer/reader pair never showed a reordering without `fence` (0
/// in all 14 logged runs), so it could not tell whether `fence` works;
/// many pairs spread over every SM and L2 slice can.
pub fn fence_orders_puts() -> TestResult {
    litmus::mp(&[(litmus::MP_FENCE_P, "MP p x4; fence; p", &[litmus::Ctl::FencePuts])])
}
