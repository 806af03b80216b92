//! Data movement on the GPU: Transpose, Concat, Split, Slice and Expand as strided copies
//! (negative strides walk a Slice backwards), constant Pad as a fill and a copy, Gather with
//! constant indices, and the shape-only
//! operators (Reshape, Flatten, Squeeze, Unsqueeze, Identity) as one device-to-device copy
//! (the engine may alias them instead).

use super::{GpuIo, GpuKernel, GpuNode};
use crate::Tensor;
use crate::cpu::reduce::axes::normalize_axis;
use crate::cpu::shape::gather::checked_indices;
use crate::cpu::shape::slice::slice_ranges;
use crate::cuda::codegen::{
    KernelSource, Strides, broadcast_strides, contiguous_strides, copy, launch_shape,
};
use crate::cuda::error::{CudaResult, driver};
use crate::cuda::gpu::{Gpu, KernelArg};
use crate::cuda::host::tensor_bytes;
use crate::cuda::memory::DeviceArena;

/// One strided copy: from input `input` (at element `src_offset`) to output `output` (at
/// element `dst_offset`), over the iteration shape in `strides`.
#[derive(Debug, Clone)]
struct Piece {
    input: usize,
    output: usize,
    src_offset: usize,
    dst_offset: usize,
    n: usize,
    strides: Strides,
}

/// A sequence of strided copies.
#[derive(Debug)]
struct StridedCopies {
    source: KernelSource,
    element_bytes: usize,
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

fn copier(node: &GpuNode<'_>, rank: usize) -> CudaResult<(KernelSource, usize)> {
    let bytes = node.output(0)?.dtype.size_of();
    let source = copy::strided_copy_source(bytes, rank.max(1))
        .ok_or_else(|| node.unsupported(format!("{bytes}-byte elements")))?;
    Ok((source, bytes))
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
    let (source, element_bytes) = copier(node, rank)?;
    Ok(StridedCopies {
        source,
        element_bytes,
        pieces: vec![Piece {
            input: 0,
            output: 0,
            src_offset: 0,
            dst_offset: 0,
            n: y.len(),
            strides,
        }],
    })
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
    let (source, element_bytes) = copier(node, rank)?;
    Ok(StridedCopies {
        source,
        element_bytes,
        pieces,
    })
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
    let (source, element_bytes) = copier(node, rank)?;
    Ok(StridedCopies {
        source,
        element_bytes,
        pieces,
    })
}

/// The integers of constant input `index`, or `None` when it is absent.
fn constant_ints(node: &GpuNode<'_>, index: usize) -> CudaResult<Option<Vec<i64>>> {
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
    let (source, element_bytes) = copier(node, y.shape.len())?;
    Ok(StridedCopies {
        source,
        element_bytes,
        pieces: vec![Piece {
            input: 0,
            output: 0,
            src_offset: offset.max(0) as usize,
            dst_offset: 0,
            n: y.len(),
            strides,
        }],
    })
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
    let (source, element_bytes) = copier(node, y.shape.len())?;
    Ok(StridedCopies {
        source,
        element_bytes,
        pieces: vec![Piece {
            input: 0,
            output: 0,
            src_offset: 0,
            dst_offset: 0,
            n: y.len(),
            strides,
        }],
    })
}

/// Gather with constant indices, checked and made non-negative on the host and uploaded once.
#[derive(Debug)]
struct Gather {
    source: KernelSource,
    indices: DeviceArena,
    n: usize,
    axis_dim: usize,
    count: usize,
    inner: usize,
}

pub(super) fn build_gather(gpu: &Gpu, node: &GpuNode<'_>) -> CudaResult<Box<dyn GpuKernel>> {
    let x = node.input(0)?;
    let y = node.output(0)?;
    let axis = normalize_axis(node.spec.attrs.int("axis", 0)?, x.shape.len())?;
    let raw = constant_ints(node, 1)?.ok_or_else(|| node.unsupported("indices are missing"))?;
    let indices = checked_indices(&raw, x.shape[axis])?;
    let mut host = Vec::with_capacity(8 * indices.len().max(1));
    for &i in &indices {
        host.extend_from_slice(&(i as i64).to_ne_bytes());
    }
    let arena = DeviceArena::new(gpu.copy_in_stream(), host.len())?;
    gpu.upload(&host, arena.region())?;
    gpu.copy_in_stream()
        .synchronize()
        .map_err(driver("uploading Gather indices"))?;
    let bytes = x.dtype.size_of();
    Ok(Box::new(Gather {
        source: copy::gather_source(bytes)
            .ok_or_else(|| node.unsupported(format!("{bytes}-byte elements")))?,
        indices: arena,
        n: y.len(),
        axis_dim: x.shape[axis],
        count: indices.len(),
        inner: x.shape[axis + 1..].iter().product(),
    }))
}

impl GpuKernel for Gather {
    fn launch(&self, gpu: &Gpu, stream: usize, io: &GpuIo<'_>) -> CudaResult<()> {
        if self.n == 0 {
            return Ok(());
        }
        let args = [
            KernelArg::Ptr(io.input(0)?.ptr),
            KernelArg::Ptr(self.indices.region().ptr),
            KernelArg::Ptr(io.output(0)?.ptr),
            KernelArg::I64(self.n as i64),
            KernelArg::I64(self.axis_dim as i64),
            KernelArg::I64(self.count as i64),
            KernelArg::I64(self.inner as i64),
        ];
        gpu.launch(
            &self.source,
            stream,
            launch_shape(self.n, gpu.info().multiprocessors),
            0,
            &args,
        )
    }
}

/// Pad in `constant` mode: fill the output with the value, then copy the input into its
/// interior.
#[derive(Debug)]
struct ConstantPad {
    fill: KernelSource,
    value: KernelArg,
    copies: StridedCopies,
    n: usize,
}

pub(super) fn build_pad(node: &GpuNode<'_>) -> CudaResult<Box<dyn GpuKernel>> {
    let x = node.input(0)?;
    let y = node.output(0)?;
    let attrs = node.spec.attrs;
    if attrs.string("mode", "constant")? != "constant" {
        return Err(node.unsupported("edge, reflect and wrap modes"));
    }
    let rank = x.shape.len();
    let (pads, value, axes) = if node.spec.opset < 11 {
        let v = Tensor::scalar(attrs.float("value", 0.0)?);
        (attrs.ints("pads")?, Some(v), None)
    } else {
        let pads = constant_ints(node, 1)?.ok_or_else(|| node.unsupported("pads are missing"))?;
        let present = node.inputs.get(2).is_some_and(Option::is_some);
        if present && node.constant(2).is_none() {
            return Err(node.unsupported("a constant_value that is not a constant"));
        }
        (
            pads,
            node.constant(2).filter(|t| !t.is_empty()).cloned(),
            constant_ints(node, 3)?,
        )
    };
    let axes = match axes {
        Some(a) => crate::cpu::reduce::axes::normalize_axes(&a, rank)?,
        None => (0..rank).collect(),
    };
    if pads.len() != 2 * axes.len() || pads.iter().any(|&p| p < 0) {
        return Err(node.unsupported(format!("pads {pads:?} (negative pads crop)")));
    }
    let mut begin = vec![0usize; rank];
    for (i, &ax) in axes.iter().enumerate() {
        begin[ax] = pads[i] as usize;
    }
    let value = match value {
        Some(v) => crate::cpu::shape::cast::cast_tensor(&v, x.dtype)?,
        None => Tensor::zeros(x.dtype, &[]),
    };
    let bits = tensor_bytes(&value).ok_or_else(|| node.unsupported("string values"))?;
    let value = match bits.as_slice() {
        [a] => KernelArg::Bits8(*a),
        [a, b] => KernelArg::Bits16(u16::from_ne_bytes([*a, *b])),
        [a, b, c, d] => KernelArg::Bits32(u32::from_ne_bytes([*a, *b, *c, *d])),
        eight if eight.len() == 8 => {
            KernelArg::I64(i64::from_ne_bytes(eight.try_into().unwrap_or([0; 8])))
        }
        _ => return Err(node.unsupported("the value's element size")),
    };
    let dst = contiguous_strides(&y.shape);
    let offset: usize = begin.iter().zip(&dst).map(|(&b, &s)| b * s as usize).sum();
    let strides = Strides::new(&x.shape, &[&contiguous_strides(&x.shape), &dst])
        .ok_or_else(|| node.unsupported(format!("rank {rank}")))?;
    let (source, element_bytes) = copier(node, rank)?;
    Ok(Box::new(ConstantPad {
        fill: copy::fill_source(element_bytes)
            .ok_or_else(|| node.unsupported(format!("{element_bytes}-byte elements")))?,
        value,
        copies: StridedCopies {
            source,
            element_bytes,
            pieces: vec![Piece {
                input: 0,
                output: 0,
                src_offset: 0,
                dst_offset: offset,
                n: x.len(),
                strides,
            }],
        },
        n: y.len(),
    }))
}

impl GpuKernel for ConstantPad {
    fn launch(&self, gpu: &Gpu, stream: usize, io: &GpuIo<'_>) -> CudaResult<()> {
        if self.n == 0 {
            return Ok(());
        }
        let args = [
            KernelArg::Ptr(io.output(0)?.ptr),
            KernelArg::I64(self.n as i64),
            self.value,
        ];
        gpu.launch(
            &self.fill,
            stream,
            launch_shape(self.n, gpu.info().multiprocessors),
            0,
            &args,
        )?;
        self.copies.launch(gpu, stream, io)
    }
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
        gpu.context()
            .bind_to_thread()
            .map_err(driver("binding the context"))?;
        // SAFETY: both regions hold at least `bytes` (the plan sizes them); the stream
        // orders the copy after the producer.
        unsafe {
            cudarc::driver::result::memcpy_dtod_async(
                y.ptr,
                x.ptr,
                self.bytes,
                gpu.stream(stream).cu_stream(),
            )
        }
        .map_err(driver("copying device to device"))
    }
}

#[cfg(test)]
mod tests {
    //! The copy plans checked without a GPU: the strided-copy kernel's index arithmetic is
    //! replayed on the host and the result compared with the CPU kernel of the same node.
    use super::*;
    use crate::cuda::codegen::MAX_RANK;
    use crate::cuda::ops::TensorDesc;
    use crate::{AttrValue, Attributes, NodeSpec};

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
