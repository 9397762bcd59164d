//! The expected log-sum-exp of independent normals, and its derivatives:
//!
//!   L(m, v) = E[log Σ_c exp f_c],   f_c ~ N(m_c, v_c) independent, c = 1..C,
//!
//! the part of the expected log-softmax E[log softmax_y(f)] = m_y − L that
//! needs an integral; ∂L/∂m_c = E[softmax_c(f)] are the predictive class
//! probabilities.
//!
//! The rule is the C-dimensional Gauss–Hermite product rule with n points
//! per class, computed in O(C·n) work per node of a one-dimensional
//! integral instead of O(nᶜ). With S = Σ_c X_c, X_c = exp f_c, and
//! log S = ∫ (e^{−u} − e^{−uS}) du/u (u > 0), independence gives
//!
//!   L = ∫_ℝ [exp(−eˢ) − Π_c φ_c(eˢ)] ds,   φ_c(u) = E[exp(−u X_c)],
//!
//! and φ_c by the n-point rule makes the integral exactly the product rule's
//! value. The outer integral is the trapezoid rule in s with step h (its
//! integrand is analytic in a strip, so the error falls like exp(−π²/h):
//! about 1e-13 at the default h = 0.35), walked from the middle outwards
//! until the integrand is negligible; the left tail beyond the walk, where
//! the integrand is linear in eˢ, is summed as a geometric series. The
//! derivatives are those of the same sum, so they are exact for the value
//! that is reported.

use super::quadrature::GaussHermite;
use super::vector::exp_in_place;

/// The default step of the outer trapezoid rule.
pub const DEFAULT_STEP: f64 = 0.35;

/// The most outer nodes on each side of the middle (a bound for absurd
/// means and variances; a finite input needs fewer than 200).
const MAX_NODES: usize = 4000;

/// The expected log-sum-exp rule: Gauss–Hermite with n points per class,
/// trapezoid step h outside.
#[derive(Clone, Debug)]
pub struct LseRule {
    /// The inner rule.
    pub gh: GaussHermite,
    /// The outer step.
    pub h: f64,
}

/// L and its derivatives (∂L/∂m_c and ∂L/∂v_c have C entries each).
#[derive(Clone, Debug, PartialEq)]
pub struct Lse {
    /// L = E[log Σ exp f_c].
    pub value: f64,
    /// ∂L/∂m_c = E[softmax_c(f)].
    pub dm: Vec<f64>,
    /// ∂L/∂v_c.
    pub dv: Vec<f64>,
}

impl LseRule {
    /// The rule with `n` Gauss–Hermite points per class.
    pub fn new(n: usize) -> LseRule {
        LseRule {
            gh: GaussHermite::new(n),
            h: DEFAULT_STEP,
        }
    }

    /// The points per class.
    pub fn points(&self) -> usize {
        self.gh.points.len()
    }

    /// L(m, v) and its derivatives for means `m` and variances `v` (both
    /// \[C\]; negative variances count as 0). A non-finite input gives a
    /// non-finite value.
    pub fn eval(&self, m: &[f64], v: &[f64]) -> Lse {
        let c = m.len();
        let n = self.points();
        let (z, w) = (&self.gh.points, &self.gh.weights);
        let bad = || Lse {
            value: f64::NAN,
            dm: vec![f64::NAN; c],
            dv: vec![f64::NAN; c],
        };
        if c == 0 || m.iter().chain(v).any(|x| !x.is_finite()) {
            return bad();
        }
        let top = m.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let sd: Vec<f64> = v.iter().map(|x| x.max(0.0).sqrt()).collect();
        // log X_ck = m_c − top + σ_c z_k, kept as logarithms so that wide
        // normals do not overflow, with the rule's log E[S] and a bound on
        // log E[S²] (which decide where the left tail is linear).
        let mut lx = vec![0.0; c * n];
        for j in 0..c {
            for k in 0..n {
                lx[j * n + k] = m[j] - top + sd[j] * z[k];
            }
        }
        let log_sum = |scale: f64| {
            let mx = lx.iter().fold(f64::NEG_INFINITY, |a, &b| a.max(scale * b));
            let total: f64 = (0..c * n)
                .map(|i| w[i % n] * (scale * lx[i] - mx).exp())
                .sum();
            mx + total.ln()
        };
        let log_mean = log_sum(1.0);
        let log_second = log_sum(2.0) + (c as f64).ln();
        if !log_mean.is_finite() || !log_second.is_finite() {
            return bad();
        }
        let mut acc = Acc::new(c);
        let mut node = Node::new(c, n);
        let s0 = -log_mean;
        // The middle node, then rightwards until both terms vanish.
        self.node(s0, &lx, &sd, &mut node);
        acc.add(&node, 1.0);
        let (mut right, mut left) = (false, false);
        for i in 1..=MAX_NODES {
            self.node(s0 + i as f64 * self.h, &lx, &sd, &mut node);
            acc.add(&node, 1.0);
            if node.s > 3.7 && node.prod < 1e-18 {
                right = true;
                break;
            }
        }
        // Leftwards until the integrand is linear in u = eˢ to 1e-14
        // (u² E[S²] below it), then the geometric tail of the remaining
        // nodes (each term ∝ u).
        for i in 1..=MAX_NODES {
            if !right {
                break;
            }
            self.node(s0 - i as f64 * self.h, &lx, &sd, &mut node);
            acc.add(&node, 1.0);
            if 2.0 * node.s + log_second < -32.2 {
                let r = (-self.h).exp();
                acc.add(&node, r / (1.0 - r));
                left = true;
                break;
            }
        }
        if !(right && left && acc.value.is_finite()) {
            // A walk ran out of nodes: the normals are absurdly wide.
            return bad();
        }
        Lse {
            value: top + self.h * acc.value,
            dm: acc.dm.iter().map(|d| self.h * d).collect(),
            dv: (0..c)
                .map(|j| {
                    if sd[j] > 0.0 {
                        self.h * acc.dsd[j] / (2.0 * sd[j])
                    } else {
                        0.5 * self.h * acc.dmm[j]
                    }
                })
                .collect(),
        }
    }

    /// The integrand and its derivatives at one outer node s.
    fn node(&self, s: f64, lx: &[f64], sd: &[f64], out: &mut Node) {
        let n = self.points();
        let (z, w) = (&self.gh.points, &self.gh.weights);
        let c = sd.len();
        out.s = s;
        // uX_ck = e^{s + log X_ck}, then e^{−uX_ck}, vectorised; an
        // argument past 6.7 makes e^{−uX} underflow to 0 (nothing to add).
        for (t, l) in out.ux.iter_mut().zip(lx) {
            *t = (s + l).min(6.7);
        }
        exp_in_place(&mut out.ux);
        for (e, t) in out.e.iter_mut().zip(&out.ux) {
            *e = -t;
        }
        exp_in_place(&mut out.e);
        for (j, &sd_j) in sd.iter().enumerate() {
            let (mut phi, mut a, mut b, mut d) = (0.0, 0.0, 0.0, 0.0);
            let zero_sd = sd_j == 0.0;
            for k in 0..n {
                let (ux, e) = (out.ux[j * n + k], w[k] * out.e[j * n + k]);
                phi += e;
                a += e * ux;
                b += e * ux * z[k];
                if zero_sd {
                    d += e * ux * (1.0 - ux);
                }
            }
            out.phi[j] = phi;
            out.a[j] = a;
            out.b[j] = b;
            out.d[j] = d;
        }
        // Products of the other classes' φ, by prefix and suffix products.
        let mut prefix = 1.0;
        for j in 0..c {
            out.others[j] = prefix;
            prefix *= out.phi[j];
        }
        out.prod = prefix;
        let mut suffix = 1.0;
        for j in (0..c).rev() {
            out.others[j] *= suffix;
            suffix *= out.phi[j];
        }
        out.value = (-s.exp()).exp() - out.prod;
    }
}

/// The integrand at one node s (u = eˢ): uX_ck and e^{−uX_ck} [C·n], φ_c(u), a_c = −∂φ_c/∂m_c,
/// b_c = −∂φ_c/∂σ_c, d_c = −∂²φ_c/∂m_c² (only where σ_c = 0), Π_{c′≠c} φ_c′,
/// Π_c φ_c and exp(−u) − Π_c φ_c.
struct Node {
    s: f64,
    ux: Vec<f64>,
    e: Vec<f64>,
    phi: Vec<f64>,
    a: Vec<f64>,
    b: Vec<f64>,
    d: Vec<f64>,
    others: Vec<f64>,
    prod: f64,
    value: f64,
}

impl Node {
    fn new(c: usize, n: usize) -> Node {
        Node {
            s: 0.0,
            ux: vec![0.0; c * n],
            e: vec![0.0; c * n],
            phi: vec![0.0; c],
            a: vec![0.0; c],
            b: vec![0.0; c],
            d: vec![0.0; c],
            others: vec![0.0; c],
            prod: 0.0,
            value: 0.0,
        }
    }
}

/// Sums over the nodes of the integrand and its derivatives with respect
/// to m_c, σ_c and (twice) m_c.
struct Acc {
    value: f64,
    dm: Vec<f64>,
    dsd: Vec<f64>,
    dmm: Vec<f64>,
}

impl Acc {
    fn new(c: usize) -> Acc {
        Acc {
            value: 0.0,
            dm: vec![0.0; c],
            dsd: vec![0.0; c],
            dmm: vec![0.0; c],
        }
    }

    /// Add `weight` times the node.
    fn add(&mut self, node: &Node, weight: f64) {
        self.value += weight * node.value;
        for j in 0..self.dm.len() {
            let o = weight * node.others[j];
            self.dm[j] += o * node.a[j];
            self.dsd[j] += o * node.b[j];
            self.dmm[j] += o * node.d[j];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The n-point product rule, directly (nᶜ terms).
    fn product(m: &[f64], v: &[f64], n: usize) -> f64 {
        let gh = GaussHermite::new(n);
        let c = m.len();
        let mut idx = vec![0usize; c];
        let mut total = 0.0;
        loop {
            let mut w = 1.0;
            let f: Vec<f64> = (0..c)
                .map(|j| {
                    w *= gh.weights[idx[j]];
                    m[j] + v[j].sqrt() * gh.points[idx[j]]
                })
                .collect();
            let top = f.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            total += w * (top + f.iter().map(|x| (x - top).exp()).sum::<f64>().ln());
            let mut j = 0;
            loop {
                if j == c {
                    return total;
                }
                idx[j] += 1;
                if idx[j] < n {
                    break;
                }
                idx[j] = 0;
                j += 1;
            }
        }
    }

    const CASES: &[(&[f64], &[f64])] = &[
        (&[0.3, -1.2], &[1.7, 0.12]),
        (&[2.0, 0.0, -3.0], &[0.5, 2.5, 1.0]),
        (&[-40.0, -41.0, -39.5], &[0.01, 3.0, 0.7]),
        (&[5.0, 5.0, 5.0, 5.0], &[1.0, 1.0, 1.0, 1.0]),
        (&[1.0, -1.0], &[0.0, 0.8]),
        // Classes far below the others.
        (&[0.0, -60.0, 1.0, -45.0], &[1.0, 0.5, 2.0, 4.0]),
    ];

    #[test]
    fn equals_the_product_rule() {
        let rule = LseRule::new(12);
        for (m, v) in CASES {
            let got = rule.eval(m, v).value;
            let want = product(m, v, 12);
            assert!((got - want).abs() < 1e-11, "{m:?} {v:?}: {got} vs {want}");
        }
    }

    #[test]
    fn derivatives_match_finite_differences() {
        let rule = LseRule::new(16);
        for (m, v) in CASES {
            let l = rule.eval(m, v);
            let total: f64 = l.dm.iter().sum();
            assert!((total - 1.0).abs() < 1e-10, "probabilities sum to {total}");
            for j in 0..m.len() {
                let h = 1e-5;
                let shift = |dm: f64, dv: f64| {
                    let mut mm = m.to_vec();
                    let mut vv = v.to_vec();
                    mm[j] += dm;
                    vv[j] += dv;
                    rule.eval(&mm, &vv).value
                };
                let fd_m = (shift(h, 0.0) - shift(-h, 0.0)) / (2.0 * h);
                assert!(
                    (fd_m - l.dm[j]).abs() < 1e-8,
                    "dm {j}: {fd_m} vs {}",
                    l.dm[j]
                );
                if v[j] > 0.0 {
                    let fd_v = (shift(0.0, h) - shift(0.0, -h)) / (2.0 * h);
                    assert!(
                        (fd_v - l.dv[j]).abs() < 1e-7,
                        "dv {j}: {fd_v} vs {}",
                        l.dv[j]
                    );
                } else {
                    let fd_v = (shift(0.0, 1e-6) - l.value) / 1e-6;
                    assert!(
                        (fd_v - l.dv[j]).abs() < 1e-4,
                        "dv {j} at 0: {fd_v} vs {}",
                        l.dv[j]
                    );
                }
            }
        }
    }

    #[test]
    fn one_class_and_point_masses_are_exact() {
        let rule = LseRule::new(20);
        let l = rule.eval(&[0.7], &[2.0]);
        assert!(
            (l.value - 0.7).abs() < 1e-11 && (l.dm[0] - 1.0).abs() < 1e-11,
            "{l:?}"
        );
        let l = rule.eval(&[0.3, -0.4, 1.1], &[0.0, 0.0, 0.0]);
        let exact = [0.3f64, -0.4, 1.1]
            .iter()
            .map(|x| x.exp())
            .sum::<f64>()
            .ln();
        assert!((l.value - exact).abs() < 1e-11, "{l:?}");
    }

    #[test]
    fn non_finite_inputs_give_non_finite_values() {
        let rule = LseRule::new(8);
        assert!(rule.eval(&[f64::NAN, 0.0], &[1.0, 1.0]).value.is_nan());
        assert!(rule.eval(&[0.0, 0.0], &[f64::INFINITY, 1.0]).value.is_nan());
        assert!(rule.eval(&[0.0, 0.0], &[1e300, 1.0]).value.is_nan());
    }
}
