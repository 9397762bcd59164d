//! PNG plots (plotters, bitmap backend, an embedded DejaVu Sans font): a
//! 1-D regression fit, a reliability diagram of a classifier's test
//! predictions, and ELBO traces of variational runs.

use super::axis;
use crate::calibration::Bin;
use crate::error::{Error, ErrorKind};
use crate::ticks::Axis;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::FontStyle;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;
use std::sync::Once;
use tempest_infer::band::Band;

static FONT: &[u8] = include_bytes!("../assets/fonts/DejaVuSans.ttf");

pub(crate) fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    });
}

pub(crate) fn plot_err(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::new(
        ErrorKind::Io,
        format!("cannot write the plot `{}`: {e}", path.display()),
    )
}

/// A 1-D regression fit: the predictive mean of y with its 50 % and 95 %
/// bands, the latent f's 95 % band (dashed) where f is on y's scale, and
/// the training and test points on top.
pub struct RegressionPlot<'a> {
    /// Title at the top.
    pub title: &'a str,
    /// Training inputs and outcomes.
    pub train: (&'a [f64], &'a [f64]),
    /// Test inputs and outcomes, if any.
    pub test: Option<(&'a [f64], &'a [f64])>,
    /// Sorted inputs the predictions are drawn at.
    pub grid: &'a [f64],
    /// The predictive distribution of y at `grid`.
    pub y: &'a Band,
    /// The latent f's 95 % band at `grid` (lower, upper), when f is on
    /// the outcome's scale (an identity link).
    pub f: Option<(&'a [f64], &'a [f64])>,
    /// Axis labels.
    pub labels: (&'a str, &'a str),
}

/// Draw a [`RegressionPlot`] to a PNG file.
pub fn regression_1d(path: &Path, p: &RegressionPlot) -> Result<(), Error> {
    register_font();
    let root = BitMapBackend::new(path, (960, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| plot_err(path, e))?;
    let (lo, hi) = (&p.y.q2_5, &p.y.q97_5);
    let all_x = p.train.0.iter().chain(p.grid).copied();
    let (x0, x1) = axis::extent(all_x).unwrap_or((0.0, 1.0));
    let test_ys: Vec<f64> = p
        .test
        .map(|(tx, ty)| {
            tx.iter()
                .zip(ty)
                .filter(|(x, _)| (x0..=x1).contains(*x))
                .map(|(_, &y)| y)
                .collect()
        })
        .unwrap_or_default();
    let ys = p
        .train
        .1
        .iter()
        .chain(lo)
        .chain(hi)
        .chain(&test_ys)
        .copied();
    let (y0, y1) = axis::extent(ys).unwrap_or((0.0, 1.0));
    let (y0, y1) = axis::padded(y0, y1, 0.05);
    let (x0, x1) = if x1 > x0 {
        (x0, x1)
    } else {
        axis::padded(x0, x1, 0.05)
    };
    // Every point drawn lies in the axes: values beyond them (non-finite,
    // or beyond ±axis::LIMIT) are drawn at the edge or left out.
    let at = |x: f64, y: f64| -> Option<(f64, f64)> {
        (axis::drawable(x) && !y.is_nan()).then(|| (x.clamp(x0, x1), y.clamp(y0, y1)))
    };
    let mut chart = ChartBuilder::on(&root)
        .caption(p.title, ("sans-serif", 24))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(x0..x1, y0..y1)
        .map_err(|e| plot_err(path, e))?;
    let (xa, ya) = (Axis::new(x0, x1, 10), Axis::new(y0, y1, 10));
    chart
        .configure_mesh()
        .x_desc(p.labels.0)
        .y_desc(p.labels.1)
        .x_labels(10)
        .y_labels(10)
        .x_label_formatter(&|x| xa.label(*x))
        .y_label_formatter(&|y| ya.label(*y))
        .light_line_style(RGBColor(238, 238, 238))
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(|e| plot_err(path, e))?;
    // Where the training data end (or start) when the test inputs go past
    // them: a forecast (or backcast) is read from that line on.
    let test_x = p.test.map_or(&[][..], |t| t.0);
    for (edge, label) in training_edges(p.train.0, test_x) {
        let style = RGBColor(90, 90, 90).stroke_width(2);
        chart
            .draw_series(DashedLineSeries::new([(edge, y0), (edge, y1)], 8, 5, style))
            .map_err(|e| plot_err(path, e))?
            .label(label)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 18, y)], style));
    }
    let band = |lo: &[f64], hi: &[f64]| -> Vec<(f64, f64)> {
        p.grid
            .iter()
            .zip(hi)
            .filter_map(|(&x, &y)| at(x, y))
            .chain(p.grid.iter().zip(lo).rev().filter_map(|(&x, &y)| at(x, y)))
            .collect()
    };
    for (lo, hi, shade, label) in [
        (&p.y.q2_5, &p.y.q97_5, 0.14, "95% predictive interval of y"),
        (&p.y.q25, &p.y.q75, 0.28, "50% predictive interval of y"),
    ] {
        let style = BLUE.mix(shade).filled();
        chart
            .draw_series(std::iter::once(Polygon::new(band(lo, hi), style)))
            .map_err(|e| plot_err(path, e))?
            .label(label)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 18, y + 5)], style));
    }
    if let Some((lo, hi)) = p.f {
        let style = RGBColor(0, 0, 140).stroke_width(1);
        for (k, side) in [lo, hi].into_iter().enumerate() {
            let drawn = chart
                .draw_series(DashedLineSeries::new(
                    p.grid.iter().zip(side).filter_map(|(&x, &y)| at(x, y)),
                    6,
                    4,
                    style,
                ))
                .map_err(|e| plot_err(path, e))?;
            if k == 0 {
                drawn
                    .label("95% interval of f")
                    .legend(move |(x, y)| PathElement::new([(x, y), (x + 18, y)], style));
            }
        }
    }
    chart
        .draw_series(LineSeries::new(
            p.grid.iter().zip(&p.y.mean).filter_map(|(&x, &y)| at(x, y)),
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
                .filter_map(|(&x, &y)| at(x, y))
                .map(|q| Circle::new(q, 3, BLACK.filled())),
        )
        .map_err(|e| plot_err(path, e))?
        .label("training data")
        .legend(|(x, y)| Circle::new((x + 9, y), 3, BLACK.filled()));
    if let Some((tx, ty)) = p.test {
        // Points beyond the plotted inputs are left out (and counted), not
        // drawn at the edge where they would mislead.
        let inside: Vec<(f64, f64)> = tx
            .iter()
            .zip(ty)
            .filter(|(x, _)| (x0..=x1).contains(*x))
            .filter_map(|(&x, &y)| at(x, y))
            .collect();
        let outside = tx.len() - inside.len();
        let label = if outside > 0 {
            format!("test data ({outside} outside the plotted inputs, not shown)")
        } else {
            "test data".to_string()
        };
        chart
            .draw_series(
                inside
                    .into_iter()
                    .map(|(x, y)| Cross::new((x, y), 4, RED.stroke_width(2))),
            )
            .map_err(|e| plot_err(path, e))?
            .label(label)
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

/// The edges of the training inputs `train` that the test inputs `test`
/// go past, each with its legend label: the last training input when a
/// test input lies beyond it (a forecast), the first when one lies before
/// it. Non-finite inputs are ignored.
pub fn training_edges(train: &[f64], test: &[f64]) -> Vec<(f64, &'static str)> {
    let finite = |v: &[f64]| {
        v.iter()
            .filter(|x| x.is_finite())
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
                (a.min(x), b.max(x))
            })
    };
    let (lo, hi) = finite(train);
    let (tlo, thi) = finite(test);
    let mut out = Vec::new();
    if lo.is_finite() && tlo < lo {
        out.push((lo, "start of the training data"));
    }
    if hi.is_finite() && thi > hi {
        out.push((hi, "end of the training data"));
    }
    out
}

/// Colours for overlaid series (the Tableau 10 palette).
pub(crate) const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// Draw a reliability diagram (Guo et al. 2017) to a PNG file.
///
/// The top panel has one bar per confidence bin, as tall as the fraction of
/// its points classified correctly, the gap between that accuracy and the
/// bin's mean confidence shaded, and the diagonal of perfect calibration; the
/// panel below counts the test points per bin; the side panel holds the
/// legend, the overall accuracy (from the bins), and `ece` and `mce`.
/// `bins` are the non-empty bins, as a classifier's test metrics hold
/// them; `n_bins` (at least 1) is how many equal-width bins there
/// were.
pub fn reliability_diagram(
    path: &Path,
    bins: &[Bin],
    n_bins: usize,
    ece: f64,
    mce: f64,
    title: &str,
) -> Result<(), Error> {
    register_font();
    let e = |err| plot_err(path, err);
    let width = 1.0 / n_bins.max(1) as f64;
    let root = BitMapBackend::new(path, (1060, 780)).into_drawing_area();
    root.fill(&WHITE).map_err(e)?;
    let root = root
        .titled(title, ("sans-serif", 24))
        .map_err(e)?
        .margin(4, 8, 8, 8);
    let (left, side) = root.split_horizontally(760);
    let (top, bottom) = left.split_vertically(540);

    let blue = RGBColor(31, 119, 180);
    let red = RGBColor(214, 39, 40);
    let unit = Axis::new(0.0, 1.0, 11);
    let mut chart = ChartBuilder::on(&top)
        .margin(8)
        .x_label_area_size(28)
        .y_label_area_size(64)
        .build_cartesian_2d(0.0..1.0, 0.0..1.0)
        .map_err(e)?;
    chart
        .configure_mesh()
        .y_desc("accuracy (fraction correct)")
        .x_labels(11)
        .y_labels(11)
        .x_label_formatter(&|x| unit.label(*x))
        .y_label_formatter(&|y| unit.label(*y))
        .light_line_style(RGBColor(238, 238, 238))
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 16))
        .draw()
        .map_err(e)?;
    chart
        .draw_series(bins.iter().map(|b| {
            Rectangle::new(
                [(b.lower, 0.0), ((b.lower + width).min(1.0), b.accuracy)],
                blue.mix(0.75).filled(),
            )
        }))
        .map_err(e)?;
    chart
        .draw_series(bins.iter().map(|b| {
            Rectangle::new(
                [(b.lower, 0.0), ((b.lower + width).min(1.0), b.accuracy)],
                RGBColor(20, 60, 110).stroke_width(1),
            )
        }))
        .map_err(e)?;
    // The gap between accuracy and mean confidence: pink where it lies above
    // the bar (over-confident), red hatching over either.
    chart
        .draw_series(bins.iter().filter(|b| b.confidence > b.accuracy).map(|b| {
            Rectangle::new(
                [
                    (b.lower, b.accuracy),
                    ((b.lower + width).min(1.0), b.confidence),
                ],
                red.mix(0.22).filled(),
            )
        }))
        .map_err(e)?;
    let area = chart.plotting_area();
    let (xr, yr) = area.get_pixel_range();
    let pixel_area = area.strip_coord_spec();
    for b in bins {
        let (ax, ay) = area.map_coordinate(&(b.lower, b.accuracy));
        let (cx, cy) = area.map_coordinate(&((b.lower + width).min(1.0), b.confidence));
        let (x0, x1) = (ax.min(cx) - xr.start, ax.max(cx) - xr.start);
        let (y0, y1) = (ay.min(cy) - yr.start, ay.max(cy) - yr.start);
        hatch(&pixel_area, (x0, y0), (x1, y1), red.stroke_width(1)).map_err(e)?;
        pixel_area
            .draw(&Rectangle::new([(x0, y0), (x1, y1)], red.stroke_width(2)))
            .map_err(e)?;
    }
    chart
        .draw_series(DashedLineSeries::new(
            [(0.0, 0.0), (1.0, 1.0)],
            10,
            6,
            BLACK.mix(0.7).stroke_width(2),
        ))
        .map_err(e)?;

    let n: usize = bins.iter().map(|b| b.count).sum();
    let max_count = bins.iter().map(|b| b.count).max().unwrap_or(1).max(1) as f64;
    let count_axis = Axis::new(0.0, max_count * 1.22, 4).whole();
    let mut counts = ChartBuilder::on(&bottom)
        .margin(8)
        .x_label_area_size(48)
        .y_label_area_size(64)
        .build_cartesian_2d(0.0..1.0, 0.0..max_count * 1.22)
        .map_err(e)?;
    counts
        .configure_mesh()
        .x_desc("confidence (predicted probability of the predicted class)")
        .y_desc("test points")
        .x_labels(11)
        .y_labels(4)
        .x_label_formatter(&|x| unit.label(*x))
        .y_label_formatter(&|y| count_axis.label(*y))
        .light_line_style(RGBColor(238, 238, 238))
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 16))
        .draw()
        .map_err(e)?;
    counts
        .draw_series(bins.iter().map(|b| {
            Rectangle::new(
                [(b.lower, 0.0), ((b.lower + width).min(1.0), b.count as f64)],
                RGBColor(150, 150, 150).filled(),
            )
        }))
        .map_err(e)?;
    let count_font = ("sans-serif", 13)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Center, VPos::Bottom));
    counts
        .draw_series(bins.iter().map(|b| {
            Text::new(
                b.count.to_string(),
                (b.lower + 0.5 * width, b.count as f64 + 0.03 * max_count),
                count_font.clone(),
            )
        }))
        .map_err(e)?;

    // The side panel: legend and numbers, clear of the data.
    let accuracy = if n > 0 {
        bins.iter()
            .map(|b| b.accuracy * b.count as f64)
            .sum::<f64>()
            / n as f64
    } else {
        f64::NAN
    };
    let font = ("sans-serif", 15).into_font().color(&BLACK);
    let big = ("sans-serif", 18).into_font().color(&BLACK);
    let (x0, mut y) = (14, 24);
    let legend: [(&str, ShapeStyle); 4] = [
        ("accuracy in the bin", blue.mix(0.75).filled()),
        ("gap to its mean confidence", red.mix(0.22).filled()),
        ("perfect calibration", BLACK.mix(0.7).stroke_width(2)),
        ("test points per bin", RGBColor(150, 150, 150).filled()),
    ];
    for (i, (label, style)) in legend.iter().enumerate() {
        if i == 2 {
            side.draw(&PathElement::new([(x0, y + 8), (x0 + 8, y + 8)], *style))
                .map_err(e)?;
            side.draw(&PathElement::new(
                [(x0 + 14, y + 8), (x0 + 22, y + 8)],
                *style,
            ))
            .map_err(e)?;
        } else {
            side.draw(&Rectangle::new([(x0, y), (x0 + 22, y + 16)], *style))
                .map_err(e)?;
            if i == 1 {
                hatch(&side, (x0, y), (x0 + 22, y + 16), red.stroke_width(1)).map_err(e)?;
                side.draw(&Rectangle::new(
                    [(x0, y), (x0 + 22, y + 16)],
                    red.stroke_width(2),
                ))
                .map_err(e)?;
            }
        }
        side.draw(&Text::new(label.to_string(), (x0 + 32, y), font.clone()))
            .map_err(e)?;
        y += 28;
    }
    y += 20;
    let lines = [
        format!("ECE  {ece:.4}"),
        format!("MCE  {mce:.4}"),
        format!("accuracy  {accuracy:.4}"),
        format!("test points  {n}"),
        format!(
            "non-empty bins  {} of {}",
            bins.len(),
            (1.0 / width).round()
        ),
    ];
    for (i, l) in lines.iter().enumerate() {
        let f = if i < 2 { big.clone() } else { font.clone() };
        side.draw(&Text::new(l.clone(), (x0, y), f)).map_err(e)?;
        y += if i < 2 { 30 } else { 24 };
    }
    y += 16;
    let notes = [
        "ECE: the gaps averaged,",
        "weighted by points per bin;",
        "MCE: the largest gap.",
        "Bars above the diagonal:",
        "under-confident; below:",
        "over-confident.",
    ];
    let small = ("sans-serif", 13).into_font().color(&RGBColor(90, 90, 90));
    for l in notes {
        side.draw(&Text::new(l, (x0, y), small.clone()))
            .map_err(e)?;
        y += 19;
    }
    root.present().map_err(e)?;
    Ok(())
}

/// Red diagonal hatching of the pixel rectangle (x0, y0)–(x1, y1) of `area`.
fn hatch<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    (x0, y0): (i32, i32),
    (x1, y1): (i32, i32),
    style: ShapeStyle,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let mut c = x0 + y0 + 4;
    while c < x1 + y1 {
        // The line x + y = c inside the rectangle.
        let (a, b) = ((c - y1).max(x0), (c - y0).min(x1));
        if a < b {
            area.draw(&PathElement::new([(a, c - a), (b, c - b)], style))?;
        }
        c += 8;
    }
    Ok(())
}

/// Where a legend of `size` pixels covers the fewest of `pts` (pixels in
/// the plotting area of `dim` pixels); ties go to the first candidate.
fn emptiest_corner(pts: &[(i32, i32)], dim: (i32, i32), size: (i32, i32)) -> SeriesLabelPosition {
    use SeriesLabelPosition::*;
    let (w, h) = (size.0 + 10, size.1 + 10);
    let candidates = [
        (UpperRight, (dim.0 - w, 0)),
        (LowerRight, (dim.0 - w, dim.1 - h)),
        (UpperLeft, (0, 0)),
        (LowerLeft, (0, dim.1 - h)),
        (MiddleRight, (dim.0 - w, (dim.1 - h) / 2)),
        (UpperMiddle, ((dim.0 - w) / 2, 0)),
        (LowerMiddle, ((dim.0 - w) / 2, dim.1 - h)),
    ];
    let mut best = (UpperRight, usize::MAX);
    for (pos, (x, y)) in candidates {
        let hits = pts
            .iter()
            .filter(|(px, py)| *px >= x && *px <= x + w && *py >= y && *py <= y + h)
            .count();
        if hits < best.1 {
            best = (pos, hits);
        }
    }
    best.0
}

/// Draw ELBO traces (the ELBO at the start and after each step) of several
/// runs, overlaid, to a PNG file; each series is `(label, trace)`, its
/// entry t the ELBO after t steps.
///
/// With `log_gap = false` the ELBO itself is drawn against the step. With
/// `log_gap = true` each point is log₁₀(best − ELBOₜ), where best is the
/// largest ELBO over all series (noted in the title); points whose gap is
/// not positive (the best point itself) or not finite are left out. This is
/// how a convergence comparison, such as mirror descent against gradient
/// descent, is shown. `y_label` names the vertical axis.
///
/// When the longest series has at least 100 steps and ten times as many as
/// the shortest, the step axis is logarithmic (and step 0, the start, is left
/// out), so that a run of a few steps and one of thousands can both be read;
/// the axis label says so. Series of up to 60 points are drawn with markers,
/// and the legend goes in the corner where it covers the fewest data.
pub fn traces(
    path: &Path,
    series: &[(String, Vec<f64>)],
    title: &str,
    y_label: &str,
    log_gap: bool,
) -> Result<(), Error> {
    let xy: Vec<(String, Vec<(f64, f64)>)> = series
        .iter()
        .map(|(l, t)| {
            (
                l.clone(),
                t.iter().enumerate().map(|(i, &v)| (i as f64, v)).collect(),
            )
        })
        .collect();
    traces_xy(path, &xy, title, None, y_label, log_gap)
}

/// [`traces`] with explicit x values: the points (x, ELBO) of each series.
/// `x_label` names a continuous x axis (e.g. seconds); `None` means steps,
/// with the step axis rules of [`traces`].
pub fn traces_xy(
    path: &Path,
    series: &[(String, Vec<(f64, f64)>)],
    title: &str,
    x_label: Option<&str>,
    y_label: &str,
    log_gap: bool,
) -> Result<(), Error> {
    register_font();
    let e = |err| plot_err(path, err);
    let best = series
        .iter()
        .flat_map(|(_, t)| t.iter().map(|p| p.1))
        .filter(|v| v.is_finite())
        .fold(f64::NEG_INFINITY, f64::max);
    let lens: Vec<usize> = series
        .iter()
        .map(|(_, t)| t.len())
        .filter(|&n| n >= 2)
        .collect();
    let longest = lens.iter().copied().max().unwrap_or(0);
    let shortest = lens.iter().copied().min().unwrap_or(0);
    let log_x = x_label.is_none() && longest >= 101 && longest >= 10 * shortest;
    // Points that cannot be placed on the axes (non-finite, beyond
    // ±axis::LIMIT, or at a step below 1 on a logarithmic step axis) are
    // left out.
    let pts: Vec<Vec<(f64, f64)>> = series
        .iter()
        .map(|(_, t)| {
            t.iter()
                .filter_map(|&(x, v)| {
                    let y = if log_gap {
                        let gap = best - v;
                        (gap > 0.0).then(|| gap.log10())?
                    } else {
                        v
                    };
                    (axis::drawable(y) && axis::drawable(x) && (!log_x || x >= 1.0))
                        .then_some((x, y))
                })
                .collect()
        })
        .collect();
    let all = pts.iter().flatten();
    let Some((y0, y1)) = axis::extent(all.clone().map(|p| p.1)) else {
        return Err(Error::new(
            ErrorKind::Data,
            if log_gap {
                "nothing to plot: no trace has a point below the best ELBO".to_string()
            } else {
                "nothing to plot: the traces have no finite ELBO".to_string()
            },
        ));
    };
    let x1 = all
        .clone()
        .map(|p| p.0)
        .fold(if x_label.is_some() { 0.0 } else { 1.0 }, f64::max);
    let x1 = if x1 > 0.0 { x1 } else { 1.0 };
    // A continuous axis starts at 0 unless a point lies before it.
    let x0 = all.map(|p| p.0).fold(0.0, f64::min);
    let caption = if log_gap {
        format!("{title}  (best ELBO {best:.6})")
    } else {
        title.to_string()
    };
    let root = BitMapBackend::new(path, (1000, 620)).into_drawing_area();
    root.fill(&WHITE).map_err(e)?;
    let mut builder = ChartBuilder::on(&root);
    builder
        .caption(caption, ("sans-serif", 24))
        .margin(14)
        .x_label_area_size(48)
        .y_label_area_size(80);
    let (ya, yb) = axis::padded(y0, y1, 0.06);
    let y_range = ya..yb;
    let x_labels = if x_label.is_some() {
        11
    } else {
        (x1 as usize + 1).clamp(2, 11)
    };
    let x_axis = Axis::new(x0, x1 * 1.01, x_labels);
    let spec = TraceSpec {
        series,
        pts: &pts,
        y_label,
        y_axis: Axis::new(ya, yb, 10),
        x_labels,
        // Steps are whole numbers: label only whole ticks.
        x_axis: if x_label.is_some() {
            x_axis
        } else {
            x_axis.whole()
        },
    };
    if log_x {
        let chart = builder
            .build_cartesian_2d((1.0..x1 * 1.05).log_scale(), y_range)
            .map_err(e)?;
        draw_traces(
            path,
            &root,
            chart,
            &spec,
            "step (log scale; step 0 left out)",
        )?;
    } else {
        let chart = builder
            .build_cartesian_2d(x0..x1 * 1.01, y_range)
            .map_err(e)?;
        draw_traces(path, &root, chart, &spec, x_label.unwrap_or("step"))?;
    }
    root.present().map_err(e)?;
    Ok(())
}

/// What [`traces`] draws, once its axes are chosen.
struct TraceSpec<'a> {
    series: &'a [(String, Vec<(f64, f64)>)],
    pts: &'a [Vec<(f64, f64)>],
    y_label: &'a str,
    y_axis: Axis,
    x_labels: usize,
    /// The x axis' labels (whole numbers only for steps).
    x_axis: Axis,
}

fn draw_traces<'a, X>(
    path: &Path,
    root: &DrawingArea<BitMapBackend<'a>, plotters::coord::Shift>,
    mut chart: ChartContext<'a, BitMapBackend<'a>, Cartesian2d<X, RangedCoordf64>>,
    spec: &TraceSpec,
    x_desc: &str,
) -> Result<(), Error>
where
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let e = |err| plot_err(path, err);
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(spec.y_label)
        .x_labels(spec.x_labels)
        .y_labels(10)
        .x_label_formatter(&|x| spec.x_axis.label(*x))
        .y_label_formatter(&|y| spec.y_axis.label(*y))
        .light_line_style(RGBColor(238, 238, 238))
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 16))
        .draw()
        .map_err(e)?;
    let mut pixels = Vec::new();
    let (xr, yr) = chart.plotting_area().get_pixel_range();
    for (k, ((label, _), p)) in spec.series.iter().zip(spec.pts).enumerate() {
        let color = PALETTE[k % PALETTE.len()];
        chart
            .draw_series(LineSeries::new(p.iter().copied(), color.stroke_width(2)))
            .map_err(e)?
            .label(label.as_str())
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color.stroke_width(3)));
        if p.len() <= 60 {
            chart
                .draw_series(p.iter().map(|&q| Circle::new(q, 4, color.filled())))
                .map_err(e)?;
        }
        // Where the series passes, in pixels of the plotting area.
        let area = chart.plotting_area();
        let to_px = |q: &(f64, f64)| {
            let (x, y) = area.map_coordinate(q);
            (x - xr.start, y - yr.start)
        };
        for w in p.windows(2) {
            let (a, b) = (to_px(&w[0]), to_px(&w[1]));
            let steps = ((b.0 - a.0).abs().max((b.1 - a.1).abs()) / 3).max(1);
            for s in 0..=steps {
                let t = s as f64 / steps as f64;
                pixels.push((
                    a.0 + ((b.0 - a.0) as f64 * t) as i32,
                    a.1 + ((b.1 - a.1) as f64 * t) as i32,
                ));
            }
        }
        if let [only] = p.as_slice() {
            pixels.push(to_px(only));
        }
    }
    let label_font: TextStyle = ("sans-serif", 15).into_font().into();
    let text_w = spec
        .series
        .iter()
        .map(|(l, _)| {
            root.estimate_text_size(l, &label_font)
                .map(|s| s.0 as i32)
                .unwrap_or(8 * l.len() as i32)
        })
        .max()
        .unwrap_or(0);
    let dim = (xr.end - xr.start, yr.end - yr.start);
    let size = (text_w + 30 + 20, spec.series.len() as i32 * 20 + 20);
    chart
        .configure_series_labels()
        .position(emptiest_corner(&pixels, dim, size))
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK.mix(0.5))
        .label_font(label_font)
        .draw()
        .map_err(e)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_training_edges_are_marked_where_the_test_inputs_pass_them() {
        let train = [1820.0, 1850.0, 1900.0, f64::NAN];
        assert_eq!(
            training_edges(&train, &[1901.0, 1920.0]),
            vec![(1900.0, "end of the training data")]
        );
        assert_eq!(
            training_edges(&train, &[1800.0, 1930.0]),
            vec![
                (1820.0, "start of the training data"),
                (1900.0, "end of the training data")
            ]
        );
        // Test inputs among the training inputs: no forecast, no line.
        assert!(training_edges(&train, &[1830.0, 1900.0]).is_empty());
        assert!(training_edges(&train, &[]).is_empty());
    }
}
