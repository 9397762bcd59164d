//! The Gram node's reverse pass: K̄ → (θ̄, X̄) for K = K(X, X; θ), and
//! K̄ → (θ̄, X̄, Z̄) for a cross-covariance K(X, Z; θ), for built-in kernels,
//! kernel algebra and compiled model-file kernels.
//!
//! It contracts K̄ (from the matrix-level rules of [`tempest_math::adjoint`])
//! with one reverse pass per entry: [`KernelValue::entry_grad`] for the
//! parameters and [`KernelValue::entry_vjp_inputs`] for the two input
//! points, so gradients with respect to inputs (inducing points, learned
//! features) cost a small multiple of one Gram evaluation whatever D and
//! the number of parameters. This is the entry-by-entry path; the column
//! blocks of [`crate::block`] give θ̄ alone, faster. For radial
//! kernels (entries a function of ‖x − z‖²) the input adjoints are two
//! matrix products instead (`radial.rs`), and for a compiled model-file
//! kernel (c · k, k a program) blocks of entries at a time (`compiled.rs`). [`record_gram`] puts the Gram
//! node on the matrix tape ([`tempest_math::tape`]), with this pass as its
//! backward rule.
//!
//! [`KernelValue::entry_grad`]: crate::kernel::KernelValue::entry_grad
//! [`KernelValue::entry_vjp_inputs`]: crate::kernel::KernelValue::entry_vjp_inputs

mod compiled;
mod entry;
mod node;
mod radial;
mod tape;

pub use node::{CrossAdjoints, GramAdjoints, cross_vjp, cross_vjp_with, gram_vjp, gram_vjp_with};
pub use tape::{record_cross, record_gram};
