//! Reduction operators and the element types they apply to, shared by the
//! device collectives and host-side references: integers (all operators),
//! `f32`, `f64`, [`F16`], [`Bf16`] (sum, prod, min, max; arithmetic of the
//! half types in `f32`, rounded to nearest-even on store).

use bytemuck::{Pod, Zeroable};

/// A reduction operator (`NVSHMEM_*_reduce`).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    /// `+` (wrapping for integers)
    Sum = 0,
    /// `*` (wrapping for integers)
    Prod = 1,
    /// minimum
    Min = 2,
    /// maximum
    Max = 3,
    /// bitwise and (integers only)
    And = 4,
    /// bitwise or (integers only)
    Or = 5,
    /// bitwise xor (integers only)
    Xor = 6,
}

impl ReduceOp {
    /// The operator with this code (as passed through kernel parameters), if any.
    pub fn from_u32(code: u32) -> Option<ReduceOp> {
        Some(match code {
            0 => ReduceOp::Sum,
            1 => ReduceOp::Prod,
            2 => ReduceOp::Min,
            3 => ReduceOp::Max,
            4 => ReduceOp::And,
            5 => ReduceOp::Or,
            6 => ReduceOp::Xor,
            _ => return None,
        })
    }

    /// Whether the operator is bitwise (defined for integers only).
    pub fn is_bitwise(self) -> bool {
        matches!(self, ReduceOp::And | ReduceOp::Or | ReduceOp::Xor)
    }
}

/// Which element type a [`Reducible`] is: an engine that calls a function
/// per type (NVSHMEM's `nvshmem_float_sum_reduce`, …) picks it by this.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElemKind {
    /// `u8`
    U8,
    /// `i8`
    I8,
    /// `u16`
    U16,
    /// `i16`
    I16,
    /// `u32`
    U32,
    /// `i32`
    I32,
    /// `u64`
    U64,
    /// `i64`
    I64,
    /// `f32`
    F32,
    /// `f64`
    F64,
    /// [`F16`]
    F16,
    /// [`Bf16`]
    Bf16,
}

/// An element type of reductions. Implemented for exactly the types of
/// [`ElemKind`].
pub trait Reducible: Pod + PartialOrd {
    /// Whether the bitwise operators apply.
    const INTEGER: bool;
    /// Which type this is.
    const KIND: ElemKind;
    /// `a <op> b`; for a bitwise operator on a float type, `a` (callers check [`Reducible::INTEGER`]).
    fn apply(op: ReduceOp, a: Self, b: Self) -> Self;

    /// [`Reducible::apply`] on each element of 16 bytes, `a = a <op> b`
    /// element by element (the native engine's vector path). The half types
    /// sum pairs with one packed instruction on the GPU (see [`Bf16`]).
    #[inline(always)]
    fn apply_16(op: ReduceOp, a: &mut [u64; 2], b: &[u64; 2]) {
        apply_lanes::<Self>(op, a, b)
    }
}

/// [`Reducible::apply_16`] element by element.
#[inline(always)]
fn apply_lanes<T: Reducible>(op: ReduceOp, a: &mut [u64; 2], b: &[u64; 2]) {
    let lanes = 16 / core::mem::size_of::<T>();
    let (pa, pb) = (a.as_mut_ptr() as *mut T, b.as_ptr() as *const T);
    for l in 0..lanes {
        // SAFETY: the 16 bytes of `a` and of `b` hold `lanes` elements, 8-byte
        // aligned (every element type's alignment divides 8).
        unsafe { *pa.add(l) = T::apply(op, *pa.add(l), *pb.add(l)) };
    }
}

macro_rules! int_reducible {
    ($($t:ty => $k:ident),*) => {$(
        impl Reducible for $t {
            const INTEGER: bool = true;
            const KIND: ElemKind = ElemKind::$k;
            #[inline(always)]
            fn apply(op: ReduceOp, a: Self, b: Self) -> Self {
                match op {
                    ReduceOp::Sum => a.wrapping_add(b),
                    ReduceOp::Prod => a.wrapping_mul(b),
                    ReduceOp::Min => if b < a { b } else { a },
                    ReduceOp::Max => if b > a { b } else { a },
                    ReduceOp::And => a & b,
                    ReduceOp::Or => a | b,
                    ReduceOp::Xor => a ^ b,
                }
            }
        }
    )*};
}
int_reducible!(u8 => U8, i8 => I8, u16 => U16, i16 => I16, u32 => U32, i32 => I32, u64 => U64, i64 => I64);

macro_rules! float_reducible {
    ($t:ty, $k:ident, $to:expr, $from:expr $(, packed_sum = $packed:path)?) => {
        impl Reducible for $t {
            const INTEGER: bool = false;
            const KIND: ElemKind = ElemKind::$k;
            $(
            #[inline(always)]
            fn apply_16(op: ReduceOp, a: &mut [u64; 2], b: &[u64; 2]) {
                #[cfg(target_arch = "nvptx64")]
                if op == ReduceOp::Sum {
                    for w in a.iter_mut().zip(b) {
                        let (x, y) = (*w.0, *w.1);
                        let (lo, hi) = ($packed(x as u32, y as u32), $packed((x >> 32) as u32, (y >> 32) as u32));
                        *w.0 = (hi as u64) << 32 | lo as u64;
                    }
                    return;
                }
                apply_lanes::<Self>(op, a, b)
            }
            )?
            #[inline(always)]
            fn apply(op: ReduceOp, a: Self, b: Self) -> Self {
                let (x, y) = ($to(a), $to(b));
                let r = match op {
                    ReduceOp::Sum => x + y,
                    ReduceOp::Prod => x * y,
                    ReduceOp::Min => {
                        if y < x {
                            y
                        } else {
                            x
                        }
                    }
                    ReduceOp::Max => {
                        if y > x {
                            y
                        } else {
                            x
                        }
                    }
                    _ => return a,
                };
                $from(r)
            }
        }
    };
}
float_reducible!(f32, F32, |v: f32| v, |v: f32| v);
float_reducible!(f64, F64, |v: f64| v, |v: f64| v);
float_reducible!(F16, F16, F16::to_f32, F16::from_f32, packed_sum = f16x2_sum);
float_reducible!(Bf16, Bf16, Bf16::to_f32, Bf16::from_f32, packed_sum = bf16x2_sum);

// Packed sums of two pairs of half values, one rounding each: the same bits
// as widening to f32, adding and rounding to nearest-even (the f32 sum of two
// values of these formats is exact, or else one is below 2^-15 of the other
// and both ways give the larger), except that a NaN sum is the canonical NaN.
// Without them the vector path spent ~12 integer instructions per element on
// the rounding and was ALU-bound (bf16 all-reduce at 62% of the memory bound).

/// `a + b` on two packed bf16 pairs: `fma.rn.bf16x2 d, a, 1.0, b` (PTX ISA
/// 9.7.4.6 "fma" (half precision), sm_80+; `add.bf16x2` would need sm_90).
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn bf16x2_sum(a: u32, b: u32) -> u32 {
    let d: u32;
    // SAFETY: register-only arithmetic.
    unsafe {
        core::arch::asm!("fma.rn.bf16x2 {d}, {a}, {one}, {b};", d = out(reg32) d, a = in(reg32) a,
            one = in(reg32) 0x3F80_3F80u32, b = in(reg32) b, options(pure, nomem, nostack))
    };
    d
}

/// `a + b` on two packed f16 pairs: `add.rn.f16x2` (PTX ISA 9.7.4.1 "add"
/// (half precision), sm_53+).
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn f16x2_sum(a: u32, b: u32) -> u32 {
    let d: u32;
    // SAFETY: register-only arithmetic.
    unsafe {
        core::arch::asm!("add.rn.f16x2 {d}, {a}, {b};", d = out(reg32) d, a = in(reg32) a, b = in(reg32) b,
            options(pure, nomem, nostack))
    };
    d
}

/// IEEE 754 binary16, stored as its bits.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable, Default)]
pub struct F16(pub u16);

/// bfloat16 (the top half of an `f32`), stored as its bits.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable, Default)]
pub struct Bf16(pub u16);

impl PartialOrd for F16 {
    fn partial_cmp(&self, o: &Self) -> Option<core::cmp::Ordering> {
        self.to_f32().partial_cmp(&o.to_f32())
    }
}

impl PartialOrd for Bf16 {
    fn partial_cmp(&self, o: &Self) -> Option<core::cmp::Ordering> {
        self.to_f32().partial_cmp(&o.to_f32())
    }
}

impl Bf16 {
    /// Exact widening.
    #[inline(always)]
    pub fn to_f32(self) -> f32 {
        f32::from_bits((self.0 as u32) << 16)
    }

    /// Rounds to nearest, ties to even; NaN stays NaN.
    #[inline(always)]
    pub fn from_f32(v: f32) -> Bf16 {
        let x = v.to_bits();
        if v.is_nan() {
            return Bf16(((x >> 16) as u16) | 0x0040);
        }
        let bias = 0x7FFF + ((x >> 16) & 1);
        Bf16((x.wrapping_add(bias) >> 16) as u16)
    }
}

impl F16 {
    /// Exact widening.
    #[inline(always)]
    pub fn to_f32(self) -> f32 {
        let h = self.0 as u32;
        let sign = (h & 0x8000) << 16;
        let exp = (h >> 10) & 0x1F;
        let mant = h & 0x3FF;
        let bits = match exp {
            0 if mant == 0 => sign,
            0 => {
                // Subnormal: mant × 2^-24, exact in f32.
                let v = mant as f32 * (1.0 / 16_777_216.0);
                return if sign != 0 { -v } else { v };
            }
            31 => sign | 0x7F80_0000 | (mant << 13),
            _ => sign | ((exp + 112) << 23) | (mant << 13),
        };
        f32::from_bits(bits)
    }

    /// Rounds to nearest, ties to even; overflow goes to infinity, NaN stays NaN.
    #[inline(always)]
    pub fn from_f32(v: f32) -> F16 {
        let x = v.to_bits();
        let sign = ((x >> 16) & 0x8000) as u16;
        let exp = ((x >> 23) & 0xFF) as i32;
        let mant = x & 0x7F_FFFF;
        if exp == 255 {
            return F16(sign | 0x7C00 | if mant != 0 { 0x200 } else { 0 });
        }
        let e = exp - 127 + 15;
        if e >= 31 {
            return F16(sign | 0x7C00);
        }
        if e <= 0 {
            if e < -10 {
                return F16(sign);
            }
            let m = mant | 0x80_0000;
            let shift = (14 - e) as u32;
            let half = 1u32 << (shift - 1);
            let rem = m & ((1u32 << shift) - 1);
            let mut r = m >> shift;
            if rem > half || (rem == half && r & 1 == 1) {
                r += 1;
            }
            return F16(sign | r as u16);
        }
        let mut r = ((e as u32) << 10) | (mant >> 13);
        let rem = mant & 0x1FFF;
        if rem > 0x1000 || (rem == 0x1000 && r & 1 == 1) {
            r += 1; // a carry into the exponent is the right result (up to infinity)
        }
        F16(sign | r as u16)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_conversions_round_trip_and_round_to_even() {
        for bits in 0..=u16::MAX {
            let h = F16(bits);
            let f = h.to_f32();
            if f.is_nan() {
                assert!(F16::from_f32(f).to_f32().is_nan());
            } else {
                assert_eq!(F16::from_f32(f), h, "f16 {bits:#06x} -> {f}");
            }
            let b = Bf16(bits);
            let g = b.to_f32();
            if g.is_nan() {
                assert!(Bf16::from_f32(g).to_f32().is_nan());
            } else {
                assert_eq!(Bf16::from_f32(g), b);
            }
        }
        assert_eq!(F16::from_f32(1.0).0, 0x3C00);
        assert_eq!(F16::from_f32(65504.0).0, 0x7BFF);
        assert_eq!(F16::from_f32(65520.0).0, 0x7C00); // rounds up to infinity
        assert_eq!(F16::from_f32(1.0 + 1.0 / 2048.0).0, 0x3C00); // tie, to even
        assert_eq!(F16::from_f32(1.0 + 3.0 / 2048.0).0, 0x3C02); // tie, to even (up)
        assert_eq!(F16::from_f32(5.960_464_5e-8).0, 0x0001); // smallest subnormal
        assert_eq!(Bf16::from_f32(1.0 + 1.0 / 256.0).0, 0x3F80); // tie, to even
        assert_eq!(Bf16::from_f32(1.0 + 3.0 / 256.0).0, 0x3F82);
    }

    #[test]
    fn operators() {
        assert_eq!(u8::apply(ReduceOp::Sum, 200, 100), 44);
        assert_eq!(i32::apply(ReduceOp::Min, -3, 2), -3);
        assert_eq!(u64::apply(ReduceOp::Xor, 0b1100, 0b1010), 0b0110);
        assert_eq!(f32::apply(ReduceOp::Max, 1.5, -2.0), 1.5);
        assert_eq!(Bf16::apply(ReduceOp::Sum, Bf16::from_f32(1.0), Bf16::from_f32(2.0)).to_f32(), 3.0);
        assert_eq!(F16::apply(ReduceOp::Prod, F16::from_f32(1.5), F16::from_f32(2.0)).to_f32(), 3.0);
    }
}
