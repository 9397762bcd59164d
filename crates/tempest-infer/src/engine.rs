//! Engines are state machines; one [`Executor`] drives them: it owns the
//! loop, cancellation and the observers (progress display, traces).

use super::fit::Fit;
use crate::error::{Error, ErrorKind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// What an engine reports after each step.
#[derive(Clone, Debug, Default)]
pub struct Progress {
    /// Steps taken so far.
    pub step: usize,
    /// The planned number of steps, when known.
    pub total: Option<usize>,
    /// The current value of the objective, if any.
    pub objective: Option<f64>,
    /// What the objective is (e.g. "log marginal likelihood").
    pub objective_name: &'static str,
    /// A short status line.
    pub message: String,
    /// Parallel lanes (e.g. one per chain), each shown as its own bar.
    pub lanes: Vec<Lane>,
}

/// The progress of one of several parallel lanes of work.
#[derive(Clone, Debug, Default)]
pub struct Lane {
    /// What the lane is ("chain 2").
    pub label: String,
    /// Steps done.
    pub pos: usize,
    /// Steps planned.
    pub len: usize,
    /// A short status line.
    pub message: String,
}

/// Whether an engine wants more steps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    /// Call `step` again.
    Running,
    /// Finished, with the reason.
    Done(String),
}

/// An inference engine as a state machine: built in its initial state, then
/// advanced one step at a time, then turned into a [`Fit`].
pub trait Engine {
    /// Advance one step.
    fn step(&mut self) -> Result<Status, Error>;
    /// The progress so far.
    fn progress(&self) -> Progress;
    /// The result (after `Done`, or early when cancelled).
    fn finish(self: Box<Self>, reason: String) -> Result<Box<dyn Fit>, Error>;
}

/// Watches an engine run.
pub trait Observer {
    /// Called after every step.
    fn observe(&mut self, progress: &Progress);
    /// Called once at the end.
    fn finish(&mut self) {}
}

/// Drives an engine to completion.
#[derive(Default)]
pub struct Executor {
    observers: Vec<Box<dyn Observer>>,
    cancel: Option<Arc<AtomicBool>>,
    max_steps: Option<usize>,
}

impl Executor {
    /// An executor with no observers.
    pub fn new() -> Self {
        Self::default()
    }
    /// Add an observer.
    pub fn observe(mut self, o: Box<dyn Observer>) -> Self {
        self.observers.push(o);
        self
    }
    /// Stop early (keeping the result so far) when the flag is set.
    pub fn cancel_on(mut self, flag: Arc<AtomicBool>) -> Self {
        self.cancel = Some(flag);
        self
    }
    /// A hard limit on the number of steps.
    pub fn max_steps(mut self, n: usize) -> Self {
        self.max_steps = Some(n);
        self
    }

    /// Run the engine until it is done, cancelled or out of steps: the
    /// flag is read before every step, and a step that ends with an
    /// [`ErrorKind::Interrupted`] error counts as cancelled, not failed.
    pub fn run(mut self, mut engine: Box<dyn Engine>) -> Result<Box<dyn Fit>, Error> {
        let mut steps = 0usize;
        let reason = loop {
            if self
                .cancel
                .as_ref()
                .is_some_and(|c| c.load(Ordering::SeqCst))
            {
                break "cancelled".to_string();
            }
            if self.max_steps.is_some_and(|m| steps >= m) {
                break "step limit reached".to_string();
            }
            // A step that found the stop flag set inside (a long ODE solve,
            // a whole-data pass) leaves the engine at its last complete
            // state: finish from there.
            let status = match engine.step() {
                Err(e) if e.is_interrupted() => break "cancelled".to_string(),
                r => r?,
            };
            steps += 1;
            let p = engine.progress();
            if let Some(o) = p.objective
                && !o.is_finite()
            {
                return Err(Error::new(
                    ErrorKind::Numerical,
                    format!("the {} became {o} at step {}", p.objective_name, p.step),
                )
                .with_note("check the data's scale (values of magnitude 1e150 or more overflow when squared) and the hypers' initial values"));
            }
            for o in &mut self.observers {
                o.observe(&p);
            }
            if let Status::Done(r) = status {
                break r;
            }
        };
        for o in &mut self.observers {
            o.finish();
        }
        engine.finish(reason)
    }
}
