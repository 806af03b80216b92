//! The signal windows `HannWindow`, `HammingWindow` and `BlackmanWindow`: a 1-D tensor of
//! `size` values (a scalar input), periodic (the default: the window of `size + 1` points
//! without its last) or symmetric, of type `output_datatype` (float by default). The values
//! are computed in `f64` as the ONNX reference does, then converted.

use std::f64::consts::PI;

use super::check_inputs;
use crate::cpu::binary::check_opset;
use crate::cpu::shape::cast::cast_tensor;
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input};
use crate::{DType, Tensor};

/// Which window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    /// `sin²(πn / N)`.
    Hann,
    /// `α - β cos(2πn / N)` with `α = 25/46`, `β = 1 - α`.
    Hamming,
    /// `0.42 - 0.5 cos(2πn / N) + 0.08 cos(4πn / N)`.
    Blackman,
}

/// A window kernel.
#[derive(Debug)]
pub struct WindowKernel {
    window: Window,
    periodic: bool,
    dtype: DType,
}

/// Builds a window kernel.
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    check_opset(spec, 17)?;
    spec.attrs.only(&["output_datatype", "periodic"])?;
    check_inputs(spec, 1)?;
    let window = match spec.op_type {
        "HannWindow" => Window::Hann,
        "HammingWindow" => Window::Hamming,
        _ => Window::Blackman,
    };
    let code = spec.attrs.int("output_datatype", 1)?;
    let dtype = i32::try_from(code)
        .ok()
        .and_then(DType::from_onnx)
        .filter(|d| d.is_float() || d.is_int())
        .ok_or_else(|| KernelError::BadAttribute {
            name: "output_datatype".into(),
            reason: format!("{code} is not a numeric element type"),
        })?;
    Ok(Box::new(WindowKernel {
        window,
        periodic: spec.attrs.flag("periodic", true)?,
        dtype,
    }))
}

impl Kernel for WindowKernel {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let size = match input(inputs, 0)?.to_i64_vec()?.as_slice() {
            [s] => crate::limits::dim(*s, "the window size")?,
            _ => {
                return Err(KernelError::Shape(
                    "the window size must be a scalar".into(),
                ));
            }
        };
        let size = crate::limits::checked_elements(&[size], 8)?;
        let n = if self.periodic {
            size
        } else {
            size.saturating_sub(1)
        } as f64;
        let values: Vec<f64> = (0..size)
            .map(|i| {
                let i = i as f64;
                match self.window {
                    Window::Hann => (i * PI / n).sin().powi(2),
                    Window::Hamming => {
                        let alpha = 25.0 / 46.0;
                        alpha - (i * PI * 2.0 / n).cos() * (1.0 - alpha)
                    }
                    Window::Blackman => {
                        0.42 - 0.5 * (i * PI * 2.0 / n).cos() + 0.08 * (i * PI * 4.0 / n).cos()
                    }
                }
            })
            .collect();
        let t = Tensor::from_shape_vec(&[size], values)?;
        Ok(vec![cast_tensor(&t, self.dtype)?])
    }
}
