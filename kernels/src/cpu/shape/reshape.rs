//! Reshape and Flatten: new shapes over the same elements (shared, not copied,
//! when the input is contiguous).

use super::util::min_opset;
use crate::Tensor;
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input};

/// Reshape (opset 5+, `allowzero` from 14).
#[derive(Debug)]
pub struct Reshape {
    allowzero: bool,
}

/// Builds [`Reshape`].
pub fn build_reshape(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    min_opset(spec, 5)?;
    if spec.opset >= 14 {
        spec.attrs.only(&["allowzero"])?;
    } else {
        spec.attrs.only(&[])?;
    }
    Ok(Box::new(Reshape {
        allowzero: spec.attrs.int("allowzero", 0)? != 0,
    }))
}

/// Resolves a Reshape target: `0` copies the input dimension (unless `allowzero`),
/// one `-1` is inferred from the element count.
pub(crate) fn reshape_target(
    in_shape: &[usize],
    target: &[i64],
    allowzero: bool,
) -> Result<Vec<usize>> {
    let bad =
        |why: &str| KernelError::Shape(format!("cannot reshape {in_shape:?} to {target:?}: {why}"));
    if allowzero && target.contains(&0) && target.contains(&-1) {
        return Err(bad("allowzero forbids 0 together with -1"));
    }
    let mut out = Vec::with_capacity(target.len());
    let mut infer = None;
    for (i, &d) in target.iter().enumerate() {
        match d {
            -1 if infer.is_some() => return Err(bad("more than one -1")),
            -1 => {
                infer = Some(i);
                out.push(1);
            }
            0 if !allowzero => out.push(
                *in_shape
                    .get(i)
                    .ok_or_else(|| bad("0 past the input rank"))?,
            ),
            d if d < 0 => return Err(bad("negative dimension")),
            d => out.push(d as usize),
        }
    }
    let product = |dims: &[usize]| dims.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
    let total = product(in_shape).ok_or_else(|| bad("the input's size overflows"))?;
    if let Some(i) = infer {
        let known = product(&out).ok_or_else(|| bad("the target's size overflows"))?;
        if known == 0 || !total.is_multiple_of(known) {
            return Err(bad("the -1 dimension cannot be inferred"));
        }
        out[i] = total / known;
    }
    if product(&out) != Some(total) {
        return Err(bad("element counts differ"));
    }
    Ok(out)
}

impl Kernel for Reshape {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        let target = input(inputs, 1)?;
        if target.rank() != 1 {
            return Err(KernelError::Shape(format!(
                "the shape input must be 1-D, got shape {:?}",
                target.shape()
            )));
        }
        let target = target.to_i64_vec()?;
        let shape = reshape_target(x.shape(), &target, self.allowzero)?;
        Ok(vec![x.reshaped(&shape)?])
    }
}

/// Flatten: to 2-D `[prod(dims[..axis]), prod(dims[axis..])]`.
#[derive(Debug)]
pub struct Flatten {
    axis: i64,
}

/// Builds [`Flatten`].
pub fn build_flatten(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    min_opset(spec, 1)?;
    spec.attrs.only(&["axis"])?;
    Ok(Box::new(Flatten {
        axis: spec.attrs.int("axis", 1)?,
    }))
}

impl Kernel for Flatten {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        let r = x.rank() as i64;
        let axis = if self.axis < 0 {
            self.axis + r
        } else {
            self.axis
        };
        if !(0..=r).contains(&axis) {
            return Err(KernelError::Shape(format!(
                "Flatten axis {} out of range for rank {r}",
                self.axis
            )));
        }
        let (a, b) = x.shape().split_at(axis as usize);
        Ok(vec![x.reshaped(&[a.iter().product(), b.iter().product()])?])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AttrValue, Attributes};

    #[test]
    fn sizes_that_overflow_are_errors() {
        // Found by the graph_gen fuzzer: the products overflowed (a panic with overflow
        // checks, a wrapped count without).
        let big = 1usize << 33;
        assert!(reshape_target(&[big, big], &[-1], false).is_err());
        assert!(reshape_target(&[4], &[1 << 33, 1 << 33, -1], false).is_err());
        assert!(reshape_target(&[4], &[1 << 62, 1 << 62], false).is_err());
    }

    #[test]
    fn reshape_rules() {
        // numpy-free, hand derived from the spec
        assert_eq!(
            reshape_target(&[2, 3, 4], &[0, -1], false).unwrap(),
            vec![2, 12]
        );
        assert_eq!(
            reshape_target(&[2, 3, 4], &[4, 0, 2], false).unwrap(),
            vec![4, 3, 2]
        );
        assert_eq!(
            reshape_target(&[0, 3, 4], &[3, 4, 0], true).unwrap(),
            vec![3, 4, 0]
        );
        assert!(reshape_target(&[2, 3, 4], &[5, -1], false).is_err());
        assert!(reshape_target(&[2, 3, 4], &[-1, -1], false).is_err());
        assert!(reshape_target(&[2, 3], &[0, 0, 0], false).is_err());
        assert!(reshape_target(&[2, 3], &[0, -1], true).is_err());
    }

    #[test]
    fn reshape_shares_storage() {
        let attrs = Attributes::new();
        let spec = NodeSpec {
            op_type: "Reshape",
            domain: "",
            opset: 14,
            attrs: &attrs,
            num_inputs: 2,
            num_outputs: 1,
            options: Default::default(),
        };
        let x = Tensor::from_shape_vec(&[2, 3], vec![1.0f32, 2., 3., 4., 5., 6.]).unwrap();
        let s = Tensor::from_shape_vec(&[2], vec![3i64, -1]).unwrap();
        let out = build_reshape(&spec)
            .unwrap()
            .run(&[Some(&x), Some(&s)])
            .unwrap();
        assert_eq!(out[0].shape(), &[3, 2]);
        let (Tensor::F32(a), Tensor::F32(b)) = (&x, &out[0]) else {
            panic!()
        };
        assert_eq!(a.as_ptr(), b.as_ptr());
        let bad = Tensor::from_shape_vec(&[1], vec![5i64]).unwrap();
        assert!(matches!(
            build_reshape(&spec).unwrap().run(&[Some(&x), Some(&bad)]),
            Err(KernelError::Shape(_))
        ));
    }

    #[test]
    fn flatten_axes() {
        let x = Tensor::zeros(crate::DType::F32, &[2, 3, 4, 5]);
        for (axis, exp) in [(0, [1, 120]), (2, [6, 20]), (-1, [24, 5]), (4, [120, 1])] {
            let attrs = Attributes::new().with("axis", AttrValue::Int(axis));
            let spec = NodeSpec {
                op_type: "Flatten",
                domain: "",
                opset: 13,
                attrs: &attrs,
                num_inputs: 1,
                num_outputs: 1,
                options: Default::default(),
            };
            assert_eq!(
                build_flatten(&spec).unwrap().run(&[Some(&x)]).unwrap()[0].shape(),
                &exp
            );
        }
    }
}
