//! Progress display on standard error for iterative engines (indicatif;
//! hidden automatically when standard error is not a terminal).

use crate::infer::engine::{Observer, Progress};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

/// A progress bar showing the step and the objective, or one bar per lane
/// (e.g. per chain) when the engine reports lanes.
pub struct BarProgress {
    bar: Option<ProgressBar>,
    multi: Option<MultiProgress>,
    lanes: Vec<ProgressBar>,
}

impl Default for BarProgress {
    fn default() -> Self {
        Self::new()
    }
}

impl BarProgress {
    /// A new display; the bars appear at the first step.
    pub fn new() -> Self {
        BarProgress {
            bar: None,
            multi: None,
            lanes: Vec::new(),
        }
    }
}

fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar())
}

impl Observer for BarProgress {
    fn observe(&mut self, p: &Progress) {
        if !p.lanes.is_empty() {
            let multi = self.multi.get_or_insert_with(MultiProgress::new);
            while self.lanes.len() < p.lanes.len() {
                let lane = &p.lanes[self.lanes.len()];
                let b = multi.add(ProgressBar::new(lane.len as u64));
                b.set_style(style("  {prefix} {bar:30} {pos}/{len} {msg}"));
                b.set_prefix(lane.label.clone());
                self.lanes.push(b);
            }
            for (b, lane) in self.lanes.iter().zip(&p.lanes) {
                b.set_length(lane.len as u64);
                b.set_position(lane.pos as u64);
                b.set_message(lane.message.clone());
            }
            return;
        }
        let bar = self.bar.get_or_insert_with(|| {
            let b = ProgressBar::new(p.total.unwrap_or(0) as u64);
            b.set_style(style("  {bar:30} {pos}/{len} {msg}"));
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
        for b in &self.lanes {
            b.finish_and_clear();
        }
    }
}
