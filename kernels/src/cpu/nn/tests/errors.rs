//! Bad attributes, ranks, channels and dtypes give typed errors, never panics.

use super::run_op;
use crate::error::KernelError;
use crate::{AttrValue, Attributes, Tensor};

fn t(shape: &[usize]) -> Tensor {
    Tensor::from_shape_vec(shape, vec![1.0f32; shape.iter().product()]).unwrap()
}
