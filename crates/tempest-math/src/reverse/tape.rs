//! The calling thread's tape: one node per recorded operation, holding its
//! operands' nodes and the local partial derivatives, and the backward pass.
//!
//! A node may also be an entry of a node of a matrix tape
//! ([`crate::tape::Tape::entries`]): a bridge, whose adjoint the backward
//! pass hands to that matrix node instead of to scalar operands.

use super::scalar::Rev;
use std::cell::RefCell;

/// One operation: up to two operands, each with ∂(result)/∂(operand).
#[derive(Clone, Copy)]
struct Node {
    a: Option<(usize, f64)>,
    b: Option<(usize, f64)>,
}

/// A scalar node that is entry `entry` of the matrix tape's node `var`.
#[derive(Clone, Copy)]
struct Bridge {
    node: usize,
    var: usize,
    entry: usize,
}

thread_local! {
    static TAPE: RefCell<Vec<Node>> = const { RefCell::new(Vec::new()) };
    /// The bridges, in the order of their nodes.
    static BRIDGES: RefCell<Vec<Bridge>> = const { RefCell::new(Vec::new()) };
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

/// A fresh node standing for entry `entry` of the matrix tape's node `var`.
pub(crate) fn bridge(v: f64, var: usize, entry: usize) -> Rev {
    let r = variable(v);
    if let Some(node) = r.node() {
        BRIDGES.with(|b| b.borrow_mut().push(Bridge { node, var, entry }));
    }
    r
}

/// An outer sweep's operations and bridges, set aside while a sweep
/// opened inside it runs.
pub(super) struct Saved {
    nodes: Vec<Node>,
    bridges: Vec<Bridge>,
}

/// Takes the open sweep's operations off the thread's tape (leaving it
/// empty) for [`restore`].
pub(super) fn set_aside() -> Saved {
    Saved {
        nodes: TAPE.with(|t| std::mem::take(&mut *t.borrow_mut())),
        bridges: BRIDGES.with(|b| std::mem::take(&mut *b.borrow_mut())),
    }
}

/// Puts operations set aside back on the thread's tape, in place of what
/// is there.
pub(super) fn restore(saved: Saved) {
    TAPE.with(|t| *t.borrow_mut() = saved.nodes);
    BRIDGES.with(|b| *b.borrow_mut() = saved.bridges);
}

/// Empties the tape (its memory is kept for the next sweep).
pub(super) fn clear() {
    TAPE.with(|t| t.borrow_mut().clear());
    BRIDGES.with(|b| b.borrow_mut().clear());
}

/// The number of nodes on the tape.
pub(super) fn len() -> usize {
    TAPE.with(|t| t.borrow().len())
}

/// ∂out/∂(node k) for every node, by one pass from the last node back.
/// A zero adjoint passes nothing on (so an infinite partial times a zero
/// adjoint is 0, as forward mode takes it).
/// Also says whether an adjoint reached an entry of a matrix tape's node
/// ([`crate::tape::Tape::entries`]), which only that tape's backward pass
/// carries further.
pub(super) fn adjoints(out: usize) -> (Vec<f64>, bool) {
    let mut adj = vec![0.0; len()];
    adj[out] = 1.0;
    let mut bridged = false;
    segment(&mut adj, 0, out + 1, |_, _, _| bridged = true);
    (adj, bridged)
}

/// The backward pass over nodes `lo..hi` only, last first, with the
/// adjoints `adj` (one per node, at least `hi`): each node adds into its
/// operands' adjoints, and a bridge's adjoint goes to `to_matrix(var,
/// entry, adjoint)`. The matrix tape runs its backward pass in such
/// segments, between its own nodes, so both kinds of node are visited in
/// the reverse of the order they were recorded in.
pub(crate) fn segment(
    adj: &mut [f64],
    lo: usize,
    hi: usize,
    mut to_matrix: impl FnMut(usize, usize, f64),
) {
    TAPE.with(|t| {
        let t = t.borrow();
        BRIDGES.with(|b| {
            let bridges = b.borrow();
            // The bridges in lo..hi, visited from the last.
            let mut cursor = bridges.partition_point(|x| x.node < hi);
            let hi = hi.min(t.len()).min(adj.len());
            for k in (lo..hi).rev() {
                let g = adj[k];
                while cursor > 0 && bridges[cursor - 1].node > k {
                    cursor -= 1;
                }
                if cursor > 0 && bridges[cursor - 1].node == k {
                    cursor -= 1;
                    if g != 0.0 {
                        let x = bridges[cursor];
                        to_matrix(x.var, x.entry, g);
                    }
                    continue;
                }
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
        })
    })
}
