//! Inference engines and their settings.

pub mod settings;
