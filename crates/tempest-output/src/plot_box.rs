//! Box plots of repeated estimates: one box per group (a method at a
//! number of draws), whiskers to the extremes, and the true value as a
//! horizontal line. Used by repetition studies of control variates.

use super::axis;
use super::plot::{PALETTE, plot_err, register_font};
use crate::error::{Error, ErrorKind};
use crate::ticks::Axis;
use plotters::prelude::*;
use std::path::Path;

/// One box: its label and the estimates it summarises.
pub struct BoxGroup {
    /// The label under the box ("stein(rbf), 80").
    pub label: String,
    /// The estimates, one per run.
    pub values: Vec<f64>,
}

/// The quartiles and extremes (min, q1, median, q3, max) of the values of
/// `v` that can be drawn ([`axis::drawable`]: finite, within ±1e300), by
/// linear interpolation between order statistics; `None` when there are
/// none.
pub fn five_numbers(v: &[f64]) -> Option<[f64; 5]> {
    let mut s: Vec<f64> = v.iter().copied().filter(|&x| axis::drawable(x)).collect();
    if s.is_empty() {
        return None;
    }
    s.sort_by(f64::total_cmp);
    let q = |p: f64| {
        let h = p * (s.len() - 1) as f64;
        let (lo, hi) = (h.floor() as usize, h.ceil() as usize);
        s[lo] + (h - lo as f64) * (s[hi] - s[lo])
    };
    Some([s[0], q(0.25), q(0.5), q(0.75), s[s.len() - 1]])
}

/// Draw the groups as box plots to a PNG file at `path`, with the true
/// value as a dashed line when given.
///
/// Errors: [`ErrorKind::Data`] when no group has a finite value,
/// [`ErrorKind::Io`] when the file cannot be written.
pub fn box_plots(
    path: &Path,
    title: &str,
    y_label: &str,
    groups: &[BoxGroup],
    truth: Option<f64>,
) -> Result<(), Error> {
    register_font();
    let e = |err| plot_err(path, err);
    let stats: Vec<(usize, &BoxGroup, [f64; 5])> = groups
        .iter()
        .enumerate()
        .filter_map(|(i, g)| five_numbers(&g.values).map(|f| (i, g, f)))
        .collect();
    if stats.is_empty() {
        return Err(Error::new(
            ErrorKind::Data,
            "nothing to plot: no finite estimate",
        ));
    }
    let mut y0 = stats.iter().map(|s| s.2[0]).fold(f64::INFINITY, f64::min);
    let mut y1 = stats
        .iter()
        .map(|s| s.2[4])
        .fold(f64::NEG_INFINITY, f64::max);
    let truth = truth.filter(|&t| axis::drawable(t));
    if let Some(t) = truth {
        y0 = y0.min(t);
        y1 = y1.max(t);
    }
    let (lo, hi) = axis::padded(y0, y1, 0.06);
    let n = groups.len();
    // Labels run vertically under their boxes, so long method names fit.
    let longest = groups
        .iter()
        .map(|g| g.label.chars().count())
        .max()
        .unwrap_or(0);
    let label_area = (40 + 7 * longest).min(360) as u32;
    let root = BitMapBackend::new(path, (1000, 560 + label_area)).into_drawing_area();
    root.fill(&WHITE).map_err(e)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(14)
        .x_label_area_size(label_area)
        .y_label_area_size(90)
        .build_cartesian_2d(-0.5..(n as f64 - 0.5), lo..hi)
        .map_err(e)?;
    let ya = Axis::new(lo, hi, 10);
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_labels(10)
        .y_label_formatter(&|y| ya.label(*y))
        .y_desc(y_label)
        .draw()
        .map_err(e)?;
    for (i, _, f) in &stats {
        let c = PALETTE[i % PALETTE.len()];
        let x = *i as f64;
        let w = 0.3;
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(x - w, f[1]), (x + w, f[3])],
                c.mix(0.25).filled(),
            )))
            .map_err(e)?;
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(x - w, f[1]), (x + w, f[3])],
                c.stroke_width(2),
            )))
            .map_err(e)?;
        let lines = [
            vec![(x - w, f[2]), (x + w, f[2])],
            vec![(x, f[0]), (x, f[1])],
            vec![(x, f[3]), (x, f[4])],
            vec![(x - w / 2.0, f[0]), (x + w / 2.0, f[0])],
            vec![(x - w / 2.0, f[4]), (x + w / 2.0, f[4])],
        ];
        chart
            .draw_series(
                lines
                    .into_iter()
                    .map(|l| PathElement::new(l, c.stroke_width(2))),
            )
            .map_err(e)?;
    }
    // Each box's label runs upwards from below the axis (rotated text is
    // placed by its start, so the start goes a label's length down).
    let style = TextStyle::from(
        ("sans-serif", 13)
            .into_font()
            .transform(FontTransform::Rotate270),
    );
    for (i, g) in groups.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(i as f64, lo));
        let len = 7 * g.label.chars().count() as i32;
        root.draw(&Text::new(
            g.label.clone(),
            (px - 7, py + 10 + len),
            style.clone(),
        ))
        .map_err(e)?;
    }
    if let Some(t) = truth {
        chart
            .draw_series(DashedLineSeries::new(
                vec![(-0.5, t), (n as f64 - 0.5, t)],
                8,
                5,
                BLACK.stroke_width(1),
            ))
            .map_err(e)?
            .label(format!("true value {t}"))
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK));
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperRight)
            .draw()
            .map_err(e)?;
    }
    root.present().map_err(e)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn five_numbers_interpolate_between_order_statistics() {
        assert_eq!(
            five_numbers(&[3.0, 1.0, 2.0, 4.0, 5.0]),
            Some([1.0, 2.0, 3.0, 4.0, 5.0])
        );
        assert_eq!(five_numbers(&[1.0, 2.0]), Some([1.0, 1.25, 1.5, 1.75, 2.0]));
        assert_eq!(five_numbers(&[f64::NAN]), None);
    }
}
