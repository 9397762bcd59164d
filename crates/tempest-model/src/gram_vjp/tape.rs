//! The Gram node on the matrix tape: a kernel's K(X, X) recorded as one
//! node of a [`Tape`] whose backward pass is [`gram_vjp`], so a kernel joins
//! whatever else is recorded there — a feature network before it
//! ([`crate::network::Network::record`]), a Cholesky factor, solves and a
//! loss after it — and one backward pass gives the adjoints of the inputs
//! (X̄, and through a network its weights) and of the kernel's leaves.

use super::{cross_vjp_with, gram_vjp_with};
use crate::kernel::{Inputs, KernelValue};
use nalgebra::DMatrix;
use tempest_core::error::{Error, ErrorKind};
use tempest_math::tape::{Tape, Var};

/// Records K(X, X) [N, N] of `kernel` at the inputs node `x` [N, D] as one
/// node. Its backward pass is [`super::gram_vjp`] (X̄ computed only when
/// `x` varies): X̄ flows into `x` and θ̄ into
/// `leaves` [p, 1], when given, whose value must be the kernel's leaves
/// ([`KernelValue::leaves`], in their order; how they come from the model's
/// hypers is the caller's, recorded before). An `E-unsupported` error for
/// a kernel without leaves, or, when `x` varies, without reverse rules in
/// its inputs (Rust or interpreted
/// model-file parts), a shape error when `leaves` does not hold the
/// kernel's leaves.
pub fn record_gram(
    tape: &mut Tape,
    kernel: &KernelValue<f64>,
    x: Var,
    leaves: Option<Var>,
) -> Result<Var, Error> {
    let p = checked_leaves(tape, kernel, leaves, tape.varies(x))?;
    let inputs = Inputs::from_matrix(tape.value(x));
    let value = kernel.gram(&inputs)?;
    let kernel = kernel.clone();
    // X̄ is computed only when the inputs vary (a network's features).
    let want_x = tape.varies(x);
    let mut operands = vec![x];
    operands.extend(leaves);
    tape.custom(&operands, value, move |k_bar| {
        let adj = gram_vjp_with(&kernel, &inputs, k_bar, want_x)?
            .ok_or_else(|| Error::internal("a Gram node without reverse rules on the tape"))?;
        let mut out = vec![adj.x];
        if leaves.is_some() {
            out.push(DMatrix::from_column_slice(p, 1, &adj.params));
        }
        Ok(out)
    })
}

/// Records the cross-covariance K(X, Z) [N, M] of `kernel` at the inputs
/// nodes `x` [N, D] and `z` [M, D] as one node whose backward pass is
/// [`super::cross_vjp`] (X̄, Z̄ computed only for a node that varies): X̄ and Z̄ flow into the inputs (inducing points, a
/// network's features) and θ̄ into `leaves`, as in [`record_gram`].
pub fn record_cross(
    tape: &mut Tape,
    kernel: &KernelValue<f64>,
    x: Var,
    z: Var,
    leaves: Option<Var>,
) -> Result<Var, Error> {
    // X̄ and Z̄ (and so the input rules) only for inputs that vary.
    let (want_x, want_z) = (tape.varies(x), tape.varies(z));
    let p = checked_leaves(tape, kernel, leaves, want_x || want_z)?;
    let (xi, zi) = (
        Inputs::from_matrix(tape.value(x)),
        Inputs::from_matrix(tape.value(z)),
    );
    let value = kernel.cross(&xi, &zi)?;
    let kernel = kernel.clone();
    let mut operands = vec![x, z];
    operands.extend(leaves);
    tape.custom(&operands, value, move |k_bar| {
        let adj = cross_vjp_with(&kernel, &xi, &zi, k_bar, want_x, want_z)?.ok_or_else(|| {
            Error::internal("a cross-covariance node without reverse rules on the tape")
        })?;
        let mut out = vec![adj.x, adj.z];
        if leaves.is_some() {
            out.push(DMatrix::from_column_slice(p, 1, &adj.params));
        }
        Ok(out)
    })
}

/// The number of the kernel's leaves, after checking that it has reverse
/// rules in its inputs and that `leaves` (when given) holds its leaves.
fn checked_leaves(
    tape: &Tape,
    kernel: &KernelValue<f64>,
    leaves: Option<Var>,
    inputs_vary: bool,
) -> Result<usize, Error> {
    let (Some(own), true) = (kernel.leaves(), kernel.input_rules() || !inputs_vary) else {
        return Err(Error::new(
            ErrorKind::Unsupported,
            "this kernel has no reverse rules (an interpreted model-file part), or none in its inputs where they vary (a Rust part), so it cannot be recorded on a tape",
        ));
    };
    if let Some(l) = leaves {
        let v = tape.value(l);
        if v.shape() != (own.len(), 1) || v.iter().zip(&own).any(|(a, b)| a != b) {
            return Err(Error::new(
                ErrorKind::Shape,
                format!(
                    "the kernel's leaves node is {:?}, but the kernel has {} leaves of other values",
                    v.shape(),
                    own.len()
                ),
            ));
        }
    }
    Ok(own.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::{KernelArg, KernelKind};
    use crate::network::{Activation, NetSpec, Network};
    use tempest_math::adjoint::testing::{central, normal, rng};
    use tempest_math::tape::Unary;
    use tempest_syntax::ast::Span;

    fn kernel(sf2: f64, ell: f64) -> KernelValue<f64> {
        KernelValue::Scale(
            sf2,
            Box::new(KernelValue::Base {
                kind: KernelKind::Rbf,
                args: vec![KernelArg::Scalar(ell)],
                dims: None,
                span: Span::default(),
            }),
        )
    }

    /// A deep-kernel GP's log marginal likelihood composed on one tape —
    /// network, Gram node, noise, Cholesky, solve, log det — and its
    /// gradient in the network's weights and the kernel's leaves against
    /// central differences of the same function computed without a tape.
    #[test]
    fn a_deep_kernel_marginal_likelihood_on_the_tape_matches_finite_differences() {
        let mut r = rng(11);
        let (n, d) = (9, 3);
        let x = normal(&mut r, n, d);
        let y = normal(&mut r, n, 1);
        let spec = NetSpec::new(d, vec![5, 2], Activation::Tanh).unwrap();
        let w0 = spec.init(4);
        let (sf2, ell, noise) = (1.3, 0.8, 0.1);
        let lml = |w: &[f64], sf2: f64, ell: f64| -> f64 {
            let net = Network::new(spec.clone(), w.to_vec()).unwrap();
            let h = net.map(&Inputs::from_matrix(&x)).unwrap();
            let mut k = kernel(sf2, ell).gram(&h).unwrap();
            for i in 0..n {
                k[(i, i)] += noise;
            }
            let c = k.cholesky().unwrap();
            let a = c.solve(&y);
            -0.5 * (y.transpose() * a)[(0, 0)] - 0.5 * c.l().diagonal().map(|v| v.ln()).sum() * 2.0
        };
        let mut t = Tape::new();
        let xv = t.constant(x.clone());
        let wv = t.input_vector(&w0);
        let lv = t.input_vector(&[sf2, ell]);
        let net = Network::new(spec.clone(), w0.clone()).unwrap();
        let h = net.record(&mut t, xv, wv).unwrap();
        let k = record_gram(&mut t, &kernel(sf2, ell), h, Some(lv)).unwrap();
        let eye = t.constant(DMatrix::identity(n, n) * noise);
        let k = t.add(k, eye).unwrap();
        let l = t.cholesky(k, "K").unwrap();
        let yv = t.constant(y.clone());
        let z = t.solve_lower(l, yv).unwrap();
        let zz = t.map(z, Unary::Square).unwrap();
        let q = t.sum(zz).unwrap();
        let ld = t.log_det_chol(l).unwrap();
        let s = t.add(q, ld).unwrap();
        let out = t.scale(s, -0.5).unwrap();
        assert!((t.scalar(out).unwrap() - lml(&w0, sf2, ell)).abs() < 1e-10);
        let g = t.gradient(out).unwrap();
        let gw = g.wrt(wv);
        for i in 0..w0.len() {
            let want = central(|e| {
                let mut w = w0.clone();
                w[i] += e;
                lml(&w, sf2, ell)
            });
            assert!(
                (gw[i] - want).abs() < 1e-6 * (1.0 + want.abs()),
                "weight {i}: {} vs {want}",
                gw[i]
            );
        }
        let gl = g.wrt(lv);
        let want_sf2 = central(|e| lml(&w0, sf2 + e, ell));
        let want_ell = central(|e| lml(&w0, sf2, ell + e));
        assert!((gl[0] - want_sf2).abs() < 1e-6 * (1.0 + want_sf2.abs()));
        assert!((gl[1] - want_ell).abs() < 1e-6 * (1.0 + want_ell.abs()));
    }

    /// f = ⟨C, K(X, Z)⟩ on the tape: its adjoints in X, Z and the leaves
    /// against central differences.
    #[test]
    fn a_cross_covariance_on_the_tape_matches_finite_differences() {
        let mut r = rng(12);
        let (x0, z0, c) = (
            normal(&mut r, 5, 2),
            normal(&mut r, 3, 2),
            normal(&mut r, 5, 3),
        );
        let f = |x: &DMatrix<f64>, z: &DMatrix<f64>, sf2: f64, ell: f64| -> f64 {
            let k = kernel(sf2, ell)
                .cross(&Inputs::from_matrix(x), &Inputs::from_matrix(z))
                .unwrap();
            k.component_mul(&c).sum()
        };
        let mut t = Tape::new();
        let (xv, zv) = (t.input(x0.clone()), t.input(z0.clone()));
        let lv = t.input_vector(&[1.3, 0.8]);
        let k = record_cross(&mut t, &kernel(1.3, 0.8), xv, zv, Some(lv)).unwrap();
        let g = t.vjp(k, c.clone()).unwrap();
        let (gx, gz, gl) = (g.wrt(xv), g.wrt(zv), g.wrt(lv));
        let close = |got: f64, want: f64, what: &str| {
            assert!(
                (got - want).abs() < 1e-7 * (1.0 + want.abs()),
                "{what}: {got} vs {want}"
            );
        };
        for i in 0..5 {
            for k in 0..2 {
                let want = central(|e| {
                    let mut x = x0.clone();
                    x[(i, k)] += e;
                    f(&x, &z0, 1.3, 0.8)
                });
                close(gx[(i, k)], want, "X");
            }
        }
        for i in 0..3 {
            for k in 0..2 {
                let want = central(|e| {
                    let mut z = z0.clone();
                    z[(i, k)] += e;
                    f(&x0, &z, 1.3, 0.8)
                });
                close(gz[(i, k)], want, "Z");
            }
        }
        close(gl[0], central(|e| f(&x0, &z0, 1.3 + e, 0.8)), "sf2");
        close(gl[1], central(|e| f(&x0, &z0, 1.3, 0.8 + e)), "ell");
    }

    /// A Rust kernel: a leaf of the block plan, with no input rules.
    struct Exp2;
    impl crate::custom::UserKernel for Exp2 {
        fn name(&self) -> &str {
            "exp2"
        }
        fn params(&self) -> Vec<String> {
            vec!["ell".into()]
        }
        fn entry<T: tempest_math::scalar::Real>(&self, p: &[T], x: &[f64], y: &[f64]) -> T {
            let r2: f64 = x.iter().zip(y).map(|(a, b)| (a - b) * (a - b)).sum();
            (-(T::constant(r2) / (p[0] * p[0]))).exp()
        }
    }

    /// A cross-covariance of a Rust kernel whose inputs are data goes on the
    /// tape (θ̄ needs only the leaves; against central differences); with
    /// inputs that vary it is refused, as no input rules exist.
    #[test]
    fn a_rust_kernel_on_data_inputs_is_recorded_and_on_varying_inputs_refused() {
        let mut r = rng(14);
        let (x0, z0, c) = (
            normal(&mut r, 5, 2),
            normal(&mut r, 3, 2),
            normal(&mut r, 5, 3),
        );
        let rust = |ell: f64| KernelValue::Rust {
            kernel: std::sync::Arc::new(Exp2),
            params: vec![ell],
            dims: None,
            span: Span::default(),
        };
        let f = |ell: f64| -> f64 {
            let k = rust(ell)
                .cross(&Inputs::from_matrix(&x0), &Inputs::from_matrix(&z0))
                .unwrap();
            k.component_mul(&c).sum()
        };
        let mut t = Tape::new();
        let (xv, zv) = (t.constant(x0.clone()), t.constant(z0.clone()));
        let lv = t.input_vector(&[0.9]);
        let k = record_cross(&mut t, &rust(0.9), xv, zv, Some(lv)).unwrap();
        let g = t.vjp(k, c.clone()).unwrap();
        let want = central(|e| f(0.9 + e));
        let got = g.wrt(lv)[0];
        assert!(
            (got - want).abs() < 1e-7 * (1.0 + want.abs()),
            "{got} vs {want}"
        );
        let xin = t.input(x0.clone());
        let lv = t.input_vector(&[0.9]);
        assert!(record_cross(&mut t, &rust(0.9), xin, zv, Some(lv)).is_err());
        assert!(record_gram(&mut t, &rust(0.9), xin, Some(lv)).is_err());
    }

    #[test]
    fn leaves_of_other_values_are_refused() {
        let mut t = Tape::new();
        let x = t.constant(DMatrix::from_element(2, 1, 0.5));
        let wrong = t.input_vector(&[1.0, 2.0]);
        let e = record_gram(&mut t, &kernel(1.3, 0.8), x, Some(wrong)).unwrap_err();
        assert!(e.to_string().contains("leaves"), "{e}");
        let short = t.input_vector(&[1.3]);
        assert!(record_gram(&mut t, &kernel(1.3, 0.8), x, Some(short)).is_err());
        assert!(record_gram(&mut t, &kernel(1.3, 0.8), x, None).is_ok());
    }
}
