//! Trilu: keeps the upper or lower triangle of the last two axes.

use ndarray::{ArcArray, IxDyn};

use super::util::{min_opset, scalar_i64, tensor_from};
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input, opt_input};
use crate::{Element, Tensor, dispatch_all};

/// Trilu (opset 14+); `k` (input 1) shifts the diagonal.
#[derive(Debug)]
pub struct Trilu {
    upper: bool,
}

/// Builds [`Trilu`].
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    min_opset(spec, 14)?;
    spec.attrs.only(&["upper"])?;
    Ok(Box::new(Trilu {
        upper: spec.attrs.int("upper", 1)? != 0,
    }))
}

impl Kernel for Trilu {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        if x.dtype().is_low_precision() {
            // ONNX defines Trilu for no low-precision type (and float8 E8M0 has no zero).
            return Err(KernelError::UnsupportedDType {
                index: 0,
                dtype: x.dtype(),
            });
        }
        if x.rank() < 2 {
            return Err(KernelError::Shape(format!(
                "Trilu needs rank >= 2, got {:?}",
                x.shape()
            )));
        }
        let k = match opt_input(inputs, 1) {
            Some(t) => scalar_i64(t, "Trilu k")?,
            None => 0,
        };
        let out = dispatch_all!(x, a => trilu_typed(a, k, self.upper)?);
        Ok(vec![out])
    }
}

fn trilu_typed<T: Element>(a: &ArcArray<T, IxDyn>, k: i64, upper: bool) -> Result<Tensor> {
    let shape = a.shape();
    let (rows, cols) = (shape[shape.len() - 2], shape[shape.len() - 1]);
    let std = a.as_standard_layout();
    let mut data = std.as_slice().expect("standard layout").to_vec();
    for (pos, v) in data.iter_mut().enumerate() {
        let j = (pos % cols) as i64;
        let i = ((pos / cols.max(1)) % rows.max(1)) as i64;
        // numpy: triu keeps j - i >= k, tril keeps j - i <= k.
        let keep = if upper { j - i >= k } else { j - i <= k };
        if !keep {
            *v = T::default();
        }
    }
    tensor_from(shape, data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AttrValue, Attributes};

    fn run(upper: i64, x: &Tensor, k: Option<i64>) -> Tensor {
        let attrs = Attributes::new().with("upper", AttrValue::Int(upper));
        let spec = NodeSpec {
            op_type: "Trilu",
            domain: "",
            opset: 14,
            attrs: &attrs,
            num_inputs: 2,
            num_outputs: 1,
            options: Default::default(),
        };
        let k = k.map(Tensor::scalar);
        build(&spec)
            .unwrap()
            .run(&[Some(x), k.as_ref()])
            .unwrap()
            .remove(0)
    }

    #[test]
    fn triu_tril_match_numpy() {
        let x = Tensor::from_shape_vec(&[3, 3], (1..=9).collect::<Vec<i64>>()).unwrap();
        // np.triu(x, 1) and np.tril(x, -1)
        assert_eq!(
            run(1, &x, Some(1)),
            Tensor::from_shape_vec(&[3, 3], vec![0i64, 2, 3, 0, 0, 6, 0, 0, 0]).unwrap()
        );
        assert_eq!(
            run(0, &x, Some(-1)),
            Tensor::from_shape_vec(&[3, 3], vec![0i64, 0, 0, 4, 0, 0, 7, 8, 0]).unwrap()
        );
        assert_eq!(
            run(1, &x, None),
            Tensor::from_shape_vec(&[3, 3], vec![1i64, 2, 3, 0, 5, 6, 0, 0, 9]).unwrap()
        );
    }
}
