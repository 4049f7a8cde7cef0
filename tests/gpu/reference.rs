//! An independent host-side reference for the reductions, written apart from
//! gpushmem-kernels' `reduce` module so that the collective and stream tests
//! do not check the device against the very code it runs.
//!
//! - f32 → bf16 / f16: round to nearest, ties to even, from the IEEE 754
//!   definition on *values*: the input is scaled by the format's quantum
//!   (the spacing of its values at the input's binade, or at the smallest
//!   normal binade for subnormals) in f64, where that is exact, rounded to an
//!   integer with `round_ties_even`, scaled back and encoded; a result above
//!   the largest finite value is infinity; NaN gives a quiet NaN of the same
//!   sign (the payload is not specified: agreement is checked by class).
//! - bf16 / f16 → f32: the value of the fields, `(1 + m/2^p)·2^(e-bias)` or
//!   `m·2^(emin-p)`, computed in f64 (exact) and narrowed (exact).
//! - Operators as documented in `ReduceOp`: integers wrap on sum and product;
//!   min/max keep the accumulated value unless the next one is strictly
//!   smaller/larger; halves compute in f32 and round to nearest-even on store.
//! - Order (kernels/src/collective.rs, `combine`): member 0's value, then
//!   `acc = acc <op> v` for members 1, 2, … in turn ([`in_member_order`]).
//!
//! Nothing here calls gpushmem-kernels' conversions or `Reducible`; only
//! [`agreement`] does, to compare the two (a bug in either shows up).
//! Compiled into the GPU suite and into the CPU test tests/reference.rs,
//! which checks [`known_values`] and the agreement in CI without a GPU.

// Each of the two test binaries uses a different part of this module.
#![allow(dead_code)]

use gpushmem::ReduceOp;

/// `2^k` exactly, for `k` in f64's normal exponent range.
fn pow2(k: i32) -> f64 {
    assert!((-1022..=1023).contains(&k), "2^{k} is outside f64's normal range");
    f64::from_bits(((k + 1023) as u64) << 52)
}

/// The binade of a positive normal f64: `floor(log2(a))`.
fn binade(a: f64) -> i32 {
    ((a.to_bits() >> 52) & 0x7FF) as i32 - 1023
}

/// A 16-bit binary floating-point format: sign bit 15, `exp` exponent bits, `man` mantissa bits.
#[derive(Clone, Copy)]
struct Format {
    exp: u32,
    man: u32,
}

const BF16_FMT: Format = Format { exp: 8, man: 7 };
const F16_FMT: Format = Format { exp: 5, man: 10 };

impl Format {
    fn bias(self) -> i32 {
        (1 << (self.exp - 1)) - 1
    }
    /// The smallest normal binade.
    fn emin(self) -> i32 {
        1 - self.bias()
    }
    fn exp_all_ones(self) -> u16 {
        ((1u32 << self.exp) - 1) as u16
    }
    fn infinity(self) -> u16 {
        self.exp_all_ones() << self.man
    }
    /// The largest finite value, `(2 - 2^-man)·2^bias`.
    fn max_finite(self) -> f64 {
        (2.0 - pow2(-(self.man as i32))) * pow2(self.bias())
    }

    fn round(self, v: f32) -> u16 {
        let sign: u16 = if v.is_sign_negative() { 0x8000 } else { 0 };
        if v.is_nan() {
            // Quiet NaN: all-ones exponent, the top mantissa bit set.
            return sign | self.infinity() | (1 << (self.man - 1));
        }
        let a = (v as f64).abs(); // exact
        if a.is_infinite() {
            return sign | self.infinity();
        }
        if a == 0.0 {
            return sign;
        }
        // Every nonzero f32 is a normal f64, so `binade` applies.
        let quantum = pow2(binade(a).max(self.emin()) - self.man as i32);
        // `a / quantum` only moves the exponent: exact. So is `k * quantum`.
        let k = (a / quantum).round_ties_even();
        let r = k * quantum;
        if r > self.max_finite() {
            return sign | self.infinity();
        }
        sign | self.encode(r)
    }

    /// The bits of `r`, a positive finite value of this format.
    fn encode(self, r: f64) -> u16 {
        if r == 0.0 {
            return 0;
        }
        let e = binade(r);
        if e < self.emin() {
            let m = r / pow2(self.emin() - self.man as i32);
            debug_assert!(m.fract() == 0.0 && m < pow2(self.man as i32));
            m as u16
        } else {
            let m = r / pow2(e - self.man as i32) - pow2(self.man as i32);
            debug_assert!(m.fract() == 0.0 && m >= 0.0 && m < pow2(self.man as i32));
            (((e + self.bias()) as u16) << self.man) | m as u16
        }
    }

    fn value(self, bits: u16) -> f32 {
        let e = (bits >> self.man) & self.exp_all_ones();
        let m = (bits & ((1u16 << self.man) - 1)) as f64;
        let mag = if e == self.exp_all_ones() {
            if m == 0.0 {
                f64::INFINITY
            } else {
                f64::NAN
            }
        } else if e == 0 {
            m * pow2(self.emin() - self.man as i32)
        } else {
            (pow2(self.man as i32) + m) * pow2(e as i32 - self.bias() - self.man as i32)
        };
        // Exact: every value of these formats is an f32 value.
        let v = mag as f32;
        if bits & 0x8000 != 0 {
            -v
        } else {
            v
        }
    }
}

/// f32 → bfloat16 bits, round to nearest, ties to even.
pub fn bf16_from_f32(v: f32) -> u16 {
    BF16_FMT.round(v)
}

/// bfloat16 bits → f32 (exact).
pub fn bf16_to_f32(b: u16) -> f32 {
    BF16_FMT.value(b)
}

/// f32 → IEEE binary16 bits, round to nearest, ties to even; overflow to infinity.
pub fn f16_from_f32(v: f32) -> u16 {
    F16_FMT.round(v)
}

/// IEEE binary16 bits → f32 (exact).
pub fn f16_to_f32(h: u16) -> f32 {
    F16_FMT.value(h)
}

/// `a <op> b` of the reference.
pub trait RefReduce: Copy {
    fn reduce(op: ReduceOp, a: Self, b: Self) -> Self;
}

macro_rules! ref_int {
    ($($t:ty),*) => {$(
        impl RefReduce for $t {
            fn reduce(op: ReduceOp, a: Self, b: Self) -> Self {
                match op {
                    ReduceOp::Sum => a.wrapping_add(b),
                    ReduceOp::Prod => a.wrapping_mul(b),
                    ReduceOp::Min => Ord::min(a, b),
                    ReduceOp::Max => Ord::max(a, b),
                    ReduceOp::And => a & b,
                    ReduceOp::Or => a | b,
                    ReduceOp::Xor => a ^ b,
                }
            }
        }
    )*};
}
ref_int!(u8, i8, u16, i16, u32, i32, u64, i64);

macro_rules! ref_float {
    ($($t:ty),*) => {$(
        impl RefReduce for $t {
            fn reduce(op: ReduceOp, a: Self, b: Self) -> Self {
                match op {
                    ReduceOp::Sum => a + b,
                    ReduceOp::Prod => a * b,
                    // The accumulated value stays unless the next is strictly smaller (larger).
                    ReduceOp::Min => if b < a { b } else { a },
                    ReduceOp::Max => if b > a { b } else { a },
                    _ => panic!("{op:?} is not defined on floats"),
                }
            }
        }
    )*};
}
ref_float!(f32, f64);

/// `a <op> b` on bfloat16 bits: computed in f32, rounded to nearest-even.
pub fn bf16_reduce(op: ReduceOp, a: u16, b: u16) -> u16 {
    bf16_from_f32(f32::reduce(op, bf16_to_f32(a), bf16_to_f32(b)))
}

/// `a <op> b` on binary16 bits: computed in f32, rounded to nearest-even.
pub fn f16_reduce(op: ReduceOp, a: u16, b: u16) -> u16 {
    f16_from_f32(f32::reduce(op, f16_to_f32(a), f16_to_f32(b)))
}

/// The device's reduction order: member 0's value, then `acc = op(acc, v)`
/// for members 1, 2, … in turn (floats are not associative: order matters).
pub fn in_member_order<T>(values: impl IntoIterator<Item = T>, op: impl FnMut(T, T) -> T) -> T {
    let mut it = values.into_iter();
    let first = it.next().expect("a team has at least one member");
    it.fold(first, op)
}

/// Whether two 16-bit values of a format agree: equal bits, or both NaN of the same sign.
fn same_half(f: Format, a: u16, b: u16) -> bool {
    let nan = |x: u16| (x >> f.man) & f.exp_all_ones() == f.exp_all_ones() && x & ((1 << f.man) - 1) != 0;
    a == b || (nan(a) && nan(b) && (a ^ b) & 0x8000 == 0)
}

/// Whether two f32 agree: equal bits, or both NaN of the same sign.
fn same_f32(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan() && a.is_sign_negative() == b.is_sign_negative())
}

/// Known values worked out by hand from the formats' definitions; returns every
/// disagreement of the reference with them (empty: all right).
pub fn known_values() -> Vec<String> {
    let mut bad = Vec::new();
    let p = pow2;
    let bf: &[(f32, u16)] = &[
        (1.0, 0x3F80),
        (-2.0, 0xC000),
        (0.0, 0x0000),
        (-0.0, 0x8000),
        (3.140_625, 0x4049),
        (std::f32::consts::PI, 0x4049), // 0x40490FDB: the low half is below the midpoint
        ((1.0 + p(-8)) as f32, 0x3F80), // tie between 0x3F80 and 0x3F81: to even (down)
        ((1.0 + 3.0 * p(-8)) as f32, 0x3F82), // tie between 0x3F81 and 0x3F82: to even (up)
        ((1.0 + p(-8) + p(-20)) as f32, 0x3F81), // just above the tie: up
        ((1.0 + p(-8) - p(-20)) as f32, 0x3F80), // just below: down
        (f32::INFINITY, 0x7F80),
        (f32::NEG_INFINITY, 0xFF80),
        (f32::MAX, 0x7F80), // above bf16's largest finite + half an ulp: infinity
        (((2.0 - p(-7)) * p(127)) as f32, 0x7F7F), // bf16's largest finite
        (((2.0 - p(-8)) * p(127)) as f32, 0x7F80), // the midpoint to infinity: ties to even, infinity
        (((2.0 - p(-8) - p(-20)) * p(127)) as f32, 0x7F7F), // just below it
        (p(-126) as f32, 0x0080), // smallest normal
        (p(-133) as f32, 0x0001), // smallest subnormal
        (p(-134) as f32, 0x0000), // half of it: tie, to even (zero)
        ((1.5 * p(-134)) as f32, 0x0001), // above the tie
        (f32::from_bits(1), 0x0000), // f32's smallest subnormal
        (-f32::from_bits(1), 0x8000),
    ];
    for &(v, want) in bf {
        let got = bf16_from_f32(v);
        if got != want {
            bad.push(format!("bf16_from_f32({v:e} = {:#010x}) = {got:#06x}, want {want:#06x}", v.to_bits()));
        }
    }
    let h: &[(f32, u16)] = &[
        (1.0, 0x3C00),
        (-2.0, 0xC000),
        (0.0, 0x0000),
        (-0.0, 0x8000),
        (0.1, 0x2E66),
        (1.0 / 3.0, 0x3555),
        (65504.0, 0x7BFF), // largest finite
        (65519.0, 0x7BFF), // below the midpoint to infinity
        (65520.0, 0x7C00), // the midpoint: ties to even, which is infinity
        (1.0e6, 0x7C00),
        (-1.0e6, 0xFC00),
        (f32::INFINITY, 0x7C00),
        (f32::NEG_INFINITY, 0xFC00),
        ((1.0 + p(-11)) as f32, 0x3C00),       // tie: to even (down)
        ((1.0 + 3.0 * p(-11)) as f32, 0x3C02), // tie: to even (up)
        (p(-14) as f32, 0x0400),               // smallest normal
        ((p(-14) - p(-25)) as f32, 0x0400),    // tie between 0x03FF and 0x0400: to even (up)
        ((p(-14) - p(-24)) as f32, 0x03FF),    // largest subnormal
        (5.960_464_5e-8, 0x0001),              // smallest subnormal, 2^-24
        (3.0e-8, 0x0001),                      // above half of it
        (p(-25) as f32, 0x0000),               // half of it: tie, to even (zero)
        ((1.5 * p(-24)) as f32, 0x0002),       // tie between 1 and 2: to even (2)
        (1.0e-8, 0x0000),                      // below half the smallest subnormal: zero
        (-1.0e-8, 0x8000),                     // keeps its sign
        (f32::from_bits(1), 0x0000),
    ];
    for &(v, want) in h {
        let got = f16_from_f32(v);
        if got != want {
            bad.push(format!("f16_from_f32({v:e} = {:#010x}) = {got:#06x}, want {want:#06x}", v.to_bits()));
        }
    }
    for (name, f) in [("bf16", BF16_FMT), ("f16", F16_FMT)] {
        let from: fn(f32) -> u16 = if f.man == 7 { bf16_from_f32 } else { f16_from_f32 };
        for nan in [f32::NAN, -f32::NAN, f32::from_bits(0x7F80_0001), f32::from_bits(0xFFC0_0000)] {
            let got = from(nan);
            let sign = if nan.is_sign_negative() { 0x8000 } else { 0 };
            if !same_half(f, got, sign | f.infinity() | 1) {
                bad.push(format!("{name} of NaN {:#010x} = {got:#06x}, not a NaN of the same sign", nan.to_bits()));
            }
        }
    }
    type Widen = (&'static str, fn(u16) -> f32, u16, f32);
    let widen: &[Widen] = &[
        ("bf16", bf16_to_f32, 0x3F80, 1.0),
        ("bf16", bf16_to_f32, 0xC049, -3.140_625),
        ("bf16", bf16_to_f32, 0x0001, f32::from_bits(0x0001_0000)), // 2^-133: bf16 is f32's top half
        ("bf16", bf16_to_f32, 0x7F7F, f32::from_bits(0x7F7F_0000)),
        ("bf16", bf16_to_f32, 0xFF80, f32::NEG_INFINITY),
        ("bf16", bf16_to_f32, 0x8000, -0.0),
        ("f16", f16_to_f32, 0x3C00, 1.0),
        ("f16", f16_to_f32, 0x0001, 1.0 / 16_777_216.0),
        ("f16", f16_to_f32, 0x03FF, 1023.0 / 16_777_216.0),
        ("f16", f16_to_f32, 0x0400, 1.0 / 16384.0),
        ("f16", f16_to_f32, 0x3555, 1365.0 / 4096.0),
        ("f16", f16_to_f32, 0x7BFF, 65504.0),
        ("f16", f16_to_f32, 0x7C00, f32::INFINITY),
        ("f16", f16_to_f32, 0x8000, -0.0),
        ("f16", f16_to_f32, 0xC000, -2.0),
    ];
    for &(name, to, bits, want) in widen {
        let got = to(bits);
        if got.to_bits() != want.to_bits() {
            bad.push(format!("{name} {bits:#06x} → {got:e}, want {want:e}"));
        }
    }
    for (name, to) in [("bf16", bf16_to_f32 as fn(u16) -> f32), ("f16", f16_to_f32)] {
        for bits in [0x7FC0u16, 0xFE00, 0x7E00, 0x7D00] {
            let is_nan_bits = if name == "bf16" { bits & 0x7F80 == 0x7F80 } else { bits & 0x7C00 == 0x7C00 };
            let got = to(bits);
            if is_nan_bits && !(got.is_nan() && got.is_sign_negative() == (bits & 0x8000 != 0)) {
                bad.push(format!("{name} NaN {bits:#06x} → {got:e}, not a NaN of the same sign"));
            }
        }
    }
    // Operators.
    let ints = [
        (u8::reduce(ReduceOp::Sum, 200, 100) as i128, 44i128),
        (u8::reduce(ReduceOp::Prod, 16, 17) as i128, 16),
        (i8::reduce(ReduceOp::Prod, -128, -1) as i128, -128),
        (i32::reduce(ReduceOp::Min, -3, 2) as i128, -3),
        (i64::reduce(ReduceOp::Max, i64::MIN, -1) as i128, -1),
        (u64::reduce(ReduceOp::Sum, u64::MAX, 2) as i128, 1),
        (u64::reduce(ReduceOp::Xor, 0b1100, 0b1010) as i128, 0b0110),
        (u16::reduce(ReduceOp::And, 0xF0F0, 0xFF00) as i128, 0xF000),
        (i16::reduce(ReduceOp::Or, 0x0F00, 0x00F0) as i128, 0x0FF0),
        (u32::reduce(ReduceOp::Min, 7, u32::MAX) as i128, 7),
    ];
    for (i, (got, want)) in ints.iter().enumerate() {
        if got != want {
            bad.push(format!("integer operator case {i}: {got}, want {want}"));
        }
    }
    let halves: &[(&str, u16, u16)] = &[
        // 1 + 2 = 3
        ("bf16 sum", bf16_reduce(ReduceOp::Sum, 0x3F80, 0x4000), 0x4040),
        // 1 + 2^-8 is a tie: to even, 1
        ("bf16 sum tie", bf16_reduce(ReduceOp::Sum, 0x3F80, 0x3B80), 0x3F80),
        // 256 + 1 = 257 needs 9 bits: tie, to even (256); 256 + 3 = 259: tie, up to 260
        ("bf16 sum 256+1", bf16_reduce(ReduceOp::Sum, 0x4380, 0x3F80), 0x4380),
        ("bf16 sum 256+3", bf16_reduce(ReduceOp::Sum, 0x4380, 0x4040), 0x4382),
        ("bf16 min", bf16_reduce(ReduceOp::Min, 0x3F80, 0xC000), 0xC000),
        ("bf16 max", bf16_reduce(ReduceOp::Max, 0x3F80, 0xC000), 0x3F80),
        // 1.5 × 2 = 3
        ("f16 prod", f16_reduce(ReduceOp::Prod, 0x3E00, 0x4000), 0x4200),
        // 65504 + 16 = 65520: the tie to infinity
        ("f16 sum overflow", f16_reduce(ReduceOp::Sum, 0x7BFF, 0x4C00), 0x7C00),
        // 2048 + 1 = 2049 needs 12 bits: tie, to even (2048)
        ("f16 sum 2048+1", f16_reduce(ReduceOp::Sum, 0x6800, 0x3C00), 0x6800),
        ("f16 max", f16_reduce(ReduceOp::Max, 0xBC00, 0x3C00), 0x3C00),
        // ±0: the accumulated value stays
        ("f16 min of 0 and -0", f16_reduce(ReduceOp::Min, 0x0000, 0x8000), 0x0000),
    ];
    for &(what, got, want) in halves {
        if got != want {
            bad.push(format!("{what}: {got:#06x}, want {want:#06x}"));
        }
    }
    // Member order matters: (1e8 + 1) - 1e8 is 0 in f32 (the 1 is lost), 1e8 - 1e8 + 1 is 1.
    let sum = |v: [f32; 3]| in_member_order(v, |a, b| f32::reduce(ReduceOp::Sum, a, b));
    if sum([1.0e8, 1.0, -1.0e8]) != 0.0 || sum([1.0e8, -1.0e8, 1.0]) != 1.0 {
        bad.push("in_member_order does not fold in member order".into());
    }
    if in_member_order([5u32, 3, 9], |a, b| u32::reduce(ReduceOp::Min, a, b)) != 3 {
        bad.push("in_member_order(min) of [5, 3, 9] is not 3".into());
    }
    bad
}

/// Exhaustive properties of the conversions: every finite 16-bit value
/// round-trips, and the midpoint between any two neighbours rounds to the
/// even one (one f32 ulp off the midpoint rounds to the nearer). Returns the
/// first disagreements (empty: all right).
pub fn exhaustive() -> Vec<String> {
    let mut bad = Vec::new();
    for (name, f) in [("bf16", BF16_FMT), ("f16", F16_FMT)] {
        for bits in 0..=u16::MAX {
            let v = f.value(bits);
            if v.is_nan() {
                continue;
            }
            if f.round(v) != bits {
                bad.push(format!("{name} {bits:#06x} → {v:e} → {:#06x}", f.round(v)));
            }
            // Neighbours upward (positive and negative alike), up to the largest finite.
            if bits & 0x7FFF >= f.infinity() - 1 {
                continue;
            }
            let w = f.value(bits + 1);
            let mid = (v as f64 + w as f64) / 2.0; // exact in f64, and in f32 (one more bit)
            let mid32 = mid as f32;
            if mid32 as f64 != mid {
                bad.push(format!("{name}: midpoint of {bits:#06x} and its neighbour is not an f32"));
                continue;
            }
            let even = if bits & 1 == 0 { bits } else { bits + 1 };
            // One f32 ulp toward `w` (away from zero for positive, toward -inf for negative: both grow |x|).
            let toward_w = f32::from_bits(mid32.to_bits() + 1);
            let toward_v = f32::from_bits(mid32.to_bits() - 1);
            // `bits + 1` is farther from zero for both signs (sign-magnitude encoding).
            for (x, want) in [(mid32, even), (toward_w, bits + 1), (toward_v, bits)] {
                if f.round(x) != want {
                    bad.push(format!("{name}: {x:e} ({:#010x}) → {:#06x}, want {want:#06x}", x.to_bits(), f.round(x)));
                }
            }
            if bad.len() > 20 {
                return bad;
            }
        }
    }
    bad
}

/// The reference against gpushmem-kernels' own conversions and operators:
/// the only place in this module that calls them.
pub mod agreement {
    use super::*;
    use gpushmem::{Bf16, F16};
    use gpushmem_kernels::reduce::Reducible;

    /// f32 values where conversions go wrong if they do: specials, every
    /// 16-bit value of both formats, the midpoints between neighbours and one
    /// f32 ulp either side, and `extra` pseudo-random bit patterns.
    pub fn probe_values(extra: usize) -> Vec<f32> {
        let mut v = vec![0.0, -0.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN, -f32::NAN, f32::MAX, f32::MIN];
        v.extend([f32::MIN_POSITIVE, f32::from_bits(1), f32::from_bits(0x7F80_0001), f32::from_bits(0xFFBF_FFFF)]);
        for to in [bf16_to_f32 as fn(u16) -> f32, f16_to_f32] {
            for bits in 0..u16::MAX {
                let (a, b) = (to(bits), to(bits + 1));
                if a.is_finite() && b.is_finite() && a.is_sign_negative() == b.is_sign_negative() {
                    let mid = ((a as f64 + b as f64) / 2.0) as f32;
                    let m = mid.to_bits();
                    v.extend([a, mid, f32::from_bits(m.wrapping_add(1)), f32::from_bits(m.wrapping_sub(1))]);
                }
            }
        }
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        for _ in 0..extra {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            v.push(f32::from_bits(x as u32));
        }
        v
    }

    /// The first disagreements (empty: none) between the reference and the
    /// kernel crate on conversions of `values`, widening of every 16-bit
    /// pattern, and every operator on pairs drawn from `values`.
    pub fn disagreements(values: &[f32]) -> Vec<String> {
        let mut bad = Vec::new();
        let mut note = |m: String| {
            if bad.len() < 20 {
                bad.push(m);
            }
        };
        for &v in values {
            let (k, r) = (Bf16::from_f32(v).0, bf16_from_f32(v));
            if !same_half(BF16_FMT, k, r) {
                note(format!("bf16 of {v:e} ({:#010x}): kernel crate {k:#06x}, reference {r:#06x}", v.to_bits()));
            }
            let (k, r) = (F16::from_f32(v).0, f16_from_f32(v));
            if !same_half(F16_FMT, k, r) {
                note(format!("f16 of {v:e} ({:#010x}): kernel crate {k:#06x}, reference {r:#06x}", v.to_bits()));
            }
        }
        for bits in 0..=u16::MAX {
            let (k, r) = (Bf16(bits).to_f32(), bf16_to_f32(bits));
            if !same_f32(k, r) {
                note(format!("bf16 {bits:#06x} → f32: kernel crate {k:e}, reference {r:e}"));
            }
            let (k, r) = (F16(bits).to_f32(), f16_to_f32(bits));
            if !same_f32(k, r) {
                note(format!("f16 {bits:#06x} → f32: kernel crate {k:e}, reference {r:e}"));
            }
        }
        // Operators on pairs of neighbours in `values` (a stride keeps it quick).
        let ops = [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max];
        let step = (values.len() / 20_000).max(1);
        for w in values.windows(2).step_by(step) {
            let (a, b) = (w[0], w[1]);
            for op in ops {
                let (k, r) = (f32::apply(op, a, b), f32::reduce(op, a, b));
                if !same_f32(k, r) {
                    note(format!("f32 {op:?}({a:e}, {b:e}): kernel crate {k:e}, reference {r:e}"));
                }
                let (ha, hb) = (bf16_from_f32(a), bf16_from_f32(b));
                let (k, r) = (Bf16::apply(op, Bf16(ha), Bf16(hb)).0, bf16_reduce(op, ha, hb));
                if !same_half(BF16_FMT, k, r) {
                    note(format!("bf16 {op:?}({ha:#06x}, {hb:#06x}): kernel crate {k:#06x}, reference {r:#06x}"));
                }
                let (ha, hb) = (f16_from_f32(a), f16_from_f32(b));
                let (k, r) = (F16::apply(op, F16(ha), F16(hb)).0, f16_reduce(op, ha, hb));
                if !same_half(F16_FMT, k, r) {
                    note(format!("f16 {op:?}({ha:#06x}, {hb:#06x}): kernel crate {k:#06x}, reference {r:#06x}"));
                }
            }
            // Integers from the same bits (u128: every width below is a true narrowing).
            let (x, y) = (a.to_bits() as u128 | (b.to_bits() as u128) << 32, (b.to_bits() as u128) << 7 | 3);
            for op in [
                ReduceOp::Sum,
                ReduceOp::Prod,
                ReduceOp::Min,
                ReduceOp::Max,
                ReduceOp::And,
                ReduceOp::Or,
                ReduceOp::Xor,
            ] {
                macro_rules! ints {
                    ($($t:ty),*) => {$(
                        let (p, q) = (x as $t, y as $t);
                        if <$t as Reducible>::apply(op, p, q) != <$t as RefReduce>::reduce(op, p, q) {
                            note(format!("{} {op:?}({p}, {q}): kernel crate and reference differ", stringify!($t)));
                        }
                    )*};
                }
                ints!(u8, i8, u16, i16, u32, i32, u64, i64);
            }
        }
        bad
    }

    /// For the GPU tests' start: the reference's known values, and its
    /// agreement with the kernel crate (computed once per process).
    pub fn checked() -> Result<(), String> {
        static DONE: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
        DONE.get_or_init(|| {
            let mut bad = known_values();
            bad.extend(disagreements(&probe_values(20_000)));
            if bad.is_empty() {
                Ok(())
            } else {
                Err(format!("the reduction reference and the kernel crate disagree:\n{}", bad.join("\n")))
            }
        })
        .clone()
    }
}
