//! EyeLike, OneHot and Compress: tensors made of, or picked from, their inputs by index.

use ndarray::{Axis, IxDyn};

use super::cast::cast_tensor;
use super::util::{min_opset, norm_axis, tensor_from};
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input};
use crate::limits::checked_elements;
use crate::{DType, Element, Tensor, dispatch_all};

/// EyeLike (opset 9+): a 2-D tensor of the input's shape with ones on diagonal `k`, of type
/// `dtype` (the input's when absent).
#[derive(Debug)]
pub struct EyeLike {
    dtype: Option<DType>,
    k: i64,
}

/// Builds [`EyeLike`].
pub fn build_eye_like(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    min_opset(spec, 9)?;
    spec.attrs.only(&["dtype", "k"])?;
    let dtype = match spec.attrs.opt_int("dtype")? {
        None => None,
        Some(code) => Some(
            i32::try_from(code)
                .ok()
                .and_then(DType::from_onnx)
                .filter(|d| d.is_float() || d.is_int() || *d == DType::Bool)
                .ok_or_else(|| KernelError::BadAttribute {
                    name: "dtype".into(),
                    reason: format!("{code} is not a numeric or boolean element type"),
                })?,
        ),
    };
    Ok(Box::new(EyeLike {
        dtype,
        k: spec.attrs.int("k", 0)?,
    }))
}

impl Kernel for EyeLike {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        let &[rows, cols] = x.shape() else {
            return Err(KernelError::Shape(format!(
                "EyeLike takes a 2-D input, got shape {:?}",
                x.shape()
            )));
        };
        let dtype = self.dtype.unwrap_or(x.dtype());
        if !(dtype.is_float() || dtype.is_int() || dtype == DType::Bool) {
            return Err(KernelError::UnsupportedDType { index: 0, dtype });
        }
        let n = checked_elements(&[rows, cols], 8)?;
        let mut data = vec![0u8; n];
        for i in 0..rows {
            let j = i as i64 + self.k;
            if (0..cols as i64).contains(&j) {
                data[i * cols + j as usize] = 1;
            }
        }
        Ok(vec![cast_tensor(
            &tensor_from(&[rows, cols], data)?,
            dtype,
        )?])
    }
}

/// OneHot (opset 9+): for indices of shape `S`, a tensor of shape `S` with `depth` inserted at
/// `axis`, holding `values[1]` where the position along `axis` is the index (negative indices
/// count from `depth`) and `values[0]` elsewhere.
#[derive(Debug)]
pub struct OneHot {
    axis: i64,
}

/// Builds [`OneHot`].
pub fn build_one_hot(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    min_opset(spec, 9)?;
    spec.attrs.only(&["axis"])?;
    if spec.num_inputs != 3 {
        return Err(KernelError::Arity("OneHot takes three inputs".into()));
    }
    Ok(Box::new(OneHot {
        axis: spec.attrs.int("axis", -1)?,
    }))
}

fn one_hot<T: Element>(
    values: &ndarray::ArcArray<T, IxDyn>,
    indices: &[f64],
    shape: &[usize],
    (outer, depth, inner): (usize, usize, usize),
) -> Result<Tensor> {
    let (off, on) = match values.iter().collect::<Vec<_>>().as_slice() {
        [off, on] => ((*off).clone(), (*on).clone()),
        _ => {
            return Err(KernelError::Shape(format!(
                "OneHot values must hold two elements, got shape {:?}",
                values.shape()
            )));
        }
    };
    let mut data = vec![off; outer * depth * inner];
    for o in 0..outer {
        for i in 0..inner {
            let mut idx = indices[o * inner + i].trunc();
            if idx < 0.0 {
                idx += depth as f64;
            }
            if idx >= 0.0 && idx < depth as f64 {
                data[(o * depth + idx as usize) * inner + i] = on.clone();
            }
        }
    }
    tensor_from(shape, data)
}

impl Kernel for OneHot {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let (indices, depth, values) = (input(inputs, 0)?, input(inputs, 1)?, input(inputs, 2)?);
        let depth = match depth.to_f64_vec()?.as_slice() {
            [d] if *d >= 1.0 && d.is_finite() => *d as usize,
            [d] => {
                return Err(KernelError::InvalidValue(format!(
                    "OneHot depth must be at least 1, got {d}"
                )));
            }
            _ => return Err(KernelError::Shape("OneHot depth must be a scalar".into())),
        };
        let rank = indices.rank();
        let axis = norm_axis(self.axis, rank + 1)?;
        let mut shape = indices.shape().to_vec();
        shape.insert(axis, depth);
        checked_elements(&shape, values.dtype().size_of())?;
        let outer: usize = indices.shape()[..axis].iter().product();
        let inner: usize = indices.shape()[axis..].iter().product();
        let idx = indices.to_f64_vec()?;
        let out = dispatch_all!(values, v => one_hot(v, &idx, &shape, (outer, depth, inner))?);
        Ok(vec![out])
    }
}

/// Compress (opset 9+): the slices along `axis` (of the flattened input when absent) whose
/// entry in the 1-D boolean `condition` is true; a shorter condition leaves the rest out.
#[derive(Debug)]
pub struct Compress {
    axis: Option<i64>,
}

/// Builds [`Compress`].
pub fn build_compress(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    min_opset(spec, 9)?;
    spec.attrs.only(&["axis"])?;
    if spec.num_inputs != 2 {
        return Err(KernelError::Arity("Compress takes two inputs".into()));
    }
    Ok(Box::new(Compress {
        axis: spec.attrs.opt_int("axis")?,
    }))
}

impl Kernel for Compress {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        let cond = input(inputs, 1)?;
        let Tensor::Bool(c) = cond else {
            return Err(KernelError::UnsupportedDType {
                index: 1,
                dtype: cond.dtype(),
            });
        };
        if c.ndim() != 1 {
            return Err(KernelError::Shape(format!(
                "Compress condition must be 1-D, got shape {:?}",
                c.shape()
            )));
        }
        let (x, axis) = match self.axis {
            Some(a) => (x.clone(), norm_axis(a, x.rank())?),
            None => (x.reshaped(&[x.len()])?, 0),
        };
        let dim = x.shape()[axis];
        let picked: Vec<usize> = c
            .iter()
            .enumerate()
            .filter(|(_, b)| **b)
            .map(|(i, _)| i)
            .collect();
        if let Some(&i) = picked.iter().find(|&&i| i >= dim) {
            return Err(KernelError::InvalidValue(format!(
                "Compress condition selects index {i} of an axis of {dim}"
            )));
        }
        let out = dispatch_all!(&x, a => Element::into_tensor(a.select(Axis(axis), &picked).into_shared()));
        Ok(vec![out])
    }
}
