//! Stream-ordered host operations interleaved with kernels on the same and on other streams.

use crate::common::*;
use gpushmem::{Cmp, LaunchConfig, Shmem, SignalOp, SymSlice};

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

/// Bytes of each guard around a stream collective's destination: the heap's
/// allocation unit (256 B), so that a guard allocated just before the
/// destination ends exactly where the destination begins.
pub const FRAME: usize = 256;

/// The pattern of the guard before a destination (high bit set).
pub fn front_guard(len: usize) -> Vec<u8> {
    (0..len).map(|i| 0x80 | (i as u8).wrapping_mul(29)).collect()
}

/// The pattern of everything after the result in a destination (high bit clear).
pub fn tail_guard(len: usize) -> Vec<u8> {
    (0..len).map(|i| 0x7F & (i as u8).wrapping_mul(53).wrapping_add(7)).collect()
}

/// What a destination holds before a call whose result is `want` (bytes):
/// bitwise NOT of the result (so an unwritten byte always fails), then the
/// tail pattern up to `len` bytes.
pub fn poisoned(want: &[u8], len: usize) -> Vec<u8> {
    want.iter().map(|b| !b).chain(tail_guard(len - want.len())).collect()
}

/// Checks a framed destination after a call: `front`, the guard before it,
/// must still be [`front_guard`]; `got` (the whole destination) must hold
/// `want` (`esize`-byte elements, compared bit for bit) and then the tail
/// pattern, unchanged. The first difference, as a message.
pub fn check_framed(what: &str, front: &[u8], got: &[u8], want: &[u8], esize: usize) -> Option<String> {
    if let Some(i) = front.iter().zip(front_guard(front.len())).position(|(a, b)| *a != b) {
        let back = front.len() - i;
        return Some(format!("{what}: the guard before the destination changed, {back} bytes before it"));
    }
    if got.len() < want.len() {
        return Some(format!("{what}: destination of {} bytes, result of {}", got.len(), want.len()));
    }
    let after = [want, &tail_guard(got.len() - want.len())].concat();
    let i = got.iter().zip(&after).position(|(a, b)| a != b)?;
    let wrong = got.iter().zip(&after).filter(|(a, b)| a != b).count();
    let role = if i < want.len() {
        format!("element {} of {}", i / esize, want.len() / esize)
    } else {
        format!("{} bytes past the result's end (written out of bounds)", i - want.len())
    };
    Some(format!("{what}: {wrong} bytes wrong; first at byte {i}, {role}: got {:#04x}, want {:#04x}", got[i], after[i]))
}

/// A stream collective's destination of `cap` elements with guards: a
/// [`FRAME`]-byte allocation directly before it and `FRAME` bytes after its
/// `cap` elements (inside the allocation).
struct Framed<T> {
    front: SymSlice<u8>,
    dst: SymSlice<T>,
}

impl<T: bytemuck::Pod> Framed<T> {
    /// Allocates (collective) the guard and then the destination; an error
    /// when the heap did not place them back to back.
    fn new(shmem: &Shmem, cap: usize) -> gpushmem::Result<Framed<T>> {
        let front = shmem.malloc::<u8>(FRAME)?;
        let dst = shmem.malloc::<T>(cap + FRAME / std::mem::size_of::<T>())?;
        if front.offset() + FRAME as u64 != dst.offset() {
            return Err(gpushmem::Error::Config {
                name: "test heap layout".into(),
                value: format!("guard at {:#x}, destination at {:#x}", front.offset(), dst.offset()),
                why: "the guard does not end where the destination begins".into(),
            });
        }
        Ok(Framed { front, dst })
    }

    /// One collective call on every PE with this destination: poisons the
    /// guards and the destination ([`poisoned`] for the result `want`, bytes),
    /// waits for every PE to have done so, runs `call` (members only:
    /// `want` is `None` on a non-member, whose destination must stay
    /// untouched) and waits for it, then checks the guards and every byte
    /// ([`check_framed`]); a difference goes to `errs`.
    fn call(
        &self,
        shmem: &Shmem,
        errs: &mut Vec<String>,
        what: &str,
        want: Option<Vec<u8>>,
        call: impl FnOnce(&SymSlice<T>) -> gpushmem::Result<()>,
    ) -> gpushmem::Result<()> {
        let member = want.is_some();
        let want = want.unwrap_or_default();
        let len = self.dst.byte_len() as usize;
        shmem.write(&self.front, &front_guard(FRAME))?;
        let size = std::mem::size_of::<T>();
        let before: Vec<T> = poisoned(&want, len).chunks_exact(size).map(bytemuck::pod_read_unaligned).collect();
        shmem.write(&self.dst, &before)?;
        shmem.bootstrap().barrier()?; // every PE poisoned before any PE's call writes
        if member {
            call(&self.dst)?;
            shmem.stream().synchronize().cu("sync")?;
        }
        let (front, got) = (shmem.read(&self.front)?, shmem.read(&self.dst)?);
        errs.extend(check_framed(what, &front, bytemuck::cast_slice(&got), &want, std::mem::size_of::<T>()));
        Ok(())
    }
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
///
/// Before every call each PE poisons its whole destination (the result's
/// bytes inverted, the rest a pattern) and a [`FRAME`]-byte guard right
/// before it; after the call every byte of both is checked ([`Framed::call`]):
/// the result, and that nothing before or after it changed (a non-member's
/// destination: nothing at all). The two rounds (world, then the odd team)
/// draw new random sources, so no result of round 2 equals one of round 1.
pub fn collectives_on_stream(n: usize, len: usize) -> TestResult {
    use crate::reference::{self, in_member_order, RefReduce};
    use gpushmem::{Bf16, ReduceOp, F16};
    reference::agreement::checked()?;
    // Round `r`'s inputs of PE `pe`: a stream of their own per round.
    let data_f32 = |r: u64, pe: usize| random_unit_f32s(seed(), 300 + 64 * r + pe as u64, len * n);
    // Inputs of the integer collectives: full-range random values, per PE.
    let data_u32 = |r: u64, pe: usize| random_of::<u32>(400 + 64 * r, pe, len);
    let data_i64 = |r: u64, pe: usize| random_of::<i64>(500 + 64 * r, pe, len);
    let data_i32 = |r: u64, pe: usize| random_of::<i32>(600 + 64 * r, pe, len * n);
    let data_u64 = |r: u64, pe: usize| random_of::<u64>(700 + 64 * r, pe, len * n);
    let data_i64s = |r: u64, pe: usize| random_of::<i64>(800 + 64 * r, pe, len * n);
    // Half inputs, rounded by the reference (not the kernel crate).
    let data_bf16 =
        |r: u64, pe: usize| data_f32(r, pe).iter().map(|&v| reference::bf16_from_f32(v)).collect::<Vec<u16>>();
    let data_f16 =
        |r: u64, pe: usize| data_f32(r, pe).iter().map(|&v| reference::f16_from_f32(v)).collect::<Vec<u16>>();
    // The buffers below: about (34 n + 42) bytes per element, plus the guards, plus room.
    let heap = ((len * (34 * n + 42)) as u64 * 5 / 4).max(32 << 20);
    let rows = threads(n, heap, |shmem| {
        let me = shmem.my_pe();
        let world = shmem.team_world();
        let odd = shmem.team_split_strided(&world, 1, 2, n / 2)?;
        let stream = shmem.stream();
        let src = shmem.malloc::<f32>(len * n)?;
        let dst = Framed::<f32>::new(shmem, len * n)?;
        let srcb = shmem.malloc::<Bf16>(len)?;
        let dstb = Framed::<Bf16>::new(shmem, len)?;
        let srcbs = shmem.malloc::<Bf16>(len * n)?;
        let srch = shmem.malloc::<F16>(len)?;
        let dsth = Framed::<F16>::new(shmem, len)?;
        let (srcu32, dstu32) = (shmem.malloc::<u32>(len)?, Framed::<u32>::new(shmem, len)?);
        let (srci64, dsti64) = (shmem.malloc::<i64>(len)?, Framed::<i64>::new(shmem, len)?);
        let (srci32, dsti32) = (shmem.malloc::<i32>(len * n)?, Framed::<i32>::new(shmem, len)?);
        let (srcu64, dstu64) = (shmem.malloc::<u64>(len * n)?, Framed::<u64>::new(shmem, len)?);
        let srci64s = shmem.malloc::<i64>(len * n)?;
        let mut errs = Vec::new();
        for (round, team) in [world, odd].into_iter().enumerate() {
            let r = round as u64;
            // New sources each round; nobody rewrites its own before every PE is done with the last round's.
            shmem.bootstrap().barrier()?;
            shmem.write(&src, &data_f32(r, me))?;
            shmem.write(&srcb, &data_bf16(r, me)[..len].iter().map(|&b| Bf16(b)).collect::<Vec<_>>())?;
            shmem.write(&srcbs, &data_bf16(r, me).iter().map(|&b| Bf16(b)).collect::<Vec<_>>())?;
            shmem.write(&srch, &data_f16(r, me)[..len].iter().map(|&h| F16(h)).collect::<Vec<_>>())?;
            shmem.write(&srcu32, &data_u32(r, me))?;
            shmem.write(&srci64, &data_i64(r, me))?;
            shmem.write(&srci32, &data_i32(r, me))?;
            shmem.write(&srcu64, &data_u64(r, me))?;
            shmem.write(&srci64s, &data_i64s(r, me))?;
            // Members in member order (non-members: none; they call nothing, and their destinations must stay untouched).
            let tme = team.my_pe();
            let members: Vec<usize> = (0..team.n_pes()).map(|i| team.world_pe(i).unwrap()).collect();
            let tn = members.len();
            // `op` over the members' element `at(i)` of round r's `data`, in member order (the device's).
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
            let m = &members;
            let all = |i: usize| i;
            let t = tme.unwrap_or(0);
            let mine = |i: usize| t * len + i;
            // The expected result on a member, as bytes (none on a non-member).
            fn want<T: bytemuck::Pod>(member: bool, f: impl FnOnce() -> Vec<T>) -> Option<Vec<u8>> {
                member.then(|| bytemuck::cast_slice(&f()).to_vec())
            }
            let is = tme.is_some();
            let (f_r, b_r, h_r) =
                (|pe: usize| data_f32(r, pe), |pe: usize| data_bf16(r, pe), |pe: usize| data_f16(r, pe));
            let (u32_r, i64_r, i32_r) =
                (|pe: usize| data_u32(r, pe), |pe: usize| data_i64(r, pe), |pe: usize| data_i32(r, pe));
            let (u64_r, i64s_r) = (|pe: usize| data_u64(r, pe), |pe: usize| data_i64s(r, pe));
            let (sum, max, min, xor) = (ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Xor);
            let w = want(is, || fold(m, &f_r, all, len, |a, b| f32::reduce(sum, a, b)));
            dst.call(shmem, &mut errs, "allreduce f32 sum", w, |d| {
                shmem.allreduce_on_stream(&team, d, &src, len, sum, stream)
            })?;
            let w = want(is, || fold(m, &b_r, all, len, |a, b| reference::bf16_reduce(sum, a, b)));
            dstb.call(shmem, &mut errs, "allreduce bf16 sum", w, |d| {
                shmem.allreduce_on_stream(&team, d, &srcb, len, sum, stream)
            })?;
            let w = want(is, || fold(m, &h_r, all, len, |a, b| reference::f16_reduce(sum, a, b)));
            dsth.call(shmem, &mut errs, "allreduce f16 sum", w, |d| {
                shmem.allreduce_on_stream(&team, d, &srch, len, sum, stream)
            })?;
            let w = want(is, || fold(m, &u32_r, all, len, |a, b| u32::reduce(sum, a, b)));
            dstu32.call(shmem, &mut errs, "allreduce u32 sum", w, |d| {
                shmem.allreduce_on_stream(&team, d, &srcu32, len, sum, stream)
            })?;
            let w = want(is, || fold(m, &i64_r, all, len, |a, b| i64::reduce(max, a, b)));
            dsti64.call(shmem, &mut errs, "allreduce i64 max", w, |d| {
                shmem.allreduce_on_stream(&team, d, &srci64, len, max, stream)
            })?;
            let w = want(is, || fold(m, &f_r, mine, len, |a, b| f32::reduce(max, a, b)));
            dst.call(shmem, &mut errs, "reducescatter f32 max", w, |d| {
                shmem.reducescatter_on_stream(&team, d, &src, len, max, stream)
            })?;
            let w = want(is, || fold(m, &i32_r, mine, len, |a, b| i32::reduce(sum, a, b)));
            dsti32.call(shmem, &mut errs, "reducescatter i32 sum", w, |d| {
                shmem.reducescatter_on_stream(&team, d, &srci32, len, sum, stream)
            })?;
            let w = want(is, || fold(m, &u64_r, mine, len, |a, b| u64::reduce(xor, a, b)));
            dstu64.call(shmem, &mut errs, "reducescatter u64 xor", w, |d| {
                shmem.reducescatter_on_stream(&team, d, &srcu64, len, xor, stream)
            })?;
            // Into the allreduce's destination.
            let w = want(is, || fold(m, &i64s_r, mine, len, |a, b| i64::reduce(min, a, b)));
            dsti64.call(shmem, &mut errs, "reducescatter i64 min", w, |d| {
                shmem.reducescatter_on_stream(&team, d, &srci64s, len, min, stream)
            })?;
            let w = want(is, || fold(m, &b_r, mine, len, |a, b| reference::bf16_reduce(min, a, b)));
            dstb.call(shmem, &mut errs, "reducescatter bf16 min", w, |d| {
                shmem.reducescatter_on_stream(&team, d, &srcbs, len, min, stream)
            })?;
            // broadcast from the last member
            let w = want(is, || data_f32(r, m[tn - 1])[..len].to_vec());
            dst.call(shmem, &mut errs, "broadcast", w, |d| {
                shmem.broadcast_on_stream(&team, d, &src, len, tn - 1, stream)
            })?;
            // fcollect of the first `len / n` elements of each member
            let k = len / n;
            let w = want(is, || m.iter().flat_map(|&p| data_f32(r, p)[..k].to_vec()).collect::<Vec<f32>>());
            dst.call(shmem, &mut errs, "fcollect", w, |d| shmem.fcollect_on_stream(&team, d, &src, k, stream))?;
            // alltoall: block t of member p's src lands at block p
            let w =
                want(is, || m.iter().flat_map(|&p| data_f32(r, p)[t * k..(t + 1) * k].to_vec()).collect::<Vec<f32>>());
            dst.call(shmem, &mut errs, "alltoall", w, |d| shmem.alltoall_on_stream(&team, d, &src, k, stream))?;
        }
        // Misuse is refused before anything is launched.
        let r = shmem.allreduce_on_stream(&world, &dstb.dst, &srcb, len, ReduceOp::Xor, stream);
        if !matches!(r, Err(gpushmem::Error::Config { .. })) {
            errs.push(format!("xor on bf16 was not refused: {r:?}"));
        }
        if odd.my_pe().is_none() {
            let r = shmem.allreduce_on_stream(&odd, &dst.dst, &src, len, ReduceOp::Sum, stream);
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
             reducescatter (f32 max, i32 sum, u64 xor, i64 min, bf16 min) on world and odd team, new data per round: \
             bit-exact, every destination poisoned before each call, guards before and after it untouched"
        );
        Ok(())
    } else {
        Err(bad.join("\n").into())
    }
}
