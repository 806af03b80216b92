//! One direction's run over the sequence: what every cell needs (the input projection of all
//! steps, the recurrent weights, the initial states) and what it gives back.

use super::activation::Activation;
use super::dims::Dims;
use super::element::RnnFloat;
use super::weights::Weights;

/// One direction of a recurrent node, ready to run.
pub(super) struct Direction<'a, T: RnnFloat> {
    /// The run's sizes.
    pub dims: &'a Dims,
    /// The direction's index in the weights.
    pub index: usize,
    /// Runs from each sequence's last step to its first.
    pub reverse: bool,
    /// Each batch entry's sequence length (≤ `dims.seq`).
    pub lens: &'a [usize],
    /// `X · Wᵀ` for every step with the biases added that do not multiply with a gate:
    /// `seq · batch` rows (in `X`'s order) of `gates · hidden`.
    pub xw: Vec<T>,
    /// The recurrent weights.
    pub r: &'a Weights<'a, T>,
    /// This direction's recurrent bias (`GRU` with `linear_before_reset` adds its hidden
    /// gate's part after the product).
    pub r_bias: Option<&'a [T]>,
    /// This direction's peepholes (`LSTM`), `P[i, o, f]`.
    pub peepholes: Option<&'a [T]>,
    /// This direction's activation functions.
    pub activations: &'a [Activation],
    /// Pre-activations are clipped to `[-clip, clip]`.
    pub clip: Option<T>,
    /// The initial hidden state, `batch × hidden`.
    pub h0: Vec<T>,
    /// The initial cell state (`LSTM`), `batch × hidden`.
    pub c0: Vec<T>,
}

/// What a direction's run gives back.
pub(super) struct Run<T> {
    /// The hidden state after every step, `seq × batch × hidden`; zero past a sequence's end.
    pub y: Vec<T>,
    /// The last hidden state, `batch × hidden`.
    pub h: Vec<T>,
    /// The last cell state (`LSTM`; else empty), `batch × hidden`.
    pub c: Vec<T>,
}

impl<T: RnnFloat> Direction<'_, T> {
    /// For the `s`-th step run on batch entry `b`: the time step it is at, and the offset of
    /// its row of [`Direction::xw`]; `None` once `b`'s sequence has ended.
    pub fn step(&self, s: usize, b: usize) -> Option<(usize, usize)> {
        let len = self.lens[b];
        if s >= len {
            return None;
        }
        let t = if self.reverse { len - 1 - s } else { s };
        Some((t, self.dims.x_row(t, b) * self.dims.gate_rows()))
    }

    /// `xs[i] ← f(clip(xs[i]))`.
    pub fn activate(&self, f: Activation, xs: &mut [T]) {
        if let Some(c) = self.clip {
            // Comparisons leave a NaN as it is.
            xs.iter_mut().for_each(|x| {
                if *x < -c {
                    *x = -c;
                } else if *x > c {
                    *x = c;
                }
            });
        }
        f.apply(xs);
    }

    /// An output buffer of zeros for the hidden state after every step.
    pub fn zero_outputs(&self) -> Vec<T> {
        vec![T::zero(); self.dims.seq * self.dims.batch * self.dims.hidden]
    }

    /// Where step `t`'s hidden state of batch entry `b` starts in [`Run::y`].
    pub fn y_at(&self, t: usize, b: usize) -> usize {
        (t * self.dims.batch + b) * self.dims.hidden
    }
}

/// `acc[i] += add[i]`.
pub(super) fn add_into<T: RnnFloat>(acc: &mut [T], add: &[T]) {
    acc.iter_mut().zip(add).for_each(|(a, &v)| *a += v);
}
