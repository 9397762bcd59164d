//! [`Rev`], the reverse-mode scalar: a value and the index of its node on
//! the calling thread's tape (`tape.rs`), with every operation of
//! ad_trait's [`AD`] trait, so that model code generic over
//! [`crate::scalar::Real`] runs on it unchanged.
//!
//! Each operation records its operands and its local partial derivatives,
//! the same ones forward mode (`adfn`) uses — including its conventions
//! at the edges (√ at 0, `powf` at a zero base, a zero derivative for
//! `floor` and friends) — so a reverse sweep gives forward mode's
//! derivatives. An operation on constants records nothing.

use super::tape;
use ad_trait::{AD, ADNumMode, ADNumType, F64};
use approx::{AbsDiffEq, RelativeEq, UlpsEq};
use nalgebra::{Dim, Matrix, RawStorageMut};
use ndarray::{ArrayBase, Dimension, OwnedRepr, ScalarOperand};
use num_traits::{Bounded, FromPrimitive, Num, One, Signed, Zero};
use simba::scalar::{ComplexField, Field, RealField, SubsetOf};
use simba::simd::{PrimitiveSimdValue, SimdValue};
use std::cmp::Ordering;
use std::fmt;
use std::ops::{
    Add, AddAssign, Div, DivAssign, Mul, MulAssign, Neg, Rem, RemAssign, Sub, SubAssign,
};

/// A reverse-mode scalar: its value, and its node on the thread's tape
/// (none for a constant).
#[derive(Clone, Copy, Debug)]
pub struct Rev {
    v: f64,
    node: Option<usize>,
}

impl Rev {
    /// A value on the tape at `node`.
    pub(super) fn on_tape(v: f64, node: usize) -> Rev {
        Rev {
            v,
            node: Some(node),
        }
    }

    /// The node on the tape, `None` for a constant.
    pub fn node(&self) -> Option<usize> {
        self.node
    }

    /// Whether the value is a constant (carries no derivative).
    pub fn is_constant(&self) -> bool {
        self.node.is_none()
    }

    /// f(self) with value `v` and derivative `d`.
    #[inline]
    fn unary(self, v: f64, d: f64) -> Rev {
        match self.node {
            None => Rev::constant(v),
            Some(a) => tape::push(v, Some((a, d)), None),
        }
    }

    /// f(self, other) with value `v` and partial derivatives `da`, `db`.
    #[inline]
    fn binary(self, other: Rev, v: f64, da: f64, db: f64) -> Rev {
        match (self.node, other.node) {
            (None, None) => Rev::constant(v),
            (a, b) => tape::push(v, a.map(|a| (a, da)), b.map(|b| (b, db))),
        }
    }
}

impl Default for Rev {
    fn default() -> Self {
        Rev::constant(0.0)
    }
}

impl serde::Serialize for Rev {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.v)
    }
}

impl<'de> serde::Deserialize<'de> for Rev {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        f64::deserialize(d).map(Rev::constant)
    }
}

impl AD for Rev {
    fn constant(constant: f64) -> Self {
        Rev {
            v: constant,
            node: None,
        }
    }
    fn to_constant(&self) -> f64 {
        self.v
    }
    /// Reported as forward mode: the trait's reverse-mode variants exist
    /// only with ad_trait's own tape, and model code only tells `f64`
    /// from the rest.
    fn ad_num_mode() -> ADNumMode {
        ADNumMode::ForwardAD
    }
    fn ad_num_type() -> ADNumType {
        ADNumType::ADFN
    }
    fn add_scalar(arg1: f64, arg2: Self) -> Self {
        Self::constant(arg1) + arg2
    }
    fn sub_l_scalar(arg1: f64, arg2: Self) -> Self {
        Self::constant(arg1) - arg2
    }
    fn sub_r_scalar(arg1: Self, arg2: f64) -> Self {
        arg1 - Self::constant(arg2)
    }
    fn mul_scalar(arg1: f64, arg2: Self) -> Self {
        Self::constant(arg1) * arg2
    }
    fn div_l_scalar(arg1: f64, arg2: Self) -> Self {
        Self::constant(arg1) / arg2
    }
    fn div_r_scalar(arg1: Self, arg2: f64) -> Self {
        arg1 / Self::constant(arg2)
    }
    fn rem_l_scalar(arg1: f64, arg2: Self) -> Self {
        Self::constant(arg1) % arg2
    }
    fn rem_r_scalar(arg1: Self, arg2: f64) -> Self {
        arg1 % Self::constant(arg2)
    }
    fn mul_by_nalgebra_matrix<
        R: Clone + Dim,
        C: Clone + Dim,
        S: Clone + RawStorageMut<Self, R, C>,
    >(
        &self,
        mut other: Matrix<Self, R, C, S>,
    ) -> Matrix<Self, R, C, S> {
        other.iter_mut().for_each(|e| *e *= *self);
        other
    }
    fn mul_by_nalgebra_matrix_ref<
        'a,
        R: Clone + Dim,
        C: Clone + Dim,
        S: Clone + RawStorageMut<Self, R, C>,
    >(
        &'a self,
        other: &'a Matrix<Self, R, C, S>,
    ) -> Matrix<Self, R, C, S> {
        self.mul_by_nalgebra_matrix(other.clone())
    }
    fn mul_by_ndarray_matrix_ref<D: Dimension>(
        &self,
        other: &ArrayBase<OwnedRepr<Self>, D>,
    ) -> ArrayBase<OwnedRepr<Self>, D> {
        other.mapv(|e| e * *self)
    }
}

impl ScalarOperand for Rev {}

/// `op` and `op=` with another [`Rev`] and with an [`F64`] (a constant).
macro_rules! arithmetic {
    ($tr:ident, $f:ident, $tra:ident, $fa:ident, |$a:ident, $b:ident| $body:expr) => {
        impl $tr<Rev> for Rev {
            type Output = Rev;
            #[inline]
            fn $f(self, rhs: Rev) -> Rev {
                let ($a, $b) = (self, rhs);
                $body
            }
        }
        impl $tra<Rev> for Rev {
            #[inline]
            fn $fa(&mut self, rhs: Rev) {
                *self = $tr::$f(*self, rhs);
            }
        }
        impl $tr<F64> for Rev {
            type Output = Rev;
            #[inline]
            fn $f(self, rhs: F64) -> Rev {
                $tr::$f(self, Rev::constant(rhs.0))
            }
        }
        impl $tra<F64> for Rev {
            #[inline]
            fn $fa(&mut self, rhs: F64) {
                *self = $tr::$f(*self, Rev::constant(rhs.0));
            }
        }
    };
}

arithmetic!(Add, add, AddAssign, add_assign, |a, b| a.binary(
    b,
    a.v + b.v,
    1.0,
    1.0
));
arithmetic!(Sub, sub, SubAssign, sub_assign, |a, b| a.binary(
    b,
    a.v - b.v,
    1.0,
    -1.0
));
arithmetic!(Mul, mul, MulAssign, mul_assign, |a, b| a.binary(
    b,
    a.v * b.v,
    b.v,
    a.v
));
arithmetic!(Div, div, DivAssign, div_assign, |a, b| a.binary(
    b,
    a.v / b.v,
    1.0 / b.v,
    -a.v / (b.v * b.v)
));
arithmetic!(Rem, rem, RemAssign, rem_assign, |a, b| a
    - ComplexField::floor(a / b) * b);

impl Neg for Rev {
    type Output = Rev;
    #[inline]
    fn neg(self) -> Rev {
        self.unary(-self.v, -1.0)
    }
}

impl PartialEq for Rev {
    fn eq(&self, other: &Self) -> bool {
        self.v == other.v
    }
}

impl PartialOrd for Rev {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        self.v.partial_cmp(&other.v)
    }
}

impl fmt::Display for Rev {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.v)
    }
}

impl From<f64> for Rev {
    fn from(v: f64) -> Self {
        Rev::constant(v)
    }
}

impl From<f32> for Rev {
    fn from(v: f32) -> Self {
        Rev::constant(v as f64)
    }
}

impl From<Rev> for f64 {
    fn from(r: Rev) -> f64 {
        r.v
    }
}

impl From<Rev> for f32 {
    fn from(r: Rev) -> f32 {
        r.v as f32
    }
}

impl AbsDiffEq for Rev {
    type Epsilon = Self;
    fn default_epsilon() -> Self {
        Self::constant(1e-9)
    }
    fn abs_diff_eq(&self, other: &Self, epsilon: Self) -> bool {
        (self.v - other.v).abs() < epsilon.v
    }
}

impl RelativeEq for Rev {
    fn default_max_relative() -> Self {
        Self::constant(1e-9)
    }
    fn relative_eq(&self, other: &Self, epsilon: Self, _max_relative: Self) -> bool {
        self.abs_diff_eq(other, epsilon)
    }
}

impl UlpsEq for Rev {
    fn default_max_ulps() -> u32 {
        4
    }
    fn ulps_eq(&self, other: &Self, epsilon: Self, max_ulps: u32) -> bool {
        self.v.ulps_eq(&other.v, epsilon.v, max_ulps)
    }
}

impl SimdValue for Rev {
    const LANES: usize = 1;
    type Element = Self;
    type SimdBool = bool;
    fn splat(val: Self) -> Self {
        val
    }
    fn extract(&self, _: usize) -> Self {
        *self
    }
    unsafe fn extract_unchecked(&self, _: usize) -> Self {
        *self
    }
    fn replace(&mut self, _: usize, val: Self) {
        *self = val
    }
    unsafe fn replace_unchecked(&mut self, _: usize, val: Self) {
        *self = val
    }
    fn select(self, cond: bool, other: Self) -> Self {
        if cond { self } else { other }
    }
}

impl Zero for Rev {
    fn zero() -> Self {
        Self::constant(0.0)
    }
    fn is_zero(&self) -> bool {
        self.v == 0.0
    }
}

impl One for Rev {
    fn one() -> Self {
        Self::constant(1.0)
    }
}

impl Num for Rev {
    type FromStrRadixErr = num_traits::ParseFloatError;
    fn from_str_radix(s: &str, radix: u32) -> Result<Self, Self::FromStrRadixErr> {
        f64::from_str_radix(s, radix).map(Self::constant)
    }
}

impl Signed for Rev {
    fn abs(&self) -> Self {
        self.unary(self.v.abs(), if self.v >= 0.0 { 1.0 } else { -1.0 })
    }
    fn abs_sub(&self, other: &Self) -> Self {
        if *self <= *other {
            Self::constant(0.0)
        } else {
            *self - *other
        }
    }
    fn signum(&self) -> Self {
        Self::constant(self.v.signum())
    }
    fn is_positive(&self) -> bool {
        self.v > 0.0
    }
    fn is_negative(&self) -> bool {
        self.v < 0.0
    }
}

impl FromPrimitive for Rev {
    fn from_i64(n: i64) -> Option<Self> {
        Some(Self::constant(n as f64))
    }
    fn from_u64(n: u64) -> Option<Self> {
        Some(Self::constant(n as f64))
    }
}

impl Bounded for Rev {
    fn min_value() -> Self {
        Self::constant(f64::MIN)
    }
    fn max_value() -> Self {
        Self::constant(f64::MAX)
    }
}

/// Constants of [`RealField`].
macro_rules! constants {
    ($($name:ident = $v:expr),* $(,)?) => {
        $(fn $name() -> Self { Self::constant($v) })*
    };
}

impl RealField for Rev {
    fn is_sign_positive(&self) -> bool {
        self.is_positive()
    }
    fn is_sign_negative(&self) -> bool {
        self.is_negative()
    }
    fn copysign(self, sign: Self) -> Self {
        if sign.is_positive() {
            ComplexField::abs(self)
        } else {
            -ComplexField::abs(self)
        }
    }
    fn max(self, other: Self) -> Self {
        if self >= other { self } else { other }
    }
    fn min(self, other: Self) -> Self {
        if self <= other { self } else { other }
    }
    fn clamp(self, min: Self, max: Self) -> Self {
        RealField::min(RealField::max(self, min), max)
    }
    fn atan2(self, other: Self) -> Self {
        let r = self.v * self.v + other.v * other.v;
        self.binary(other, self.v.atan2(other.v), other.v / r, -self.v / r)
    }
    fn min_value() -> Option<Self> {
        Some(Self::constant(f64::MIN))
    }
    fn max_value() -> Option<Self> {
        Some(Self::constant(f64::MAX))
    }
    constants! {
        pi = std::f64::consts::PI,
        two_pi = 2.0 * std::f64::consts::PI,
        frac_pi_2 = std::f64::consts::FRAC_PI_2,
        frac_pi_3 = std::f64::consts::FRAC_PI_3,
        frac_pi_4 = std::f64::consts::FRAC_PI_4,
        frac_pi_6 = std::f64::consts::FRAC_PI_6,
        frac_pi_8 = std::f64::consts::FRAC_PI_8,
        frac_1_pi = std::f64::consts::FRAC_1_PI,
        frac_2_pi = std::f64::consts::FRAC_2_PI,
        frac_2_sqrt_pi = std::f64::consts::FRAC_2_SQRT_PI,
        e = std::f64::consts::E,
        log2_e = std::f64::consts::LOG2_E,
        log10_e = std::f64::consts::LOG10_E,
        ln_2 = std::f64::consts::LN_2,
        ln_10 = std::f64::consts::LN_10,
    }
}

/// Element functions of one argument: `name(x) = value`, with derivative
/// `deriv` (which may read the value as `v`).
macro_rules! unary {
    ($($name:ident: |$x:ident, $v:ident| $value:expr, $deriv:expr;)*) => {
        $(
            #[inline]
            fn $name(self) -> Self {
                let $x = self.v;
                let $v = $value;
                self.unary($v, $deriv)
            }
        )*
    };
}

impl ComplexField for Rev {
    type RealField = Self;
    fn from_real(re: Self) -> Self {
        re
    }
    fn real(self) -> Self {
        self
    }
    fn imaginary(self) -> Self {
        Self::zero()
    }
    fn modulus(self) -> Self {
        ComplexField::abs(self)
    }
    fn modulus_squared(self) -> Self {
        self * self
    }
    fn argument(self) -> Self {
        Self::constant(if self.v < 0.0 {
            std::f64::consts::PI
        } else {
            0.0
        })
    }
    fn norm1(self) -> Self {
        ComplexField::abs(self)
    }
    fn scale(self, factor: Self) -> Self {
        self * factor
    }
    fn unscale(self, factor: Self) -> Self {
        self / factor
    }
    fn floor(self) -> Self {
        Self::constant(self.v.floor())
    }
    fn ceil(self) -> Self {
        Self::constant(self.v.ceil())
    }
    fn round(self) -> Self {
        Self::constant(self.v.round())
    }
    fn trunc(self) -> Self {
        Self::constant(self.v.trunc())
    }
    fn fract(self) -> Self {
        self.unary(self.v.fract(), 1.0)
    }
    fn mul_add(self, a: Self, b: Self) -> Self {
        self * a + b
    }
    fn abs(self) -> Self {
        Signed::abs(&self)
    }
    fn hypot(self, other: Self) -> Self {
        ComplexField::sqrt(self * self + other * other)
    }
    fn recip(self) -> Self {
        Self::one() / self
    }
    fn conjugate(self) -> Self {
        self
    }
    fn sin_cos(self) -> (Self, Self) {
        (ComplexField::sin(self), ComplexField::cos(self))
    }
    unary! {
        sin: |x, _v| x.sin(), x.cos();
        cos: |x, _v| x.cos(), -x.sin();
        tan: |x, _v| x.tan(), 1.0 / (x.cos() * x.cos());
        asin: |x, _v| x.asin(), 1.0 / (1.0 - x * x).sqrt();
        acos: |x, _v| x.acos(), -1.0 / (1.0 - x * x).sqrt();
        atan: |x, _v| x.atan(), 1.0 / (x * x + 1.0);
        sinh: |x, _v| x.sinh(), x.cosh();
        cosh: |x, _v| x.cosh(), x.sinh();
        tanh: |x, _v| x.tanh(), 1.0 / (x.cosh() * x.cosh());
        asinh: |x, _v| x.asinh(), 1.0 / (x * x + 1.0).sqrt();
        acosh: |x, _v| x.acosh(), 1.0 / (x * x - 1.0).sqrt();
        atanh: |x, _v| x.atanh(), 1.0 / (1.0 - x * x);
        ln: |x, _v| x.ln(), 1.0 / x;
        sqrt: |x, v| x.sqrt(), 1.0 / (2.0 * if x == 0.0 { 0.0001f64.sqrt() } else { v });
        exp: |x, v| x.exp(), v;
    }
    fn log(self, base: Self) -> Self {
        let (x, b) = (self.v, base.v);
        let (lb, lx) = (b.ln(), x.ln());
        self.binary(base, x.log(b), 1.0 / (x * lb), -lx / (b * lb * lb))
    }
    fn log2(self) -> Self {
        ComplexField::log(self, Self::constant(2.0))
    }
    fn log10(self) -> Self {
        ComplexField::log(self, Self::constant(10.0))
    }
    fn ln_1p(self) -> Self {
        ComplexField::ln(Self::one() + self)
    }
    fn exp2(self) -> Self {
        ComplexField::powf(Self::constant(2.0), self)
    }
    fn exp_m1(self) -> Self {
        ComplexField::exp(self) - Self::one()
    }
    fn powi(self, n: i32) -> Self {
        ComplexField::powf(self, Self::constant(n as f64))
    }
    fn powf(self, n: Self) -> Self {
        let (x, p) = (self.v, n.v);
        let v = x.powf(p);
        let base = if x == 0.0 { 0.0001 } else { x };
        self.binary(n, v, p * x.powf(p - 1.0), v * base.ln())
    }
    fn powc(self, n: Self) -> Self {
        ComplexField::powf(self, n)
    }
    fn cbrt(self) -> Self {
        ComplexField::powf(self, Self::constant(1.0 / 3.0))
    }
    fn is_finite(&self) -> bool {
        self.v.is_finite()
    }
    fn try_sqrt(self) -> Option<Self> {
        Some(ComplexField::sqrt(self))
    }
}

impl Field for Rev {}
impl PrimitiveSimdValue for Rev {}

impl SubsetOf<Rev> for Rev {
    fn to_superset(&self) -> Rev {
        *self
    }
    fn from_superset_unchecked(element: &Rev) -> Self {
        *element
    }
    fn is_in_subset(_: &Rev) -> bool {
        true
    }
}

/// Primitive numbers as constants of [`Rev`].
macro_rules! subset {
    ($($t:ty),*) => {
        $(impl SubsetOf<Rev> for $t {
            fn to_superset(&self) -> Rev {
                Rev::constant(*self as f64)
            }
            fn from_superset_unchecked(element: &Rev) -> Self {
                element.v as $t
            }
            fn is_in_subset(_: &Rev) -> bool {
                false
            }
        })*
    };
}

subset!(f32, f64, u32, u64, u128, i32, i64, i128);
