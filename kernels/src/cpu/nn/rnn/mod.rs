//! The recurrent operators `LSTM`, `GRU` and `RNN` (opsets 7, 14 with `layout`, 22): forward,
//! reverse and bidirectional, per-entry `sequence_lens`, initial states, peepholes, `clip`,
//! every activation function the spec names, `GRU`'s `linear_before_reset`, `LSTM`'s
//! `input_forget`.
//!
//! Each direction multiplies the input by its `W` once for the whole sequence (one product of
//! `seq · batch` rows), then runs the steps: one product with `R` (packed once per session when
//! the weights stay the same tensor) and the cell's elementwise work per step. The two
//! directions of a bidirectional node run in parallel.

mod activation;
mod config;
mod dims;
mod direction;
mod element;
mod gru;
mod lstm;
mod simple;
mod tanh;
mod weights;

#[cfg(test)]
mod tests;

pub use activation::Activation;
pub use config::{Cell, Config};
pub use dims::Dims;

use std::borrow::Cow;

use super::common::{contiguous, narrow, output, widen};
use super::packed_weights::WeightCache;
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input, opt_input};
use crate::{DType, Tensor};
use direction::{Direction, Run};
use element::RnnFloat;
use weights::Weights;

/// Op types this module implements.
pub const OPS: &[&str] = &["GRU", "LSTM", "RNN"];

/// A built `LSTM`, `GRU` or `RNN`.
#[derive(Debug)]
pub struct Recurrent {
    config: Config,
    num_outputs: usize,
    /// `W` packed, while it stays the same tensor.
    w_cache: WeightCache,
    /// `R` packed, while it stays the same tensor.
    r_cache: WeightCache,
}

/// Builds a kernel for an op in [`OPS`].
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    let config = Config::parse(spec)?;
    let max_inputs = match config.cell {
        Cell::Lstm { .. } => 8,
        _ => 6,
    };
    if spec.num_inputs < 3 || spec.num_inputs > max_inputs {
        return Err(KernelError::Arity(format!(
            "{} inputs, {} takes 3 to {max_inputs}",
            spec.num_inputs, spec.op_type
        )));
    }
    Ok(Box::new(Recurrent {
        config,
        num_outputs: spec.num_outputs,
        w_cache: WeightCache::new(spec.options),
        r_cache: WeightCache::new(spec.options),
    }))
}

/// The float inputs: `X, W, R, B, initial_h, initial_c, P` (absent ones `None`).
type Floats<'a> = [Option<&'a Tensor>; 7];

impl Kernel for Recurrent {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let floats: Floats<'_> = [
            Some(input(inputs, 0)?),
            Some(input(inputs, 1)?),
            Some(input(inputs, 2)?),
            opt_input(inputs, 3),
            opt_input(inputs, 5),
            opt_input(inputs, 6),
            opt_input(inputs, 7),
        ];
        let dtype = input(inputs, 0)?.dtype();
        for (k, t) in floats.iter().enumerate() {
            if let Some(t) = t
                && t.dtype() != dtype
            {
                return Err(KernelError::DTypeMismatch(format!(
                    "input {} is {}, X is {dtype}",
                    [0, 1, 2, 3, 5, 6, 7][k],
                    t.dtype()
                )));
            }
        }
        let lens = match opt_input(inputs, 4) {
            Some(t) if matches!(t.dtype(), DType::I32 | DType::I64) => Some(t),
            Some(t) => {
                return Err(KernelError::UnsupportedDType {
                    index: 4,
                    dtype: t.dtype(),
                });
            }
            None => None,
        };
        match dtype {
            DType::F32 => self.typed::<f32>(floats, lens, true),
            DType::F64 => self.typed::<f64>(floats, lens, true),
            DType::F16 | DType::BF16 => {
                let wide: Vec<Option<Tensor>> = floats
                    .iter()
                    .map(|t| t.map(|t| widen(t, 0)).transpose())
                    .collect::<Result<_>>()?;
                let refs: Floats<'_> = std::array::from_fn(|i| wide[i].as_ref());
                self.typed::<f32>(refs, lens, false)?
                    .into_iter()
                    .map(|t| narrow(t, dtype))
                    .collect()
            }
            other => Err(KernelError::UnsupportedDType {
                index: 0,
                dtype: other,
            }),
        }
    }
}

impl Recurrent {
    /// Runs in `T`; `cacheable`: the weights are the kernel's inputs themselves (not converted
    /// copies), so their packing may be kept.
    fn typed<T: RnnFloat>(
        &self,
        [x, w, r, b, h0, c0, p]: Floats<'_>,
        lens: Option<&Tensor>,
        cacheable: bool,
    ) -> Result<Vec<Tensor>> {
        let (x, w, r) = (x.expect("X"), w.expect("W"), r.expect("R"));
        let dims = Dims::check(&self.config, x, w, r, b, lens, h0, c0, p)?;
        let lens = sequence_lengths(&dims, lens)?;
        let gh = dims.gate_rows();
        let w_parts = [(0, gh)];
        let r_parts = match self.config.cell {
            Cell::Gru {
                linear_before_reset,
            } => gru::parts(dims.hidden, linear_before_reset),
            _ => vec![(0, gh)],
        };
        let w = Weights::<T>::new(w, &self.w_cache, cacheable, &w_parts)?;
        let r = Weights::<T>::new(r, &self.r_cache, cacheable, &r_parts)?;
        fn floats<T: RnnFloat>(t: Option<&Tensor>) -> Result<Option<Cow<'_, [T]>>> {
            t.map(contiguous::<T>).transpose()
        }
        let (x, b, h0, c0, p) = (
            contiguous::<T>(x)?,
            floats(b)?,
            floats(h0)?,
            floats(c0)?,
            floats(p)?,
        );
        let run_direction = |d: usize| -> Result<Run<T>> {
            let bias = b.as_deref().map(|b| &b[d * 2 * gh..(d + 1) * 2 * gh]);
            let mut xw = vec![T::zero(); dims.seq * dims.batch * gh];
            let x_bias = bias.map(|b| self.input_bias(dims.hidden, b));
            w.product(d, 0, &x, dims.seq * dims.batch, &mut xw, x_bias.as_deref())?;
            let direction = Direction {
                dims: &dims,
                index: d,
                reverse: self.config.reversed[d],
                lens: &lens,
                xw,
                r: &r,
                r_bias: bias.map(|b| &b[gh..]),
                peepholes: p.as_deref().map(|p| &p[d * 3 * dims.hidden..]),
                activations: self.config.activations_of(d),
                clip: self.config.clip.map(|c| T::of(c as f64)),
                h0: initial_state(&dims, d, h0.as_deref()),
                c0: initial_state(&dims, d, c0.as_deref()),
            };
            match self.config.cell {
                Cell::Lstm { input_forget } => lstm::run(&direction, input_forget),
                Cell::Gru {
                    linear_before_reset,
                } => gru::run(&direction, linear_before_reset),
                Cell::Rnn => simple::run(&direction),
            }
        };
        let runs = if dims.dirs == 2 {
            let (a, b) = rayon::join(|| run_direction(0), || run_direction(1));
            vec![a?, b?]
        } else {
            vec![run_direction(0)?]
        };
        self.outputs(&dims, &lens, &runs)
    }

    /// The bias added to the input projection: `Wb + Rb`, except for the hidden gate of a
    /// `GRU` with `linear_before_reset`, whose `Rbh` is added to the recurrent product.
    fn input_bias<T: RnnFloat>(&self, hidden: usize, b: &[T]) -> Vec<T> {
        let gh = b.len() / 2;
        let (wb, rb) = b.split_at(gh);
        let mut sum: Vec<T> = wb.iter().zip(rb).map(|(&w, &r)| w + r).collect();
        if let Cell::Gru {
            linear_before_reset: true,
        } = self.config.cell
        {
            sum[2 * hidden..].copy_from_slice(&wb[2 * hidden..]);
        }
        sum
    }

    /// `Y`, `Y_h` and (`LSTM`) `Y_c`, as many as the node lists. An empty sequence's last
    /// states are zero, not the initial ones (as ONNX Runtime has them).
    fn outputs<T: RnnFloat>(
        &self,
        dims: &Dims,
        lens: &[usize],
        runs: &[Run<T>],
    ) -> Result<Vec<Tensor>> {
        let hid = dims.hidden;
        let mut y = vec![T::zero(); dims.seq * dims.dirs * dims.batch * hid];
        let mut y_h = vec![T::zero(); dims.dirs * dims.batch * hid];
        let mut y_c = vec![T::zero(); y_h.len()];
        for (d, run) in runs.iter().enumerate() {
            for b in (0..dims.batch).filter(|&b| lens[b] > 0) {
                let src = b * hid;
                let dst = dims.state_at(d, b);
                y_h[dst..dst + hid].copy_from_slice(&run.h[src..src + hid]);
                if !run.c.is_empty() {
                    y_c[dst..dst + hid].copy_from_slice(&run.c[src..src + hid]);
                }
                for t in 0..dims.seq {
                    let src = (t * dims.batch + b) * hid;
                    let dst = dims.y_at(t, d, b);
                    y[dst..dst + hid].copy_from_slice(&run.y[src..src + hid]);
                }
            }
        }
        let state = dims.state_shape();
        [(dims.y_shape(), y), (state.clone(), y_h), (state, y_c)]
            .into_iter()
            .take(self.num_outputs)
            .map(|(shape, data)| output(&shape, data))
            .collect()
    }
}

/// Each batch entry's sequence length: `sequence_lens`, else the whole sequence.
fn sequence_lengths(dims: &Dims, lens: Option<&Tensor>) -> Result<Vec<usize>> {
    let Some(lens) = lens else {
        return Ok(vec![dims.seq; dims.batch]);
    };
    lens.to_i64_vec()?
        .into_iter()
        .map(|l| {
            usize::try_from(l)
                .ok()
                .filter(|&l| l <= dims.seq)
                .ok_or_else(|| {
                    KernelError::InvalidValue(format!(
                        "sequence length {l} outside 0..={}",
                        dims.seq
                    ))
                })
        })
        .collect()
}

/// Direction `d`'s initial state (`batch × hidden`) from a state input, zeros without one.
fn initial_state<T: RnnFloat>(dims: &Dims, d: usize, state: Option<&[T]>) -> Vec<T> {
    let hid = dims.hidden;
    let Some(state) = state else {
        return vec![T::zero(); dims.batch * hid];
    };
    let mut out = Vec::with_capacity(dims.batch * hid);
    for b in 0..dims.batch {
        let at = dims.state_at(d, b);
        out.extend_from_slice(&state[at..at + hid]);
    }
    out
}
