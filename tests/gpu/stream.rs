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
        // SAFETY: `src` is a symmetric slice of this PE's heap of `len` u32s,
        // alive until after `a` is synchronized below.
        unsafe {
            shmem.putmem_signal_on_stream(
                dest2.as_kernel_ptr(),
                src.as_kernel_ptr(),
                len * 4,
                sig2,
                7,
                SignalOp::Set,
                next,
                a,
            )?
        };
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

/// First difference of two equal-length slices compared bit for bit, as a message.
fn first_diff<T: PartialEq + std::fmt::Debug, B: PartialEq>(
    what: &str,
    got: &[T],
    want: &[T],
    bits: impl Fn(&T) -> B,
) -> Option<String> {
    if got.len() != want.len() {
        return Some(format!("{what}: {} elements, want {}", got.len(), want.len()));
    }
    let i = got.iter().zip(want).position(|(a, b)| bits(a) != bits(b))?;
    let wrong = got.iter().zip(want).filter(|(a, b)| bits(a) != bits(b)).count();
    Some(format!("{what}: {wrong} of {} wrong; first at {i}: got {:?}, want {:?}", want.len(), got[i], want[i]))
}

/// `len` random values of a Pod type for PE `pe` from stream `base + pe`.
fn random_of<T: bytemuck::Pod>(base: u64, pe: usize, len: usize) -> Vec<T> {
    let size = std::mem::size_of::<T>();
    random_bytes(seed(), base + pe as u64, len * size).chunks_exact(size).map(bytemuck::pod_read_unaligned).collect()
}

/// The stream-ordered collectives (built-in kernels) on the world team and on
/// an odd-PE subteam: broadcast, fcollect, alltoall; allreduce (sum u32,
/// f32, bf16, f16; max i64), reducescatter (max f32, sum i32, xor u64, min
/// i64, min bf16) — integers over their full range, so sums and products
/// wrap. Expected results come from the independent reference
/// (`crate::reference`, member order 0, 1, …, the device's), checked first
/// against known values and the kernel crate; every result is compared bit
/// for bit (floats too). `len` elements per block: 4099 runs one block
/// one-shot; 397603 runs many blocks, and the allreduce two-shot.
pub fn collectives_on_stream(n: usize, len: usize) -> TestResult {
    use crate::reference::{self, in_member_order, RefReduce};
    use gpushmem::{Bf16, ReduceOp, F16};
    reference::agreement::checked()?;
    let data_f32 = |pe: usize| random_unit_f32s(seed(), 300 + pe as u64, len * n);
    // Inputs of the integer collectives: full-range random values, per PE.
    let data_u32 = |pe: usize| random_of::<u32>(400, pe, len);
    let data_i64 = |pe: usize| random_of::<i64>(500, pe, len);
    let data_i32 = |pe: usize| random_of::<i32>(600, pe, len * n);
    let data_u64 = |pe: usize| random_of::<u64>(700, pe, len * n);
    let data_i64s = |pe: usize| random_of::<i64>(800, pe, len * n);
    // Half inputs, rounded by the reference (not the kernel crate).
    let data_bf16 = |pe: usize| data_f32(pe).iter().map(|&v| reference::bf16_from_f32(v)).collect::<Vec<u16>>();
    let data_f16 = |pe: usize| data_f32(pe).iter().map(|&v| reference::f16_from_f32(v)).collect::<Vec<u16>>();
    // The buffers below: about (34 n + 42) bytes per element, plus room.
    let heap = ((len * (34 * n + 42)) as u64 * 5 / 4).max(32 << 20);
    let rows = threads(n, heap, |shmem| {
        let me = shmem.my_pe();
        let world = shmem.team_world();
        let odd = shmem.team_split_strided(&world, 1, 2, n / 2)?;
        let stream = shmem.stream();
        let src = shmem.malloc::<f32>(len * n)?;
        let dst = shmem.malloc::<f32>(len * n)?;
        let srcb = shmem.malloc::<Bf16>(len)?;
        let dstb = shmem.malloc::<Bf16>(len)?;
        let srcbs = shmem.malloc::<Bf16>(len * n)?;
        let srch = shmem.malloc::<F16>(len)?;
        let dsth = shmem.malloc::<F16>(len)?;
        let (srcu32, dstu32) = (shmem.malloc::<u32>(len)?, shmem.malloc::<u32>(len)?);
        let (srci64, dsti64) = (shmem.malloc::<i64>(len)?, shmem.malloc::<i64>(len)?);
        let (srci32, dsti32) = (shmem.malloc::<i32>(len * n)?, shmem.malloc::<i32>(len)?);
        let (srcu64, dstu64) = (shmem.malloc::<u64>(len * n)?, shmem.malloc::<u64>(len)?);
        let srci64s = shmem.malloc::<i64>(len * n)?;
        let mut errs = Vec::new();
        let f32_bits = |v: &f32| v.to_bits();
        let half_bits = |v: &u16| *v;
        shmem.write(&src, &data_f32(me))?;
        shmem.write(&srcb, &data_bf16(me)[..len].iter().map(|&b| Bf16(b)).collect::<Vec<_>>())?;
        shmem.write(&srcbs, &data_bf16(me).iter().map(|&b| Bf16(b)).collect::<Vec<_>>())?;
        shmem.write(&srch, &data_f16(me)[..len].iter().map(|&h| F16(h)).collect::<Vec<_>>())?;
        shmem.write(&srcu32, &data_u32(me))?;
        shmem.write(&srci64, &data_i64(me))?;
        shmem.write(&srci32, &data_i32(me))?;
        shmem.write(&srcu64, &data_u64(me))?;
        shmem.write(&srci64s, &data_i64s(me))?;
        for team in [world, odd] {
            let Some(tme) = team.my_pe() else {
                shmem.bootstrap().barrier()?; // keep the host calls in step with the members
                continue;
            };
            let members: Vec<usize> = (0..team.n_pes()).map(|i| team.world_pe(i).unwrap()).collect();
            let tn = members.len();
            // `op` over the members' element `at(i)` of `data`, in member order (the device's).
            fn fold<T: Copy>(
                members: &[usize],
                data: &dyn Fn(usize) -> Vec<T>,
                at: impl Fn(usize) -> usize,
                n: usize,
                f: impl Fn(T, T) -> T,
            ) -> Vec<T> {
                let vals: Vec<Vec<T>> = members.iter().map(|&m| data(m)).collect();
                (0..n).map(|i| in_member_order(vals.iter().map(|v| v[at(i)]), &f)).collect()
            }
            let all = |i: usize| i;
            let mine = |i: usize| tme * len + i;
            // allreduce f32 sum
            shmem.allreduce_on_stream(&team, &dst, &src, len, ReduceOp::Sum, stream)?;
            stream.synchronize().cu("sync")?;
            let want = fold(&members, &data_f32, all, len, |a, b| f32::reduce(ReduceOp::Sum, a, b));
            errs.extend(first_diff("allreduce f32 sum", &shmem.read_at(&dst, 0, len)?, &want, f32_bits));
            // allreduce bf16 sum
            shmem.allreduce_on_stream(&team, &dstb, &srcb, len, ReduceOp::Sum, stream)?;
            stream.synchronize().cu("sync")?;
            let want = fold(&members, &data_bf16, all, len, |a, b| reference::bf16_reduce(ReduceOp::Sum, a, b));
            let got: Vec<u16> = shmem.read(&dstb)?.iter().map(|v| v.0).collect();
            errs.extend(first_diff("allreduce bf16 sum", &got, &want, half_bits));
            // allreduce f16 sum
            shmem.allreduce_on_stream(&team, &dsth, &srch, len, ReduceOp::Sum, stream)?;
            stream.synchronize().cu("sync")?;
            let want = fold(&members, &data_f16, all, len, |a, b| reference::f16_reduce(ReduceOp::Sum, a, b));
            let got: Vec<u16> = shmem.read(&dsth)?.iter().map(|v| v.0).collect();
            errs.extend(first_diff("allreduce f16 sum", &got, &want, half_bits));
            // allreduce u32 sum (wraps)
            shmem.allreduce_on_stream(&team, &dstu32, &srcu32, len, ReduceOp::Sum, stream)?;
            stream.synchronize().cu("sync")?;
            let want = fold(&members, &data_u32, all, len, |a, b| u32::reduce(ReduceOp::Sum, a, b));
            errs.extend(first_diff("allreduce u32 sum", &shmem.read(&dstu32)?, &want, |v| *v));
            // allreduce i64 max
            shmem.allreduce_on_stream(&team, &dsti64, &srci64, len, ReduceOp::Max, stream)?;
            stream.synchronize().cu("sync")?;
            let want = fold(&members, &data_i64, all, len, |a, b| i64::reduce(ReduceOp::Max, a, b));
            errs.extend(first_diff("allreduce i64 max", &shmem.read(&dsti64)?, &want, |v| *v));
            // reducescatter f32 max
            shmem.reducescatter_on_stream(&team, &dst, &src, len, ReduceOp::Max, stream)?;
            stream.synchronize().cu("sync")?;
            let want = fold(&members, &data_f32, mine, len, |a, b| f32::reduce(ReduceOp::Max, a, b));
            errs.extend(first_diff("reducescatter f32 max", &shmem.read_at(&dst, 0, len)?, &want, f32_bits));
            // reducescatter i32 sum (wraps)
            shmem.reducescatter_on_stream(&team, &dsti32, &srci32, len, ReduceOp::Sum, stream)?;
            stream.synchronize().cu("sync")?;
            let want = fold(&members, &data_i32, mine, len, |a, b| i32::reduce(ReduceOp::Sum, a, b));
            errs.extend(first_diff("reducescatter i32 sum", &shmem.read(&dsti32)?, &want, |v| *v));
            // reducescatter u64 xor
            shmem.reducescatter_on_stream(&team, &dstu64, &srcu64, len, ReduceOp::Xor, stream)?;
            stream.synchronize().cu("sync")?;
            let want = fold(&members, &data_u64, mine, len, |a, b| u64::reduce(ReduceOp::Xor, a, b));
            errs.extend(first_diff("reducescatter u64 xor", &shmem.read(&dstu64)?, &want, |v| *v));
            // reducescatter i64 min (into the allreduce's destination)
            shmem.reducescatter_on_stream(&team, &dsti64, &srci64s, len, ReduceOp::Min, stream)?;
            stream.synchronize().cu("sync")?;
            let want = fold(&members, &data_i64s, mine, len, |a, b| i64::reduce(ReduceOp::Min, a, b));
            errs.extend(first_diff("reducescatter i64 min", &shmem.read(&dsti64)?, &want, |v| *v));
            // reducescatter bf16 min
            shmem.reducescatter_on_stream(&team, &dstb, &srcbs, len, ReduceOp::Min, stream)?;
            stream.synchronize().cu("sync")?;
            let want = fold(&members, &data_bf16, mine, len, |a, b| reference::bf16_reduce(ReduceOp::Min, a, b));
            let got: Vec<u16> = shmem.read(&dstb)?.iter().map(|v| v.0).collect();
            errs.extend(first_diff("reducescatter bf16 min", &got, &want, half_bits));
            // broadcast from the last member
            shmem.broadcast_on_stream(&team, &dst, &src, len, tn - 1, stream)?;
            stream.synchronize().cu("sync")?;
            let want = data_f32(members[tn - 1])[..len].to_vec();
            errs.extend(first_diff("broadcast", &shmem.read_at(&dst, 0, len)?, &want, f32_bits));
            // fcollect of the first `len / n` elements of each member
            let k = len / n;
            shmem.fcollect_on_stream(&team, &dst, &src, k, stream)?;
            stream.synchronize().cu("sync")?;
            let want: Vec<f32> = members.iter().flat_map(|&m| data_f32(m)[..k].to_vec()).collect();
            errs.extend(first_diff("fcollect", &shmem.read_at(&dst, 0, k * tn)?, &want, f32_bits));
            // alltoall: block tme of member m's src lands at block m
            shmem.alltoall_on_stream(&team, &dst, &src, k, stream)?;
            stream.synchronize().cu("sync")?;
            let want: Vec<f32> = members.iter().flat_map(|&m| data_f32(m)[tme * k..(tme + 1) * k].to_vec()).collect();
            errs.extend(first_diff("alltoall", &shmem.read_at(&dst, 0, k * tn)?, &want, f32_bits));
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
        println!(
            "  {n} PEs, {len} elements: stream-ordered broadcast/fcollect/alltoall, allreduce (f32/bf16/f16/u32 sum, i64 max), \
             reducescatter (f32 max, i32 sum, u64 xor, i64 min, bf16 min) on world and odd team: bit-exact"
        );
        Ok(())
    } else {
        Err(bad.join("\n").into())
    }
}
