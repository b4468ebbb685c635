//! Running scenarios.

pub mod compare;
