//! One kernel entry's reverse pass with respect to its two input points:
//! ∂k(x, y)/∂x and ∂k(x, y)/∂y for built-in kernels, kernel algebra and
//! compiled model-file kernels. (The parameters' part is
//! [`KernelValue::entry_grad`].)

use crate::kernel::{KernelArg, KernelKind, KernelValue};
use crate::kernels::{dot_product, stationary};
use std::f64::consts::PI;
use tempest_core::error::{Error, ErrorKind};

/// A thread's scratch for compiled kernels' entries: the selected columns,
/// their adjoints, the parameters' adjoints and the program's slots, kept
/// between entries so that none allocates.
#[derive(Default)]
struct Scratch {
    xs: Vec<f64>,
    ys: Vec<f64>,
    lx: Vec<f64>,
    ly: Vec<f64>,
    gp: Vec<f64>,
    vals: Vec<f64>,
    adj: Vec<f64>,
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::new(Scratch::default());
}

/// The coordinate of a row that the k-th selected input dimension is.
#[inline]
fn col(dims: Option<&[usize]>, k: usize) -> usize {
    dims.map_or(k, |d| d[k])
}

/// The number of selected input dimensions of rows of length `len`.
#[inline]
fn seen(dims: Option<&[usize]>, len: usize) -> usize {
    dims.map_or(len, |d| d.len())
}

/// Adds `v` to entry `j` of an optional sink (no entry past its end).
#[inline]
fn add(sink: &mut Option<&mut [f64]>, j: usize, v: f64) {
    if let Some(s) = sink.as_deref_mut()
        && let Some(e) = s.get_mut(j)
    {
        *e += v;
    }
}

fn no_rule(k: &KernelValue<f64>) -> Error {
    Error::new(
        ErrorKind::Unsupported,
        format!(
            "the kernel `{}` has no reverse rule with respect to its inputs",
            k.describe()
        ),
    )
}

impl KernelValue<f64> {
    /// k(x, y), adding ḡ ∂k/∂x to `gx` \[D\] and ḡ ∂k/∂y to `gy` \[D\] (either
    /// may be `None`); x and y are whole rows \[D\] (`dims` are applied
    /// here). `same` is as in [`KernelValue::entry`]: `white()` is an
    /// indicator of the same point and has no input derivative.
    ///
    /// Sums add, products multiply each side's adjoint by the other side's
    /// value, c · k scales it by c; the built-in rules are in the module's
    /// source with their formulas, a compiled kernel uses its program's
    /// reverse pass ([`crate::program::KernelProgram::eval_grad_inputs`]).
    /// An error for kernels with Rust or interpreted model-file parts.
    pub fn entry_vjp_inputs(
        &self,
        x: &[f64],
        y: &[f64],
        same: bool,
        g: f64,
        mut gx: Option<&mut [f64]>,
        mut gy: Option<&mut [f64]>,
    ) -> Result<f64, Error> {
        self.inputs(x, y, same, g, &mut gx, &mut gy)
    }

    /// The recursion of [`KernelValue::entry_vjp_inputs`], with the stack
    /// grown as needed at every level of the kernel tree (its depth is the
    /// model's).
    fn inputs(
        &self,
        x: &[f64],
        y: &[f64],
        same: bool,
        g: f64,
        gx: &mut Option<&mut [f64]>,
        gy: &mut Option<&mut [f64]>,
    ) -> Result<f64, Error> {
        tempest_core::limits::deep(|| {
            Ok(match self {
                KernelValue::Base {
                    kind, args, dims, ..
                } => base_inputs(*kind, args, dims.as_deref(), x, y, same, g, gx, gy),
                KernelValue::Sum(a, b) => {
                    a.inputs(x, y, same, g, gx, gy)? + b.inputs(x, y, same, g, gx, gy)?
                }
                KernelValue::Product(a, b) => {
                    // a's pass returns its value, which b's pass needs.
                    let kb = b.entry(x, y, same)?;
                    let ka = a.inputs(x, y, same, g * kb, gx, gy)?;
                    b.inputs(x, y, same, g * ka, gx, gy)?;
                    ka * kb
                }
                KernelValue::Scale(c, k) => c * k.inputs(x, y, same, g * c, gx, gy)?,
                KernelValue::Compiled {
                    program,
                    params,
                    dims,
                    ..
                } => SCRATCH.with_borrow_mut(|s| {
                    let d = dims.as_deref();
                    let Scratch {
                        xs,
                        ys,
                        lx,
                        ly,
                        gp,
                        vals,
                        adj,
                    } = s;
                    let (nx, ny) = (seen(d, x.len()), seen(d, y.len()));
                    let pick = |r: &[f64], out: &mut Vec<f64>| {
                        out.clear();
                        out.extend((0..seen(d, r.len())).map(|k| r[col(d, k)]));
                    };
                    let (xr, yr): (&[f64], &[f64]) = match d {
                        None => (x, y),
                        Some(_) => {
                            pick(x, xs);
                            pick(y, ys);
                            (xs, ys)
                        }
                    };
                    let zeroed = |v: &mut Vec<f64>, n: usize| {
                        v.clear();
                        v.resize(n, 0.0);
                    };
                    zeroed(lx, nx);
                    zeroed(ly, ny);
                    zeroed(gp, params.len());
                    let n = program.len();
                    if vals.len() < n {
                        vals.resize(n, 0.0);
                        adj.resize(n, 0.0);
                    }
                    let k =
                        program.eval_grad_inputs_in((params, xr, yr), gp, (lx, ly), (vals, adj));
                    for (j, (u, v)) in lx.iter().zip(ly.iter()).enumerate() {
                        add(gx, col(d, j), g * u);
                        add(gy, col(d, j), g * v);
                    }
                    k
                }),
                KernelValue::Rust { .. } | KernelValue::Lang { .. } => return Err(no_rule(self)),
            })
        })
    }
}

/// A built-in kernel's value, adding ḡ ∂k/∂x to `gx` and ḡ ∂k/∂y to `gy`.
/// With dₖ = xⱼ − yⱼ for the k-th selected column j:
///
/// - stationary, r² = Σₖ dₖ²/ℓₖ²: ∂k/∂xⱼ = (dk/dr²) 2dₖ/ℓₖ² (0 at r² = 0
///   and where r² overflowed);
/// - periodic, uₖ = π dₖ/p: ∂k/∂xⱼ = −(2k/ℓ²)(π/p) sin(2uₖ);
/// - linear: ∂k/∂xⱼ = vₖ yⱼ;
/// - polynomial, b = c + xᵀy: ∂k/∂xⱼ = degree · b^(degree − 1) yⱼ;
/// - cosine: ∂k/∂x = y/(‖x‖‖y‖) − k x/‖x‖² (0 when a norm is 0);
/// - white, constant: 0;
///
/// and symmetrically for y (−∂/∂xⱼ for the stationary kernels).
#[allow(clippy::too_many_arguments)]
fn base_inputs(
    kind: KernelKind,
    args: &[KernelArg<f64>],
    dims: Option<&[usize]>,
    x: &[f64],
    y: &[f64],
    same: bool,
    g: f64,
    gx: &mut Option<&mut [f64]>,
    gy: &mut Option<&mut [f64]>,
) -> f64 {
    let n = seen(dims, x.len());
    let diff = |k: usize| x[col(dims, k)] - y[col(dims, k)];
    match kind {
        KernelKind::Rbf | KernelKind::Matern12 | KernelKind::Matern32 | KernelKind::Matern52 => {
            let ls = args[0].as_slice();
            let ell = |k: usize| if ls.len() == 1 { ls[0] } else { ls[k] };
            let r2: f64 = (0..n).map(|k| (diff(k) / ell(k)).powi(2)).sum();
            let (k, slope) = stationary::value_and_slope(kind, r2);
            if r2 != 0.0 && r2.is_finite() {
                for j in 0..n {
                    let l = ell(j);
                    let d = g * slope * 2.0 * diff(j) / (l * l);
                    add(gx, col(dims, j), d);
                    add(gy, col(dims, j), -d);
                }
            }
            k
        }
        KernelKind::Periodic => {
            let (ell, period) = (args[0].scalar(), args[1].scalar());
            let s: f64 = (0..n).map(|k| (PI * diff(k) / period).sin().powi(2)).sum();
            let k = (-2.0 * s / (ell * ell)).exp();
            let c = -2.0 * k / (ell * ell) * PI / period;
            for j in 0..n {
                let d = g * c * (2.0 * PI * diff(j) / period).sin();
                add(gx, col(dims, j), d);
                add(gy, col(dims, j), -d);
            }
            k
        }
        KernelKind::Linear => {
            let v = args[0].as_slice();
            let vk = |k: usize| if v.len() == 1 { v[0] } else { v[k] };
            let mut k = 0.0;
            for j in 0..n {
                let (u, w) = (x[col(dims, j)], y[col(dims, j)]);
                k += vk(j) * u * w;
                add(gx, col(dims, j), g * vk(j) * w);
                add(gy, col(dims, j), g * vk(j) * u);
            }
            k
        }
        KernelKind::Polynomial => {
            let (degree, c) = (args[0].scalar(), args[1].scalar());
            let base = c + dot_product::dot_of(x, y, dims);
            let k = dot_product::polynomial::<f64>(x, y, dims, degree, c);
            let dk = dot_product::polynomial_slope(degree, base);
            for j in 0..n {
                add(gx, col(dims, j), g * dk * y[col(dims, j)]);
                add(gy, col(dims, j), g * dk * x[col(dims, j)]);
            }
            k
        }
        KernelKind::Cosine => {
            let nx = dot_product::dot_of(x, x, dims).sqrt();
            let ny = dot_product::dot_of(y, y, dims).sqrt();
            if nx == 0.0 || ny == 0.0 {
                return 0.0;
            }
            let k = dot_product::dot_of(x, y, dims) / (nx * ny);
            for j in 0..n {
                let (u, w) = (x[col(dims, j)], y[col(dims, j)]);
                add(gx, col(dims, j), g * (w / (nx * ny) - k * u / (nx * nx)));
                add(gy, col(dims, j), g * (u / (nx * ny) - k * w / (ny * ny)));
            }
            k
        }
        KernelKind::White => {
            if same {
                1.0
            } else {
                0.0
            }
        }
        KernelKind::Constant => 1.0,
    }
}
