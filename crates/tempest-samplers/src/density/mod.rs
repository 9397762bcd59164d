//! The log density of a model's params on the unconstrained scale, and its
//! gradient, for the samplers.
//!
//! x holds every `param` (each entry mapped to the real line by its declared
//! bounds, [`crate::model::constraint::Bounds`]) and, for a latent GP
//! observed through a non-Gaussian likelihood, its values in whitened form
//! v (f = μ₀ + L v, v ~ N(0, I)). Then
//!
//!   log π(x) = Σ log|dθ/du| + Σ priors + Σ t · log-likelihood terms − ½‖v‖²,
//!
//! with hypers at their initial values. The gradient comes from the model's
//! compiled log density ([`crate::ir::logdensity`]): one program over
//! numbers, vectors and matrices with its reverse pass, per-element
//! likelihood and prior terms differentiated in closed form, by their
//! compiled programs or by forward-mode autodiff; the latent GP's factor
//! and a GP integrated out add their own adjoints here.

use crate::error::{Error, ErrorKind};
use crate::ir::bind::{Bound, declared_shape};
use crate::ir::eval::Env;
use crate::ir::expr::TExpr;
use crate::ir::graph::{DistCall, DistRef};
use crate::ir::logdensity::{At, DensityProgram, Workspace};
use crate::ir::pointwise::Pointwise;
use crate::ir::value::Value;
use crate::limits::{self, Request};
use crate::math::adjoint;
use crate::math::reverse::{self, Rev};
use crate::math::scalar::{CHUNK, Dual1};
use crate::model::constraint::Bounds;
use crate::model::dist::Dist;
use ad_trait::AD;
use ad_trait::forward_ad::adfn::adfn;
use nalgebra::{DMatrix, DVector};
use std::sync::Arc;
use tempest_gp::model::GpModel;
use tempest_infer::gradients::reverse_sweeps;
use tempest_infer::hypers::HyperLayout;
use tempest_infer::structure::{latent_observation_with_params, likelihood_power};
use tempest_output::stan_csv::stan_names;

mod factor;

/// Where one param lives in x.
#[derive(Clone, Debug)]
pub struct Slot {
    /// The param (index into the graph's params).
    pub param: usize,
    /// First index in x.
    pub offset: usize,
    /// Rows and columns of its value ((0, 0) scalar, (n, 0) vector).
    pub shape: (usize, usize),
    /// Its bounds.
    pub bounds: Bounds,
}

impl Slot {
    /// The number of entries.
    pub fn len(&self) -> usize {
        match self.shape {
            (0, 0) => 1,
            (n, 0) => n,
            (n, m) => n * m,
        }
    }
    /// Whether it has no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A latent GP sampled in whitened form.
#[derive(Clone)]
pub struct Latent {
    /// The site (index into the graph's sites).
    pub site: usize,
    /// Where its whitened values v [N·C] start in x (class by class).
    pub offset: usize,
    /// Points N.
    pub n: usize,
    /// Latent GPs C (classes).
    pub classes: usize,
    /// Cholesky factor of K + 10⁻⁶I when the kernel is fixed.
    l: DMatrix<f64>,
    /// The GP's mean (a scalar expression).
    pub mean: TExpr,
    /// The GP's kernel.
    pub kernel: TExpr,
    /// The training inputs [N, D].
    pub inputs: crate::model::kernel::Inputs,
    /// The x coordinates (param entries) the kernel depends on; empty when
    /// it is fixed. Otherwise L(θ) is factorised at every evaluation.
    kernel_coords: Vec<usize>,
    /// Whether L(θ) is factorised on the matrix tape joined to the params'
    /// reverse sweep (a kernel with params and leaves: `factor.rs`).
    on_tape: bool,
}

/// The jitter added to K before factorising it for the whitened latent GP.
const LATENT_JITTER: f64 = 1e-6;

/// A latent GP with a Gaussian likelihood, integrated out: the observation
/// contributes log N(y | μ + offset, K + σ²/t·I) (tempered as in
/// [`GpModel`]), with K, μ, the offset and σ free to depend on params.
#[derive(Clone)]
pub struct Marginal {
    /// The integrated-out GP regression.
    pub model: GpModel,
    /// The coordinates of x (param entries) the marginal depends on.
    coords: Vec<usize>,
}

/// The unnormalised log density of a bound model over its params.
#[derive(Clone)]
pub struct Density {
    /// The bound model.
    pub bound: Arc<Bound>,
    /// The hypers' (fixed) values.
    pub hypers: Vec<Value<f64>>,
    /// The params' places in x.
    pub slots: Vec<Slot>,
    latent: Option<Latent>,
    marginal: Option<Marginal>,
    /// The power t of the likelihood (1, or a rung of thermodynamic
    /// integration): log π = log prior + t · log p(y | x).
    pub power: f64,
    /// The dimension of x.
    pub dim: usize,
    /// Each observation's power as written in the model (1 when none),
    /// checked finite and ≥ 0 when the density is built: it depends on
    /// data and hypers only, so it is evaluated once.
    powers: Vec<f64>,
    /// The log density compiled to a program over numbers, vectors and
    /// matrices (all but a GP integrated out): the gradient runs it and
    /// allocates nothing.
    program: Arc<DensityProgram>,
    /// The `estimate` block's integrands compiled to one program of their
    /// values (`None` without the block), or why they do not compile.
    estimates: Option<Result<Arc<DensityProgram>, Error>>,
}

/// What [`Density::prepare`] leaves beside the workspace.
struct Prepared<'a> {
    /// Σ log|dθ/du|.
    logjac: f64,
    /// A latent GP's factor L.
    factor: Option<std::borrow::Cow<'a, DMatrix<f64>>>,
    /// The params as values, Σ log|dθ/du| and dθ/du, for a latent GP whose
    /// kernel has params (its factor and gradient read them).
    kernel_params: Option<(Vec<Value<f64>>, f64, Vec<f64>)>,
}

/// The buffers of the compiled gradient, one set per thread (each chain
/// runs on one thread at a time).
#[derive(Default)]
struct Work {
    program: Workspace,
    estimates: Workspace,
    theta: Vec<f64>,
    dtheta: Vec<f64>,
    /// L v of a latent GP \[N\].
    lv: Vec<f64>,
}

thread_local! {
    static WORK: std::cell::RefCell<Work> = std::cell::RefCell::new(Work::default());
}

/// `f` in this thread's buffers, or in fresh ones when they are in use
/// further up the stack.
fn with_work<R>(f: impl FnOnce(&mut Work) -> R) -> R {
    WORK.with(|w| match w.try_borrow_mut() {
        Ok(mut work) => f(&mut work),
        Err(_) => f(&mut Work::default()),
    })
}

fn unsupported(span: crate::syntax::ast::Span, msg: impl Into<String>) -> Error {
    Error::at(ErrorKind::Unsupported, span, msg).with_label("here")
}

/// Refuse a param whose posterior is certainly improper: no prior, an
/// unbounded range, and nothing in the density depending on it (no
/// observation, other prior or latent GP), so its posterior is flat on an
/// infinite range and a sampler would drift away for ever.
fn improper_params(bound: &Bound) -> Result<(), Error> {
    use crate::ir::expr::Ref;
    let g = &bound.graph;
    let mut used = vec![false; g.params.len()];
    for p in &g.priors {
        used[p.param] = true;
    }
    let mut mark = |e: &TExpr| {
        for r in g.dependencies(e) {
            if let Ref::Param(i) = r {
                used[i] = true;
            }
        }
    };
    for p in &g.priors {
        p.dist.args.iter().for_each(&mut mark);
    }
    for o in &g.observations {
        o.dist.args.iter().for_each(&mut mark);
    }
    for gp in &g.gps {
        mark(&gp.mean);
        mark(&gp.kernel);
    }
    for s in &g.sites {
        mark(&s.input);
    }
    for (i, p) in g.params.iter().enumerate() {
        let b = bound.param_bounds[i];
        if !used[i] && (b.lower.is_none() || b.upper.is_none()) {
            return Err(Error::at(
                ErrorKind::Unsupported,
                p.span,
                format!(
                    "`{}` has no prior and nothing in the model depends on it: its posterior is flat on an unbounded range (improper), so it cannot be sampled",
                    p.name
                ),
            )
            .with_label("no prior")
            .with_note(format!(
                "give it a prior (`{} : ... ~ normal(0, 1)`), bounds on both sides, or remove it",
                p.name
            )));
        }
    }
    Ok(())
}

impl Density {
    /// Set up for a bound model.
    pub fn new(bound: Arc<Bound>) -> Result<Density, Error> {
        let g = bound.graph.clone();
        let hypers = bound.hyper_init.clone();
        let mut slots = Vec::new();
        let mut offset = 0;
        for (i, p) in g.params.iter().enumerate() {
            let shape = declared_shape(&p.name, &p.ty, &bound.sizes, p.span)?;
            let empty = match &p.ty {
                crate::ir::types::Ty::Vector(_) => shape.0 == 0,
                crate::ir::types::Ty::Matrix(..) => shape.0 == 0 || shape.1 == 0,
                _ => false,
            };
            if empty {
                return Err(Error::at(
                    ErrorKind::Shape,
                    p.size_span,
                    format!(
                        "`{}` ({}) has no entries here: a sampled param needs at least one",
                        p.name, p.ty
                    ),
                )
                .with_label("a size of 0")
                .with_note("give the size a value of 1 or more, or leave the param out"));
            }
            let slot = Slot {
                param: i,
                offset,
                shape,
                bounds: bound.param_bounds[i],
            };
            offset += slot.len();
            slots.push(slot);
        }
        improper_params(&bound)?;
        if let Some((h, p)) = g
            .hypers
            .iter()
            .find_map(|h| h.prior.as_ref().map(|p| (h, p)))
        {
            return Err(Error::at(
                ErrorKind::Unsupported,
                p.span,
                format!(
                    "`{}` is a hyper with a prior: a point estimate learned by the exact and variational engines (MAP-II); samplers hold hypers at their values and sample only params",
                    h.name
                ),
            )
            .with_label("prior on a hyper")
            .with_note(format!(
                "to sample `{}` with this prior, declare it in `param`",
                h.name
            )));
        }
        for p in &g.priors {
            if matches!(p.dist.dist, DistRef::Rust(_)) {
                return Err(unsupported(
                    p.dist.span,
                    "a likelihood registered from Rust takes its outcome as a number, so it cannot be the prior of a param when sampling; write the density in the model file (`likelihood name(...) { ... }`)",
                ));
            }
        }
        for o in &g.observations {
            if let Some(t) = &o.temperature
                && g.dependencies(t)
                    .iter()
                    .any(|r| matches!(r, crate::ir::expr::Ref::Param(_)))
            {
                return Err(unsupported(
                    t.span,
                    "the power of a likelihood cannot depend on a param when sampling",
                ));
            }
        }
        let mut latent = None;
        let mut marginal = None;
        if !g.sites.is_empty() {
            if g.sites.len() > 1 {
                return Err(unsupported(
                    g.sites[1].span,
                    "sampling handles one latent GP site in this version",
                ));
            }
            let gp = &g.gps[g.sites[0].gp];
            let lo = latent_observation_with_params(&bound, "nuts").ok();
            let gaussian = lo.as_ref().is_some_and(|lo| {
                lo.latent_arg == 0
                    && matches!(
                        g.observations[lo.obs].dist.dist,
                        DistRef::Builtin(Dist::Normal)
                    )
            });
            if let (true, Some(lo)) = (gaussian, lo) {
                let model = GpModel::from_structure(
                    bound.clone(),
                    &lo,
                    HyperLayout::new(&bound, false),
                    (0.0, 1e-6),
                    tempest_gp::model::SAMPLED,
                )?;
                let mut exprs = vec![&gp.kernel, &gp.mean, &model.sigma];
                exprs.extend(model.offset.iter().map(|(e, _)| e));
                let mut used = vec![false; g.params.len()];
                for e in exprs {
                    for r in g.dependencies(e) {
                        if let crate::ir::expr::Ref::Param(i) = r {
                            used[i] = true;
                        }
                    }
                }
                let coords = slots
                    .iter()
                    .filter(|s| used[s.param])
                    .flat_map(|s| s.offset..s.offset + s.len())
                    .collect();
                marginal = Some(Marginal { model, coords });
            } else {
                let params_of = |e: &TExpr| -> Vec<usize> {
                    g.dependencies(e)
                        .iter()
                        .filter_map(|r| match r {
                            crate::ir::expr::Ref::Param(i) => Some(*i),
                            _ => None,
                        })
                        .collect()
                };
                let input = &g.sites[0].input;
                if let Some(&i) = params_of(input).first() {
                    return Err(unsupported(
                        input.span,
                        format!(
                            "the inputs of `{}` depend on the param `{}`; sampling needs inputs that are data (put learned input scalings into the kernel, e.g. `rbf(ell)`)",
                            gp.name, g.params[i].name
                        ),
                    ));
                }
                let kernel_params = params_of(&gp.kernel);
                let kernel_coords: Vec<usize> = slots
                    .iter()
                    .filter(|s| kernel_params.contains(&s.param))
                    .flat_map(|s| s.offset..s.offset + s.len())
                    .collect();
                let inputs = bound.site_inputs(0, &hypers, &[])?;
                limits::check_memory(&[Request::new(format!(
                    "sampling the latent values of `{}` (the prior covariance, its factor and its gradient)",
                    gp.name
                ))
                .times("matrices", 3u64)
                .times("points", inputs.len())
                .times("points", inputs.len())])?;
                let l = if kernel_coords.is_empty() {
                    let env = Env::new(&bound, &hypers, &[], &[]);
                    let k = env.kernel(&gp.kernel)?;
                    let mut km = k.gram(&inputs)?;
                    for i in 0..km.nrows() {
                        km[(i, i)] += LATENT_JITTER;
                    }
                    crate::math::linalg::cholesky_jitter(&km, 0.0, 1e-2, "the prior covariance K")?
                        .l()
                } else {
                    DMatrix::zeros(0, 0)
                };
                let classes = bound.replicas(g.sites[0].gp)?;
                let n = inputs.len();
                latent = Some(Latent {
                    site: 0,
                    offset,
                    n,
                    classes,
                    l,
                    mean: gp.mean.clone(),
                    kernel: gp.kernel.clone(),
                    inputs,
                    kernel_coords,
                    on_tape: false,
                });
                offset += n * classes;
            }
        }
        // The powers do not depend on params (checked above): evaluated
        // and checked once here, at their place in the file.
        let env = Env::new(&bound, &hypers, &[], &[]);
        let powers = (0..g.observations.len())
            .map(|j| likelihood_power(&env, j))
            .collect::<Result<Vec<f64>, _>>()?;
        if offset == 0 {
            return Err(Error::new(
                ErrorKind::Unsupported,
                "the model has no params to sample: every quantity is data or a hyper, and a latent GP with a Gaussian likelihood is integrated out",
            )
            .with_note("declare the quantities to sample in a `param` block (e.g. `ell : positive ~ lognormal(0, 1)`), or use `infer exact`"));
        }
        let offsets: Vec<usize> = slots.iter().map(|s| s.offset).collect();
        let shapes: Vec<(usize, usize)> = slots.iter().map(|s| s.shape).collect();
        // A GP integrated out is its own term: its observation is left out
        // of the program.
        let mut program_powers = powers.clone();
        if let Some(m) = &marginal {
            program_powers[m.model.obs] = 0.0;
        }
        let site = latent.as_ref().map(|lt| (lt.n, lt.classes, &lt.mean));
        let program = Arc::new(DensityProgram::compile(
            &bound,
            &hypers,
            &offsets,
            &shapes,
            &program_powers,
            site,
        )?);
        let exprs: Vec<&TExpr> = g.estimates.iter().map(|e| &e.expr).collect();
        let estimates = (!exprs.is_empty()).then(|| {
            DensityProgram::compile_values(&bound, &hypers, (&offsets, &shapes), site, &exprs)
                .map(Arc::new)
        });
        let mut d = Density {
            bound,
            hypers,
            slots,
            latent,
            marginal,
            power: 1.0,
            dim: offset,
            powers,
            program,
            estimates,
        };
        let on_tape = d.kernel_has_leaves();
        if let Some(lt) = &mut d.latent {
            lt.on_tape = on_tape;
        }
        Ok(d)
    }

    /// The params' values at x (constrained), with Σ log|dθ/du| and dθ/du
    /// per entry of x.
    pub fn params_at(&self, x: &[f64]) -> (Vec<Value<f64>>, f64, Vec<f64>) {
        let mut values = Vec::with_capacity(self.slots.len());
        let mut logjac = 0.0;
        let mut dtheta = vec![1.0; self.dim];
        for s in &self.slots {
            let mut flat = Vec::with_capacity(s.len());
            for k in 0..s.len() {
                let u = x[s.offset + k];
                flat.push(s.bounds.constrain(u));
                logjac += s.bounds.log_jacobian(u);
                dtheta[s.offset + k] = s.bounds.constrain(Dual1::new(u, [1.0])).tangent()[0];
            }
            values.push(match s.shape {
                (0, 0) => Value::Real(flat[0]),
                (_, 0) => Value::Vector(DVector::from_vec(flat)),
                (n, m) => Value::Matrix(DMatrix::from_row_slice(n, m, &flat)),
            });
        }
        (values, logjac, dtheta)
    }

    /// d log|dθ/du| / du for one entry.
    fn dlogjac(b: &Bounds, u: f64) -> f64 {
        b.log_jacobian(Dual1::new(u, [1.0])).tangent()[0]
    }

    /// The latent GP sampled in whitened form and the GP integrated out,
    /// where the model has them.
    pub fn gp_parts(&self) -> (Option<&Latent>, Option<&Marginal>) {
        (self.latent.as_ref(), self.marginal.as_ref())
    }

    /// The latent GP's training inputs [N, D] (integrated out or sampled),
    /// if the model has one.
    pub fn gp_inputs(&self) -> Option<&crate::model::kernel::Inputs> {
        match (&self.latent, &self.marginal) {
            (_, Some(m)) => Some(&m.model.inputs),
            (Some(l), None) => Some(&l.inputs),
            _ => None,
        }
    }

    /// Whether the GP is integrated out of a `normal` likelihood whose mean
    /// is the GP's value alone (no offset), so the GP's values are on the
    /// outcome's scale.
    pub fn gp_is_mean_of_normal(&self) -> bool {
        self.marginal
            .as_ref()
            .is_some_and(|m| m.model.offset.is_empty())
    }

    /// Latent site values f = μ₀ + L v.
    pub fn sites_at(
        &self,
        x: &[f64],
        params: &[Value<f64>],
    ) -> Result<Vec<Option<Value<f64>>>, Error> {
        Ok(self.sites_and_factor(x, params)?.0)
    }

    /// The Cholesky factor L of K + 10⁻⁶I of the whitened latent GP at these
    /// params (computed when the kernel depends on params). A failed
    /// factorisation is an error, which a sampler counts as a divergence.
    pub fn factor<'a>(
        &'a self,
        lt: &'a Latent,
        params: &[Value<f64>],
    ) -> Result<std::borrow::Cow<'a, DMatrix<f64>>, Error> {
        if lt.kernel_coords.is_empty() {
            return Ok(std::borrow::Cow::Borrowed(&lt.l));
        }
        let env = Env::new(&self.bound, &self.hypers, params, &[]);
        let k = env.kernel(&lt.kernel)?.gram(&lt.inputs)?;
        let l =
            crate::math::linalg::cholesky_jitter(&k, LATENT_JITTER, 0.0, "the prior covariance K")?
                .l();
        Ok(std::borrow::Cow::Owned(l))
    }

    /// Latent site values and the factor they were made with.
    #[allow(clippy::type_complexity)]
    fn sites_and_factor(
        &self,
        x: &[f64],
        params: &[Value<f64>],
    ) -> Result<
        (
            Vec<Option<Value<f64>>>,
            Option<std::borrow::Cow<'_, DMatrix<f64>>>,
        ),
        Error,
    > {
        let Some(lt) = &self.latent else {
            return Ok((vec![], None));
        };
        let l = self.factor(lt, params)?;
        let env = Env::new(&self.bound, &self.hypers, params, &[]);
        let mu = env.scalar(&lt.mean)?;
        let mut f = DMatrix::zeros(lt.n, lt.classes);
        for c in 0..lt.classes {
            let v =
                DVector::from_column_slice(&x[lt.offset + c * lt.n..lt.offset + (c + 1) * lt.n]);
            f.set_column(c, &(&*l * v).add_scalar(mu));
        }
        let site = if lt.classes > 1 {
            Value::Matrix(f)
        } else {
            Value::Vector(f.column(0).into_owned())
        };
        Ok((vec![Some(site)], Some(l)))
    }

    /// log π(x), by the compiled program's forward pass (no reverse
    /// pass, so it costs a fraction of [`Density::log_density_grad`]).
    pub fn log_density(&self, x: &[f64]) -> Result<f64, Error> {
        let mut lp = self.compiled(x, false)?;
        if let Some(m) = &self.marginal
            && self.power != 0.0
        {
            lp += self.power * self.marginal_lml(m, x)?;
        }
        Ok(lp)
    }

    /// log p(y | x): the observations' log density at power 1 (each with
    /// the power written in the model, if any), including the log marginal
    /// likelihood of an integrated-out GP, by the compiled program.
    /// Thermodynamic integration averages this over each power posterior.
    pub fn log_likelihood(&self, x: &[f64]) -> Result<f64, Error> {
        let mut ll = self.compiled(x, true)?;
        if let Some(m) = &self.marginal {
            ll += self.marginal_lml(m, x)?;
        }
        Ok(ll)
    }

    /// The GP integrated out: its log marginal likelihood at x.
    fn marginal_lml(&self, m: &Marginal, x: &[f64]) -> Result<f64, Error> {
        let (params, _, _) = self.params_at(x);
        let env = Env::new(&self.bound, &self.hypers, &params, &[]);
        let pieces = m.model.pieces_in(&env, m.model.inputs.len())?;
        Ok(m.model.lml_of(&pieces)?.lml)
    }

    /// The program's value at x in a thread's workspace: log π less a GP
    /// integrated out, or (`lik`) the observations' part alone.
    fn compiled(&self, x: &[f64], lik: bool) -> Result<f64, Error> {
        let run = |work: &mut Work| -> Result<f64, Error> {
            let prepared = self.prepare(x, work, None)?;
            let at = At {
                theta: &work.theta[..self.dim],
                site: &work.lv,
            };
            if lik {
                return self
                    .program
                    .log_likelihood(&self.bound, at, &mut work.program);
            }
            let mut lp = self.program.run(
                &self.bound,
                at,
                self.power,
                prepared.logjac,
                None,
                &mut work.program,
            )?;
            if let Some(lt) = &self.latent {
                let v = &x[lt.offset..lt.offset + lt.n * lt.classes];
                lp -= 0.5 * v.iter().map(|a| a * a).sum::<f64>();
            }
            Ok(lp)
        };
        with_work(run)
    }

    /// Every `estimate` integrand at x, each flattened (a matrix row by
    /// row), by their compiled program; an error at the estimate when one
    /// is outside what programs cover.
    pub fn estimate_values(&self, x: &[f64]) -> Result<Vec<Vec<f64>>, Error> {
        let p = match &self.estimates {
            None => return Ok(Vec::new()),
            Some(Err(e)) => return Err(e.clone()),
            Some(Ok(p)) => p,
        };
        let run = |work: &mut Work| -> Result<Vec<Vec<f64>>, Error> {
            self.prepare(x, work, None)?;
            let at = At {
                theta: &work.theta[..self.dim],
                site: &work.lv,
            };
            let mut out = Vec::new();
            p.values(&self.bound, at, &mut work.estimates, &mut out)?;
            Ok(out)
        };
        with_work(run)
    }

    /// [`Density::estimate_values`] by the evaluator (the reference the
    /// compiled program is checked against).
    pub fn estimate_values_interpreted(&self, x: &[f64]) -> Result<Vec<Vec<f64>>, Error> {
        let (params, _, _) = self.params_at(x);
        let sites = self.sites_at(x, &params)?;
        let env = Env::new(&self.bound, &self.hypers, &params, &sites);
        self.bound
            .graph
            .estimates
            .iter()
            .map(|e| {
                let v = env.eval(&e.expr)?;
                Ok(match v {
                    Value::Int(_) | Value::Real(_) => vec![v.scalar().unwrap_or(f64::NAN)],
                    other => other.flatten(),
                })
            })
            .collect()
    }

    /// log π(x) by the evaluator, which interprets the model's
    /// expressions: the reference the compiled program is checked against
    /// (the same value to rounding).
    pub fn log_density_interpreted(&self, x: &[f64]) -> Result<f64, Error> {
        let (prior, lik) = self.log_parts(x, self.power != 0.0)?;
        Ok(if self.power == 0.0 {
            prior
        } else {
            prior + self.power * lik
        })
    }

    /// [`Density::log_likelihood`] by the evaluator (the reference the
    /// compiled program is checked against).
    pub fn log_likelihood_interpreted(&self, x: &[f64]) -> Result<f64, Error> {
        Ok(self.log_parts(x, true)?.1)
    }

    /// (log prior part, log-likelihood part) of log π at power 1: the
    /// Jacobian, priors and −½‖v‖², and the observations (computed only
    /// when `lik`).
    fn log_parts(&self, x: &[f64], lik: bool) -> Result<(f64, f64), Error> {
        let (params, logjac, _) = self.params_at(x);
        let sites = self.sites_at(x, &params)?;
        let env = Env::new(&self.bound, &self.hypers, &params, &sites);
        let g = &self.bound.graph;
        let mut lp = logjac;
        for p in &g.priors {
            lp += self.term_value(&env, &p.dist, &params[p.param], 1.0)?;
        }
        if let Some(lt) = &self.latent {
            let v = &x[lt.offset..lt.offset + lt.n * lt.classes];
            lp -= 0.5 * v.iter().map(|a| a * a).sum::<f64>();
        }
        let mut ll = 0.0;
        if !lik {
            return Ok((lp, ll));
        }
        for (j, o) in g.observations.iter().enumerate() {
            if self.marginal.as_ref().is_some_and(|m| m.model.obs == j) {
                continue;
            }
            let t = self.powers[j];
            if t != 0.0 {
                ll += self.term_value(&env, &o.dist, &self.bound.data[o.data], t)?;
            }
        }
        if let Some(m) = &self.marginal {
            let pieces = m.model.pieces_in(&env, m.model.inputs.len())?;
            ll += m.model.lml_of(&pieces)?.lml;
        }
        Ok((lp, ll))
    }

    /// One sampling statement's log density, tempered by t (values only).
    fn term_value(
        &self,
        env: &Env<f64>,
        dist: &DistCall,
        y: &Value<f64>,
        t: f64,
    ) -> Result<f64, Error> {
        let args: Vec<Value<f64>> = dist
            .args
            .iter()
            .map(|a| env.eval(a))
            .collect::<Result<_, _>>()?;
        Ok(t * Pointwise::new(&self.bound.graph, dist).sum(y, &args)?)
    }

    /// log π(x) and its gradient (written to `grad`): the compiled
    /// program's reverse pass, plus a GP integrated out.
    pub fn log_density_grad(&self, x: &[f64], grad: &mut [f64]) -> Result<f64, Error> {
        let p = &self.program;
        let mut lp = with_work(|work| self.compiled_grad(p, x, grad, work))?;
        if let Some(m) = &self.marginal
            && self.power != 0.0
        {
            let (params, _, dtheta) = self.params_at(x);
            lp += self.power * self.marginal_term(m, &params, &dtheta, grad)?;
        }
        Ok(lp)
    }

    /// θ = constrain(u), dθ/du and Σ log|dθ/du| at x into `work`, and a
    /// latent GP's L v there.
    fn prepare<'a>(
        &'a self,
        x: &[f64],
        work: &mut Work,
        given: Option<&'a DMatrix<f64>>,
    ) -> Result<Prepared<'a>, Error> {
        if work.theta.len() < self.dim {
            work.theta.resize(self.dim, 0.0);
            work.dtheta.resize(self.dim, 0.0);
        }
        let mut logjac = 0.0;
        for s in &self.slots {
            let r = s.offset..s.offset + s.len();
            let (theta, dtheta) = (&mut work.theta[r.clone()], &mut work.dtheta[r.clone()]);
            for ((&u, t), d) in x[r].iter().zip(theta).zip(dtheta) {
                *t = s.bounds.constrain(u);
                logjac += s.bounds.log_jacobian(u);
                *d = s.bounds.constrain(Dual1::new(u, [1.0])).tangent()[0];
            }
        }
        // A latent GP: L v, with L fixed or factorised at these params.
        let mut factor = None;
        // The params as values and dθ/du, for a kernel with params only
        // (its factor and its gradient read them).
        let kernel_params = self
            .latent
            .as_ref()
            .filter(|lt| !lt.kernel_coords.is_empty() && given.is_none())
            .map(|_| self.params_at(x));
        if let Some(lt) = &self.latent {
            let l = match (&kernel_params, given) {
                (_, Some(l)) => std::borrow::Cow::Borrowed(l),
                (None, None) => std::borrow::Cow::Borrowed(&lt.l),
                (Some((params, _, _)), None) => self.factor(lt, params)?,
            };
            let (n, classes) = (lt.n, lt.classes);
            work.lv.clear();
            work.lv.resize(n * classes, 0.0);
            // Class by class, L v_c in the processor's widest vectors (the
            // same bits from every version).
            for c in 0..classes {
                let v = &x[lt.offset + c * n..lt.offset + (c + 1) * n];
                tempest_math::vector::mat_vec(l.as_slice(), v, &mut work.lv[c * n..(c + 1) * n]);
            }
            factor = Some(l);
        }
        Ok(Prepared {
            logjac,
            factor,
            kernel_params,
        })
    }

    /// [`Density::log_density_grad`] by the compiled program, in `work`.
    /// A latent GP whose kernel has params and leaves is factorised
    /// on the matrix tape joined to a reverse sweep over those params, so
    /// that L̄ reaches them by one backward pass ([`Density::kernel_on_tape`]).
    fn compiled_grad(
        &self,
        p: &DensityProgram,
        x: &[f64],
        grad: &mut [f64],
        work: &mut Work,
    ) -> Result<f64, Error> {
        if let Some(lt) = self.latent.as_ref().filter(|lt| lt.on_tape)
            && reverse_sweeps()
        {
            return self.kernel_on_tape(lt, p, x, grad, work);
        }
        Ok(self.compiled_grad_at(p, x, grad, work, None)?.0)
    }

    /// The compiled gradient with the latent GP's factor `given` (made by
    /// the caller, who then takes L̄, the second value, when the kernel has
    /// params), or factorised here, with the kernel's params' part of the
    /// gradient added here too.
    fn compiled_grad_at(
        &self,
        p: &DensityProgram,
        x: &[f64],
        grad: &mut [f64],
        work: &mut Work,
        given: Option<&DMatrix<f64>>,
    ) -> Result<(f64, Option<DMatrix<f64>>), Error> {
        let Prepared {
            logjac,
            factor,
            kernel_params,
        } = self.prepare(x, work, given)?;
        grad.iter_mut().for_each(|v| *v = 0.0);
        let mut lp = p.run(
            &self.bound,
            At {
                theta: &work.theta[..self.dim],
                site: &work.lv,
            },
            self.power,
            logjac,
            Some(grad),
            &mut work.program,
        )?;
        for s in &self.slots {
            for o in s.offset..s.offset + s.len() {
                grad[o] = grad[o] * work.dtheta[o] + Self::dlogjac(&s.bounds, x[o]);
            }
        }
        if let (Some(lt), Some(l)) = (&self.latent, &factor) {
            // f_c = μ + L v_c: v̄_c = Lᵀ f̄_c − v_c (with −½‖v_c‖² in the
            // density), and L̄ = Σ_c tril(f̄_c v_cᵀ) for a kernel with params.
            let n = lt.n;
            let af = p.site_adjoint(&work.program);
            let mut l_bar =
                (!lt.kernel_coords.is_empty() && !af.is_empty()).then(|| DMatrix::zeros(n, n));
            for c in 0..lt.classes {
                let r = lt.offset + c * n..lt.offset + (c + 1) * n;
                let v = &x[r.clone()];
                lp -= 0.5 * v.iter().map(|a| a * a).sum::<f64>();
                let gv = &mut grad[r];
                gv.fill(0.0);
                if !af.is_empty() {
                    tempest_math::vector::mat_t_vec_add(l.as_slice(), &af[c * n..(c + 1) * n], gv);
                }
                for (g, vj) in gv.iter_mut().zip(v) {
                    *g -= vj;
                }
                if let Some(lb) = &mut l_bar {
                    adjoint::lower_matvec_vjp_l_add(lb, &af[c * n..(c + 1) * n], v);
                }
            }
            if given.is_some() {
                return Ok((lp, l_bar));
            }
            if let (Some(lb), Some((params, _, dtheta))) = (&l_bar, &kernel_params) {
                self.kernel_gradient(lt, l, lb, params, dtheta, grad)?;
            }
        }
        Ok((lp, None))
    }

    /// The integrated-out GP observation's log marginal likelihood; its
    /// gradient (times dθ/du) is added to `grad`, eight coordinates per
    /// forward-mode pass through the kernel, mean, offset and noise.
    fn marginal_term(
        &self,
        m: &Marginal,
        params: &[Value<f64>],
        dtheta: &[f64],
        grad: &mut [f64],
    ) -> Result<f64, Error> {
        let n = m.model.inputs.len();
        let env = Env::new(&self.bound, &self.hypers, params, &[]);
        let pieces = m.model.pieces_in(&env, n)?;
        let (state, w) = m.model.lml_and_weight(&pieces)?;
        let Some(w) = w else {
            return Ok(state.lml);
        };
        // One reverse pass over the kernel entries for every kernel
        // parameter at once, where the kernel has reverse rules; the dual
        // passes below then only carry the chain rule.
        let pbar = tempest_infer::gradients::leaf_adjoints(&pieces.kernel, &m.model.inputs, &w)?;
        if reverse_sweeps() {
            let g = self.coords_sweep(params, &m.coords, |env| {
                let pd = m.model.pieces_in(env, n)?;
                let (s, kernel_done) = m.model.contraction(&state, &w, &pd, pbar.as_deref());
                Ok(kernel_done.then_some(s))
            })?;
            if let Some(g) = g {
                for (&coord, gc) in m.coords.iter().zip(&g) {
                    grad[coord] += self.power * gc * dtheta[coord];
                }
                return Ok(state.lml);
            }
        }
        // Few coordinates (a GP's hypers, typically) take four-tangent
        // duals, which halve the cost of each kernel entry.
        if m.coords.len() <= 4 {
            self.marginal_chunks::<4>(m, params, &state, &w, pbar.as_deref(), dtheta, grad)?;
        } else {
            self.marginal_chunks::<CHUNK>(m, params, &state, &w, pbar.as_deref(), dtheta, grad)?;
        }
        Ok(state.lml)
    }

    /// The marginal's gradient in its coordinates, N per dual pass.
    #[allow(clippy::too_many_arguments)]
    fn marginal_chunks<const N: usize>(
        &self,
        m: &Marginal,
        params: &[Value<f64>],
        state: &tempest_gp::objective::LmlState,
        w: &crate::math::adjoint::LmlWeight,
        pbar: Option<&[f64]>,
        dtheta: &[f64],
        grad: &mut [f64],
    ) -> Result<(), Error>
    where
        adfn<N>: crate::model::custom::Scalar,
    {
        let n = m.model.inputs.len();
        let hypers: Vec<Value<adfn<N>>> = self.hypers.iter().map(Value::lift).collect();
        for chunk in m.coords.chunks(N) {
            let seeded = self.seeded_params::<N>(params, chunk);
            let env = Env::new(&self.bound, &hypers, &seeded, &[]);
            let pd = m.model.pieces_in(&env, n)?;
            let g = m.model.grad_chunk_n(state, w, &pd, pbar)?;
            for (c, &coord) in chunk.iter().enumerate() {
                grad[coord] += self.power * g[c] * dtheta[coord];
            }
        }
        Ok(())
    }

    /// The params as duals with unit tangents on the x coordinates in
    /// `chunk` (at most N).
    fn seeded_params<const N: usize>(
        &self,
        params: &[Value<f64>],
        chunk: &[usize],
    ) -> Vec<Value<adfn<N>>>
    where
        adfn<N>: crate::model::custom::Scalar,
    {
        self.params_with(params, chunk, |c, d: &mut adfn<N>| {
            let mut t = d.tangent();
            t[c] = 1.0;
            *d = adfn::<N>::new(d.value(), t);
        })
    }

    /// The params lifted to scalar type T, with `set(c, entry)` applied to
    /// the entry at x coordinate `coords[c]`.
    fn params_with<T: crate::model::custom::Scalar>(
        &self,
        params: &[Value<f64>],
        coords: &[usize],
        set: impl Fn(usize, &mut T),
    ) -> Vec<Value<T>> {
        let mut out: Vec<Value<T>> = params.iter().map(Value::lift).collect();
        for s in &self.slots {
            for (c, &coord) in coords.iter().enumerate() {
                if coord < s.offset || coord >= s.offset + s.len() {
                    continue;
                }
                let k = coord - s.offset;
                match &mut out[s.param] {
                    Value::Real(r) => set(c, r),
                    Value::Vector(v) => set(c, &mut v[k]),
                    // x holds matrices row-major (see `params_at`).
                    Value::Matrix(mm) => {
                        let cols = mm.ncols();
                        set(c, &mut mm[(k / cols, k % cols)])
                    }
                    _ => {}
                }
            }
        }
        out
    }

    /// ∂s/∂(the params' entries at x coordinates `coords`) for the scalar
    /// s = `f(env)` with the params as reverse-mode variables there: one
    /// reverse sweep ([`reverse::sweep`]). `None` when `f` gives none (a
    /// kernel without reverse rules).
    fn coords_sweep(
        &self,
        params: &[Value<f64>],
        coords: &[usize],
        f: impl FnOnce(&Env<'_, Rev>) -> Result<Option<Rev>, Error>,
    ) -> Result<Option<Vec<f64>>, Error> {
        let values = self.coord_values(params, coords);
        let mut some = true;
        let (_, g) = reverse::sweep(&values, |vars| {
            let ps = self.params_with(params, coords, |c, r: &mut Rev| *r = vars[c]);
            let hypers: Vec<Value<Rev>> = self.hypers.iter().map(Value::lift).collect();
            let env = Env::new(&self.bound, &hypers, &ps, &[]);
            Ok(f(&env)?.unwrap_or_else(|| {
                some = false;
                Rev::constant(0.0)
            }))
        })?;
        Ok(some.then_some(g))
    }

    /// The two parts of the score at x, each \[dim\]: ∇(log prior + log
    /// Jacobian (+ −½‖v‖²)) and ∇log p(y|x). The score of the power
    /// posterior at any t is then prior + t · likelihood, with no further
    /// evaluation of the model per t.
    pub fn score_parts(&self, x: &[f64]) -> Result<(Vec<f64>, Vec<f64>), Error> {
        let mut prior = vec![0.0; self.dim];
        let mut full = vec![0.0; self.dim];
        self.clone()
            .with_power(0.0)
            .log_density_grad(x, &mut prior)?;
        self.clone()
            .with_power(1.0)
            .log_density_grad(x, &mut full)?;
        let lik = full.iter().zip(&prior).map(|(f, p)| f - p).collect();
        Ok((prior, lik))
    }

    /// The same density with the likelihood raised to the power t ≥ 0.
    pub fn with_power(mut self, t: f64) -> Density {
        self.power = t;
        self
    }

    /// Whether a latent GP is integrated out (a Gaussian likelihood), so its
    /// values are not part of x.
    pub fn integrates_out_gp(&self) -> bool {
        self.marginal.is_some()
    }

    /// Names and shapes of the params, for output.
    pub fn param_shapes(&self) -> Vec<(String, Vec<usize>)> {
        self.slots
            .iter()
            .map(|s| {
                let name = self.bound.graph.params[s.param].name.clone();
                let shape = match s.shape {
                    (0, 0) => vec![],
                    (n, 0) => vec![n],
                    (n, m) => vec![n, m],
                };
                (name, shape)
            })
            .collect()
    }

    /// Output names in the language's convention (`beta[0]`, `A[1, 0]`),
    /// in the order of [`Density::stan_names`]: the summary, JSON and plots
    /// use them.
    pub fn language_names(&self) -> Vec<String> {
        self.names_by(tempest_output::stan_csv::language_names)
    }

    /// Output column names in Stan's convention (`beta.1`, `A.2.1`,
    /// column-major), the params first, then the latent GP's values at its
    /// inputs (`f.i`, or `f.i.c` for class `c`).
    pub fn stan_names(&self) -> Vec<String> {
        self.names_by(stan_names)
    }

    /// The params' names, then the latent GP's, by `name_of(name, shape)`.
    fn names_by(&self, name_of: fn(&str, &[usize]) -> Vec<String>) -> Vec<String> {
        let mut names: Vec<String> = self
            .param_shapes()
            .iter()
            .flat_map(|(n, shape)| name_of(n, shape))
            .collect();
        if let Some(lt) = &self.latent {
            let gp = &self.bound.graph.gps[self.bound.graph.sites[lt.site].gp];
            let shape = if lt.classes > 1 {
                vec![lt.n, lt.classes]
            } else {
                vec![lt.n]
            };
            names.extend(name_of(&gp.name, &shape));
        }
        names
    }

    /// The number of output columns ([`Density::stan_names`]'s length),
    /// counted without naming them.
    pub fn columns(&self) -> usize {
        let latent = self.latent.as_ref().map_or(0, |lt| lt.n * lt.classes);
        self.param_columns() + latent
    }

    /// `e` (an error about the memory the sampled quantities need) pointing
    /// at what is sampled most of: the sizes of the largest param, or the
    /// latent GP whose values are sampled; a secondary label when `e`
    /// already points at a setting.
    pub fn at_largest(&self, e: Error) -> Error {
        let g = &self.bound.graph;
        let largest = self.slots.iter().max_by_key(|s| s.len());
        let (span, what) = match (&self.latent, largest) {
            (Some(lt), p) if p.is_none_or(|p| p.len() < lt.n * lt.classes) => {
                let site = &g.sites[lt.site];
                let gp = &g.gps[site.gp];
                let span = gp.replicas.as_ref().map_or(site.span, |r| r.span);
                (
                    span,
                    format!(
                        "{} latent values of `{}` sampled",
                        lt.n * lt.classes,
                        gp.name
                    ),
                )
            }
            (_, Some(p)) => (
                g.params[p.param].size_span,
                format!("{} values of `{}`", p.len(), g.params[p.param].name),
            ),
            _ => return e,
        };
        if e.span.is_some() {
            e.with_secondary(span, what)
        } else {
            e.with_span(span).with_label(what)
        }
    }

    /// The number of output columns that are params (the rest are latent
    /// values).
    pub fn param_columns(&self) -> usize {
        self.slots.iter().map(Slot::len).sum()
    }

    /// The values for [`Density::stan_names`] at x: params constrained,
    /// matrices column-major, then f = μ₀ + L v.
    pub fn stan_values(&self, x: &[f64]) -> Result<Vec<f64>, Error> {
        let (params, _, _) = self.params_at(x);
        let mut out = Vec::with_capacity(self.dim);
        for v in &params {
            match v {
                Value::Real(r) => out.push(*r),
                Value::Vector(v) => out.extend(v.iter()),
                // nalgebra stores column-major, Stan's order.
                Value::Matrix(m) => out.extend(m.iter()),
                other => out.extend(other.flatten()),
            }
        }
        for f in self.sites_at(x, &params)?.into_iter().flatten() {
            match f {
                Value::Vector(v) => out.extend(v.iter()),
                Value::Matrix(m) => out.extend(m.iter()),
                other => out.extend(other.flatten()),
            }
        }
        Ok(out)
    }

    /// x at the params' initial values (0 on the unconstrained scale) with
    /// the latent values at zero.
    pub fn initial(&self) -> Vec<f64> {
        vec![0.0; self.dim]
    }
}
