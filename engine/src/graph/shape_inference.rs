//! Shape and type inference.
