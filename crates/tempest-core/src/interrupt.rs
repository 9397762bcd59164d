//! Stopping a run from outside: Ctrl-C, SIGTERM, or a program's own flag
//! (`RunOptions::cancel`).
//!
//! The flag travels with the bound model (`tempest::ir::bind::Bound::stop`),
//! which every engine, density, fit and prediction pass holds, so every
//! loop that can run for seconds checks it: the executor between steps, and
//! inside a step an ODE solve, a whole-data pass, the draws of a chain's
//! slice, predictions at test data, the evaluation of estimates. A loop
//! that finds it set ends with an [`ErrorKind::Interrupted`] error naming
//! what it was doing; the engine keeps its result so far where it has one.

use crate::error::{Error, ErrorKind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// A run's stop flag: set from outside (a signal handler, another thread),
/// read by the run's loops. The default flag is never set.
#[derive(Clone, Debug, Default)]
pub struct StopFlag(Option<Arc<AtomicBool>>);

impl StopFlag {
    /// The flag `flag` (none: a flag that is never set).
    pub fn new(flag: Option<Arc<AtomicBool>>) -> StopFlag {
        StopFlag(flag)
    }

    /// Whether the run has been asked to stop.
    pub fn is_set(&self) -> bool {
        self.0.as_ref().is_some_and(|f| f.load(Ordering::Relaxed))
    }

    /// `Err` ([`ErrorKind::Interrupted`], "interrupted while `during`")
    /// when the run has been asked to stop.
    pub fn check(&self, during: &str) -> Result<(), Error> {
        if self.is_set() {
            Err(interrupted(during))
        } else {
            Ok(())
        }
    }
}

/// The error of a loop that stopped because its run was asked to:
/// "interrupted while `during`".
pub fn interrupted(during: &str) -> Error {
    Error::new(
        ErrorKind::Interrupted,
        format!("interrupted while {during}"),
    )
}

impl Error {
    /// Whether this error is a stop asked for from outside rather than a
    /// failure: a loop that retries or skips failed evaluations (a
    /// divergent trajectory, a rejected line-search point) passes it on.
    pub fn is_interrupted(&self) -> bool {
        self.kind == ErrorKind::Interrupted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flag_stops_only_once_set() {
        assert!(StopFlag::default().check("x").is_ok());
        let f = Arc::new(AtomicBool::new(false));
        let s = StopFlag::new(Some(f.clone()));
        assert!(!s.is_set() && s.check("solving").is_ok());
        f.store(true, Ordering::SeqCst);
        let e = s.clone().check("solving the ODE").unwrap_err();
        assert!(e.is_interrupted());
        assert_eq!(e.message, "interrupted while solving the ODE");
    }
}
