//! Every operation's backward rule against central finite differences, and
//! compositions of them (a network layer, a Gaussian log marginal
//! likelihood, a softmax loss) against closed forms.

use super::*;
use crate::adjoint::testing::*;
use rand::rngs::StdRng;

/// Checks ⟨C, f(x + h d)⟩'s derivative at h = 0 against Σᵢ ⟨x̄ᵢ, dᵢ⟩ from
/// the tape, for a random C and random directions dᵢ (symmetric for the
/// inputs flagged `sym`).
fn check(
    what: &str,
    r: &mut StdRng,
    inputs: &[(DMatrix<f64>, bool)],
    f: impl Fn(&mut Tape, &[Var]) -> Result<Var, Error>,
) {
    let run = |xs: &[DMatrix<f64>]| -> (Tape, Vec<Var>, Var) {
        let mut t = Tape::new();
        let vars: Vec<Var> = xs.iter().map(|x| t.input(x.clone())).collect();
        let out = f(&mut t, &vars).unwrap();
        (t, vars, out)
    };
    let xs: Vec<DMatrix<f64>> = inputs.iter().map(|(x, _)| x.clone()).collect();
    let (tape, vars, out) = run(&xs);
    let (or, oc) = tape.shape(out);
    let c = normal(r, or, oc);
    let dirs: Vec<DMatrix<f64>> = inputs
        .iter()
        .map(|(x, sym)| {
            if *sym {
                sym_dir(r, x.nrows())
            } else {
                normal(r, x.nrows(), x.ncols())
            }
        })
        .collect();
    let grads = tape.vjp(out, c.clone()).unwrap();
    let got: f64 = vars
        .iter()
        .zip(&dirs)
        .map(|(v, d)| inner(&grads.wrt(*v), d))
        .sum();
    let want = central(|h| {
        let moved: Vec<DMatrix<f64>> = xs.iter().zip(&dirs).map(|(x, d)| x + d * h).collect();
        let (t, _, o) = run(&moved);
        inner(&c, t.value(o))
    });
    assert_close(got, want, what);
}

fn positive(r: &mut StdRng, m: usize, n: usize) -> DMatrix<f64> {
    normal(r, m, n).map(|v| 0.5 + v.abs())
}

#[test]
fn element_wise_operations_broadcast_and_match_finite_differences() {
    let mut r = rng(1);
    for (sa, sb) in [
        ((3, 4), (3, 4)),
        ((3, 4), (1, 4)),
        ((3, 4), (3, 1)),
        ((1, 1), (3, 4)),
    ] {
        let a = normal(&mut r, sa.0, sa.1);
        let b = positive(&mut r, sb.0, sb.1);
        let ins = [(a, false), (b, false)];
        check("add", &mut r, &ins, |t, v| t.add(v[0], v[1]));
        check("sub", &mut r, &ins, |t, v| t.sub(v[0], v[1]));
        check("mul", &mut r, &ins, |t, v| t.mul(v[0], v[1]));
        check("div", &mut r, &ins, |t, v| t.div(v[0], v[1]));
    }
    let a = normal(&mut r, 3, 2);
    check("scale", &mut r, &[(a.clone(), false)], |t, v| {
        t.scale(v[0], -1.7)
    });
    check("shift", &mut r, &[(a.clone(), false)], |t, v| {
        t.shift(v[0], 2.5)
    });
    for f in [
        Unary::Tanh,
        Unary::Relu,
        Unary::Exp,
        Unary::Softplus,
        Unary::Sigmoid,
        Unary::Square,
    ] {
        check(&format!("{f:?}"), &mut r, &[(a.clone(), false)], |t, v| {
            t.map(v[0], f)
        });
    }
    let p = positive(&mut r, 3, 2);
    for f in [Unary::Ln, Unary::Sqrt] {
        check(&format!("{f:?}"), &mut r, &[(p.clone(), false)], |t, v| {
            t.map(v[0], f)
        });
    }
    assert!(Tape::new().add(Var(0), Var(1)).is_err());
    assert!(Tape::new().scalar(Var(3)).is_err());
    assert!(Tape::new().gradient(Var(0)).is_err());
    let mut t = Tape::new();
    let (x, y) = (t.input(normal(&mut r, 3, 4)), t.input(normal(&mut r, 2, 4)));
    assert!(t.add(x, y).is_err(), "[3, 4] + [2, 4] does not broadcast");
}

#[test]
fn products_reductions_and_parts_match_finite_differences() {
    let mut r = rng(2);
    for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
        let a = if ta {
            normal(&mut r, 4, 3)
        } else {
            normal(&mut r, 3, 4)
        };
        let b = if tb {
            normal(&mut r, 2, 4)
        } else {
            normal(&mut r, 4, 2)
        };
        check(
            &format!("matmul {ta} {tb}"),
            &mut r,
            &[(a, false), (b, false)],
            |t, v| t.matmul(v[0], ta, v[1], tb),
        );
    }
    let a = normal(&mut r, 3, 4);
    let one = [(a.clone(), false)];
    check("transpose", &mut r, &one, |t, v| t.transpose(v[0]));
    check("sum", &mut r, &one, |t, v| t.sum(v[0]));
    check("sum_rows", &mut r, &one, |t, v| t.sum_rows(v[0]));
    check("sum_cols", &mut r, &one, |t, v| t.sum_cols(v[0]));
    check("log_softmax_rows", &mut r, &one, |t, v| {
        t.log_softmax_rows(v[0])
    });
    let w = normal(&mut r, 20, 1);
    check("part", &mut r, &[(w, false)], |t, v| t.part(v[0], 5, 3, 4));
    check("pick", &mut r, &one, |t, v| {
        t.pick(v[0], vec![(0, 1), (2, 3), (0, 1)])
    });
    let s = normal(&mut r, 4, 4);
    check("diag", &mut r, &[(s, false)], |t, v| t.diag(v[0]));
    let mut t = Tape::new();
    let w = t.input(normal(&mut r, 5, 1));
    assert!(t.part(w, 3, 2, 2).is_err(), "entries 3..7 of 5");
    assert!(t.pick(w, vec![(5, 0)]).is_err());
}

#[test]
fn factors_solves_and_log_determinants_match_finite_differences() {
    let mut r = rng(3);
    for n in [1, 4, 7] {
        let a = spd(&mut r, n);
        let b = normal(&mut r, n, 2);
        check("cholesky", &mut r, &[(a.clone(), true)], |t, v| {
            t.cholesky(v[0], "A")
        });
        let ins = [(a.clone(), true), (b.clone(), false)];
        check("solve_lower", &mut r, &ins, |t, v| {
            let l = t.cholesky(v[0], "A")?;
            t.solve_lower(l, v[1])
        });
        check("solve_lower_t", &mut r, &ins, |t, v| {
            let l = t.cholesky(v[0], "A")?;
            t.solve_lower_t(l, v[1])
        });
        check("log_det_chol", &mut r, &[(a.clone(), true)], |t, v| {
            let l = t.cholesky(v[0], "A")?;
            t.log_det_chol(l)
        });
    }
    let mut t = Tape::new();
    let bad = t.input(DMatrix::from_row_slice(2, 2, &[1.0, 2.0, 2.0, -5.0]));
    let e = t.cholesky(bad, "the test matrix").unwrap_err();
    assert!(e.to_string().contains("the test matrix"), "{e}");
}

/// The Gaussian log marginal likelihood −½ yᵀA⁻¹y − ½ ln det A composed
/// on the tape: its adjoint in A is ½(ααᵀ − A⁻¹) with α = A⁻¹y, and in y
/// it is −α.
#[test]
fn a_composed_log_marginal_likelihood_has_its_closed_form_gradient() {
    let mut r = rng(4);
    let n = 6;
    let a = spd(&mut r, n);
    let y = normal(&mut r, n, 1);
    let mut t = Tape::new();
    let (av, yv) = (t.input(a.clone()), t.input(y.clone()));
    let l = t.cholesky(av, "A").unwrap();
    let z = t.solve_lower(l, yv).unwrap();
    let zz = t.mul(z, z).unwrap();
    let quad = t.sum(zz).unwrap();
    let ld = t.log_det_chol(l).unwrap();
    let s = t.add(quad, ld).unwrap();
    let lml = t.scale(s, -0.5).unwrap();
    let g = t.gradient(lml).unwrap();
    let inv = a.clone().try_inverse().unwrap();
    let alpha = &inv * &y;
    let want_a = (&alpha * alpha.transpose() - &inv) * 0.5;
    assert!((g.wrt(av) - want_a).abs().max() < 1e-12);
    assert!((g.wrt(yv) + alpha).abs().max() < 1e-12);
    // The value itself.
    let want = -0.5 * (y.transpose() * &inv * &y)[(0, 0)] - 0.5 * a.determinant().ln();
    assert!((t.scalar(lml).unwrap() - want).abs() < 1e-12);
}

/// Constants carry no adjoint, and a node off the path to the output gets
/// none either.
#[test]
fn constants_and_unused_nodes_carry_no_adjoint() {
    let mut t = Tape::new();
    let x = t.input_vector(&[1.0, 2.0]);
    let c = t.constant(DMatrix::from_column_slice(2, 1, &[3.0, 4.0]));
    let unused = t.map(x, Unary::Exp).unwrap();
    let p = t.mul(x, c).unwrap();
    let s = t.sum(p).unwrap();
    let g = t.gradient(s).unwrap();
    assert_eq!(g.wrt(x).as_slice(), &[3.0, 4.0]);
    assert!(g.get(c).is_none());
    assert!(g.get(unused).is_none());
    assert!(!t.varies(c));
    assert!(t.gradient(p).is_err(), "a [2, 1] node is not a number");
    assert!(t.vjp(p, DMatrix::zeros(1, 2)).is_err());
}

/// A custom node's rule is the caller's; a wrong number or shape of
/// adjoints is an internal error, not a panic.
#[test]
fn custom_nodes_compose_and_are_checked() {
    let mut t = Tape::new();
    let x = t.input_vector(&[0.5, -1.0]);
    let v = t.value(x).map(|a| a.sin());
    let xs = t.value(x).clone();
    let s = t
        .custom(&[x], v, move |g| {
            Ok(vec![g.zip_map(&xs, |g, a| g * a.cos())])
        })
        .unwrap();
    let tot = t.sum(s).unwrap();
    let g = t.gradient(tot).unwrap();
    assert!((g.wrt(x)[0] - 0.5f64.cos()).abs() < 1e-15);
    let bad = t
        .custom(&[x], DMatrix::zeros(1, 1), |_| {
            Ok(vec![DMatrix::zeros(3, 3)])
        })
        .unwrap();
    assert!(t.gradient(bad).is_err());
    let none = t
        .custom(&[x], DMatrix::zeros(1, 1), |_| Ok(vec![]))
        .unwrap();
    assert!(t.gradient(none).is_err());
}

/// Scalars and matrices in one record: θ in reverse-mode scalars through
/// transforms into a node, a Gram-like product and Cholesky factor on the
/// tape, its entries back out as scalars and into the tape again; one
/// backward pass gives θ̄ and X̄, against finite differences.
#[test]
fn scalars_and_matrices_share_one_backward_pass() {
    use crate::reverse::{self, Rev};
    use ad_trait::AD;
    use nalgebra::ComplexField;
    let mut r = rng(11);
    let x0 = normal(&mut r, 4, 2);
    let theta0 = [0.3, -0.4];
    // f(θ, X) through every bridge; generic over how it is evaluated.
    let f = |theta: &[Rev], x: DMatrix<f64>| -> Result<(Tape, Var, Var), Error> {
        let mut t = Tape::new();
        let xv = t.input(x);
        let leaves = [theta[0].exp(), theta[1].exp() * Rev::constant(2.0)];
        let w = t.gather(&leaves)?;
        let wr = t.transpose(w)?;
        let xw = t.mul(xv, wr)?;
        let k = t.matmul(xw, false, xw, true)?;
        let eye = t.constant(DMatrix::identity(4, 4));
        let k = t.add(k, eye)?;
        let l = t.cholesky(k, "K")?;
        let ld = t.log_det_chol(l)?;
        let d = t.diag(l)?;
        // Back to scalars and in again, twice.
        let mut s = t.entries(ld)?[0];
        let mut acc = t.gather(&[s])?;
        for round in 0..2 {
            let e = t.entries(d)?;
            s = s * theta[round].sin() + e[round] * e[3] + leaves[1];
            let g = t.gather(&[s, e[1]])?;
            let sq = t.map(g, Unary::Square)?;
            let tot = t.sum(sq)?;
            acc = t.add(acc, tot)?;
        }
        Ok((t, xv, acc))
    };
    let value = |theta: &[f64], x: &DMatrix<f64>| -> f64 {
        reverse::record(theta, |vars| {
            let (t, _, out) = f(vars, x.clone())?;
            t.scalar(out)
        })
        .unwrap()
    };
    let (theta_bar, x_bar) = reverse::record(&theta0, |vars| {
        let (t, xv, out) = f(vars, x0.clone())?;
        let g = t.gradient(out)?;
        Ok((
            vars.iter().map(|v| g.rev(*v)).collect::<Vec<f64>>(),
            g.wrt(xv),
        ))
    })
    .unwrap();
    for j in 0..2 {
        let want = central(|h| {
            let mut th = theta0;
            th[j] += h;
            value(&th, &x0)
        });
        assert_close(theta_bar[j], want, &format!("θ̄[{j}]"));
    }
    let dir = normal(&mut r, 4, 2);
    let want = central(|h| value(&theta0, &(&x0 + &dir * h)));
    assert_close(inner(&x_bar, &dir), want, "X̄");
}

/// Joining is checked: entries of a varying node outside a sweep, two
/// tapes in one sweep and a backward pass after the sweep closed are
/// internal errors; constants need no sweep.
#[test]
fn joining_a_sweep_is_checked() {
    use crate::reverse::{self, Rev};
    use ad_trait::AD;
    let mut t = Tape::new();
    let a = t.input_vector(&[1.0, 2.0]);
    assert!(t.entries(a).is_err());
    let c = t.number(3.0);
    assert_eq!(t.entries(c).unwrap()[0].to_constant(), 3.0);
    assert!(t.gather(&[Rev::constant(1.0)]).is_ok());
    let two = reverse::record(&[1.0], |x| {
        let mut t1 = Tape::new();
        let mut t2 = Tape::new();
        t1.gather(x)?;
        Ok(t2.gather(x).is_err())
    })
    .unwrap();
    assert!(two, "a second tape joined the sweep");
    let (tape, out) = reverse::record(&[1.0], |x| {
        let mut t = Tape::new();
        let g = t.gather(x)?;
        Ok((t, g))
    })
    .unwrap();
    assert!(tape.vjp(out, DMatrix::from_element(1, 1, 1.0)).is_err());
}

/// A sweep opened while a joined tape's sweep waits (work stolen by the
/// waiting thread) leaves that tape's backward pass as it was.
#[test]
fn a_nested_sweep_leaves_the_joined_tape_alone() {
    use crate::reverse::{self, Rev};
    let run = |steal: bool| {
        reverse::record(&[0.7, 1.1], |x| {
            let mut t = Tape::new();
            let w = t.gather(&[x[0] * x[1], x[1]])?;
            let sq = t.map(w, Unary::Square)?;
            if steal {
                let g = reverse::record(&[2.0], |y| {
                    let mut inner = Tape::new();
                    let v = inner.gather(&[y[0] * y[0]])?;
                    let e = inner.entries(v)?;
                    let out = inner.gather(&[e[0] * y[0]])?;
                    Ok(inner.gradient(out)?.rev(y[0]))
                })?;
                assert_eq!(g, 12.0);
                // A scalar sweep cannot carry an adjoint through a tape.
                let lost = reverse::sweep(&[2.0], |y| {
                    let mut inner = Tape::new();
                    let v = inner.gather(&[y[0] * y[0]])?;
                    Ok(inner.entries(v)?[0] * y[0])
                });
                assert!(lost.is_err());
            }
            let e: Vec<Rev> = t.entries(sq)?;
            let s = t.gather(&[e[0] + e[1] * x[0]])?;
            let g = t.gradient(s)?;
            Ok(vec![g.rev(x[0]), g.rev(x[1])])
        })
        .unwrap()
    };
    let (a, b) = (0.7f64, 1.1f64);
    let want = [2.0 * a * b * b + b * b, 2.0 * a * a * b + 2.0 * a * b];
    for steal in [false, true] {
        let g = run(steal);
        assert!((g[0] - want[0]).abs() < 1e-14 && (g[1] - want[1]).abs() < 1e-14);
    }
}
