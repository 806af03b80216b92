//! Squeeze and Unsqueeze: remove or insert size-1 axes (axes attribute before
//! opset 13, input from 13). Outputs share the input's storage when contiguous.

use super::util::{min_opset, norm_axes, opt_ints};
use crate::Tensor;
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input, opt_input};

/// Squeeze or Unsqueeze.
#[derive(Debug)]
pub struct Squeeze {
    unsqueeze: bool,
    /// `Some` before opset 13 (attribute), `None` when the axes come as input 1.
    attr_axes: Option<Option<Vec<i64>>>,
}

/// Builds [`Squeeze`] for `Squeeze` or `Unsqueeze`.
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    min_opset(spec, 1)?;
    let unsqueeze = spec.op_type == "Unsqueeze";
    let attr_axes = if spec.opset >= 13 {
        spec.attrs.only(&[])?;
        None
    } else {
        spec.attrs.only(&["axes"])?;
        Some(spec.attrs.opt_ints("axes")?)
    };
    Ok(Box::new(Squeeze {
        unsqueeze,
        attr_axes,
    }))
}

impl Kernel for Squeeze {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        let axes = match &self.attr_axes {
            Some(a) => a.clone(),
            None => opt_ints(opt_input(inputs, 1))?,
        };
        // Squeeze's empty axes (attribute or input) are no axes given: every 1 goes, as ORT
        // reads them in every opset and onnx.reference before opset 13 (Unsqueeze of none
        // inserts nothing).
        let axes = axes.filter(|a| self.unsqueeze || !a.is_empty());
        let shape = if self.unsqueeze {
            let axes = axes.ok_or_else(|| KernelError::Arity("Unsqueeze needs axes".into()))?;
            unsqueezed(x.shape(), &axes)?
        } else {
            squeezed(x.shape(), axes.as_deref())?
        };
        Ok(vec![x.reshaped(&shape)?])
    }
}

fn squeezed(shape: &[usize], axes: Option<&[i64]>) -> Result<Vec<usize>> {
    match axes {
        None => Ok(shape.iter().copied().filter(|&d| d != 1).collect()),
        Some(axes) => {
            let axes = norm_axes(axes, shape.len())?;
            if let Some(&a) = axes.iter().find(|&&a| shape[a] != 1) {
                return Err(KernelError::Shape(format!(
                    "cannot squeeze axis {a} of size {} in {shape:?}",
                    shape[a]
                )));
            }
            Ok(shape
                .iter()
                .enumerate()
                .filter(|(i, _)| !axes.contains(i))
                .map(|(_, &d)| d)
                .collect())
        }
    }
}

fn unsqueezed(shape: &[usize], axes: &[i64]) -> Result<Vec<usize>> {
    let rank = shape.len() + axes.len();
    let axes = norm_axes(axes, rank)?;
    let mut rest = shape.iter();
    Ok((0..rank)
        .map(|i| {
            if axes.contains(&i) {
                1
            } else {
                *rest.next().unwrap_or(&1)
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AttrValue, Attributes};

    fn spec<'a>(
        op_type: &'a str,
        opset: i64,
        attrs: &'a Attributes,
        inputs: usize,
    ) -> NodeSpec<'a> {
        NodeSpec {
            op_type,
            domain: "",
            opset,
            attrs,
            num_inputs: inputs,
            num_outputs: 1,
            options: Default::default(),
        }
    }

    #[test]
    fn shapes() {
        // numpy: np.expand_dims(np.zeros((3,4,5)), (2,0)).shape == (1,3,1,4,5)
        assert_eq!(
            unsqueezed(&[3, 4, 5], &[2, 0]).unwrap(),
            vec![1, 3, 1, 4, 5]
        );
        assert_eq!(unsqueezed(&[3, 4, 5], &[-1]).unwrap(), vec![3, 4, 5, 1]);
        assert!(unsqueezed(&[3], &[0, 0]).is_err());
        assert_eq!(squeezed(&[1, 3, 1, 5], None).unwrap(), vec![3, 5]);
        assert_eq!(squeezed(&[1, 3, 1, 5], Some(&[-2])).unwrap(), vec![1, 3, 5]);
        assert!(matches!(
            squeezed(&[1, 3], Some(&[1])),
            Err(KernelError::Shape(_))
        ));
    }

    #[test]
    fn opset11_attr_and_sharing() {
        let attrs = Attributes::new().with("axes", AttrValue::Ints(vec![0]));
        let spec = spec("Unsqueeze", 11, &attrs, 1);
        let x = Tensor::from_shape_vec(&[2], vec![1i32, 2]).unwrap();
        let out = build(&spec).unwrap().run(&[Some(&x)]).unwrap().remove(0);
        assert_eq!(out.shape(), &[1, 2]);
        let (Tensor::I32(a), Tensor::I32(b)) = (&x, &out) else {
            panic!()
        };
        assert_eq!(a.as_ptr(), b.as_ptr());
    }

    /// An empty `axes` attribute (opset 11) squeezes every 1, as onnx.reference and ORT read
    /// it (the differential fuzzer's seed 27404: `[3, 1, 1, 1]` kept its ones), and so does an
    /// empty `axes` input (opset 13, as ORT reads it: seeds 30648, 32953).
    #[test]
    fn empty_axes_attribute_squeezes_every_one() {
        let attrs = Attributes::new().with("axes", AttrValue::Ints(vec![]));
        let spec11 = spec("Squeeze", 11, &attrs, 1);
        let x = Tensor::from_shape_vec(&[3, 1, 1, 1], vec![true, false, true]).unwrap();
        let out = build(&spec11).unwrap().run(&[Some(&x)]).unwrap().remove(0);
        assert_eq!(out.shape(), &[3]);
        let none = Tensor::from_shape_vec(&[0], Vec::<i64>::new()).unwrap();
        let no_attrs = Attributes::new();
        let spec13 = spec("Squeeze", 13, &no_attrs, 2);
        let out = build(&spec13)
            .unwrap()
            .run(&[Some(&x), Some(&none)])
            .unwrap();
        assert_eq!(out[0].shape(), &[3]);
        // Unsqueeze with no axes inserts nothing (the fuzzer's seed 24044).
        let unsqueeze = spec("Unsqueeze", 11, &attrs, 1);
        let out = build(&unsqueeze)
            .unwrap()
            .run(&[Some(&x)])
            .unwrap()
            .remove(0);
        assert_eq!(out.shape(), &[3, 1, 1, 1]);
    }
}
