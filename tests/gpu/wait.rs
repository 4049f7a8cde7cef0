//! The wait/test family: `wait_until`/`test` and the `_all`/`_any`/`_some`
//! forms (and their `_vector` forms), for every comparison and u32/u64/i32/i64,
//! with status arrays excluding elements.
//!
//! One kernel runs a table of cases. Per case, a waiter thread calls the test
//! form (before), then — if the case has sets — tells a setter thread (another
//! PE, or another block of the same PE), calls the wait form, and the test
//! form again (after). The setter makes the case's stores one by one, 2 µs
//! apart. The host computes every expected result from the case's states;
//! each case is built so that only the final state satisfies the wait (the
//! result is deterministic), and static cases wait only where the state
//! already satisfies it, so a correct implementation never blocks on them.

use crate::common::*;
use gpushmem::KernelArg;
use gpushmem::{Cmp, LaunchConfig, Shmem};
use std::time::Instant;

/// Elements per case, u64 words per case record, u64 result slots per case (as the kernel).
const ELEMS: usize = 8;
const REC: usize = 24;
const OUT: usize = 27;
/// Written into the result slots before the kernel runs.
const POISON: u64 = 0xA5A5_A5A5_A5A5_A5A5;

const FORMS: [&str; 4] = ["wait_until/test", "all", "any", "some"];

/// Excludes elements 1 and 4 (any non-zero status excludes).
const EXCL: [i32; ELEMS] = [0, 1, 0, 0, -3, 0, 0, 0];
/// Excludes every element.
const ALL_EXCL: [i32; ELEMS] = [1, 2, -1, 7, 1, 1, 1, 1];

pub trait Word: bytemuck::Pod + KernelArg + PartialOrd + std::fmt::Debug + Send + Sync {
    const KERNEL: &'static str;
    const SIGNED: bool;
    /// `v as Self`.
    fn small(v: i64) -> Self;
    /// The top bit set, plus `off` (wrapping).
    fn high(off: i64) -> Self;
    fn wadd(self, o: Self) -> Self;
}

macro_rules! word {
    ($t:ty, $k:literal, $signed:literal) => {
        impl Word for $t {
            const KERNEL: &'static str = $k;
            const SIGNED: bool = $signed;
            fn small(v: i64) -> Self {
                v as $t
            }
            fn high(off: i64) -> Self {
                (1 as $t).rotate_right(1).wrapping_add(off as $t)
            }
            fn wadd(self, o: Self) -> Self {
                self.wrapping_add(o)
            }
        }
    };
}
word!(u32, "wait_table_u32", false);
word!(u64, "wait_table_u64", false);
word!(i32, "wait_table_i32", true);
word!(i64, "wait_table_i64", true);

/// (cmp, value, a value for which the comparison fails, one for which it holds).
/// Signed rows straddle zero and unsigned rows the top bit, so a comparison
/// of the wrong signedness gets some of them wrong.
fn rows<T: Word>() -> Vec<(Cmp, T, T, T)> {
    let s = T::small;
    if T::SIGNED {
        vec![
            (Cmp::Eq, s(-7), s(0), s(-7)),
            (Cmp::Ne, s(-7), s(-7), s(7)),
            (Cmp::Gt, s(-1), s(-3), s(2)),
            (Cmp::Ge, s(-1), s(-2), s(-1)),
            (Cmp::Lt, s(1), s(3), s(-2)),
            (Cmp::Le, s(-1), s(0), s(-1)),
        ]
    } else {
        vec![
            (Cmp::Eq, T::high(5), s(5), T::high(5)),
            (Cmp::Ne, s(-1), s(-1), s(0)),
            (Cmp::Gt, s(5), s(3), T::high(0)),
            (Cmp::Ge, T::high(0), s(1), T::high(0)),
            (Cmp::Lt, T::high(1), T::high(1), s(3)),
            (Cmp::Le, s(5), T::high(0), s(5)),
        ]
    }
}

struct Case<T> {
    desc: String,
    /// 0 wait_until/test, 1 all, 2 any, 3 some.
    form: u64,
    vector: bool,
    cmp: Cmp,
    n: usize,
    status: Option<[i32; ELEMS]>,
    wait: bool,
    value: T,
    values: Vec<T>,
    init: Vec<T>,
    sets: Vec<(usize, T)>,
}

/// T in the low bytes of a u64 (the rest zero), as the kernel reads and writes it.
fn slot<T: bytemuck::Pod>(v: T) -> u64 {
    let mut b = [0u8; 8];
    b[..std::mem::size_of::<T>()].copy_from_slice(bytemuck::bytes_of(&v));
    u64::from_le_bytes(b)
}

impl<T: Word> Case<T> {
    fn eligible(&self, i: usize) -> bool {
        self.status.is_none_or(|s| s[i] == 0)
    }

    fn holds(&self, state: &[T], i: usize) -> bool {
        let v = if self.vector { self.values[i] } else { self.value };
        self.cmp.holds(state[i], v)
    }

    /// The eligible elements whose condition holds in `state`, ascending.
    fn done(&self, state: &[T]) -> Vec<u64> {
        (0..self.n).filter(|&i| self.eligible(i) && self.holds(state, i)).map(|i| i as u64).collect()
    }

    fn all_excluded(&self) -> bool {
        (0..self.n).all(|i| !self.eligible(i))
    }

    /// The test form's result and indices on `state`.
    fn test_result(&self, state: &[T]) -> (u64, Vec<u64>) {
        let done = self.done(state);
        match self.form {
            0 => (self.holds(state, 0) as u64, vec![]),
            1 => ((0..self.n).all(|i| !self.eligible(i) || self.holds(state, i)) as u64, vec![]),
            2 => (done.first().copied().unwrap_or(u64::MAX), vec![]),
            _ => (done.len() as u64, done),
        }
    }

    /// The wait form's result once it returns on `state`.
    fn wait_result(&self, state: &[T]) -> (u64, Vec<u64>) {
        match self.form {
            0 => (slot(state[0]), vec![]),
            1 => (1, vec![]),
            _ => self.test_result(state),
        }
    }

    /// Whether the wait form returns on `state` (rather than blocking).
    fn returns(&self, state: &[T]) -> bool {
        let (r, _) = self.test_result(state);
        match self.form {
            0 | 1 => r == 1,
            2 => r != u64::MAX || self.all_excluded(),
            _ => r > 0 || self.all_excluded(),
        }
    }

    /// The states the elements go through: initial, after each set.
    fn states(&self) -> Vec<Vec<T>> {
        let mut s = vec![self.init.clone()];
        for &(i, v) in &self.sets {
            let mut next = s[s.len() - 1].clone();
            next[i] = v;
            s.push(next);
        }
        s
    }

    /// Checks that the results are deterministic: a wait only on a state that
    /// lets it return, and with sets, every state before the last blocks.
    fn check(&self) -> Result<(), String> {
        let states = self.states();
        let last = states.len() - 1;
        let bad = if self.sets.is_empty() {
            self.wait && !self.returns(&states[0])
        } else {
            !self.wait || states[..last].iter().any(|s| self.returns(s)) || !self.returns(&states[last])
        };
        if bad {
            return Err(format!("test table: case {} is not deterministic", self.desc));
        }
        Ok(())
    }
}

/// Every case for one type: scalar `wait_until`/`test` per comparison, then
/// `_all`/`_any`/`_some` (plain and `_vector`) on 8 elements: woken by
/// sets (with and without a status array, an excluded element set or
/// already satisfied), and static states (mixed, all satisfied, all
/// excluded, none satisfied, n = 0) where only the test forms run or the wait
/// returns at once.
fn cases<T: Word>() -> Result<Vec<Case<T>>, String> {
    let mut out = Vec::new();
    for (cmp, v, b, a) in rows::<T>() {
        for j in 0..ELEMS {
            let d = T::small(2 * j as i64);
            let (v, b, a) = (v.wadd(d), b.wadd(d), a.wadd(d));
            if cmp.holds(b, v) || !cmp.holds(a, v) {
                return Err(format!("test table: row {cmp:?} {v:?}: {b:?} must fail and {a:?} hold"));
            }
        }
        let scalar = |what: &str, init: T, sets: Vec<(usize, T)>, wait: bool| Case {
            desc: format!("{} {cmp:?} {v:?} ({what})", FORMS[0]),
            form: 0,
            vector: false,
            cmp,
            n: 1,
            status: None,
            wait,
            value: v,
            values: vec![v; ELEMS],
            init: vec![init; ELEMS],
            sets,
        };
        out.push(scalar("set by the other side", b, vec![(0, a)], true));
        out.push(scalar("never set, test only", b, vec![], false));
        out.push(scalar("already holds", a, vec![], true));
        for form in 1..=3u64 {
            for vector in [false, true] {
                let d = |j: usize| T::small(if vector { 2 * j as i64 } else { 0 });
                let vals: Vec<T> = (0..ELEMS).map(|j| v.wadd(d(j))).collect();
                let bef: Vec<T> = (0..ELEMS).map(|j| b.wadd(d(j))).collect();
                let aft: Vec<T> = (0..ELEMS).map(|j| a.wadd(d(j))).collect();
                // Initial state: element j satisfied where `sat(j)`.
                let state = |sat: &dyn Fn(usize) -> bool| -> Vec<T> {
                    (0..ELEMS).map(|j| if sat(j) { aft[j] } else { bef[j] }).collect()
                };
                let mut case = |what: &str, status: Option<[i32; ELEMS]>, n: usize, init: Vec<T>, sets: Vec<usize>| {
                    let mut c = Case {
                        desc: format!(
                            "{}{} {cmp:?} ({what}, status {})",
                            FORMS[form as usize],
                            if vector { "_vector" } else { "" },
                            status.map_or("null".to_string(), |s| format!("{s:?}"))
                        ),
                        form,
                        vector,
                        cmp,
                        n,
                        status,
                        wait: false,
                        value: v,
                        values: vals.clone(),
                        init,
                        sets: sets.into_iter().map(|i| (i, aft[i])).collect(),
                    };
                    c.wait = !c.sets.is_empty() || c.returns(&c.init);
                    out.push(c);
                };
                // Woken by sets.
                if form == 1 {
                    case(
                        "sets: eligible pending, descending",
                        Some(EXCL),
                        ELEMS,
                        state(&|j| j % 3 == 0),
                        vec![7, 5, 2],
                    );
                    case("sets: every pending, descending", None, ELEMS, state(&|j| j % 3 == 0), vec![7, 5, 4, 2, 1]);
                } else {
                    case("sets: excluded 1, then 6", Some(EXCL), ELEMS, state(&|j| j == 4), vec![1, 6]);
                    case("sets: 5", None, ELEMS, state(&|_| false), vec![5]);
                }
                // Static states.
                case("1, 3, 5 hold", Some(EXCL), ELEMS, state(&|j| j % 2 == 1 && j < 6), vec![]);
                case("every eligible holds", Some(EXCL), ELEMS, state(&|j| EXCL[j] == 0), vec![]);
                case("all excluded", Some(ALL_EXCL), ELEMS, state(&|j| j % 2 == 0), vec![]);
                case("none holds", None, ELEMS, state(&|_| false), vec![]);
                case("n = 0", None, 0, state(&|_| false), vec![]);
                case("2, 7 hold", None, ELEMS, state(&|j| j == 2 || j == 7), vec![]);
                case("only excluded hold", Some(EXCL), ELEMS, state(&|j| EXCL[j] != 0), vec![]);
            }
        }
    }
    for c in &out {
        c.check()?;
    }
    Ok(out)
}

/// Runs the table for `T` on this PE (setter for PE me + shift); returns the failures.
fn table_on_pe<T: Word>(shmem: &Shmem, shift: u32) -> gpushmem::Result<(usize, Vec<String>)> {
    let me = shmem.my_pe();
    let cases = cases::<T>().map_err(|why| gpushmem::Error::Config {
        name: "wait test table".into(),
        value: T::KERNEL.into(),
        why,
    })?;
    let nc = cases.len();
    let mut recs = vec![0u64; nc * REC];
    let mut ivars = Vec::with_capacity(nc * ELEMS);
    let mut status = vec![0i32; nc * ELEMS];
    let mut values = Vec::with_capacity(nc * ELEMS);
    for (c, case) in cases.iter().enumerate() {
        let r = &mut recs[c * REC..(c + 1) * REC];
        r[..8].copy_from_slice(&[
            case.form,
            case.vector as u64,
            case.cmp as u64,
            case.n as u64,
            case.status.is_some() as u64,
            case.wait as u64,
            case.sets.len() as u64,
            slot(case.value),
        ]);
        for (s, &(i, v)) in case.sets.iter().enumerate() {
            r[8 + s] = i as u64;
            r[16 + s] = slot(v);
        }
        ivars.extend_from_slice(&case.init);
        values.extend_from_slice(&case.values);
        if let Some(s) = case.status {
            status[c * ELEMS..(c + 1) * ELEMS].copy_from_slice(&s);
        }
    }
    let d_recs = shmem.malloc::<u64>(recs.len())?;
    let d_ivars = shmem.malloc::<T>(ivars.len())?;
    let d_status = shmem.malloc::<i32>(status.len())?;
    let d_values = shmem.malloc::<T>(values.len())?;
    let d_out = shmem.malloc::<u64>(nc * OUT)?;
    let ready = shmem.calloc::<u64>(1)?;
    shmem.write(&d_recs, &recs)?;
    shmem.write(&d_ivars, &ivars)?;
    shmem.write(&d_status, &status)?;
    shmem.write(&d_values, &values)?;
    shmem.write(&d_out, &vec![POISON; nc * OUT])?;
    let module = kernels(shmem)?;
    let k = module.kernel(T::KERNEL)?;
    shmem.bootstrap().barrier()?; // every PE's elements are in place before any setter writes
    let cfg = LaunchConfig { grid_dim: (2, 1, 1), block_dim: (32, 1, 1), shared_mem_bytes: 0 };
    let args = (
        d_recs.as_kernel_ptr(),
        d_ivars.as_kernel_ptr(),
        d_status.as_kernel_ptr(),
        d_values.as_kernel_ptr(),
        d_out.as_kernel_ptr(),
        ready.as_kernel_ptr(),
        nc as u32,
        shift,
    );
    unsafe { shmem.launch_collective(&k, cfg, args)? };
    shmem.synchronize()?;
    let got = shmem.read(&d_out)?;
    shmem.bootstrap().barrier()?;
    let mut failures = Vec::new();
    for (c, case) in cases.iter().enumerate() {
        let states = case.states();
        let (first, last) = (&states[0], &states[states.len() - 1]);
        let stages = [
            ("test before", Some(case.test_result(first))),
            ("wait", case.wait.then(|| case.wait_result(last))),
            ("test after", Some(case.test_result(last))),
        ];
        for (s, (stage, want)) in stages.into_iter().enumerate() {
            let Some((want, want_idx)) = want else { continue };
            let o = &got[c * OUT + s * 9..c * OUT + (s + 1) * 9];
            let idx = &o[1..1 + want_idx.len()];
            if o[0] != want || idx != want_idx.as_slice() {
                failures.push(format!(
                    "PE {me}: {} {}: {stage}: got {:#x} {idx:?}, want {want:#x} {want_idx:?}",
                    std::any::type_name::<T>(),
                    case.desc,
                    o[0]
                ));
            }
        }
    }
    shmem.free(ready)?;
    shmem.free(d_out)?;
    shmem.free(d_values)?;
    shmem.free(d_status)?;
    shmem.free(d_ivars)?;
    shmem.free(d_recs)?;
    Ok((nc, failures))
}

/// The whole table for every type; `n` PEs, the setter on PE me + `shift`
/// (2 PEs, shift 1: another PE; 1 PE, shift 0: another block of the same PE).
pub fn table(n: usize, shift: u32) -> TestResult {
    let start = Instant::now();
    let per_pe = threads(n, 16 << 20, |shmem| {
        let mut count = 0;
        let mut f = Vec::new();
        for (c, fl) in [
            table_on_pe::<u32>(shmem, shift)?,
            table_on_pe::<u64>(shmem, shift)?,
            table_on_pe::<i32>(shmem, shift)?,
            table_on_pe::<i64>(shmem, shift)?,
        ] {
            count += c;
            f.extend(fl);
        }
        Ok((count, f))
    })?;
    let cases = per_pe[0].0;
    let all: Vec<String> = per_pe.into_iter().flat_map(|(_, f)| f).collect();
    fail_if_any(&all)?;
    println!(
        "  wait/test table, {n} PE(s), setter {}: {cases} cases (6 comparisons × u32/u64/i32/i64 × \
         wait_until/test, _all/_any/_some, plain and _vector), 3 stages each, all as expected, in {:.1?}",
        if shift == 0 { "another block of the same PE" } else { "the other PE" },
        start.elapsed()
    );
    Ok(())
}
