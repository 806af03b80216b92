//! Data movement on the GPU: Transpose, Concat, Split, Slice and Expand as strided copies
//! (negative strides walk a Slice backwards), and the shape-only
//! operators (Reshape, Flatten, Squeeze, Unsqueeze, Identity) as one device-to-device copy
//! (the engine may alias them instead).

use super::{GpuIo, GpuKernel, GpuNode};
use crate::cpu::reduce::axes::normalize_axis;
use crate::cpu::shape::slice::slice_ranges;
use crate::cuda::codegen::{
    KernelSource, Strides, broadcast_strides, contiguous_strides, copy, launch_shape,
};
use crate::cuda::error::CudaResult;
use crate::cuda::gpu::{Gpu, KernelArg};

/// One strided copy: from input `input` (at element `src_offset`) to output `output` (at
/// element `dst_offset`), over the iteration shape in `strides`.
#[derive(Debug, Clone)]
pub(super) struct Piece {
    pub(super) input: usize,
    pub(super) output: usize,
    pub(super) src_offset: usize,
    pub(super) dst_offset: usize,
    pub(super) n: usize,
    pub(super) strides: Strides,
}

impl Piece {
    /// All `n` elements of output 0 from input 0, starting at `src_offset`.
    pub(super) fn whole(src_offset: usize, n: usize, strides: Strides) -> Self {
        Piece {
            input: 0,
            output: 0,
            src_offset,
            dst_offset: 0,
            n,
            strides,
        }
    }
}

/// A sequence of strided copies.
#[derive(Debug)]
pub(super) struct StridedCopies {
    source: KernelSource,
    pub(super) element_bytes: usize,
    pieces: Vec<Piece>,
}

impl GpuKernel for StridedCopies {
    fn launch(&self, gpu: &Gpu, stream: usize, io: &GpuIo<'_>) -> CudaResult<()> {
        for p in self.pieces.iter().filter(|p| p.n > 0) {
            let y = io.output(p.output)?;
            let args = [
                KernelArg::Ptr(io.input(p.input)?.ptr + (p.src_offset * self.element_bytes) as u64),
                KernelArg::Ptr(y.ptr + (p.dst_offset * self.element_bytes) as u64),
                KernelArg::I64(p.n as i64),
                KernelArg::Strides(p.strides),
            ];
            gpu.launch(
                &self.source,
                stream,
                launch_shape(p.n, gpu.info().multiprocessors),
                0,
                &args,
            )?;
        }
        Ok(())
    }
}

/// The strided copies `pieces` of elements of the output's type, walking `rank` dimensions.
pub(super) fn copies(
    node: &GpuNode<'_>,
    rank: usize,
    pieces: Vec<Piece>,
) -> CudaResult<StridedCopies> {
    let element_bytes = node.output(0)?.dtype.size_of();
    let source = copy::strided_copy_source(element_bytes, rank.max(1))
        .ok_or_else(|| node.unsupported(format!("{element_bytes}-byte elements")))?;
    Ok(StridedCopies {
        source,
        element_bytes,
        pieces,
    })
}

pub(super) fn build_transpose(node: &GpuNode<'_>) -> CudaResult<Box<dyn GpuKernel>> {
    Ok(Box::new(plan_transpose(node)?))
}

fn plan_transpose(node: &GpuNode<'_>) -> CudaResult<StridedCopies> {
    let x = node.input(0)?;
    let y = node.output(0)?;
    let rank = x.shape.len();
    let perm: Vec<usize> = match node.spec.attrs.opt_ints("perm")? {
        Some(p) => p
            .iter()
            .map(|&a| normalize_axis(a, rank))
            .collect::<Result<_, _>>()?,
        None => (0..rank).rev().collect(),
    };
    let src = contiguous_strides(&x.shape);
    // Walk the output in order; output dimension d reads input dimension perm[d].
    let src_strides: Vec<i64> = perm.iter().map(|&p| src[p]).collect();
    let strides = Strides::new(&y.shape, &[&src_strides, &contiguous_strides(&y.shape)])
        .ok_or_else(|| node.unsupported(format!("rank {rank}")))?;
    copies(node, rank, vec![Piece::whole(0, y.len(), strides)])
}

pub(super) fn build_concat(node: &GpuNode<'_>) -> CudaResult<Box<dyn GpuKernel>> {
    Ok(Box::new(plan_concat(node)?))
}

fn plan_concat(node: &GpuNode<'_>) -> CudaResult<StridedCopies> {
    let y = node.output(0)?;
    let rank = y.shape.len();
    let axis = normalize_axis(node.spec.attrs.int("axis", 0)?, rank)?;
    let dst = contiguous_strides(&y.shape);
    let mut pieces = Vec::new();
    let mut at = 0usize;
    for (i, input) in node.inputs.iter().enumerate() {
        let Some(x) = input else { continue };
        let strides = Strides::new(&x.shape, &[&contiguous_strides(&x.shape), &dst])
            .ok_or_else(|| node.unsupported(format!("rank {rank}")))?;
        pieces.push(Piece {
            input: i,
            output: 0,
            src_offset: 0,
            dst_offset: at * dst[axis] as usize,
            n: x.len(),
            strides,
        });
        at += x.shape.get(axis).copied().unwrap_or(0);
    }
    copies(node, rank, pieces)
}

pub(super) fn build_split(node: &GpuNode<'_>) -> CudaResult<Box<dyn GpuKernel>> {
    Ok(Box::new(plan_split(node)?))
}

fn plan_split(node: &GpuNode<'_>) -> CudaResult<StridedCopies> {
    let x = node.input(0)?;
    let rank = x.shape.len();
    let axis = normalize_axis(node.spec.attrs.int("axis", 0)?, rank)?;
    let src = contiguous_strides(&x.shape);
    let mut pieces = Vec::new();
    let mut at = 0usize;
    for (j, y) in node.outputs.iter().enumerate() {
        let strides = Strides::new(&y.shape, &[&src, &contiguous_strides(&y.shape)])
            .ok_or_else(|| node.unsupported(format!("rank {rank}")))?;
        pieces.push(Piece {
            input: 0,
            output: j,
            src_offset: at * src[axis] as usize,
            dst_offset: 0,
            n: y.len(),
            strides,
        });
        at += y.shape.get(axis).copied().unwrap_or(0);
    }
    copies(node, rank, pieces)
}

/// The integers of constant input `index`, or `None` when it is absent.
pub(super) fn constant_ints(node: &GpuNode<'_>, index: usize) -> CudaResult<Option<Vec<i64>>> {
    match (
        node.inputs.get(index).is_some_and(Option::is_some),
        node.constant(index),
    ) {
        (false, _) => Ok(None),
        (true, Some(t)) => Ok(Some(t.to_i64_vec()?)),
        (true, None) => Err(node.unsupported(format!("input {index} is not a constant"))),
    }
}

pub(super) fn build_slice(node: &GpuNode<'_>) -> CudaResult<Box<dyn GpuKernel>> {
    Ok(Box::new(plan_slice(node)?))
}

fn plan_slice(node: &GpuNode<'_>) -> CudaResult<StridedCopies> {
    let x = node.input(0)?;
    let y = node.output(0)?;
    let attrs = node.spec.attrs;
    let (starts, ends, axes, steps) = if node.spec.opset < 10 {
        (
            attrs.ints("starts")?,
            attrs.ints("ends")?,
            attrs.opt_ints("axes")?,
            None,
        )
    } else {
        let required = |i| {
            constant_ints(node, i)?.ok_or_else(|| node.unsupported(format!("input {i} is missing")))
        };
        (
            required(1)?,
            required(2)?,
            constant_ints(node, 3)?,
            constant_ints(node, 4)?,
        )
    };
    let ranges = slice_ranges(&x.shape, &starts, &ends, axes.as_deref(), steps.as_deref())?;
    let src = contiguous_strides(&x.shape);
    let mut offset = 0i64;
    let mut walk = Vec::with_capacity(ranges.len());
    for (d, r) in ranges.iter().enumerate() {
        // A positive step starts at `start`; ndarray's negative step walks `[start, end)` from
        // its last element.
        let first = if r.step > 0 {
            r.start as i64
        } else {
            r.end.unwrap_or(0) as i64 - 1
        };
        if y.shape[d] > 0 {
            offset += first * src[d];
        }
        walk.push(r.step as i64 * src[d]);
    }
    let strides = Strides::new(&y.shape, &[&walk, &contiguous_strides(&y.shape)])
        .ok_or_else(|| node.unsupported(format!("rank {}", y.shape.len())))?;
    copies(
        node,
        y.shape.len(),
        vec![Piece::whole(offset.max(0) as usize, y.len(), strides)],
    )
}

pub(super) fn build_expand(node: &GpuNode<'_>) -> CudaResult<Box<dyn GpuKernel>> {
    Ok(Box::new(plan_expand(node)?))
}

fn plan_expand(node: &GpuNode<'_>) -> CudaResult<StridedCopies> {
    let x = node.input(0)?;
    let y = node.output(0)?;
    let src = broadcast_strides(&x.shape, &y.shape)
        .ok_or_else(|| node.unsupported(format!("{:?} to {:?}", x.shape, y.shape)))?;
    let strides = Strides::new(&y.shape, &[&src, &contiguous_strides(&y.shape)])
        .ok_or_else(|| node.unsupported(format!("rank {}", y.shape.len())))?;
    copies(node, y.shape.len(), vec![Piece::whole(0, y.len(), strides)])
}

/// A shape-only operator: the output's bytes are the input's.
#[derive(Debug)]
struct Alias {
    bytes: usize,
}

pub(super) fn build_alias(node: &GpuNode<'_>) -> CudaResult<Box<dyn GpuKernel>> {
    Ok(Box::new(Alias {
        bytes: node.output(0)?.bytes(),
    }))
}

impl GpuKernel for Alias {
    fn launch(&self, gpu: &Gpu, stream: usize, io: &GpuIo<'_>) -> CudaResult<()> {
        let (x, y) = (io.input(0)?, io.output(0)?);
        if x.ptr == y.ptr || self.bytes == 0 {
            return Ok(());
        }
        gpu.copy_device(x, y, self.bytes, stream)
    }
}

#[cfg(test)]
mod tests {
    //! The copy plans checked without a GPU: the strided-copy kernel's index arithmetic is
    //! replayed on the host and the result compared with the CPU kernel of the same node.
    use super::*;
    use crate::cuda::codegen::MAX_RANK;
    use crate::cuda::ops::TensorDesc;
    use crate::{AttrValue, Attributes, NodeSpec, Tensor};

    /// What the kernel does for one piece, on host vectors.
    fn replay(plan: &StridedCopies, inputs: &[Vec<f32>], outputs: &mut [Vec<f32>]) {
        for p in &plan.pieces {
            for i in 0..p.n as i64 {
                let (mut r, mut o0, mut o1) = (i, 0i64, 0i64);
                for d in (0..MAX_RANK).rev() {
                    let c = r % p.strides.dims[d];
                    r /= p.strides.dims[d];
                    o0 += c * p.strides.strides[0][d];
                    o1 += c * p.strides.strides[1][d];
                }
                let v = inputs[p.input][(p.src_offset as i64 + o0) as usize];
                outputs[p.output][(p.dst_offset as i64 + o1) as usize] = v;
            }
        }
    }

    fn seq(shape: &[usize]) -> Tensor {
        let n: usize = shape.iter().product();
        Tensor::from_shape_vec(shape, (0..n).map(|v| v as f32).collect()).unwrap()
    }

    fn i64s(v: &[i64]) -> Tensor {
        Tensor::from_shape_vec(&[v.len()], v.to_vec()).unwrap()
    }

    /// Plans `op` with `plan`, replays it and compares with the CPU kernel.
    fn check(
        op: &str,
        attrs: &[(&str, AttrValue)],
        inputs: Vec<Tensor>,
        outputs: usize,
        plan: fn(&GpuNode<'_>) -> CudaResult<StridedCopies>,
    ) {
        let mut a = Attributes::new();
        for (k, v) in attrs {
            a.insert(k, v.clone());
        }
        let spec = NodeSpec {
            op_type: op,
            domain: "",
            opset: 18,
            attrs: &a,
            num_inputs: inputs.len(),
            num_outputs: outputs,
            options: Default::default(),
        };
        let refs: Vec<Option<&Tensor>> = inputs.iter().map(Some).collect();
        let want = crate::cpu::build(&spec).unwrap().run(&refs).unwrap();
        let in_desc: Vec<Option<TensorDesc>> = inputs
            .iter()
            .map(|t| Some(TensorDesc::new(t.dtype(), t.shape())))
            .collect();
        let out_desc: Vec<TensorDesc> = want
            .iter()
            .map(|t| TensorDesc::new(t.dtype(), t.shape()))
            .collect();
        let node = GpuNode {
            spec: &spec,
            inputs: &in_desc,
            outputs: &out_desc,
            constants: &refs,
        };
        let copies = plan(&node).unwrap();
        let host: Vec<Vec<f32>> = inputs
            .iter()
            .map(|t| {
                t.to_f32_array()
                    .map(|a| a.iter().copied().collect())
                    .unwrap_or_default()
            })
            .collect();
        let mut got: Vec<Vec<f32>> = out_desc.iter().map(|d| vec![f32::NAN; d.len()]).collect();
        replay(&copies, &host, &mut got);
        for (g, w) in got.iter().zip(&want) {
            let w: Vec<f32> = w.to_f32_array().unwrap().iter().copied().collect();
            assert_eq!(g, &w, "{op}");
        }
    }

    #[test]
    fn copy_plans_match_the_cpu_kernels() {
        check(
            "Transpose",
            &[("perm", AttrValue::Ints(vec![0, 2, 3, 1]))],
            vec![seq(&[2, 3, 4, 5])],
            1,
            plan_transpose,
        );
        check(
            "Concat",
            &[("axis", AttrValue::Int(1))],
            vec![seq(&[2, 3, 4]), seq(&[2, 1, 4]), seq(&[2, 2, 4])],
            1,
            plan_concat,
        );
        check(
            "Split",
            &[
                ("axis", AttrValue::Int(2)),
                ("num_outputs", AttrValue::Int(3)),
            ],
            vec![seq(&[2, 3, 7])],
            3,
            plan_split,
        );
        check(
            "Slice",
            &[],
            vec![
                seq(&[3, 16, 14]),
                i64s(&[1, 13]),
                i64s(&[12, 0]),
                i64s(&[1, 2]),
                i64s(&[3, -2]),
            ],
            1,
            plan_slice,
        );
        check(
            "Slice",
            &[],
            vec![
                seq(&[5, 6]),
                i64s(&[-1, 0]),
                i64s(&[-100, 6]),
                i64s(&[0, 1]),
                i64s(&[-1, 2]),
            ],
            1,
            plan_slice,
        );
        check(
            "Expand",
            &[],
            vec![seq(&[3, 1]), i64s(&[2, 3, 4])],
            1,
            plan_expand,
        );
    }
}
