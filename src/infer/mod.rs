//! Inference engines, their settings, the executor that drives them, and
//! their results.

pub mod band;
pub mod engine;
pub mod evidence;
pub mod exact;
pub mod finite;
pub mod fit;
pub mod gradients;
pub mod hyper_prior;
pub mod hypers;
pub mod mcmc;
pub mod planned;
pub mod registry;
pub mod saved;
pub mod saved_json;
pub mod seam;
pub mod settings;
pub mod sink;
pub mod structure;
pub mod svi;
pub mod vi;
