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
    let cases: [(u32, &str); 4] = [
        (0, "Sym::put_nbi: src has 7 elements, the call needs 8"),
        (1, "Sym::put: PE 1000 is out of range"),
        (2, "Sym::atomic_add: the word has 2 elements, the call needs 1"),
        (3, "Sym::reduce: the destination (heap offset"),
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
    println!("  4 misuses of typed calls each trapped with its message (debug checks off)");
    Ok(())
}
