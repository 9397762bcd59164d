//! The `svi` engine's state machine: one minibatch per step. Each step
//! projects the batch on the inducing points, takes the expectations of
//! the log-likelihood under q's marginals, and then moves q(u) (a
//! natural-gradient step, or Adam) and the hypers and inducing inputs
//! (Adam), all from the same batch at the same point.

use super::def::{QStep, SviSettings};
use super::fit::{
    At, EVAL_BATCH, Learned, RunRecord, SviFit, TracePoint, for_batches, lik_on, whole_elbo,
};
use super::grid::{add_transposed, input_adjoints};
use super::sets::{InducingSets, Projections};
use super::sparse::{Marginals, Natural, batch_adjoints, left_family, weighted_gram};
use crate::error::{Error, ErrorKind};
use crate::ir::bind::Bound;
use crate::math::optim::{Ascent, Rule as OptRule};
use crate::math::reverse::Rev;
use crate::math::scalar::{CHUNK, Dual8};
use crate::model::gram_vjp::{CrossAdjoints, cross_vjp_with, gram_vjp_with};
use crate::model::kernel::{Inputs, KernelValue};
use crate::model::network::{Network, Trace};
use nalgebra::{DMatrix, DVector};
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use std::sync::Arc;
use std::time::Instant;
use tempest_infer::engine::{Engine, Progress, Status};
use tempest_infer::fit::Fit;
use tempest_infer::gradients::{reverse_sweeps, seed_chunk};
use tempest_infer::hyper_prior::{log_prior, log_prior_value};
use tempest_variational::expect::{
    Expectations, Rule, expectations_for_step, expected_total_at, mixed_total,
};
use tempest_variational::lik_adjoint::{LikAdjoints, hyper_sweep};
use tempest_variational::model::{ViModel, ViPieces};
use tempest_variational::posterior::Whitened;

/// The most times one step is retried (halving Adam's learning rate or
/// the natural step) after a rejection.
const MAX_REJECTED: usize = 30;

/// The most points the ELBO trace keeps (see [`Svi::record`]).
const MAX_TRACE: usize = 4096;

/// Halvings of ρ a whole-data (polishing) step tries before it stops: each
/// try is one pass over the data.
const POLISH_HALVINGS: usize = 8;

/// The inducing points when the model has no `inducing(m = M)` guide.
pub const DEFAULT_INDUCING: usize = 100;

/// One batch evaluated at the current state.
struct BatchEval {
    /// The data rows of the batch.
    rows: Vec<usize>,
    /// The data at those rows, when the likelihood's arguments are
    /// row-wise (built once, for the values and every hyper chunk).
    view: Option<Bound>,
    /// The kernel's inputs [B, D] (a deep kernel's features [B, F]).
    x: Inputs,
    /// A deep kernel's forward pass, kept for its reverse pass.
    tape: Option<Trace>,
    /// The projections on the inducing points.
    proj: Projections,
    /// The latent marginals.
    marg: Marginals,
    /// The expectations and their derivatives.
    e: Expectations,
    /// N / B.
    scale: f64,
}

impl BatchEval {
    /// The minibatch ELBO estimate s Σ_b E\[ℓ_b\] − Σ_c KL.
    fn elbo(&self, qs: &[Whitened]) -> f64 {
        self.scale * self.e.total() - qs.iter().map(|q| q.kl()).sum::<f64>()
    }
}

/// The `svi` engine's state.
pub struct Svi {
    model: Arc<ViModel>,
    s: SviSettings,
    rule: Rule,
    theta: Vec<f64>,
    pieces: ViPieces<f64>,
    ind: InducingSets,
    qs: Vec<Whitened>,
    natural: Vec<Natural>,
    /// Adam's state and parameters for q(u) with `q_step = adam`: per
    /// class the mean \[M\] then the lower triangle of R by columns.
    q_adam: Option<(Ascent, Vec<f64>)>,
    /// Adam over the learned hypers then Z (row-major), when any is learned.
    opt: Option<Ascent>,
    learn_z: bool,
    /// A deep kernel's network: its weights are optimised after Z.
    net: Option<Network>,
    order: Vec<usize>,
    pos: usize,
    rng: StdRng,
    step: usize,
    epoch_sum: f64,
    epoch_steps: usize,
    trace: Vec<TracePoint>,
    /// Epochs ended so far, and every how many of them the trace keeps one.
    epochs: usize,
    stride: usize,
    rejected: usize,
    /// The whole-data ELBO after the last polishing step.
    polished: Option<f64>,
    started: Instant,
    notes: Vec<String>,
}

impl Svi {
    /// Set up at the initial hypers, with Z from k-means and q(u) = p(u).
    pub fn new(bound: Arc<Bound>, s: &SviSettings) -> Result<Svi, Error> {
        let mut notes = Vec::new();
        use crate::ir::graph::Family;
        let (m_guide, grid) =
            match tempest_variational::guide::guide_family(&bound, &super::def::SVI)? {
                Some(Family::Inducing { m }) => (Some(m), false),
                Some(Family::Grid { m }) => (Some(m), true),
                _ => (None, false),
            };
        let mut model = ViModel::sparse(bound, s.learn_hypers, s.jitter, "svi")?;
        // The latent GP's guide entry, for located errors.
        let guide_span = model
            .bound
            .graph
            .guides
            .iter()
            .find(|g| g.target == crate::ir::graph::GuideTarget::Gp(model.latent.gp))
            .map(|g| g.span);
        let at_guide = |e: Error| match guide_span {
            Some(span) => e.with_span(span),
            None => e,
        };
        let n = model.inputs.len();
        let m = m_guide.unwrap_or_else(|| {
            notes.push(format!(
                "no `inducing(m = ...)` guide for the latent GP: {} inducing points (write e.g. `guide {{ f : inducing(m = 200) }}`)",
                DEFAULT_INDUCING.min(n)
            ));
            DEFAULT_INDUCING
        });
        if m >= n && !grid {
            notes.push(format!(
                "m = {m} inducing points for {n} training points: Z is the training inputs"
            ));
        }
        // A grid keeps all its points; k-means points are at most the data.
        let mm = if grid { m } else { m.min(n) };
        crate::limits::check_memory(&[crate::limits::Request::new(
            "the `svi` engine (q(u) and K_ZZ per latent function)".to_string(),
        )
        .times("matrices", 4u64)
        .times("latent functions", model.latents as u64 + 1)
        .times("inducing points", mm)
        .times("inducing points", mm)])
        .map_err(|e| at_guide(e).with_label("the inducing points"))?;
        let rule = Svi::step_rule(&model, s, 0);
        let theta = model.layout.initial(&model.bound)?;
        log_prior_value(&model.bound, &model.layout, &theta)?;
        model.check_row_wise(&theta)?;
        if model.row_wise.is_none() {
            notes.push("the likelihood's arguments are not row-wise in the data (e.g. a mean over a column), so every step evaluates them at all N rows".into());
        }
        let pieces = model.pieces_rows::<f64>(&theta, &[0][..n.min(1)])?;
        let net = match &model.deep {
            Some(d) => {
                if !pieces.kernel.input_rules() {
                    return Err(Error::at(
                        ErrorKind::Unsupported,
                        d.span,
                        "the base kernel of a deep kernel needs input gradients, and this one has Rust or interpreted parts without them",
                    )
                    .with_label("deep kernel")
                    .with_note("built-in kernels, their sums, products and scalings, and model-file kernels that compile have them"));
                }
                crate::limits::check_memory(&[crate::limits::Request::new(
                    "the deep kernel's network (its weights and Adam's state, and a batch's layer outputs)".to_string(),
                )
                .times("weights and activations", (d.spec.len() as u128).saturating_mul(4).saturating_add(
                    (s.batch.min(n) as u128).saturating_mul(d.spec.widest() as u128).saturating_mul(2 * d.spec.widths.len() as u128 + 2),
                )),
                crate::limits::Request::new("the features of the training inputs (for the inducing points' start)")
                    .times("points", n)
                    .times("features", d.spec.features())])
                .map_err(|e| e.with_span(d.span))?;
                Some(Network::new(d.spec.clone(), d.spec.init(s.seed))?)
            }
            None => None,
        };
        let mapped = net
            .as_ref()
            .map(|n| n.map_batched(&model.inputs, EVAL_BATCH))
            .transpose()?;
        let groups = model.deep.as_ref().and_then(|d| d.groups);
        let kx = mapped.as_ref().unwrap_or(&model.inputs);
        let width = groups.map_or(kx.dim(), |g| kx.dim() / g.max(1));
        if grid && width != 1 {
            return Err(at_guide(Error::new(
                ErrorKind::Unsupported,
                format!("`grid(m)` needs one-dimensional kernel inputs, and these have {width} columns"),
            ))
            .with_label("grid guide")
            .with_note("a GP on one input column, or additive GPs on one feature each: `deep(k, mlp([..., G]), groups = G)`; `inducing(m)` serves inputs of any dimension"));
        }
        let ind = InducingSets::start(
            &pieces.kernel,
            kx,
            m,
            groups,
            s.seed,
            s.jitter,
            grid,
            &model.bound.stop,
        )?;
        let mm = ind.len();
        let c = model.latents;
        let learn_z = s.learn_inducing && mm < n && pieces.kernel.input_rules() && !grid;
        if s.learn_inducing && mm < n && !learn_z && !grid {
            notes.push("the inducing inputs stay at their k-means start: the kernel has Rust or interpreted parts without input gradients".into());
        }
        let n_opt = model.layout.len
            + if learn_z { ind.flat_len() } else { 0 }
            + net.as_ref().map_or(0, |n| n.weights.len());
        let opt = (n_opt > 0).then(|| Ascent::new(OptRule::Adam, s.lr, n_opt));
        let q_adam = (s.q_step == QStep::Adam).then(|| {
            let p = pack_q(&vec![Whitened::prior(mm); c]);
            (Ascent::new(OptRule::Adam, s.lr, p.len()), p)
        });
        let mut order: Vec<usize> = (0..n).collect();
        let mut rng = StdRng::seed_from_u64(s.seed);
        if s.batch < n {
            order.shuffle(&mut rng);
        }
        Ok(Svi {
            rule,
            theta,
            pieces,
            ind,
            qs: vec![Whitened::prior(mm); c],
            natural: vec![Natural::prior(mm); c],
            q_adam,
            opt,
            learn_z,
            net,
            order,
            pos: 0,
            rng,
            step: 0,
            epoch_sum: 0.0,
            epoch_steps: 0,
            trace: Vec::new(),
            epochs: 0,
            stride: 1,
            rejected: 0,
            polished: None,
            started: Instant::now(),
            notes,
            s: s.clone(),
            model: Arc::new(model),
        })
    }

    /// The rows of the next minibatch (a fresh permutation each epoch;
    /// the whole data in order when the batch is at least N).
    fn next_batch(&mut self) -> (Vec<usize>, bool) {
        let n = self.order.len();
        if self.s.batch >= n {
            return ((0..n).collect(), true);
        }
        if self.pos + self.s.batch > n {
            self.order.shuffle(&mut self.rng);
            self.pos = 0;
        }
        let rows = self.order[self.pos..self.pos + self.s.batch].to_vec();
        self.pos += self.s.batch;
        let epoch_end = self.pos + self.s.batch > n;
        (rows, epoch_end)
    }

    /// Expectations at a batch, with a located error for a non-finite one.
    fn expect(
        &self,
        rows: &[usize],
        view: Option<&Bound>,
        mean: &DMatrix<f64>,
        var: &DMatrix<f64>,
    ) -> Result<Expectations, Error> {
        let lik = lik_on(&self.model, &self.theta, &self.pieces, view)?;
        let e = expectations_for_step(&self.model, &lik, &self.rule, Some(rows), mean, var)?;
        if let Some(i) = e.value.iter().position(|x| !x.is_finite()) {
            let err = self.model.non_finite_expectation(rows[i], e.value[i]);
            return Err(err.with_note(format!("at step {}", self.step)));
        }
        Ok(e)
    }

    /// Project the batch `rows`, take the marginals and the expectations.
    fn evaluate(&self, rows: Vec<usize>) -> Result<BatchEval, Error> {
        let scale = self.model.inputs.len() as f64 / rows.len() as f64;
        let x = self.model.inputs.gather(&rows);
        let tape = self.net.as_ref().map(|n| n.forward(&x)).transpose()?;
        let x = tape.as_ref().map_or(x, |t| t.features());
        let proj = self.ind.project(&self.pieces.kernel, &x)?;
        let marg = proj.marginals(&self.ind, &self.qs, self.pieces.mean);
        let view = self.model.batch_view(&rows)?;
        let e = self.expect(&rows, view.as_ref(), &marg.mean, &marg.var)?;
        Ok(BatchEval {
            rows,
            view,
            x,
            tape,
            proj,
            marg,
            e,
            scale,
        })
    }

    /// ∂ELBO/∂(learned hypers, Z, network weights) from one batch (the KL
    /// term does not depend on them in whitened form), plus the hypers'
    /// log prior.
    fn hyper_z_gradient(&self, b: &BatchEval) -> Result<Vec<f64>, Error> {
        let (e, scale) = (&b.e, b.scale);
        let kernel = &self.pieces.kernel;
        let p = self.theta.len();
        let latents = self.qs.len();
        let nz = if self.learn_z { self.ind.flat_len() } else { 0 };
        let nw = self.net.as_ref().map_or(0, |n| n.weights.len());
        let mut grad = vec![0.0; p + nz + nw];
        // Per set: the batch's adjoints, then the leaf adjoints, Z̄ and the
        // kernel inputs' H̄ through the reverse rules, when the kernel has
        // them.
        let mut adjs = Vec::with_capacity(self.ind.sets.len());
        let mut pbar: Option<Vec<f64>> = Some(Vec::new());
        let mut hb = DMatrix::zeros(b.x.len(), b.x.dim());
        let want_h = b.tape.is_some();
        for (s, set) in self.ind.sets.iter().enumerate() {
            let range = self.ind.latents_of(s, latents);
            let mut adj = batch_adjoints(
                set,
                &b.proj.p[s],
                &self.qs,
                &b.marg,
                &e.gm,
                &e.gv,
                range,
                scale,
            );
            let (x, z) = (b.proj.inputs(&b.x, s), &set.z);
            let (d, first) = (x.dim(), self.ind.first_column(s));
            // The cross-covariance node: K(X, Z) entry by entry, or on a
            // KISS-GP grid W (K_ZZ + jitter·I), whose adjoint goes to K_ZZ
            // (K̄_ZZ += Wᵀ K̄_XZ) and to the points through W's slopes.
            let cross = match (&set.grid, &b.proj.p[s].stencils) {
                (Some((_, kj)), Some(st)) => {
                    add_transposed(st, &adj.kxz, &mut adj.kzz);
                    let xb = input_adjoints(st, &adj.kxz, kj);
                    adj.kxz.fill(0.0);
                    Some(CrossAdjoints {
                        params: Vec::new(),
                        x: DMatrix::from_vec(xb.len(), 1, xb),
                        z: DMatrix::zeros(set.len(), d),
                    })
                }
                _ => cross_vjp_with(kernel, x, z, &adj.kxz, want_h, self.learn_z)?,
            };
            match (
                cross,
                gram_vjp_with(kernel, z, &adj.kzz, self.learn_z)?,
                pbar.as_mut(),
            ) {
                (Some(cx), Some(gz), Some(pb)) => {
                    pb.resize(gz.params.len(), 0.0);
                    pb.iter_mut().zip(&gz.params).for_each(|(t, g)| *t += g);
                    pb.iter_mut().zip(&cx.params).for_each(|(t, c)| *t += c);
                    let mut g = vec![0.0; pb.len()];
                    for (i, kd) in adj.kdiag.iter().enumerate() {
                        kernel.entry_grad(x.row(i), x.row(i), true, &mut g);
                        pb.iter_mut().zip(&g).for_each(|(p, gi)| *p += kd * gi);
                    }
                    if self.learn_z {
                        let zb = cx.z + gz.x;
                        let off = p + s * set.len() * d;
                        for i in 0..set.len() {
                            for k in 0..d {
                                grad[off + i * d + k] = zb[(i, k)];
                            }
                        }
                    }
                    if want_h {
                        // H̄ from K_XZ and from the diagonal k(h_b, h_b).
                        let (mut gx, mut gy) = (vec![0.0; d], vec![0.0; d]);
                        for i in 0..x.len() {
                            gx.fill(0.0);
                            gy.fill(0.0);
                            let h = x.row(i);
                            kernel.entry_vjp_inputs(
                                h,
                                h,
                                true,
                                adj.kdiag[i],
                                Some(&mut gx),
                                Some(&mut gy),
                            )?;
                            for k in 0..d {
                                hb[(i, first + k)] += cx.x[(i, k)] + gx[k] + gy[k];
                            }
                        }
                    }
                }
                _ => pbar = None,
            }
            adjs.push(adj);
        }
        let mean_bar: f64 = adjs.iter().map(|a| a.mean).sum();
        // The likelihood's arguments' adjoints, once; `None` sends its
        // part to the forward-mode chunks below.
        let reverse = reverse_sweeps();
        let lik_adj = if !reverse {
            None
        } else {
            LikAdjoints::new(
                &self.model,
                &self.theta,
                b.view.as_ref(),
                || lik_on(&self.model, &self.theta, &self.pieces, b.view.as_ref()),
                &self.rule,
                Some(&b.rows),
                &b.marg.mean,
                &b.marg.var,
                Some(e),
            )?
        };
        // One reverse sweep through the hypers' expressions: the kernel's
        // leaves, the prior mean and the likelihood's arguments.
        let (g, kernel_done) = hyper_sweep(
            &self.theta,
            |t| self.model.pieces_on::<Rev>(t, b.view.as_ref()),
            mean_bar,
            pbar.as_deref().filter(|_| reverse),
            lik_adj.as_ref(),
            scale,
        )?;
        grad[..p].copy_from_slice(&g);
        // Forward-mode chunks for what has no reverse path: a kernel with
        // interpreted model-file parts, an argument seeded in no other way.
        if !kernel_done || lik_adj.is_none() {
            for start in (0..p).step_by(CHUNK) {
                let td = seed_chunk(&self.theta, start);
                let pd = self.model.pieces_on::<Dual8>(&td, b.view.as_ref())?;
                let mut g = [0.0; CHUNK];
                if let (false, Some(pbar)) = (kernel_done, pbar.as_deref()) {
                    g = tempest_infer::gradients::chain_leaves(&pd.kernel, pbar)
                        .ok_or_else(|| Error::internal("the kernel's leaves changed"))?;
                } else if !kernel_done {
                    for (s, adj) in adjs.iter().enumerate() {
                        let z = &self.ind.sets[s].z;
                        let t = dual_kernel_terms(&pd.kernel, b.proj.inputs(&b.x, s), z, adj)?;
                        (0..CHUNK).for_each(|c| g[c] += t[c]);
                    }
                }
                if lik_adj.is_none() {
                    let lik = match &e.mixing {
                        // Mixed latent GPs: from the step's own pass (Ā).
                        Some((total, a_bar)) => mixed_total(&self.model, &pd.lik, *total, a_bar)?,
                        None => expected_total_at(
                            &self.model,
                            &pd.lik,
                            &self.rule,
                            Some(&b.rows),
                            &b.marg.mean,
                            &b.marg.var,
                        )?,
                    };
                    let tl = lik.tangent();
                    (0..CHUNK).for_each(|c| g[c] += scale * tl[c]);
                }
                let k = CHUNK.min(p - start);
                grad[start..start + k]
                    .iter_mut()
                    .zip(&g)
                    .for_each(|(a, b)| *a += b);
            }
        }
        let (_, gp) = log_prior(&self.model.bound, &self.model.layout, &self.theta)?;
        grad.iter_mut().zip(&gp).for_each(|(g, p)| *g += p);
        if let (Some(net), Some(tape), Some(_)) = (&self.net, &b.tape, &pbar) {
            grad[p + nz..].copy_from_slice(&net.backward(tape, &hb)?);
            // The weights' prior N(0, σ_w²).
            let prec = self.s.weight_prior.powi(-2);
            for (g, w) in grad[p + nz..].iter_mut().zip(&net.weights) {
                *g -= prec * w;
            }
        }
        Ok(grad)
    }

    /// Move to other optimised coordinates (see [`Svi::point`]), keeping
    /// q(u): the pieces and K_ZZ's factor are rebuilt there. Nothing
    /// changes on an error (a non-finite coordinate, a log prior that is
    /// not finite, K_ZZ that cannot be factorised).
    pub fn set_point(&mut self, y: &[f64]) -> Result<(), Error> {
        if let Some(v) = y.iter().find(|v| !v.is_finite()) {
            return Err(Error::new(
                ErrorKind::Numerical,
                format!("a hyper or inducing input became {v}"),
            ));
        }
        let p = self.theta.len();
        let nz = if self.learn_z { self.ind.flat_len() } else { 0 };
        log_prior_value(&self.model.bound, &self.model.layout, &y[..p])?;
        let first = &[0][..self.model.y.len().min(1)];
        let pieces = self.model.pieces_rows::<f64>(&y[..p], first)?;
        let ind = if self.learn_z {
            self.ind
                .moved(&pieces.kernel, &y[p..p + nz], self.s.jitter)?
        } else {
            self.ind.refactored(&pieces.kernel, self.s.jitter)?
        };
        self.theta = y[..p].to_vec();
        self.pieces = pieces;
        self.ind = ind;
        if let Some(net) = &mut self.net {
            net.weights.copy_from_slice(&y[p + nz..]);
        }
        Ok(())
    }

    /// One Adam step on (θ, Z); a step to a point where K_ZZ cannot be
    /// factorised or the log prior is not finite is rejected and retried
    /// with half the learning rate.
    fn hyper_z_step(&mut self, g: &[f64]) -> Result<(), Error> {
        let Some(opt) = self.opt.clone() else {
            return Ok(());
        };
        if g.iter().any(|v| !v.is_finite()) {
            self.rejected += 1;
            return Ok(());
        }
        let x = self.point();
        let mut opt_now = opt;
        for _ in 0..MAX_REJECTED {
            let mut trial = opt_now.clone();
            let mut y = x.clone();
            trial.step(&mut y, g);
            if self.set_point(&y).is_ok() {
                self.opt = Some(trial);
                return Ok(());
            }
            self.rejected += 1;
            opt_now.scale_lr(0.5);
        }
        self.opt = Some(opt_now);
        Ok(())
    }

    /// The natural-gradient step on every q(u_c); a step that leaves the
    /// family is retried with ρ halved.
    fn natural_step(&mut self, b: &BatchEval, rho: f64) -> Result<(), Error> {
        for c in 0..self.qs.len() {
            let gm: Vec<f64> = b.e.gm.column(c).iter().copied().collect();
            let gv: Vec<f64> = b.e.gv.column(c).iter().copied().collect();
            let mut r = rho;
            let mut failed = None;
            for _ in 0..MAX_REJECTED {
                let a = &b.proj.of(&self.ind, c).a;
                let nat = self.natural[c].step(a, &self.qs[c].z, &gm, &gv, b.scale, r);
                match nat.whitened() {
                    Ok(q) => {
                        self.natural[c] = nat;
                        self.qs[c] = q;
                        failed = None;
                        break;
                    }
                    Err(err) => failed = Some(err),
                }
                self.rejected += 1;
                r *= 0.5;
            }
            if let Some(err) = failed {
                return Err(left_family(self.step, err));
            }
        }
        Ok(())
    }

    /// One Adam step on q's mean and factor: ∂/∂m = s Aᵀg_m − m,
    /// ∂/∂R = tril(2 G R) − R + diag(1/Rᵢᵢ) with G = s Aᵀ diag(g_v) A.
    fn adam_q_step(&mut self, b: &BatchEval) {
        let (e, scale) = (&b.e, b.scale);
        let Some((mut opt, mut params)) = self.q_adam.take() else {
            return;
        };
        let mm = self.ind.len();
        let per = mm + mm * (mm + 1) / 2;
        let mut grad = vec![0.0; params.len()];
        for (c, q) in self.qs.iter().enumerate() {
            let a = &b.proj.of(&self.ind, c).a;
            let gm = e.gm.column(c);
            let dm = a.tr_mul(&gm) * scale - &q.z;
            let g = weighted_gram(a, |i| e.gv[(i, c)]) * (2.0 * scale);
            let gr = crate::math::linalg::matmul(&g, false, &q.r, false);
            let base = c * per;
            grad[base..base + mm].copy_from_slice(dm.as_slice());
            let mut off = base + mm;
            for j in 0..mm {
                for i in j..mm {
                    let mut v = gr[(i, j)] - q.r[(i, j)];
                    if i == j {
                        v += 1.0 / q.r[(i, i)];
                    }
                    grad[off] = v;
                    off += 1;
                }
            }
        }
        if grad.iter().all(|v| v.is_finite()) {
            opt.step(&mut params, &grad);
            self.qs = unpack_q(&params, self.qs.len(), mm);
        } else {
            self.rejected += 1;
        }
        self.q_adam = Some((opt, params));
    }

    /// The minibatch objective (s Σ_b E\[ℓ_b\] − Σ KL + log p(θ)) at the
    /// batch `rows` and its gradient with respect to the optimised
    /// coordinates (the learned hypers on the unconstrained scale, then Z
    /// row by row when it is learned, then a deep kernel's network
    /// weights), at the current state: what every step computes, for
    /// checks against finite differences.
    pub fn batch_gradient(&self, rows: &[usize]) -> Result<(f64, Vec<f64>), Error> {
        let b = self.evaluate(rows.to_vec())?;
        let lp = log_prior_value(&self.model.bound, &self.model.layout, &self.theta)?
            + self
                .net
                .as_ref()
                .map_or(0.0, |n| n.log_prior(self.s.weight_prior));
        let g = self.hyper_z_gradient(&b)?;
        Ok((b.elbo(&self.qs) + lp, g))
    }

    /// The optimised coordinates (see [`Svi::batch_gradient`]).
    pub fn point(&self) -> Vec<f64> {
        let mut x = self.theta.clone();
        if self.learn_z {
            x.extend(self.ind.flat());
        }
        if let Some(net) = &self.net {
            x.extend_from_slice(&net.weights);
        }
        x
    }

    /// Whether the likelihood's arguments are evaluated at each minibatch's
    /// rows alone (see [`ViModel::check_row_wise`]).
    pub fn row_wise(&self) -> bool {
        self.model.row_wise.is_some()
    }

    /// Replace q(u_c) (whitened), e.g. to check gradients away from the prior.
    pub fn set_posteriors(&mut self, qs: Vec<Whitened>) {
        self.qs = qs;
    }

    /// The rule of the whole-data ELBO, the polishing steps and the
    /// predictions (for the softmax, the Gauss–Hermite product rule).
    fn eval_rule(&self) -> Rule {
        Rule::for_model(&self.model, self.s.quadrature)
    }

    /// The rule of minibatch step `step`: for the softmax, fresh antithetic
    /// draws seeded by the step, so that the minibatch estimate stays
    /// unbiased and no fixed set of draws is fitted.
    fn step_rule(model: &ViModel, s: &SviSettings, step: usize) -> Rule {
        if model.categorical() {
            let seed = s
                .seed
                .wrapping_mul(0x9e37_79b9_7f4a_7c15)
                .wrapping_add(step as u64);
            Rule::monte_carlo(model.latents, s.mc_samples, seed)
        } else {
            Rule::for_model(model, s.quadrature)
        }
    }

    /// One whole-data natural-gradient step on every q(u_c) at fixed
    /// hypers and Z (after the minibatch steps): the target is summed over
    /// batches, and ρ starts at 1 and halves until the whole-data ELBO
    /// does not fall.
    fn polish_step(&mut self) -> Result<Status, Error> {
        let rule = self.eval_rule();
        let (model, pieces, ind) = (&self.model, &self.pieces, &self.ind);
        let at = At {
            model,
            theta: &self.theta,
            pieces,
            ind,
            net: self.net.as_ref(),
        };
        if self.s.q_step == QStep::Adam && self.polished.is_none() {
            self.natural = self
                .qs
                .iter()
                .map(Natural::from_whitened)
                .collect::<Result<_, _>>()?;
        }
        let mm = ind.len();
        let mut targets = vec![
            Natural {
                h: DVector::zeros(mm),
                p: DMatrix::identity(mm, mm),
            };
            self.qs.len()
        ];
        let qs = &self.qs;
        // The pass that sums the target also gives the ELBO at the start.
        let mut expected = 0.0;
        for_batches(&at, qs, &rule, |p, e| {
            expected += e.total();
            for (c, t) in targets.iter_mut().enumerate() {
                let gm: Vec<f64> = e.gm.column(c).iter().copied().collect();
                let gv: Vec<f64> = e.gv.column(c).iter().copied().collect();
                t.add_batch(&p.of(ind, c).a, &qs[c].z, &gm, &gv, 1.0);
            }
        })?;
        let now = expected - qs.iter().map(|q| q.kl()).sum::<f64>();
        let mut rho = 1.0;
        for _ in 0..=POLISH_HALVINGS {
            let nat: Vec<Natural> = self
                .natural
                .iter()
                .zip(&targets)
                .map(|(n, t)| n.toward(t, rho))
                .collect();
            // A step that cannot be taken is retried smaller; a stop
            // ends the step with q(u) as it was.
            let candidate = nat
                .iter()
                .map(Natural::whitened)
                .collect::<Result<Vec<_>, _>>()
                .and_then(|qs| whole_elbo(&at, &qs, &rule).map(|e| (qs, e)));
            if let Err(e) = &candidate
                && e.is_interrupted()
            {
                return Err(e.clone());
            }
            if let Ok((qs, elbo)) = candidate
                && elbo >= now
            {
                self.natural = nat;
                self.qs = qs;
                self.polished = Some(elbo);
                self.record(elbo);
                if self.step >= self.s.steps + self.s.polish {
                    return Ok(Status::Done(format!(
                        "reached steps = {}, then {} whole-data natural step{}",
                        self.s.steps,
                        self.s.polish,
                        if self.s.polish == 1 { "" } else { "s" }
                    )));
                }
                return Ok(Status::Running);
            }
            rho *= 0.5;
        }
        self.polished = Some(now);
        Ok(Status::Done(format!(
            "reached steps = {}, then whole-data natural steps until none raised the ELBO",
            self.s.steps
        )))
    }

    /// Add a point to the trace; at [`MAX_TRACE`] points every other one
    /// is dropped and the stride between kept epochs doubles, so the trace
    /// stays bounded whatever `steps` is.
    fn record(&mut self, elbo: f64) {
        if self.trace.len() >= MAX_TRACE {
            let mut k = 0;
            self.trace.retain(|_| {
                k += 1;
                k % 2 == 0
            });
            self.stride *= 2;
        }
        self.trace.push(TracePoint {
            step: self.step,
            seconds: self.seconds(),
            elbo,
        });
    }

    fn seconds(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }
}

/// Adam's packed parameters of q(u_c): per class the mean \[M\], then the
/// lower triangle of R by columns ([`unpack_q`] reads them back).
fn pack_q(qs: &[Whitened]) -> Vec<f64> {
    let mut p = Vec::new();
    for q in qs {
        let mm = q.z.len();
        p.extend_from_slice(q.z.as_slice());
        for j in 0..mm {
            p.extend((j..mm).map(|i| q.r[(i, j)]));
        }
    }
    p
}

/// q(u_c) from Adam's packed parameters (see [`pack_q`]).
fn unpack_q(params: &[f64], classes: usize, mm: usize) -> Vec<Whitened> {
    let per = mm + mm * (mm + 1) / 2;
    (0..classes)
        .map(|c| {
            let base = c * per;
            let z = DVector::from_column_slice(&params[base..base + mm]);
            let mut r = DMatrix::zeros(mm, mm);
            let mut off = base + mm;
            for j in 0..mm {
                for i in j..mm {
                    r[(i, j)] = params[off];
                    off += 1;
                }
            }
            Whitened::from_factor(z, r)
        })
        .collect()
}

/// ⟨K̄_XZ, ∂K_XZ⟩ + ⟨K̄_ZZ, ∂K_ZZ⟩ + ⟨k̄_diag, ∂k_diag⟩ in the seeded
/// directions, entry by entry in duals (kernels with interpreted
/// model-file parts, which have no reverse rule).
fn dual_kernel_terms(
    kernel: &KernelValue<Dual8>,
    x: &Inputs,
    z: &Inputs,
    adj: &super::sparse::BatchAdjoints,
) -> Result<[f64; CHUNK], Error> {
    let mut g = [0.0; CHUNK];
    let mut add = |w: f64, e: Dual8| {
        let t = e.tangent();
        (0..CHUNK).for_each(|c| g[c] += w * t[c]);
    };
    for i in 0..x.len() {
        for j in 0..z.len() {
            if adj.kxz[(i, j)] != 0.0 {
                add(adj.kxz[(i, j)], kernel.entry(x.row(i), z.row(j), false)?);
            }
        }
        add(adj.kdiag[i], kernel.entry(x.row(i), x.row(i), true)?);
    }
    for i in 0..z.len() {
        for j in 0..z.len() {
            add(adj.kzz[(i, j)], kernel.entry(z.row(i), z.row(j), i == j)?);
        }
    }
    Ok(g)
}

impl Engine for Svi {
    fn step(&mut self) -> Result<Status, Error> {
        self.step += 1;
        if self.step > self.s.steps {
            return self.polish_step();
        }
        if self.model.categorical() {
            self.rule = Svi::step_rule(&self.model, &self.s, self.step);
        }
        // Annealing: the learning rates move by the factor's ratio, so that
        // halvings after rejected steps are kept.
        let (now, before) = (
            self.s.anneal_factor(self.step),
            self.s.anneal_factor(self.step - 1),
        );
        if now != before {
            if let Some(o) = &mut self.opt {
                o.scale_lr(now / before);
            }
            if let Some((o, _)) = &mut self.q_adam {
                o.scale_lr(now / before);
            }
        }
        let (rows, epoch_end) = self.next_batch();
        let b = match self.evaluate(rows) {
            Ok(b) => b,
            // Stopped before anything moved: the step is not counted.
            Err(e) if e.is_interrupted() => {
                self.step -= 1;
                return Err(e);
            }
            Err(e) => return Err(e),
        };
        self.epoch_sum += b.elbo(&self.qs);
        self.epoch_steps += 1;
        let g = match self.opt {
            Some(_) => Some(self.hyper_z_gradient(&b)?),
            None => None,
        };
        match self.s.q_step {
            QStep::Natural(rho) => self.natural_step(&b, rho * now)?,
            QStep::Adam => self.adam_q_step(&b),
        }
        if let Some(g) = g {
            self.hyper_z_step(&g)?;
        }
        if epoch_end || self.step >= self.s.steps {
            let elbo = self.epoch_sum / self.epoch_steps as f64;
            self.epochs += 1;
            if self.epochs.is_multiple_of(self.stride) || self.step >= self.s.steps {
                self.record(elbo);
            }
            self.epoch_sum = 0.0;
            self.epoch_steps = 0;
        }
        if self.step >= self.s.steps && self.s.polish == 0 {
            return Ok(Status::Done(format!("reached steps = {}", self.s.steps)));
        }
        Ok(Status::Running)
    }

    fn progress(&self) -> Progress {
        let n = self.model.inputs.len();
        let b = self.s.batch.min(n);
        let secs = self.seconds().max(1e-9);
        let rate = (self.step * b) as f64 / secs;
        let left =
            (self.s.steps - self.step.min(self.s.steps)) as f64 * secs / self.step.max(1) as f64;
        Progress {
            step: self.step,
            total: Some(self.s.steps),
            objective: self.trace.last().map(|t| t.elbo),
            objective_name: if self.polished.is_some() {
                "ELBO (whole data)"
            } else {
                "ELBO (epoch mean of minibatch estimates)"
            },
            message: format!(
                "epoch {:.1}, {:.0} points/s, {:.0} s left",
                (self.step * b) as f64 / n as f64,
                rate,
                left
            ),
            lanes: vec![],
        }
    }

    fn finish(self: Box<Self>, reason: String) -> Result<Box<dyn Fit>, Error> {
        let this = *self;
        let seconds = this.seconds();
        // The final ELBO and predictions with many more draws.
        let rule = this.eval_rule();
        let fit = SviFit::assemble(
            this.model,
            this.s,
            rule,
            Learned {
                theta: this.theta,
                pieces: this.pieces,
                inducing: this.ind,
                qs: this.qs,
                net: this.net,
            },
        )
        .finish(RunRecord {
            trace: this.trace,
            steps: this.step,
            reason,
            rejected: this.rejected,
            notes: this.notes,
            seconds,
        })?;
        Ok(Box::new(fit))
    }
}
