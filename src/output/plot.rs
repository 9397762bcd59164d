//! PNG plots (plotters, bitmap backend, an embedded DejaVu Sans font).

use crate::error::{Error, ErrorKind};
use plotters::prelude::*;
use plotters::style::FontStyle;
use std::path::Path;
use std::sync::Once;

static FONT: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");

fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    });
}

fn plot_err(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::new(
        ErrorKind::Io,
        format!("cannot write the plot `{}`: {e}", path.display()),
    )
}

/// A 1-D regression fit: training points, predictive mean, and a 95% band.
pub struct RegressionPlot<'a> {
    /// Title at the top.
    pub title: &'a str,
    /// Training inputs and outcomes.
    pub train: (&'a [f64], &'a [f64]),
    /// Test inputs and outcomes, if any.
    pub test: Option<(&'a [f64], &'a [f64])>,
    /// Sorted grid of inputs.
    pub grid: &'a [f64],
    /// Predictive mean on the grid.
    pub mean: &'a [f64],
    /// Predictive variance of y on the grid (for the band).
    pub var: &'a [f64],
    /// Axis labels.
    pub labels: (&'a str, &'a str),
}

/// Draw a [`RegressionPlot`] to a PNG file.
pub fn regression_1d(path: &Path, p: &RegressionPlot) -> Result<(), Error> {
    register_font();
    let root = BitMapBackend::new(path, (960, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| plot_err(path, e))?;
    let lo: Vec<f64> = p
        .mean
        .iter()
        .zip(p.var)
        .map(|(m, v)| m - 1.96 * v.sqrt())
        .collect();
    let hi: Vec<f64> = p
        .mean
        .iter()
        .zip(p.var)
        .map(|(m, v)| m + 1.96 * v.sqrt())
        .collect();
    let all_x = p.train.0.iter().chain(p.grid);
    let (x0, x1) = all_x.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
        (a.min(x), b.max(x))
    });
    let ys = p
        .train
        .1
        .iter()
        .chain(&lo)
        .chain(&hi)
        .chain(p.test.map(|t| t.1).unwrap_or(&[]));
    let (y0, y1) = ys.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &y| {
        (a.min(y), b.max(y))
    });
    let pad = 0.05 * (y1 - y0).max(1e-9);
    let mut chart = ChartBuilder::on(&root)
        .caption(p.title, ("sans-serif", 24))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(x0..x1, (y0 - pad)..(y1 + pad))
        .map_err(|e| plot_err(path, e))?;
    chart
        .configure_mesh()
        .x_desc(p.labels.0)
        .y_desc(p.labels.1)
        .light_line_style(RGBColor(238, 238, 238))
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(|e| plot_err(path, e))?;
    let band: Vec<(f64, f64)> = p
        .grid
        .iter()
        .zip(&hi)
        .map(|(&x, &y)| (x, y))
        .chain(p.grid.iter().zip(&lo).rev().map(|(&x, &y)| (x, y)))
        .collect();
    chart
        .draw_series(std::iter::once(Polygon::new(band, BLUE.mix(0.18).filled())))
        .map_err(|e| plot_err(path, e))?
        .label("95% predictive band")
        .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 18, y + 5)], BLUE.mix(0.18).filled()));
    chart
        .draw_series(LineSeries::new(
            p.grid.iter().copied().zip(p.mean.iter().copied()),
            BLUE.stroke_width(2),
        ))
        .map_err(|e| plot_err(path, e))?
        .label("predictive mean")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 18, y)], BLUE.stroke_width(2)));
    chart
        .draw_series(
            p.train
                .0
                .iter()
                .zip(p.train.1)
                .map(|(&x, &y)| Circle::new((x, y), 3, BLACK.filled())),
        )
        .map_err(|e| plot_err(path, e))?
        .label("training data")
        .legend(|(x, y)| Circle::new((x + 9, y), 3, BLACK.filled()));
    if let Some((tx, ty)) = p.test {
        chart
            .draw_series(
                tx.iter()
                    .zip(ty)
                    .map(|(&x, &y)| Cross::new((x, y), 4, RED.stroke_width(2))),
            )
            .map_err(|e| plot_err(path, e))?
            .label("test data")
            .legend(|(x, y)| Cross::new((x + 9, y), 4, RED.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()
        .map_err(|e| plot_err(path, e))?;
    root.present().map_err(|e| plot_err(path, e))?;
    Ok(())
}
