//! Feature networks of deep kernels: `deep(kernel, mlp([64, 8]))` is the
//! kernel k(g(x), g(x′)) on the outputs of a fully connected network g.
//!
//! For inputs X [B, D] and widths w₁ … w_L, layer l computes
//! Z_l = H_{l−1} W_l + 1 b_lᵀ with W_l [w_{l−1}, w_l], b_l \[w_l\], H₀ = X,
//! and H_l = σ(Z_l) for the hidden layers, H_L = Z_L for the last one (the
//! features [B, w_L] are linear in the last hidden layer). The weights are
//! stored flat, layer by layer: W_l column by column, then b_l.
//!
//! Initialisation is seeded: W_l ~ N(0, gain / w_{l−1}) entry by entry
//! (gain 2 before a ReLU, 1 otherwise), b_l = 0.
//!
//! The forward pass is recorded on the matrix-level tape
//! ([`tempest_math::tape`]): per layer the parts W_l and b_l of the one
//! weight vector, the product, the broadcast bias and the activation, so
//! the reverse pass is the tape's: from H̄_L [B, w_L] it gives
//! Z̄_L = H̄_L, W̄_l = H_{l−1}ᵀ Z̄_l, b̄_l = 1ᵀ Z̄_l,
//! H̄_{l−1} = Z̄_l W_lᵀ, Z̄_{l−1} = H̄_{l−1} ∘ σ′(Z_{l−1}).
//! [`Network::record`] puts the network on a caller's tape, where its
//! inputs and weights may themselves be computed (an inner loop, a
//! meta-learner).

use crate::kernel::Inputs;
use nalgebra::DMatrix;
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand_distr::{Distribution, StandardNormal};
use tempest_core::error::{Error, ErrorKind};
use tempest_math::tape::{self, Unary, Var};

/// The most weights a feature network may have.
pub const MAX_WEIGHTS: usize = 50_000_000;

/// The activation of the hidden layers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Activation {
    /// max(0, z).
    Relu,
    /// tanh(z).
    Tanh,
}

impl Activation {
    /// Every activation with its name in the model language.
    pub const ALL: [(Activation, &'static str); 2] =
        [(Activation::Relu, "relu"), (Activation::Tanh, "tanh")];

    /// By name (`"relu"`, `"tanh"`).
    pub fn from_name(name: &str) -> Option<Activation> {
        Self::ALL.iter().find(|(_, n)| *n == name).map(|(a, _)| *a)
    }

    /// Its name in the model language.
    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(a, _)| *a == self)
            .map_or("relu", |(_, n)| n)
    }

    /// The element-wise function of the tape it is.
    pub fn unary(self) -> Unary {
        match self {
            Activation::Relu => Unary::Relu,
            Activation::Tanh => Unary::Tanh,
        }
    }
}

/// A network's shape: its input dimension, layer widths and activation.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct NetSpec {
    /// The input dimension D.
    pub input: usize,
    /// The widths w₁ … w_L (the last is the feature dimension).
    pub widths: Vec<usize>,
    /// The hidden layers' activation.
    pub activation: Activation,
}

impl NetSpec {
    /// The shape, refused when a width is zero, the network has no layer,
    /// or it would have more than [`MAX_WEIGHTS`] weights.
    pub fn new(input: usize, widths: Vec<usize>, activation: Activation) -> Result<NetSpec, Error> {
        let spec = NetSpec {
            input,
            widths,
            activation,
        };
        if spec.widths.is_empty() || spec.widths.contains(&0) || input == 0 {
            return Err(Error::new(
                ErrorKind::Shape,
                format!(
                    "a feature network needs positive widths and inputs, found {} inputs and widths {:?}",
                    input, spec.widths
                ),
            ));
        }
        match spec.count() {
            Some(n) if n <= MAX_WEIGHTS => Ok(spec),
            _ => Err(Error::new(
                ErrorKind::Shape,
                format!(
                    "the feature network {} has more than {MAX_WEIGHTS} weights",
                    spec.describe()
                ),
            )),
        }
    }

    /// For widths alone (before the input dimension is known): the first
    /// layer at which the network, counted with one input column (the
    /// fewest it can have), passes [`MAX_WEIGHTS`] weights, and the count
    /// there. `None` when it stays within.
    pub fn first_layer_past_limit(widths: &[usize]) -> Option<(usize, u128)> {
        let (mut fan_in, mut total) = (1u128, 0u128);
        for (k, &w) in widths.iter().enumerate() {
            let w = w as u128;
            total = total.saturating_add(fan_in.saturating_mul(w).saturating_add(w));
            if total > MAX_WEIGHTS as u128 {
                return Some((k, total));
            }
            fan_in = w;
        }
        None
    }

    /// The number of weights (`None` on overflow).
    fn count(&self) -> Option<usize> {
        let mut fan_in = self.input;
        let mut total = 0usize;
        for &w in &self.widths {
            total = total.checked_add(fan_in.checked_mul(w)?.checked_add(w)?)?;
            fan_in = w;
        }
        Some(total)
    }

    /// The number of weights.
    pub fn len(&self) -> usize {
        self.count().unwrap_or(usize::MAX)
    }

    /// Whether there are none (never, for a valid shape).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The feature dimension w_L.
    pub fn features(&self) -> usize {
        self.widths.last().copied().unwrap_or(self.input)
    }

    /// The widest layer (inputs included).
    pub fn widest(&self) -> usize {
        self.widths.iter().copied().fold(self.input, usize::max)
    }

    /// `36 → 64 → 8 (relu)`.
    pub fn describe(&self) -> String {
        let mut s = self.input.to_string();
        for w in &self.widths {
            s.push_str(&format!(" → {w}"));
        }
        format!("{s} ({})", self.activation.name())
    }

    /// The layers' (fan-in, width, offset of W, offset of b).
    fn layers(&self) -> Vec<(usize, usize, usize, usize)> {
        let mut out = Vec::with_capacity(self.widths.len());
        let (mut fan_in, mut off) = (self.input, 0);
        for &w in &self.widths {
            out.push((fan_in, w, off, off + fan_in * w));
            off += fan_in * w + w;
            fan_in = w;
        }
        out
    }

    /// Seeded initial weights (see the module documentation).
    pub fn init(&self, seed: u64) -> Vec<f64> {
        let mut rng = StdRng::seed_from_u64(seed ^ 0x6e65_7477_6f72_6b73);
        let mut w = vec![0.0; self.len()];
        let last = self.widths.len() - 1;
        for (l, (fan_in, width, ow, _)) in self.layers().into_iter().enumerate() {
            let gain = if l < last && self.activation == Activation::Relu {
                2.0
            } else {
                1.0
            };
            let sd = (gain / fan_in as f64).sqrt();
            for v in &mut w[ow..ow + fan_in * width] {
                let z: f64 = StandardNormal.sample(&mut rng);
                *v = sd * z;
            }
        }
        w
    }
}

/// A feature network with its weights.
#[derive(Clone, Debug, PartialEq)]
pub struct Network {
    /// Its shape.
    pub spec: NetSpec,
    /// Its weights, laid out as in the module documentation.
    pub weights: Vec<f64>,
}

/// A forward pass kept for the reverse pass: its tape (inputs a constant,
/// the weights one input vector) and the features' node.
pub struct Trace {
    tape: tape::Tape,
    weights: Var,
    features: Var,
}

impl Trace {
    /// The features H_L [B, w_L].
    pub fn features(&self) -> Inputs {
        Inputs::from_matrix(self.tape.value(self.features))
    }
}

impl Network {
    /// The network with `weights` (their number must match the shape).
    pub fn new(spec: NetSpec, weights: Vec<f64>) -> Result<Network, Error> {
        if weights.len() != spec.len() {
            return Err(Error::new(
                ErrorKind::Shape,
                format!(
                    "the feature network {} has {} weights, but {} were given",
                    spec.describe(),
                    spec.len(),
                    weights.len()
                ),
            ));
        }
        Ok(Network { spec, weights })
    }

    /// The log density of the weights under independent N(0, σ²) priors.
    pub fn log_prior(&self, sd: f64) -> f64 {
        let ss: f64 = self.weights.iter().map(|w| w * w).sum();
        let n = self.weights.len() as f64;
        -0.5 * ss / (sd * sd) - n * (sd.ln() + 0.5 * (2.0 * std::f64::consts::PI).ln())
    }

    /// Records the network of this shape on `tape`: inputs `x` [B, D] and
    /// weights `w` [len, 1] (laid out as in the module documentation)
    /// give the features' node [B, w_L]. The network's own weights are not
    /// read: `w` may be computed on the tape.
    pub fn record(&self, tape: &mut tape::Tape, x: Var, w: Var) -> Result<Var, Error> {
        let spec = &self.spec;
        self.check_inputs(tape.shape(x).1)?;
        if tape.shape(w) != (spec.len(), 1) {
            return Err(Error::new(
                ErrorKind::Shape,
                format!(
                    "the feature network {} has {} weights, but the weights node is {:?}",
                    spec.describe(),
                    spec.len(),
                    tape.shape(w)
                ),
            ));
        }
        let last = spec.widths.len() - 1;
        let mut h = x;
        for (l, (fan_in, width, ow, ob)) in spec.layers().into_iter().enumerate() {
            let wl = tape.part(w, ow, fan_in, width)?;
            let bl = tape.part(w, ob, 1, width)?;
            let z = tape.matmul(h, false, wl, false)?;
            let z = tape.add(z, bl)?;
            h = if l < last {
                tape.map(z, spec.activation.unary())?
            } else {
                z
            };
        }
        Ok(h)
    }

    /// The forward pass at inputs X [B, D], kept for [`Network::backward`].
    pub fn forward(&self, x: &Inputs) -> Result<Trace, Error> {
        // Checked before the inputs are copied onto the tape.
        self.check_inputs(x.dim())?;
        let mut tape = tape::Tape::new();
        let xs = tape.constant(DMatrix::from_row_slice(x.len(), x.dim(), x.as_flat()));
        let weights = tape.input_vector(&self.weights);
        let features = self.record(&mut tape, xs, weights)?;
        Ok(Trace {
            tape,
            weights,
            features,
        })
    }

    /// A shape error unless the points have the network's `d` inputs.
    fn check_inputs(&self, d: usize) -> Result<(), Error> {
        if d == self.spec.input {
            return Ok(());
        }
        Err(Error::new(
            ErrorKind::Shape,
            format!(
                "the feature network {} takes {} inputs, but the points have {d}",
                self.spec.describe(),
                self.spec.input
            ),
        ))
    }

    /// The features g(X) [B, w_L].
    pub fn map(&self, x: &Inputs) -> Result<Inputs, Error> {
        Ok(self.forward(x)?.features())
    }

    /// The features of many points, `batch` rows at a time (the hidden
    /// layers never hold more than `batch` rows).
    pub fn map_batched(&self, x: &Inputs, batch: usize) -> Result<Inputs, Error> {
        let mut out = Vec::with_capacity(x.len() * self.spec.features());
        for start in (0..x.len()).step_by(batch.max(1)) {
            let part = x.slice(start..(start + batch.max(1)).min(x.len()));
            out.extend_from_slice(self.map(&part)?.as_flat());
        }
        Ok(Inputs::from_flat(out, self.spec.features()))
    }

    /// The weights' adjoint \[len\] from the features' adjoint H̄_L [B, w_L]
    /// (the tape's backward pass; see the module documentation).
    pub fn backward(&self, trace: &Trace, h_bar: &DMatrix<f64>) -> Result<Vec<f64>, Error> {
        let grads = trace.tape.vjp(trace.features, h_bar.clone())?;
        Ok(grads.wrt(trace.weights).as_slice().to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tempest_math::adjoint::testing::{central, normal, rng};

    /// f(w) = Σ C ∘ g_w(X) against central differences in every weight,
    /// for both activations.
    #[test]
    fn the_reverse_pass_matches_finite_differences() {
        for act in [Activation::Tanh, Activation::Relu] {
            let mut r = rng(3);
            let spec = NetSpec::new(3, vec![5, 4, 2], act).unwrap();
            let x = Inputs::from_matrix(&normal(&mut r, 6, 3));
            let c = normal(&mut r, 6, 2);
            let mut w = spec.init(7);
            // Non-zero biases, so that the bias paths are exercised.
            for v in w.iter_mut() {
                if *v == 0.0 {
                    *v = 0.1;
                }
            }
            let f = |w: &[f64]| -> f64 {
                let net = Network::new(spec.clone(), w.to_vec()).unwrap();
                let h = net.map(&x).unwrap();
                (0..6)
                    .map(|i| (0..2).map(|k| c[(i, k)] * h.row(i)[k]).sum::<f64>())
                    .sum()
            };
            let net = Network::new(spec.clone(), w.clone()).unwrap();
            let tape = net.forward(&x).unwrap();
            let g = net.backward(&tape, &c).unwrap();
            for i in 0..w.len() {
                let want = central(|h| {
                    let mut v = w.clone();
                    v[i] += h;
                    f(&v)
                });
                assert!(
                    (g[i] - want).abs() < 1e-6 * (1.0 + want.abs()),
                    "{act:?} weight {i}: {} vs {want}",
                    g[i]
                );
            }
        }
    }

    #[test]
    fn shapes_and_seeds() {
        let spec = NetSpec::new(36, vec![64, 8], Activation::Relu).unwrap();
        assert_eq!(spec.len(), 36 * 64 + 64 + 64 * 8 + 8);
        assert_eq!(spec.init(1), spec.init(1));
        assert_ne!(spec.init(1), spec.init(2));
        assert!(NetSpec::new(3, vec![], Activation::Relu).is_err());
        assert!(NetSpec::new(100_000, vec![100_000, 10], Activation::Relu).is_err());
        // Widths alone: 1 → 25,000,000 has 50,000,000 weights, one more
        // layer of 2 passes the limit there.
        assert_eq!(NetSpec::first_layer_past_limit(&[64, 64, 16]), None);
        assert_eq!(NetSpec::first_layer_past_limit(&[25_000_000]), None);
        assert_eq!(
            NetSpec::first_layer_past_limit(&[25_000_000, 2]),
            Some((1, 100_000_002))
        );
        assert_eq!(
            NetSpec::first_layer_past_limit(&[usize::MAX]),
            Some((0, 2 * usize::MAX as u128))
        );
        let net = Network::new(spec.clone(), spec.init(0)).unwrap();
        let x = Inputs::from_matrix(&DMatrix::from_fn(10, 36, |i, j| (i * j) as f64 / 50.0));
        let whole = net.map(&x).unwrap();
        assert_eq!(whole, net.map_batched(&x, 3).unwrap());
        assert!(
            net.map(&Inputs::from_matrix(&DMatrix::zeros(2, 5)))
                .is_err()
        );
    }
}
