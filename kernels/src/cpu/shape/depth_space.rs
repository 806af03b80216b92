//! DepthToSpace (DCR and CRD) and SpaceToDepth: block rearrangements of NCHW tensors.

use ndarray::{ArcArray, IxDyn};

use super::util::{contiguous_vec, min_opset, tensor_from};
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input};
use crate::{Element, Tensor, dispatch_all};

/// DepthToSpace (`crd` false = DCR) or SpaceToDepth (`to_depth`).
#[derive(Debug)]
pub struct DepthSpace {
    block: usize,
    to_depth: bool,
    crd: bool,
}

/// Builds [`DepthSpace`] for `DepthToSpace` or `SpaceToDepth`.
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    min_opset(spec, 1)?;
    let to_depth = spec.op_type == "SpaceToDepth";
    if to_depth || spec.opset < 11 {
        spec.attrs.only(&["blocksize"])?;
    } else {
        spec.attrs.only(&["blocksize", "mode"])?;
    }
    let b = spec.attrs.req_int("blocksize")?;
    if b < 1 {
        return Err(KernelError::BadAttribute {
            name: "blocksize".into(),
            reason: format!("must be positive, got {b}"),
        });
    }
    let crd = match spec.attrs.string("mode", "DCR")?.as_str() {
        "DCR" => false,
        "CRD" => true,
        m => {
            return Err(KernelError::UnsupportedAttribute {
                name: "mode".into(),
                reason: format!("unknown mode '{m}'"),
            });
        }
    };
    Ok(Box::new(DepthSpace {
        block: b as usize,
        to_depth,
        crd,
    }))
}

impl Kernel for DepthSpace {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        let &[n, c, h, w] = x.shape() else {
            return Err(KernelError::Shape(format!(
                "expected a 4-D NCHW input, got {:?}",
                x.shape()
            )));
        };
        let b = self.block;
        // Each op is a reshape to 6-D, a transpose and a reshape back (onnx reference).
        let (inter, perm, out): (Vec<usize>, [usize; 6], Vec<usize>) = if self.to_depth {
            if h % b != 0 || w % b != 0 {
                return Err(KernelError::Shape(format!(
                    "H={h}, W={w} not divisible by blocksize {b}"
                )));
            }
            (
                vec![n, c, h / b, b, w / b, b],
                [0, 3, 5, 1, 2, 4],
                vec![n, c * b * b, h / b, w / b],
            )
        } else {
            if c % (b * b) != 0 {
                return Err(KernelError::Shape(format!(
                    "C={c} not divisible by blocksize² {}",
                    b * b
                )));
            }
            let cc = c / (b * b);
            if self.crd {
                (
                    vec![n, cc, b, b, h, w],
                    [0, 1, 4, 2, 5, 3],
                    vec![n, cc, h * b, w * b],
                )
            } else {
                (
                    vec![n, b, b, cc, h, w],
                    [0, 3, 4, 1, 5, 2],
                    vec![n, cc, h * b, w * b],
                )
            }
        };
        let out = dispatch_all!(x, a => rearrange(a, &inter, &perm, &out)?);
        Ok(vec![out])
    }
}

fn rearrange<T: Element>(
    a: &ArcArray<T, IxDyn>,
    inter: &[usize],
    perm: &[usize],
    out: &[usize],
) -> Result<Tensor> {
    let std = a.as_standard_layout();
    let v = std
        .view()
        .into_shape_with_order(IxDyn(inter))
        .map_err(|e| KernelError::Shape(e.to_string()))?;
    tensor_from(out, contiguous_vec(v.permuted_axes(IxDyn(perm))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AttrValue, Attributes};

    fn run(op: &str, mode: Option<&str>, x: &Tensor) -> Result<Tensor> {
        let mut attrs = Attributes::new().with("blocksize", AttrValue::Int(2));
        if let Some(m) = mode {
            attrs.insert("mode", AttrValue::String(m.into()));
        }
        let spec = NodeSpec {
            op_type: op,
            domain: "",
            opset: 13,
            attrs: &attrs,
            num_inputs: 1,
            num_outputs: 1,
            options: Default::default(),
        };
        Ok(build(&spec)?.run(&[Some(x)])?.remove(0))
    }

    #[test]
    fn depth_to_space_modes_and_inverse() {
        // x = np.arange(8).reshape(1,8,1,1); onnx reference:
        // DCR -> [[[[0,2],[4,6]],[[1,3],[5,7]]]], CRD -> [[[[0,1],[2,3]],[[4,5],[6,7]]]]
        let x = Tensor::from_shape_vec(&[1, 8, 1, 1], (0..8).collect::<Vec<i64>>()).unwrap();
        let dcr = run("DepthToSpace", None, &x).unwrap();
        assert_eq!(
            dcr,
            Tensor::from_shape_vec(&[1, 2, 2, 2], vec![0i64, 2, 4, 6, 1, 3, 5, 7]).unwrap()
        );
        let crd = run("DepthToSpace", Some("CRD"), &x).unwrap();
        assert_eq!(
            crd,
            Tensor::from_shape_vec(&[1, 2, 2, 2], (0..8).collect::<Vec<i64>>()).unwrap()
        );
        // SpaceToDepth is the inverse of DCR DepthToSpace.
        assert_eq!(run("SpaceToDepth", None, &dcr).unwrap(), x);
        assert!(matches!(
            run("DepthToSpace", Some("XYZ"), &x),
            Err(KernelError::UnsupportedAttribute { .. })
        ));
        let bad = Tensor::zeros(crate::DType::F32, &[1, 3, 1, 1]);
        assert!(matches!(
            run("DepthToSpace", None, &bad),
            Err(KernelError::Shape(_))
        ));
    }
}
