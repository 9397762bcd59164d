//! Reverse mode at the matrix level: hand-written vector–Jacobian products
//! (adjoint rules) for the dense linear algebra of the GP engines, in `f64`
//! over nalgebra matrices.
//!
//! Each rule takes the adjoint ȳ = ∂f/∂y of a node's output y for some
//! scalar f and returns the adjoints of the node's inputs, so that
//! ⟨ȳ, dy⟩ = Σ ⟨x̄ᵢ, dxᵢ⟩ for every perturbation of the inputs. Scalar
//! functions (kernel entries, likelihood terms) stay in forward-mode autodiff;
//! these rules carry adjoints between them through Cholesky factors, solves,
//! log-determinants and products, so a gradient costs a small multiple of
//! one evaluation whatever the number of parameters.
//!
//! Conventions: A is symmetric [N, N] and its adjoint Ā is returned
//! symmetric (the gradient for symmetric perturbations dA); L is lower
//! triangular [N, N] and L̄ is lower triangular; ⟨X, Y⟩ = Σᵢⱼ Xᵢⱼ Yᵢⱼ.
//! Every rule is checked against central finite differences in its tests.

pub mod cholesky;
pub mod gaussian;
mod inverse;
pub mod logdet;
pub mod product;
pub mod triangular;

#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use cholesky::cholesky_vjp;
pub use gaussian::{gaussian_lml_vjp, quad_form, quad_form_vjp};
pub use inverse::{
    LmlWeight, PAR_INVERSE_MIN, SWEEP_COLUMNS, Strided, UpperColumns, inverse, lml_weight,
};
pub use logdet::{log_det_factor_vjp, log_det_vjp};
pub use product::{lower_matvec_vjp_l_add, matmul_vjp_a, matmul_vjp_b, matvec_vjp_a, matvec_vjp_v};
pub use triangular::{solve_lower_t_vjp, solve_lower_vjp};
