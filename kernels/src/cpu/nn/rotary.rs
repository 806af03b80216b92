//! `RotaryEmbedding` (opset 23): rotates the first `rotary_embedding_dim` values of every head
//! vector by the angles whose cosines and sines the caches hold, either in two halves (`x1` the
//! first half, `x2` the second) or interleaved (`x1` the even, `x2` the odd positions):
//! `x1' = cos·x1 - sin·x2`, `x2' = sin·x1 + cos·x2`. The input is `[B, H, S, D]`, or
//! `[B, S, H·D]` with `num_heads`; the caches are indexed by `position_ids` (`[B, S]`) when
//! given (`[max_position, rot/2]`), else they are `[B, S, rot/2]`. Computed in `f64`.

use super::common::min_opset;
use crate::cpu::shape::cast::cast_tensor;
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input, opt_input};
use crate::{DType, Tensor};

/// A built `RotaryEmbedding`.
#[derive(Debug)]
pub struct Rotary {
    interleaved: bool,
    num_heads: usize,
    rotary_dim: usize,
}

/// Builds `RotaryEmbedding`.
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    min_opset(spec.opset, 23, "RotaryEmbedding")?;
    spec.attrs
        .only(&["interleaved", "num_heads", "rotary_embedding_dim"])?;
    if !(3..=4).contains(&spec.num_inputs) {
        return Err(KernelError::Arity(
            "RotaryEmbedding takes three or four inputs".into(),
        ));
    }
    let non_negative = |name: &str| -> Result<usize> {
        let v = spec.attrs.int(name, 0)?;
        usize::try_from(v).map_err(|_| KernelError::BadAttribute {
            name: name.into(),
            reason: format!("must not be negative, got {v}"),
        })
    };
    Ok(Box::new(Rotary {
        interleaved: spec.attrs.flag("interleaved", false)?,
        num_heads: non_negative("num_heads")?,
        rotary_dim: non_negative("rotary_embedding_dim")?,
    }))
}

impl Kernel for Rotary {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let (x, cos, sin) = (input(inputs, 0)?, input(inputs, 1)?, input(inputs, 2)?);
        let positions = opt_input(inputs, 3);
        let dtype = x.dtype();
        if !dtype.is_float() {
            return Err(KernelError::UnsupportedDType { index: 0, dtype });
        }
        // (batch, heads, sequence, head size) and whether heads come before the sequence.
        let (b, h, s, d, heads_first) = match *x.shape() {
            [b, h, s, d] => (b, h, s, d, true),
            [b, s, hidden] => {
                let h = self.num_heads;
                if h == 0 || hidden % h != 0 {
                    return Err(KernelError::BadAttribute {
                        name: "num_heads".into(),
                        reason: format!(
                            "a 3-D input needs num_heads dividing its hidden size {hidden}, got {h}"
                        ),
                    });
                }
                (b, h, s, hidden / h, false)
            }
            _ => {
                return Err(KernelError::Shape(format!(
                    "RotaryEmbedding takes a 3-D or 4-D input, got {:?}",
                    x.shape()
                )));
            }
        };
        let rot = if self.rotary_dim == 0 {
            d
        } else {
            self.rotary_dim
        };
        if rot > d || rot % 2 != 0 {
            return Err(KernelError::BadAttribute {
                name: "rotary_embedding_dim".into(),
                reason: format!("{rot} must be even and at most the head size {d}"),
            });
        }
        let half = rot / 2;
        let (cs, ss) = (cos.to_f64_vec()?, sin.to_f64_vec()?);
        if cos.shape() != sin.shape() || cos.shape().last() != Some(&half) {
            return Err(KernelError::Shape(format!(
                "the caches {:?} and {:?} must share a shape ending in {half}",
                cos.shape(),
                sin.shape()
            )));
        }
        // The cache row of each (batch, position).
        let rows: Vec<usize> = match positions {
            Some(p) => {
                let ids = p.to_i64_vec()?;
                if p.shape() != [b, s] {
                    return Err(KernelError::Shape(format!(
                        "position_ids must be [{b}, {s}], got {:?}",
                        p.shape()
                    )));
                }
                let max = cs.len() / half.max(1);
                ids.iter()
                    .map(|&i| {
                        usize::try_from(i).ok().filter(|&i| i < max).ok_or_else(|| {
                            KernelError::InvalidValue(format!(
                                "position id {i} is outside the cache's {max} rows"
                            ))
                        })
                    })
                    .collect::<Result<_>>()?
            }
            None => {
                if cs.len() != b * s * half {
                    return Err(KernelError::Shape(format!(
                        "without position_ids the caches must be [{b}, {s}, {half}], got {:?}",
                        cos.shape()
                    )));
                }
                (0..b * s).collect()
            }
        };
        let mut y = x.to_f64_vec()?;
        for bi in 0..b {
            for si in 0..s {
                let row = rows[bi * s + si] * half;
                let (c, sn) = (&cs[row..row + half], &ss[row..row + half]);
                for hi in 0..h {
                    let base = if heads_first {
                        ((bi * h + hi) * s + si) * d
                    } else {
                        ((bi * s + si) * h + hi) * d
                    };
                    let v = &mut y[base..base + rot];
                    for i in 0..half {
                        let (i1, i2) = if self.interleaved {
                            (2 * i, 2 * i + 1)
                        } else {
                            (i, i + half)
                        };
                        let (x1, x2) = (v[i1], v[i2]);
                        v[i1] = c[i] * x1 - sn[i] * x2;
                        v[i2] = sn[i] * x1 + c[i] * x2;
                    }
                }
            }
        }
        let t = Tensor::from_shape_vec(x.shape(), y)?;
        Ok(vec![match dtype {
            DType::F64 => t,
            _ => cast_tensor(&t, dtype)?,
        }])
    }
}
