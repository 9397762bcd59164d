//! The compiler of model-file kernels and likelihoods to programs
//! ([`tempest_model::program`], the instruction set and its evaluation and
//! reverse passes), and the ODE systems' own multi-output programs
//! ([`SystemProgram`]).
//!
//! A kernel whose parameters are all numbers is compiled once, at
//! lowering ([`compile_kernel`]); one with vector parameters at its first
//! evaluation, for its parameters' lengths ([`ShapedPrograms`]), its
//! vectors unrolled (`compiler`). Bodies outside what the compiler covers
//! (reductions other than `sum`, `mean`, `dot` and `sqdist`, indices that
//! are not constants, the inputs used element-wise with no vector of
//! known length to fix theirs) keep the general evaluator.

mod compiler;
mod system;

pub use compiler::MAX_INSTS;

pub use system::SystemProgram;
pub use tempest_model::program::{BlockRows, Inst, KernelProgram, Prepared, Side};

use super::graph::Function;
use std::sync::{Arc, Mutex};

/// Compile a kernel definition whose parameters are all numbers, or
/// `None` when its body is outside what programs cover (see the module
/// documentation). Run once, at lowering.
pub fn compile_kernel(f: &Function) -> Option<KernelProgram> {
    compiler::compile(f, &vec![None; f.params.len().checked_sub(2)?], true)
}

/// Compile a kernel definition for parameters of these lengths (`None`
/// for a number, `Some(L)` for a vector of L), one per parameter before
/// the two inputs: the program takes the parameters' elements in order
/// as its scalar parameters. `None` when the body is outside what
/// programs cover.
pub fn compile_kernel_for(f: &Function, lens: &[Option<usize>]) -> Option<KernelProgram> {
    if f.params.len() != lens.len() + 2 {
        return None;
    }
    compiler::compile(f, lens, true)
}

/// Compile a likelihood definition as a program over all its
/// parameters (the outcome first) and no inputs, or `None` when its
/// body is outside what programs cover. [`KernelProgram::value_grad`]
/// gives its value and derivatives by one reverse pass.
pub fn compile_likelihood(f: &Function) -> Option<KernelProgram> {
    compiler::compile(f, &vec![None; f.params.len()], false)
}

/// The most parameter shapes of one kernel whose programs are kept.
const SHAPES_KEPT: usize = 16;

/// A kernel's programs for the lengths of its vector parameters, compiled
/// at the first evaluation with those lengths and kept (a model uses a
/// kernel with one or a few shapes; clones share the store).
#[derive(Clone, Default)]
pub struct ShapedPrograms(ShapeStore);

type ShapeStore = Arc<Mutex<Vec<(Vec<Option<usize>>, Option<Arc<KernelProgram>>)>>>;

impl ShapedPrograms {
    /// The program of kernel `f` for parameters of lengths `lens`
    /// ([`compile_kernel_for`]), compiled once per shape (beyond
    /// [`SHAPES_KEPT`] shapes, compiled without being kept).
    pub fn get(&self, f: &Function, lens: &[Option<usize>]) -> Option<Arc<KernelProgram>> {
        let mut kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, p)) = kept.iter().find(|(l, _)| l.as_slice() == lens) {
            return p.clone();
        }
        let p = compile_kernel_for(f, lens).map(Arc::new);
        if kept.len() < SHAPES_KEPT {
            kept.push((lens.to_vec(), p.clone()));
        }
        p
    }
}
