//! Clip: bounds as attributes (opset 6) or as optional scalar inputs (opset 11+,
//! integer types from opset 12). `min(max(x, lo), hi)` like `numpy.clip`; NaN stays NaN.

use ndarray::{ArrayD, ArrayViewD};

use crate::cpu::binary::broadcast::unary_map;
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, input, opt_input};
use crate::{Element, Tensor, dispatch_numeric};

/// The Clip kernel.
#[derive(Debug)]
pub struct ClipKernel {
    /// Opset-6 attribute bounds; `None` means the bounds come from inputs 1 and 2.
    pub attr_bounds: Option<(f32, f32)>,
}

fn clip<T: Copy + PartialOrd + Send + Sync + 'static>(
    a: &ArrayViewD<'_, T>,
    lo: Option<T>,
    hi: Option<T>,
) -> ArrayD<T> {
    match (lo, hi) {
        (Some(lo), Some(hi)) => unary_map(a, move |&x: &T| {
            let v = if x < lo { lo } else { x };
            if v > hi { hi } else { v }
        }),
        (Some(lo), None) => unary_map(a, move |&x: &T| if x < lo { lo } else { x }),
        (None, Some(hi)) => unary_map(a, move |&x: &T| if x > hi { hi } else { x }),
        (None, None) => a.to_owned(),
    }
}

/// Reads an optional scalar bound of type `T` from input `index`.
fn bound<T: Element + Copy>(inputs: &[Option<&Tensor>], index: usize) -> Result<Option<T>> {
    let Some(t) = opt_input(inputs, index) else {
        return Ok(None);
    };
    let v = t.view::<T>()?;
    if v.len() != 1 {
        return Err(KernelError::Shape(format!(
            "Clip bound (input {index}) must be a scalar, got shape {:?}",
            t.shape()
        )));
    }
    Ok(v.iter().next().copied())
}

impl Kernel for ClipKernel {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        let out = if let Some((lo, hi)) = self.attr_bounds {
            match x {
                Tensor::F32(a) => Tensor::from(clip(&a.view(), Some(lo), Some(hi))),
                Tensor::F64(a) => Tensor::from(clip(&a.view(), Some(lo as f64), Some(hi as f64))),
                Tensor::F16(a) => Tensor::from(clip(
                    &a.view(),
                    Some(half::f16::from_f32(lo)),
                    Some(half::f16::from_f32(hi)),
                )),
                other => {
                    return Err(KernelError::UnsupportedDType {
                        index: 0,
                        dtype: other.dtype(),
                    });
                }
            }
        } else {
            dispatch_numeric!(x, a => Tensor::from(clip(&a.view(), bound(inputs, 1)?, bound(inputs, 2)?)),
                other => return Err(KernelError::UnsupportedDType { index: 0, dtype: other.dtype() }))
        };
        Ok(vec![out])
    }
}
