//! The adjoints of the expected log-likelihood Σ_b E\[ℓ_b\] with respect to
//! the likelihood's arguments and power, for the hypers' reverse sweep
//! ([`crate::math::reverse`]): they are found once per gradient, whatever
//! the number of hypers, and the sweep carries them back through the
//! model-file expressions that make the arguments.
//!
//! Only the arguments that vary with the hypers (those on the sweep's tape)
//! need them. Each data point's expectation reads its own element of every
//! argument, so one forward-mode pass with one tangent per varying argument
//! (and one for the power) gives every element's adjoint: the tangent of
//! point b's term is ∂E\[ℓ_b\]/∂(argument at b). For the softmax the
//! arguments play no part and the power's adjoint is the untempered total;
//! for latent GPs mixed into class scores the mixing matrix's adjoint Ā
//! comes from the expectations' own pass.

use super::expect::{Expectations, Rule, mixed_softmax};
use super::model::{LikArgs, ViModel};
use crate::error::Error;
use crate::ir::bind::Bound;
use crate::ir::value::Value;
use crate::math::reverse::{self, Rev};
use crate::math::scalar::{CHUNK, Dual8};
use ad_trait::AD;
use nalgebra::DMatrix;

/// ∂(Σ_b E\[ℓ_b\])/∂(each element of each argument, in the order of
/// [`Value::flatten`]) and ∂/∂t; arguments that do not vary with the
/// hypers have none.
pub struct LikAdjoints {
    args: Vec<Option<Vec<f64>>>,
    t: f64,
}

/// Which of the likelihood's arguments, and whether its power, vary with
/// the hypers at θ (are on the tape when evaluated with [`Rev`]), with the
/// arguments evaluated on `view` as the step evaluates them.
fn varying(
    model: &ViModel,
    theta: &[f64],
    view: Option<&Bound>,
) -> Result<(Vec<bool>, bool), Error> {
    reverse::record(theta, |t| {
        let lik = model.lik_on::<Rev>(t, view)?;
        let args = lik
            .args
            .iter()
            .map(|a| a.flatten().iter().any(|x| !x.is_constant()))
            .collect();
        Ok((args, !lik.t.is_constant()))
    })
}

impl LikAdjoints {
    /// The adjoints at θ, for the expectations under means m and
    /// variances v (both [B, C]) of the points `rows` (all N in order for
    /// `None`), by `rule`; `lik` gives the arguments at θ on `view` (only
    /// called when some vary), `e` the step's expectations when it has
    /// them (for the mixing matrix's Ā). `None` when an argument varies in
    /// a form this pass does not seed (a matrix other than a mixing
    /// matrix): the caller then takes the forward-mode chunks.
    #[allow(clippy::too_many_arguments)]
    pub fn new<L: std::ops::Deref<Target = LikArgs<f64>>>(
        model: &ViModel,
        theta: &[f64],
        view: Option<&Bound>,
        lik: impl FnOnce() -> Result<L, Error>,
        rule: &Rule,
        rows: Option<&[usize]>,
        m: &DMatrix<f64>,
        v: &DMatrix<f64>,
        e: Option<&Expectations>,
    ) -> Result<Option<LikAdjoints>, Error> {
        let (vary, vary_t) = varying(model, theta, view)?;
        let mut out = LikAdjoints {
            args: vec![None; vary.len()],
            t: 0.0,
        };
        if !vary_t && !vary.contains(&true) {
            return Ok(Some(out));
        }
        let lik = lik()?;
        let lik = &*lik;
        let at = |i: usize| rows.map_or(i, |r| r[i]);
        let mix = model
            .latent
            .mixing
            .as_ref()
            .map(|_| model.latent.latent_arg);
        match rule {
            // Latent GPs mixed into class scores: Ā and the untempered
            // total from the step's pass, or from a pass of their own.
            Rule::MonteCarlo(eps) if lik.mixing(model).is_some() => {
                let a = lik.mixing(model).expect("checked");
                let (total, a_bar) = match e.and_then(|e| e.mixing.clone()) {
                    Some(x) => x,
                    None => {
                        let mut a_bar = DMatrix::zeros(a.nrows(), a.ncols());
                        let (n, j) = m.shape();
                        let mut ex = Expectations::zeros(n, j);
                        mixed_softmax(model, a, eps, 1.0, &at, m, v, &mut ex, Some(&mut a_bar))?;
                        (ex.total(), a_bar)
                    }
                };
                for (k, &on) in vary.iter().enumerate() {
                    match (on, Some(k) == mix) {
                        (false, _) => {}
                        // Row-major, as `Value::flatten`.
                        (true, true) => {
                            let flat = (0..a_bar.nrows())
                                .flat_map(|r| (0..a_bar.ncols()).map(move |c| (r, c)))
                                .map(|rc| lik.t * a_bar[rc])
                                .collect();
                            out.args[k] = Some(flat);
                        }
                        // The softmax reads no other argument.
                        (true, false) => out.args[k] = Some(vec![0.0; lik.args[k].flatten().len()]),
                    }
                }
                out.t = total;
            }
            // The softmax reads the class scores alone: only t matters,
            // and ∂/∂t is the untempered total.
            Rule::Softmax(_) => {
                for (k, &on) in vary.iter().enumerate() {
                    if on {
                        out.args[k] = Some(vec![0.0; lik.args[k].flatten().len()]);
                    }
                }
                if vary_t {
                    out.t = super::expect::expected_total_at::<f64>(
                        model,
                        &lik.untempered(),
                        rule,
                        rows,
                        m,
                        v,
                    )?;
                }
            }
            Rule::Quadrature(_) | Rule::MonteCarlo(_) => {
                // The seeds: each varying argument, then t.
                let mut seeds: Vec<Option<usize>> = vary
                    .iter()
                    .enumerate()
                    .filter(|(_, on)| **on)
                    .map(|(k, _)| Some(k))
                    .collect();
                if vary_t {
                    seeds.push(None);
                }
                for k in seeds.iter().flatten() {
                    if !matches!(lik.args[*k], Value::Real(_) | Value::Vector(_)) {
                        return Ok(None);
                    }
                    out.args[*k] = Some(vec![0.0; lik.args[*k].flatten().len()]);
                }
                for chunk in seeds.chunks(CHUNK) {
                    let per_point = seeded_pass(model, lik, chunk, rule, rows, m, v)?;
                    for (i, d) in per_point.iter().enumerate() {
                        let a = if lik.local { i } else { at(i) };
                        for (c, seed) in chunk.iter().enumerate() {
                            match seed {
                                None => out.t += d[c],
                                Some(k) => {
                                    let adj = out.args[*k].as_mut().expect("made above");
                                    let slot = if adj.len() == 1 { 0 } else { a };
                                    if let Some(x) = adj.get_mut(slot) {
                                        *x += d[c];
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        Ok(Some(out))
    }

    /// Σₖ ⟨āₖ, argₖ⟩ + t̄ t for the arguments evaluated with [`Rev`] (at
    /// the same θ and on the same rows as the adjoints).
    pub fn contract(&self, lik: &LikArgs<Rev>) -> Rev {
        let mut s = Rev::constant(0.0);
        for (adj, arg) in self.args.iter().zip(&lik.args) {
            if let Some(adj) = adj {
                s += reverse::contract(adj.iter().copied(), &arg.flatten());
            }
        }
        s + lik.t * ad_trait::F64(self.t)
    }
}

/// Per point i: ∂E\[ℓᵢ\]/∂(seed c) for up to [`CHUNK`] seeds (an argument,
/// every element of which carries tangent c, or the power for `None`), by
/// the rule's nodes or draws with the latent values held fixed.
fn seeded_pass(
    model: &ViModel,
    lik: &LikArgs<f64>,
    seeds: &[Option<usize>],
    rule: &Rule,
    rows: Option<&[usize]>,
    m: &DMatrix<f64>,
    v: &DMatrix<f64>,
) -> Result<Vec<[f64; CHUNK]>, Error> {
    let mut duals: LikArgs<Dual8> = lik.lift();
    let unit = |c: usize| {
        let mut t = [0.0; CHUNK];
        t[c] = 1.0;
        t
    };
    for (c, seed) in seeds.iter().enumerate() {
        match seed {
            None => duals.t = Dual8::new(lik.t, unit(c)),
            Some(k) => {
                duals.args[*k] = match &lik.args[*k] {
                    Value::Real(x) => Value::Real(Dual8::new(*x, unit(c))),
                    Value::Vector(x) => Value::Vector(x.map(|x| Dual8::new(x, unit(c)))),
                    _ => {
                        return Err(Error::internal(
                            "a seeded argument is not a number or vector",
                        ));
                    }
                }
            }
        }
    }
    let at = |i: usize| rows.map_or(i, |r| r[i]);
    let stop = &model.bound.stop;
    let mut out = vec![[0.0; CHUNK]; m.nrows()];
    for (i, g) in out.iter_mut().enumerate() {
        stop.check("computing the hypers' gradient")?;
        let k = at(i);
        let a = if lik.local { i } else { k };
        let mut total = Dual8::constant(0.0);
        match rule {
            Rule::Quadrature(gh) => {
                let sd = v[(i, 0)].max(0.0).sqrt();
                for (z, w) in gh.points.iter().zip(&gh.weights) {
                    let f = Dual8::constant(m[(i, 0)] + sd * z);
                    total += duals.log_lik(model, a, model.y[k], &[f])? * ad_trait::F64(*w);
                }
            }
            Rule::MonteCarlo(eps) => {
                let s = eps.nrows() as f64;
                for row in eps.row_iter() {
                    let f: Vec<Dual8> = (0..m.ncols())
                        .map(|j| Dual8::constant(m[(i, j)] + v[(i, j)].max(0.0).sqrt() * row[j]))
                        .collect();
                    total += duals.log_lik(model, a, model.y[k], &f)? * ad_trait::F64(1.0 / s);
                }
            }
            Rule::Softmax(_) => return Err(Error::internal("a seeded pass for the softmax rule")),
        }
        *g = total.tangent();
    }
    Ok(out)
}

/// The hypers' gradient \[P\] by one reverse sweep of θ through their
/// expressions (`pieces` evaluates the model's pieces at θ):
/// ⟨`mean_bar`, μ₀⟩, plus ⟨`pbar`, the kernel's leaves⟩ when `pbar` is
/// given and the kernel has as many leaves, plus `lik_scale` ⟨ā, args⟩
/// for the likelihood's adjoints `lik`. Also whether the kernel's part
/// was in it (else it takes the forward chunks).
pub fn hyper_sweep(
    theta: &[f64],
    pieces: impl FnOnce(&[Rev]) -> Result<super::model::ViPieces<Rev>, crate::error::Error>,
    mean_bar: f64,
    pbar: Option<&[f64]>,
    lik: Option<&LikAdjoints>,
    lik_scale: f64,
) -> Result<(Vec<f64>, bool), crate::error::Error> {
    let mut kernel_done = false;
    let (_, g) = reverse::sweep(theta, |t| {
        let pd = pieces(t)?;
        let mut s = pd.mean * ad_trait::F64(mean_bar);
        if let Some(k) = pbar.and_then(|pb| tempest_infer::gradients::kernel_term(&pd.kernel, pb)) {
            s += k;
            kernel_done = true;
        }
        if let Some(la) = lik {
            s += la.contract(&pd.lik) * ad_trait::F64(lik_scale);
        }
        Ok(s)
    })?;
    Ok((g, kernel_done))
}
