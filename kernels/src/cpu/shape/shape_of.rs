//! Shape and Size: a tensor's dimensions or element count as int64.

use super::util::min_opset;
use crate::Tensor;
use crate::error::Result;
use crate::kernel::{Kernel, NodeSpec, input};

/// Shape (with `start`/`end` from opset 15) or Size.
#[derive(Debug)]
pub struct ShapeOf {
    size: bool,
    start: i64,
    end: Option<i64>,
}

/// Builds [`ShapeOf`] for `Shape` or `Size`.
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    min_opset(spec, 1)?;
    let size = spec.op_type == "Size";
    if size || spec.opset < 15 {
        spec.attrs.only(&[])?;
    } else {
        spec.attrs.only(&["start", "end"])?;
    }
    Ok(Box::new(ShapeOf {
        size,
        start: spec.attrs.int("start", 0)?,
        end: spec.attrs.opt_int("end")?,
    }))
}

impl Kernel for ShapeOf {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        if self.size {
            return Ok(vec![Tensor::scalar(x.len() as i64)]);
        }
        let r = x.rank() as i64;
        // Out-of-range start/end are clamped, as the spec says.
        let clamp = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
        let (s, e) = (clamp(self.start), clamp(self.end.unwrap_or(r)));
        let dims: Vec<i64> = if s < e {
            x.shape()[s..e].iter().map(|&d| d as i64).collect()
        } else {
            vec![]
        };
        Ok(vec![Tensor::from_shape_vec(&[dims.len()], dims)?])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AttrValue, Attributes};

    #[test]
    fn shape_slices_and_size() {
        let x = Tensor::zeros(crate::DType::F32, &[3, 4, 5]);
        let cases: [(Option<i64>, Option<i64>, Vec<i64>); 4] = [
            (None, None, vec![3, 4, 5]),
            (Some(-1), None, vec![5]),
            (Some(1), Some(-1), vec![4]),
            (Some(-10), Some(10), vec![3, 4, 5]),
        ];
        for (s, e, exp) in cases {
            let mut attrs = Attributes::new();
            if let Some(s) = s {
                attrs.insert("start", AttrValue::Int(s));
            }
            if let Some(e) = e {
                attrs.insert("end", AttrValue::Int(e));
            }
            let spec = NodeSpec {
                op_type: "Shape",
                domain: "",
                opset: 15,
                attrs: &attrs,
                num_inputs: 1,
                num_outputs: 1,
                options: Default::default(),
            };
            let out = build(&spec).unwrap().run(&[Some(&x)]).unwrap();
            assert_eq!(out[0], Tensor::from_shape_vec(&[exp.len()], exp).unwrap());
        }
        let attrs = Attributes::new();
        let spec = NodeSpec {
            op_type: "Size",
            domain: "",
            opset: 13,
            attrs: &attrs,
            num_inputs: 1,
            num_outputs: 1,
            options: Default::default(),
        };
        assert_eq!(
            build(&spec).unwrap().run(&[Some(&x)]).unwrap()[0],
            Tensor::scalar(60i64)
        );
    }
}
