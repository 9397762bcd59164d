//! Likelihoods and kernels written in Rust and registered by name, so a model
//! file can use them like built-ins.
//!
//! Write the function once, generic over [`Real`]; autodiff supplies every
//! derivative:
//!
//! ```
//! use tempest_math::scalar::{Real, RealExt};
//! use tempest_model::custom::{Registry, UserKernel, UserLikelihood};
//!
//! /// Laplace observation noise: log p(y | f, b) = −|y − f|/b − log(2b).
//! struct Laplace;
//! impl UserLikelihood for Laplace {
//!     fn name(&self) -> &str { "laplace" }
//!     fn params(&self) -> Vec<String> { vec!["b".into()] }
//!     fn log_density<T: Real>(&self, y: f64, f: T, p: &[T]) -> T {
//!         let b = p[0];
//!         -(T::constant(y) - f).abs() / b - (b * T::constant(2.0)).ln()
//!     }
//! }
//!
//! /// Rational quadratic kernel (1 + r²/(2αℓ²))^(−α).
//! struct RationalQuadratic;
//! impl UserKernel for RationalQuadratic {
//!     fn name(&self) -> &str { "rq" }
//!     fn params(&self) -> Vec<String> { vec!["ell".into(), "alpha".into()] }
//!     fn entry<T: Real>(&self, p: &[T], x: &[f64], y: &[f64]) -> T {
//!         let r2: f64 = x.iter().zip(y).map(|(a, b)| (a - b) * (a - b)).sum();
//!         (T::one() + T::constant(r2) / (p[1] * p[0] * p[0] * T::constant(2.0))).powf(-p[1])
//!     }
//! }
//!
//! let mut registry = Registry::default();
//! registry.add_likelihood(Laplace);
//! registry.add_kernel(RationalQuadratic);
//! ```

use nalgebra::{DMatrix, DVector};
use std::collections::BTreeMap;
use std::sync::Arc;
use tempest_math::scalar::{Dual1, Dual4, Dual8, Real};

/// A likelihood p(y | f, params) for one observation, written in Rust.
pub trait UserLikelihood: Send + Sync + 'static {
    /// The name used in model files.
    fn name(&self) -> &str;
    /// The names of the parameters after the latent value, in order.
    fn params(&self) -> Vec<String>;
    /// log p(y | f, params); `y` is the observed value.
    fn log_density<T: Real>(&self, y: f64, f: T, params: &[T]) -> T;
}

/// A covariance function k(x, x′; params), written in Rust.
pub trait UserKernel: Send + Sync + 'static {
    /// The name used in model files.
    fn name(&self) -> &str;
    /// The names of its parameters, in order.
    fn params(&self) -> Vec<String>;
    /// k(x, x′) for two input rows.
    fn entry<T: Real>(&self, params: &[T], x: &[f64], y: &[f64]) -> T;
}

/// k(x, y) of a Rust kernel at parameters `p` and ∂k/∂pⱼ for every j
/// into `g` (at least `p.len()` slots), by forward mode inside the entry:
/// one pass of the narrowest dual that holds every parameter (one, four or
/// eight tangents), eight at a time beyond eight. Allocates nothing for up
/// to 16 parameters.
pub fn kernel_entry_grad(k: &dyn DynKernel, p: &[f64], x: &[f64], y: &[f64], g: &mut [f64]) -> f64 {
    use ad_trait::forward_ad::adfn::adfn;
    fn pass<const N: usize>(
        p: &[f64],
        start: usize,
        buf: &mut [adfn<N>],
        eval: impl Fn(&[adfn<N>]) -> adfn<N>,
        g: &mut [f64],
    ) -> f64 {
        for (j, (d, &v)) in buf.iter_mut().zip(p).enumerate() {
            let mut t = [0.0; N];
            if j >= start && j < start + N {
                t[j - start] = 1.0;
            }
            *d = adfn::<N>::new(v, t);
        }
        let r = eval(&buf[..p.len()]);
        let n = (p.len() - start).min(N);
        g[start..start + n].copy_from_slice(&r.tangent()[..n]);
        r.value()
    }
    const STACK: usize = 16;
    let n = p.len();
    match n {
        0 => k.entry_f64(p, x, y),
        1 => pass::<1>(
            p,
            0,
            &mut [Dual1::new_constant(0.0); 1],
            |d| k.entry_d1(d, x, y),
            g,
        ),
        2..=4 => pass::<4>(
            p,
            0,
            &mut [Dual4::new_constant(0.0); 4],
            |d| k.entry_d4(d, x, y),
            g,
        ),
        _ => {
            let mut stack = [Dual8::new_constant(0.0); STACK];
            let mut heap;
            let buf: &mut [Dual8] = if n <= STACK {
                &mut stack[..n]
            } else {
                heap = vec![Dual8::new_constant(0.0); n];
                &mut heap
            };
            let mut v = 0.0;
            for start in (0..n).step_by(8) {
                v = pass::<8>(p, start, buf, |d| k.entry_d8(d, x, y), g);
            }
            v
        }
    }
}

/// The object-safe form of [`UserLikelihood`], one method per scalar type.
pub trait DynLikelihood: Send + Sync {
    /// The name used in model files.
    fn name(&self) -> &str;
    /// Parameter names after the latent value.
    fn param_names(&self) -> Vec<String>;
    /// In `f64`.
    fn log_density_f64(&self, y: f64, f: f64, p: &[f64]) -> f64;
    /// With one tangent.
    fn log_density_d1(&self, y: f64, f: Dual1, p: &[Dual1]) -> Dual1;
    /// With four tangents.
    fn log_density_d4(&self, y: f64, f: Dual4, p: &[Dual4]) -> Dual4;
    /// With eight tangents.
    fn log_density_d8(&self, y: f64, f: Dual8, p: &[Dual8]) -> Dual8;
}

impl<L: UserLikelihood> DynLikelihood for L {
    fn name(&self) -> &str {
        UserLikelihood::name(self)
    }
    fn param_names(&self) -> Vec<String> {
        self.params()
    }
    fn log_density_f64(&self, y: f64, f: f64, p: &[f64]) -> f64 {
        self.log_density(y, f, p)
    }
    fn log_density_d1(&self, y: f64, f: Dual1, p: &[Dual1]) -> Dual1 {
        self.log_density(y, f, p)
    }
    fn log_density_d4(&self, y: f64, f: Dual4, p: &[Dual4]) -> Dual4 {
        self.log_density(y, f, p)
    }
    fn log_density_d8(&self, y: f64, f: Dual8, p: &[Dual8]) -> Dual8 {
        self.log_density(y, f, p)
    }
}

/// The object-safe form of [`UserKernel`], one method per scalar type.
pub trait DynKernel: Send + Sync {
    /// The name used in model files.
    fn name(&self) -> &str;
    /// Parameter names.
    fn param_names(&self) -> Vec<String>;
    /// In `f64`.
    fn entry_f64(&self, p: &[f64], x: &[f64], y: &[f64]) -> f64;
    /// With one tangent.
    fn entry_d1(&self, p: &[Dual1], x: &[f64], y: &[f64]) -> Dual1;
    /// With four tangents.
    fn entry_d4(&self, p: &[Dual4], x: &[f64], y: &[f64]) -> Dual4;
    /// With eight tangents.
    fn entry_d8(&self, p: &[Dual8], x: &[f64], y: &[f64]) -> Dual8;
}

impl<K: UserKernel> DynKernel for K {
    fn name(&self) -> &str {
        UserKernel::name(self)
    }
    fn param_names(&self) -> Vec<String> {
        self.params()
    }
    fn entry_f64(&self, p: &[f64], x: &[f64], y: &[f64]) -> f64 {
        self.entry(p, x, y)
    }
    fn entry_d1(&self, p: &[Dual1], x: &[f64], y: &[f64]) -> Dual1 {
        self.entry(p, x, y)
    }
    fn entry_d4(&self, p: &[Dual4], x: &[f64], y: &[f64]) -> Dual4 {
        self.entry(p, x, y)
    }
    fn entry_d8(&self, p: &[Dual8], x: &[f64], y: &[f64]) -> Dual8 {
        self.entry(p, x, y)
    }
}

/// The scalar types tempest evaluates models with: `f64`, [`Dual1`],
/// [`Dual4`], [`Dual8`] and the reverse-mode [`tempest_math::reverse::Rev`].
/// Registered Rust functions are dispatched to the matching method (for
/// `Rev`, to the eight-tangent one, whose value and derivatives are
/// recorded as one operation).
pub trait Scalar: Real {
    /// Whether this value carries no derivative (an `f64`, or a dual whose
    /// tangents are all zero): a function of it may then be computed in
    /// `f64` alone.
    fn is_constant(&self) -> bool;
    /// Call a registered likelihood.
    fn call_likelihood(l: &dyn DynLikelihood, y: f64, f: Self, p: &[Self]) -> Self;
    /// Call a registered kernel.
    fn call_kernel(k: &dyn DynKernel, p: &[Self], x: &[f64], y: &[f64]) -> Self;
    /// `X v` with X a data matrix (`n × d`) and v of length d: length n.
    fn data_matvec(x: &DMatrix<f64>, v: &DVector<Self>) -> DVector<Self> {
        let mut out = DVector::from_element(x.nrows(), Self::zero());
        for j in 0..x.ncols() {
            let vj = v[j];
            for r in 0..x.nrows() {
                out[r] += vj * ad_trait::F64(x[(r, j)]);
            }
        }
        out
    }
}

impl Scalar for f64 {
    #[inline]
    fn is_constant(&self) -> bool {
        true
    }
    fn data_matvec(x: &DMatrix<f64>, v: &DVector<Self>) -> DVector<Self> {
        x * v
    }
    fn call_likelihood(l: &dyn DynLikelihood, y: f64, f: Self, p: &[Self]) -> Self {
        l.log_density_f64(y, f, p)
    }
    fn call_kernel(k: &dyn DynKernel, p: &[Self], x: &[f64], y: &[f64]) -> Self {
        k.entry_f64(p, x, y)
    }
}

impl Scalar for Dual1 {
    #[inline]
    fn is_constant(&self) -> bool {
        self.tangent().iter().all(|t| *t == 0.0)
    }
    fn call_likelihood(l: &dyn DynLikelihood, y: f64, f: Self, p: &[Self]) -> Self {
        l.log_density_d1(y, f, p)
    }
    fn call_kernel(k: &dyn DynKernel, p: &[Self], x: &[f64], y: &[f64]) -> Self {
        k.entry_d1(p, x, y)
    }
}

impl Scalar for Dual4 {
    #[inline]
    fn is_constant(&self) -> bool {
        self.tangent().iter().all(|t| *t == 0.0)
    }
    fn call_likelihood(l: &dyn DynLikelihood, y: f64, f: Self, p: &[Self]) -> Self {
        l.log_density_d4(y, f, p)
    }
    fn call_kernel(k: &dyn DynKernel, p: &[Self], x: &[f64], y: &[f64]) -> Self {
        k.entry_d4(p, x, y)
    }
}

impl Scalar for Dual8 {
    #[inline]
    fn is_constant(&self) -> bool {
        self.tangent().iter().all(|t| *t == 0.0)
    }
    fn call_likelihood(l: &dyn DynLikelihood, y: f64, f: Self, p: &[Self]) -> Self {
        l.log_density_d8(y, f, p)
    }
    fn call_kernel(k: &dyn DynKernel, p: &[Self], x: &[f64], y: &[f64]) -> Self {
        k.entry_d8(p, x, y)
    }
}

impl Scalar for tempest_math::reverse::Rev {
    #[inline]
    fn is_constant(&self) -> bool {
        tempest_math::reverse::Rev::is_constant(self)
    }
    fn call_likelihood(l: &dyn DynLikelihood, y: f64, f: Self, p: &[Self]) -> Self {
        let mut args = Vec::with_capacity(p.len() + 1);
        args.push(f);
        args.extend_from_slice(p);
        lift_rev(&args, |a| l.log_density_d8(y, a[0], &a[1..]))
    }
    fn call_kernel(k: &dyn DynKernel, p: &[Self], x: &[f64], y: &[f64]) -> Self {
        lift_rev(p, |a| k.entry_d8(a, x, y))
    }
}

/// A Rust function of reverse-mode arguments as one reverse-mode value: its
/// value and gradient at the arguments' values by forward mode (eight
/// arguments per pass, only those on the tape), recorded as
/// f(a₀) + Σⱼ ∂f/∂aⱼ (aⱼ − aⱼ₀) — exact in value and first derivatives.
fn lift_rev(
    args: &[tempest_math::reverse::Rev],
    f: impl Fn(&[Dual8]) -> Dual8,
) -> tempest_math::reverse::Rev {
    use ad_trait::AD;
    use tempest_math::reverse::Rev;
    let values: Vec<f64> = args.iter().map(|a| a.to_constant()).collect();
    let live: Vec<usize> = (0..args.len())
        .filter(|&j| !Rev::is_constant(&args[j]))
        .collect();
    let constants: Vec<Dual8> = values.iter().map(|&v| Dual8::constant(v)).collect();
    let mut out = Rev::constant(f(&constants).value());
    for chunk in live.chunks(tempest_math::scalar::CHUNK) {
        let mut seeded = constants.clone();
        for (c, &j) in chunk.iter().enumerate() {
            let mut t = [0.0; tempest_math::scalar::CHUNK];
            t[c] = 1.0;
            seeded[j] = Dual8::new(values[j], t);
        }
        let g = f(&seeded).tangent();
        for (c, &j) in chunk.iter().enumerate() {
            if g[c] != 0.0 {
                out += (args[j] - Rev::constant(values[j])) * ad_trait::F64(g[c]);
            }
        }
    }
    out
}

/// Likelihoods and kernels registered from Rust, looked up by name when a
/// model is checked.
#[derive(Clone, Default)]
pub struct Registry {
    likelihoods: BTreeMap<String, Arc<dyn DynLikelihood>>,
    kernels: BTreeMap<String, Arc<dyn DynKernel>>,
}

impl Registry {
    /// Register a likelihood under its name (replacing one of the same name).
    pub fn add_likelihood<L: UserLikelihood>(&mut self, l: L) -> &mut Self {
        let name = UserLikelihood::name(&l).to_string();
        self.likelihoods.insert(name, Arc::new(l));
        self
    }
    /// Register a kernel under its name (replacing one of the same name).
    pub fn add_kernel<K: UserKernel>(&mut self, k: K) -> &mut Self {
        let name = UserKernel::name(&k).to_string();
        self.kernels.insert(name, Arc::new(k));
        self
    }
    /// A registered likelihood.
    pub fn likelihood(&self, name: &str) -> Option<&Arc<dyn DynLikelihood>> {
        self.likelihoods.get(name)
    }
    /// A registered kernel.
    pub fn kernel(&self, name: &str) -> Option<&Arc<dyn DynKernel>> {
        self.kernels.get(name)
    }
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("likelihoods", &self.likelihoods.keys().collect::<Vec<_>>())
            .field("kernels", &self.kernels.keys().collect::<Vec<_>>())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ad_trait::AD;
    use tempest_math::reverse::{Rev, sweep};

    /// Laplace noise with a scale: log p(y | f, b) = −|y − f|/b − log(2b).
    struct Laplace;
    impl UserLikelihood for Laplace {
        fn name(&self) -> &str {
            "laplace"
        }
        fn params(&self) -> Vec<String> {
            vec!["b".into()]
        }
        fn log_density<T: Real>(&self, y: f64, f: T, p: &[T]) -> T {
            -(T::constant(y) - f).abs() / p[0] - (p[0] * T::constant(2.0)).ln()
        }
    }

    /// k(x, y) = Σⱼ pⱼ^(j+1) (x₀ − y₀)^j / (j + 1): any number of parameters.
    struct Series(usize);
    impl UserKernel for Series {
        fn name(&self) -> &str {
            "series"
        }
        fn params(&self) -> Vec<String> {
            (0..self.0).map(|j| format!("p{j}")).collect()
        }
        fn entry<T: Real>(&self, p: &[T], x: &[f64], y: &[f64]) -> T {
            let d = x[0] - y[0];
            let mut s = T::zero();
            for (j, pj) in p.iter().enumerate() {
                s += pj.powi(j as i32 + 1) * T::constant(d.powi(j as i32) / (j as f64 + 1.0));
            }
            s
        }
    }

    /// A Rust kernel's entry gradient (one, four, eight and more tangents,
    /// chunked past eight and past the stack's sixteen) against the closed
    /// form ∂k/∂pⱼ = pⱼ^j dʲ.
    #[test]
    fn a_rust_kernels_entry_gradient_is_its_derivative() {
        for n in [0, 1, 3, 4, 7, 8, 9, 17, 20] {
            let k = Series(n);
            let p: Vec<f64> = (0..n).map(|j| 0.5 + 0.1 * j as f64).collect();
            let (x, y) = ([1.3], [0.4]);
            let mut g = vec![f64::NAN; n];
            let v = kernel_entry_grad(&k, &p, &x, &y, &mut g);
            let want: f64 = k.entry(&p, &x, &y);
            assert!(
                (v - want).abs() <= 1e-13 * want.abs().max(1.0),
                "{n}: value"
            );
            let d: f64 = 0.9;
            for (j, gj) in g.iter().enumerate() {
                let want = p[j].powi(j as i32) * d.powi(j as i32);
                let tol = 1e-12 * want.abs().max(1.0);
                assert!((gj - want).abs() <= tol, "{n}: p{j}: {gj} vs {want}");
            }
        }
    }

    /// A Rust likelihood called with reverse-mode arguments records its
    /// value and forward mode's derivatives as one operation; an argument
    /// off the tape (data) gets none.
    #[test]
    fn rust_functions_of_reverse_mode_arguments_carry_their_derivatives() {
        let (y, f, b) = (0.3, 1.1, 0.7);
        let (v, g) = sweep(&[f, b], |x| {
            Ok(Rev::call_likelihood(&Laplace, y, x[0], &[x[1]]))
        })
        .unwrap();
        assert!((v - (-(f - y) / b - (2.0 * b).ln())).abs() < 1e-15);
        assert!((g[0] - (-1.0 / b)).abs() < 1e-14);
        assert!((g[1] - ((f - y) / (b * b) - 1.0 / b)).abs() < 1e-14);
        let (_, g) = sweep(&[b], |x| {
            Ok(Rev::call_likelihood(&Laplace, y, Rev::constant(f), &[x[0]]))
        })
        .unwrap();
        assert!((g[0] - ((f - y) / (b * b) - 1.0 / b)).abs() < 1e-14);
    }
}
