//! The learnable hypers as one flat vector θ on the unconstrained scale, and
//! the map θ → hyper values (constrained, generic over the scalar type).

use crate::error::{Error, ErrorKind};
use crate::ir::bind::Bound;
use crate::ir::types::Ty;
use crate::ir::value::Value;
use crate::model::custom::Scalar;
use nalgebra::{DMatrix, DVector};
use serde_json::{Map, json};

/// Where one learnable hyper lives in θ.
#[derive(Clone, Debug)]
pub struct Slot {
    /// The hyper (index into the graph's hypers).
    pub hyper: usize,
    /// First index in θ.
    pub offset: usize,
    /// Number of entries.
    pub len: usize,
}

/// The layout of θ: which hypers are learned, and where.
#[derive(Clone, Debug, Default)]
pub struct HyperLayout {
    /// One slot per learned hyper, in declaration order.
    pub slots: Vec<Slot>,
    /// The length of θ.
    pub len: usize,
}

impl HyperLayout {
    /// Learn every non-fixed hyper (when `learn`), or none.
    pub fn new(bound: &Bound, learn: bool) -> HyperLayout {
        let mut slots = Vec::new();
        let mut offset = 0;
        if learn {
            for (i, h) in bound.graph.hypers.iter().enumerate() {
                if h.fixed {
                    continue;
                }
                let len = bound.hyper_init[i].flatten().len();
                slots.push(Slot {
                    hyper: i,
                    offset,
                    len,
                });
                offset += len;
            }
        }
        HyperLayout { slots, len: offset }
    }

    /// θ at the hypers' initial values.
    pub fn initial(&self, bound: &Bound) -> Result<Vec<f64>, Error> {
        let mut theta = vec![0.0; self.len];
        for s in &self.slots {
            let b = bound.hyper_bounds[s.hyper];
            for (k, x) in bound.hyper_init[s.hyper].flatten().into_iter().enumerate() {
                theta[s.offset + k] = b.unconstrain(x).ok_or_else(|| {
                    Error::new(
                        ErrorKind::Constraint,
                        format!(
                            "the initial value {x} of `{}` is not inside {}",
                            bound.graph.hypers[s.hyper].name,
                            b.describe()
                        ),
                    )
                })?;
            }
        }
        Ok(theta)
    }

    /// Hyper values at θ: learned hypers constrained from θ, the others at
    /// their initial (fixed) values.
    pub fn values<T: Scalar>(&self, bound: &Bound, theta: &[T]) -> Vec<Value<T>> {
        let mut out: Vec<Value<T>> = bound.hyper_init.iter().map(|v| v.lift()).collect();
        for s in &self.slots {
            let b = bound.hyper_bounds[s.hyper];
            let xs: Vec<T> = theta[s.offset..s.offset + s.len]
                .iter()
                .map(|&u| b.constrain(u))
                .collect();
            out[s.hyper] = reshape(
                &bound.hyper_init[s.hyper],
                &bound.graph.hypers[s.hyper].ty,
                xs,
            );
        }
        out
    }

    /// Names of the entries of θ: `ell`, `ells[0]`, ...
    pub fn names(&self, bound: &Bound) -> Vec<String> {
        let mut out = Vec::with_capacity(self.len);
        for s in &self.slots {
            let name = &bound.graph.hypers[s.hyper].name;
            if s.len == 1 && bound.hyper_init[s.hyper].scalar().is_some() {
                out.push(name.clone());
            } else {
                out.extend((0..s.len).map(|k| format!("{name}[{k}]")));
            }
        }
        out
    }
}

/// Put flat values back into the shape of `like`.
fn reshape<T: Scalar>(like: &Value<f64>, ty: &Ty, xs: Vec<T>) -> Value<T> {
    match (like, ty) {
        (Value::Matrix(m), _) => {
            let (r, c) = m.shape();
            Value::Matrix(DMatrix::from_fn(r, c, |i, j| xs[i * c + j]))
        }
        (Value::Vector(_), _) => Value::Vector(DVector::from_vec(xs)),
        _ => Value::Real(xs[0]),
    }
}

/// Every hyper's value as JSON: numbers, arrays, arrays of rows.
pub fn hypers_json(bound: &Bound, values: &[Value<f64>]) -> Map<String, serde_json::Value> {
    let mut m = Map::new();
    for (h, v) in bound.graph.hypers.iter().zip(values) {
        let j = match v {
            Value::Real(x) => json!(x),
            Value::Int(i) => json!(i),
            Value::Vector(x) => json!(x.iter().collect::<Vec<_>>()),
            Value::Matrix(x) => json!(
                (0..x.nrows())
                    .map(|i| x.row(i).iter().copied().collect::<Vec<f64>>())
                    .collect::<Vec<_>>()
            ),
            other => json!(other.to_string()),
        };
        m.insert(h.name.clone(), j);
    }
    m
}

/// The hypers as an aligned table for summaries: name, value, and whether
/// it was learned, fixed or given.
pub fn hypers_table(bound: &Bound, values: &[Value<f64>], layout: &HyperLayout) -> String {
    let learned: Vec<usize> = layout.slots.iter().map(|sl| sl.hyper).collect();
    let hypers = &bound.graph.hypers;
    let width = hypers
        .iter()
        .map(|h| h.name.chars().count())
        .max()
        .unwrap_or(0);
    let mut s = String::new();
    for (i, (h, v)) in hypers.iter().zip(values).enumerate() {
        let tag = if learned.contains(&i) {
            "learned"
        } else if h.fixed {
            "fixed"
        } else {
            "given"
        };
        let text = match v {
            Value::Real(x) => crate::error::fixed(*x, 6),
            Value::Matrix(m) => {
                // Row by row, at most 8 rows and 8 columns shown.
                let (r, c) = m.shape();
                let pad = " ".repeat(width + 4);
                let rows: Vec<String> = (0..r.min(8))
                    .map(|i| {
                        let xs: Vec<String> = (0..c.min(8))
                            .map(|j| format!("{:>8}", crate::error::fixed(m[(i, j)], 4)))
                            .collect();
                        format!("{pad}[{}{}]", xs.join(" "), if c > 8 { " …" } else { "" })
                    })
                    .collect();
                let more = if r > 8 || c > 8 {
                    format!("\n{pad}(the first 8 rows and columns; the JSON output has all)")
                } else {
                    String::new()
                };
                s.push_str(&format!(
                    "  {}  matrix[{r}, {c}]  ({tag})\n{}{more}\n",
                    crate::error::pad_right(&h.name, width),
                    rows.join("\n")
                ));
                continue;
            }
            other => {
                let xs: Vec<String> = other
                    .flatten()
                    .iter()
                    .map(|x| crate::error::fixed(*x, 4))
                    .collect();
                format!("[{}]", xs.join(", "))
            }
        };
        s.push_str(&format!(
            "  {}  {text:<14}  ({tag})\n",
            crate::error::pad_right(&h.name, width)
        ));
    }
    s
}
