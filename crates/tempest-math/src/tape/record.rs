//! Recording: each operation computes its value and keeps its operands.

use super::op::{Op, Unary};
use super::{Tape, Var};
use crate::linalg::{cholesky_jitter, matmul};
use nalgebra::DMatrix;
use tempest_core::error::Error;

/// The shape of an element-wise result of operands shaped `a` and `b`:
/// each dimension equal, or 1 in one of them (broadcast).
pub(super) fn broadcast(a: (usize, usize), b: (usize, usize)) -> Option<(usize, usize)> {
    let dim = |x: usize, y: usize| match (x, y) {
        _ if x == y => Some(x),
        (1, _) => Some(y),
        (_, 1) => Some(x),
        _ => None,
    };
    Some((dim(a.0, b.0)?, dim(a.1, b.1)?))
}

/// Entry (i, j) of `m`, read through broadcasting.
#[inline]
pub(super) fn at(m: &DMatrix<f64>, i: usize, j: usize) -> f64 {
    let (r, c) = m.shape();
    m[(if r == 1 { 0 } else { i }, if c == 1 { 0 } else { j })]
}

fn shape_error(what: &str, a: (usize, usize), b: (usize, usize)) -> Error {
    Error::internal(format!("tape: {what} of shapes {a:?} and {b:?} do not fit"))
}

impl Tape {
    fn zip(
        &mut self,
        a: Var,
        b: Var,
        what: &str,
        f: impl Fn(f64, f64) -> f64,
        op: Op,
    ) -> Result<Var, Error> {
        self.check(&[a, b])?;
        let (x, y) = (self.value(a), self.value(b));
        let (r, c) = broadcast(x.shape(), y.shape())
            .ok_or_else(|| shape_error(what, x.shape(), y.shape()))?;
        let v = DMatrix::from_fn(r, c, |i, j| f(at(x, i, j), at(y, i, j)));
        Ok(self.record(v, op))
    }

    /// A + B element-wise; a [1, n], [m, 1] or [1, 1] operand is broadcast.
    pub fn add(&mut self, a: Var, b: Var) -> Result<Var, Error> {
        self.zip(a, b, "a sum", |x, y| x + y, Op::Add(a, b))
    }

    /// A − B element-wise, broadcasting as [`Tape::add`].
    pub fn sub(&mut self, a: Var, b: Var) -> Result<Var, Error> {
        self.zip(a, b, "a difference", |x, y| x - y, Op::Sub(a, b))
    }

    /// A ∘ B element-wise, broadcasting as [`Tape::add`].
    pub fn mul(&mut self, a: Var, b: Var) -> Result<Var, Error> {
        self.zip(a, b, "a product", |x, y| x * y, Op::Mul(a, b))
    }

    /// A ⊘ B element-wise, broadcasting as [`Tape::add`].
    pub fn div(&mut self, a: Var, b: Var) -> Result<Var, Error> {
        self.zip(a, b, "a quotient", |x, y| x / y, Op::Div(a, b))
    }

    /// c·A.
    pub fn scale(&mut self, a: Var, c: f64) -> Result<Var, Error> {
        self.check(&[a])?;
        let v = self.value(a) * c;
        Ok(self.record(v, Op::Scale(a, c)))
    }

    /// A + c for a constant c.
    pub fn shift(&mut self, a: Var, c: f64) -> Result<Var, Error> {
        self.check(&[a])?;
        let v = self.value(a).add_scalar(c);
        Ok(self.record(v, Op::Shift(a)))
    }

    /// f(A) element-wise.
    pub fn map(&mut self, a: Var, f: Unary) -> Result<Var, Error> {
        self.check(&[a])?;
        let v = self.value(a).map(|x| f.apply(x));
        Ok(self.record(v, Op::Map(a, f)))
    }

    /// op(A) op(B), where op transposes when its flag is set.
    pub fn matmul(&mut self, a: Var, ta: bool, b: Var, tb: bool) -> Result<Var, Error> {
        self.check(&[a, b])?;
        let (x, y) = (self.value(a), self.value(b));
        let inner_a = if ta { x.nrows() } else { x.ncols() };
        let inner_b = if tb { y.ncols() } else { y.nrows() };
        if inner_a != inner_b {
            return Err(shape_error("a matrix product", x.shape(), y.shape()));
        }
        let v = matmul(x, ta, y, tb);
        Ok(self.record(v, Op::MatMul(a, ta, b, tb)))
    }

    /// Aᵀ.
    pub fn transpose(&mut self, a: Var) -> Result<Var, Error> {
        self.check(&[a])?;
        let v = self.value(a).transpose();
        Ok(self.record(v, Op::Transpose(a)))
    }

    /// Σᵢⱼ Aᵢⱼ as [1, 1].
    pub fn sum(&mut self, a: Var) -> Result<Var, Error> {
        self.check(&[a])?;
        let v = DMatrix::from_element(1, 1, self.value(a).sum());
        Ok(self.record(v, Op::Sum(a)))
    }

    /// The column sums of A [m, n] as [1, n].
    pub fn sum_rows(&mut self, a: Var) -> Result<Var, Error> {
        self.check(&[a])?;
        let v = self.value(a).row_sum();
        let v = DMatrix::from_row_slice(1, v.len(), v.as_slice());
        Ok(self.record(v, Op::SumRows(a)))
    }

    /// The row sums of A [m, n] as [m, 1].
    pub fn sum_cols(&mut self, a: Var) -> Result<Var, Error> {
        self.check(&[a])?;
        let v = self.value(a).column_sum();
        let v = DMatrix::from_column_slice(v.len(), 1, v.as_slice());
        Ok(self.record(v, Op::SumCols(a)))
    }

    /// Entries `off..off + rows·cols` of A (in column-major order) as a
    /// [rows, cols] matrix: a layer's weights out of one weight vector.
    pub fn part(&mut self, a: Var, off: usize, rows: usize, cols: usize) -> Result<Var, Error> {
        self.check(&[a])?;
        let x = self.value(a);
        let end = rows
            .checked_mul(cols)
            .and_then(|n| n.checked_add(off))
            .filter(|&e| e <= x.len())
            .ok_or_else(|| {
                Error::internal(format!(
                    "tape: entries {off}.. as [{rows}, {cols}] of a node of {} entries",
                    x.len()
                ))
            })?;
        let v = DMatrix::from_column_slice(rows, cols, &x.as_slice()[off..end]);
        Ok(self.record(v, Op::Part(a, off)))
    }

    /// The entries (row, column) of A, in the order given, as [k, 1].
    pub fn pick(&mut self, a: Var, entries: Vec<(usize, usize)>) -> Result<Var, Error> {
        self.check(&[a])?;
        let x = self.value(a);
        if let Some(&e) = entries
            .iter()
            .find(|&&(i, j)| i >= x.nrows() || j >= x.ncols())
        {
            return Err(Error::internal(format!(
                "tape: entry {e:?} of a node of shape {:?}",
                x.shape()
            )));
        }
        let v = DMatrix::from_iterator(entries.len(), 1, entries.iter().map(|&e| x[e]));
        Ok(self.record(v, Op::Pick(a, entries)))
    }

    /// The diagonal of a square A [n, n] as [n, 1].
    pub fn diag(&mut self, a: Var) -> Result<Var, Error> {
        self.check(&[a])?;
        let x = self.value(a);
        if !x.is_square() {
            return Err(shape_error("a diagonal", x.shape(), x.shape()));
        }
        let v = DMatrix::from_iterator(x.nrows(), 1, (0..x.nrows()).map(|i| x[(i, i)]));
        Ok(self.record(v, Op::Diag(a)))
    }

    /// The lower Cholesky factor L of a symmetric A [n, n], with jitter
    /// escalation (`cholesky_jitter` from 0 up to 1e-4 of the mean
    /// diagonal); `what` names A in the error when even that fails. The
    /// jitter is a constant: the adjoint is that of A's factor.
    pub fn cholesky(&mut self, a: Var, what: &str) -> Result<Var, Error> {
        self.cholesky_jitter(a, 0.0, 1e-4, what)
    }

    /// The lower Cholesky factor L of a symmetric A [n, n] by
    /// [`cholesky_jitter`] from jitter `initial` up to `max_rel` of the
    /// mean diagonal (`max_rel` = 0: `initial` alone, else the error);
    /// the jitter is a constant, as in [`Tape::cholesky`].
    pub fn cholesky_jitter(
        &mut self,
        a: Var,
        initial: f64,
        max_rel: f64,
        what: &str,
    ) -> Result<Var, Error> {
        self.check(&[a])?;
        let x = self.value(a);
        if !x.is_square() {
            return Err(shape_error("a Cholesky factor", x.shape(), x.shape()));
        }
        let l = cholesky_jitter(x, initial, max_rel, what)?.l();
        Ok(self.record(l, Op::Cholesky(a)))
    }

    /// L⁻¹ B for a lower-triangular L [n, n] and B [n, k].
    pub fn solve_lower(&mut self, l: Var, b: Var) -> Result<Var, Error> {
        self.solve(l, b, false)
    }

    /// L⁻ᵀ B for a lower-triangular L [n, n] and B [n, k].
    pub fn solve_lower_t(&mut self, l: Var, b: Var) -> Result<Var, Error> {
        self.solve(l, b, true)
    }

    fn solve(&mut self, l: Var, b: Var, transposed: bool) -> Result<Var, Error> {
        self.check(&[l, b])?;
        let (lv, bv) = (self.value(l), self.value(b));
        if !lv.is_square() || lv.nrows() != bv.nrows() {
            return Err(shape_error("a triangular solve", lv.shape(), bv.shape()));
        }
        let mut x = bv.clone();
        crate::linalg::solve_lower_in_place(lv, &mut x, transposed);
        Ok(self.record(x, Op::Solve(l, b, transposed)))
    }

    /// ln det(L Lᵀ) = 2 Σ ln Lᵢᵢ [1, 1] for a Cholesky factor L.
    pub fn log_det_chol(&mut self, l: Var) -> Result<Var, Error> {
        self.check(&[l])?;
        let x = self.value(l);
        if !x.is_square() {
            return Err(shape_error("a log-determinant", x.shape(), x.shape()));
        }
        let v: f64 = (0..x.nrows()).map(|i| 2.0 * x[(i, i)].ln()).sum();
        Ok(self.record(DMatrix::from_element(1, 1, v), Op::LogDetChol(l)))
    }

    /// Each row of A minus its log-sum-exp: the log-probabilities of a
    /// softmax over each row's entries.
    pub fn log_softmax_rows(&mut self, a: Var) -> Result<Var, Error> {
        self.check(&[a])?;
        let mut v = self.value(a).clone();
        for mut row in v.row_iter_mut() {
            let m = row.max();
            let lse = m + row.iter().map(|x| (x - m).exp()).sum::<f64>().ln();
            row.add_scalar_mut(-lse);
        }
        Ok(self.record(v, Op::LogSoftmaxRows(a)))
    }

    /// A node computed by the caller: `value` from `inputs`, with `vjp`
    /// giving the inputs' adjoints (one per input, each of its shape) from
    /// the node's adjoint (of `value`'s shape). For pieces with their own
    /// reverse pass, such as a kernel's Gram matrix.
    pub fn custom(
        &mut self,
        inputs: &[Var],
        value: DMatrix<f64>,
        vjp: impl Fn(&DMatrix<f64>) -> Result<Vec<DMatrix<f64>>, Error> + 'static,
    ) -> Result<Var, Error> {
        self.check(inputs)?;
        Ok(self.record(value, Op::Custom(inputs.to_vec(), Box::new(vjp))))
    }
}
