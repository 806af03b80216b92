//! `Gemm` (opsets 7, 9, 11, 13): `Y = alpha * A' * B' + beta * C` with optional transposes and
//! `C` broadcast unidirectionally to `(M, N)` (optional from opset 11).

use super::common::{contiguous, min_opset, narrow, output, widen};
use super::matrix::{Layout, MatElem, gemm};
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
}

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

impl Kernel for Gemm {
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
