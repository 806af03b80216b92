//! Constant and ConstantOfShape.

use super::util::{min_opset, to_dims};
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input};
use crate::{AttrValue, DType, Tensor};

/// Constant: its value is fixed at build time and shared by every run.
#[derive(Debug)]
pub struct Constant {
    value: Tensor,
}

/// Builds [`Constant`] from whichever `value*` attribute is present.
pub fn build_constant(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    min_opset(spec, 1)?;
    let a = spec.attrs;
    if a.has("sparse_value") {
        return Err(KernelError::UnsupportedAttribute {
            name: "sparse_value".into(),
            reason: "sparse tensors are not supported".into(),
        });
    }
    a.only(&[
        "value",
        "value_float",
        "value_floats",
        "value_int",
        "value_ints",
        "value_string",
        "value_strings",
    ])?;
    let present: Vec<&str> = a.names().collect();
    if present.len() != 1 {
        return Err(KernelError::BadAttribute {
            name: "value".into(),
            reason: format!("exactly one value attribute is required, found {present:?}"),
        });
    }
    let name = present[0];
    let value = match a.get(name) {
        Some(AttrValue::Tensor(t)) if name == "value" => t.clone(),
        Some(AttrValue::Float(f)) if name == "value_float" => Tensor::scalar(*f),
        Some(AttrValue::Int(i)) if name == "value_int" => Tensor::scalar(*i),
        Some(AttrValue::String(s)) if name == "value_string" => Tensor::scalar(s.clone()),
        Some(AttrValue::Floats(v)) if name == "value_floats" => {
            Tensor::from_shape_vec(&[v.len()], v.clone())?
        }
        Some(AttrValue::Ints(v)) if name == "value_ints" => {
            Tensor::from_shape_vec(&[v.len()], v.clone())?
        }
        Some(AttrValue::Strings(v)) if name == "value_strings" => {
            Tensor::from_shape_vec(&[v.len()], v.clone())?
        }
        _ => {
            return Err(KernelError::BadAttribute {
                name: name.into(),
                reason: "has the wrong type".into(),
            });
        }
    };
    Ok(Box::new(Constant { value }))
}

impl Kernel for Constant {
    fn run(&self, _inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        Ok(vec![self.value.clone()])
    }
}

/// ConstantOfShape: a tensor of the input shape filled with `value` (float 0 by default).
#[derive(Debug)]
pub struct ConstantOfShape {
    value: Tensor,
}

/// Builds [`ConstantOfShape`].
pub fn build_constant_of_shape(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    min_opset(spec, 9)?;
    spec.attrs.only(&["value"])?;
    let value = match spec.attrs.opt_tensor("value")? {
        Some(t) if t.len() == 1 => t.reshaped(&[])?,
        Some(t) => {
            return Err(KernelError::BadAttribute {
                name: "value".into(),
                reason: format!("must hold one element, holds {}", t.len()),
            });
        }
        None => Tensor::zeros(DType::F32, &[]),
    };
    Ok(Box::new(ConstantOfShape { value }))
}

impl Kernel for ConstantOfShape {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let shape = to_dims(&input(inputs, 0)?.to_i64_vec()?, "ConstantOfShape shape")?;
        crate::limits::checked_elements(&shape, self.value.dtype().size_of())?;
        let out = crate::dispatch_all!(&self.value, a => {
            let v = a.iter().next().cloned().unwrap_or_default();
            // Written out (not lazily zeroed pages) in memory offered for it: a reader would
            // fault the pages in anyway, and the buffer goes on to hold later values.
            let data = crate::output_buffer::filled(0, shape.iter().product(), v);
            let array = ndarray::ArcArray::from_shape_vec(ndarray::IxDyn(&shape), data)
                .map_err(|e| KernelError::Shape(format!("ConstantOfShape {shape:?}: {e}")))?;
            crate::Element::into_tensor(array)
        });
        Ok(vec![out])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Attributes;

    #[test]
    fn constant_variants() {
        let attrs = Attributes::new().with("value_ints", AttrValue::Ints(vec![1, 2]));
        let spec = NodeSpec {
            op_type: "Constant",
            domain: "",
            opset: 13,
            attrs: &attrs,
            num_inputs: 0,
            num_outputs: 1,
            options: Default::default(),
        };
        assert_eq!(
            build_constant(&spec).unwrap().run(&[]).unwrap()[0],
            Tensor::from_shape_vec(&[2], vec![1i64, 2]).unwrap()
        );
        let attrs = Attributes::new().with("value_float", AttrValue::Float(2.5));
        let spec = NodeSpec {
            attrs: &attrs,
            ..spec
        };
        assert_eq!(
            build_constant(&spec).unwrap().run(&[]).unwrap()[0],
            Tensor::scalar(2.5f32)
        );
        let attrs = Attributes::new().with("sparse_value", AttrValue::Int(0));
        let spec = NodeSpec {
            attrs: &attrs,
            ..spec
        };
        assert!(matches!(
            build_constant(&spec),
            Err(KernelError::UnsupportedAttribute { .. })
        ));
    }

    #[test]
    fn constant_of_shape() {
        let attrs = Attributes::new().with(
            "value",
            AttrValue::Tensor(Tensor::from_shape_vec(&[1], vec![7i32]).unwrap()),
        );
        let spec = NodeSpec {
            op_type: "ConstantOfShape",
            domain: "",
            opset: 20,
            attrs: &attrs,
            num_inputs: 1,
            num_outputs: 1,
            options: Default::default(),
        };
        let shape = Tensor::from_shape_vec(&[2], vec![2i64, 0]).unwrap();
        let out = build_constant_of_shape(&spec)
            .unwrap()
            .run(&[Some(&shape)])
            .unwrap();
        assert_eq!(
            out[0],
            Tensor::from_shape_vec(&[2, 0], Vec::<i32>::new()).unwrap()
        );
        let attrs = Attributes::new();
        let spec = NodeSpec {
            attrs: &attrs,
            ..spec
        };
        let shape = Tensor::from_shape_vec(&[1], vec![3i64]).unwrap();
        let out = build_constant_of_shape(&spec)
            .unwrap()
            .run(&[Some(&shape)])
            .unwrap();
        assert_eq!(out[0], Tensor::from_shape_vec(&[3], vec![0f32; 3]).unwrap());
    }
}
