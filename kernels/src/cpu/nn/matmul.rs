//! `MatMul` (opset 1+; implemented from 7): numpy `matmul` semantics — batched, broadcast batch
//! dims, 1-d operands promoted and their unit dim removed again.

use rayon::prelude::*;

use super::common::{contiguous, min_opset, narrow, output, widen};
use super::gemm_op::{ProductA, packed_product};
use super::matrix::{Layout, MatElem, gemm};
use super::packed_gemm::{self, BSource, PackedA};
use super::packed_weights::WeightCache;
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input};
use crate::{DType, Element, KernelOptions, Tensor};

/// A built `MatMul`, or `spillway` `MatMulBias`.
#[derive(Debug)]
pub struct MatMul {
    /// `Bᵀ` packed for the packed GEMM, when `B` is an `f32` matrix (a layer's weights).
    packed: WeightCache,
    /// `MatMulBias`: a third input, `f32` of `B`'s column count, is added to every row.
    bias: bool,
}

/// Builds `MatMul`.
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    min_opset(spec.opset, 1, "MatMul")?;
    spec.attrs.only(&[])?;
    Ok(Box::new(MatMul {
        packed: WeightCache::new(spec.options),
        bias: false,
    }))
}

/// Builds `spillway` `MatMulBias`: `Y = MatMul(A, B) + bias` in `f32`, `bias` 1-D with one
/// element per column of `B`, added to every row of `Y` (in the packed GEMM's tiles where `B`
/// is a weight matrix). The graph passes make it from a `MatMul` and the `Add` of its bias.
pub fn build_with_bias(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    spec.attrs.only(&[])?;
    Ok(Box::new(MatMul {
        packed: WeightCache::new(spec.options),
        bias: true,
    }))
}

/// Products with fewer rows than this (all of `A`'s rows, batches included) keep the generic
/// GEMM: the packed one computes `Yᵀ = Bᵀ · Aᵀ`, where the rows become the micro-kernel's tile
/// width (16 or 32).
const PACKED_MIN_ROWS: usize = 16;

impl MatMul {
    /// `A · B` for an `f32` `A` of any rank ≥ 2 and an `f32` matrix `B` (a transformer's
    /// projections: tokens × features times weights) through the packed GEMM, with `B` packed
    /// once: `A`'s batches are one matrix of all their rows. `None` where it does not apply
    /// (another rank or type, few rows, no AVX2/AVX-512, shapes the generic path rejects).
    fn packed_f32(&self, a: &Tensor, b: &Tensor, bias: Option<&[f32]>) -> Option<Result<Tensor>> {
        let (Tensor::F32(_), Tensor::F32(_)) = (a, b) else {
            return None;
        };
        let (sa, sb) = (a.shape(), b.shape());
        let [k, n] = *sb else { return None };
        let (&ka, batch) = sa.split_last()?;
        let m: usize = batch.iter().product();
        if batch.is_empty() || ka != k || m < PACKED_MIN_ROWS || n == 0 || k == 0 {
            return None;
        }
        let xs = match contiguous::<f32>(a) {
            Ok(xs) => xs,
            Err(e) => return Some(Err(e)),
        };
        let y = packed_product(&self.packed, ProductA::Rows(&xs), (m, k, n), b, false, bias)?;
        let mut shape = batch.to_vec();
        shape.push(n);
        Some(output(&shape, y))
    }
}

/// Per-matrix work (multiply-adds) below which batches are spread over threads instead of
/// relying on the matrix core's own threading.
const SMALL_MATRIX_WORK: usize = 1 << 18;

/// The broadcast plan of a batched product.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchPlan {
    /// Rows of each product.
    pub m: usize,
    /// Inner dimension.
    pub k: usize,
    /// Columns of each product.
    pub n: usize,
    /// Element offset of each batch's A and B matrix.
    pub offsets: Vec<(usize, usize)>,
    /// The numpy output shape (unit dims of 1-d operands removed).
    pub out_shape: Vec<usize>,
}

/// Plans `a @ b` for row-major contiguous operands of shapes `a` and `b` (numpy rules).
pub fn plan(a: &[usize], b: &[usize]) -> Result<BatchPlan> {
    if a.is_empty() || b.is_empty() {
        return Err(KernelError::Shape(
            "MatMul operands must have rank >= 1".into(),
        ));
    }
    let a2: Vec<usize> = if a.len() == 1 {
        vec![1, a[0]]
    } else {
        a.to_vec()
    };
    let b2: Vec<usize> = if b.len() == 1 {
        vec![b[0], 1]
    } else {
        b.to_vec()
    };
    let (m, k) = (a2[a2.len() - 2], a2[a2.len() - 1]);
    let (kb, n) = (b2[b2.len() - 2], b2[b2.len() - 1]);
    if k != kb {
        return Err(KernelError::Shape(format!(
            "MatMul inner dims differ: {a:?} @ {b:?}"
        )));
    }
    let (ab, bb) = (&a2[..a2.len() - 2], &b2[..b2.len() - 2]);
    let rank = ab.len().max(bb.len());
    let dim = |s: &[usize], i: usize| {
        if i + s.len() >= rank {
            s[i + s.len() - rank]
        } else {
            1
        }
    };
    let mut batch = Vec::with_capacity(rank);
    for i in 0..rank {
        let (x, y) = (dim(ab, i), dim(bb, i));
        if x != y && x != 1 && y != 1 {
            return Err(KernelError::Shape(format!(
                "MatMul batch dims do not broadcast: {a:?} @ {b:?}"
            )));
        }
        batch.push(if x == 1 { y } else { x });
    }
    // Element strides of each operand's batch dims (0 where broadcast).
    let strides = |s: &[usize], mat: usize| -> Vec<usize> {
        let mut st = vec![0; rank];
        let mut acc = mat;
        for i in (0..rank).rev() {
            let d = dim(s, i);
            st[i] = if d == 1 { 0 } else { acc };
            acc *= d;
        }
        st
    };
    let (sa, sb) = (strides(ab, m * k), strides(bb, k * n));
    let total: usize = batch.iter().product();
    let mut offsets = Vec::with_capacity(total);
    let mut idx = vec![0; rank];
    for _ in 0..total {
        let oa = idx.iter().zip(&sa).map(|(i, s)| i * s).sum();
        let ob = idx.iter().zip(&sb).map(|(i, s)| i * s).sum();
        offsets.push((oa, ob));
        for d in (0..rank).rev() {
            idx[d] += 1;
            if idx[d] < batch[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    let mut out_shape = batch;
    if a.len() > 1 {
        out_shape.push(m);
    }
    if b.len() > 1 {
        out_shape.push(n);
    }
    Ok(BatchPlan {
        m,
        k,
        n,
        offsets,
        out_shape,
    })
}

/// Runs a planned batched product on contiguous data.
pub fn batched<T: MatElem>(p: &BatchPlan, a: &[T], b: &[T]) -> Result<Vec<T>> {
    let (m, k, n) = (p.m, p.k, p.n);
    let mut y = crate::output_buffer::filled(0, p.offsets.len() * m * n, T::ZERO);
    if y.is_empty() {
        return Ok(y);
    }
    let one = |(&(oa, ob), c): (&(usize, usize), &mut [T])| {
        gemm(
            T::ONE,
            &a[oa..],
            Layout::row_major(m, k),
            &b[ob..],
            Layout::row_major(k, n),
            T::ZERO,
            c,
            Layout::row_major(m, n),
        )
    };
    if p.offsets.len() > 1 && m * k * n < SMALL_MATRIX_WORK {
        p.offsets
            .par_iter()
            .zip(y.par_chunks_mut(m * n))
            .try_for_each(one)?;
    } else {
        p.offsets
            .iter()
            .zip(y.chunks_mut(m * n))
            .try_for_each(one)?;
    }
    Ok(y)
}

fn typed<T: MatElem + Element>(p: &BatchPlan, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let y = batched(p, &contiguous::<T>(a)?, &contiguous::<T>(b)?)?;
    output(&p.out_shape, y)
}

/// Per-matrix multiply-adds from which [`packed_batches`] packs each batch's `A`.
const PACKED_BATCH_WORK: usize = 1 << 15;

/// Batches per thread from which [`packed_batches`] computes each product on one thread.
const SERIAL_BATCHES_PER_THREAD: usize = 2;

/// `A · B` in `f32` with neither operand a weight (attention's `Q · Kᵀ` and `P · V`): each
/// batch's `A` packed on the spot for the packed micro-kernels, the batches spread over the
/// threads. `matrixmultiply`, which [`batched`] calls, has no AVX-512 kernels: BERT-base's
/// `[12, 128, 64] · [12, 64, 128]` took 150–157 µs through it on 2 threads. `None` where the
/// CPU has no packed kernels or the matrices are small.
fn packed_batches(
    p: &BatchPlan,
    a: &Tensor,
    b: &Tensor,
    options: &KernelOptions,
) -> Option<Result<Tensor>> {
    let (Tensor::F32(_), Tensor::F32(_)) = (a, b) else {
        return None;
    };
    let (m, k, n) = (p.m, p.k, p.n);
    let isa = options.gemm_isa()?;
    if m * k * n < PACKED_BATCH_WORK {
        return None;
    }
    let (xs, ws) = match (contiguous::<f32>(a), contiguous::<f32>(b)) {
        (Ok(xs), Ok(ws)) => (xs, ws),
        (Err(e), _) | (_, Err(e)) => return Some(Err(e)),
    };
    // Every element is written by its batch's product.
    let mut y = crate::output_buffer::overwritable::<f32>(0, p.offsets.len() * m * n);
    // With a few batches per thread each product runs on one thread: split again, each
    // would pack its `B` in parallel pieces and spread its rows, and BERT's 12 products of
    // [128, 64] · [64, 128] on 2 threads spent more time handing those pieces around.
    let batches_per_thread = p.offsets.len() / rayon::current_num_threads();
    let product = |(&(oa, ob), c): (&(usize, usize), &mut [f32])| {
        let packed = PackedA::with_isa(&xs[oa..oa + m * k], m, k, isa);
        let b = BSource::Dense {
            data: &ws[ob..ob + k * n],
            ld: n,
        };
        match batches_per_thread >= SERIAL_BATCHES_PER_THREAD {
            true => packed_gemm::serially(|| packed.multiply(b, n, c, n, None, None)),
            false => packed.multiply(b, n, c, n, None, None),
        }
    };
    p.offsets
        .par_iter()
        .zip(y.par_chunks_mut(m * n))
        .for_each(product);
    Some(output(&p.out_shape, y))
}

impl MatMul {
    /// `MatMulBias`: `A · B + bias`, all `f32`.
    fn with_bias(&self, a: &Tensor, b: &Tensor, bias: &Tensor) -> Result<Tensor> {
        let (Tensor::F32(_), Tensor::F32(bias)) = (a, bias) else {
            let (index, dtype) = match a {
                Tensor::F32(_) => (2, bias.dtype()),
                other => (0, other.dtype()),
            };
            return Err(KernelError::UnsupportedDType { index, dtype });
        };
        let n = b.shape().last().copied().unwrap_or(1);
        if bias.ndim() != 1 || bias.len() != n || b.shape().len() < 2 {
            return Err(KernelError::Shape(format!(
                "MatMulBias: bias of shape {:?} for B of shape {:?} (1-D, one per column)",
                bias.shape(),
                b.shape()
            )));
        }
        let bias = bias.as_standard_layout();
        let bias = bias.as_slice().expect("standard layout is contiguous");
        if let Some(y) = self.packed_f32(a, b, Some(bias)) {
            return y;
        }
        let Tensor::F32(mut y) = product(a, b, self.packed.options())? else {
            unreachable!("an f32 product is f32")
        };
        let rows = y.as_slice_mut().expect("a new product is contiguous");
        rows.chunks_exact_mut(n)
            .for_each(|row| row.iter_mut().zip(bias).for_each(|(v, &c)| *v += c));
        Ok(Tensor::F32(y))
    }
}

impl Kernel for MatMul {
    fn choice(&self) -> Option<String> {
        super::packed_weights::choice(&self.packed, None)
    }

    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let (a, b) = (input(inputs, 0)?, input(inputs, 1)?);
        if a.dtype() != b.dtype() {
            return Err(KernelError::DTypeMismatch(format!(
                "MatMul of {} and {}",
                a.dtype(),
                b.dtype()
            )));
        }
        if self.bias {
            return self.with_bias(a, b, input(inputs, 2)?).map(|y| vec![y]);
        }
        if let Some(y) = self.packed_f32(a, b, None) {
            return Ok(vec![y?]);
        }
        Ok(vec![product(a, b, self.packed.options())?])
    }
}

/// `A · B` of any dtype the kernel takes, off the weight-matrix path: activations on both sides
/// through [`packed_batches`], else the generic batched GEMM.
fn product(a: &Tensor, b: &Tensor, options: &KernelOptions) -> Result<Tensor> {
    // Planned once a dtype is known to be taken (an unsupported one is the error to report).
    let planned = || plan(a.shape(), b.shape());
    let dtype = a.dtype();
    match dtype {
        DType::F32 | DType::F16 | DType::BF16 => {
            let p = planned()?;
            if let Some(y) = packed_batches(&p, a, b, options) {
                return y;
            }
            typed::<f32>(&p, &widen(a, 0)?, &widen(b, 1)?).and_then(|y| narrow(y, dtype))
        }
        DType::F64 => typed::<f64>(&planned()?, a, b),
        DType::I32 => typed::<i32>(&planned()?, a, b),
        DType::I64 => typed::<i64>(&planned()?, a, b),
        DType::U32 => typed::<u32>(&planned()?, a, b),
        DType::U64 => typed::<u64>(&planned()?, a, b),
        other => Err(KernelError::UnsupportedDType {
            index: 0,
            dtype: other,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Attributes;
    use crate::test_values::uniform;

    /// A `MatMul` kernel (opset 13).
    fn matmul() -> Box<dyn Kernel> {
        let spec = NodeSpec {
            op_type: "MatMul",
            domain: "",
            opset: 13,
            attrs: &Attributes::new(),
            num_inputs: 2,
            num_outputs: 1,
            options: Default::default(),
        };
        build(&spec).unwrap()
    }

    /// `A · B` for `A` of `batch × m × k` and `B` of `k × n`, by the definition in f64.
    fn reference(a: &[f32], b: &[f32], rows: usize, k: usize, n: usize) -> Vec<f64> {
        let mut y = vec![0.0f64; rows * n];
        for r in 0..rows {
            for p in 0..k {
                for j in 0..n {
                    y[r * n + j] += a[r * k + p] as f64 * b[p * n + j] as f64;
                }
            }
        }
        y
    }

    /// Batches of activations on both sides through the packed path (each batch's `A` packed
    /// on the spot), with `B`'s batches broadcast over `A`'s first axis: each output matrix
    /// against the definition for its pair.
    #[test]
    fn batched_products_of_activations_match_the_definition() {
        let kernel = matmul();
        let (m, k, n) = (20, 24, 70);
        assert!(m * k * n >= PACKED_BATCH_WORK, "the packed path runs");
        let a = uniform(2 * 3 * m * k, 11);
        let w = uniform(3 * k * n, 13);
        let x = Tensor::from_shape_vec(&[2, 3, m, k], a.clone()).unwrap();
        let b = Tensor::from_shape_vec(&[3, k, n], w.clone()).unwrap();
        let y = kernel.run(&[Some(&x), Some(&b)]).unwrap().remove(0);
        assert_eq!(y.shape(), [2, 3, m, n]);
        let got = y.to_f64_vec().unwrap();
        for (batch, out) in got.chunks(m * n).enumerate() {
            let (ia, ib) = (batch * m * k, batch % 3 * k * n);
            let want = reference(&a[ia..ia + m * k], &w[ib..ib + k * n], m, k, n);
            for (i, (&g, &r)) in out.iter().zip(&want).enumerate() {
                assert!(
                    (g - r).abs() <= 1e-5 * (1.0 + r.abs()),
                    "batch {batch}: {i} {g} vs {r}"
                );
            }
        }
    }

    /// Batched `A` times a weight matrix through the packed path: features in whole vectors
    /// (written token-major) and not (`Yᵀ` transposed), the same weights again (cached) and
    /// other weights after them (not the cached ones).
    #[test]
    fn products_with_a_weight_matrix_match_the_definition() {
        let kernel = matmul();
        let (batch, m, k) = (2, 20, 24);
        let a = uniform(batch * m * k, 3);
        let x = Tensor::from_shape_vec(&[batch, m, k], a.clone()).unwrap();
        for (n, seed) in [(48, 5), (48, 5), (40, 7), (48, 9)] {
            let w = uniform(k * n, seed);
            let b = Tensor::from_shape_vec(&[k, n], w.clone()).unwrap();
            let y = kernel.run(&[Some(&x), Some(&b)]).unwrap().remove(0);
            assert_eq!(y.shape(), [batch, m, n]);
            let got = y.to_f64_vec().unwrap();
            for (i, (&g, &r)) in got
                .iter()
                .zip(&reference(&a, &w, batch * m, k, n))
                .enumerate()
            {
                assert!(
                    (g - r).abs() <= 1e-5 * (1.0 + r.abs()),
                    "n {n}: {i} {g} vs {r}"
                );
            }
        }
    }

    /// `MatMulBias`: the packed path (`n` in whole vectors and not, with a batch axis) and the
    /// generic one (a few rows), each against the definition plus the bias; a bias of the
    /// wrong shape or type is refused.
    #[test]
    fn products_with_a_bias_match_the_definition() {
        let spec = NodeSpec {
            op_type: "MatMulBias",
            domain: crate::cpu::nn::SPILLWAY_DOMAIN,
            opset: 1,
            attrs: &Attributes::new(),
            num_inputs: 3,
            num_outputs: 1,
            options: Default::default(),
        };
        let kernel = build_with_bias(&spec).unwrap();
        let k = 24;
        for (rows, n) in [(40, 48), (40, 40), (3, 48)] {
            let a = uniform(rows * k, 3);
            let w = uniform(k * n, 5);
            let c = uniform(n, 7);
            let x = Tensor::from_shape_vec(&[1, rows, k], a.clone()).unwrap();
            let b = Tensor::from_shape_vec(&[k, n], w.clone()).unwrap();
            let bias = Tensor::from_shape_vec(&[n], c.clone()).unwrap();
            let y = kernel
                .run(&[Some(&x), Some(&b), Some(&bias)])
                .unwrap()
                .remove(0);
            assert_eq!(y.shape(), [1, rows, n]);
            let want = reference(&a, &w, rows, k, n);
            for (i, (&g, &r)) in y.to_f64_vec().unwrap().iter().zip(&want).enumerate() {
                let r = r + c[i % n] as f64;
                assert!(
                    (g - r).abs() <= 1e-5 * (1.0 + r.abs()),
                    "{rows}×{n}: {i} {g} vs {r}"
                );
            }
            let wrong = Tensor::from_shape_vec(&[1, n], c.clone()).unwrap();
            assert!(matches!(
                kernel.run(&[Some(&x), Some(&b), Some(&wrong)]),
                Err(KernelError::Shape(_))
            ));
            let ints = Tensor::from_shape_vec(&[n], vec![1i64; n]).unwrap();
            assert!(matches!(
                kernel.run(&[Some(&x), Some(&b), Some(&ints)]),
                Err(KernelError::UnsupportedDType { index: 2, .. })
            ));
        }
    }
}
