//! `Gemm` (opsets 7, 9, 11, 13): `Y = alpha * A' * B' + beta * C` with optional transposes and
//! `C` broadcast unidirectionally to `(M, N)` (optional from opset 11).

use super::common::{contiguous, min_opset, narrow, output, widen};
use super::matrix::{Layout, MatElem, gemm};
use super::packed_gemm::{BSource, Isa, PackedA};
use super::packed_weights::WeightCache;
use crate::cpu::transpose_block::transpose_parallel;
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input, opt_input};
use crate::{DType, Element, Tensor};

/// A built `Gemm`.
#[derive(Debug)]
pub struct Gemm {
    alpha: f32,
    beta: f32,
    trans_a: bool,
    trans_b: bool,
    c_optional: bool,
    /// `B'ᵀ` packed for the packed GEMM (an `f32` `B` of a product with enough rows).
    packed: WeightCache,
}

/// Products with fewer rows than this (`M`, the rows of `A'`) keep the generic GEMM: the packed
/// one computes `Yᵀ = B'ᵀ · A'ᵀ`, where `M` becomes the micro-kernel's tile width (16 or 32).
const PACKED_MIN_ROWS: usize = 16;

/// Builds `Gemm`.
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    min_opset(spec.opset, 7, "Gemm")?;
    spec.attrs.only(&["alpha", "beta", "transA", "transB"])?;
    let flag = |name: &str| -> Result<bool> {
        match spec.attrs.int(name, 0)? {
            0 => Ok(false),
            1 => Ok(true),
            v => Err(KernelError::BadAttribute {
                name: name.into(),
                reason: format!("must be 0 or 1, got {v}"),
            }),
        }
    };
    Ok(Box::new(Gemm {
        alpha: spec.attrs.float("alpha", 1.0)?,
        beta: spec.attrs.float("beta", 1.0)?,
        trans_a: flag("transA")?,
        trans_b: flag("transB")?,
        c_optional: spec.opset >= 11,
        packed: WeightCache::new(spec.options),
    }))
}

/// An element type Gemm runs on, with the conversion of the float attributes.
trait GemmElem: MatElem + Element {
    fn from_attr(v: f32) -> Option<Self>;
}
impl GemmElem for f32 {
    fn from_attr(v: f32) -> Option<Self> {
        Some(v)
    }
}
impl GemmElem for f64 {
    fn from_attr(v: f32) -> Option<Self> {
        Some(v as f64)
    }
}
macro_rules! int_gemm {
    ($($t:ty),*) => {$(
        impl GemmElem for $t {
            fn from_attr(v: f32) -> Option<Self> {
                (v.fract() == 0.0 && v >= <$t>::MIN as f32 && v <= <$t>::MAX as f32).then_some(v as $t)
            }
        }
    )*};
}
int_gemm!(i32, i64, u32, u64);

impl Gemm {
    fn typed<T: GemmElem>(&self, a: &Tensor, b: &Tensor, c: Option<&Tensor>) -> Result<Tensor> {
        let (sa, sb) = (a.shape(), b.shape());
        if sa.len() != 2 || sb.len() != 2 {
            return Err(KernelError::Shape(format!(
                "Gemm needs 2-d A and B, got {sa:?}, {sb:?}"
            )));
        }
        let la = Layout::row_major(sa[0], sa[1]);
        let la = if self.trans_a { la.t() } else { la };
        let lb = Layout::row_major(sb[0], sb[1]);
        let lb = if self.trans_b { lb.t() } else { lb };
        if la.cols != lb.rows {
            return Err(KernelError::Shape(format!(
                "Gemm inner dims differ: A' is {}x{}, B' is {}x{}",
                la.rows, la.cols, lb.rows, lb.cols
            )));
        }
        let (m, n) = (la.rows, lb.cols);
        let bad = |name: &str, v: f32| KernelError::UnsupportedAttribute {
            name: name.into(),
            reason: format!("{v} is not representable in {}", T::DTYPE),
        };
        let alpha = T::from_attr(self.alpha).ok_or_else(|| bad("alpha", self.alpha))?;
        let beta = T::from_attr(self.beta).ok_or_else(|| bad("beta", self.beta))?;
        let mut y = crate::output_buffer::filled(0, m * n, T::ZERO);
        let mut beta_eff = T::ZERO;
        if let Some(c) = c {
            let sc = c.shape();
            let (cr, cc) = match sc.len() {
                0 => (1, 1),
                1 => (1, sc[0]),
                2 => (sc[0], sc[1]),
                _ => return Err(KernelError::Shape(format!("Gemm C has rank {}", sc.len()))),
            };
            if (cr != 1 && cr != m) || (cc != 1 && cc != n) {
                return Err(KernelError::Shape(format!(
                    "Gemm C {sc:?} does not broadcast to ({m}, {n})"
                )));
            }
            let cs = contiguous::<T>(c)?;
            for i in 0..m {
                for j in 0..n {
                    y[i * n + j] =
                        cs[(if cr == 1 { 0 } else { i }) * cc + if cc == 1 { 0 } else { j }];
                }
            }
            beta_eff = beta;
        }
        gemm(
            alpha,
            &contiguous::<T>(a)?,
            la,
            &contiguous::<T>(b)?,
            lb,
            beta_eff,
            &mut y,
            Layout::row_major(m, n),
        )?;
        output(&[m, n], y)
    }
}

impl Gemm {
    /// `Y = A' · B' + beta · C` for `f32` operands through the packed GEMM, computed as
    /// `Yᵀ = B'ᵀ · A'ᵀ` with `B'ᵀ` (the weights of a fully connected layer) packed once, then
    /// transposed into `Y`. `None` where it does not apply: `alpha ≠ 1`, a `C` other than a
    /// row vector broadcast over `Y`'s rows, few rows, or no AVX2/AVX-512.
    fn packed_f32(&self, a: &Tensor, b: &Tensor, c: Option<&Tensor>) -> Option<Result<Tensor>> {
        let (Tensor::F32(_), Tensor::F32(_)) = (a, b) else {
            return None;
        };
        let (sa, sb) = (a.shape(), b.shape());
        if self.alpha != 1.0 || sa.len() != 2 || sb.len() != 2 {
            return None;
        }
        let (m, k) = if self.trans_a {
            (sa[1], sa[0])
        } else {
            (sa[0], sa[1])
        };
        let (kb, n) = if self.trans_b {
            (sb[1], sb[0])
        } else {
            (sb[0], sb[1])
        };
        if k != kb || m < PACKED_MIN_ROWS || n == 0 || k == 0 {
            return None;
        }
        let bias = match c {
            None => None,
            Some(c) if c.dtype() == DType::F32 && c.len() == n && c.shape().last() == Some(&n) => {
                let cs = match contiguous::<f32>(c) {
                    Ok(cs) => cs,
                    Err(e) => return Some(Err(e)),
                };
                Some(cs.iter().map(|&v| self.beta * v).collect::<Vec<f32>>())
            }
            Some(_) => return None,
        };
        let xs = match contiguous::<f32>(a) {
            Ok(xs) => xs,
            Err(e) => return Some(Err(e)),
        };
        let a = match self.trans_a {
            true => ProductA::Columns(&xs),
            false => ProductA::Rows(&xs),
        };
        let y = packed_product(&self.packed, a, (m, k, n), b, self.trans_b, bias.as_deref())?;
        Some(output(&[m, n], y))
    }
}

/// The left operand of [`packed_product`], `m × k`.
pub(super) enum ProductA<'a> {
    /// Row-major: `m` rows of `k`.
    Rows(&'a [f32]),
    /// Transposed: `k` rows of `m`.
    Columns(&'a [f32]),
}

/// `Y = A · B (+ bias per column)`, `m × n` row-major, through the packed GEMM with `Bᵀ` (a
/// layer's weights: `B` of `k × n`, or `n × k` when `trans_b`) packed once into `cache`: in
/// position tiles that write `Y` as it is where they can (AVX-512, `n` in whole vectors, `A`
/// row-major), else as `Yᵀ = Bᵀ · Aᵀ` transposed into `Y`. `None` without AVX2/AVX-512.
pub(super) fn packed_product(
    cache: &WeightCache,
    a: ProductA<'_>,
    (m, k, n): (usize, usize, usize),
    b: &Tensor,
    trans_b: bool,
    bias: Option<&[f32]>,
) -> Option<Vec<f32>> {
    let packed = cache.get_or_pack(b, true, || {
        let bs = contiguous::<f32>(b).ok()?;
        // The packed operand is `Bᵀ`, `n × k` row-major: `B` itself when transposed.
        let bt: std::borrow::Cow<'_, [f32]> = if trans_b {
            bs
        } else {
            std::borrow::Cow::Owned(transpose(&bs, k, n))
        };
        Some(vec![PackedA::with_options(&bt, n, k, cache.options())?])
    })?;
    let weights = &packed[0];
    let a_t = match a {
        // Token-major on AVX-512, where it was measured against the transposed product.
        ProductA::Rows(x) if weights.takes_token_major() && weights.isa() == Isa::Avx512 => {
            return Some(crate::output_buffer::build(0, m * n, |y| {
                weights.multiply_token_major(x, m, y, bias)
            }));
        }
        ProductA::Rows(x) => BSource::Transposed { data: x, ld: k },
        ProductA::Columns(x) => BSource::Dense { data: x, ld: m },
    };
    let mut yt = vec![0.0f32; n * m];
    weights.multiply(a_t, m, &mut yt, m, bias, None);
    Some(crate::output_buffer::build(0, m * n, |y| {
        transpose_parallel(&yt, n, m, y)
    }))
}

/// The transpose of the row-major `rows × cols` matrix `a`.
pub(super) fn transpose(a: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut out = vec![0.0; rows * cols];
    transpose_parallel(a, rows, cols, &mut out);
    out
}

impl Kernel for Gemm {
    fn choice(&self) -> Option<String> {
        super::packed_weights::choice(&self.packed, None)
    }

    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let (a, b) = (input(inputs, 0)?, input(inputs, 1)?);
        let c = if self.c_optional {
            opt_input(inputs, 2)
        } else {
            Some(input(inputs, 2)?)
        };
        let dtype = a.dtype();
        for (i, t) in [Some(b), c].into_iter().enumerate() {
            if let Some(t) = t
                && t.dtype() != dtype
            {
                return Err(KernelError::DTypeMismatch(format!(
                    "Gemm input {} is {}, A is {dtype}",
                    i + 1,
                    t.dtype()
                )));
            }
        }
        if let Some(y) = self.packed_f32(a, b, c) {
            return Ok(vec![y?]);
        }
        let y = match dtype {
            DType::F32 | DType::F16 | DType::BF16 => {
                let c = c.map(|c| widen(c, 2)).transpose()?;
                let y = self.typed::<f32>(&widen(a, 0)?, &widen(b, 1)?, c.as_ref())?;
                narrow(y, dtype)?
            }
            DType::F64 => self.typed::<f64>(a, b, c)?,
            DType::I32 => self.typed::<i32>(a, b, c)?,
            DType::I64 => self.typed::<i64>(a, b, c)?,
            DType::U32 => self.typed::<u32>(a, b, c)?,
            DType::U64 => self.typed::<u64>(a, b, c)?,
            other => {
                return Err(KernelError::UnsupportedDType {
                    index: 0,
                    dtype: other,
                });
            }
        };
        Ok(vec![y])
    }
}
