//! `IsInf` and `IsNaN`: boolean masks of a float tensor's infinities and NaNs.

use half::{bf16, f16};
use ndarray::ArcArray;

use super::check_inputs;
use crate::Tensor;
use crate::cpu::binary::broadcast::unary_map;
use crate::cpu::binary::check_opset;
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input};

/// `IsInf` (with which signs it detects) or `IsNaN`.
#[derive(Debug)]
pub struct ClassifyKernel {
    /// `None` for `IsNaN`; for `IsInf`, whether it detects -inf and +inf.
    inf: Option<(bool, bool)>,
}

/// Builds `IsInf` or `IsNaN`.
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    check_inputs(spec, 1)?;
    let inf = if spec.op_type == "IsInf" {
        check_opset(spec, 10)?;
        spec.attrs.only(&["detect_negative", "detect_positive"])?;
        Some((
            spec.attrs.flag("detect_negative", true)?,
            spec.attrs.flag("detect_positive", true)?,
        ))
    } else {
        check_opset(spec, 9)?;
        spec.attrs.only(&[])?;
        None
    };
    Ok(Box::new(ClassifyKernel { inf }))
}

impl ClassifyKernel {
    fn mask<T: Clone + Sync>(
        &self,
        a: &ArcArray<T, ndarray::IxDyn>,
        wide: impl Fn(&T) -> f64 + Sync,
    ) -> Tensor {
        let out = match self.inf {
            None => unary_map(&a.view(), |v: &T| wide(v).is_nan()),
            Some((neg, pos)) => unary_map(&a.view(), |v: &T| {
                let v = wide(v);
                (neg && v == f64::NEG_INFINITY) || (pos && v == f64::INFINITY)
            }),
        };
        Tensor::from(out)
    }
}

impl Kernel for ClassifyKernel {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        let out = match x {
            Tensor::F32(a) => self.mask(a, |&v| f64::from(v)),
            Tensor::F64(a) => self.mask(a, |&v| v),
            Tensor::F16(a) => self.mask(a, |&v| f64::from(f16::to_f32(v))),
            Tensor::BF16(a) => self.mask(a, |&v| f64::from(bf16::to_f32(v))),
            other => {
                return Err(KernelError::UnsupportedDType {
                    index: 0,
                    dtype: other.dtype(),
                });
            }
        };
        Ok(vec![out])
    }
}
