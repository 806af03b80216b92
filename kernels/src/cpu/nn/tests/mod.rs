//! Unit tests of the nn family against values from the onnx reference implementation.
