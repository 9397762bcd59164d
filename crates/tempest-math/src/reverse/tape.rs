//! The calling thread's tape: one node per recorded operation, holding its
//! operands' nodes and the local partial derivatives, and the backward pass.

use super::scalar::Rev;
use std::cell::RefCell;

/// One operation: up to two operands, each with ∂(result)/∂(operand).
#[derive(Clone, Copy)]
struct Node {
    a: Option<(usize, f64)>,
    b: Option<(usize, f64)>,
}

thread_local! {
    static TAPE: RefCell<Vec<Node>> = const { RefCell::new(Vec::new()) };
}

/// Records a value with its operands' partials; returns it on the tape.
#[inline]
pub(super) fn push(v: f64, a: Option<(usize, f64)>, b: Option<(usize, f64)>) -> Rev {
    TAPE.with(|t| {
        let mut t = t.borrow_mut();
        t.push(Node { a, b });
        Rev::on_tape(v, t.len() - 1)
    })
}

/// A fresh input on the tape.
pub(super) fn variable(v: f64) -> Rev {
    push(v, None, None)
}

/// Empties the tape (its memory is kept for the next sweep).
pub(super) fn clear() {
    TAPE.with(|t| t.borrow_mut().clear());
}

/// The number of nodes on the tape.
pub(super) fn len() -> usize {
    TAPE.with(|t| t.borrow().len())
}

/// ∂out/∂(node k) for every node, by one pass from the last node back.
/// A zero adjoint passes nothing on (so an infinite partial times a zero
/// adjoint is 0, as forward mode takes it).
pub(super) fn adjoints(out: usize) -> Vec<f64> {
    TAPE.with(|t| {
        let t = t.borrow();
        let mut adj = vec![0.0; t.len()];
        adj[out] = 1.0;
        for k in (0..=out).rev() {
            let g = adj[k];
            if g == 0.0 {
                continue;
            }
            let n = t[k];
            for (i, d) in [n.a, n.b].into_iter().flatten() {
                // Operands come before their results (i < k).
                if d != 0.0
                    && let Some(a) = adj.get_mut(i)
                {
                    *a += g * d;
                }
            }
        }
        adj
    })
}
