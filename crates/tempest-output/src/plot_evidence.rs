//! The plot of thermodynamic integration: each rung's mean of log p(y|x)
//! against its power t, with ±2 standard-error bars (drawn from plain
//! numbers: the evidence engine's figure hands them over).

use super::axis;
use super::plot::{PALETTE, plot_err, register_font};
use crate::error::{Error, ErrorKind};
use crate::ticks::Axis;
use plotters::prelude::*;
use std::path::Path;

/// Draw μᵢ against tᵢ to a PNG file at `path`: `rungs` holds each rung's
/// (tᵢ, μᵢ, standard error of μᵢ); `method` names how the means were
/// estimated, in the legend.
///
/// Errors: [`ErrorKind::Data`] when no rung mean is finite, [`ErrorKind::Io`]
/// when the file cannot be written.
pub fn rung_means(
    path: &Path,
    rungs: &[(f64, f64, f64)],
    method: &str,
    title: &str,
) -> Result<(), Error> {
    register_font();
    let e = |err| plot_err(path, err);
    let pts: Vec<(f64, f64, f64)> = rungs
        .iter()
        .filter(|&&(t, mean, _)| axis::drawable(mean) && axis::drawable(t))
        .map(|&(t, mean, se)| {
            // An error bar that cannot be placed on the axis is left out.
            let bar = 2.0 * se.max(0.0);
            (t, mean, if axis::drawable(bar) { bar } else { 0.0 })
        })
        .collect();
    if pts.is_empty() {
        return Err(Error::new(
            ErrorKind::Data,
            "nothing to plot: no finite rung mean",
        ));
    }
    let (y0, y1) = pts
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| {
            (a.min(p.1 - p.2), b.max(p.1 + p.2))
        });
    let (y0, y1) = axis::padded(y0, y1, 0.06);
    let root = BitMapBackend::new(path, (1000, 620)).into_drawing_area();
    root.fill(&WHITE).map_err(e)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 24))
        .margin(14)
        .x_label_area_size(48)
        .y_label_area_size(90)
        .build_cartesian_2d(0.0..1.0, y0..y1)
        .map_err(e)?;
    let (xa, ya) = (Axis::new(0.0, 1.0, 10), Axis::new(y0, y1, 10));
    chart
        .configure_mesh()
        .x_desc("t (power of the likelihood)")
        .y_desc("E_t[log p(y | x)]")
        .x_labels(10)
        .y_labels(10)
        .x_label_formatter(&|x| xa.label(*x))
        .y_label_formatter(&|y| ya.label(*y))
        .draw()
        .map_err(e)?;
    let blue = PALETTE[0];
    chart
        .draw_series(LineSeries::new(
            pts.iter().map(|p| (p.0, p.1)),
            blue.stroke_width(2),
        ))
        .map_err(e)?
        .label(format!("rung means ({method})"))
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], blue.stroke_width(2)));
    chart
        .draw_series(
            pts.iter()
                .map(|p| PathElement::new(vec![(p.0, p.1 - p.2), (p.0, p.1 + p.2)], blue)),
        )
        .map_err(e)?;
    chart
        .draw_series(
            pts.iter()
                .map(|p| Circle::new((p.0, p.1), 3, blue.filled())),
        )
        .map_err(e)?;
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::LowerRight)
        .draw()
        .map_err(e)?;
    root.present().map_err(e)?;
    Ok(())
}
