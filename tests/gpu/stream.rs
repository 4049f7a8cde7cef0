//! Stream-ordered host operations interleaved with kernels on the same and on other streams.

use crate::common::*;
use gpushmem::{Cmp, LaunchConfig, SignalOp};

fn pattern(v: &[u32], key: u32) -> Vec<u32> {
    v.iter().enumerate().map(|(i, &x)| x ^ key ^ (i as u32).wrapping_mul(2654435761)).collect()
}

/// Per PE, with `next = (me + 1) % n`:
/// stream A: kernel writes `src` → `put_on_stream(dest@next)` → `signal_op_on_stream(+1 @next)`;
/// stream B: `signal_wait_until_on_stream(sig >= 1)` → kernel transforms the received `dest` into `out`;
/// then `putmem_signal_on_stream` (SET 7) of a second buffer, waited with a `Gt 6` wait on stream B,
/// `quiet_on_stream`, `barrier_all_on_stream`, `get_on_stream` back from `next`. Every word checked.
pub fn stream_ordered_ops(n: usize) -> TestResult {
    let len = (1usize << 20) + 5;
    let rows = threads(n, 64 << 20, |shmem| {
        let me = shmem.my_pe();
        let next = (me + 1) % n;
        let prev = (me + n - 1) % n;
        let src = shmem.malloc::<u32>(len)?;
        let dest = shmem.malloc::<u32>(len)?;
        let dest2 = shmem.malloc::<u32>(len)?;
        let back = shmem.malloc::<u32>(len)?;
        let sig = shmem.calloc::<u64>(2)?;
        let a = shmem.stream();
        let b = shmem.context().new_stream().cu("new stream")?;
        let input = |pe: usize| -> Vec<u32> {
            random_bytes(seed(), 77 + pe as u64, len * 4)
                .chunks(4)
                .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
                .collect()
        };
        let inp = a.clone_htod(&input(me)).cu("htod")?;
        let out = b.alloc_zeros::<u32>(len).cu("alloc")?;
        shmem.write(&dest, &vec![0xFFFF_FFFFu32; len])?;
        shmem.write(&dest2, &vec![0xFFFF_FFFFu32; len])?;
        let m = kernels(shmem)?; // collective: all PEs poisoned before anyone sends
        let k = m.kernel("smoke_pattern")?;
        let cfg = LaunchConfig::for_num_elems(len as u32);
        unsafe { shmem.launch(&k, cfg, (src.as_kernel_ptr(), dptr(&inp, a), len as u64, 0x5A5Au32))? };
        shmem.put_on_stream(&dest, &src, next, a)?;
        shmem.signal_op_on_stream(sig.as_kernel_ptr(), 1, SignalOp::Add, next, a)?;
        shmem.signal_wait_until_on_stream(sig.as_kernel_ptr(), Cmp::Ge, 1, &b)?;
        unsafe { shmem.launch_on_stream(&k, cfg, (dptr(&out, &b), dest.as_kernel_ptr(), len as u64, 0x33u32), &b)? };
        let sig2 = sig.as_kernel_ptr() + 8;
        shmem.putmem_signal_on_stream(
            dest2.as_kernel_ptr(),
            src.as_kernel_ptr(),
            len * 4,
            sig2,
            7,
            SignalOp::Set,
            next,
            a,
        )?;
        shmem.signal_wait_until_on_stream(sig2, Cmp::Gt, 6, &b)?;
        shmem.quiet_on_stream(a)?;
        shmem.barrier_all_on_stream(a)?;
        shmem.get_on_stream(&back, &src, next, a)?;
        a.synchronize().cu("sync A")?;
        b.synchronize().cu("sync B")?;
        // What should have arrived: prev's src = pattern(input(prev), 0x5A5A).
        let want_dest = pattern(&input(prev), 0x5A5A);
        let mut errs = Vec::new();
        if shmem.read(&dest)? != want_dest {
            errs.push("put_on_stream data wrong".to_string());
        }
        if shmem.read(&dest2)? != want_dest {
            errs.push("putmem_signal_on_stream data wrong".to_string());
        }
        if b.clone_dtoh(&out).cu("dtoh")? != pattern(&want_dest, 0x33) {
            errs.push("kernel on stream B after signal_wait_until_on_stream saw stale data".to_string());
        }
        if shmem.read(&back)? != pattern(&input(next), 0x5A5A) {
            errs.push("get_on_stream data wrong".to_string());
        }
        let s = shmem.read(&sig)?;
        if s != [1, 7] {
            errs.push(format!("signals {s:?}, want [1, 7]"));
        }
        Ok(errs)
    })?;
    let bad: Vec<String> =
        rows.into_iter().enumerate().flat_map(|(pe, e)| e.into_iter().map(move |m| format!("PE {pe}: {m}"))).collect();
    if bad.is_empty() {
        println!(
            "  {n} PEs: put/get/put_signal/signal_op/signal_wait/quiet/barrier on streams: all data and signals right"
        );
        Ok(())
    } else {
        Err(bad.join("\n").into())
    }
}
