//! The typed device API (`Sym<T>` handles, kernels tests/kernels/src/typed.rs):
//! the host passes `&SymSlice<T>` and the kernel's safe calls move the data;
//! their checks trap with a message naming the call even with debug checks off.

use crate::common::*;
use gpushmem::Shmem;
use std::time::Duration;

/// `typed_calls` on `n` PEs: put_signal into the next PE, signal wait,
/// atomic add on PE 0, get from the previous PE, all-reduce; every result checked.
pub fn typed_calls(n: usize) -> TestResult {
    let len = 1000usize;
    let value = |pe: usize, i: usize| (pe as u64 + 1) * 1_000_003 + i as u64;
    let rows = threads(n, 16 << 20, |shmem| {
        let me = shmem.my_pe();
        let src = shmem.malloc::<u64>(len)?;
        let dest = shmem.calloc::<u64>(len)?;
        let got = shmem.calloc::<u64>(len)?;
        let sig = shmem.calloc::<u64>(1)?;
        let count = shmem.calloc::<u64>(1)?;
        let sum = shmem.calloc::<u64>(len)?;
        shmem.write(&src, &(0..len).map(|i| value(me, i)).collect::<Vec<_>>())?;
        shmem.barrier_all()?;
        let m = kernels(shmem)?;
        // SAFETY: `typed_calls(dest, src, got, sig, count, sum)`, all `Sym<u64>`.
        unsafe {
            shmem.launch_collective(
                &m.kernel("typed_calls")?,
                one_block(256),
                (&dest, &src, &got, &sig, &count, &sum),
            )?
        };
        shmem.barrier_all()?;
        let out =
            (shmem.read(&dest)?, shmem.read(&got)?, shmem.read(&sig)?[0], shmem.read(&count)?[0], shmem.read(&sum)?);
        for s in [src, dest, got, sig, count, sum] {
            shmem.free(s)?;
        }
        Ok(out)
    })?;
    let mut bad = Vec::new();
    for (pe, (dest, got, sig, count, sum)) in rows.iter().enumerate() {
        let prev = (pe + n - 1) % n;
        if (0..len).any(|i| dest[i] != value(prev, i)) {
            bad.push(format!("PE {pe}: put_signal_nbi_block did not deliver PE {prev}'s values"));
        }
        if (0..len).any(|i| got[i] != value(prev, i)) {
            bad.push(format!("PE {pe}: get did not fetch PE {prev}'s values"));
        }
        if *sig != 1 {
            bad.push(format!("PE {pe}: signal {sig}, want 1"));
        }
        let want_count = if pe == 0 { n as u64 } else { 0 };
        if *count != want_count {
            bad.push(format!("PE {pe}: atomic count {count}, want {want_count}"));
        }
        if (0..len).any(|i| sum[i] != (0..n).map(|p| value(p, i)).sum::<u64>()) {
            bad.push(format!("PE {pe}: reduce_block sum wrong"));
        }
    }
    fail_if_any(&bad)?;
    println!("  {n} PEs: put_signal_nbi_block, signal_wait_until, atomic_fetch_add, get, reduce_block on Sym<u64>: all right");
    Ok(())
}

/// `typed_p_g` on `n` PEs: `Sym::p` into the next PE, then `Sym::g` back from it.
pub fn p_g(n: usize) -> TestResult {
    let rows = threads(n, 16 << 20, |shmem| {
        let mark = shmem.calloc::<u64>(n)?;
        let seen = shmem.calloc::<u64>(1)?;
        let m = kernels(shmem)?;
        let k = m.kernel("typed_p_g")?;
        shmem.barrier_all()?;
        // SAFETY: `typed_p_g(step: u32, mark: Sym<u64>, seen: Sym<u64>)`; `mark` has n_pes elements.
        unsafe { shmem.launch(&k, one_block(32), (0u32, &mark, &seen))? };
        shmem.barrier_all()?;
        // SAFETY: as above.
        unsafe { shmem.launch(&k, one_block(32), (1u32, &mark, &seen))? };
        shmem.synchronize()?;
        let out = (shmem.read(&mark)?, shmem.read(&seen)?[0]);
        shmem.barrier_all()?;
        Ok(out)
    })?;
    let mut bad = Vec::new();
    for (pe, (mark, seen)) in rows.iter().enumerate() {
        let prev = (pe + n - 1) % n;
        if mark[prev] != 100 + prev as u64 {
            bad.push(format!("PE {pe}: Sym::p from PE {prev} left {}, want {}", mark[prev], 100 + prev));
        }
        if *seen != 100 + pe as u64 {
            bad.push(format!("PE {pe}: Sym::g returned {seen}, want {}", 100 + pe));
        }
    }
    fail_if_any(&bad)?;
    println!("  {n} PEs: Sym::p into the next PE and Sym::g back: right");
    Ok(())
}

/// Child scenario `typed_misuse_<what>`: launches `typed_misuse(what, buf)` on one PE.
pub fn misuse_child(what: u32) -> gpushmem::Result<()> {
    let shmem = Shmem::init()?;
    let buf = shmem.calloc::<u64>(16)?;
    let m = kernels(&shmem)?;
    // SAFETY: `typed_misuse(what: u32, buf: Sym<u64>)`.
    unsafe { shmem.launch(&m.kernel("typed_misuse")?, one_block(32), (what, &buf))? };
    shmem.synchronize()?;
    println!("NO ERROR: the kernel returned normally");
    Ok(())
}

/// Each misuse traps with its message, debug checks off.
pub fn misuse_traps() -> TestResult {
    let cases: [(u32, &str); 6] = [
        (0, "Sym::put_nbi: src has 7 elements, the call needs 8"),
        (1, "Sym::put: PE 1000 is out of range"),
        (2, "Sym::atomic_add: the word has 2 elements, the call needs 1"),
        (3, "Sym::reduce: the destination (heap offset"),
        (4, "Sym::p: range 8..9 is out of bounds of a Sym of 8 elements"),
        (5, "Sym::g: PE 1000 is out of range"),
    ];
    let mut bad = Vec::new();
    for (what, needle) in cases {
        let scenario = format!("typed_misuse_{what}");
        let (_, text, _) = crate::errors::child(&scenario, &[("GPUSHMEM_DEBUG_CHECKS", "0")], Duration::from_secs(60))?;
        if !text.contains(needle) || text.contains("NO ERROR") {
            bad.push(format!("{scenario}: expected {needle:?} and a failed launch; output:\n{text}"));
        }
    }
    fail_if_any(&bad)?;
    println!("  6 misuses of typed calls each trapped with its message (debug checks off)");
    Ok(())
}
