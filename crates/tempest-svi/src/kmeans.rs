//! Initial inducing inputs: k-means (Lloyd's iterations from k-means++
//! seeds) on a seeded sample of the training inputs.

use crate::error::Error;
use crate::interrupt::StopFlag;
use crate::model::kernel::Inputs;
use rand::rngs::StdRng;
use rand::seq::index::sample;
use rand::{RngExt, SeedableRng};

/// The largest sample k-means runs on: `SAMPLE_PER_CENTRE` points per
/// centre, at least `SAMPLE_MIN`.
const SAMPLE_PER_CENTRE: usize = 50;
/// See [`SAMPLE_PER_CENTRE`].
const SAMPLE_MIN: usize = 2000;
/// The sample never exceeds this many points (or M, when M is larger), so
/// the iterations cost at most ITERATIONS × SAMPLE_MAX × M × D.
const SAMPLE_MAX: usize = 100_000;
/// Lloyd iterations.
const ITERATIONS: usize = 15;

fn dist2(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum()
}

/// M centres [M, D] for the N points of `x` (M ≥ N gives the points
/// themselves), from the seed: the same centres on any machine. `stop` is
/// read at every seed and every iteration.
pub fn centres(x: &Inputs, m: usize, seed: u64, stop: &StopFlag) -> Result<Inputs, Error> {
    let (n, d) = (x.len(), x.dim());
    if m >= n {
        return Ok(x.clone());
    }
    const DURING: &str = "placing the inducing points by k-means";
    let mut rng = StdRng::seed_from_u64(seed ^ 0x6b6d_6561_6e73);
    let take = n.min((SAMPLE_PER_CENTRE * m).clamp(SAMPLE_MIN, SAMPLE_MAX.max(m)));
    let mut idx = sample(&mut rng, n, take).into_vec();
    idx.sort_unstable();
    let pts = x.gather(&idx);
    // k-means++ seeding.
    let mut c: Vec<f64> = Vec::with_capacity(m * d);
    c.extend_from_slice(pts.row(rng.random_range(0..take)));
    let mut near: Vec<f64> = (0..take).map(|i| dist2(pts.row(i), &c[..d])).collect();
    while c.len() < m * d {
        stop.check(DURING)?;
        let total: f64 = near.iter().sum();
        let pick = if total > 0.0 && total.is_finite() {
            let mut u = rng.random::<f64>() * total;
            let mut k = take - 1;
            for (i, w) in near.iter().enumerate() {
                if u < *w {
                    k = i;
                    break;
                }
                u -= w;
            }
            k
        } else {
            rng.random_range(0..take)
        };
        let start = c.len();
        c.extend_from_slice(pts.row(pick));
        for (i, v) in near.iter_mut().enumerate() {
            *v = v.min(dist2(pts.row(i), &c[start..start + d]));
        }
    }
    // Lloyd's iterations; an empty cluster keeps its centre.
    let mut assign = vec![0usize; take];
    for _ in 0..ITERATIONS {
        stop.check(DURING)?;
        let mut changed = false;
        for (i, a) in assign.iter_mut().enumerate() {
            let p = pts.row(i);
            let best = (0..m)
                .map(|k| (k, dist2(p, &c[k * d..(k + 1) * d])))
                .min_by(|u, v| u.1.total_cmp(&v.1))
                .map_or(0, |b| b.0);
            changed |= best != *a;
            *a = best;
        }
        let mut sum = vec![0.0; m * d];
        let mut count = vec![0usize; m];
        for (i, &a) in assign.iter().enumerate() {
            count[a] += 1;
            for (s, v) in sum[a * d..(a + 1) * d].iter_mut().zip(pts.row(i)) {
                *s += v;
            }
        }
        for k in 0..m {
            if count[k] > 0 {
                for j in 0..d {
                    c[k * d + j] = sum[k * d + j] / count[k] as f64;
                }
            }
        }
        if !changed {
            break;
        }
    }
    Ok(Inputs::from_flat(c, d))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn centres_find_separated_clusters_and_repeat_with_the_seed() {
        let rows: Vec<Vec<f64>> = (0..300)
            .map(|i| {
                let c = (i % 3) as f64 * 10.0;
                vec![c + (i as f64 * 0.37).sin() * 0.1, -c]
            })
            .collect();
        let x = Inputs::from_rows(&rows);
        let none = StopFlag::default();
        let z = centres(&x, 3, 4, &none).unwrap();
        let mut firsts: Vec<f64> = (0..3).map(|k| z.row(k)[0]).collect();
        firsts.sort_by(f64::total_cmp);
        for (f, want) in firsts.iter().zip([0.0, 10.0, 20.0]) {
            assert!((f - want).abs() < 0.2, "{firsts:?}");
        }
        assert_eq!(z, centres(&x, 3, 4, &none).unwrap());
        assert_eq!(centres(&x, 500, 4, &none).unwrap(), x);
        let set = StopFlag::new(Some(std::sync::Arc::new(
            std::sync::atomic::AtomicBool::new(true),
        )));
        assert!(centres(&x, 3, 4, &set).unwrap_err().is_interrupted());
    }
}
