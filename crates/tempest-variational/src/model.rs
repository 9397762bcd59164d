//! A model in the form the variational engines work with: a latent GP f
//! (or C copies for `categorical_logit`) with prior N(μ₀, K + jitter·I) at
//! the N training inputs, and a factorised, possibly tempered likelihood
//! ℓₙ(fₙ) = t · log p(yₙ | fₙ + offsetₙ, other argumentsₙ).

use crate::error::{Error, ErrorKind};
use crate::ir::bind::Bound;
use crate::ir::eval::Env;
use crate::ir::expr::TExpr;
use crate::ir::pointwise::Pointwise;
use crate::ir::types::Size;
use crate::ir::value::Value;
use crate::syntax::ast::Span;
use ad_trait::F64;
use std::sync::Arc;
use tempest_infer::hypers::HyperLayout;
use tempest_infer::structure::{LatentObservation, latent_observation, likelihood_power};
use tempest_model::custom::Scalar;
use tempest_model::dist::{Dist, Support};
use tempest_model::kernel::{Inputs, KernelValue};
use tempest_model::network::NetSpec;

/// A model the variational engines can run.
#[derive(Clone)]
pub struct ViModel {
    /// The bound model.
    pub bound: Arc<Bound>,
    /// Where the latent GP enters the likelihood.
    pub latent: LatentObservation,
    /// The number of class scores C (1 unless `categorical_logit`).
    pub classes: usize,
    /// The number of latent GPs J: C, or the rows of the mixing matrix of
    /// `categorical_logit(g(X) * A)`.
    pub latents: usize,
    /// Training inputs X, [N, D].
    pub inputs: Inputs,
    /// Outcomes y, \[N\].
    pub y: Vec<f64>,
    /// Which hypers are learned.
    pub layout: HyperLayout,
    /// Added to the diagonal of K.
    pub jitter: f64,
    /// The outcomes' leading size, when the likelihood's arguments are
    /// row-wise in it and so can be evaluated at a minibatch's rows alone
    /// (see [`ViModel::check_row_wise`]).
    pub row_wise: Option<Size>,
    /// The latent GP's deep kernel, when it has one: the kernel then sees
    /// the network's outputs (only the `svi` engine learns networks).
    pub deep: Option<DeepPart>,
}

/// A deep kernel's parts: the base kernel, the network's shape, and where
/// `deep(...)` was written.
#[derive(Clone)]
pub struct DeepPart {
    /// The base kernel on the features.
    pub kernel: TExpr,
    /// The network's shape (its inputs are the GP's inputs).
    pub spec: NetSpec,
    /// `groups = G`: latent GP j sees feature group j (F / G columns).
    pub groups: Option<usize>,
    /// Where `deep(...)` was written.
    pub span: Span,
}

/// The model's pieces at one θ: the kernel, the prior mean, and the
/// likelihood's other arguments.
pub struct ViPieces<T> {
    /// The kernel.
    pub kernel: KernelValue<T>,
    /// The prior mean μ₀.
    pub mean: T,
    /// The likelihood's arguments and power.
    pub lik: LikArgs<T>,
}

/// A likelihood's arguments at N points (or a minibatch's B) and its power.
#[derive(Clone)]
pub struct LikArgs<T> {
    /// The arguments (the latent one holds the offset: \[N\] or a number).
    pub args: Vec<Value<T>>,
    /// The power t of the likelihood.
    pub t: T,
    /// Whether the arguments hold a minibatch's rows only: element i
    /// belongs to the batch's i-th point rather than to data row i.
    pub local: bool,
}

impl LikArgs<f64> {
    /// The same arguments as constants of another scalar type.
    pub fn lift<U: Scalar>(&self) -> LikArgs<U> {
        LikArgs {
            args: self.args.iter().map(|a| a.lift()).collect(),
            t: U::constant(self.t),
            local: self.local,
        }
    }
    /// The likelihood's arguments at point `n` with latent value `f` (the
    /// latent argument is f plus its offset), for one latent value.
    pub fn point_args(&self, model: &ViModel, n: usize, f: f64) -> Vec<f64> {
        self.args
            .iter()
            .enumerate()
            .map(|(k, a)| {
                let x = a.element(n).unwrap_or(f64::NAN);
                if k == model.latent.latent_arg {
                    f + x
                } else {
                    x
                }
            })
            .collect()
    }
    /// The untempered likelihood (t = 1), for predictions.
    pub fn untempered(&self) -> LikArgs<f64> {
        LikArgs {
            args: self.args.clone(),
            t: 1.0,
            local: self.local,
        }
    }
}

impl ViModel {
    /// Recognise the structure for an engine on the full GP (one latent
    /// value per training point, no mixing); `engine` names the engine in
    /// messages. See [`ViModel::sparse`] for `learn_hypers` and `jitter`.
    pub fn new(
        bound: Arc<Bound>,
        learn_hypers: bool,
        jitter: f64,
        engine: &str,
    ) -> Result<ViModel, Error> {
        let model = ViModel::sparse(bound, learn_hypers, jitter, engine)?;
        if let Some(a) = &model.latent.mixing {
            return Err(Error::at(
                ErrorKind::Unsupported,
                a.span,
                format!("the `{engine}` engine does not mix latent GPs into class scores"),
            )
            .with_label("mixing matrix")
            .with_note("`categorical_logit(g(X) * A)` runs with the `svi` engine"));
        }
        if let Some(d) = &model.deep {
            return Err(Error::at(
                ErrorKind::Unsupported,
                d.span,
                format!("the `{engine}` engine does not learn a deep kernel's network"),
            )
            .with_label("deep kernel")
            .with_note("a deep kernel is learned by the `svi` engine: `infer svi { }` with `f : inducing(m = 100)` in a guide block"));
        }
        let (classes, inputs) = (model.latents, &model.inputs);
        crate::limits::check_memory(&[crate::limits::Request::new(format!(
            "the `{engine}` engine (the prior covariance, its factor and the posterior covariance per latent function)"
        ))
        .times("matrices", 3u64)
        .times("latent functions", classes)
        .times("points", inputs.len())
        .times("points", inputs.len())])
        .map_err(|e| e.with_note("use fewer rows (`--rows A..B`) for a full-rank variational posterior, or the `svi` engine with `f : inducing(m = 100)` in a guide block"))?;
        Ok(model)
    }

    /// Recognise the structure without reserving anything N × N (for the
    /// sparse engine, whose memory is linear in N); `jitter` is added to
    /// the diagonal of prior covariances.
    pub fn sparse(
        bound: Arc<Bound>,
        learn_hypers: bool,
        jitter: f64,
        engine: &str,
    ) -> Result<ViModel, Error> {
        let latent = latent_observation(&bound, engine)?;
        let layout = HyperLayout::new(&bound, learn_hypers);
        let hypers = layout.values::<f64>(&bound, &layout.initial(&bound)?);
        let inputs = bound.site_inputs(latent.site, &hypers, &[])?;
        let latents = bound.replicas(latent.gp)?;
        let classes = match &latent.mixing {
            Some(a) => {
                let env = Env::new(&bound, &hypers, &[], &[]);
                match env.eval(a)? {
                    Value::Matrix(m) if m.nrows() == latents && m.ncols() > 0 => m.ncols(),
                    v => {
                        return Err(Error::at(
                            ErrorKind::Shape,
                            a.span,
                            format!(
                                "the mixing matrix must be {latents} × C (one row per latent GP, one column per class), found {}",
                                v.shape()
                            ),
                        )
                        .with_label("mixing matrix"));
                    }
                }
            }
            None => latents,
        };
        let o = &bound.graph.observations[latent.obs];
        let y = bound.data[o.data].flatten();
        if y.len() != inputs.len() {
            return Err(Error::at(
                ErrorKind::Shape,
                o.span,
                format!(
                    "there are {} outcomes but {} latent values",
                    y.len(),
                    inputs.len()
                ),
            ));
        }
        let deep = match bound.graph.deep_kernel(latent.gp) {
            Some(d) => Some(DeepPart {
                kernel: d.kernel.clone(),
                spec: NetSpec::new(inputs.dim(), d.widths.to_vec(), d.activation)
                    .map_err(|e| e.with_span(d.span))?,
                groups: d.groups,
                span: d.span,
            }),
            None => None,
        };
        Ok(ViModel {
            bound,
            latent,
            classes,
            inputs,
            y,
            layout,
            jitter,
            row_wise: None,
            deep,
            latents,
        })
    }

    /// The located error for a non-finite expected log-likelihood `value`
    /// of data point `k`: the likelihood in the model, the outcome's row
    /// and column in the data.
    pub fn non_finite_expectation(&self, k: usize, value: f64) -> Error {
        let b = &self.bound;
        let o = &b.graph.observations[self.latent.obs];
        let d = &b.graph.data[o.data];
        let (row, col) = crate::ir::bind::element_location(&b.data[o.data], k, &d.name, &d.source);
        let y = self.y[k];
        let note = if y.abs() >= 1e150 {
            "the outcome is too large: its square overflows; rescale the outcomes"
        } else {
            "check its arguments at the current hypers (e.g. a scale that is not positive)"
        };
        Error::at(
            ErrorKind::Numerical,
            o.dist.span,
            format!("the expected log-likelihood of this outcome ({y:e}) is {value}"),
        )
        .in_data(b.location(row, col))
        .with_label("this likelihood")
        .with_note(note)
    }

    /// Is this the multi-class softmax likelihood?
    pub fn categorical(&self) -> bool {
        self.latent.replicated
    }

    /// The support of the observations (for predictive class probabilities).
    pub fn support(&self) -> Support {
        match &self.bound.graph.observations[self.latent.obs].dist.dist {
            crate::ir::graph::DistRef::Builtin(d) => d.support(),
            _ => Support::Real,
        }
    }

    /// The latent GP's kernel expression: the base kernel of a deep kernel.
    pub fn kernel_expr(&self) -> &TExpr {
        match &self.deep {
            Some(d) => &d.kernel,
            None => &self.bound.graph.gps[self.latent.gp].kernel,
        }
    }

    /// Evaluate the pieces at θ with data from `data` (training or test).
    pub fn pieces<T: Scalar>(&self, theta: &[T], data: &Bound) -> Result<ViPieces<T>, Error> {
        let hypers = self.layout.values::<T>(&self.bound, theta);
        let env = Env::new(data, &hypers, &[], &[]);
        let g = &self.bound.graph;
        let gp = &g.gps[self.latent.gp];
        let kernel = env.kernel(self.kernel_expr())?;
        let mean = env.scalar(&gp.mean)?;
        Ok(ViPieces {
            kernel,
            mean,
            lik: self.lik_args(&env)?,
        })
    }

    /// The pieces at θ with the likelihood's arguments at the training rows
    /// `rows` only when they are row-wise (see [`ViModel::batch_view`]), at
    /// all N rows otherwise. (The `svi` engine keeps pieces at row 0 for
    /// the kernel and the mean, and evaluates each batch's arguments.)
    pub fn pieces_rows<T: Scalar>(
        &self,
        theta: &[T],
        rows: &[usize],
    ) -> Result<ViPieces<T>, Error> {
        self.pieces_on(theta, self.batch_view(rows)?.as_ref())
    }

    /// The pieces at θ with the likelihood's arguments on `view` (a batch
    /// view from [`ViModel::batch_view`]; `None`: all N rows).
    pub fn pieces_on<T: Scalar>(
        &self,
        theta: &[T],
        view: Option<&Bound>,
    ) -> Result<ViPieces<T>, Error> {
        let hypers = self.layout.values::<T>(&self.bound, theta);
        let env = Env::new(&self.bound, &hypers, &[], &[]);
        let gp = &self.bound.graph.gps[self.latent.gp];
        Ok(ViPieces {
            kernel: env.kernel(self.kernel_expr())?,
            mean: env.scalar(&gp.mean)?,
            lik: self.lik_on(theta, view)?,
        })
    }

    /// The likelihood's arguments and power in `env`.
    fn lik_args<T: Scalar>(&self, env: &Env<T>) -> Result<LikArgs<T>, Error> {
        let g = &self.bound.graph;
        let o = &g.observations[self.latent.obs];
        let mut args = Vec::with_capacity(o.dist.args.len());
        for (i, a) in o.dist.args.iter().enumerate() {
            if i == self.latent.latent_arg
                && let Some(a) = &self.latent.mixing
            {
                args.push(env.eval(a)?);
            } else if i == self.latent.latent_arg {
                let mut off = Value::Real(T::zero());
                for (e, sign) in &self.latent.offset {
                    let v = env.eval(e)?;
                    let signed = crate::ir::ops::map_num(&v, &|x| x * F64(*sign), e.span)?;
                    off = crate::ir::ops::binary(
                        crate::syntax::ast::BinOp::Add,
                        off,
                        signed,
                        e.span,
                    )?;
                }
                args.push(off);
            } else {
                args.push(env.eval(a)?);
            }
        }
        let t = likelihood_power(env, self.latent.obs)?;
        Ok(LikArgs {
            args,
            t,
            local: false,
        })
    }

    /// The training data at `rows` alone ([`Bound::gather_rows`]) when the
    /// likelihood's arguments are row-wise ([`ViModel::row_wise`]), so that
    /// they cost O(B); `None` when they must be evaluated at all N rows.
    /// One view serves a batch's values and every hyper chunk's duals.
    pub fn batch_view(&self, rows: &[usize]) -> Result<Option<Bound>, Error> {
        self.row_wise
            .as_ref()
            .map(|size| self.bound.gather_rows(size, rows))
            .transpose()
    }

    /// The likelihood's arguments at θ on a batch view (local: element i
    /// belongs to the view's i-th row), or at all N rows for `None`.
    pub fn lik_on<T: Scalar>(
        &self,
        theta: &[T],
        view: Option<&Bound>,
    ) -> Result<LikArgs<T>, Error> {
        let hypers = self.layout.values::<T>(&self.bound, theta);
        let mut lik = self.lik_args(&Env::new(view.unwrap_or(&self.bound), &hypers, &[], &[]))?;
        lik.local = view.is_some();
        Ok(lik)
    }

    /// Decide whether the likelihood's arguments are row-wise, so that a
    /// minibatch can evaluate them at its rows alone: evaluated on a
    /// scrambled subset of the rows, they must equal the whole-data values
    /// at those rows (a mean or a slice over the data differs, and an
    /// expression that cannot be evaluated on fewer rows fails). Sets
    /// [`ViModel::row_wise`].
    pub fn check_row_wise(&mut self, theta: &[f64]) -> Result<(), Error> {
        self.row_wise = None;
        let o = &self.bound.graph.observations[self.latent.obs];
        let Some(size) = self.bound.leading_size(o.data).cloned() else {
            return Ok(());
        };
        let n = self.y.len();
        let full = self.pieces::<f64>(theta, &self.bound)?.lik;
        // Up to 37 rows spread over the data, in a scrambled order.
        let k = n.min(37);
        let rows: Vec<usize> = (0..k).map(|i| (i * 7919 % k) * n / k.max(1)).collect();
        let Ok(view) = self.bound.gather_rows(&size, &rows) else {
            return Ok(());
        };
        let hypers = self.layout.values::<f64>(&self.bound, theta);
        let Ok(part) = self.lik_args(&Env::new(&view, &hypers, &[], &[])) else {
            return Ok(());
        };
        let same = |a: f64, b: f64| a == b || (a - b).abs() <= 1e-12 * a.abs().max(b.abs());
        let mixing_slot = self.latent.mixing.as_ref().map(|_| self.latent.latent_arg);
        let agrees = full
            .args
            .iter()
            .zip(&part.args)
            .enumerate()
            .all(|(k, (f, p))| match (f, p) {
                // The mixing matrix is the same for every row.
                (Value::Matrix(a), Value::Matrix(b)) if Some(k) == mixing_slot => {
                    a.shape() == b.shape() && a.iter().zip(b.iter()).all(|(x, y)| same(*x, *y))
                }
                (Value::Vector(_) | Value::IntArray(_), Value::Vector(_) | Value::IntArray(_)) => {
                    rows.iter()
                        .enumerate()
                        .all(|(i, &r)| match (f.element(r), p.element(i)) {
                            (Some(a), Some(b)) => same(a, b),
                            _ => false,
                        })
                }
                (Value::Real(a), Value::Real(b)) => same(*a, *b),
                (Value::Int(a), Value::Int(b)) => a == b,
                _ => false,
            })
            && same(full.t, part.t);
        if agrees {
            self.row_wise = Some(size);
        }
        Ok(())
    }
}

impl LikArgs<f64> {
    /// The mixing matrix A [J, C] of `categorical_logit(g(X) * A)`.
    pub fn mixing<'a>(&'a self, model: &ViModel) -> Option<&'a nalgebra::DMatrix<f64>> {
        match (&model.latent.mixing, self.args.get(model.latent.latent_arg)) {
            (Some(_), Some(Value::Matrix(a))) => Some(a),
            _ => None,
        }
    }
}

impl<T: Scalar> LikArgs<T> {
    /// ℓₙ(f) = t · log p(y | f + offsetₙ, ...) for point n; `f` holds one
    /// latent value, or C class scores for `categorical_logit`.
    pub fn log_lik(&self, model: &ViModel, n: usize, y: f64, f: &[T]) -> Result<T, Error> {
        let o = &model.bound.graph.observations[model.latent.obs];
        let pw = Pointwise::new(&model.bound.graph, &o.dist);
        let lp = if model.categorical() {
            match (&model.latent.mixing, &self.args[model.latent.latent_arg]) {
                // Class scores s = Aᵀ f from the J latent values.
                (Some(_), Value::Matrix(a)) => {
                    let s: Vec<T> = (0..a.ncols())
                        .map(|c| (0..a.nrows()).fold(T::zero(), |acc, j| acc + a[(j, c)] * f[j]))
                        .collect();
                    pw.classes(y as usize, &s)
                }
                _ => pw.classes(y as usize, f),
            }
        } else {
            pw.point_with(T::constant(y), self.args.len(), |k| {
                let x = self.args[k]
                    .element(n)
                    .ok_or_else(|| Error::internal("likelihood argument element"))?;
                Ok(if k == model.latent.latent_arg {
                    f[0] + x
                } else {
                    x
                })
            })?
        };
        Ok(lp * self.t)
    }
}

/// Whether a distribution is log-concave in its latent argument (the ELBO of
/// mirror descent with ρ ≤ 1 then rises monotonically).
pub fn log_concave(d: Dist) -> bool {
    matches!(
        d,
        Dist::Normal
            | Dist::BernoulliLogit
            | Dist::BernoulliProbit
            | Dist::PoissonLog
            | Dist::NegBinomial2Log
            | Dist::CategoricalLogit
    )
}
