//! Device collectives against a CPU reference: broadcast (several roots),
//! fcollect, alltoall, reduce and reducescatter (every operator on the 8
//! integer types, sum/prod/min/max on f32, f64, F16, Bf16), thread/warp/block
//! forms, on the world team (2, 4, 8 PEs), a strided team that skips PEs, a
//! one-member team and 2D rows of unequal size (one handle, different members
//! per PE); sizes 1 … 4099 elements with varied alignments, and one test of
//! 64 MiB in the block form. Random data, poisoned destinations with guard
//! bytes on both sides, every byte checked, non-members' destinations checked
//! untouched.
//!
//! The reduction reference is bit-exact and independent of the device code:
//! it folds the members' values in the documented member order 0, 1, … with
//! the operators and f32 → bf16/f16 rounding of `crate::reference`, written
//! separately from gpushmem-kernels' `Reducible::apply` and `Bf16`/`F16`
//! conversions (which the device runs), so floats too must match exactly, and
//! a bug shared by device and reference is unlikely. Each test first checks
//! the reference's known values and its agreement with the kernel crate's
//! conversions and operators (`reference::agreement`). The results of all
//! members of a team are also compared with each other (digests).
//!
//! Many cases run in one launch: a table of cases (kernels `coll_copy_batch`,
//! `coll_reduce_batch_<type>` in tests/kernels/src/coll.rs) that every PE
//! runs in the same order, each PE skipping the cases of teams it is not in.

use crate::common::*;
use crate::reference::{self, RefReduce};
use gpushmem::{Bf16, LaunchConfig, Module, ReduceOp, Shmem, SymSlice, Team, F16};
use gpushmem_kernels::reduce::Reducible;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const KINDS: [&str; 5] = ["broadcast", "fcollect", "alltoall", "reduce", "reducescatter"];
const FORMS: [&str; 3] = ["thread", "warp", "block"];
const THREAD: u32 = 0;
const WARP: u32 = 1;
const BLOCK: u32 = 2;
const OPS: [ReduceOp; 7] =
    [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max, ReduceOp::And, ReduceOp::Or, ReduceOp::Xor];
/// u64 words per case in the kernels' tables (`CASE_WORDS` in coll.rs).
const CASE_WORDS: usize = 7;
/// Bytes of a destination region the kernel must not touch (and of the guards around it).
const POISON: u8 = 0x5A;
const GUARD: usize = 16;

/// A team the cases run on, made the same way on every PE.
#[derive(Clone, Copy, Debug)]
pub(crate) enum TeamSpec {
    World,
    /// `team_split_strided(world, start, stride, size)`.
    Strided(usize, usize, usize),
    /// The x teams (rows) of `team_split_2d(world, xrange)`.
    Rows(usize),
}

impl TeamSpec {
    pub(crate) fn name(&self) -> String {
        match self {
            TeamSpec::World => "world".into(),
            TeamSpec::Strided(a, b, c) => format!("strided({a},{b},{c})"),
            TeamSpec::Rows(x) => format!("2d rows of {x}"),
        }
    }

    /// Members of the smallest instance (2D rows differ in size).
    fn min_size(&self, n: usize) -> usize {
        match *self {
            TeamSpec::World => n,
            TeamSpec::Strided(_, _, size) => size,
            TeamSpec::Rows(x) if !n.is_multiple_of(x) && n > x => n % x,
            TeamSpec::Rows(x) => x.min(n),
        }
    }

    /// The team (collective), and every team made for it (to destroy afterwards).
    fn make(&self, shmem: &Shmem) -> gpushmem::Result<(Team, Vec<Team>)> {
        let world = shmem.team_world();
        Ok(match *self {
            TeamSpec::World => (world, vec![]),
            TeamSpec::Strided(s, st, size) => {
                let t = shmem.team_split_strided(&world, s, st, size)?;
                (t, vec![t])
            }
            TeamSpec::Rows(x) => {
                let (tx, ty) = shmem.team_split_2d(&world, x)?;
                (tx, vec![tx, ty])
            }
        })
    }
}

/// The teams of the tests on `n` PEs: the world and teams that skip PEs.
/// The world only on the NVSHMEM engine with PEs sharing a GPU (NVSHMEM
/// cannot split teams there: `team::split_sharing_gpu` checks the refusal).
fn team_specs(n: usize) -> Vec<TeamSpec> {
    if nvshmem_shares_gpu(n) {
        return vec![TeamSpec::World];
    }
    match n {
        2 => vec![TeamSpec::World, TeamSpec::Strided(1, 1, 1)],
        4 => vec![TeamSpec::World, TeamSpec::Strided(1, 2, 2)],
        _ => vec![TeamSpec::World, TeamSpec::Strided(1, 3, 3), TeamSpec::Rows(3)],
    }
}

/// One collective call of a batch and where its data lies (byte offsets in the arenas).
#[derive(Clone, Debug)]
pub(crate) struct Case {
    pub(crate) kind: u32,
    form: u32,
    /// Index in the test's team list.
    pub(crate) team: usize,
    /// Root (broadcast) or `ReduceOp` code.
    arg: u32,
    nelems: usize,
    /// Bytes per element.
    esize: usize,
    src_at: usize,
    src_len: usize,
    /// Where the result starts, the most bytes it may take, and the guard bytes before it.
    pub(crate) dst_at: usize,
    pub(crate) dst_cap: usize,
    pub(crate) dst_lead: usize,
}

impl Case {
    fn new(kind: u32, form: u32, team: usize, arg: u32, nelems: usize, esize: usize) -> Case {
        Case { kind, form, team, arg, nelems, esize, src_at: 0, src_len: 0, dst_at: 0, dst_cap: 0, dst_lead: 0 }
    }

    fn describe(&self, teams: &[String]) -> String {
        let arg = match self.kind {
            0 => format!(" root {}", self.arg),
            3 | 4 => format!(" {:?}", ReduceOp::from_u32(self.arg).unwrap_or(ReduceOp::Sum)),
            _ => String::new(),
        };
        format!(
            "{}_{}{arg} on {}, {} × {} B",
            KINDS[self.kind as usize], FORMS[self.form as usize], teams[self.team], self.nelems, self.esize
        )
    }
}

/// Lays the cases out in the source and destination arenas (`n` PEs): regions
/// 256-aligned, then shifted by a few elements so the relative alignment of
/// source and destination varies; returns the arenas' sizes.
fn place(cases: &mut [Case], n: usize) -> (usize, usize) {
    let (mut s, mut d) = (0usize, 0usize);
    for (i, c) in cases.iter_mut().enumerate() {
        let per = c.nelems * c.esize;
        c.src_len = if c.kind == 2 || c.kind == 4 { n * per } else { per };
        c.dst_cap = if c.kind == 1 || c.kind == 2 { n * per } else { per };
        c.src_at = s + (i % 3) * c.esize;
        s = (c.src_at + c.src_len).next_multiple_of(256);
        c.dst_lead = GUARD + (i % 5) * c.esize;
        c.dst_at = d + c.dst_lead;
        d = (c.dst_at + c.dst_cap + GUARD).next_multiple_of(256);
    }
    (s.max(256), d.max(256))
}

/// A table of cases for one kernel, with how to make a PE's source and a member's expected result.
pub(crate) struct Batch {
    what: String,
    kernel: String,
    /// Copies pass byte counts to the kernel, reductions element counts.
    bytes: bool,
    tag: u64,
    pub(crate) cases: Vec<Case>,
    src_bytes: usize,
    dst_bytes: usize,
    /// A PE's source bytes for a case, from a random stream.
    source: fn(&Case, u64) -> Vec<u8>,
    /// The result on the member with index `my`, from the members' sources in member order.
    expected: fn(&Case, &[Vec<u8>], usize) -> Vec<u8>,
}

fn copy_source(c: &Case, stream: u64) -> Vec<u8> {
    random_bytes(seed(), stream, c.src_len)
}

fn copy_expected(c: &Case, srcs: &[Vec<u8>], my: usize) -> Vec<u8> {
    let b = c.nelems * c.esize;
    match c.kind {
        0 => srcs[c.arg as usize][..b].to_vec(),
        1 => srcs.iter().flat_map(|s| s[..b].iter().copied()).collect(),
        _ => srcs.iter().flat_map(|s| s[my * b..(my + 1) * b].iter().copied()).collect(),
    }
}

/// A reduction element type on the host: values from random bits, chosen per
/// operator so results stay finite and meaningful (floats: sums of mixed
/// magnitudes that round; products of values near 1; integers: and/or inputs
/// biased so that the results are neither all zeros nor all ones, odd factors).
trait Elem: Reducible + std::fmt::Debug {
    fn make(r: u64, op: ReduceOp) -> Self;
    /// `a <op> b` by the independent reference (`crate::reference`), not `Reducible::apply`.
    fn reference(op: ReduceOp, a: Self, b: Self) -> Self;
}

macro_rules! int_elem {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            fn make(r: u64, op: ReduceOp) -> Self {
                let r = match op {
                    ReduceOp::And => r | r.rotate_left(17),
                    ReduceOp::Or => r & r.rotate_left(17),
                    ReduceOp::Prod => r | 1,
                    _ => r,
                };
                r as $t
            }
            fn reference(op: ReduceOp, a: Self, b: Self) -> Self {
                <$t as RefReduce>::reduce(op, a, b)
            }
        }
    )*};
}
int_elem!(u8, i8, u16, i16, u32, i32, u64, i64);

/// A float in a range that suits `op`: 24 random bits (53 for `wide`), scaled.
fn float_of(r: u64, op: ReduceOp, half: bool, wide: bool) -> f64 {
    let u = if wide { (r >> 11) as f64 / (1u64 << 53) as f64 } else { (r >> 40) as f64 / (1u64 << 24) as f64 } - 0.5;
    let scale = (1u64 << (r & 3)) as f64;
    match op {
        ReduceOp::Sum => u * scale * if half { 64.0 } else { 2048.0 },
        ReduceOp::Prod => 1.0 + u / 8.0,
        _ => u * if half { 1000.0 } else { 1.0e6 },
    }
}

impl Elem for f32 {
    fn make(r: u64, op: ReduceOp) -> Self {
        float_of(r, op, false, false) as f32
    }
    fn reference(op: ReduceOp, a: Self, b: Self) -> Self {
        f32::reduce(op, a, b)
    }
}

impl Elem for f64 {
    fn make(r: u64, op: ReduceOp) -> Self {
        float_of(r, op, false, true)
    }
    fn reference(op: ReduceOp, a: Self, b: Self) -> Self {
        f64::reduce(op, a, b)
    }
}

impl Elem for F16 {
    fn make(r: u64, op: ReduceOp) -> Self {
        F16(reference::f16_from_f32(float_of(r, op, true, false) as f32))
    }
    fn reference(op: ReduceOp, a: Self, b: Self) -> Self {
        F16(reference::f16_reduce(op, a.0, b.0))
    }
}

impl Elem for Bf16 {
    fn make(r: u64, op: ReduceOp) -> Self {
        Bf16(reference::bf16_from_f32(float_of(r, op, true, false) as f32))
    }
    fn reference(op: ReduceOp, a: Self, b: Self) -> Self {
        Bf16(reference::bf16_reduce(op, a.0, b.0))
    }
}

fn op_of(c: &Case) -> ReduceOp {
    ReduceOp::from_u32(c.arg).unwrap_or(ReduceOp::Sum)
}

fn reduce_source<T: Elem>(c: &Case, stream: u64) -> Vec<u8> {
    let len = c.src_len / std::mem::size_of::<T>();
    let op = op_of(c);
    let v: Vec<T> = random_bytes(seed(), stream, len * 8)
        .chunks_exact(8)
        .map(|b| T::make(u64::from_le_bytes(b.try_into().unwrap_or([0; 8])), op))
        .collect();
    bytemuck::cast_slice(&v).to_vec()
}

/// The documented combine, by the independent reference: `op` over the members in order 0, 1, …
fn reduce_expected<T: Elem>(c: &Case, srcs: &[Vec<u8>], my: usize) -> Vec<u8> {
    let op = op_of(c);
    let size = std::mem::size_of::<T>();
    let vals: Vec<Vec<T>> =
        srcs.iter().map(|s| s.chunks_exact(size).map(bytemuck::pod_read_unaligned).collect()).collect();
    let off = if c.kind == 4 { my * c.nelems } else { 0 };
    let out: Vec<T> = (0..c.nelems)
        .map(|e| reference::in_member_order(vals.iter().map(|v| v[off + e]), |a, b| T::reference(op, a, b)))
        .collect();
    bytemuck::cast_slice(&out).to_vec()
}

/// The reduction types: name (kernel `coll_reduce_batch_<name>`) and the
/// (kind, form) pairs its kernel has besides the two block forms. Keep in
/// step with `reduce_kernels!` in tests/kernels/src/coll.rs.
const REDUCE_TYPES: [(&str, &[(u32, u32)]); 12] = [
    ("u8", &[(3, THREAD)]),
    ("i8", &[(4, WARP)]),
    ("u16", &[]),
    ("i16", &[(3, WARP)]),
    ("u32", &[(3, WARP), (4, THREAD)]),
    ("i32", &[]),
    ("u64", &[]),
    ("i64", &[(3, THREAD)]),
    ("f32", &[(3, THREAD), (4, WARP)]),
    ("f64", &[(3, WARP)]),
    ("f16", &[(3, THREAD)]),
    ("bf16", &[(3, WARP), (4, THREAD)]),
];

/// On the NVSHMEM engine the test kernels have fewer reductions (PTX size:
/// tests/kernels/src/coll.rs): u32 with the block forms, f32 with the block
/// forms and the thread `reduce`. (Index in `REDUCE_TYPES`, extra forms.)
const NVSHMEM_REDUCE_TYPES: [(usize, &[(u32, u32)]); 2] = [(4, &[]), (8, &[(3, THREAD)])];

/// The extra (kind, form) pairs of type `ty` that the test kernels of this
/// engine have.
fn extra_forms(ty: usize) -> &'static [(u32, u32)] {
    if engine() == gpushmem::Engine::Nvshmem {
        NVSHMEM_REDUCE_TYPES.iter().find(|t| t.0 == ty).map_or(&[], |t| t.1)
    } else {
        REDUCE_TYPES[ty].1
    }
}

type SourceFn = fn(&Case, u64) -> Vec<u8>;
type ExpectedFn = fn(&Case, &[Vec<u8>], usize) -> Vec<u8>;

/// Element size, whether bitwise operators apply, and the reference functions of type `REDUCE_TYPES[ty]`.
fn type_fns(ty: usize) -> (usize, bool, SourceFn, ExpectedFn) {
    macro_rules! f {
        ($t:ty) => {
            (std::mem::size_of::<$t>(), <$t as Reducible>::INTEGER, reduce_source::<$t>, reduce_expected::<$t>)
        };
    }
    match ty {
        0 => f!(u8),
        1 => f!(i8),
        2 => f!(u16),
        3 => f!(i16),
        4 => f!(u32),
        5 => f!(i32),
        6 => f!(u64),
        7 => f!(i64),
        8 => f!(f32),
        9 => f!(f64),
        10 => f!(F16),
        _ => f!(Bf16),
    }
}

/// Broadcast (roots 0, the last, and one in the middle where the team is
/// large enough), fcollect and alltoall in every form on every team and size,
/// element sizes 1, 2, 4, 8 bytes in turn.
pub(crate) fn copy_batch(n: usize, specs: &[TeamSpec], sizes: &[usize]) -> Batch {
    let mut cases = Vec::new();
    let mut k = 0usize;
    for (ti, spec) in specs.iter().enumerate() {
        let m = spec.min_size(n);
        let mut roots = vec![0u32];
        if m > 1 {
            roots.push(m as u32 - 1);
        }
        if m > 3 {
            roots.push(m as u32 / 2 + 1);
        }
        roots.sort_unstable();
        roots.dedup();
        for kind in 0..3u32 {
            let args = if kind == 0 { roots.clone() } else { vec![0] };
            for arg in args {
                for form in [THREAD, WARP, BLOCK] {
                    for &nelems in sizes {
                        cases.push(Case::new(kind, form, ti, arg, nelems, [1, 2, 4, 8][k % 4]));
                        k += 1;
                    }
                }
            }
        }
    }
    let (src_bytes, dst_bytes) = place(&mut cases, n);
    Batch {
        what: "copies".into(),
        kernel: "coll_copy_batch".into(),
        bytes: true,
        tag: (n as u64) << 8 | 0xC0,
        cases,
        src_bytes,
        dst_bytes,
        source: copy_source,
        expected: copy_expected,
    }
}

/// Reduce and reducescatter on type `REDUCE_TYPES[ty]`: every operator that
/// applies, every compiled form, every team; sizes in turn.
pub(crate) fn reduce_batch(n: usize, ty: usize, specs: &[TeamSpec], sizes: &[usize]) -> Batch {
    let (name, extra) = (REDUCE_TYPES[ty].0, extra_forms(ty));
    let (esize, integer, source, expected) = type_fns(ty);
    let ops: &[ReduceOp] = if integer { &OPS } else { &OPS[..4] };
    let mut cases = Vec::new();
    let mut k = 0usize;
    for ti in 0..specs.len() {
        for kind in [3u32, 4] {
            let forms = std::iter::once(BLOCK).chain(extra.iter().filter(|e| e.0 == kind).map(|e| e.1));
            for form in forms {
                for &op in ops {
                    cases.push(Case::new(kind, form, ti, op as u32, sizes[k % sizes.len()], esize));
                    k += 1;
                }
            }
        }
    }
    let (src_bytes, dst_bytes) = place(&mut cases, n);
    Batch {
        what: name.into(),
        kernel: format!("coll_reduce_batch_{name}"),
        bytes: false,
        tag: (n as u64) << 8 | ty as u64,
        cases,
        src_bytes,
        dst_bytes,
        source,
        expected,
    }
}

/// FNV-1a, for comparing members' results across PEs.
fn digest(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325, |h, &x| (h ^ x as u64).wrapping_mul(0x0100_0000_01b3))
}

/// (batch, case, world PE of the team instance's member 0, digest of this member's result).
pub(crate) type Digest = (u32, u32, u32, u64);

/// The arenas a PE runs every batch in: sources, destinations, the case table.
struct Arenas {
    src: SymSlice<u8>,
    dst: SymSlice<u8>,
    table: SymSlice<u64>,
}

/// A team as one PE sees it: its handle, this PE's member index, the members' world PEs.
pub(crate) struct View {
    pub(crate) handle: u32,
    pub(crate) my: Option<usize>,
    pub(crate) members: Vec<usize>,
}

impl View {
    fn of(t: &Team) -> View {
        View { handle: t.handle(), my: t.my_pe(), members: (0..t.n_pes()).filter_map(|m| t.world_pe(m)).collect() }
    }
}

/// What one PE writes before a batch and expects after it.
pub(crate) struct Prepared {
    /// Its source arena.
    src: Vec<u8>,
    /// Its destination arena before the launch (poison).
    pub(crate) init: Vec<u8>,
    /// Its destination arena after the launch.
    pub(crate) want: Vec<u8>,
    /// Per case where this PE is a member: (world PE of member 0, bytes of its result).
    pub(crate) written: Vec<Option<(usize, usize)>>,
    /// The kernel's case table, with this PE's arena addresses.
    table: Vec<u64>,
    /// Per case, on the NVSHMEM engine for f32 sums and products only: the
    /// team size and the same reduction over the sources' absolute values.
    /// NVSHMEM combines in its own order, so such a result may differ from
    /// the member-order reference in the last bits; see [`within_rounding`].
    loose: Vec<Option<(usize, Vec<u8>)>>,
}

/// Whether the NVSHMEM engine's f32 sum/product `got` agrees with the
/// member-order reference `want` up to the order of combining: for `n` terms
/// each result is within γ(n-1)·Σ|a| (Π|a| for products) of the exact value
/// (Higham's bound, γ(k) ≈ k·ε), so the two differ by at most twice that.
fn within_rounding(n: usize, got: &[u8], want: &[u8], abs: &[u8]) -> bool {
    fn f(b: &[u8]) -> impl Iterator<Item = f64> + '_ {
        b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64)
    }
    let bound = |a: f64| 2.0 * (n.saturating_sub(1)) as f64 * f32::EPSILON as f64 * a * 1.01 + f32::MIN_POSITIVE as f64;
    got.len() == want.len() && f(got).zip(f(want)).zip(f(abs)).all(|((g, w), a)| (g - w).abs() <= bound(a))
}

/// `sources` with every f32's sign bit cleared (for [`Prepared::loose`]).
fn abs_f32(sources: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let clear = |v: &Vec<u8>| -> Vec<u8> {
        v.chunks(4).flat_map(|c| c.iter().enumerate().map(|(k, &x)| if k == 3 { x & 0x7f } else { x })).collect()
    };
    sources.iter().map(clear).collect()
}

/// PE `me`'s sources, poisoned destinations, expected results and case table
/// for batch `b` (`views`: the test's teams as `me` sees them).
pub(crate) fn prepare(b: &Batch, views: &[View], me: usize, src_base: u64, dst_base: u64) -> Prepared {
    let mut src = vec![0u8; b.src_bytes];
    let mut init = vec![POISON; b.dst_bytes];
    let mut want = init.clone();
    let mut written = vec![None; b.cases.len()];
    let mut loose = vec![None; b.cases.len()];
    let nvshmem_f32 = b.what == "f32" && engine() == gpushmem::Engine::Nvshmem;
    let mut table = Vec::with_capacity(b.cases.len() * CASE_WORDS);
    for (i, c) in b.cases.iter().enumerate() {
        let stream = |p: usize| b.tag << 40 | (i as u64) << 16 | p as u64;
        src[c.src_at..c.src_at + c.src_len].copy_from_slice(&(b.source)(c, stream(me)));
        let team = &views[c.team];
        if let Some(my) = team.my {
            let srcs: Vec<Vec<u8>> = team.members.iter().map(|&p| (b.source)(c, stream(p))).collect();
            let w = (b.expected)(c, &srcs, my);
            assert!(w.len() <= c.dst_cap, "case {i}: result larger than its region");
            want[c.dst_at..c.dst_at + w.len()].copy_from_slice(&w);
            // Poison = bitwise NOT of the result: an unwritten byte always fails.
            for (d, v) in init[c.dst_at..].iter_mut().zip(&w) {
                *d = !v;
            }
            written[i] = Some((team.members[0], w.len()));
            if nvshmem_f32 && matches!(op_of(c), ReduceOp::Sum | ReduceOp::Prod) {
                loose[i] = Some((team.members.len(), (b.expected)(c, &abs_f32(&srcs), my)));
            }
        }
        let count = if b.bytes { c.nelems * c.esize } else { c.nelems };
        table.extend_from_slice(&[
            c.kind as u64,
            c.form as u64,
            team.handle as u64,
            c.arg as u64,
            count as u64,
            src_base + c.src_at as u64,
            dst_base + c.dst_at as u64,
        ]);
    }
    Prepared { src, init, want, written, table, loose }
}

/// Checks PE `me`'s destination arena `got` after batch `bi` (every case's
/// region, guards included); returns the failures and the digests of its
/// broadcast, fcollect and reduce results.
pub(crate) fn check(
    b: &Batch,
    bi: usize,
    names: &[String],
    me: usize,
    p: &Prepared,
    got: &[u8],
) -> (Vec<String>, Vec<Digest>) {
    let mut bad = Vec::new();
    let mut digests = Vec::new();
    for (i, c) in b.cases.iter().enumerate() {
        let lo = c.dst_at - c.dst_lead;
        let hi = c.dst_at + c.dst_cap + GUARD;
        let (g, w) = (&got[lo..hi], &p.want[lo..hi]);
        let rounding_only = match (&p.loose[i], p.written[i]) {
            (Some((n, abs)), Some((_, len))) => {
                let (r, rw) = (c.dst_at..c.dst_at + len, c.dst_lead..c.dst_lead + len);
                g[..rw.start] == w[..rw.start]
                    && g[rw.end..] == w[rw.end..]
                    && within_rounding(*n, &got[r.clone()], &p.want[r], abs)
            }
            _ => false,
        };
        // (a rounding-only difference still needs every member's result bitwise the same: digests below)
        let first_wrong = if rounding_only { None } else { g.iter().zip(w).position(|(x, y)| x != y) };
        if let Some(at) = first_wrong {
            let wrong = g.iter().zip(w).filter(|(x, y)| x != y).count();
            let off = at as i64 - c.dst_lead as i64;
            let role = match p.written[i] {
                Some((_, len)) if off >= 0 && (off as usize) < len => format!("element {}", off as usize / c.esize),
                Some(_) => "a guard byte (written out of bounds)".to_string(),
                None => "the destination of a non-member (touched)".to_string(),
            };
            bad.push(format!(
                "PE {me}: {} case {i}: {}: {wrong} bytes wrong; first at byte {off} ({role}): got {:#04x}, want {:#04x}",
                b.what,
                c.describe(names),
                g[at],
                w[at]
            ));
        }
        if let Some((key, len)) = p.written[i] {
            if c.kind != 2 && c.kind != 4 {
                digests.push((bi as u32, i as u32, key as u32, digest(&got[c.dst_at..c.dst_at + len])));
            }
        }
    }
    (bad, digests)
}

/// Runs batch `bi` on this PE: writes its sources, poisons its destinations,
/// launches the batch kernel, checks the destinations.
fn run_batch(
    shmem: &Shmem,
    module: &Module,
    views: &[View],
    names: &[String],
    bi: usize,
    b: &Batch,
    a: &Arenas,
) -> gpushmem::Result<(Vec<String>, Vec<Digest>)> {
    let me = shmem.my_pe();
    let p = prepare(b, views, me, a.src.as_kernel_ptr(), a.dst.as_kernel_ptr());
    shmem.write_at(&a.src, 0, &p.src)?;
    shmem.write_at(&a.dst, 0, &p.init)?;
    shmem.write_at(&a.table, 0, &p.table)?;
    // Every source written and every destination poisoned before any PE starts.
    shmem.bootstrap().barrier()?;
    let k = module.kernel(&b.kernel)?;
    unsafe { shmem.launch_collective(&k, one_block(128), (a.table.as_kernel_ptr(), b.cases.len() as u32))? };
    shmem.synchronize()?;
    let got = shmem.read_at(&a.dst, 0, b.dst_bytes)?;
    let r = check(b, bi, names, me, &p, &got);
    // No PE rewrites its sources for the next batch before every PE is done with this one.
    shmem.bootstrap().barrier()?;
    Ok(r)
}

/// Every batch on `n` PEs; failures and cross-PE digest mismatches are test failures.
/// With `debug_checks`, the PEs (threads) run with the device's debug checks on
/// (for a child process: a false alarm traps and poisons the context).
fn run_batches(n: usize, batches: &[Batch], specs: &[TeamSpec], debug_checks: bool) -> TestResult {
    // The expected results come from the reference: first make sure it is right.
    reference::agreement::checked()?;
    let src_max = batches.iter().map(|b| b.src_bytes).max().unwrap_or(256);
    let dst_max = batches.iter().map(|b| b.dst_bytes).max().unwrap_or(256);
    let table_max = batches.iter().map(|b| b.cases.len()).max().unwrap_or(1) * CASE_WORDS;
    let heap = ((src_max + dst_max + 8 * table_max) as u64 + (8 << 20)).next_multiple_of(1 << 20);
    let names: Vec<String> = specs.iter().map(|s| s.name()).collect();
    let start = Instant::now();
    let body = |shmem: &Shmem| {
        let made: Vec<(Team, Vec<Team>)> = specs.iter().map(|s| s.make(shmem)).collect::<gpushmem::Result<_>>()?;
        let views: Vec<View> = made.iter().map(|m| View::of(&m.0)).collect();
        let a = Arenas { src: shmem.malloc(src_max)?, dst: shmem.malloc(dst_max)?, table: shmem.malloc(table_max)? };
        let module = kernels(shmem)?;
        let mut bad = Vec::new();
        let mut digests = Vec::new();
        for (bi, b) in batches.iter().enumerate() {
            let (f, d) = run_batch(shmem, &module, &views, &names, bi, b, &a)?;
            bad.extend(f);
            digests.extend(d);
        }
        shmem.free(a.table)?;
        shmem.free(a.dst)?;
        shmem.free(a.src)?;
        for t in made.into_iter().flat_map(|m| m.1) {
            shmem.team_destroy(t)?;
        }
        Ok((bad, digests))
    };
    let rows = if debug_checks {
        let cfg = gpushmem::Config { debug_checks: true, ..config(heap) };
        gpushmem::Threads::new(n).config(cfg).run(body).map_err(|e| format!("{n} PEs, debug checks on: {e}"))?
    } else {
        threads(n, heap, body)?
    };
    let mut bad: Vec<String> = rows.iter().flat_map(|(b, _)| b.iter().cloned()).collect();
    let digests: Vec<Vec<Digest>> = rows.into_iter().map(|(_, d)| d).collect();
    let (instances, differ) = compare_members(batches, &names, &digests);
    bad.extend(differ);
    fail_if_any(&bad)?;
    let cases: usize = batches.iter().map(|b| b.cases.len()).sum();
    println!(
        "  {n} PEs: {cases} collective calls in {} launches ({}) on teams {names:?}, every byte checked, \
         {instances} team instances bitwise identical across members, in {:.1?}",
        batches.len(),
        batches.iter().map(|b| b.what.as_str()).collect::<Vec<_>>().join(", "),
        start.elapsed()
    );
    Ok(())
}

/// Every member of a team instance got the same bits (reductions included):
/// `digests[pe]` is PE `pe`'s list from [`check`]. Returns the number of team
/// instances and a failure per instance whose members' results differ.
pub(crate) fn compare_members(batches: &[Batch], names: &[String], digests: &[Vec<Digest>]) -> (usize, Vec<String>) {
    let mut by_instance: BTreeMap<(u32, u32, u32), Vec<(usize, u64)>> = BTreeMap::new();
    for (pe, ds) in digests.iter().enumerate() {
        for &(bi, ci, key, h) in ds {
            by_instance.entry((bi, ci, key)).or_default().push((pe, h));
        }
    }
    let mut bad = Vec::new();
    for ((bi, ci, key), v) in &by_instance {
        if v.iter().any(|&(_, h)| h != v[0].1) {
            let b = &batches[*bi as usize];
            bad.push(format!(
                "{} case {ci} ({}), team instance led by PE {key}: members' results differ: {v:x?}",
                b.what,
                b.cases[*ci as usize].describe(names)
            ));
        }
    }
    (by_instance.len(), bad)
}

/// Every collective, form, team, size; reductions on all twelve types.
pub fn matrix(n: usize) -> TestResult {
    let specs = team_specs(n);
    let sizes = [1, 3, 33, 255, 1000, 4099];
    // Copies also with no elements at all (nothing may be written).
    let mut batches = vec![copy_batch(n, &specs, &[0, 1, 3, 33, 255, 1000, 4099])];
    batches.extend((0..REDUCE_TYPES.len()).map(|ty| reduce_batch(n, ty, &specs, &sizes)));
    run_batches(n, &batches, &specs, false)
}

/// A smaller matrix (copies; reductions on u32, f32, bf16 — between them every
/// form of both reductions), for the process-mode variants. On the NVSHMEM
/// engine: the copies in every form, reductions on `NVSHMEM_REDUCE_TYPES`.
pub fn quick(n: usize) -> TestResult {
    quick_with(n, false)
}

fn quick_with(n: usize, debug_checks: bool) -> TestResult {
    let specs = team_specs(n);
    let sizes = [1, 33, 4099];
    let mut batches = vec![copy_batch(n, &specs, &sizes)];
    let types: Vec<usize> = if engine() == gpushmem::Engine::Nvshmem {
        NVSHMEM_REDUCE_TYPES.iter().map(|t| t.0).collect()
    } else {
        vec![4, 8, 11]
    };
    batches.extend(types.into_iter().map(|ty| reduce_batch(n, ty, &specs, &sizes)));
    run_batches(n, &batches, &specs, debug_checks)
}

/// Child scenario `coll_debug_checks`: the quick matrix on 8 PEs (threads)
/// with the device's debug checks on; exit status 0 when it passes.
pub fn debug_checks_child() -> std::process::ExitCode {
    match quick_with(8, true) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            println!("FAILED: {}", e.message().unwrap_or("(no message)"));
            std::process::ExitCode::from(1)
        }
    }
}

/// The quick matrix with debug checks on (in a child process, since a false
/// alarm would trap and poison the context): no check may fire on correct
/// calls (PE and heap-range checks of every remote range, team membership,
/// overlap), and the results stay right.
pub fn quick_debug_checks() -> TestResult {
    let (ok, text, took) = crate::errors::child(
        "coll_debug_checks",
        &[("GPUSHMEM_TEST_SEED", &seed().to_string())],
        Duration::from_secs(180),
    )?;
    if !ok || text.contains("gpushmem: ") {
        return Err(format!("quick matrix with debug checks on failed:\n{text}").into());
    }
    println!(
        "  8 PEs, debug checks on ({took:.1?}): {}",
        text.lines().filter(|l| l.starts_with("  ")).collect::<Vec<_>>().join(" ")
    );
    Ok(())
}

/// Element `i` of the 64 MiB test's random stream `stream`: finite, in [-8, 8).
fn big_value(seed: u64, stream: u64, i: usize) -> f32 {
    let mut z = (seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15))
        .wrapping_add((i as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    ((z >> 40) as f32 - 8_388_608.0) * (1.0 / 1_048_576.0)
}

fn big_gen(seed: u64, stream: u64, from: usize, len: usize) -> Vec<f32> {
    (from..from + len).map(|i| big_value(seed, stream, i)).collect()
}

/// First difference of two f32 slices (bitwise), as a message.
fn f32_diff(what: &str, at: usize, got: &[f32], want: &[f32]) -> Option<String> {
    if bytemuck::cast_slice::<f32, u8>(got) == bytemuck::cast_slice::<f32, u8>(want) {
        return None;
    }
    let i = got.iter().zip(want).position(|(g, w)| g.to_bits() != w.to_bits()).unwrap_or(0);
    let wrong = got.iter().zip(want).filter(|(g, w)| g.to_bits() != w.to_bits()).count();
    Some(format!(
        "{what}: {wrong} of {} elements wrong in the block at element {at}; first at {}: got {:?} ({:#010x}), want {:?}",
        want.len(),
        at + i,
        got.get(i),
        got.get(i).map_or(0, |v| v.to_bits()),
        want.get(i)
    ))
}

/// 8 PEs, world team, block form, f32, 64 MiB: broadcast of 64 MiB from
/// root 5, fcollect of 8 MiB per PE into 64 MiB, alltoall of 64 MiB,
/// reducescatter (sum) of 64 MiB into 8 MiB per PE, and a 16 MiB sum
/// reduce; destinations poisoned with NaN bits, every element checked,
/// reductions bit-exact. Quick mode: 128 KiB (16 KiB per PE), reduce 128 KiB.
pub fn large() -> TestResult {
    let n = 8usize;
    let total = size_cap(64 << 20);
    let e = total / 4; // f32 elements in 64 MiB (quick mode: 128 KiB)
    let blk = e / n; // one member's block (8 MiB; quick mode: 16 KiB)
    let red_bytes = size_cap(16 << 20);
    let red = red_bytes / 4;
    let (all_b, blk_b, red_b) = (fmt_bytes(total), fmt_bytes(blk * 4), fmt_bytes(red_bytes));
    let root = 5usize;
    let s = seed();
    reference::agreement::checked()?;
    let start = Instant::now();
    // References every PE shares, computed once (three threads: a debug build is slow).
    let (bcast, fcol, (red_src, red_want)) = std::thread::scope(|sc| {
        let bcast = sc.spawn(|| big_gen(s, 1 << 32 | root as u64, 0, e));
        let fcol = sc.spawn(|| (0..n).flat_map(|p| big_gen(s, 2 << 32 | p as u64, 0, blk)).collect::<Vec<f32>>());
        let red = sc.spawn(|| {
            let src: Vec<Vec<f32>> = (0..n).map(|p| big_gen(s, 3 << 32 | p as u64, 0, red)).collect();
            let want: Vec<f32> = (0..red)
                .map(|i| reference::in_member_order(src.iter().map(|v| v[i]), |a, b| f32::reduce(ReduceOp::Sum, a, b)))
                .collect();
            (src, want)
        });
        let join = "a reference thread panicked";
        (bcast.join().expect(join), fcol.join().expect(join), red.join().expect(join))
    });
    let prep = start.elapsed();
    let rows = threads(n, 160 << 20, |shmem| {
        let me = shmem.my_pe();
        let src = shmem.malloc::<f32>(e)?;
        let dst = shmem.malloc::<f32>(e)?;
        let table = shmem.malloc::<u64>(CASE_WORDS)?;
        let module = kernels(shmem)?;
        let poison = vec![f32::from_bits(u32::MAX); blk];
        let mut bad = Vec::new();
        let mut times = Vec::new();
        // (kernel, kind, arg, count passed to the kernel) of one case, with the PE's source written by `fill`.
        let mut run = |name: &str, kernel: &str, kind: u32, arg: u32, count: usize| -> gpushmem::Result<()> {
            for c in 0..n {
                shmem.write_at(&dst, c * blk, &poison)?;
            }
            let words = [
                kind as u64,
                BLOCK as u64,
                0, // TEAM_WORLD
                arg as u64,
                count as u64,
                src.as_kernel_ptr(),
                dst.as_kernel_ptr(),
            ];
            shmem.write(&table, &words)?;
            shmem.bootstrap().barrier()?;
            let t0 = Instant::now();
            unsafe { shmem.launch_collective(&module.kernel(kernel)?, one_block(256), (table.as_kernel_ptr(), 1u32))? };
            shmem.synchronize()?;
            times.push(format!("{name} {:.1?}", t0.elapsed()));
            Ok(())
        };
        let mut check = |what: &str, at: usize, want: &[f32]| -> gpushmem::Result<()> {
            let got = shmem.read_at(&dst, at, want.len())?;
            if let Some(m) = f32_diff(what, at, &got, want) {
                bad.push(format!("PE {me}: {m}"));
            }
            Ok(())
        };

        // broadcast 64 MiB from root 5 (the other PEs' sources are zero: a wrong root shows).
        if me == root {
            shmem.write(&src, &bcast)?;
        }
        run("broadcast", "coll_copy_batch", 0, root as u32, e * 4)?;
        for c in 0..n {
            check(&format!("broadcast {all_b}"), c * blk, &bcast[c * blk..(c + 1) * blk])?;
        }
        shmem.bootstrap().barrier()?;

        // fcollect: 8 MiB per PE into 64 MiB.
        shmem.write_at(&src, 0, &fcol[me * blk..(me + 1) * blk])?;
        run("fcollect", "coll_copy_batch", 1, 0, blk * 4)?;
        for c in 0..n {
            check(&format!("fcollect {blk_b} × 8"), c * blk, &fcol[c * blk..(c + 1) * blk])?;
        }
        shmem.bootstrap().barrier()?;

        // alltoall: 64 MiB, block j of PE i to block i of PE j.
        for j in 0..n {
            shmem.write_at(&src, j * blk, &big_gen(s, 4 << 32 | me as u64, j * blk, blk))?;
        }
        run("alltoall", "coll_copy_batch", 2, 0, blk * 4)?;
        for i in 0..n {
            check(&format!("alltoall {all_b}"), i * blk, &big_gen(s, 4 << 32 | i as u64, me * blk, blk))?;
        }
        shmem.bootstrap().barrier()?;

        // reduce (sum) of 16 MiB.
        shmem.write_at(&src, 0, &red_src[me])?;
        run("reduce", "coll_reduce_batch_f32", 3, ReduceOp::Sum as u32, red)?;
        check(&format!("sum reduce {red_b}"), 0, &red_want)?;
        shmem.bootstrap().barrier()?;

        // reducescatter (sum): 64 MiB of sources, 8 MiB of result per PE.
        for j in 0..n {
            shmem.write_at(&src, j * blk, &big_gen(s, 5 << 32 | me as u64, j * blk, blk))?;
        }
        run("reducescatter", "coll_reduce_batch_f32", 4, ReduceOp::Sum as u32, blk)?;
        let parts: Vec<Vec<f32>> = (0..n).map(|m| big_gen(s, 5 << 32 | m as u64, me * blk, blk)).collect();
        let want: Vec<f32> = (0..blk)
            .map(|i| reference::in_member_order(parts.iter().map(|v| v[i]), |a, b| f32::reduce(ReduceOp::Sum, a, b)))
            .collect();
        check(&format!("sum reducescatter {all_b}"), 0, &want)?;
        shmem.bootstrap().barrier()?;

        shmem.free(table)?;
        shmem.free(dst)?;
        shmem.free(src)?;
        Ok((bad, times))
    })?;
    let bad: Vec<String> = rows.iter().flat_map(|(b, _)| b.iter().cloned()).collect();
    fail_if_any(&bad)?;
    println!(
        "  {n} PEs, block form, f32: broadcast/fcollect/alltoall/reducescatter {all_b}, reduce {red_b}, every element \
         checked, reductions bit-exact; PE 0 kernels: {}; reference {prep:.1?}, all in {:.1?}",
        rows[0].1.join(", "),
        start.elapsed()
    );
    Ok(())
}

/// Child scenario `misuse_sizes_differ`: two PEs (threads), debug checks on.
/// First right calls, which the argument comparison must let through: an
/// `allreduce_on_stream` of 1 Mi f32 (two-shot, many blocks) and an
/// `fcollect_on_stream`, both checked. Then PE 0 all-reduces 1024 elements
/// and PE 1 512 (a four-byte size per member is no excuse for reading past
/// the shorter one's data): a trap naming both.
fn sizes_differ_child() -> gpushmem::Result<()> {
    let cfg = gpushmem::Config { debug_checks: true, ..config(64 << 20) };
    gpushmem::Threads::new(2)
        .config(cfg)
        .run(|shmem| {
            let (me, team) = (shmem.my_pe(), shmem.team_world());
            let n = 1 << 20;
            let src = shmem.malloc::<f32>(n)?;
            let dst = shmem.calloc::<f32>(n)?;
            shmem.write(&src, &(0..n).map(|i| (i % 7 + me) as f32).collect::<Vec<_>>())?;
            let check = |what: &str, want: &dyn Fn(usize) -> f32| -> gpushmem::Result<()> {
                shmem.synchronize()?;
                let got = shmem.read(&dst)?;
                if let Some(i) = (0..n).find(|&i| got[i] != want(i)) {
                    println!("WRONG: {what} on PE {me}, element {i}: {} (want {})", got[i], want(i));
                }
                Ok(())
            };
            shmem.allreduce_on_stream(&team, &dst, &src, n, ReduceOp::Sum, shmem.stream())?;
            check("allreduce", &|i| (2 * (i % 7) + 1) as f32)?;
            shmem.fcollect_on_stream(&team, &dst, &src, n / 2, shmem.stream())?;
            check("fcollect", &|i| (i % (n / 2) % 7 + i / (n / 2)) as f32)?;
            let mine = if me == 0 { 1024 } else { 512 };
            shmem.allreduce_on_stream(&team, &dst, &src, mine, ReduceOp::Sum, shmem.stream())?;
            shmem.synchronize()?;
            println!("NO ERROR: the kernel returned normally");
            Ok(())
        })
        .map(|_| ())
}

/// Child scenarios `misuse_*` (run with GPUSHMEM_DEBUG_CHECKS=1): one misuse each, which must trap.
pub fn misuse_child(name: &str) -> gpushmem::Result<()> {
    if name == "misuse_sizes_differ" {
        return sizes_differ_child();
    }
    if name == "misuse_team_non_member" {
        // Two PEs (threads): PE 0 calls a barrier on the team {1}.
        let cfg = gpushmem::Config { debug_checks: true, ..config(16 << 20) };
        return gpushmem::Threads::new(2)
            .config(cfg)
            .run(|shmem| {
                let world = shmem.team_world();
                let t = shmem.team_split_strided(&world, 1, 1, 1)?;
                let m = kernels(shmem)?;
                if shmem.my_pe() == 0 {
                    unsafe { shmem.launch(&m.kernel("coll_misuse")?, one_block(32), (0u32, t.handle(), 0u64, 0u64))? };
                    shmem.synchronize()?;
                    println!("NO ERROR: the kernel returned normally");
                }
                Ok(())
            })
            .map(|_| ());
    }
    let shmem = Shmem::init()?;
    let m = kernels(&shmem)?;
    let buf = shmem.calloc::<f32>(16)?;
    let (what, team) = match name {
        "misuse_team_invalid" => (0u32, 31u32),
        "misuse_team_out_of_range" => (0, 1000),
        "misuse_reduce_and_f32" => (1, 0),
        _ => (2, 0),
    };
    unsafe { shmem.launch(&m.kernel("coll_misuse")?, one_block(32), (what, team, buf.as_kernel_ptr(), 4u64))? };
    shmem.synchronize()?;
    println!("NO ERROR: the kernel returned normally");
    Ok(())
}

fn expect_misuse(scenario: &str, needles: &[&str]) -> TestResult {
    expect_misuse_with(scenario, needles, "1")
}

/// [`expect_misuse`] with `GPUSHMEM_DEBUG_CHECKS=debug_checks` in the child.
fn expect_misuse_with(scenario: &str, needles: &[&str], debug_checks: &str) -> TestResult {
    let (_, text, took) =
        crate::errors::child(scenario, &[("GPUSHMEM_DEBUG_CHECKS", debug_checks)], Duration::from_secs(60))?;
    for n in needles.iter().chain(&["HOST-SAW-ERROR"]) {
        if !text.contains(n) {
            return Err(format!("{scenario}: expected {n:?} in its output:\n{text}").into());
        }
    }
    if text.contains("NO ERROR") {
        return Err(format!("{scenario}: the kernel returned normally:\n{text}").into());
    }
    if text.contains("WRONG:") {
        return Err(format!("{scenario}: a right call before the misuse gave a wrong result:\n{text}").into());
    }
    println!(
        "  {scenario} ({took:.1?}): {}",
        text.lines().filter(|l| l.contains("gpushmem:")).take(2).collect::<Vec<_>>().join(" | ")
    );
    Ok(())
}

/// A barrier on team slot 31, never created, traps naming the call and the slot.
pub fn team_invalid_traps() -> TestResult {
    expect_misuse("misuse_team_invalid", &["barrier: team 31 is not a valid team", "on PE 0"])
}

/// With debug checks off, a barrier on team slot 1000 (past the table) and
/// on slot 31 (never created) still traps before reading the team table:
/// `Team` is a plain slot number, and safe device code must not reach memory
/// outside the table through it.
pub fn team_out_of_range_traps_unchecked() -> TestResult {
    expect_misuse_with("misuse_team_out_of_range", &["barrier: team 1000 is not a valid team", "on PE 0"], "0")?;
    expect_misuse_with("misuse_team_invalid", &["barrier: team 31 is not a valid team", "on PE 0"], "0")
}

/// A barrier on a team this PE is not in traps naming the PE.
pub fn team_non_member_traps() -> TestResult {
    expect_misuse("misuse_team_non_member", &["barrier: PE 0 is not a member of team"])
}

/// `reduce` with `And` on f32 traps.
pub fn reduce_and_f32_traps() -> TestResult {
    expect_misuse("misuse_reduce_and_f32", &["reduce: and/or/xor reductions need an integer type"])
}

/// `reduce` whose destination overlaps its source traps naming both addresses.
pub fn reduce_overlap_traps() -> TestResult {
    expect_misuse("misuse_reduce_overlap", &["reduce: dest 0x", "overlaps source 0x"])
}

/// With debug checks on, members that pass different sizes to a collective
/// trap naming both (see `sizes_differ_child`), after right calls passed.
pub fn sizes_differ_traps() -> TestResult {
    expect_misuse(
        "misuse_sizes_differ",
        &["the team's members passed different arguments", "reduce of 4096 bytes", "reduce of 2048 bytes"],
    )
}

/// The `_grid` forms (`coll_grid_forms`): every collective on the world team
/// with every block of a collectively launched grid calling (the grid from
/// `collective_launch_query_gridsize`, at most 64 blocks of 256 threads), 100003
/// f32 per PE (the reduce runs two-shot; odd, so chunks are ragged), then
/// `barrier_all_grid` with each block's store to the next PE checked after it.
/// Two launches (rounds), each with new random sources, every element
/// compared bit for bit with the member-order reference after each round.
/// The six results lie in one buffer with [`GRID_GAP`] guard words before,
/// between and after them; before each round every result is poisoned (the
/// bitwise NOT of what it must become) and every guard word set to a
/// pattern, and after it every guard word must be unchanged: a result that
/// runs past its end is caught, not overwritten by the next one. Native
/// engine only (no grid forms on NVSHMEM's).
pub fn grid_forms(n: usize) -> TestResult {
    reference::agreement::checked()?;
    let len = 100_003usize;
    let k = len / n;
    let data = |round: u32, pe: usize| random_unit_f32s(seed(), 900 + 16 * round as u64 + pe as u64, len * n);
    let lens = grid_result_lens(len, k, n);
    let out_len = lens.iter().sum::<usize>() + (lens.len() + 1) * GRID_GAP;
    let rows = threads(n, 64 << 20, |shmem| {
        let me = shmem.my_pe();
        let m = kernels(shmem)?;
        let kern = m.kernel("coll_grid_forms")?;
        let blocks = shmem.collective_launch_query_gridsize(&kern, 256, 0)?.min(64);
        let src = shmem.malloc::<f32>(len * n)?;
        let out = shmem.calloc::<u32>(out_len)?;
        let marks = shmem.calloc::<u32>(blocks as usize)?;
        let errors = shmem.calloc::<u32>(1)?;
        let cfg = LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
        let mut bad = Vec::new();
        for round in 1..=2u32 {
            let srcs: Vec<Vec<f32>> = (0..n).map(|pe| data(round, pe)).collect();
            let want = grid_want(&srcs, me, len, k);
            let (before, after) = grid_frames(&lens, &want);
            // Nobody rewrites its sources while a peer may still read last round's.
            shmem.bootstrap().barrier()?;
            shmem.write(&src, &srcs[me])?;
            shmem.write(&out, &before)?;
            shmem.bootstrap().barrier()?; // every PE's sources written and results poisoned
            let first = out.as_kernel_ptr() + (GRID_GAP * 4) as u64;
            // SAFETY: coll_grid_forms(*const f32, *mut f32, u64, u64, *mut u32, u32, *mut u32): `src`
            // holds len * n; from `first` on, `out` holds the six results with `GRID_GAP` words
            // after each (`grid_result_lens`); `marks` one word per block; all symmetric.
            unsafe {
                shmem.launch_collective(
                    &kern,
                    cfg,
                    (
                        src.as_kernel_ptr(),
                        first,
                        len as u64,
                        GRID_GAP as u64,
                        marks.as_kernel_ptr(),
                        round,
                        errors.as_kernel_ptr(),
                    ),
                )?
            };
            shmem.synchronize()?;
            let got = shmem.read(&out)?;
            bad.extend(
                grid_check(&lens, &got, &after)
                    .into_iter()
                    .map(|m| format!("PE {me} ({blocks} blocks), round {round}: {m}")),
            );
        }
        let errs = shmem.read(&errors)?[0];
        if errs != 0 {
            bad.push(format!("PE {me}: {errs} block(s) missed the previous PE's store after barrier_all_grid"));
        }
        Ok((blocks, bad))
    })?;
    let bad: Vec<String> = rows.iter().flat_map(|(_, b)| b.iter().cloned()).collect();
    fail_if_any(&bad)?;
    println!(
        "  {n} PEs × {} blocks: broadcast/fcollect/alltoall/reduce (f32 sum two-shot, u32 sum)/reducescatter _grid \
         and barrier_all_grid, 2 rounds of new data: bit-exact, every guard word between and around the results intact",
        rows[0].0
    );
    Ok(())
}

/// Guard words (u32) before, between and after the results of [`grid_forms`].
pub const GRID_GAP: usize = 64;

/// The names of the six results of `coll_grid_forms`, in order.
const GRID_RESULTS: [&str; 6] =
    ["broadcast", "fcollect", "alltoall", "reduce f32 sum", "reduce u32 sum", "reducescatter f32 max"];

/// The lengths (elements) of `coll_grid_forms`'s six results: `len` per PE, blocks of `k`, `n` PEs.
pub fn grid_result_lens(len: usize, k: usize, n: usize) -> [usize; 6] {
    [len, k * n, k * n, len, len, k]
}

/// PE `me`'s six results of [`grid_forms`] from every PE's sources, back to back (bits).
fn grid_want(srcs: &[Vec<f32>], me: usize, len: usize, k: usize) -> Vec<u32> {
    let mut want: Vec<u32> = Vec::new();
    want.extend(srcs[srcs.len() - 1][..len].iter().map(|v| v.to_bits()));
    want.extend(srcs.iter().flat_map(|s| s[..k].iter().map(|v| v.to_bits())));
    want.extend(srcs.iter().flat_map(|s| s[me * k..(me + 1) * k].iter().map(|v| v.to_bits())));
    let fold =
        |i: usize, op: ReduceOp| reference::in_member_order(srcs.iter().map(|s| s[i]), |a, b| f32::reduce(op, a, b));
    want.extend((0..len).map(|i| fold(i, ReduceOp::Sum).to_bits()));
    want.extend((0..len).map(|i| {
        reference::in_member_order(srcs.iter().map(|s| s[i].to_bits()), |a, b| u32::reduce(ReduceOp::Sum, a, b))
    }));
    want.extend((0..k).map(|i| fold(me * k + i, ReduceOp::Max).to_bits()));
    want
}

/// The guard word at position `i` of the output buffer: a pattern that changes from word to word, so
/// that neither a result's value nor a shifted copy of the guards matches it by chance.
fn grid_guard(i: usize) -> u32 {
    0x7FC0_0000 ^ (i as u32).wrapping_mul(0x9E37_79B9) >> 8
}

/// The output buffer before a round (results poisoned: bitwise NOT of `want`)
/// and after it (results = `want`), guards around every result (`lens`, back to back in `want`).
pub fn grid_frames(lens: &[usize], want: &[u32]) -> (Vec<u32>, Vec<u32>) {
    let total = lens.iter().sum::<usize>() + (lens.len() + 1) * GRID_GAP;
    let mut after: Vec<u32> = (0..total).map(grid_guard).collect();
    let (mut at, mut from) = (GRID_GAP, 0);
    for &l in lens {
        after[at..at + l].copy_from_slice(&want[from..from + l]);
        (at, from) = (at + l + GRID_GAP, from + l);
    }
    let mut before = after.clone();
    let mut at = GRID_GAP;
    for &l in lens {
        before[at..at + l].iter_mut().for_each(|v| *v = !*v);
        at += l + GRID_GAP;
    }
    (before, after)
}

/// The first word of `got` that differs from `after` in each result and each
/// guard (see [`grid_frames`]), as messages naming the result or guard.
pub fn grid_check(lens: &[usize], got: &[u32], after: &[u32]) -> Vec<String> {
    let mut bad = Vec::new();
    let mut at = 0;
    let mut region = |name: String, l: usize, bad: &mut Vec<String>| {
        if let Some(i) = (at..at + l).find(|&i| got.get(i) != after.get(i)) {
            let g = got.get(i).map_or("nothing".to_string(), |v| format!("{v:#x}"));
            bad.push(format!("{name}: word {} is {g}, expected {:#x}", i - at, after[i]));
        }
        at += l;
    };
    for (r, &l) in lens.iter().enumerate() {
        let before = if r == 0 {
            "the guard before the results".to_string()
        } else {
            format!("the guard after {}", GRID_RESULTS[r - 1])
        };
        region(before, GRID_GAP, &mut bad);
        region(GRID_RESULTS[r].to_string(), l, &mut bad);
    }
    region(format!("the guard after {}", GRID_RESULTS[lens.len() - 1]), GRID_GAP, &mut bad);
    bad
}
