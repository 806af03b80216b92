//! Unique, ReverseSequence, CenterCropPad, TensorScatter and BitCast: kernels that move or
//! reinterpret elements without arithmetic.

use std::cmp::Ordering;

use half::{bf16, f16};
use ndarray::{ArcArray, Axis, IxDyn, Slice};

use super::util::{min_opset, norm_axes, norm_axis, tensor_from, to_dims};
use crate::cpu::detection::util::nan_greatest_cmp;
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input, opt_input};
use crate::limits::checked_elements;
use crate::{DType, Element, Tensor, dispatch_all, dispatch_copy};

/// Unique (opset 11+): the distinct elements (or slices along `axis`), sorted or in order of
/// first appearance, with the optional outputs `indices` (first occurrences), `inverse_indices`
/// and `counts`.
#[derive(Debug)]
pub struct Unique {
    axis: Option<i64>,
    sorted: bool,
    outputs: usize,
}

/// Builds [`Unique`].
pub fn build_unique(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    min_opset(spec, 11)?;
    spec.attrs.only(&["axis", "sorted"])?;
    if spec.num_inputs != 1 || !(1..=4).contains(&spec.num_outputs) {
        return Err(KernelError::Arity(
            "Unique takes one input and has one to four outputs".into(),
        ));
    }
    Ok(Box::new(Unique {
        axis: spec.attrs.opt_int("axis")?,
        sorted: spec.attrs.flag("sorted", true)?,
        outputs: spec.num_outputs,
    }))
}

/// Lexicographic order of two slices, NaN after every number (numpy's sort order).
fn slice_cmp<T: PartialOrd>(a: &[T], b: &[T]) -> Ordering {
    for (x, y) in a.iter().zip(b) {
        match nan_greatest_cmp(x, y) {
            Ordering::Equal => {}
            other => return other,
        }
    }
    a.len().cmp(&b.len())
}

impl Unique {
    fn typed<T: Element + PartialOrd>(&self, a: &ArcArray<T, IxDyn>) -> Result<Vec<Tensor>> {
        let (a, axis) = match self.axis {
            Some(axis) => (a.clone(), norm_axis(axis, a.ndim())?),
            None => {
                let flat: Vec<T> = a.iter().cloned().collect();
                (
                    ArcArray::from_shape_vec(IxDyn(&[flat.len()]), flat).expect("1-D"),
                    0,
                )
            }
        };
        let n = a.shape()[axis];
        let slices: Vec<Vec<T>> = a
            .axis_iter(Axis(axis))
            .map(|s| s.iter().cloned().collect())
            .collect();
        // Positions sorted by slice, ties by position: each group's first is its first occurrence.
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&i, &j| slice_cmp(&slices[i], &slices[j]).then(i.cmp(&j)));
        let mut groups: Vec<(usize, usize)> = Vec::new(); // (first occurrence, count)
        let mut group_of = vec![0usize; n];
        for (k, &i) in order.iter().enumerate() {
            let new = k == 0 || slice_cmp(&slices[order[k - 1]], &slices[i]) != Ordering::Equal;
            if new {
                groups.push((i, 0));
            }
            let g = groups.len() - 1;
            groups[g].1 += 1;
            group_of[i] = g;
        }
        // Output rank of each group: sorted order as built, else by first occurrence.
        let mut rank: Vec<usize> = (0..groups.len()).collect();
        if !self.sorted {
            let mut by_first: Vec<usize> = (0..groups.len()).collect();
            by_first.sort_by_key(|&g| groups[g].0);
            for (r, &g) in by_first.iter().enumerate() {
                rank[g] = r;
            }
        }
        let mut firsts = vec![0usize; groups.len()];
        let mut counts = vec![0i64; groups.len()];
        for (g, &(first, count)) in groups.iter().enumerate() {
            firsts[rank[g]] = first;
            counts[rank[g]] = count as i64;
        }
        let y = a.select(Axis(axis), &firsts).into_shared();
        let mut outs = vec![T::into_tensor(y)];
        let u = groups.len();
        if self.outputs >= 2 {
            outs.push(tensor_from(
                &[u],
                firsts.iter().map(|&i| i as i64).collect(),
            )?);
        }
        if self.outputs >= 3 {
            let inverse = group_of.iter().map(|&g| rank[g] as i64).collect();
            outs.push(tensor_from(&[n], inverse)?);
        }
        if self.outputs >= 4 {
            outs.push(tensor_from(&[u], counts)?);
        }
        Ok(outs)
    }
}

impl Kernel for Unique {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        match x {
            Tensor::String(a) => self.typed(a),
            Tensor::Bool(a) => self.typed(a),
            Tensor::F32(a) => self.typed(a),
            Tensor::F64(a) => self.typed(a),
            Tensor::F16(a) => self.typed(a),
            Tensor::BF16(a) => self.typed(a),
            Tensor::I8(a) => self.typed(a),
            Tensor::I16(a) => self.typed(a),
            Tensor::I32(a) => self.typed(a),
            Tensor::I64(a) => self.typed(a),
            Tensor::U8(a) => self.typed(a),
            Tensor::U16(a) => self.typed(a),
            Tensor::U32(a) => self.typed(a),
            Tensor::U64(a) => self.typed(a),
            other => Err(KernelError::UnsupportedDType {
                index: 0,
                dtype: other.dtype(),
            }),
        }
    }
}

/// ReverseSequence (opset 10+): for each batch entry `b` (along `batch_axis`), the first
/// `sequence_lens[b]` positions along `time_axis` reversed, the rest kept.
#[derive(Debug)]
pub struct ReverseSequence {
    batch_axis: usize,
    time_axis: usize,
}

/// Builds [`ReverseSequence`].
pub fn build_reverse_sequence(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    min_opset(spec, 10)?;
    spec.attrs.only(&["batch_axis", "time_axis"])?;
    let axis = |name: &str, default: i64| -> Result<usize> {
        match spec.attrs.int(name, default)? {
            v @ 0..=1 => Ok(v as usize),
            v => Err(KernelError::BadAttribute {
                name: name.into(),
                reason: format!("must be 0 or 1, got {v}"),
            }),
        }
    };
    let (batch_axis, time_axis) = (axis("batch_axis", 1)?, axis("time_axis", 0)?);
    if batch_axis == time_axis {
        return Err(KernelError::BadAttribute {
            name: "batch_axis".into(),
            reason: "must differ from time_axis".into(),
        });
    }
    Ok(Box::new(ReverseSequence {
        batch_axis,
        time_axis,
    }))
}

impl Kernel for ReverseSequence {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        let lens = input(inputs, 1)?.to_i64_vec()?;
        if x.rank() < 2 {
            return Err(KernelError::Shape(format!(
                "ReverseSequence needs rank >= 2, got {:?}",
                x.shape()
            )));
        }
        let (batch, time) = (x.shape()[self.batch_axis], x.shape()[self.time_axis]);
        if lens.len() != batch {
            return Err(KernelError::Shape(format!(
                "sequence_lens holds {} values for a batch of {batch}",
                lens.len()
            )));
        }
        let lens: Vec<usize> = lens
            .iter()
            .map(|&l| {
                usize::try_from(l)
                    .ok()
                    .filter(|&l| l <= time)
                    .ok_or_else(|| {
                        KernelError::InvalidValue(format!(
                            "sequence length {l} is outside 0..={time}"
                        ))
                    })
            })
            .collect::<Result<_>>()?;
        let out = dispatch_all!(x, a => {
            let mut out = a.to_owned();
            for (b, &len) in lens.iter().enumerate() {
                let src = a.index_axis(Axis(self.batch_axis), b);
                let mut dst = out.index_axis_mut(Axis(self.batch_axis), b);
                // After removing the batch axis, the time axis moves down when it was after it.
                let t_axis = if self.time_axis > self.batch_axis { self.time_axis - 1 } else { self.time_axis };
                for t in 0..len {
                    dst.index_axis_mut(Axis(t_axis), t)
                        .assign(&src.index_axis(Axis(t_axis), len - 1 - t));
                }
            }
            Element::into_tensor(out.into_shared())
        });
        Ok(vec![out])
    }
}

/// CenterCropPad (opset 18+): each of `axes` (all when absent) cropped or zero-padded to the
/// size `shape` gives it, centred (an odd difference leaves the extra element at the end).
#[derive(Debug)]
pub struct CenterCropPad {
    axes: Option<Vec<i64>>,
}

/// Builds [`CenterCropPad`].
pub fn build_center_crop_pad(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    min_opset(spec, 18)?;
    spec.attrs.only(&["axes"])?;
    if spec.num_inputs != 2 {
        return Err(KernelError::Arity("CenterCropPad takes two inputs".into()));
    }
    Ok(Box::new(CenterCropPad {
        axes: spec.attrs.opt_ints("axes")?,
    }))
}

impl Kernel for CenterCropPad {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        let sizes = to_dims(&input(inputs, 1)?.to_i64_vec()?, "CenterCropPad shape")?;
        let rank = x.rank();
        let axes = match &self.axes {
            Some(a) => norm_axes(a, rank)?,
            None => (0..rank).collect(),
        };
        if axes.len() != sizes.len() {
            return Err(KernelError::Shape(format!(
                "shape holds {} sizes for {} axes",
                sizes.len(),
                axes.len()
            )));
        }
        let mut out_shape = x.shape().to_vec();
        // Per axis: the input range copied and where it lands.
        let mut src = vec![(0usize, 0usize); rank];
        let mut dst = vec![0usize; rank];
        for (d, s) in src.iter_mut().enumerate() {
            *s = (0, x.shape()[d]);
        }
        for (&a, &size) in axes.iter().zip(&sizes) {
            let dim = x.shape()[a];
            out_shape[a] = size;
            if size < dim {
                let start = (dim - size) / 2;
                src[a] = (start, start + size);
            } else {
                dst[a] = (size - dim) / 2;
            }
        }
        checked_elements(&out_shape, x.dtype().size_of())?;
        let out = dispatch_copy!(x, a => {
            let mut out = ndarray::ArrayD::from_elem(IxDyn(&out_shape), Default::default());
            let mut from = a.view();
            let mut to = out.view_mut();
            for d in 0..rank {
                let (s, e) = src[d];
                from.slice_axis_inplace(Axis(d), Slice::from(s..e));
                to.slice_axis_inplace(Axis(d), Slice::from(dst[d]..dst[d] + (e - s)));
            }
            to.assign(&from);
            Element::into_tensor(out.into_shared())
        }, other => return Err(KernelError::UnsupportedDType { index: 0, dtype: other.dtype() }));
        Ok(vec![out])
    }
}

/// TensorScatter (opset 24): `update` written into a copy of `past_cache` along `axis`
/// (default -2, not the first), at `write_indices[b]` onwards for batch entry `b` (0 when
/// absent); `mode` `circular` wraps the positions around the cache length.
#[derive(Debug)]
pub struct TensorScatter {
    axis: i64,
    circular: bool,
}

/// Builds [`TensorScatter`].
pub fn build_tensor_scatter(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    min_opset(spec, 24)?;
    spec.attrs.only(&["axis", "mode"])?;
    if !(2..=3).contains(&spec.num_inputs) {
        return Err(KernelError::Arity(
            "TensorScatter takes two or three inputs".into(),
        ));
    }
    let circular = match spec.attrs.string("mode", "linear")?.as_str() {
        "linear" => false,
        "circular" => true,
        other => {
            return Err(KernelError::BadAttribute {
                name: "mode".into(),
                reason: format!("must be 'linear' or 'circular', got '{other}'"),
            });
        }
    };
    Ok(Box::new(TensorScatter {
        axis: spec.attrs.int("axis", -2)?,
        circular,
    }))
}

impl Kernel for TensorScatter {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let (cache, update) = (input(inputs, 0)?, input(inputs, 1)?);
        if cache.dtype() != update.dtype() {
            return Err(KernelError::DTypeMismatch(format!(
                "past_cache is {}, update is {}",
                cache.dtype(),
                update.dtype()
            )));
        }
        let (cs, us) = (cache.shape(), update.shape());
        let axis = norm_axis(self.axis, cs.len())?;
        let fits = cs.len() == us.len()
            && (0..cs.len()).all(|d| {
                if d == axis {
                    us[d] <= cs[d]
                } else {
                    us[d] == cs[d]
                }
            });
        if axis == 0 || !fits {
            return Err(KernelError::Shape(format!(
                "update {us:?} does not fit past_cache {cs:?} along axis {axis}"
            )));
        }
        let batch = cs[0];
        let starts = match opt_input(inputs, 2) {
            Some(t) => t.to_i64_vec()?,
            None => vec![0; batch],
        };
        if starts.len() != batch {
            return Err(KernelError::Shape(format!(
                "write_indices holds {} values for a batch of {batch}",
                starts.len()
            )));
        }
        let (max_len, len) = (cs[axis], us[axis]);
        let outer: usize = cs[1..axis].iter().product();
        let inner: usize = cs[axis + 1..].iter().product();
        // The cache position of each (batch, update position).
        let mut at = Vec::with_capacity(batch * len);
        for &start in &starts {
            for s in 0..len as i64 {
                let p = start + s;
                let p = if self.circular && max_len > 0 {
                    p.rem_euclid(max_len as i64)
                } else {
                    p
                };
                let p = usize::try_from(p)
                    .ok()
                    .filter(|&p| p < max_len)
                    .ok_or_else(|| {
                        KernelError::InvalidValue(format!(
                            "write position {p} is outside the cache's {max_len}"
                        ))
                    })?;
                at.push(p);
            }
        }
        let out = dispatch_all!(cache, c => {
            let u = update.view()?;
            let u = u.as_standard_layout();
            let src = u.as_slice().expect("standard layout");
            let mut data: Vec<_> = c.iter().cloned().collect();
            for b in 0..batch {
                for o in 0..outer {
                    for s in 0..len {
                        let from = ((b * outer + o) * len + s) * inner;
                        let to = ((b * outer + o) * max_len + at[b * len + s]) * inner;
                        data[to..to + inner].clone_from_slice(&src[from..from + inner]);
                    }
                }
            }
            tensor_from(cs, data)?
        });
        Ok(vec![out])
    }
}

/// BitCast (opset 26): the same bytes read as type `to` of the same width.
#[derive(Debug)]
pub struct BitCast {
    to: DType,
}

/// Builds [`BitCast`].
pub fn build_bitcast(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    min_opset(spec, 26)?;
    spec.attrs.only(&["to"])?;
    let code = spec.attrs.req_int("to")?;
    let to = i32::try_from(code)
        .ok()
        .and_then(DType::from_onnx)
        .filter(|d| bytes_of_type(*d))
        .ok_or_else(|| KernelError::BadAttribute {
            name: "to".into(),
            reason: format!("{code} is not a type BitCast implements"),
        })?;
    Ok(Box::new(BitCast { to }))
}

/// The types whose elements [`to_bytes`] and [`from_bytes`] convert.
fn bytes_of_type(d: DType) -> bool {
    d.is_int() || d.is_float() || d == DType::Bool
}

/// The elements' little-endian bytes.
fn to_bytes(t: &Tensor) -> Option<Vec<u8>> {
    macro_rules! le {
        ($a:expr) => {
            $a.iter().flat_map(|v| v.to_le_bytes()).collect()
        };
    }
    Some(match t {
        Tensor::U8(a) => a.iter().copied().collect(),
        Tensor::I8(a) => le!(a),
        Tensor::Bool(a) => a.iter().map(|&b| u8::from(b)).collect(),
        Tensor::U16(a) => le!(a),
        Tensor::I16(a) => le!(a),
        Tensor::F16(a) => le!(a),
        Tensor::BF16(a) => le!(a),
        Tensor::U32(a) => le!(a),
        Tensor::I32(a) => le!(a),
        Tensor::F32(a) => le!(a),
        Tensor::U64(a) => le!(a),
        Tensor::I64(a) => le!(a),
        Tensor::F64(a) => le!(a),
        _ => return None,
    })
}

/// A tensor of `dtype` and `shape` from little-endian bytes.
fn from_bytes(dtype: DType, shape: &[usize], bytes: &[u8]) -> Result<Tensor> {
    macro_rules! le {
        ($t:ty, $n:expr) => {
            tensor_from(
                shape,
                bytes
                    .chunks_exact($n)
                    .map(|c| <$t>::from_le_bytes(c.try_into().expect("chunk of the width")))
                    .collect::<Vec<$t>>(),
            )
        };
    }
    match dtype {
        DType::U8 => tensor_from(shape, bytes.to_vec()),
        DType::I8 => le!(i8, 1),
        DType::Bool => tensor_from(shape, bytes.iter().map(|&b| b != 0).collect::<Vec<_>>()),
        DType::U16 => le!(u16, 2),
        DType::I16 => le!(i16, 2),
        DType::F16 => le!(f16, 2),
        DType::BF16 => le!(bf16, 2),
        DType::U32 => le!(u32, 4),
        DType::I32 => le!(i32, 4),
        DType::F32 => le!(f32, 4),
        DType::U64 => le!(u64, 8),
        DType::I64 => le!(i64, 8),
        DType::F64 => le!(f64, 8),
        other => Err(KernelError::UnsupportedDType {
            index: 0,
            dtype: other,
        }),
    }
}

impl Kernel for BitCast {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        let from = x.dtype();
        if from.size_of() != self.to.size_of() {
            return Err(KernelError::DTypeMismatch(format!(
                "BitCast from {from} to {} changes the element width",
                self.to
            )));
        }
        let bytes = to_bytes(x).ok_or(KernelError::UnsupportedDType {
            index: 0,
            dtype: from,
        })?;
        Ok(vec![from_bytes(self.to, x.shape(), &bytes)?])
    }
}
