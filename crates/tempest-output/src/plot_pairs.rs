//! The pair plot of a sampling run: for every two of the chosen params a
//! scatter of their draws (all chains), divergent transitions marked on
//! top, each param's histogram on the diagonal and the two params'
//! correlation above it. Funnels and ridges that stall a sampler show
//! here, with the divergences where the sampler failed.

use crate::error::{Error, ErrorKind};
use crate::plot::{plot_err, register_font};
use crate::plot_mcmc::{
    ChainSeries, DIVERGENT, axis_range, divergence_marks, fit_text, text_width,
};
use crate::ticks::Axis;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;

/// The most draws one scatter panel draws (evenly spaced over all draws;
/// every divergent draw is marked whatever this leaves out).
const SCATTER_MAX: usize = 2000;
/// Bins of a diagonal histogram.
const BINS: usize = 24;
/// Width of the name and tick column on the left, and height of the one
/// at the bottom.
const EDGE: u32 = 70;
/// Height of the caption band.
const TITLE_H: u32 = 56;

/// Each variable's finite draws pooled over the chains (in chain order),
/// and its range padded by 5 %.
fn pooled(var: &ChainSeries) -> (Vec<f64>, (f64, f64)) {
    let all: Vec<f64> = var
        .chains
        .iter()
        .flatten()
        .copied()
        .map(|v| {
            if v.is_finite() {
                v.clamp(-1e307, 1e307)
            } else {
                f64::NAN
            }
        })
        .collect();
    let (lo, hi) = all
        .iter()
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| {
            (a.min(v), b.max(v))
        });
    (all, axis_range(lo, hi, 0.05))
}

/// The Pearson correlation of the finite pairs of `a` and `b` (NaN with
/// fewer than two, or without spread).
pub fn correlation(a: &[f64], b: &[f64]) -> f64 {
    let pairs: Vec<(f64, f64)> = a
        .iter()
        .zip(b)
        .filter(|(x, y)| x.is_finite() && y.is_finite())
        .map(|(x, y)| (*x, *y))
        .collect();
    let n = pairs.len() as f64;
    if pairs.len() < 2 {
        return f64::NAN;
    }
    let (ma, mb) = pairs
        .iter()
        .fold((0.0, 0.0), |(s, t), (x, y)| (s + x / n, t + y / n));
    let (mut sab, mut saa, mut sbb) = (0.0, 0.0, 0.0);
    for (x, y) in &pairs {
        sab += (x - ma) * (y - mb);
        saa += (x - ma) * (x - ma);
        sbb += (y - mb) * (y - mb);
    }
    sab / (saa * sbb).sqrt()
}

/// Write the pair plot of `vars` (two or more, all with the same chains)
/// to a PNG file under the caption `title`: row i, column j < i the
/// scatter of var j (x) against var i (y), divergent draws as red
/// crosses; the diagonal the histogram of var i; above it the
/// correlation. The names run along the left and the bottom.
///
/// Errors: [`ErrorKind::Data`] for fewer than two variables;
/// [`ErrorKind::Io`] when the file cannot be drawn or written.
pub fn pair_plot(path: &Path, vars: &[ChainSeries], title: &str) -> Result<(), Error> {
    let k = vars.len();
    if k < 2 {
        return Err(Error::new(
            ErrorKind::Data,
            "a pair plot needs two or more variables",
        ));
    }
    register_font();
    let e = |err| plot_err(path, err);
    let cell = (1200 / k as u32).clamp(90, 240);
    let (w, h) = (
        EDGE + k as u32 * cell + 10,
        TITLE_H + k as u32 * cell + EDGE,
    );
    let root = BitMapBackend::new(path, (w, h)).into_drawing_area();
    root.fill(&WHITE).map_err(e)?;
    let (top, body) = root.split_vertically(TITLE_H);
    let n_div: usize = vars[0].divergent.iter().map(Vec::len).sum();
    let caption = ("sans-serif", 22)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Center, VPos::Center));
    top.draw(&Text::new(
        format!("{title}: pairs"),
        (w as i32 / 2, 18),
        caption,
    ))
    .map_err(e)?;
    let note = ("sans-serif", 15)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Left, VPos::Center));
    let legend = if n_div > 0 {
        format!("divergent transitions ({n_div})")
    } else {
        "no divergent transitions".to_string()
    };
    let lw = text_width(&legend, &("sans-serif", 15).into_font().into());
    let lx = (w as i32 - lw - 24) / 2;
    if n_div > 0 {
        top.draw(&Cross::new((lx, 42), 5, DIVERGENT.stroke_width(2)))
            .map_err(e)?;
    }
    top.draw(&Text::new(legend, (lx + 14, 42), note))
        .map_err(e)?;

    let data: Vec<(Vec<f64>, (f64, f64))> = vars.iter().map(pooled).collect();
    let cols: Vec<u32> = (0..k as u32).map(|j| EDGE + j * cell).collect();
    let rows: Vec<u32> = (1..=k as u32).map(|i| i * cell).collect();
    let panels = body.split_by_breakpoints(cols, rows);
    // `panels` runs row by row over (k + 1) × (k + 1) areas: the first
    // column and the last row hold the names.
    let at = |i: usize, j: usize| &panels[i * (k + 1) + j];
    let name_font: TextStyle = ("sans-serif", 14).into_font().into();
    for (i, var) in vars.iter().enumerate() {
        let left = at(i, 0);
        let name = fit_text(&var.name, &name_font, EDGE as i32 - 8);
        left.draw(&Text::new(
            name.clone(),
            (4, cell as i32 / 2),
            name_font.pos(Pos::new(HPos::Left, VPos::Center)),
        ))
        .map_err(e)?;
        let bottom = at(k, i + 1);
        bottom
            .draw(&Text::new(
                fit_text(&var.name, &name_font, cell as i32 - 8),
                (cell as i32 / 2, 28),
                name_font.pos(Pos::new(HPos::Center, VPos::Center)),
            ))
            .map_err(e)?;
    }
    for i in 0..k {
        for j in 0..k {
            let area = at(i, j + 1);
            match i.cmp(&j) {
                std::cmp::Ordering::Greater => {
                    scatter(path, area, &vars[j], &vars[i], &data[j], &data[i])?
                }
                std::cmp::Ordering::Equal => histogram(path, area, &data[i])?,
                std::cmp::Ordering::Less => {
                    let r = correlation(&data[j].0, &data[i].0);
                    let text = if r.is_finite() {
                        format!("r = {r:.2}")
                    } else {
                        "r = –".to_string()
                    };
                    let shade = if r.is_finite() { r.abs().min(1.0) } else { 0.0 };
                    area.fill(&RGBColor(31, 119, 180).mix(0.08 + 0.3 * shade))
                        .map_err(e)?;
                    area.draw(&Text::new(
                        text,
                        (cell as i32 / 2, cell as i32 / 2),
                        ("sans-serif", 15)
                            .into_font()
                            .color(&BLACK)
                            .pos(Pos::new(HPos::Center, VPos::Center)),
                    ))
                    .map_err(e)?;
                }
            }
        }
    }
    root.present().map_err(e)?;
    Ok(())
}

/// One scatter panel: `x` against `y`, with ticks on three values of
/// each, divergent draws of `yv` (marked at both variables' values) on
/// top.
fn scatter(
    path: &Path,
    area: &DrawingArea<BitMapBackend<'_>, Shift>,
    xv: &ChainSeries,
    yv: &ChainSeries,
    x: &(Vec<f64>, (f64, f64)),
    y: &(Vec<f64>, (f64, f64)),
) -> Result<(), Error> {
    let e = |err| plot_err(path, err);
    let mut chart = ChartBuilder::on(area)
        .margin(3)
        .build_cartesian_2d(x.1.0..x.1.1, y.1.0..y.1.1)
        .map_err(e)?;
    chart
        .configure_mesh()
        .disable_mesh()
        .x_labels(0)
        .y_labels(0)
        .draw()
        .map_err(e)?;
    chart
        .plotting_area()
        .draw(&Rectangle::new(
            [(x.1.0, y.1.0), (x.1.1, y.1.1)],
            RGBColor(180, 180, 180),
        ))
        .map_err(e)?;
    let n = x.0.len().min(y.0.len());
    let step = n.div_ceil(SCATTER_MAX).max(1);
    let dot = RGBColor(31, 119, 180).mix(0.35).filled();
    chart
        .draw_series(
            (0..n)
                .step_by(step)
                .filter(|&t| x.0[t].is_finite() && y.0[t].is_finite())
                .map(|t| Circle::new((x.0[t], y.0[t]), 1, dot)),
        )
        .map_err(e)?;
    // A divergent draw's value of the other variable: the same chain and
    // draw index.
    let marks: Vec<(f64, f64)> = divergence_marks(yv)
        .into_iter()
        .filter_map(|(c, d, yval)| {
            let xval = *xv.chains.get(c)?.get(d as usize)?;
            xval.is_finite()
                .then_some((xval.clamp(-1e307, 1e307), yval))
        })
        .collect();
    chart
        .draw_series(
            marks
                .into_iter()
                .map(|p| Cross::new(p, 4, DIVERGENT.stroke_width(2))),
        )
        .map_err(e)?;
    Ok(())
}

/// The diagonal panel: a histogram of the pooled draws, with the range's
/// ends labelled.
fn histogram(
    path: &Path,
    area: &DrawingArea<BitMapBackend<'_>, Shift>,
    v: &(Vec<f64>, (f64, f64)),
) -> Result<(), Error> {
    let e = |err| plot_err(path, err);
    let (lo, hi) = v.1;
    let width = (hi - lo) / BINS as f64;
    let mut counts = [0usize; BINS];
    for x in v.0.iter().filter(|x| x.is_finite()) {
        let b = (((x - lo) / width) as usize).min(BINS - 1);
        counts[b] += 1;
    }
    let top = counts.iter().copied().max().unwrap_or(1).max(1) as f64;
    let axis = Axis::new(lo, hi, 3);
    let mut chart = ChartBuilder::on(area)
        .margin(3)
        .x_label_area_size(18)
        .build_cartesian_2d(lo..hi, 0.0..top * 1.1)
        .map_err(e)?;
    chart
        .configure_mesh()
        .disable_mesh()
        .x_labels(3)
        .y_labels(0)
        .x_label_formatter(&|x| axis.label(*x))
        .label_style(("sans-serif", 11))
        .draw()
        .map_err(e)?;
    chart
        .draw_series(counts.iter().enumerate().map(|(b, &c)| {
            let x0 = lo + b as f64 * width;
            Rectangle::new(
                [(x0, 0.0), (x0 + width, c as f64)],
                RGBColor(31, 119, 180).mix(0.6).filled(),
            )
        }))
        .map_err(e)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn correlation_of_known_pairs() {
        assert!((correlation(&[1.0, 2.0, 3.0], &[2.0, 4.0, 6.0]) - 1.0).abs() < 1e-12);
        assert!((correlation(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]) + 1.0).abs() < 1e-12);
        assert!(correlation(&[1.0, f64::NAN], &[1.0, 2.0]).is_nan());
        assert!(correlation(&[1.0, 1.0, 1.0], &[1.0, 2.0, 3.0]).is_nan());
    }

    #[test]
    fn pairs_are_drawn_with_divergences() {
        let dir = std::env::temp_dir().join(format!("tempest-pairs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("pairs.png");
        let v = |name: &str, f: fn(f64) -> f64| ChainSeries {
            name: name.into(),
            chains: (0..2)
                .map(|c| {
                    (0..300)
                        .map(|i| f((i * 7 + c * 13) as f64 % 101.0 / 10.0))
                        .collect()
                })
                .collect(),
            divergent: vec![vec![3, 50], vec![]],
        };
        let vars = [
            v("tau", |x| x),
            v("a[0]", |x| (x * 1.3).sin() * x),
            v("c", |_| 2.0),
        ];
        pair_plot(&path, &vars, "nuts").unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        assert!(pair_plot(&path, &vars[..1], "x").is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
