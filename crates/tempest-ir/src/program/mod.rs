//! The compiler of model-file kernels and likelihoods to programs
//! ([`tempest_model::program`], the instruction set and its evaluation and
//! reverse passes), and the ODE systems' own multi-output programs
//! ([`SystemProgram`]).
//!
//! A kernel whose parameters are all numbers is compiled once, at
//! lowering ([`compile_kernel`]); one with vector parameters, or one that
//! uses its inputs element by element with no vector to fix their length,
//! at its first evaluation, for its parameters' lengths and the input
//! width binding saw at that use ([`ShapedPrograms`]), its vectors
//! unrolled (`compiler`). Bodies outside what the compiler covers
//! (reductions other than `sum`, `mean`, `logsumexp`, `dot` and `sqdist`,
//! indices that are not constants) keep the general evaluator.

mod compiler;
mod system;

pub use compiler::MAX_INSTS;

pub use system::SystemProgram;
pub use tempest_model::program::{BlockRows, Inst, KernelProgram, Prepared, Side};

use super::graph::Function;
use std::sync::{Arc, Mutex};
use tempest_core::span::Span;

/// Compile a kernel definition whose parameters are all numbers, or
/// `None` when its body is outside what programs cover (see the module
/// documentation). Run once, at lowering.
pub fn compile_kernel(f: &Function) -> Option<KernelProgram> {
    compiler::compile(f, &vec![None; f.params.len().checked_sub(2)?], true, None)
}

/// Compile a kernel definition for parameters of these lengths (`None`
/// for a number, `Some(L)` for a vector of L), one per parameter before
/// the two inputs: the program takes the parameters' elements in order
/// as its scalar parameters. `width`, when known, is the number of input
/// columns the kernel sees: a body that uses its inputs element by element
/// with no vector to fix their length is unrolled for it (the program then
/// requires inputs of that width, [`KernelProgram::input_len`]). `None`
/// when the body is outside what programs cover.
pub fn compile_kernel_for(
    f: &Function,
    lens: &[Option<usize>],
    width: Option<usize>,
) -> Option<KernelProgram> {
    if f.params.len() != lens.len() + 2 {
        return None;
    }
    compiler::compile(f, lens, true, width)
}

/// Compile a likelihood definition as a program over all its
/// parameters (the outcome first) and no inputs, or `None` when its
/// body is outside what programs cover. [`KernelProgram::value_grad`]
/// gives its value and derivatives by one reverse pass.
pub fn compile_likelihood(f: &Function) -> Option<KernelProgram> {
    compiler::compile(f, &vec![None; f.params.len()], false, None)
}

/// The most parameter shapes of one kernel whose programs are kept.
const SHAPES_KEPT: usize = 16;

/// The most places of use of one kernel whose input widths are noted.
const PLACES_KEPT: usize = 256;

/// A kernel's programs for the lengths of its vector parameters and the
/// input width of its use, compiled at the first evaluation with that
/// shape and kept (a model uses a kernel with one or a few shapes; clones
/// share the store); and the input width binding saw at each place the
/// kernel is used ([`ShapedPrograms::note_width`]).
#[derive(Clone, Default)]
pub struct ShapedPrograms(Arc<Mutex<ShapeStore>>);

/// A program (or `None`: outside the compiler) for parameter lengths and
/// an input width.
type Shaped = (
    Vec<Option<usize>>,
    Option<usize>,
    Option<Arc<KernelProgram>>,
);

/// A program per (parameter lengths, input width), and each use's width.
#[derive(Default)]
struct ShapeStore {
    programs: Vec<Shaped>,
    /// Per place of use: its input width, `None` once two widths were seen
    /// there (a kernel shared by latent functions on inputs of different
    /// widths keeps the general evaluator at that place).
    widths: Vec<(Span, Option<usize>)>,
}

impl ShapedPrograms {
    /// The program of kernel `f` used at `at` for parameters of lengths
    /// `lens` ([`compile_kernel_for`], with the width noted for `at`),
    /// compiled once per shape (beyond 16 shapes, compiled
    /// without being kept).
    pub fn get(
        &self,
        f: &Function,
        lens: &[Option<usize>],
        at: Span,
    ) -> Option<Arc<KernelProgram>> {
        let mut kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let width = kept
            .widths
            .iter()
            .find(|(s, _)| *s == at)
            .and_then(|(_, w)| *w);
        if let Some((_, _, p)) = kept
            .programs
            .iter()
            .find(|(l, w, _)| l.as_slice() == lens && *w == width)
        {
            return p.clone();
        }
        let p = compile_kernel_for(f, lens, width).map(Arc::new);
        if kept.programs.len() < SHAPES_KEPT {
            kept.programs.push((lens.to_vec(), width, p.clone()));
        }
        p
    }

    /// Binding saw the kernel used at `at` on inputs of `width` columns
    /// (after its `dims`). At most 256 places are noted (a
    /// place beyond them is left to the general evaluator when its body
    /// needs the width).
    pub fn note_width(&self, at: Span, width: usize) {
        let mut kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let full = kept.widths.len() >= PLACES_KEPT;
        match kept.widths.iter_mut().find(|(s, _)| *s == at) {
            Some((_, w)) if *w != Some(width) => *w = None,
            Some(_) => {}
            None if !full => kept.widths.push((at, Some(width))),
            None => {}
        }
    }
}
