//! The commands of the `spillway` binary.

pub mod devices;
pub mod inputs;
pub mod outputs;
pub mod profile;
pub mod run;
pub mod schedule;
