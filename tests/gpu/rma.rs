//! Ring and all-to-all exchanges through every RMA variant, sizes from 1 byte
//! to 64 MiB (quick mode: to 64 KiB + 3), odd lengths and misaligned offsets,
//! poisoned destinations, random data, every byte checked; [`GUARD`] bytes
//! just before and after every destination range (and around every source
//! range) hold a known pattern that must be intact afterwards, so a transfer
//! that writes a byte too many or too early fails.

use crate::common::*;
use gpushmem::Shmem;

/// (code in the test kernel's `rma`, name, is a get, element-wise p/g, typed u32 form)
pub const OPS: &[(u32, &str, bool)] = &[
    (0, "putmem_nbi", false),
    (1, "putmem_nbi_warp", false),
    (2, "putmem_nbi_block", false),
    (3, "putmem", false),
    (4, "putmem_warp", false),
    (5, "putmem_block", false),
    (6, "getmem_nbi", true),
    (7, "getmem_nbi_warp", true),
    (8, "getmem_nbi_block", true),
    (9, "getmem", true),
    (10, "getmem_warp", true),
    (11, "getmem_block", true),
    (12, "p (u8 loop)", false),
    (13, "g (u8 loop)", true),
    (14, "put_nbi::<u32>", false),
    (15, "get_block::<u32>", true),
];

/// Whether an op is run at this size and these offsets (element-wise and
/// single-thread forms are slow at 64 MiB; typed u32 forms need 4-byte multiples).
fn applies(op: u32, bytes: usize, doff: usize, soff: usize) -> bool {
    match op {
        12 | 13 => bytes <= 64 << 10,
        0 | 3 | 6 | 9 => bytes <= 2 << 20,
        14 | 15 => bytes.is_multiple_of(4) && doff.is_multiple_of(4) && soff.is_multiple_of(4),
        _ => true,
    }
}

pub struct Case {
    bytes: usize,
    doff: usize,
    soff: usize,
}

/// Poison = bitwise NOT of what should arrive, so an unwritten byte always fails.
fn poison(want: &[u8]) -> Vec<u8> {
    want.iter().map(|b| !b).collect()
}

/// Guard bytes on each side of a destination (and of a source). A multiple
/// of 16, so the offsets' alignment classes stay those of the sweep.
const GUARD: usize = 32;

/// The destination guards' pattern: high bit set. Source guards have it
/// clear ([`src_guard`]), so a transfer that copies a source's neighbouring
/// bytes into a destination's guard changes every such byte.
fn dst_guard() -> Vec<u8> {
    (0..GUARD).map(|i| 0x80 | (i as u8).wrapping_mul(37)).collect()
}

fn src_guard() -> Vec<u8> {
    (0..GUARD).map(|i| 0x7F & (i as u8).wrapping_mul(37).wrapping_add(11)).collect()
}

/// `guard`, `body`, `guard`: what a window around a range is written with (or must read back as).
fn framed(guard: &[u8], body: &[u8]) -> Vec<u8> {
    [guard, body, guard].concat()
}

/// Checks a window read back around a range: every byte of the range
/// against `want`, and the guards on both sides against `guard`.
fn check_window(what: &str, got: &[u8], guard: &[u8], want: &[u8]) -> Result<(), String> {
    let g = guard.len();
    if got.len() != want.len() + 2 * g {
        return Err(format!("{what}: read {} bytes, want {}", got.len(), want.len() + 2 * g));
    }
    let mut errs = Vec::new();
    for (side, range) in [("before", 0..g), ("after", got.len() - g..got.len())] {
        if let Some(i) = got[range.clone()].iter().zip(guard).position(|(a, b)| a != b) {
            let wrong = got[range.clone()].iter().zip(guard).filter(|(a, b)| a != b).count();
            errs.push(format!(
                "{what}: {wrong} of {g} guard bytes {side} the range changed; first at {}: got {:#04x}, want {:#04x}",
                range.start + i,
                got[range.start + i],
                guard[i]
            ));
        }
    }
    if let Err(m) = compare(what, &got[g..g + want.len()], want) {
        errs.push(m);
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(errs.join("; "))
    }
}

fn ring_on_pe(shmem: &Shmem, cases: &[Case], ops: &[u32]) -> gpushmem::Result<Vec<String>> {
    let n = shmem.n_pes();
    let me = shmem.my_pe();
    // Ranges start at GUARD + offset, with GUARD bytes free on both sides.
    let max = cases.iter().map(|c| c.bytes + c.doff.max(c.soff)).max().unwrap_or(1) + 2 * GUARD;
    let src = shmem.malloc::<u8>(max)?;
    let dst = shmem.malloc::<u8>(max)?;
    let (dguard, sguard) = (dst_guard(), src_guard());
    let module = kernels(shmem)?;
    let k = module.kernel("rma_ring")?;
    let mut failures = Vec::new();
    for (ci, c) in cases.iter().enumerate() {
        for &op in ops {
            if !applies(op, c.bytes, c.doff, c.soff) {
                continue;
            }
            let is_get = OPS[op as usize].2;
            let stream_of = |pe: usize| (ci as u64) << 32 | (op as u64) << 16 | pe as u64;
            let mine = random_bytes(seed(), stream_of(me), c.bytes);
            // put: I receive from me-1; get: I fetch from me+1.
            let from = if is_get { (me + 1) % n } else { (me + n - 1) % n };
            let want = random_bytes(seed(), stream_of(from), c.bytes);
            // Source and destination ranges at GUARD + offset, framed by their guards.
            shmem.write_at(&src, c.soff, &framed(&sguard, &mine))?;
            shmem.write_at(&dst, c.doff, &framed(&dguard, &poison(&want)))?;
            shmem.bootstrap().barrier()?; // everyone poisoned before anyone writes
            let (d, s) = ((GUARD + c.doff) as u64, (GUARD + c.soff) as u64);
            let args = (op, dst.as_kernel_ptr() + d, src.as_kernel_ptr() + s, c.bytes as u64, 1u32);
            unsafe { shmem.launch_collective(&k, one_block(256), args)? };
            shmem.synchronize()?;
            let what = format!("ring {} bytes={} doff={} soff={}", OPS[op as usize].1, c.bytes, c.doff, c.soff);
            let got = shmem.read_at(&dst, c.doff, c.bytes + 2 * GUARD)?;
            if let Err(m) = check_window(&what, &got, &dguard, &want) {
                failures.push(format!("PE {me}/{n}: {m}"));
            }
            // The source's guards too (a get reads it from a peer: nobody may write there).
            let before = shmem.read_at(&src, c.soff, GUARD)?;
            let after = shmem.read_at(&src, GUARD + c.soff + c.bytes, GUARD)?;
            if before != sguard || after != sguard {
                failures.push(format!("PE {me}/{n}: {what}: the source's guard bytes changed"));
            }
            shmem.bootstrap().barrier()?;
        }
    }
    shmem.free(dst)?;
    shmem.free(src)?;
    Ok(failures)
}

fn alltoall_on_pe(shmem: &Shmem, chunks: &[usize], ops: &[u32]) -> gpushmem::Result<Vec<String>> {
    let n = shmem.n_pes();
    let me = shmem.my_pe();
    // The n slots start at GUARD, with GUARD bytes free on both sides.
    let max = chunks.iter().max().copied().unwrap_or(1) * n + 2 * GUARD;
    let src = shmem.malloc::<u8>(max)?;
    let dst = shmem.malloc::<u8>(max)?;
    let (dguard, sguard) = (dst_guard(), src_guard());
    let module = kernels(shmem)?;
    let k = module.kernel("rma_alltoall")?;
    let mut failures = Vec::new();
    for &chunk in chunks {
        for &op in ops {
            if !applies(op, chunk, 0, 0) || (op == 12 || op == 13) && chunk * n > 64 << 10 {
                continue;
            }
            let is_get = OPS[op as usize].2;
            // PE p's source chunk k is random_bytes(p, k); after the exchange slot k of PE me holds PE k's chunk me.
            let stream_of = |p: usize, k: usize| (chunk as u64) << 40 | (op as u64) << 24 | (p as u64) << 12 | k as u64;
            let mut s = Vec::with_capacity(chunk * n);
            for k in 0..n {
                s.extend_from_slice(&random_bytes(seed(), stream_of(me, k), chunk));
            }
            let mut want = Vec::with_capacity(chunk * n);
            for k in 0..n {
                want.extend_from_slice(&random_bytes(seed(), stream_of(k, me), chunk));
            }
            let _ = is_get; // the same layout results for puts and gets
            shmem.write_at(&src, 0, &framed(&sguard, &s))?;
            shmem.write_at(&dst, 0, &framed(&dguard, &poison(&want)))?;
            shmem.bootstrap().barrier()?;
            let g = GUARD as u64;
            unsafe {
                shmem.launch_collective(
                    &k,
                    one_block(256),
                    (op, dst.as_kernel_ptr() + g, src.as_kernel_ptr() + g, chunk as u64),
                )?
            };
            shmem.synchronize()?;
            // The slots are adjacent: a slot's overrun lands in its checked neighbour, the outer ones' in a guard.
            let what = format!("alltoall {} chunk={chunk}", OPS[op as usize].1);
            let got = shmem.read_at(&dst, 0, chunk * n + 2 * GUARD)?;
            if let Err(m) = check_window(&what, &got, &dguard, &want) {
                failures.push(format!("PE {me}/{n}: {m}"));
            }
            let before = shmem.read_at(&src, 0, GUARD)?;
            let after = shmem.read_at(&src, GUARD + chunk * n, GUARD)?;
            if before != sguard || after != sguard {
                failures.push(format!("PE {me}/{n}: {what}: the source's guard bytes changed"));
            }
            shmem.bootstrap().barrier()?;
        }
    }
    shmem.free(dst)?;
    shmem.free(src)?;
    Ok(failures)
}

fn report(failures: Vec<Vec<String>>) -> TestResult {
    fail_if_any(&failures.into_iter().flatten().collect::<Vec<_>>())
}

/// Sizes 1 B … 64 MiB (quick mode: … 64 KiB + 3) with odd lengths, and misaligned offsets.
pub fn ring_cases() -> Vec<Case> {
    let mut v = Vec::new();
    let sizes = [1usize, 3, 16, 17, 255, 4096 + 5, (64 << 10) + 3, (1 << 20) + 7, 64 << 20];
    for bytes in sizes.into_iter().filter(|&b| within_cap(b)) {
        for (doff, soff) in [(0, 0), (1, 1), (8, 0), (13, 6), (4, 12), (3, 0)] {
            if bytes >= 1 << 20 && (doff, soff) != (0, 0) && (doff, soff) != (13, 6) {
                continue; // large sizes: one aligned and one misaligned pair
            }
            v.push(Case { bytes, doff, soff });
        }
    }
    v
}

pub fn ring(n: usize) -> TestResult {
    let cases = ring_cases();
    let ops: Vec<u32> = OPS.iter().map(|o| o.0).collect();
    report(threads(n, 160 << 20, |shmem| ring_on_pe(shmem, &cases, &ops))?)
}

pub fn alltoall(n: usize) -> TestResult {
    let chunks: Vec<usize> =
        [1usize, 7, 64, 4096 + 3, (256 << 10) + 1, 4 << 20].into_iter().filter(|&c| within_cap(c)).collect();
    let ops: Vec<u32> = OPS.iter().map(|o| o.0).collect();
    report(threads(n, 96 << 20, |shmem| alltoall_on_pe(shmem, &chunks, &ops))?)
}

/// The process-mode body: run by every PE under gpushmem-run.
pub fn ring_and_alltoall_process() -> gpushmem::Result<Vec<String>> {
    let shmem = Shmem::init()?;
    let ops: Vec<u32> = OPS.iter().map(|o| o.0).collect();
    // Processes on one GPU time-slice: fewer cases (sizes 1 B … 64 MiB, aligned and misaligned;
    // quick mode: the sizes up to 4101 B, which `ring_cases` keeps).
    let cases: Vec<Case> = ring_cases()
        .into_iter()
        .filter(|c| {
            [1, 17, 4101, (1 << 20) + 7, 64 << 20].contains(&c.bytes) && [(0, 0), (13, 6)].contains(&(c.doff, c.soff))
        })
        .collect();
    let mut f = ring_on_pe(&shmem, &cases, &ops)?;
    let chunks: Vec<usize> =
        [1, 7, 4096 + 3, (256 << 10) + 1, 4 << 20].into_iter().filter(|&c| within_cap(c)).collect();
    f.extend(alltoall_on_pe(&shmem, &chunks, &ops)?);
    shmem.finalize()?;
    Ok(f)
}

/// `Shmem::ptr` (host `nvshmem_ptr`): every PE copies its pattern with a plain
/// `cuMemcpyDtoDAsync` to the next PE's `dst` through the address `ptr`
/// gives, then (after a barrier) checks what it received; `ptr` refuses a PE
/// outside the job.
pub fn host_ptr(n: usize) -> TestResult {
    const LEN: usize = 4099;
    let results = threads(n, 16 << 20, |shmem: &Shmem| {
        let (me, n) = (shmem.my_pe(), shmem.n_pes());
        let next = (me + 1) % n;
        let src = shmem.malloc::<u8>(LEN)?;
        let dst = shmem.calloc::<u8>(LEN)?;
        shmem.write(&src, &random_bytes(seed(), me as u64, LEN))?;
        shmem.barrier_all()?;
        let to = shmem.ptr(&dst, next)?;
        let s = shmem.stream();
        // SAFETY: `to` is the next PE's `dst` (LEN bytes), `src` this PE's LEN bytes.
        unsafe { gpushmem::cudarc::driver::result::memcpy_dtod_async(to, src.as_kernel_ptr(), LEN, s.cu_stream()) }
            .map_err(|e| gpushmem::Error::Cuda { call: "cuMemcpyDtoDAsync".into(), source: e })?;
        shmem.synchronize()?;
        shmem.barrier_all()?;
        let from = (me + n - 1) % n;
        let mut failures = Vec::new();
        if let Err(e) =
            compare(&format!("PE {me} from PE {from}"), &shmem.read(&dst)?, &random_bytes(seed(), from as u64, LEN))
        {
            failures.push(e);
        }
        if shmem.ptr(&dst, n).is_ok() {
            failures.push(format!("PE {me}: ptr(dst, {n}) accepted a PE outside a job of {n}"));
        }
        if shmem.ptr(&dst, me)? != dst.as_kernel_ptr() {
            failures.push(format!("PE {me}: ptr(dst, my_pe) is not dst's own address"));
        }
        shmem.barrier_all()?;
        Ok(failures)
    })?;
    fail_if_any(&results.concat())?;
    println!("  {n} PEs: cuMemcpy to Shmem::ptr(dst, next) delivered {LEN} bytes to every PE; bad PE refused");
    Ok(())
}
