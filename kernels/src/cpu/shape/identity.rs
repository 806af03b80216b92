//! Identity and inference-mode Dropout: the output is the input, shared.

use super::util::min_opset;
use crate::Tensor;
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input, opt_input};

/// Identity.
#[derive(Debug)]
pub struct Identity;

/// Builds [`Identity`].
pub fn build_identity(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    min_opset(spec, 1)?;
    spec.attrs.only(&[])?;
    Ok(Box::new(Identity))
}

impl Kernel for Identity {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        Ok(vec![input(inputs, 0)?.clone()])
    }
}

/// Dropout at inference: output = input, optional mask of ones (bool from opset 10,
/// the input's type before). Training mode is only accepted with ratio 0.
#[derive(Debug)]
pub struct Dropout {
    opset: i64,
    with_mask: bool,
}

/// Builds [`Dropout`].
pub fn build_dropout(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    min_opset(spec, 7)?;
    if spec.opset >= 12 {
        // `seed` only matters in training mode with a non-zero ratio, which is rejected.
        spec.attrs.only(&["seed"])?;
    } else {
        spec.attrs.only(&["ratio"])?;
    }
    Ok(Box::new(Dropout {
        opset: spec.opset,
        with_mask: spec.num_outputs > 1,
    }))
}

impl Kernel for Dropout {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        if self.opset >= 12 {
            for index in [1, 2] {
                if let Some(t) = opt_input(inputs, index)
                    && t.len() != 1
                {
                    return Err(KernelError::Shape(format!(
                        "input {index} must be a scalar, it has shape {:?}",
                        t.shape()
                    )));
                }
            }
            let training = match opt_input(inputs, 2) {
                Some(t) => match t {
                    Tensor::Bool(b) => b.iter().next().copied().unwrap_or(false),
                    other => {
                        return Err(KernelError::UnsupportedDType {
                            index: 2,
                            dtype: other.dtype(),
                        });
                    }
                },
                None => false,
            };
            let ratio = match opt_input(inputs, 1) {
                Some(r) => r.to_f64_vec()?.first().copied().unwrap_or(0.5),
                None => 0.5,
            };
            if !(0.0..1.0).contains(&ratio) {
                return Err(KernelError::InvalidValue(format!(
                    "ratio must be in [0, 1), got {ratio}"
                )));
            }
            if training && ratio != 0.0 {
                return Err(KernelError::InvalidValue(
                    "Dropout in training mode with a non-zero ratio is not supported (inference only)".into(),
                ));
            }
        }
        let mut out = vec![x.clone()];
        if self.with_mask {
            let mask = if self.opset >= 10 {
                Tensor::Bool(ndarray::ArcArray::from_elem(
                    ndarray::IxDyn(x.shape()),
                    true,
                ))
            } else {
                super::cast::cast_tensor(
                    &Tensor::Bool(ndarray::ArcArray::from_elem(
                        ndarray::IxDyn(x.shape()),
                        true,
                    )),
                    x.dtype(),
                )?
            };
            out.push(mask);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Attributes;

    #[test]
    fn dropout_passes_through_with_mask() {
        let attrs = Attributes::new();
        let spec = NodeSpec {
            op_type: "Dropout",
            domain: "",
            opset: 13,
            attrs: &attrs,
            num_inputs: 1,
            num_outputs: 2,
            options: Default::default(),
        };
        let x = Tensor::from_shape_vec(&[2], vec![1.0f32, 2.0]).unwrap();
        let out = build_dropout(&spec).unwrap().run(&[Some(&x)]).unwrap();
        let (Tensor::F32(a), Tensor::F32(b)) = (&x, &out[0]) else {
            panic!()
        };
        assert_eq!(a.as_ptr(), b.as_ptr());
        assert_eq!(
            out[1],
            Tensor::from_shape_vec(&[2], vec![true, true]).unwrap()
        );
        assert_eq!(out[1].dtype(), crate::DType::Bool);
        let r = Tensor::scalar(0.5f32);
        let t = Tensor::scalar(true);
        assert!(matches!(
            build_dropout(&spec)
                .unwrap()
                .run(&[Some(&x), Some(&r), Some(&t)]),
            Err(KernelError::InvalidValue(_))
        ));
        let r0 = Tensor::scalar(0.0f32);
        assert_eq!(
            build_dropout(&spec)
                .unwrap()
                .run(&[Some(&x), Some(&r0), Some(&t)])
                .unwrap()[0],
            x
        );
    }
}
