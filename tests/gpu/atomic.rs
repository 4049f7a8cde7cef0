//! Remote atomics: fetch-add under contention from every thread of every PE
//! (exact final value, the returned old values a permutation), for u32, u64,
//! i32, i64 and the float add; a compare-and-swap spin lock protecting a
//! plain read-modify-write (no lost update over 10^5 acquisitions); each
//! operation's result and old value, replayed on the host.

use crate::common::*;
use gpushmem::KernelArg;
use gpushmem::LaunchConfig;
use std::time::Instant;

/// A type the contention kernels are built for; values are small integers
/// (or halves), exact as `f64`.
pub trait Val:
    bytemuck::Pod + KernelArg + std::fmt::Debug + Send + Sync + serde::Serialize + serde::de::DeserializeOwned
{
    fn f(self) -> f64;
}

macro_rules! val {
    ($($t:ty),*) => {$(
        impl Val for $t {
            fn f(self) -> f64 {
                self as f64
            }
        }
    )*};
}
val!(u32, u64, i32, i64, f32, f64);

/// `n` PEs × `blocks` × `threads_per` threads, each doing `iters` ×
/// `atomic_fetch_add(counter on PE 0, delta)` in kernel `kernel`. Checks that
/// the old values, over all PEs, are exactly {k × delta : k in 0..total} and
/// that the final value is total × delta. Returns the number of operations.
fn contend<T: Val>(
    kernel: &'static str,
    n: usize,
    blocks: u32,
    threads_per: u32,
    iters: u32,
    delta: T,
) -> Result<u64, String> {
    let per_pe = (blocks * threads_per * iters) as usize;
    let rows = threads(n, 8 << 20, |shmem| {
        let counter = shmem.calloc::<T>(1)?; // zeroed on every PE before any PE returns
        let out = shmem.calloc::<T>(per_pe)?;
        let module = kernels(shmem)?;
        let cfg = LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (threads_per, 1, 1), shared_mem_bytes: 0 };
        unsafe {
            shmem.launch(&module.kernel(kernel)?, cfg, (counter.as_kernel_ptr(), out.as_kernel_ptr(), iters, delta))?
        };
        shmem.synchronize()?;
        shmem.bootstrap().barrier()?; // every PE's adds are done
        let olds = shmem.read(&out)?;
        let fin = shmem.read(&counter)?[0];
        shmem.bootstrap().barrier()?;
        Ok((olds, fin))
    })
    .map_err(|e| format!("{kernel}: {}", e.message().unwrap_or("failed")))?;
    let total = (n * per_pe) as u64;
    let d = delta.f();
    let mut ks = Vec::with_capacity(total as usize);
    for (pe, (olds, _)) in rows.iter().enumerate() {
        for (i, o) in olds.iter().enumerate() {
            let k = o.f() / d;
            if k.fract() != 0.0 || !(0.0..total as f64).contains(&k) {
                return Err(format!(
                    "{kernel}: PE {pe} slot {i}: returned old value {o:?} is not k × {delta:?}, k in 0..{total}"
                ));
            }
            ks.push(k as u64);
        }
    }
    ks.sort_unstable();
    if let Some(i) = ks.iter().enumerate().position(|(i, &k)| k != i as u64) {
        return Err(format!(
            "{kernel}: the {total} returned old values are not a permutation of 0..{total} (× {delta:?}): \
             sorted, position {i} holds k = {}",
            ks[i]
        ));
    }
    let fin = rows[0].1;
    if fin.f() != total as f64 * d {
        return Err(format!("{kernel}: final counter on PE 0 is {fin:?}, want {total} × {delta:?}"));
    }
    Ok(total)
}

/// 4 PEs × 4 blocks × 128 threads on one counter on PE 0.
pub fn fetch_add_contention() -> TestResult {
    let start = Instant::now();
    let mut done = Vec::new();
    let mut failures = Vec::new();
    let mut record = |name: &str, r: Result<u64, String>| match r {
        Ok(t) => done.push(format!("{name} {t}")),
        Err(e) => failures.push(e),
    };
    record("u64 +1", contend("amo_contend_u64", 4, 4, 128, 8, 1u64));
    record("u32 +1", contend("amo_contend_u32", 4, 4, 128, 2, 1u32));
    record("i32 -1", contend("amo_contend_i32", 4, 4, 128, 2, -1i32));
    record("i64 -1", contend("amo_contend_i64", 4, 4, 128, 2, -1i64));
    record("f32 +1.0", contend("amo_contend_f32", 4, 4, 128, 2, 1.0f32));
    record("f64 -0.5", contend("amo_contend_f64", 4, 4, 128, 2, -0.5f64));
    if !failures.is_empty() {
        return Err(failures.join("\n").into());
    }
    println!(
        "  fetch_add contention, 4 PEs × 4 blocks × 128 threads on one word of PE 0: {} ops; old values a permutation, \
         finals exact, in {:.1?}",
        done.join(", "),
        start.elapsed()
    );
    Ok(())
}

/// A CAS spin lock on PE 0 taken 10^5 times (quick mode: 10^3, rounded down
/// to a multiple of the warps) by 32 warps over 4 PEs; the counter it
/// protects (plain `g` + `p`) loses no update.
pub fn cas_lock() -> TestResult {
    const PES: usize = 4;
    const BLOCKS: u32 = 2;
    const THREADS: u32 = 128;
    let lockers = PES as u64 * (BLOCKS * THREADS / 32) as u64;
    let iters = (scaled(100_000) as u64 / lockers) as u32;
    let total = lockers * iters as u64;
    let start = Instant::now();
    let rows = threads(PES, 8 << 20, |shmem| {
        let lock = shmem.calloc::<u64>(1)?;
        let counter = shmem.calloc::<u64>(1)?;
        let out = shmem.calloc::<u64>(3)?;
        let module = kernels(shmem)?;
        let cfg = LaunchConfig { grid_dim: (BLOCKS, 1, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 };
        let timeout_ns = 15_000_000_000u64;
        let args = (lock.as_kernel_ptr(), counter.as_kernel_ptr(), iters, out.as_kernel_ptr(), timeout_ns);
        unsafe { shmem.launch_collective(&module.kernel("amo_lock")?, cfg, args)? };
        shmem.synchronize()?;
        shmem.bootstrap().barrier()?;
        let o = shmem.read(&out)?;
        let (c, l) = (shmem.read(&counter)?[0], shmem.read(&lock)?[0]);
        shmem.bootstrap().barrier()?;
        Ok((o, c, l))
    })?;
    let took = start.elapsed();
    let acquired: u64 = rows.iter().map(|r| r.0[0]).sum();
    let violations: u64 = rows.iter().map(|r| r.0[1]).sum();
    let timeouts: u64 = rows.iter().map(|r| r.0[2]).sum();
    let (counter, lock) = (rows[0].1, rows[0].2);
    if acquired != total || violations != 0 || timeouts != 0 || counter != total || lock != 0 {
        return Err(format!(
            "CAS lock, {PES} PEs: {acquired} of {total} acquisitions made, {violations} times the lock word did not \
             hold the holder's tag, {timeouts} spins timed out; protected counter {counter} (want {total}, \
             {} updates lost); lock word left at {lock:#x}",
            total as i64 - counter as i64
        )
        .into());
    }
    println!(
        "  CAS spin lock on PE 0, {lockers} warps on {PES} PEs: {total} acquisitions, counter exact (no lost update), \
         in {took:.1?} ({:.2} µs/acquisition)",
        took.as_secs_f64() * 1e6 / total as f64
    );
    Ok(())
}

/// A word type the operation kernels are built for: the host replays them.
pub trait OpWord:
    bytemuck::Pod
    + KernelArg
    + PartialEq
    + std::fmt::Debug
    + Send
    + Sync
    + std::ops::BitAnd<Output = Self>
    + std::ops::BitOr<Output = Self>
    + std::ops::BitXor<Output = Self>
    + serde::Serialize
    + serde::de::DeserializeOwned
{
    const ONE: Self;
    fn wadd(self, o: Self) -> Self;
}

macro_rules! op_word {
    ($($t:ty),*) => {$(
        impl OpWord for $t {
            const ONE: Self = 1;
            fn wadd(self, o: Self) -> Self {
                self.wrapping_add(o)
            }
        }
    )*};
}
op_word!(u32, u64, i32, i64);

/// What the kernel `amo_ops` records, replayed (see its comments).
fn replay<T: OpWord>(x0: T, a: T, b: T, c: T) -> Vec<T> {
    let mut out = Vec::new();
    let mut w = x0; // atomic_set
    out.push(w); // atomic_fetch
    out.push(w); // atomic_swap(a)
    w = a;
    out.push(w); // compare_swap(a → b)
    if w == a {
        w = b;
    }
    out.push(w); // compare_swap(a → c): fails, w = b != a
    if w == a {
        w = c;
    }
    out.push(w); // atomic_fetch
    out.push(w); // atomic_fetch_inc
    w = w.wadd(T::ONE);
    w = w.wadd(T::ONE); // atomic_inc
    out.push(w);
    out.push(w); // atomic_fetch_add(c)
    w = w.wadd(c);
    w = w.wadd(c); // atomic_add(c)
    out.push(w);
    w = a;
    out.push(w); // atomic_fetch_and(b)
    w = w & b & c; // then atomic_and(c)
    out.push(w);
    w = a;
    out.push(w); // atomic_fetch_or(b)
    w = w | b | c;
    out.push(w);
    w = a;
    out.push(w); // atomic_fetch_xor(b)
    w = w ^ b ^ c;
    out.push(w);
    out.push(w); // compare_swap(w → x0): succeeds
    w = x0;
    out.push(w);
    out
}

fn ops_case<T: OpWord>(kernel: &'static str, x0: T, a: T, b: T, c: T) -> Result<(), String> {
    if a == b {
        return Err(format!("{kernel}: bad test values: a == b"));
    }
    let want = replay(x0, a, b, c);
    let rows = threads(2, 8 << 20, |shmem| {
        let w = shmem.calloc::<T>(1)?;
        let out = shmem.calloc::<T>(want.len())?;
        let module = kernels(shmem)?;
        let other = ((shmem.my_pe() + 1) % shmem.n_pes()) as u32;
        let args = (w.as_kernel_ptr(), out.as_kernel_ptr(), other, x0, a, b, c);
        unsafe { shmem.launch(&module.kernel(kernel)?, one_block(32), args)? };
        shmem.synchronize()?;
        let got = shmem.read(&out)?;
        shmem.bootstrap().barrier()?; // the other PE is done with my word
        let fin = shmem.read(&w)?[0];
        Ok((got, fin))
    })
    .map_err(|e| format!("{kernel}: {}", e.message().unwrap_or("failed")))?;
    for (pe, (got, fin)) in rows.iter().enumerate() {
        if got != &want {
            let i = got.iter().zip(&want).position(|(g, w)| g != w).unwrap_or(0);
            return Err(format!(
                "{kernel} (PE {pe} on the other PE's word, x0={x0:?} a={a:?} b={b:?} c={c:?}): result {i} is {:?}, \
                 want {:?}\n got  {got:?}\n want {want:?}",
                got.get(i),
                want.get(i)
            ));
        }
        if *fin != x0 {
            return Err(format!("{kernel}: PE {pe}'s word ends at {fin:?}, want {x0:?}"));
        }
    }
    Ok(())
}

/// Every operation's result on u32/u64/i32/i64, on the other PE's word
/// (2 PEs), with values that wrap and negative values.
pub fn ops_results() -> TestResult {
    let mut failures = Vec::new();
    let mut check = |r: Result<(), String>| {
        if let Err(e) = r {
            failures.push(e)
        }
    };
    check(ops_case("amo_ops_u32", 0xDEAD_BEEFu32, 0xF0F0_1234, 0x0FF0_FF00, 0xFFFF_FFF0));
    check(ops_case(
        "amo_ops_u64",
        0xDEAD_BEEF_0BAD_F00Du64,
        0xF0F0_1234_5678_9ABC,
        0x8000_0000_FFFF_0001,
        0xFFFF_FFFF_0000_0010,
    ));
    check(ops_case("amo_ops_i32", i32::MIN + 3, -2i32, -7, -3));
    check(ops_case("amo_ops_i64", -5_000_000_000i64, -2, -0x1_0000_0007, -3));
    if !failures.is_empty() {
        return Err(failures.join("\n").into());
    }
    println!(
        "  atomic ops (set, fetch, swap, compare_swap hit/miss, fetch_inc, inc, fetch_add, add, fetch_and, and, \
         fetch_or, or, fetch_xor, xor) on u32/u64/i32/i64, remote, 17 results each: all as replayed"
    );
    Ok(())
}
