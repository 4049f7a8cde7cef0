//! barrier_all / sync_all and fence tests.

use crate::common::*;

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

fn fence_errors(iters: u32, use_fence: u32) -> Result<u64, libtest_mimic::Failed> {
    let r = threads(2, 8 << 20, |shmem| {
        let data = shmem.calloc::<u64>(16)?;
        let flag = shmem.calloc::<u64>(1)?;
        let stream = shmem.stream();
        let errors = stream.alloc_zeros::<u32>(1).cu("alloc")?;
        let module = kernels(shmem)?;
        let k = module.kernel("fence_mp")?;
        let args = (data.as_kernel_ptr(), flag.as_kernel_ptr(), 16u32, iters, dptr(&errors, stream), use_fence);
        unsafe { shmem.launch_collective(&k, one_block(32), args)? };
        shmem.synchronize()?;
        Ok(stream.clone_dtoh(&errors).cu("dtoh")?[0] as u64)
    })?;
    Ok(r.iter().sum())
}

/// Data then flag to the same PE, ordered by `fence`: the flag is never seen
/// without the data. 10^5 messages (quick mode: 10^3).
pub fn fence_orders_puts() -> TestResult {
    let msgs = scaled(100_000);
    let e = fence_errors(msgs as u32, 1)?;
    if e != 0 {
        return Err(format!("{e} times the flag arrived before the data it was fenced behind").into());
    }
    let without = fence_errors(msgs as u32, 0)?;
    println!("fence test: {msgs} messages with fence: 0 violations; without fence: {without} violations");
    Ok(())
}
