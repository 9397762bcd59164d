//! The ground floor of tempest: the one error type ([`error::Error`]),
//! source spans ([`span::Span`]), the limits on what input may ask for
//! ([`limits`]) and the stop flag a run polls ([`interrupt::StopFlag`]).
//! Every other crate of the workspace builds on these and this crate
//! imports none of them.

#![warn(missing_docs)]

pub mod error;
pub mod interrupt;
pub mod limits;
pub mod span;
