//! MCMC plots (plotters, bitmap backend): per variable, the trace of each
//! chain next to a kernel density estimate of each chain's draws.

use crate::error::{Error, ErrorKind};
use crate::plot::{PALETTE, plot_err, register_font};
use crate::ticks::Axis;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;

/// One variable's draws: its name and one `Vec` of draws per chain.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChainSeries {
    /// The variable's name (the row's y label).
    pub name: String,
    /// The draws, one `Vec` per chain, in draw order.
    pub chains: Vec<Vec<f64>>,
    /// Per chain, the indices of the draws that ended a divergent
    /// transition (marked on the plots; empty when none or unknown).
    pub divergent: Vec<Vec<usize>>,
}

/// The colour of divergent transitions' markers.
pub(crate) const DIVERGENT: RGBColor = RGBColor(220, 0, 0);

/// Where a variable's divergent transitions are marked on its trace: per
/// divergent draw with a finite value, (chain, draw index, value clamped
/// to ±1e307), chain by chain in draw order.
pub fn divergence_marks(var: &ChainSeries) -> Vec<(usize, f64, f64)> {
    var.divergent
        .iter()
        .enumerate()
        .flat_map(|(c, idx)| {
            idx.iter().filter_map(move |&i| {
                let v = *var.chains.get(c)?.get(i)?;
                v.is_finite().then(|| (c, i as f64, v.clamp(-CLAMP, CLAMP)))
            })
        })
        .collect()
}

/// Figure width in pixels.
const WIDTH: u32 = 1200;
/// Width of the trace column; the density column takes the rest.
const TRACE_W: u32 = 740;
/// Height of the caption band.
const TITLE_H: u32 = 40;
/// Height of one line of the chain legend.
const LEGEND_LINE_H: u32 = 24;
/// Extra height of the bottom row for the x-axis descriptions.
const BOTTOM_EXTRA: u32 = 22;
/// Number of grid points of a density estimate.
const KDE_GRID: usize = 200;
/// Above this many draws a density is computed from linearly binned draws.
const KDE_EXACT_MAX: usize = 4096;
/// Number of bins of the binned density estimate.
const KDE_BINS: usize = 2048;
/// Above this many draws a trace is drawn as a min/max envelope.
const TRACE_MAX_POINTS: usize = 4000;
/// Draws beyond ±this are clamped for drawing, so that every range,
/// bandwidth and grid stays finite.
const CLAMP: f64 = 1e307;

/// Write a PNG with one row per variable: on the left the trace of each
/// chain (draw index, from 0, on x; value on y; one colour per chain; thin
/// lines), on the right a Gaussian kernel density estimate of each chain's
/// draws in the same colours, with the variable name as the row's y label.
///
/// Each chain's density uses its own Silverman bandwidth
/// 0.9·min(sd, IQR/1.34)·n^(-1/5) (as R's `bw.nrd0`, falling back to the sd,
/// then |first draw|, then 1 when that is zero) and is evaluated on 200
/// points spanning the variable's pooled range padded by three times the
/// largest bandwidth. A legend "chain 1", "chain 2", … appears once, under
/// the caption `title`. The image is 1200 px wide; rows are 240 px high for
/// up to 8 variables and shrink to no less than 140 px for more (the image
/// grows with the number of variables, so pass only a few).
///
/// Non-finite draws are skipped; a variable without finite draws gets empty
/// panels and a note. Draws beyond ±1e307 are drawn clamped to that. Long
/// traces (over 4000 draws) are drawn as a min/max envelope, and densities
/// of long chains (over 4096 draws) are computed from binned draws.
///
/// Errors: [`ErrorKind::Data`] when `vars` is empty; [`ErrorKind::Io`] when
/// the file cannot be drawn or written.
pub fn trace_density(path: &Path, vars: &[ChainSeries], title: &str) -> Result<(), Error> {
    if vars.is_empty() {
        return Err(Error::new(
            ErrorKind::Data,
            "nothing to plot: no variables were given for the trace and density plot",
        ));
    }
    register_font();
    let e = |err| plot_err(path, err);
    let n_vars = vars.len();
    let row_h = (1920 / n_vars as u32).clamp(140, 240);
    let n_chains = vars.iter().map(|v| v.chains.len()).max().unwrap_or(0);

    // The chain legend, centred under the caption, wrapped into lines.
    let legend_font: TextStyle = ("sans-serif", 15).into_font().into();
    let mut labels: Vec<String> = (1..=n_chains).map(|k| format!("chain {k}")).collect();
    let n_divergent = vars
        .first()
        .map_or(0, |v| v.divergent.iter().map(Vec::len).sum::<usize>());
    if n_divergent > 0 {
        labels.push(format!("divergent transition ({n_divergent})"));
    }
    let widths: Vec<i32> = labels.iter().map(|l| text_width(l, &legend_font)).collect();
    let legend = legend_layout(&widths, WIDTH as i32 - 40);
    let legend_lines = legend.len().max(1) as u32;
    let height = TITLE_H + legend_lines * LEGEND_LINE_H + 6 + n_vars as u32 * row_h + BOTTOM_EXTRA;

    let root = BitMapBackend::new(path, (WIDTH, height)).into_drawing_area();
    root.fill(&WHITE).map_err(e)?;
    let (top, body) = root.split_vertically(TITLE_H + legend_lines * LEGEND_LINE_H + 6);
    let (cap, strip) = top.split_vertically(TITLE_H);
    let title_font = ("sans-serif", 24)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Center, VPos::Center));
    cap.draw(&Text::new(
        title.to_string(),
        (WIDTH as i32 / 2, TITLE_H as i32 / 2 + 2),
        title_font,
    ))
    .map_err(e)?;
    let divergent_entry = (n_divergent > 0).then_some(n_chains);
    draw_legend(
        &strip,
        &legend,
        &labels,
        &widths,
        &legend_font,
        divergent_entry,
    )
    .map_err(e)?;

    // Rows: all `row_h` high, the bottom one `BOTTOM_EXTRA` more.
    let breaks: Vec<u32> = (1..n_vars as u32).map(|i| i * row_h).collect();
    let rows = body.split_by_breakpoints([] as [u32; 0], breaks);
    for (i, (var, row)) in vars.iter().zip(&rows).enumerate() {
        let bottom = i + 1 == n_vars;
        draw_row(path, row, var, bottom)?;
    }
    root.present().map_err(e)?;
    Ok(())
}

/// Greedy line breaking of legend entries of text widths `widths` into
/// lines at most `max_w` px wide; each line is a list of entry indices.
fn legend_layout(widths: &[i32], max_w: i32) -> Vec<Vec<usize>> {
    let mut lines: Vec<Vec<usize>> = Vec::new();
    let mut w = 0;
    for (k, &tw) in widths.iter().enumerate() {
        let item = legend_item_w(tw);
        match lines.last_mut() {
            Some(line) if w + item <= max_w => {
                line.push(k);
                w += item;
            }
            _ => {
                lines.push(vec![k]);
                w = item;
            }
        }
    }
    lines
}

/// Width of one legend entry: a line sample, a gap, the text and spacing.
fn legend_item_w(text_w: i32) -> i32 {
    24 + 6 + text_w + 22
}

/// Draw the chain legend, each line centred, into `strip`; the entry
/// `divergent` (when given) is the divergent transitions' marker.
fn draw_legend<DB: DrawingBackend>(
    strip: &DrawingArea<DB, Shift>,
    lines: &[Vec<usize>],
    labels: &[String],
    widths: &[i32],
    font: &TextStyle,
    divergent: Option<usize>,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let (w, h) = strip.dim_in_pixel();
    let font = font.pos(Pos::new(HPos::Left, VPos::Center));
    for (li, line) in lines.iter().enumerate() {
        let y = li as i32 * LEGEND_LINE_H as i32 + LEGEND_LINE_H as i32 / 2;
        if y >= h as i32 {
            break;
        }
        let total: i32 = line.iter().map(|&k| legend_item_w(widths[k])).sum::<i32>() - 22;
        let mut x = (w as i32 - total).max(0) / 2;
        for &k in line {
            if divergent == Some(k) {
                strip.draw(&Cross::new((x + 12, y), 5, DIVERGENT.stroke_width(2)))?;
            } else {
                let color = PALETTE[k % PALETTE.len()];
                strip.draw(&PathElement::new(
                    [(x, y), (x + 24, y)],
                    color.stroke_width(3),
                ))?;
            }
            strip.draw(&Text::new(labels[k].clone(), (x + 30, y), font.clone()))?;
            x += legend_item_w(widths[k]);
        }
    }
    Ok(())
}

/// The widest of the tick labels of an axis from `lo` to `hi` with `n`
/// ticks (its ends and middle stand in for the ticks), in pixels in `font`.
fn tick_width(lo: f64, hi: f64, n: usize, font: &TextStyle) -> i32 {
    let axis = Axis::new(lo, hi, n);
    [lo, 0.5 * (lo + hi), hi]
        .iter()
        .map(|&v| text_width(&axis.label(v), font))
        .max()
        .unwrap_or(0)
}

/// A finite, non-empty axis range around `[lo, hi]`, padded by `frac` of
/// the span (or, for a single value, by `frac` of its magnitude, at least
/// `frac`). Non-finite bounds give `[-1, 1]`.
pub(crate) fn axis_range(lo: f64, hi: f64, frac: f64) -> (f64, f64) {
    if !lo.is_finite() || !hi.is_finite() || lo > hi {
        return (-1.0, 1.0);
    }
    let (a, b) = super::axis::padded(lo, hi, frac);
    if a.is_finite() && b.is_finite() && a < b {
        (a, b)
    } else {
        (-1.0, 1.0)
    }
}

/// A chain's finite draws, clamped to ±[`CLAMP`], with their draw indices.
fn finite_draws(chain: &[f64]) -> Vec<(f64, f64)> {
    chain
        .iter()
        .enumerate()
        .filter(|(_, v)| v.is_finite())
        .map(|(i, v)| (i as f64, v.clamp(-CLAMP, CLAMP)))
        .collect()
}

/// The points of a trace to draw: all of them, or for long traces the
/// minimum and maximum of each of `TRACE_MAX_POINTS / 2` buckets, in draw
/// order, so that the envelope (and every spike) survives.
fn decimate(pts: &[(f64, f64)]) -> Vec<(f64, f64)> {
    if pts.len() <= TRACE_MAX_POINTS {
        return pts.to_vec();
    }
    let size = pts.len().div_ceil(TRACE_MAX_POINTS / 2);
    let mut out = Vec::with_capacity(TRACE_MAX_POINTS + 2);
    for bucket in pts.chunks(size) {
        let (mut lo, mut hi) = (bucket[0], bucket[0]);
        for &p in bucket {
            if p.1 < lo.1 {
                lo = p;
            }
            if p.1 > hi.1 {
                hi = p;
            }
        }
        if lo.0 <= hi.0 {
            out.push(lo);
            out.push(hi);
        } else {
            out.push(hi);
            out.push(lo);
        }
    }
    out
}

/// The width of `text` in pixels in `font` (estimated when the font
/// cannot lay it out).
pub(crate) fn text_width(text: &str, font: &TextStyle) -> i32 {
    font.font
        .box_size(text)
        .map(|d| d.0 as i32)
        .unwrap_or(9 * text.chars().count() as i32)
}

/// Shorten `name` with an ellipsis until it is at most `max_w` px wide.
pub(crate) fn fit_text(name: &str, font: &TextStyle, max_w: i32) -> String {
    if text_width(name, font) <= max_w {
        return name.to_string();
    }
    let chars: Vec<char> = name.chars().collect();
    let mut n = chars.len();
    while n > 1 {
        n -= 1;
        let s: String = chars[..n].iter().collect::<String>() + "…";
        if text_width(&s, font) <= max_w {
            return s;
        }
    }
    "…".to_string()
}

/// Draw one variable's row: its traces on the left, densities on the right.
fn draw_row(
    path: &Path,
    row: &DrawingArea<BitMapBackend<'_>, Shift>,
    var: &ChainSeries,
    bottom: bool,
) -> Result<(), Error> {
    let e = |err| plot_err(path, err);
    let (left, right) = row.split_horizontally(TRACE_W);
    let x_area = if bottom { 30 + BOTTOM_EXTRA } else { 30 };
    let label_style: TextStyle = ("sans-serif", 14).into_font().into();
    let desc_font: TextStyle = ("sans-serif", 16).into_font().into();

    let pts: Vec<Vec<(f64, f64)>> = var.chains.iter().map(|c| finite_draws(c)).collect();
    let (lo, hi) = pts
        .iter()
        .flatten()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| {
            (a.min(p.1), b.max(p.1))
        });
    let any = lo.is_finite();
    let longest = var.chains.iter().map(Vec::len).max().unwrap_or(0);
    let x1 = (longest.saturating_sub(1) as f64).max(1.0);

    // Traces.
    let (y0, y1) = axis_range(lo, hi, 0.06);
    let (_, row_h) = row.dim_in_pixel();
    let name = fit_text(&var.name, &desc_font, row_h as i32 - x_area as i32 - 16);
    let mut chart = ChartBuilder::on(&left)
        .margin_top(8)
        .margin_bottom(4)
        .margin_left(10)
        .margin_right(16)
        .x_label_area_size(x_area)
        .y_label_area_size((tick_width(y0, y1, 5, &label_style) + 36).clamp(60, 120) as u32)
        .build_cartesian_2d(0.0..x1, y0..y1)
        .map_err(e)?;
    let y_axis = Axis::new(y0, y1, 5);
    let y_fmt = move |y: &f64| y_axis.label(*y);
    // Draw indices are whole numbers: label only whole ticks.
    let x_axis = Axis::new(0.0, x1, longest.clamp(2, 11)).whole();
    let x_fmt = move |x: &f64| x_axis.label(*x);
    let mut mesh = chart.configure_mesh();
    mesh.y_desc(name.as_str())
        .x_labels(longest.clamp(2, 11))
        .y_labels(5)
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .light_line_style(RGBColor(238, 238, 238))
        .label_style(label_style.clone())
        .axis_desc_style(desc_font.clone());
    if bottom {
        mesh.x_desc("draw");
    }
    mesh.draw().map_err(e)?;
    for (k, p) in pts.iter().enumerate() {
        let color = PALETTE[k % PALETTE.len()];
        let shown = decimate(p);
        chart
            .draw_series(LineSeries::new(
                shown.iter().copied(),
                color.mix(0.8).stroke_width(1),
            ))
            .map_err(e)?;
        if p.len() <= 50 {
            chart
                .draw_series(p.iter().map(|&q| Circle::new(q, 2, color.filled())))
                .map_err(e)?;
        }
    }
    chart
        .draw_series(
            divergence_marks(var)
                .into_iter()
                .map(|(_, x, y)| Cross::new((x, y), 4, DIVERGENT.stroke_width(2))),
        )
        .map_err(e)?;
    if !any {
        let note = ("sans-serif", 15)
            .into_font()
            .color(&RGBColor(90, 90, 90))
            .pos(Pos::new(HPos::Center, VPos::Center));
        chart
            .plotting_area()
            .draw(&Text::new(
                "no finite draws",
                (x1 / 2.0, (y0 + y1) / 2.0),
                note,
            ))
            .map_err(e)?;
    }

    // Densities.
    let kde = if any { densities(&pts) } else { None };
    let (gx0, gx1) = match &kde {
        Some(k) => {
            let (a, b) = (k.grid[0], k.grid[k.grid.len() - 1]);
            if a < b {
                (a, b)
            } else {
                axis_range(a, b, 0.06)
            }
        }
        None => axis_range(lo, hi, 0.06),
    };
    let dmax = kde
        .iter()
        .flat_map(|k| k.dens.iter().flatten().copied())
        .filter(|d| d.is_finite())
        .fold(0.0, f64::max);
    let d1 = if dmax > 0.0 && (dmax * 1.08).is_finite() {
        dmax * 1.08
    } else {
        1.0
    };
    let mut chart = ChartBuilder::on(&right)
        .margin_top(8)
        .margin_bottom(4)
        .margin_left(4)
        .margin_right(18)
        .x_label_area_size(x_area)
        .y_label_area_size((tick_width(0.0, d1, 4, &label_style) + 34).clamp(60, 120) as u32)
        .build_cartesian_2d(gx0..gx1, 0.0..d1)
        .map_err(e)?;
    // As many value labels as fit side by side without touching.
    let plot_w = chart.plotting_area().dim_in_pixel().0 as i32;
    let x_label_count =
        (plot_w / (tick_width(gx0, gx1, 7, &label_style) + 24).max(1)).clamp(2, 7) as usize;
    let gx_axis = Axis::new(gx0, gx1, x_label_count);
    let d_axis = Axis::new(0.0, d1, 4);
    let gx_fmt = move |x: &f64| gx_axis.label(*x);
    let d_fmt = move |d: &f64| d_axis.label(*d);
    let mut mesh = chart.configure_mesh();
    mesh.y_desc("density")
        .x_labels(x_label_count)
        .y_labels(4)
        .x_label_formatter(&gx_fmt)
        .y_label_formatter(&d_fmt)
        .light_line_style(RGBColor(238, 238, 238))
        .label_style(label_style)
        .axis_desc_style(("sans-serif", 14));
    if bottom {
        mesh.x_desc("value");
    }
    mesh.draw().map_err(e)?;
    if let Some(k) = &kde {
        for (c, d) in k.dens.iter().enumerate() {
            if d.is_empty() {
                continue;
            }
            let color = PALETTE[c % PALETTE.len()];
            chart
                .draw_series(LineSeries::new(
                    k.grid
                        .iter()
                        .zip(d)
                        .filter(|(_, y)| y.is_finite())
                        .map(|(&x, &y)| (x, y)),
                    color.stroke_width(2),
                ))
                .map_err(e)?;
        }
    }
    Ok(())
}

/// Kernel density estimates of several chains on one shared grid.
#[derive(Debug)]
struct Kde {
    /// The grid, increasing ([`KDE_GRID`] points).
    grid: Vec<f64>,
    /// Per chain, the density on the grid (empty for a chain without draws).
    dens: Vec<Vec<f64>>,
    /// Per chain, the bandwidth (0 for a chain without draws); read by the
    /// tests only.
    #[cfg_attr(not(test), allow(dead_code))]
    bw: Vec<f64>,
}

/// Silverman's rule-of-thumb bandwidth 0.9·min(sd, IQR/1.34)·n^(-1/5) of
/// finite draws `xs` (sample sd; type-7 quartiles). When that is zero it
/// falls back, as R's `bw.nrd0`, to the sd, then |first draw|, then 1.
/// Returns 0 for no draws.
fn silverman_bandwidth(xs: &[f64]) -> f64 {
    let n = xs.len();
    if n == 0 {
        return 0.0;
    }
    // Welford's mean and variance.
    let (mut mean, mut m2) = (0.0, 0.0);
    for (i, &x) in xs.iter().enumerate() {
        let d = x - mean;
        mean += d / (i + 1) as f64;
        m2 += d * (x - mean);
    }
    let sd = if n > 1 {
        (m2 / (n - 1) as f64).sqrt()
    } else {
        0.0
    };
    let mut sorted = xs.to_vec();
    sorted.sort_by(f64::total_cmp);
    let iqr = quantile(&sorted, 0.75) - quantile(&sorted, 0.25);
    let usable = |s: f64| s > 0.0 && s.is_finite();
    let spread = [sd.min(iqr / 1.34), sd, xs[0].abs()]
        .into_iter()
        .find(|&s| usable(s))
        .unwrap_or(1.0);
    0.9 * spread * (n as f64).powf(-0.2)
}

/// The type-7 quantile `p` of sorted, non-empty `xs`.
fn quantile(xs: &[f64], p: f64) -> f64 {
    let h = (xs.len() - 1) as f64 * p;
    let i = (h.floor() as usize).min(xs.len() - 1);
    let j = (i + 1).min(xs.len() - 1);
    xs[i] + (h - i as f64) * (xs[j] - xs[i])
}

/// The Gaussian kernel density of draws `xs` with bandwidth `bw` at `g`.
fn kde_at(xs: &[f64], bw: f64, g: f64) -> f64 {
    let norm = 1.0 / (xs.len() as f64 * bw * (2.0 * std::f64::consts::PI).sqrt());
    xs.iter()
        .map(|&x| {
            let z = (g - x) / bw;
            (-0.5 * z * z).exp()
        })
        .sum::<f64>()
        * norm
}

/// The same density from `xs` linearly binned onto `bins` equally spaced
/// centres from `a` to `b` (which must cover every draw).
fn kde_binned(xs: &[f64], bw: f64, a: f64, b: f64, grid: &[f64]) -> Vec<f64> {
    let m = KDE_BINS;
    let step = (b - a) / (m - 1) as f64;
    let mut w = vec![0.0; m];
    for &x in xs {
        let t = ((x - a) / step).clamp(0.0, (m - 1) as f64);
        let i = (t.floor() as usize).min(m - 2);
        let f = t - i as f64;
        w[i] += 1.0 - f;
        w[i + 1] += f;
    }
    let norm = 1.0 / (xs.len() as f64 * bw * (2.0 * std::f64::consts::PI).sqrt());
    grid.iter()
        .map(|&g| {
            w.iter()
                .enumerate()
                .filter(|(_, wi)| **wi > 0.0)
                .map(|(i, wi)| {
                    let z = (g - (a + i as f64 * step)) / bw;
                    wi * (-0.5 * z * z).exp()
                })
                .sum::<f64>()
                * norm
        })
        .collect()
}

/// Kernel density estimates of each chain's draws (finite, clamped, the
/// second element of each pair as from [`finite_draws`]): Silverman
/// bandwidths per chain, one grid of [`KDE_GRID`] points over the pooled
/// range padded by three times the largest bandwidth. `None` when no chain
/// has a draw.
///
/// The work is done on draws divided by their largest magnitude, so that
/// neither squares nor the grid overflow for huge values; the results are
/// scaled back.
fn densities(chains: &[Vec<(f64, f64)>]) -> Option<Kde> {
    let scale = chains
        .iter()
        .flatten()
        .map(|p| p.1.abs())
        .fold(0.0, f64::max);
    if chains.iter().all(Vec::is_empty) {
        return None;
    }
    let scale = if scale > 0.0 && scale.is_finite() {
        scale
    } else {
        1.0
    };
    let ys: Vec<Vec<f64>> = chains
        .iter()
        .map(|c| c.iter().map(|p| p.1 / scale).collect())
        .collect();
    let bws: Vec<f64> = ys.iter().map(|y| silverman_bandwidth(y)).collect();
    let (lo, hi) = ys
        .iter()
        .flatten()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &y| {
            (a.min(y), b.max(y))
        });
    let pad = 3.0 * bws.iter().copied().fold(0.0, f64::max);
    let (a, b) = (lo - pad, hi + pad);
    let grid_y: Vec<f64> = (0..KDE_GRID)
        .map(|i| a + (b - a) * i as f64 / (KDE_GRID - 1) as f64)
        .collect();
    let dens = ys
        .iter()
        .zip(&bws)
        .map(|(y, &bw)| {
            if y.is_empty() || bw.is_nan() || bw <= 0.0 {
                return Vec::new();
            }
            let d: Vec<f64> = if y.len() <= KDE_EXACT_MAX {
                grid_y.iter().map(|&g| kde_at(y, bw, g)).collect()
            } else {
                kde_binned(y, bw, a, b, &grid_y)
            };
            d.into_iter().map(|v| v / scale).collect()
        })
        .collect();
    Some(Kde {
        grid: grid_y.iter().map(|g| g * scale).collect(),
        dens,
        bw: bws.iter().map(|b| b * scale).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;
    use rand_distr::{Distribution, Normal};
    use std::path::PathBuf;

    /// A fresh, unique temporary directory.
    fn temp_dir(tag: &str) -> PathBuf {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let dir = std::env::temp_dir().join(format!(
            "tempest-plot-mcmc-{tag}-{}-{nanos}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn normal_draws(seed: u64, n: usize, mu: f64, sd: f64) -> Vec<f64> {
        let mut rng = StdRng::seed_from_u64(seed);
        let d = Normal::new(mu, sd).unwrap();
        (0..n).map(|_| d.sample(&mut rng)).collect()
    }

    /// Render `vars`, check a PNG of a plausible size came out, clean up.
    fn render_ok(tag: &str, vars: &[ChainSeries]) {
        let dir = temp_dir(tag);
        let path = dir.join("trace.png");
        trace_density(&path, vars, "Test").unwrap();
        let len = std::fs::metadata(&path).unwrap().len();
        assert!(len > 5_000, "{tag}: PNG only {len} bytes");
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn writes_a_png() {
        let vars: Vec<ChainSeries> = (0..3)
            .map(|v| ChainSeries {
                divergent: vec![],
                name: format!("theta[{v}]"),
                chains: (0..4)
                    .map(|c| normal_draws(10 * v + c, 500, v as f64, 1.0 + v as f64))
                    .collect(),
            })
            .collect();
        render_ok("basic", &vars);
    }

    #[test]
    fn degenerate_inputs_draw() {
        let v = |name: &str, chains: Vec<Vec<f64>>| ChainSeries {
            divergent: vec![],
            name: name.to_string(),
            chains,
        };
        render_ok("constant", &[v("c", vec![vec![3.0; 100], vec![3.0; 100]])]);
        render_ok("zero", &[v("z", vec![vec![0.0; 10]])]);
        render_ok(
            "nan",
            &[v(
                "n",
                vec![
                    vec![1.0, f64::NAN, 2.0, f64::INFINITY, 0.5],
                    vec![f64::NAN; 5],
                ],
            )],
        );
        render_ok("all-nan", &[v("n", vec![vec![f64::NAN; 5]])]);
        render_ok("one", &[v("one", vec![vec![1.5]])]);
        render_ok("empty-chain", &[v("e", vec![vec![], vec![1.0, 2.0, 1.5]])]);
        render_ok("no-chains", &[v("none", vec![])]);
        render_ok(
            "huge",
            &[
                v(
                    "h",
                    vec![vec![1e300, -1e300, 5e299], vec![f64::MAX, f64::MIN]],
                ),
                v("tiny", vec![vec![1e-300, 2e-300, 5e-324]]),
                v("offset", vec![vec![1e12, 1e12 + 1e-3, 1e12 + 2e-3]]),
            ],
        );
        let long_name = "a_very_long_variable_name_that_cannot_fit_along_the_axis[12,34]";
        render_ok(
            "many",
            &(0..12)
                .map(|i| v(long_name, vec![normal_draws(i, 20, 0.0, 1.0); 12]))
                .collect::<Vec<_>>(),
        );
        render_ok(
            "long",
            &[v(
                "long",
                vec![normal_draws(1, 20_000, 0.0, 1.0), vec![2.0; 9000]],
            )],
        );
    }

    #[test]
    fn empty_vars_is_a_data_error() {
        let dir = temp_dir("empty");
        let path = dir.join("none.png");
        let err = trace_density(&path, &[], "x").unwrap_err();
        assert_eq!(err.kind, ErrorKind::Data);
        assert!(!path.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Trapezoid integral of `d` over `grid`.
    fn trapezoid(grid: &[f64], d: &[f64]) -> f64 {
        grid.windows(2)
            .zip(d.windows(2))
            .map(|(g, y)| 0.5 * (g[1] - g[0]) * (y[0] + y[1]))
            .sum()
    }

    #[test]
    fn kde_integrates_to_one_with_silverman_bandwidth() {
        let chains = [
            normal_draws(7, 1000, 2.0, 3.0),
            normal_draws(8, 300, -1.0, 0.5),
            normal_draws(9, 10_000, 0.0, 1.0),
        ];
        let pts: Vec<Vec<(f64, f64)>> = chains.iter().map(|c| finite_draws(c)).collect();
        let kde = densities(&pts).unwrap();
        assert_eq!(kde.grid.len(), KDE_GRID);
        for (c, xs) in chains.iter().enumerate() {
            // Silverman's rule, computed directly.
            let n = xs.len() as f64;
            let mean = xs.iter().sum::<f64>() / n;
            let sd = (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
            let mut s = xs.clone();
            s.sort_by(f64::total_cmp);
            let iqr = quantile(&s, 0.75) - quantile(&s, 0.25);
            let want = 0.9 * sd.min(iqr / 1.34) * n.powf(-0.2);
            assert!(
                (kde.bw[c] - want).abs() < 1e-10 * want,
                "chain {c}: bandwidth {} vs {want}",
                kde.bw[c]
            );
            let area = trapezoid(&kde.grid, &kde.dens[c]);
            assert!((area - 1.0).abs() < 1e-2, "chain {c}: integral {area}");
        }
        // The grid spans the pooled range padded by three bandwidths.
        let max_bw = kde.bw.iter().copied().fold(0.0, f64::max);
        let lo = chains
            .iter()
            .flatten()
            .copied()
            .fold(f64::INFINITY, f64::min);
        let hi = chains
            .iter()
            .flatten()
            .copied()
            .fold(f64::NEG_INFINITY, f64::max);
        assert!((kde.grid[0] - (lo - 3.0 * max_bw)).abs() < 1e-9);
        assert!((kde.grid[KDE_GRID - 1] - (hi + 3.0 * max_bw)).abs() < 1e-9);
    }

    #[test]
    fn bandwidth_fallbacks() {
        // IQR zero, sd positive: the sd.
        let xs = [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 5.0];
        let n = xs.len() as f64;
        let mean = xs.iter().sum::<f64>() / n;
        let sd = (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
        assert!((silverman_bandwidth(&xs) - 0.9 * sd * n.powf(-0.2)).abs() < 1e-12);
        // Constant: |x|, then 1.
        assert!((silverman_bandwidth(&[4.0; 32]) - 0.9 * 4.0 * 32f64.powf(-0.2)).abs() < 1e-12);
        assert!((silverman_bandwidth(&[0.0]) - 0.9).abs() < 1e-12);
        assert_eq!(silverman_bandwidth(&[]), 0.0);
        // A constant chain's density still integrates to one.
        let kde = densities(&[finite_draws(&[4.0; 32])]).unwrap();
        assert!((trapezoid(&kde.grid, &kde.dens[0]) - 1.0).abs() < 1e-2);
    }

    #[test]
    fn divergent_draws_are_marked_at_their_values() {
        let var = ChainSeries {
            name: "a".into(),
            chains: vec![vec![0.5, 1.5, 2.5], vec![-1.0, f64::NAN, 3.0]],
            divergent: vec![vec![1], vec![0, 1, 2, 9]],
        };
        // The NaN draw and the index past the chain are not marked.
        assert_eq!(
            divergence_marks(&var),
            vec![(0, 1.0, 1.5), (1, 0.0, -1.0), (1, 2.0, 3.0)]
        );
        render_ok("divergent", &[var.clone(), var]);
    }
}
