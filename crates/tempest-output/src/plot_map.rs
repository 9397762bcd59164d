//! The probability map of a classifier with two inputs: the predicted
//! class probabilities over the input plane as coloured cells (binary
//! outcomes: P(y = 1) from blue through white at 0.5 to red, with a colour
//! bar; more classes: each class's colour weighted by its probability,
//! with a legend), and the training points on top in their class's colour.

use crate::error::Error;
use crate::plot::{PALETTE, plot_err, register_font};
use crate::ticks::Axis;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;

/// Cells per side of a probability map's grid.
pub const GRID: usize = 60;

/// The colour of class 0 of a binary map, and of P(y = 1) = 0.
const LOW: RGBColor = RGBColor(31, 119, 180);
/// The colour of class 1 of a binary map, and of P(y = 1) = 1.
const HIGH: RGBColor = RGBColor(214, 39, 40);

/// What a probability map draws.
pub struct ProbabilityMap<'a> {
    /// The title.
    pub title: &'a str,
    /// The plane's extent: (x from, x to), (y from, y to).
    pub extent: ((f64, f64), (f64, f64)),
    /// The class probabilities at the cells' centres
    /// ([`grid_points`] order) \[GRID²\]\[K\].
    pub probs: &'a [Vec<f64>],
    /// The training inputs (two columns) and classes \[N\] each.
    pub train: (&'a [f64], &'a [f64], &'a [f64]),
    /// The two inputs' names.
    pub labels: (&'a str, &'a str),
    /// The class names, in class order (`0`, `1` or the data's labels).
    pub classes: Vec<String>,
    /// The outcome's name, for the colour bar (`P(y = 1)`).
    pub outcome: &'a str,
}

/// The extent a map covers: the inputs' range in each column padded by
/// 5 % (a column without spread by 1); non-finite inputs are ignored.
pub fn extent(x0: &[f64], x1: &[f64]) -> ((f64, f64), (f64, f64)) {
    let range = |v: &[f64]| {
        let (lo, hi) = v
            .iter()
            .filter(|x| x.is_finite())
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
                (a.min(x), b.max(x))
            });
        if !lo.is_finite() {
            return (-1.0, 1.0);
        }
        let pad = if hi > lo { 0.05 * (hi - lo) } else { 1.0 };
        (lo - pad, hi + pad)
    };
    (range(x0), range(x1))
}

/// The centres of the [`GRID`] × [`GRID`] cells over `extent`, row by row
/// from the bottom (the first input varying fastest), as input rows.
pub fn grid_points(extent: ((f64, f64), (f64, f64))) -> Vec<Vec<f64>> {
    let ((a0, a1), (b0, b1)) = extent;
    let (dx, dy) = ((a1 - a0) / GRID as f64, (b1 - b0) / GRID as f64);
    (0..GRID * GRID)
        .map(|k| {
            let (i, j) = (k % GRID, k / GRID);
            vec![a0 + (i as f64 + 0.5) * dx, b0 + (j as f64 + 0.5) * dy]
        })
        .collect()
}

/// `a` mixed towards `b` by `t` in [0, 1].
fn lerp(a: RGBColor, b: RGBColor, t: f64) -> RGBColor {
    let t = if t.is_finite() {
        t.clamp(0.0, 1.0)
    } else {
        0.5
    };
    let m = |x: u8, y: u8| (x as f64 + (y as f64 - x as f64) * t).round() as u8;
    RGBColor(m(a.0, b.0), m(a.1, b.1), m(a.2, b.2))
}

/// The colour of a class.
pub fn class_colour(k: usize, classes: usize) -> RGBColor {
    match (classes, k) {
        (2, 0) => LOW,
        (2, _) => HIGH,
        _ => PALETTE[k % PALETTE.len()],
    }
}

/// The colour of a cell with class probabilities `p`: for two classes
/// blue (P(y = 1) = 0) through white (0.5) to red (1); for more, each
/// class's colour weighted by its probability.
pub fn cell_colour(p: &[f64]) -> RGBColor {
    if p.len() == 2 {
        let p1 = p[1];
        return if p1 < 0.5 {
            lerp(LOW, WHITE, 2.0 * p1)
        } else {
            lerp(WHITE, HIGH, 2.0 * p1 - 1.0)
        };
    }
    let (mut r, mut g, mut b) = (0.0, 0.0, 0.0);
    for (k, &pk) in p.iter().enumerate() {
        let c = class_colour(k, p.len());
        let w = if pk.is_finite() {
            pk.clamp(0.0, 1.0)
        } else {
            0.0
        };
        r += w * c.0 as f64;
        g += w * c.1 as f64;
        b += w * c.2 as f64;
    }
    let total: f64 = p.iter().filter(|v| v.is_finite()).sum::<f64>().max(1e-12);
    let f = |v: f64| (v / total).round().clamp(0.0, 255.0) as u8;
    // Lightened, so the training points stand out.
    lerp(RGBColor(f(r), f(g), f(b)), WHITE, 0.35)
}

/// Draw a [`ProbabilityMap`] to a PNG file.
pub fn probability_map(path: &Path, m: &ProbabilityMap) -> Result<(), Error> {
    register_font();
    let e = |err| plot_err(path, err);
    let root = BitMapBackend::new(path, (980, 760)).into_drawing_area();
    root.fill(&WHITE).map_err(e)?;
    let (left, side) = root.split_horizontally(800);
    let ((a0, a1), (b0, b1)) = m.extent;
    let mut chart = ChartBuilder::on(&left)
        .caption(m.title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(70)
        .build_cartesian_2d(a0..a1, b0..b1)
        .map_err(e)?;
    let (xa, ya) = (Axis::new(a0, a1, 10), Axis::new(b0, b1, 10));
    chart
        .configure_mesh()
        .disable_mesh()
        .x_desc(m.labels.0)
        .y_desc(m.labels.1)
        .x_labels(10)
        .y_labels(10)
        .x_label_formatter(&|x| xa.label(*x))
        .y_label_formatter(&|y| ya.label(*y))
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 16))
        .draw()
        .map_err(e)?;
    let (dx, dy) = ((a1 - a0) / GRID as f64, (b1 - b0) / GRID as f64);
    chart
        .draw_series(m.probs.iter().enumerate().map(|(k, p)| {
            let (i, j) = ((k % GRID) as f64, (k / GRID) as f64);
            Rectangle::new(
                [
                    (a0 + i * dx, b0 + j * dy),
                    (a0 + (i + 1.0) * dx, b0 + (j + 1.0) * dy),
                ],
                cell_colour(p).filled(),
            )
        }))
        .map_err(e)?;
    let k = m.classes.len();
    let (tx, ty, tc) = m.train;
    let inside = |x: f64, y: f64| (a0..=a1).contains(&x) && (b0..=b1).contains(&y);
    chart
        .draw_series(
            tx.iter()
                .zip(ty)
                .zip(tc)
                .filter(|((x, y), _)| inside(**x, **y))
                .map(|((&x, &y), &c)| {
                    let colour = class_colour(c.max(0.0) as usize, k);
                    EmptyElement::at((x, y))
                        + Circle::new((0, 0), 4, colour.filled())
                        + Circle::new((0, 0), 4, BLACK.stroke_width(1))
                }),
        )
        .map_err(e)?;
    // The side panel: a colour bar for two classes, else a class legend.
    let font = ("sans-serif", 14).into_font().color(&BLACK);
    let left_font = font.pos(Pos::new(HPos::Left, VPos::Center));
    if k == 2 {
        let (x0, y0, h) = (20, 90, 500);
        side.draw(&Text::new(
            format!("P({}=1)", m.outcome),
            (x0, 60),
            font.clone(),
        ))
        .map_err(e)?;
        for s in 0..h {
            let p1 = 1.0 - s as f64 / (h - 1) as f64;
            side.draw(&Rectangle::new(
                [(x0, y0 + s), (x0 + 26, y0 + s + 1)],
                cell_colour(&[1.0 - p1, p1]).filled(),
            ))
            .map_err(e)?;
        }
        side.draw(&Rectangle::new(
            [(x0, y0), (x0 + 26, y0 + h)],
            BLACK.stroke_width(1),
        ))
        .map_err(e)?;
        for (v, label) in [
            (1.0, "1"),
            (0.75, "0.75"),
            (0.5, "0.5"),
            (0.25, "0.25"),
            (0.0, "0"),
        ] {
            let y = y0 + ((1.0 - v) * (h - 1) as f64) as i32;
            side.draw(&PathElement::new([(x0 + 26, y), (x0 + 32, y)], BLACK))
                .map_err(e)?;
            side.draw(&Text::new(label, (x0 + 36, y), left_font.clone()))
                .map_err(e)?;
        }
    } else {
        side.draw(&Text::new("classes", (20, 60), font.clone()))
            .map_err(e)?;
    }
    let legend_top = if k == 2 { 620 } else { 90 };
    for (c, name) in m.classes.iter().enumerate().take(24) {
        let y = legend_top + 24 * c as i32;
        side.draw(&Circle::new((26, y), 5, class_colour(c, k).filled()))
            .map_err(e)?;
        side.draw(&Circle::new((26, y), 5, BLACK.stroke_width(1)))
            .map_err(e)?;
        side.draw(&Text::new(name.clone(), (38, y), left_font.clone()))
            .map_err(e)?;
    }
    root.present().map_err(e)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_cover_the_extent_in_rows() {
        let g = grid_points(((0.0, 6.0), (10.0, 16.0)));
        assert_eq!(g.len(), GRID * GRID);
        assert_eq!(g[0], vec![0.05, 10.05]);
        assert!((g[1][0] - 0.15).abs() < 1e-12 && g[1][1] == 10.05);
        assert!((g[GRID][1] - 10.15).abs() < 1e-12);
        assert_eq!(
            extent(&[0.0, 10.0], &[3.0, 3.0]),
            ((-0.5, 10.5), (2.0, 4.0))
        );
    }

    #[test]
    fn colours_run_from_class_zero_to_class_one() {
        assert_eq!(cell_colour(&[1.0, 0.0]), LOW);
        assert_eq!(cell_colour(&[0.5, 0.5]), WHITE);
        assert_eq!(cell_colour(&[0.0, 1.0]), HIGH);
        // Three classes, all on class 2: its colour, lightened.
        assert_eq!(cell_colour(&[0.0, 0.0, 1.0]), lerp(PALETTE[2], WHITE, 0.35));
    }
}
