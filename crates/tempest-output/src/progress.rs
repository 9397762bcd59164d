//! Progress display on standard error for iterative engines: indicatif
//! bars with the time spent and an estimate of the time left on a
//! terminal; otherwise (a log file, a pipe, or a build without the
//! `progress` feature) one plain line every [`PLAIN_EVERY`] seconds, with
//! the same estimate.

use std::time::{Duration, Instant};
use tempest_infer::engine::{Observer, Progress};

/// Seconds between two plain progress lines.
pub const PLAIN_EVERY: u64 = 5;

/// A progress bar showing the step and the objective, or one bar per lane
/// (e.g. per chain) when the engine reports lanes; plain lines where bars
/// cannot be drawn.
pub struct BarProgress {
    #[cfg(feature = "progress")]
    bars: bars::Bars,
    /// For plain lines: the start and the last line's time.
    plain: Option<(Instant, Instant)>,
}

impl Default for BarProgress {
    fn default() -> Self {
        Self::new()
    }
}

impl BarProgress {
    /// A new display; the bars appear at the first step, or plain lines
    /// when standard error is not a terminal or the build has no bars
    /// (no `progress` feature).
    pub fn new() -> Self {
        let now = Instant::now();
        let bars =
            cfg!(feature = "progress") && std::io::IsTerminal::is_terminal(&std::io::stderr());
        BarProgress {
            #[cfg(feature = "progress")]
            bars: bars::Bars::default(),
            plain: (!bars).then_some((now, now)),
        }
    }
}

/// One plain progress line: the step (or the lanes' total), the objective,
/// the engine's message, the time since the start and, when the total is
/// known, the time left at the pace so far.
pub fn plain_line(p: &Progress, elapsed: Duration) -> String {
    let (step, total) = if p.lanes.is_empty() {
        (p.step, p.total)
    } else {
        (
            p.lanes.iter().map(|l| l.pos).sum(),
            Some(p.lanes.iter().map(|l| l.len).sum()),
        )
    };
    let mut line = match total {
        Some(t) if t > 0 => format!(
            "  step {step}/{t} ({:.0} %)",
            100.0 * step as f64 / t as f64
        ),
        _ => format!("  step {step}"),
    };
    if let Some(o) = p.objective {
        line.push_str(&format!(", {} {o:.6}", p.objective_name));
    }
    let msg = p.message.trim();
    if !msg.is_empty() {
        line.push_str(&format!(", {msg}"));
    }
    let secs = elapsed.as_secs_f64();
    // An engine that estimates the time left itself (svi) says so in its
    // message.
    match total {
        Some(t) if step > 0 && step < t && !msg.ends_with(" left") => {
            let left = secs * (t - step) as f64 / step as f64;
            line.push_str(&format!(" [{secs:.0} s, about {left:.0} s left]"));
        }
        _ => line.push_str(&format!(" [{secs:.0} s]")),
    }
    line
}

impl Observer for BarProgress {
    fn observe(&mut self, p: &Progress) {
        if let Some((start, last)) = &mut self.plain {
            let now = Instant::now();
            if now.duration_since(*last) >= Duration::from_secs(PLAIN_EVERY) {
                *last = now;
                eprintln!("{}", plain_line(p, now.duration_since(*start)));
            }
        } else {
            #[cfg(feature = "progress")]
            self.bars.observe(p);
        }
    }
    fn finish(&mut self) {
        #[cfg(feature = "progress")]
        self.bars.finish();
    }
}

/// The bars themselves (indicatif), with the `progress` feature.
#[cfg(feature = "progress")]
mod bars {
    use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
    use tempest_infer::engine::Progress;

    /// One bar, or one bar per lane under a [`MultiProgress`].
    #[derive(Default)]
    pub(super) struct Bars {
        bar: Option<ProgressBar>,
        multi: Option<MultiProgress>,
        lanes: Vec<ProgressBar>,
    }

    fn style(template: &str) -> ProgressStyle {
        ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar())
    }

    impl Bars {
        /// Show `p`: its lanes' bars, or one bar.
        pub(super) fn observe(&mut self, p: &Progress) {
            if !p.lanes.is_empty() {
                let multi = self.multi.get_or_insert_with(MultiProgress::new);
                while self.lanes.len() < p.lanes.len() {
                    let lane = &p.lanes[self.lanes.len()];
                    let b = multi.add(ProgressBar::new(lane.len as u64));
                    b.set_style(style(
                        "  {prefix} {bar:30} {pos}/{len} [{elapsed}, ~{eta} left] {msg}",
                    ));
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
                b.set_style(style(
                    "  {bar:30} {pos}/{len} [{elapsed}, ~{eta} left] {msg}",
                ));
                b
            });
            bar.set_position(p.step as u64);
            let obj = p
                .objective
                .map(|o| format!("{} {:.6}", p.objective_name, o))
                .unwrap_or_default();
            bar.set_message(format!("{obj}  {}", p.message));
        }

        /// Clear the bars at the end of the run.
        pub(super) fn finish(&mut self) {
            if let Some(b) = &self.bar {
                b.finish_and_clear();
            }
            for b in &self.lanes {
                b.finish_and_clear();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_line_names_the_step_the_objective_and_the_time() {
        let p = Progress {
            step: 30,
            total: Some(120),
            objective: Some(-12.5),
            objective_name: "ELBO",
            message: "epoch 2, 5000 points/s".into(),
            lanes: vec![],
        };
        assert_eq!(
            plain_line(&p, Duration::from_secs(7)),
            "  step 30/120 (25 %), ELBO -12.500000, epoch 2, 5000 points/s [7 s, about 21 s left]"
        );
        let own = Progress {
            message: "epoch 2, 3 s left".into(),
            ..p.clone()
        };
        assert!(plain_line(&own, Duration::from_secs(7)).ends_with("3 s left [7 s]"));
        let done = Progress { step: 120, ..p };
        assert!(plain_line(&done, Duration::from_secs(9)).ends_with("[9 s]"));
    }
}
