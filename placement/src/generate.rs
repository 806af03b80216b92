//! Generators.
