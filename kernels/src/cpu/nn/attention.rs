//! ONNX `Attention` (opsets 23, 24): scaled dot-product attention, as the ONNX reference
//! computes it.
//!
//! `Q` is `[B, Hq, Sq, D]`, `K` `[B, Hkv, Skv, D]`, `V` `[B, Hkv, Skv, Dv]` (or the 3-D
//! `[B, S, H·D]` forms with `q_num_heads` / `kv_num_heads`). `past_key` / `past_value` are
//! prepended along the sequence to make the `present_*` outputs of `T = past + Skv` positions.
//! Query head `h` attends with key head `h / (Hq / Hkv)` (grouped-query attention). The
//! scores `scale · q·k` (`scale` defaults to `1/√D`) are soft-capped
//! (`softcap · tanh(s / softcap)` when `softcap > 0`), then the bias is added: the float
//! `attn_mask` (a boolean one gives 0 where true and -inf where false; a mask shorter than
//! `T` is padded with -inf), -inf above the causal diagonal (`j > i + past`) with `is_causal`,
//! -inf at `j ≥ nonpad_kv_seqlen[b]`. A softmax over `T` weights `V`'s rows. The optional
//! fourth output holds the scores after the matmul (`qk_matmul_output_mode` 0), the softcap
//! (1), the bias (2) or the softmax (3). Computed in `f32` (`f64` for `f64` inputs).

use rayon::prelude::*;

use super::common::{Real, contiguous, min_opset, narrow, output, widen};
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input, opt_input};
use crate::{DType, Tensor};

/// A built `Attention`.
#[derive(Debug)]
pub struct Attention {
    is_causal: bool,
    q_heads: Option<usize>,
    kv_heads: Option<usize>,
    mode: u8,
    scale: Option<f64>,
    softcap: f64,
    outputs: usize,
}

/// Builds `Attention`.
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    min_opset(spec.opset, 23, "Attention")?;
    spec.attrs.only(&[
        "is_causal",
        "kv_num_heads",
        "q_num_heads",
        "qk_matmul_output_mode",
        "scale",
        "softcap",
        "softmax_precision",
    ])?;
    let most_inputs = if spec.opset >= 24 { 7 } else { 6 };
    if !(3..=most_inputs).contains(&spec.num_inputs) || !(1..=4).contains(&spec.num_outputs) {
        return Err(KernelError::Arity(format!(
            "Attention takes 3 to {most_inputs} inputs and has 1 to 4 outputs"
        )));
    }
    let heads = |name: &str| -> Result<Option<usize>> {
        match spec.attrs.opt_int(name)? {
            None => Ok(None),
            Some(v) if v > 0 => Ok(Some(v as usize)),
            Some(v) => Err(KernelError::BadAttribute {
                name: name.into(),
                reason: format!("must be positive, got {v}"),
            }),
        }
    };
    let mode = match spec.attrs.int("qk_matmul_output_mode", 0)? {
        m @ 0..=3 => m as u8,
        m => {
            return Err(KernelError::BadAttribute {
                name: "qk_matmul_output_mode".into(),
                reason: format!("must be 0 to 3, got {m}"),
            });
        }
    };
    // Softmax runs in the compute type whatever `softmax_precision` asks (the values differ
    // by rounding only); a value that is not a float type is refused.
    if let Some(p) = spec.attrs.opt_int("softmax_precision")?
        && !i32::try_from(p)
            .ok()
            .and_then(DType::from_onnx)
            .is_some_and(DType::is_float)
    {
        return Err(KernelError::BadAttribute {
            name: "softmax_precision".into(),
            reason: format!("{p} is not a float type"),
        });
    }
    Ok(Box::new(Attention {
        is_causal: spec.attrs.flag("is_causal", false)?,
        q_heads: heads("q_num_heads")?,
        kv_heads: heads("kv_num_heads")?,
        mode,
        scale: spec.attrs.opt_float("scale")?.map(f64::from),
        softcap: f64::from(spec.attrs.float("softcap", 0.0)?),
        outputs: spec.num_outputs,
    }))
}

/// A tensor as `[B, H, S, D]` row-major values: 4-D as it is, 3-D `[B, S, H·D]` split into
/// `heads` heads and transposed.
fn to_bhsd<F: Real>(t: &Tensor, heads: Option<usize>, what: &str) -> Result<(Vec<F>, [usize; 4])> {
    let xs = contiguous::<F>(t)?;
    match *t.shape() {
        [b, h, s, d] => Ok((xs.into_owned(), [b, h, s, d])),
        [b, s, hidden] => {
            let h = heads.ok_or_else(|| KernelError::BadAttribute {
                name: "q_num_heads / kv_num_heads".into(),
                reason: format!("required for the 3-D {what}"),
            })?;
            if hidden % h != 0 {
                return Err(KernelError::Shape(format!(
                    "{what}'s hidden size {hidden} does not split into {h} heads"
                )));
            }
            let d = hidden / h;
            let mut out = vec![F::zero(); xs.len()];
            for bi in 0..b {
                for si in 0..s {
                    for hi in 0..h {
                        let from = (bi * s + si) * hidden + hi * d;
                        let to = ((bi * h + hi) * s + si) * d;
                        out[to..to + d].copy_from_slice(&xs[from..from + d]);
                    }
                }
            }
            Ok((out, [b, h, s, d]))
        }
        _ => Err(KernelError::Shape(format!(
            "{what} must be 3-D or 4-D, got {:?}",
            t.shape()
        ))),
    }
}

/// `past` (`[B, H, P, D]`, if any) and `new` (`[B, H, S, D]`) joined along the sequence.
fn concat_seq<F: Real>(
    past: Option<(Vec<F>, [usize; 4])>,
    new: (Vec<F>, [usize; 4]),
    what: &str,
) -> Result<(Vec<F>, [usize; 4])> {
    let Some((p, ps)) = past else {
        return Ok(new);
    };
    let (n, ns) = new;
    if ps[0] != ns[0] || ps[1] != ns[1] || ps[3] != ns[3] {
        return Err(KernelError::Shape(format!(
            "past_{what} {ps:?} does not fit {what} {ns:?}"
        )));
    }
    let [b, h, s_new, d] = ns;
    let s_past = ps[2];
    let mut out = Vec::with_capacity(p.len() + n.len());
    for bh in 0..b * h {
        out.extend_from_slice(&p[bh * s_past * d..(bh + 1) * s_past * d]);
        out.extend_from_slice(&n[bh * s_new * d..(bh + 1) * s_new * d]);
    }
    Ok((out, [b, h, s_past + s_new, d]))
}

/// The additive mask broadcast to `[B, Hq, Sq, T]`: its values (bool as 0 / -inf) and the
/// strides of each of the four dimensions (0 where broadcast); the last dimension may be
/// shorter than `T` (`width`), the rest being -inf.
struct Mask<F> {
    values: Vec<F>,
    strides: [usize; 4],
    width: usize,
}

impl<F: Real> Mask<F> {
    fn new(t: &Tensor, dims: [usize; 4]) -> Result<Self> {
        let shape = t.shape();
        if shape.is_empty() || shape.len() > 4 {
            return Err(KernelError::Shape(format!(
                "attn_mask must have rank 1 to 4, got {shape:?}"
            )));
        }
        let values: Vec<F> = match t {
            Tensor::Bool(a) => a
                .iter()
                .map(|&keep| if keep { F::zero() } else { F::neg_infinity() })
                .collect(),
            _ => contiguous::<F>(&widen(t, 3)?)?.into_owned(),
        };
        let mut full = [1usize; 4];
        full[4 - shape.len()..].copy_from_slice(shape);
        let width = full[3];
        if width > dims[3] {
            return Err(KernelError::Shape(format!(
                "attn_mask {shape:?} is longer than the {} key positions",
                dims[3]
            )));
        }
        // The last dimension is padded, never broadcast; the others broadcast from 1.
        if (0..3).any(|k| full[k] != 1 && full[k] != dims[k]) {
            return Err(KernelError::Shape(format!(
                "attn_mask {shape:?} does not broadcast to {dims:?}"
            )));
        }
        let mut strides = [1usize; 4];
        for k in (0..3).rev() {
            strides[k] = strides[k + 1] * full[k + 1];
        }
        for k in 0..3 {
            if full[k] == 1 {
                strides[k] = 0;
            }
        }
        Ok(Mask {
            values,
            strides,
            width,
        })
    }

    fn at(&self, b: usize, h: usize, i: usize, j: usize) -> F {
        if j >= self.width {
            return F::neg_infinity();
        }
        let s = &self.strides;
        self.values[b * s[0] + h * s[1] + i * s[2] + j * s[3]]
    }
}

impl Attention {
    fn typed<F: Real>(&self, inputs: &[Option<&Tensor>], dtype: DType) -> Result<Vec<Tensor>> {
        let w = |i: usize| opt_input(inputs, i).map(|t| widen(t, i)).transpose();
        let (q, k, v) = (w(0)?.expect("Q"), w(1)?.expect("K"), w(2)?.expect("V"));
        let three_d = q.rank() == 3;
        if k.rank() != q.rank() || v.rank() != q.rank() {
            return Err(KernelError::Shape(format!(
                "Q, K and V must have the same rank, got {:?}, {:?} and {:?}",
                q.shape(),
                k.shape(),
                v.shape()
            )));
        }
        let (qs, [b, hq, sq, d]) = to_bhsd::<F>(&q, self.q_heads, "Q")?;
        let (ks, kd) = to_bhsd::<F>(&k, self.kv_heads, "K")?;
        let (vs, vd) = to_bhsd::<F>(&v, self.kv_heads, "V")?;
        let past = |i: usize, what: &str| -> Result<Option<(Vec<F>, [usize; 4])>> {
            match w(i)? {
                None => Ok(None),
                Some(t) if t.rank() == 4 => to_bhsd::<F>(&t, None, what).map(Some),
                Some(t) => Err(KernelError::Shape(format!(
                    "{what} must be 4-D, got {:?}",
                    t.shape()
                ))),
            }
        };
        let past_len = opt_input(inputs, 4).map_or(0, |t| t.shape().get(2).copied().unwrap_or(0));
        let (ks, [_, hkv, total, dk]) = concat_seq(past(4, "past_key")?, (ks, kd), "key")?;
        let (vs, [_, hv, tv, dv]) = concat_seq(past(5, "past_value")?, (vs, vd), "value")?;
        if kd[0] != b || vd[0] != b || dk != d || hv != hkv || tv != total {
            return Err(KernelError::Shape(format!(
                "K {:?} and V {:?} do not fit Q {:?}",
                k.shape(),
                v.shape(),
                q.shape()
            )));
        }
        if hkv == 0 || hq % hkv != 0 {
            return Err(KernelError::Shape(format!(
                "{hq} query heads are not a multiple of {hkv} key/value heads"
            )));
        }
        let group = hq / hkv;
        let dims = [b, hq, sq, total];
        let mask = opt_input(inputs, 3)
            .map(|t| Mask::<F>::new(t, dims))
            .transpose()?;
        let nonpad: Option<Vec<i64>> = opt_input(inputs, 6).map(Tensor::to_i64_vec).transpose()?;
        if let Some(n) = &nonpad
            && n.len() != b
        {
            return Err(KernelError::Shape(format!(
                "nonpad_kv_seqlen must hold {b} values, got {}",
                n.len()
            )));
        }
        let scale = self.scale.unwrap_or(1.0 / (d as f64).sqrt());
        // As the reference: Q and K each scaled by √scale before their product.
        let root = F::of(scale.sqrt());
        let softcap = F::of(self.softcap);
        let want_qk = self.outputs >= 4;
        let mut y = vec![F::zero(); b * hq * sq * dv];
        let mut qk = vec![F::zero(); if want_qk { b * hq * sq * total } else { 0 }];
        let qk_chunk = if want_qk { sq * total } else { 0 };
        let per_head = |bh: usize, yh: &mut [F], qkh: &mut [F]| {
            let (bi, h) = (bh / hq, bh % hq);
            let kh = bi * hkv + h / group;
            let keys = &ks[kh * total * d..(kh + 1) * total * d];
            let values = &vs[kh * total * dv..(kh + 1) * total * dv];
            let limit = nonpad
                .as_ref()
                .map_or(total, |n| usize::try_from(n[bi]).unwrap_or(0).min(total));
            let mut scores = vec![F::zero(); total];
            let mut qrow = vec![F::zero(); d];
            for i in 0..sq {
                let qi = &qs[(bh * sq + i) * d..(bh * sq + i + 1) * d];
                qrow.iter_mut().zip(qi).for_each(|(o, &x)| *o = x * root);
                for (j, s) in scores.iter_mut().enumerate() {
                    let kj = &keys[j * d..(j + 1) * d];
                    let mut dot = F::zero();
                    for (&a, &c) in qrow.iter().zip(kj) {
                        dot += a * (c * root);
                    }
                    let raw = dot;
                    let capped = if softcap > F::zero() {
                        (raw / softcap).tanh() * softcap
                    } else {
                        raw
                    };
                    let mut bias = match &mask {
                        Some(m) => m.at(bi, h, i, j),
                        None => F::zero(),
                    };
                    if (self.is_causal && j > i + past_len) || j >= limit {
                        bias += F::neg_infinity();
                    }
                    let biased = capped + bias;
                    if want_qk {
                        qkh[i * total + j] = match self.mode {
                            0 => raw,
                            1 => capped,
                            _ => biased,
                        };
                    }
                    *s = biased;
                }
                // Softmax as the reference writes it: a row of -inf only gives NaN.
                let max = scores
                    .iter()
                    .fold(F::neg_infinity(), |m, &s| if s > m { s } else { m });
                let mut sum = F::zero();
                for s in scores.iter_mut() {
                    *s = (*s - max).exp();
                    sum += *s;
                }
                let yi = &mut yh[i * dv..(i + 1) * dv];
                for (j, s) in scores.iter_mut().enumerate() {
                    *s = *s / sum;
                    let p = *s;
                    let vj = &values[j * dv..(j + 1) * dv];
                    yi.iter_mut().zip(vj).for_each(|(o, &x)| *o += p * x);
                }
                if want_qk && self.mode == 3 {
                    qkh[i * total..(i + 1) * total].copy_from_slice(&scores);
                }
            }
        };
        if want_qk {
            y.par_chunks_mut((sq * dv).max(1))
                .zip(qk.par_chunks_mut(qk_chunk.max(1)))
                .enumerate()
                .for_each(|(bh, (yh, qkh))| per_head(bh, yh, qkh));
        } else if sq * dv > 0 {
            y.par_chunks_mut(sq * dv)
                .enumerate()
                .for_each(|(bh, yh)| per_head(bh, yh, &mut []));
        }
        let y = if three_d {
            // [B, Hq, Sq, Dv] → [B, Sq, Hq·Dv].
            let mut t = vec![F::zero(); y.len()];
            for bi in 0..b {
                for h in 0..hq {
                    for i in 0..sq {
                        let from = ((bi * hq + h) * sq + i) * dv;
                        let to = (bi * sq + i) * hq * dv + h * dv;
                        t[to..to + dv].copy_from_slice(&y[from..from + dv]);
                    }
                }
            }
            output(&[b, sq, hq * dv], t)?
        } else {
            output(&[b, hq, sq, dv], y)?
        };
        let mut outs = vec![narrow(y, dtype)?];
        if self.outputs >= 2 {
            let kt = output(&[b, hkv, total, d], ks)?;
            outs.push(narrow(kt, input(inputs, 1)?.dtype())?);
        }
        if self.outputs >= 3 {
            let vt = output(&[b, hkv, total, dv], vs)?;
            outs.push(narrow(vt, input(inputs, 2)?.dtype())?);
        }
        if want_qk {
            outs.push(narrow(output(&[b, hq, sq, total], qk)?, dtype)?);
        }
        Ok(outs)
    }
}

impl Kernel for Attention {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let q = input(inputs, 0)?;
        input(inputs, 1)?;
        input(inputs, 2)?;
        let dtype = q.dtype();
        match dtype {
            DType::F64 => self.typed::<f64>(inputs, dtype),
            DType::F32 | DType::F16 | DType::BF16 => self.typed::<f32>(inputs, dtype),
            other => Err(KernelError::UnsupportedDType {
                index: 0,
                dtype: other,
            }),
        }
    }
}

#[cfg(test)]
#[allow(clippy::excessive_precision)]
mod tests {
    use crate::cpu::binary::test_util::{assert_f32, run_op, t};
    use crate::{AttrValue, Tensor};

    /// Q `[1, 2, 2, 2]`, K `[1, 1, 3, 2]`, V `[1, 1, 3, 1]` (grouped: both query heads read the
    /// one key head), past key / value of one position.
    fn qkv() -> [Tensor; 5] {
        let q = (0..8).map(|i| (i as f32 - 3.0) / 4.0).collect();
        let k = (0..6).map(|i| (i as f32 - 2.0) / 3.0).collect();
        [
            t(&[1, 2, 2, 2], q),
            t(&[1, 1, 3, 2], k),
            t(&[1, 1, 3, 1], vec![1.0f32, -2.0, 3.0]),
            t(&[1, 1, 1, 2], vec![0.5f32, -0.5]),
            t(&[1, 1, 1, 1], vec![10.0f32]),
        ]
    }

    fn values(t: &Tensor) -> Vec<f32> {
        t.view::<f32>().unwrap().iter().copied().collect()
    }

    /// Expected values from `onnx.reference.ops.op_attention._compute_attention` (onnx 1.22).
    #[test]
    fn short_bool_mask_is_padded_with_false_and_past_is_prepended() {
        let [q, k, v, pk, pv] = qkv();
        let mask = t(&[2, 3], vec![true, false, true, true, true, true]);
        let attrs = [("qk_matmul_output_mode", AttrValue::Int(2))];
        let inputs = [
            Some(&q),
            Some(&k),
            Some(&v),
            Some(&mask),
            Some(&pk),
            Some(&pv),
        ];
        let outs = run_op("Attention", 23, &attrs, &inputs).unwrap();
        assert_eq!(outs.len(), 1, "run_op asks for one output");
        let want = [4.088_381_8, 2.722_966_2, 3.383_465_3, 2.623_3];
        assert_f32(&outs[0], &[1, 2, 2, 1], &want, 1e-5);

        // All four outputs.
        let mut a = crate::Attributes::new();
        a.insert("qk_matmul_output_mode", AttrValue::Int(2));
        let spec = crate::NodeSpec {
            op_type: "Attention",
            domain: "",
            opset: 23,
            attrs: &a,
            num_inputs: 6,
            num_outputs: 4,
            options: Default::default(),
        };
        let outs = crate::cpu::build(&spec).unwrap().run(&inputs).unwrap();
        assert_f32(&outs[0], &[1, 2, 2, 1], &want, 1e-5);
        let present = [
            0.5,
            -0.5,
            -0.666_666_7,
            -0.333_333_3,
            0.0,
            0.333_333_3,
            0.666_666_7,
            1.0,
        ];
        assert_f32(&outs[1], &[1, 1, 4, 2], &present, 1e-6);
        assert_eq!(values(&outs[2]), vec![10.0, 1.0, -2.0, 3.0]);
        let inf = f32::NEG_INFINITY;
        let qk = [
            -0.088_388_35,
            inf,
            -0.117_851_13,
            inf,
            -0.088_388_35,
            0.117_851_13,
            0.0,
            inf,
            -0.088_388_35,
            inf,
            0.117_851_13,
            inf,
            -0.088_388_35,
            -0.589_255_7,
            0.235_702_26,
            inf,
        ];
        assert_f32(&outs[3], &[1, 2, 2, 4], &qk, 1e-5);
    }

    #[test]
    fn causal_after_past_with_softcap_and_scale() {
        let [q, k, v, pk, pv] = qkv();
        let mut a = crate::Attributes::new();
        a.insert("is_causal", AttrValue::Int(1));
        a.insert("softcap", AttrValue::Float(0.5));
        a.insert("scale", AttrValue::Float(2.0));
        a.insert("qk_matmul_output_mode", AttrValue::Int(1));
        let spec = crate::NodeSpec {
            op_type: "Attention",
            domain: "",
            opset: 24,
            attrs: &a,
            num_inputs: 6,
            num_outputs: 4,
            options: Default::default(),
        };
        let none = None;
        let inputs = [Some(&q), Some(&k), Some(&v), none, Some(&pk), Some(&pv)];
        let outs = crate::cpu::build(&spec).unwrap().run(&inputs).unwrap();
        let want = [3.934_156, 2.322_880_5, 5.957_353, 1.851_391_7];
        assert_f32(&outs[0], &[1, 2, 2, 1], &want, 1e-5);
        // Mode 1: after the softcap, before the causal mask.
        let qk = [
            -0.231_058_58,
            0.495_195_24,
            -0.291_391_5,
            -0.499_664_66,
            -0.231_058_58,
            0.291_391_5,
            0.0,
            -0.291_391_5,
            -0.231_058_58,
            -0.435_030_85,
            0.291_391_5,
            0.495_195_24,
            -0.231_058_58,
            -0.498_729,
            0.435_030_85,
            0.499_993_86,
        ];
        assert_f32(&outs[3], &[1, 2, 2, 4], &qk, 1e-5);
    }

    #[test]
    fn bad_shapes_are_errors() {
        let [q, k, v, ..] = qkv();
        // A mask wider than the key positions.
        let wide = t(&[2, 5], vec![0.0f32; 10]);
        assert!(
            run_op(
                "Attention",
                23,
                &[],
                &[Some(&q), Some(&k), Some(&v), Some(&wide)]
            )
            .is_err()
        );
        // 3-D inputs without head counts.
        let q3 = t(&[1, 2, 4], vec![0.0f32; 8]);
        let k3 = t(&[1, 3, 2], vec![0.0f32; 6]);
        assert!(run_op("Attention", 23, &[], &[Some(&q3), Some(&k3), Some(&k3)]).is_err());
        // Three query heads over two key heads.
        let q = t(&[1, 3, 1, 2], vec![0.0f32; 6]);
        let k = t(&[1, 2, 1, 2], vec![0.0f32; 4]);
        assert!(run_op("Attention", 23, &[], &[Some(&q), Some(&k), Some(&k)]).is_err());
    }
}
