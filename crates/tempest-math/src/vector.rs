//! Element-wise functions over slices, the inner loops of kernel blocks.
//!
//! The exponential is written as plain arithmetic on arrays (Cody–Waite
//! range reduction, a polynomial, the power of two built from its bits)
//! so that the compiler vectorises it, and compiled three times: for the
//! baseline x86-64 target, with AVX2 and FMA and with AVX-512, picked at
//! run time. The AVX2 and AVX-512 versions fuse the same multiply–adds in
//! the same order, so they give the same bits; the baseline version
//! (processors without FMA) does not fuse them and may differ from them in
//! the last bits, within the same tested error against the library's.

/// Σₑ f(e) over e in 0..n with eight partial sums (entry e into sum
/// e mod 8) added in a fixed order at the end: the additions no longer
/// wait on one another, and the result depends only on n and f, not on
/// the machine or the number of threads.
#[inline(always)]
pub fn sum_by(n: usize, f: impl Fn(usize) -> f64) -> f64 {
    let mut acc = [0.0f64; 8];
    let full = n / 8 * 8;
    let mut e = 0;
    while e < full {
        for (k, a) in acc.iter_mut().enumerate() {
            *a += f(e + k);
        }
        e += 8;
    }
    if full < n {
        let mut t = [0.0f64; 8];
        for (k, v) in t.iter_mut().enumerate().take(n - full) {
            *v = f(full + k);
        }
        add_lanes(&mut acc, &t);
    }
    fold_lanes(&acc)
}

/// Adds a chunk of eight terms to the eight partial sums: the last,
/// short chunk of a sum is padded with zeros and added whole, so that
/// every addition to the partial sums is the same eight-lane one and
/// the loops vectorise (adding 0 leaves a sum as it was, but for turning
/// −0 into +0).
#[inline(always)]
fn add_lanes(acc: &mut [f64; 8], t: &[f64; 8]) {
    for k in 0..8 {
        acc[k] += t[k];
    }
}

/// The eight partial sums added in the fixed order
/// ((s₀ + s₄) + (s₂ + s₆)) + ((s₁ + s₅) + (s₃ + s₇)).
#[inline(always)]
fn fold_lanes(acc: &[f64; 8]) -> f64 {
    let mut h = [0.0f64; 4];
    for k in 0..4 {
        h[k] = acc[k] + acc[k + 4];
    }
    (h[0] + h[2]) + (h[1] + h[3])
}

/// Σₑ f(aₑ, bₑ, cₑ) over parallel slices (b and c at least as long as
/// a), with the partial sums of [`sum_by`] (entry e into sum e mod 8, the
/// same bits for the same terms) but over fixed chunks of eight, so the
/// loop has no bounds checks and a branch-free `f` vectorises. A guard in
/// `f` against infinity should compare with [`opaque_inf`].
#[inline(always)]
pub fn sum_zip3(a: &[f64], b: &[f64], c: &[f64], f: impl Fn(f64, f64, f64) -> f64) -> f64 {
    let n = a.len();
    let (b, c) = (&b[..n], &c[..n]);
    let mut acc = [0.0f64; 8];
    let (ac, ar) = a.as_chunks::<8>();
    let (bc, br) = b.as_chunks::<8>();
    let (cc, cr) = c.as_chunks::<8>();
    for ((x, y), z) in ac.iter().zip(bc).zip(cc) {
        for k in 0..8 {
            acc[k] += f(x[k], y[k], z[k]);
        }
    }
    if !ar.is_empty() {
        let mut t = [0.0f64; 8];
        for (v, ((x, y), z)) in t.iter_mut().zip(ar.iter().zip(br).zip(cr)) {
            *v = f(*x, *y, *z);
        }
        add_lanes(&mut acc, &t);
    }
    fold_lanes(&acc)
}

/// Σₑ aₑ bₑ with the partial sums of [`sum_by`] (see [`sum_zip3`]).
#[inline(always)]
pub fn dot_by(a: &[f64], b: &[f64]) -> f64 {
    sum_zip3(a, b, b, |x, y, _| x * y)
}

/// +∞ as a value the optimiser cannot see: take it once before a loop
/// and guard with `(x > 0.0) & (x < inf)`. Against the constant, such a
/// guard is rewritten as a test of x's bits, lane by lane in integer
/// registers, and the loop around it no longer vectorises; against this
/// it stays two vector comparisons (NaN fails both, as before).
#[inline(always)]
pub fn opaque_inf() -> f64 {
    std::hint::black_box(f64::INFINITY)
}

/// Defines `pub fn $name`, which runs `$portable` compiled with AVX-512F
/// or AVX2 and FMA (`$avx512`, `$avx2`) where the processor has them, as
/// found at run time, and as it is elsewhere. `$portable` must be
/// `#[inline(always)]` so that each version is compiled for its target;
/// its const parameter says whether it may fuse multiply–adds ([`fmadd`]),
/// true only in the versions for processors that have them.
macro_rules! multiversion {
    ($(#[$m:meta])* pub fn $name:ident($($arg:ident: $ty:ty),*) => $portable:ident, $avx2:ident, $avx512:ident($($call:ident),*)) => {
        $(#[$m])*
        pub fn $name($($arg: $ty),*) {
            use crate::simd::{Isa, isa};
            match isa() {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: `isa` found AVX-512F on this processor.
                Isa::Avx512 => unsafe { $avx512($($call),*) },
                #[cfg(target_arch = "x86_64")]
                // SAFETY: `isa` found AVX2 and FMA on this processor.
                Isa::Avx2 => unsafe { $avx2($($call),*) },
                Isa::Baseline => $portable::<false>($($call),*),
            }
        }

        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx512f,fma")]
        fn $avx512($($arg: $ty),*) {
            $portable::<true>($($call),*);
        }

        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2,fma")]
        fn $avx2($($arg: $ty),*) {
            $portable::<true>($($call),*);
        }
    };
}

/// a·b + c: one fused multiply–add (one rounding) when `FUSED`, which
/// the vectorised functions set only where the processor has the
/// instruction; a product and a sum otherwise.
#[inline(always)]
fn fmadd<const FUSED: bool>(a: f64, b: f64, c: f64) -> f64 {
    if FUSED { a.mul_add(b, c) } else { a * b + c }
}

/// eˣ, with 0 for arguments below −708 (where eˣ < 3.3e-308 is at most
/// a subnormal number), without the slow underflow path of the library
/// exponential, which far-apart inputs of a short-range kernel hit for
/// most entries.
#[inline]
pub fn exp_or_zero(x: f64) -> f64 {
    // The argument is clamped before the call (not only selected after
    // it): the compiler may evaluate both sides of the choice.
    // NaN must stay NaN: `max` would replace it with −708.
    let e = x.max(-708.0).exp();
    if x < -708.0 {
        0.0
    } else if x.is_nan() {
        x
    } else {
        e
    }
}

/// Whether lo ≤ x ≤ hi (false for NaN).
#[inline(always)]
fn within(x: f64, lo: f64, hi: f64) -> bool {
    (lo..=hi).contains(&x)
}

/// x clamped into [lo, hi], with NaN going to lo (unlike `f64::clamp`,
/// which keeps NaN): the branch-free kernels then see a number whatever
/// the input, and the entries outside are put right afterwards.
#[inline(always)]
fn clamp_finite(x: f64, lo: f64, hi: f64) -> f64 {
    x.max(lo).min(hi)
}

/// Each x becomes `kernel(x)`, then `outside(x)` where `special(x)`, 64 at
/// a time: the branch-free kernel runs over every entry (it must give a
/// number for any argument, clamping it into its range), so the loop
/// vectorises, and the few special entries are put right afterwards.
#[inline(always)]
fn map_guarded(
    xs: &mut [f64],
    kernel: impl Fn(f64) -> f64,
    special: impl Fn(f64) -> bool,
    outside: impl Fn(f64) -> f64,
) {
    const CHUNK: usize = 64;
    for c in xs.chunks_mut(CHUNK) {
        let mut orig = [0.0; CHUNK];
        orig[..c.len()].copy_from_slice(c);
        let mut any = false;
        for x in c.iter_mut() {
            any |= special(*x);
            *x = kernel(*x);
        }
        if any {
            for (x, &v) in c.iter_mut().zip(&orig) {
                if special(v) {
                    *x = outside(v);
                }
            }
        }
    }
}

multiversion! {
    /// eˣ in place, within two units in the last place of the library's
    /// (`tests::the_exponential_matches_the_library_one`) for arguments in
    /// [−708, 708]; 0 below −708, ∞ above 709.8 and NaN for NaN (the
    /// library's own outside [−708, 708]). Stationary kernels and `exp` in
    /// model-file kernels spend most of their time here.
    pub fn exp_in_place(xs: &mut [f64]) => exp_portable, exp_avx2, exp_avx512(xs)
}

/// [`exp_in_place`] for any target (inlined into each compiled version):
/// the branch-free kernel over every entry, 0 chosen below −708 in the
/// same pass (short-range kernels put most entries there), and the
/// library's exponential afterwards for the rare entries above 708 or NaN.
#[inline(always)]
fn exp_portable<const FUSED: bool>(xs: &mut [f64]) {
    map_guarded(
        xs,
        |v| {
            let e = exp_reduced::<FUSED>(clamp_finite(v, -708.0, 708.0));
            if v < -708.0 { 0.0 } else { e }
        },
        |v| v.is_nan() || v > 708.0,
        f64::exp,
    );
}

/// eˣ for x in [−708, 708], branch-free: x = k ln 2 + r with |r| ≤ ½ ln 2,
/// eʳ by its Taylor polynomial to r¹³ (remainder below 10⁻¹⁷ relative),
/// times 2ᵏ formed from its bits (a normal number throughout the range).
#[inline(always)]
fn exp_reduced<const FUSED: bool>(x: f64) -> f64 {
    const LOG2_E: f64 = std::f64::consts::LOG2_E;
    // 1.5·2⁵²: adding it rounds to an integer held in the low bits.
    const SHIFT: f64 = 6_755_399_441_055_744.0;
    // ln 2 split so that k·LN2_HI is exact for |k| < 2¹¹.
    const LN2_HI: f64 = 0.6931471803691238;
    const LN2_LO: f64 = 1.9082149292705877e-10;
    let fma = fmadd::<FUSED>;
    let t = fma(x, LOG2_E, SHIFT);
    let kf = t - SHIFT;
    let k = (t.to_bits() as i64).wrapping_sub(SHIFT.to_bits() as i64);
    let r = fma(-kf, LN2_LO, fma(-kf, LN2_HI, x));
    // q(r) = Σᵢ rⁱ/(i + 2)! for i ≤ 11, by Estrin's scheme (a short
    // dependency chain, so the vector unit stays busy).
    const C: [f64; 12] = [
        1.0 / 2.0,
        1.0 / 6.0,
        1.0 / 24.0,
        1.0 / 120.0,
        1.0 / 720.0,
        1.0 / 5040.0,
        1.0 / 40320.0,
        1.0 / 362_880.0,
        1.0 / 3_628_800.0,
        1.0 / 39_916_800.0,
        1.0 / 479_001_600.0,
        1.0 / 6_227_020_800.0,
    ];
    let r2 = r * r;
    let r4 = r2 * r2;
    let r8 = r4 * r4;
    let b0 = fma(fma(C[3], r, C[2]), r2, fma(C[1], r, C[0]));
    let b1 = fma(fma(C[7], r, C[6]), r2, fma(C[5], r, C[4]));
    let b2 = fma(fma(C[11], r, C[10]), r2, fma(C[9], r, C[8]));
    let q = fma(b2, r8, fma(b1, r4, b0));
    let z = fma(r2, q, r);
    let two_k = f64::from_bits(((k + 1023) as u64) << 52);
    (1.0 + z) * two_k
}

multiversion! {
    /// ln x in place, within one unit in the last place of the library's
    /// (`tests::the_logarithm_matches_the_library_one`) for positive normal
    /// finite x, vectorised like [`exp_in_place`]; the library's own for 0,
    /// negatives, subnormals, ∞ and NaN.
    pub fn ln_in_place(xs: &mut [f64]) => ln_portable, ln_avx2, ln_avx512(xs)
}

/// [`ln_in_place`] for any target (inlined into each compiled version).
#[inline(always)]
fn ln_portable<const FUSED: bool>(xs: &mut [f64]) {
    let (lo, hi) = (f64::MIN_POSITIVE, f64::MAX);
    map_guarded(
        xs,
        |x| ln_normal::<FUSED>(clamp_finite(x, lo, hi)),
        |x| !within(x, lo, hi),
        f64::ln,
    );
}

/// ln x for a positive normal finite x, branch-free: x = 2ᵏ(1 + f) with
/// 1 + f in [√2/2, √2), and ln(1 + f) by the classic fdlibm polynomial in
/// s = f/(2 + f).
#[inline(always)]
fn ln_normal<const FUSED: bool>(x: f64) -> f64 {
    const LN2_HI: f64 = 0.6931471803691238;
    const LN2_LO: f64 = 1.9082149292705877e-10;
    const LG1: f64 = 0.6666666666666735;
    const LG2: f64 = 0.3999999999940942;
    const LG3: f64 = 0.2857142874366239;
    const LG4: f64 = 0.22222198432149784;
    const LG5: f64 = 0.1818357216161805;
    const LG6: f64 = 0.15313837699209373;
    const LG7: f64 = 0.14798198605116586;
    // Shift the exponent so that mantissas from √2/2 up count as the next
    // power of two, then put the mantissa back in [√2/2, √2).
    let ix = x.to_bits() + ((0x3ff0_0000u64 - 0x3fe6_a09e) << 32);
    let e = ix >> 52;
    // The exponent as a double without an integer conversion.
    let dk = f64::from_bits(0x4330_0000_0000_0000 | e) - (4_503_599_627_370_496.0 + 1023.0);
    let m = (ix & 0x000f_ffff_ffff_ffff) + (0x3fe6_a09eu64 << 32);
    let f = f64::from_bits(m) - 1.0;
    let hfsq = 0.5 * f * f;
    let s = f / (2.0 + f);
    let z = s * s;
    let w = z * z;
    let fma = fmadd::<FUSED>;
    let t1 = w * fma(w, fma(w, LG6, LG4), LG2);
    let t2 = z * fma(w, fma(w, fma(w, LG7, LG5), LG3), LG1);
    let r = t2 + t1;
    s * (hfsq + r) + dk * LN2_LO - hfsq + f + dk * LN2_HI
}

multiversion! {
    /// sin and cos of each angle: the sines replace the angles in `xs`, the
    /// cosines go to `cos` (same length). Within two units in the last place
    /// of 1 of the library's (`tests::sines_and_cosines_match_the_library`)
    /// for angles in [−10⁵, 10⁵], vectorised like [`exp_in_place`]; the
    /// library's own beyond and for NaN and infinities.
    pub fn sin_cos_in_place(xs: &mut [f64], cos: &mut [f64]) => sin_cos_portable, sin_cos_avx2, sin_cos_avx512(xs, cos)
}

/// The largest |angle| [`sin_cos_in_place`] reduces itself.
const SIN_COS_LIMIT: f64 = 1e5;

/// [`sin_cos_in_place`] for any target (inlined into each compiled version).
#[inline(always)]
fn sin_cos_portable<const FUSED: bool>(xs: &mut [f64], cos: &mut [f64]) {
    debug_assert_eq!(xs.len(), cos.len());
    const CHUNK: usize = 64;
    for (c, o) in xs.chunks_mut(CHUNK).zip(cos.chunks_mut(CHUNK)) {
        let mut orig = [0.0; CHUNK];
        orig[..c.len()].copy_from_slice(c);
        let mut special = false;
        for (x, o) in c.iter_mut().zip(o.iter_mut()) {
            special |= !within(*x, -SIN_COS_LIMIT, SIN_COS_LIMIT);
            (*x, *o) = sin_cos_reduced::<FUSED>(clamp_finite(*x, -SIN_COS_LIMIT, SIN_COS_LIMIT));
        }
        if special {
            for ((x, o), &v) in c.iter_mut().zip(o.iter_mut()).zip(&orig) {
                if !within(v, -SIN_COS_LIMIT, SIN_COS_LIMIT) {
                    (*x, *o) = v.sin_cos();
                }
            }
        }
    }
}

/// (sin x, cos x) for |x| ≤ 10⁵, branch-free: x = n π/2 + r with
/// |r| ≤ π/4 (π/2 in three parts of 33 bits, so n·part is exact), the
/// polynomials of the classic fdlibm kernels on r, and the quadrant n mod 4
/// choosing and signing them.
#[inline(always)]
fn sin_cos_reduced<const FUSED: bool>(x: f64) -> (f64, f64) {
    const TWO_OVER_PI: f64 = std::f64::consts::FRAC_2_PI;
    const SHIFT: f64 = 6_755_399_441_055_744.0;
    const PIO2_1: f64 = 1.5707963267341256;
    const PIO2_2: f64 = 6.077100506303966e-11;
    const PIO2_3: f64 = 2.0222662487111665e-21;
    const S1: f64 = -0.16666666666666632;
    const S2: f64 = 0.00833333333332249;
    const S3: f64 = -0.0001984126982985795;
    const S4: f64 = 2.7557313707070068e-6;
    const S5: f64 = -2.5050760253406863e-8;
    const S6: f64 = 1.58969099521155e-10;
    const C1: f64 = 0.0416666666666666;
    const C2: f64 = -0.001388888888887411;
    const C3: f64 = 2.480158728947673e-5;
    const C4: f64 = -2.7557314351390663e-7;
    const C5: f64 = 2.087572321298175e-9;
    const C6: f64 = -1.1359647557788195e-11;
    let t = x * TWO_OVER_PI + SHIFT;
    let nf = t - SHIFT;
    let n = (t.to_bits() as i64).wrapping_sub(SHIFT.to_bits() as i64);
    let r = ((x - nf * PIO2_1) - nf * PIO2_2) - nf * PIO2_3;
    let fma = fmadd::<FUSED>;
    let z = r * r;
    let w = z * z;
    let rs = fma(z * w, fma(z, S6, S5), fma(z, fma(z, S4, S3), S2));
    let sin_r = fma(z * r, fma(z, rs, S1), r);
    let rc = fma(
        w * w,
        fma(z, fma(z, C6, C5), C4),
        z * fma(z, fma(z, C3, C2), C1),
    );
    let hz = 0.5 * z;
    let one_minus = 1.0 - hz;
    let cos_r = one_minus + (((1.0 - one_minus) - hz) + z * rc);
    let odd = n & 1 != 0;
    let (a, b) = if odd { (cos_r, sin_r) } else { (sin_r, cos_r) };
    let s = if n & 2 != 0 { -a } else { a };
    let c = if n.wrapping_add(1) & 2 != 0 { -b } else { b };
    (s, c)
}

multiversion! {
    /// out = A x for A \[R, K\] column-major in `a` (R = `out.len()`,
    /// K = `x.len()`, `a.len()` = R·K): each out\[i\] = Σⱼ A\[i, j\] xⱼ
    /// summed in the order of j, a product and a sum per term (no fused
    /// multiply–add), so the bits are the same from every version and the
    /// same as the loop `for j { out += A[:, j] · xⱼ }` gives. Used by the
    /// samplers' density program (`X * beta`, matrix products) and a
    /// whitened latent GP's L v. Callers check the shapes: with `a`
    /// shorter than R·K, `out` is left at zero.
    pub fn mat_vec(a: &[f64], x: &[f64], out: &mut [f64]) => mat_vec_portable, mat_vec_avx2, mat_vec_avx512(a, x, out)
}

/// [`mat_vec`] for any target: four columns per pass over `out` (each
/// entry still takes its terms in the order of j).
#[inline(always)]
fn mat_vec_portable<const FUSED: bool>(a: &[f64], x: &[f64], out: &mut [f64]) {
    let r = out.len();
    out.fill(0.0);
    if r == 0 || a.len() < r * x.len() {
        return;
    }
    let mut j = 0;
    while j + 4 <= x.len() {
        let (x0, x1, x2, x3) = (x[j], x[j + 1], x[j + 2], x[j + 3]);
        let c0 = &a[j * r..(j + 1) * r];
        let c1 = &a[(j + 1) * r..(j + 2) * r];
        let c2 = &a[(j + 2) * r..(j + 3) * r];
        let c3 = &a[(j + 3) * r..(j + 4) * r];
        for i in 0..r {
            let mut o = out[i];
            o += c0[i] * x0;
            o += c1[i] * x1;
            o += c2[i] * x2;
            o += c3[i] * x3;
            out[i] = o;
        }
        j += 4;
    }
    for (k, &xk) in x.iter().enumerate().skip(j) {
        for (o, c) in out.iter_mut().zip(&a[k * r..(k + 1) * r]) {
            *o += c * xk;
        }
    }
}

multiversion! {
    /// y += Aᵀ g for A \[R, K\] column-major in `a` (R = `g.len()`,
    /// K = `y.len()`): yⱼ += Σᵢ A\[i, j\] gᵢ, each column's sum formed as
    /// eight partial sums (i mod 8) added in order and then the
    /// rows past the last multiple of eight, a product and a sum per term,
    /// so the bits are the same from every version. The reverse of
    /// [`mat_vec`] in the samplers' density program and a latent GP's
    /// Lᵀ f̄. Callers check the shapes: with `a` shorter than R·K, `y` is
    /// left as it was.
    pub fn mat_t_vec_add(a: &[f64], g: &[f64], y: &mut [f64]) => mat_t_vec_portable, mat_t_vec_avx2, mat_t_vec_avx512(a, g, y)
}

/// [`mat_t_vec_add`] for any target.
#[inline(always)]
fn mat_t_vec_portable<const FUSED: bool>(a: &[f64], g: &[f64], y: &mut [f64]) {
    let r = g.len();
    if a.len() < r * y.len() {
        return;
    }
    let (g8, g_rest) = g.as_chunks::<8>();
    let body = g8.len() * 8;
    for (j, yj) in y.iter_mut().enumerate() {
        let col = &a[j * r..(j + 1) * r];
        let mut acc = [0.0f64; 8];
        for (cs, gs) in col.as_chunks::<8>().0.iter().zip(g8) {
            acc = std::array::from_fn(|k| acc[k] + cs[k] * gs[k]);
        }
        let mut s = acc.iter().fold(0.0, |s, v| s + v);
        for (c, gi) in col[body..].iter().zip(g_rest) {
            s += c * gi;
        }
        *yj += s;
    }
}

#[cfg(test)]
mod tests {
    /// The products against plain loops: `mat_vec` to the bit (the same
    /// order of terms), `mat_t_vec_add` to rounding and to the bit against
    /// its baseline version, on shapes with and
    /// without a multiple of four columns or eight rows.
    #[test]
    fn matrix_vector_products_match_plain_loops() {
        for (r, k) in [(0, 3), (1, 1), (7, 5), (16, 4), (569, 30), (13, 9)] {
            let a: Vec<f64> = (0..r * k).map(|i| ((i as f64) * 0.37).sin()).collect();
            let x: Vec<f64> = (0..k).map(|j| 0.5 - (j as f64) * 0.21).collect();
            let mut out = vec![f64::NAN; r];
            super::mat_vec(&a, &x, &mut out);
            let mut want = vec![0.0; r];
            for j in 0..k {
                for i in 0..r {
                    want[i] += a[j * r + i] * x[j];
                }
            }
            assert_eq!(out, want, "{r} × {k}");
            let g: Vec<f64> = (0..r).map(|i| ((i as f64) * 0.11).cos()).collect();
            let mut y = vec![1.0; k];
            super::mat_t_vec_add(&a, &g, &mut y);
            // The version for this processor and the baseline one: the
            // same bits.
            let mut base = vec![1.0; k];
            super::mat_t_vec_portable::<false>(&a, &g, &mut base);
            assert_eq!(y, base, "{r} × {k}: versions");
            for j in 0..k {
                let plain: f64 = 1.0 + (0..r).map(|i| a[j * r + i] * g[i]).sum::<f64>();
                assert!(
                    (y[j] - plain).abs() <= 1e-12 * (1.0 + plain.abs()),
                    "{r} × {k}: {j}"
                );
            }
        }
    }

    use super::*;

    /// Eight partial sums give the exact total where every partial sum is
    /// exact (integers), take every entry once for any length, and agree
    /// with the running sum to rounding otherwise.
    #[test]
    fn the_split_sum_takes_every_entry_once() {
        for n in 0..40 {
            let want = (n * (n + 1) / 2) as f64;
            assert_eq!(sum_by(n, |e| (e + 1) as f64), want, "n = {n}");
        }
        let x: Vec<f64> = (0..1001).map(|e| (e as f64 * 0.37).sin() / 3.0).collect();
        let running: f64 = x.iter().sum();
        assert!((sum_by(x.len(), |e| x[e]) - running).abs() < 1e-12);
    }

    /// Every version this processor runs ([`versions`]): the block sines
    /// and cosines are within two ulp of 1 of the library's up to |angle|
    /// 10⁵, and the library's own beyond and for NaN and infinities.
    #[test]
    fn sines_and_cosines_match_the_library() {
        let mut angles: Vec<f64> = (0..200_003)
            .map(|i| (i as f64 - 100_000.0) * 0.999_37 + 0.123)
            .collect();
        angles.extend([1e5 + 1.0, -3e7, f64::INFINITY, f64::NAN, 0.0, -0.0, 1e-300]);
        let check = |f: &dyn Fn(&mut [f64], &mut [f64]), what: &str| {
            let mut s = angles.clone();
            let mut c = vec![0.0; s.len()];
            f(&mut s, &mut c);
            for (k, &x) in angles.iter().enumerate() {
                let (ws, wc) = x.sin_cos();
                if x.abs() > 1e5 || !x.is_finite() {
                    assert!(
                        same(s[k], ws) && same(c[k], wc),
                        "{what} {x}: {} {}",
                        s[k],
                        c[k]
                    );
                } else {
                    let (es, ec) = ((s[k] - ws).abs(), (c[k] - wc).abs());
                    assert!(es <= 2.0 * f64::EPSILON, "{what} sin {x}: {} vs {ws}", s[k]);
                    assert!(ec <= 2.0 * f64::EPSILON, "{what} cos {x}: {} vs {wc}", c[k]);
                }
            }
        };
        check(&|a, b| sin_cos_in_place(a, b), "dispatched");
        check(&|a, b| sin_cos_portable::<false>(a, b), "portable");
        check(&|a, b| sin_cos_portable::<true>(a, b), "portable fused");
        #[cfg(target_arch = "x86_64")]
        for v in versions() {
            // SAFETY: `versions` lists only what the processor has.
            match v {
                "avx2" => check(&|a, b| unsafe { sin_cos_avx2(a, b) }, v),
                _ => check(&|a, b| unsafe { sin_cos_avx512(a, b) }, v),
            }
        }
    }

    /// Every version this processor runs ([`versions`]): within one ulp
    /// of the library's ln x over the whole range of normal numbers and
    /// near 1, the library's own elsewhere.
    #[test]
    fn the_logarithm_matches_the_library_one() {
        let mut xs: Vec<f64> = (0..200_001)
            .map(|i| {
                2f64.powf(-1022.0 + 2045.0 * i as f64 / 200_000.0) * (1.0 + (i % 11) as f64 * 0.09)
            })
            .collect();
        xs.extend((0..100_001).map(|i| 0.5 + i as f64 / 50_000.0));
        xs.extend([
            1.0,
            f64::MIN_POSITIVE,
            f64::MAX,
            1e-310,
            0.0,
            -0.0,
            -1.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            std::f64::consts::SQRT_2,
            std::f64::consts::FRAC_1_SQRT_2,
        ]);
        let check = |f: &dyn Fn(&mut [f64]), what: &str| {
            let mut v = xs.clone();
            f(&mut v);
            let mut worst = 0.0f64;
            for (x, l) in xs.iter().zip(&v) {
                let want = x.ln();
                if *x >= f64::MIN_POSITIVE && x.is_finite() {
                    if want != 0.0 {
                        let ulp = f64::EPSILON * want.abs();
                        worst = worst.max((l - want).abs() / ulp);
                    } else {
                        assert_eq!(*l, 0.0, "{what}: ln 1");
                    }
                } else {
                    assert!(same(*l, want), "{what} {x}: {l} vs {want}");
                }
            }
            assert!(worst <= 1.0, "{what}: worst error {worst} ulp");
        };
        check(&|p| ln_in_place(p), "dispatched");
        check(&|p| ln_portable::<false>(p), "portable");
        check(&|p| ln_portable::<true>(p), "portable fused");
        #[cfg(target_arch = "x86_64")]
        for v in versions() {
            // SAFETY: `versions` lists only what the processor has.
            match v {
                "avx2" => check(&|p| unsafe { ln_avx2(p) }, v),
                _ => check(&|p| unsafe { ln_avx512(p) }, v),
            }
        }
    }

    /// Every version this processor runs ([`versions`]): within two ulp
    /// of the library's eˣ on [−708, 708] (a fine grid and the ends), 0
    /// below and the library's own (∞, NaN) above and for NaN.
    #[test]
    fn the_exponential_matches_the_library_one() {
        let mut xs: Vec<f64> = (0..400_001)
            .map(|i| -710.0 + 1420.0 * i as f64 / 400_000.0)
            .collect();
        xs.extend((0..20_001).map(|i| -1.0 + i as f64 / 10_000.0));
        xs.extend([
            -708.0,
            708.0,
            -708.000_001,
            709.7,
            709.8,
            1e300,
            -1e300,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            0.0,
            -0.0,
            1e-300,
        ]);
        let check = |f: &dyn Fn(&mut [f64]), what: &str| {
            let mut v = xs.clone();
            f(&mut v);
            let mut worst = 0.0f64;
            for (x, e) in xs.iter().zip(&v) {
                if x.abs() <= 708.0 {
                    let want = x.exp();
                    worst = worst.max(((e - want) / want).abs() / f64::EPSILON);
                } else {
                    let want = exp_or_zero(*x);
                    assert!(same(*e, want), "{what} {x}: {e} vs {want}");
                }
            }
            assert!(worst <= 2.0, "{what}: worst error {worst} ulp");
        };
        check(&|p| exp_in_place(p), "dispatched");
        check(&|p| exp_portable::<false>(p), "portable");
        check(&|p| exp_portable::<true>(p), "portable fused");
        #[cfg(target_arch = "x86_64")]
        for v in versions() {
            // SAFETY: `versions` lists only what the processor has.
            match v {
                "avx2" => check(&|p| unsafe { exp_avx2(p) }, v),
                _ => check(&|p| unsafe { exp_avx512(p) }, v),
            }
        }
    }

    /// The same bits, or both NaN.
    fn same(a: f64, b: f64) -> bool {
        a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
    }

    /// The compiled versions this processor can run.
    #[cfg(target_arch = "x86_64")]
    fn versions() -> Vec<&'static str> {
        let mut v = Vec::new();
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            v.push("avx2");
        }
        if std::arch::is_x86_feature_detected!("avx512f") {
            v.push("avx512");
        }
        v
    }
}
