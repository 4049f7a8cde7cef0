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
/// Buffers of 2^20 + 5 words (quick mode: 2^15 + 5).
pub fn stream_ordered_ops(n: usize) -> TestResult {
    let len = size_cap(4 << 20) / 4 + 5;
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

/// The stream-ordered collectives (built-in kernels) on the world team and on
/// an odd-PE subteam: broadcast, fcollect, alltoall, allreduce (sum u32, f32,
/// bf16; max i64), reducescatter (sum f32), against a CPU reference with the
/// device's member order (bit-exact for floats too).
pub fn collectives_on_stream(n: usize) -> TestResult {
    use gpushmem::{Bf16, ReduceOp};
    use gpushmem_kernels::reduce::Reducible;
    let len = 4099usize;
    let data_f32 = |pe: usize| -> Vec<f32> {
        random_bytes(seed(), 300 + pe as u64, len * n * 4)
            .chunks(4)
            .map(|c| (u32::from_le_bytes(c.try_into().unwrap()) % 2001) as f32 / 1000.0 - 1.0)
            .collect()
    };
    let rows = threads(n, 32 << 20, |shmem| {
        let me = shmem.my_pe();
        let world = shmem.team_world();
        let odd = shmem.team_split_strided(&world, 1, 2, n / 2)?;
        let stream = shmem.stream();
        let src = shmem.malloc::<f32>(len * n)?;
        let dst = shmem.malloc::<f32>(len * n)?;
        let srcb = shmem.malloc::<Bf16>(len)?;
        let dstb = shmem.malloc::<Bf16>(len)?;
        let mut errs = Vec::new();
        let mut check = |what: &str, got: Vec<f32>, want: Vec<f32>| {
            if got.iter().map(|v| v.to_bits()).ne(want.iter().map(|v| v.to_bits())) {
                let i = got.iter().zip(&want).position(|(a, b)| a.to_bits() != b.to_bits()).unwrap_or(0);
                errs.push(format!("{what}: first difference at {i}: got {:?}, want {:?}", got.get(i), want.get(i)));
            }
        };
        shmem.write(&src, &data_f32(me))?;
        shmem.write(&srcb, &data_f32(me)[..len].iter().map(|&v| Bf16::from_f32(v)).collect::<Vec<_>>())?;
        for team in [world, odd] {
            let Some(tme) = team.my_pe() else {
                shmem.bootstrap().barrier()?; // keep the host calls in step with the members
                continue;
            };
            let members: Vec<usize> = (0..team.n_pes()).map(|i| team.world_pe(i).unwrap()).collect();
            let tn = members.len();
            // allreduce f32 sum, member order 0..tn, as the device combines.
            shmem.allreduce_on_stream(&team, &dst, &src, len, ReduceOp::Sum, stream)?;
            stream.synchronize().cu("sync")?;
            let want: Vec<f32> = (0..len)
                .map(|i| {
                    members
                        .iter()
                        .skip(1)
                        .fold(data_f32(members[0])[i], |acc, &m| f32::apply(ReduceOp::Sum, acc, data_f32(m)[i]))
                })
                .collect();
            check("allreduce f32 sum", shmem.read_at(&dst, 0, len)?, want);
            // allreduce bf16 sum
            shmem.allreduce_on_stream(&team, &dstb, &srcb, len, ReduceOp::Sum, stream)?;
            stream.synchronize().cu("sync")?;
            let b = |m: usize, i: usize| Bf16::from_f32(data_f32(m)[i]);
            let want: Vec<f32> = (0..len)
                .map(|i| {
                    members
                        .iter()
                        .skip(1)
                        .fold(b(members[0], i), |acc, &m| Bf16::apply(ReduceOp::Sum, acc, b(m, i)))
                        .to_f32()
                })
                .collect();
            check("allreduce bf16 sum", shmem.read(&dstb)?.iter().map(|v| v.to_f32()).collect(), want);
            // reducescatter f32 max
            shmem.reducescatter_on_stream(&team, &dst, &src, len, ReduceOp::Max, stream)?;
            stream.synchronize().cu("sync")?;
            let want: Vec<f32> = (0..len)
                .map(|i| {
                    members
                        .iter()
                        .map(|&m| data_f32(m)[tme * len + i])
                        .fold(f32::NEG_INFINITY, |a, v| f32::apply(ReduceOp::Max, a, v))
                })
                .collect();
            check("reducescatter f32 max", shmem.read_at(&dst, 0, len)?, want);
            // broadcast from the last member
            shmem.broadcast_on_stream(&team, &dst, &src, len, tn - 1, stream)?;
            stream.synchronize().cu("sync")?;
            check("broadcast", shmem.read_at(&dst, 0, len)?, data_f32(members[tn - 1])[..len].to_vec());
            // fcollect of the first len/ tn.. use `len / n` elements each
            let k = len / n;
            shmem.fcollect_on_stream(&team, &dst, &src, k, stream)?;
            stream.synchronize().cu("sync")?;
            let want: Vec<f32> = members.iter().flat_map(|&m| data_f32(m)[..k].to_vec()).collect();
            check("fcollect", shmem.read_at(&dst, 0, k * tn)?, want);
            // alltoall: block tme of member m's src lands at block m
            shmem.alltoall_on_stream(&team, &dst, &src, k, stream)?;
            stream.synchronize().cu("sync")?;
            let want: Vec<f32> = members.iter().flat_map(|&m| data_f32(m)[tme * k..(tme + 1) * k].to_vec()).collect();
            check("alltoall", shmem.read_at(&dst, 0, k * tn)?, want);
            shmem.bootstrap().barrier()?;
        }
        // Misuse is refused before anything is launched.
        let r = shmem.allreduce_on_stream(&world, &dstb, &srcb, len, ReduceOp::Xor, stream);
        if !matches!(r, Err(gpushmem::Error::Config { .. })) {
            errs.push(format!("xor on bf16 was not refused: {r:?}"));
        }
        if odd.my_pe().is_none() {
            let r = shmem.allreduce_on_stream(&odd, &dst, &src, len, ReduceOp::Sum, stream);
            if !matches!(r, Err(gpushmem::Error::Config { .. })) {
                errs.push(format!("a non-member's collective was not refused: {r:?}"));
            }
        }
        shmem.team_destroy(odd)?;
        Ok(errs)
    })?;
    let bad: Vec<String> =
        rows.into_iter().enumerate().flat_map(|(pe, e)| e.into_iter().map(move |m| format!("PE {pe}: {m}"))).collect();
    if bad.is_empty() {
        println!("  {n} PEs: stream-ordered broadcast/fcollect/alltoall/allreduce/reducescatter on world and odd team: bit-exact");
        Ok(())
    } else {
        Err(bad.join("\n").into())
    }
}
