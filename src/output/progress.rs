//! Progress display on standard error for iterative engines (indicatif;
//! hidden automatically when standard error is not a terminal).

use crate::infer::engine::{Observer, Progress};
use indicatif::{ProgressBar, ProgressStyle};

/// A progress bar showing the step and the objective.
pub struct BarProgress {
    bar: Option<ProgressBar>,
}

impl Default for BarProgress {
    fn default() -> Self {
        Self::new()
    }
}

impl BarProgress {
    /// A new display; the bar appears at the first step.
    pub fn new() -> Self {
        BarProgress { bar: None }
    }
}

impl Observer for BarProgress {
    fn observe(&mut self, p: &Progress) {
        let bar = self.bar.get_or_insert_with(|| {
            let b = ProgressBar::new(p.total.unwrap_or(0) as u64);
            b.set_style(
                ProgressStyle::with_template("  {bar:30} {pos}/{len} {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            b
        });
        bar.set_position(p.step as u64);
        let obj = p
            .objective
            .map(|o| format!("{} {:.6}", p.objective_name, o))
            .unwrap_or_default();
        bar.set_message(format!("{obj}  {}", p.message));
    }
    fn finish(&mut self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
