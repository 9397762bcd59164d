//! The integration tests, one binary: each file of this folder is a module,
//! those that run the `tempest` binary or draw figures only with the
//! features they need. (`alloc_free.rs` counts allocations with its own
//! global allocator and `golden.rs` keeps its snapshot names, so each is a
//! binary of its own.) One binary links the crate once, where one per file
//! took minutes of linking and gigabytes of disk.

mod common;

#[cfg(feature = "cli")]
mod chains;
#[cfg(all(feature = "cli", feature = "plot"))]
mod cli;
#[cfg(all(feature = "cli", feature = "plot"))]
mod cli_mcmc;
#[cfg(all(feature = "cli", feature = "plot"))]
mod cli_svi;
#[cfg(all(feature = "cli", feature = "plot"))]
mod cli_vi;
mod compile;
mod control_variates;
#[cfg(feature = "cli")]
mod custom_cli;
#[cfg(feature = "cli")]
mod data_prep;
mod density_program;
mod docs;
mod evidence;
mod features;
#[cfg(all(feature = "cli", feature = "plot"))]
mod fuzz;
mod gradients_reverse;
mod gram_vjp;
#[cfg(feature = "cli")]
mod hierarchical;
#[cfg(all(feature = "cli", feature = "plot"))]
mod hostile;
#[cfg(feature = "cli")]
mod hostile_mcmc;
#[cfg(feature = "cli")]
mod hostile_memory;
#[cfg(all(feature = "cli", feature = "plot"))]
mod hostile_results;
mod kernel_vectors;
mod kernels;
mod layers;
mod mcmc;
mod mcmc_density;
mod no_panic;
#[cfg(feature = "cli")]
mod ode;
#[cfg(feature = "cli")]
mod ode_adjoint;
#[cfg(all(feature = "cli", feature = "plot"))]
mod outputs;
mod pointwise;
#[cfg(all(feature = "cli", feature = "plot"))]
mod predictive;
#[cfg(feature = "cli")]
mod prior;
mod programs;
mod reference_exact;
#[cfg(feature = "cli")]
mod saved_fits;
mod seam;
#[cfg(feature = "cli")]
mod signals;
mod softmax;
mod svi;
mod tempered;
mod vi;
