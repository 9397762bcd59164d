//! First-order optimisers for flat parameter vectors: Adam (Kingma & Ba,
//! 2015) and plain gradient ascent. They maximise: `step` moves along the
//! gradient.

/// Which update rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// Adam with β₁ = 0.9, β₂ = 0.999, ε = 1e-7 (the Keras defaults).
    Adam,
    /// x ← x + lr · g.
    Sgd,
}

/// Optimiser state for a parameter vector of fixed length.
#[derive(Clone, Debug)]
pub struct Ascent {
    rule: Rule,
    lr: f64,
    m: Vec<f64>,
    v: Vec<f64>,
    t: i32,
}

impl Ascent {
    /// A fresh optimiser for `n` parameters.
    pub fn new(rule: Rule, lr: f64, n: usize) -> Ascent {
        Ascent {
            rule,
            lr,
            m: vec![0.0; n],
            v: vec![0.0; n],
            t: 0,
        }
    }

    /// Scale the learning rate (after a rejected step: 0.5).
    pub fn scale_lr(&mut self, factor: f64) {
        self.lr *= factor;
    }

    /// The learning rate.
    pub fn lr(&self) -> f64 {
        self.lr
    }

    /// One step up the gradient `g` (same length as `x`).
    pub fn step(&mut self, x: &mut [f64], g: &[f64]) {
        self.t += 1;
        match self.rule {
            Rule::Sgd => {
                for (xi, gi) in x.iter_mut().zip(g) {
                    *xi += self.lr * gi;
                }
            }
            Rule::Adam => {
                let (b1, b2, eps): (f64, f64, f64) = (0.9, 0.999, 1e-7);
                let lr_t = self.lr * (1.0 - b2.powi(self.t)).sqrt() / (1.0 - b1.powi(self.t));
                for i in 0..x.len() {
                    self.m[i] = b1 * self.m[i] + (1.0 - b1) * g[i];
                    self.v[i] = b2 * self.v[i] + (1.0 - b2) * g[i] * g[i];
                    x[i] += lr_t * self.m[i] / (self.v[i].sqrt() + eps);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adam_climbs_a_quadratic() {
        let mut x = vec![3.0, -2.0];
        let mut opt = Ascent::new(Rule::Adam, 0.1, 2);
        for _ in 0..2000 {
            let g: Vec<f64> = x.iter().map(|v| -2.0 * (v - 1.0)).collect();
            opt.step(&mut x, &g);
        }
        assert!(x.iter().all(|v| (v - 1.0).abs() < 1e-3), "{x:?}");
    }
}
