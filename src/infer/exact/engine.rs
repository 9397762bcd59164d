//! The exact engine as a state machine: each step is one L-BFGS iteration
//! on −log p(y | θ) over the learned hypers (none: a single step).

use super::model::ExactModel;
use super::objective::LmlState;
use crate::error::{Error, ErrorKind};
use crate::infer::engine::{Engine, Progress, Status};
use crate::infer::fit::{ExactFit, Fit};
use crate::infer::settings::EngineConfig;
use argmin::core::{
    CostFunction, Gradient, IterState, Problem, Solver, State, TerminationReason, TerminationStatus,
};
use argmin::solver::linesearch::MoreThuenteLineSearch;
use argmin::solver::quasinewton::LBFGS;
use std::cell::RefCell;
use std::sync::Arc;

/// One evaluation: θ, −lml and its gradient.
type Evaluation = (Vec<f64>, f64, Vec<f64>);

/// The optimiser's state.
type LbfgsState = IterState<Vec<f64>, Vec<f64>, (), (), (), f64>;

/// −lml and its gradient for argmin, caching the last evaluation.
struct Objective {
    model: Arc<ExactModel>,
    autodiff: bool,
    cache: RefCell<Option<Evaluation>>,
}

impl Objective {
    fn eval(&self, theta: &[f64]) -> Result<(f64, Vec<f64>), Error> {
        if let Some((t, v, g)) = &*self.cache.borrow()
            && t.as_slice() == theta
        {
            return Ok((*v, g.clone()));
        }
        let (v, g) = if self.autodiff {
            self.model.lml_grad_autodiff(theta)?
        } else {
            let (s, g) = self.model.lml_grad(theta)?;
            (s.lml, g)
        };
        let neg_g: Vec<f64> = g.iter().map(|x| -x).collect();
        *self.cache.borrow_mut() = Some((theta.to_vec(), -v, neg_g.clone()));
        Ok((-v, neg_g))
    }
}

impl CostFunction for Objective {
    type Param = Vec<f64>;
    type Output = f64;
    fn cost(&self, p: &Vec<f64>) -> Result<f64, argmin::core::Error> {
        Ok(self.eval(p).map(|(v, _)| v).unwrap_or(f64::INFINITY))
    }
}

impl Gradient for Objective {
    type Param = Vec<f64>;
    type Gradient = Vec<f64>;
    fn gradient(&self, p: &Vec<f64>) -> Result<Vec<f64>, argmin::core::Error> {
        Ok(self
            .eval(p)
            .map(|(_, g)| g)
            .unwrap_or_else(|_| vec![f64::NAN; p.len()]))
    }
}

type Lbfgs = LBFGS<MoreThuenteLineSearch<Vec<f64>, Vec<f64>, f64>, Vec<f64>, Vec<f64>, f64>;

/// The exact engine's state.
pub struct ExactEngine {
    model: Arc<ExactModel>,
    problem: Problem<Objective>,
    solver: Lbfgs,
    state: Option<LbfgsState>,
    learn: bool,
    max_iters: usize,
    grad_tol: f64,
    iter: usize,
    trace: Vec<f64>,
    theta0: Vec<f64>,
    last_grad_norm: f64,
}

impl ExactEngine {
    /// Set up the engine at the hypers' initial values.
    pub fn new(model: ExactModel, cfg: &EngineConfig) -> Result<ExactEngine, Error> {
        let theta0 = model.layout.initial(&model.bound)?;
        let learn = model.layout.len > 0;
        let grad_tol = cfg.real("grad_tol");
        let autodiff = cfg.name_of("gradient") == Some("autodiff");
        let solver = LBFGS::new(MoreThuenteLineSearch::new(), 10)
            .with_tolerance_grad(grad_tol)
            .and_then(|s| s.with_tolerance_cost(0.0))
            .map_err(|e| Error::internal(format!("L-BFGS setup: {e}")))?;
        let model = Arc::new(model);
        Ok(ExactEngine {
            model: model.clone(),
            problem: Problem::new(Objective {
                model,
                autodiff,
                cache: RefCell::new(None),
            }),
            solver,
            state: None,
            learn,
            max_iters: cfg.int("max_iters").max(1) as usize,
            grad_tol,
            iter: 0,
            trace: Vec::new(),
            theta0,
            last_grad_norm: f64::NAN,
        })
    }
}

fn norm(g: &[f64]) -> f64 {
    g.iter().fold(0.0, |a, x| a + x * x).sqrt()
}

impl Engine for ExactEngine {
    fn step(&mut self) -> Result<Status, Error> {
        if !self.learn {
            let s = self.model.lml(&self.theta0)?;
            self.trace.push(s.lml);
            return Ok(Status::Done("no hypers to learn".into()));
        }
        let state = match self.state.take() {
            None => {
                // Fail early with the real error if the start is infeasible.
                let obj = self
                    .problem
                    .problem
                    .as_ref()
                    .ok_or_else(|| Error::internal("objective missing"))?;
                let (v, g) = obj.eval(&self.theta0)?;
                self.trace.push(-v);
                self.last_grad_norm = norm(&g);
                let st = IterState::new()
                    .param(self.theta0.clone())
                    .cost(v)
                    .gradient(g);
                let (st, _) = self.solver.init(&mut self.problem, st).map_err(|e| {
                    Error::new(ErrorKind::Numerical, format!("L-BFGS could not start: {e}"))
                })?;
                if self.last_grad_norm < self.grad_tol {
                    self.state = Some(st);
                    return Ok(Status::Done(
                        "gradient norm below tolerance at the start".into(),
                    ));
                }
                st
            }
            Some(st) => st,
        };
        if self.problem.problem.is_none() {
            return Err(Error::internal("the optimizer lost its objective"));
        }
        let (mut st, _) = self
            .solver
            .next_iter(&mut self.problem, state)
            .map_err(|e| Error::new(ErrorKind::Numerical, format!("L-BFGS failed: {e}")))?;
        st.increment_iter();
        st.update();
        self.iter += 1;
        self.trace.push(-st.get_cost());
        self.last_grad_norm = st.get_gradient().map(|g| norm(g)).unwrap_or(f64::NAN);
        let status = match st.get_termination_status() {
            TerminationStatus::Terminated(TerminationReason::SolverExit(msg)) => {
                Status::Done(format!("line search stopped: {msg}"))
            }
            TerminationStatus::Terminated(r) => Status::Done(r.to_string()),
            TerminationStatus::NotTerminated => {
                if self.last_grad_norm < self.grad_tol {
                    Status::Done(format!(
                        "gradient norm {:.2e} below {:.0e}",
                        self.last_grad_norm, self.grad_tol
                    ))
                } else if self.iter >= self.max_iters {
                    Status::Done(format!("reached max_iters = {}", self.max_iters))
                } else {
                    Status::Running
                }
            }
        };
        self.state = Some(st);
        Ok(status)
    }

    fn progress(&self) -> Progress {
        Progress {
            step: self.iter,
            total: Some(self.max_iters),
            objective: self.trace.last().copied(),
            objective_name: "log marginal likelihood",
            message: format!("|grad| = {:.3e}", self.last_grad_norm),
            lanes: vec![],
        }
    }

    fn finish(mut self: Box<Self>, reason: String) -> Result<Fit, Error> {
        let theta = match self.state.as_mut() {
            Some(st) => st
                .take_param()
                .or_else(|| st.take_best_param())
                .unwrap_or_else(|| self.theta0.clone()),
            None => self.theta0.clone(),
        };
        let this = *self;
        drop(this.problem);
        let model = Arc::try_unwrap(this.model).unwrap_or_else(|m| (*m).clone());
        let (state, grad): (LmlState, Vec<f64>) = model.lml_grad(&theta)?;
        let converged = !this.learn || norm(&grad) < this.grad_tol.max(1e-5);
        Ok(Fit::Exact(Box::new(ExactFit::new(
            model, theta, state, grad, this.iter, this.trace, reason, converged,
        ))))
    }
}
