//! The `GRU` cell, gates `z, r, h`:
//!
//! ```text
//! z = f(Xz + H Rzᵀ + bz)      r = f(Xr + H Rrᵀ + br)
//! h = g(Xh + (r ⊙ H) Rhᵀ + bh)              (linear_before_reset = 0)
//! h = g(Xh + r ⊙ (H Rhᵀ + Rbh) + Wbh)       (linear_before_reset = 1)
//! H' = (1 − z) ⊙ h + z ⊙ H
//! ```
//!
//! with every pre-activation clipped when `clip` is set. Without `linear_before_reset` the
//! recurrent weights are multiplied in two parts (`Rz, Rr`, then `Rh` with `r ⊙ H`), with it in
//! one.

use super::direction::{Direction, Run, add_into};
use super::element::RnnFloat;
use crate::error::Result;

/// The parts the recurrent weights are multiplied in: `[z, r]` then `[h]` rows, or all at once.
pub(super) fn parts(hidden: usize, linear_before_reset: bool) -> Vec<(usize, usize)> {
    if linear_before_reset {
        vec![(0, 3 * hidden)]
    } else {
        vec![(0, 2 * hidden), (2 * hidden, hidden)]
    }
}

/// Runs one direction.
pub(super) fn run<T: RnnFloat>(d: &Direction<'_, T>, linear_before_reset: bool) -> Result<Run<T>> {
    let (batch, hid) = (d.dims.batch, d.dims.hidden);
    let gh = 3 * hid;
    let mut h = d.h0.clone();
    let mut y = d.zero_outputs();
    let mut state = State {
        gates: vec![T::zero(); batch * gh],
        zr: vec![T::zero(); batch * 2 * hid],
        reset: vec![T::zero(); batch * hid],
        hidden_part: vec![T::zero(); batch * hid],
    };
    for s in 0..d.dims.seq {
        if linear_before_reset {
            d.r.product(d.index, 0, &h, batch, &mut state.gates, None)?;
        } else {
            step_reset_first(d, s, &h, &mut state)?;
        }
        for b in 0..batch {
            let Some((t, row)) = d.step(s, b) else {
                continue;
            };
            let xw = &d.xw[row..row + gh];
            let pre = &mut state.gates[b * gh..(b + 1) * gh];
            let (zr, gh_) = pre.split_at_mut(2 * hid);
            if linear_before_reset {
                add_into(zr, &xw[..2 * hid]);
                d.activate(d.activations[0], zr);
                let rb = d.r_bias.map(|rb| &rb[2 * hid..3 * hid]);
                for j in 0..hid {
                    let rec = gh_[j] + rb.map_or(T::zero(), |rb| rb[j]);
                    gh_[j] = xw[2 * hid + j] + zr[hid + j] * rec;
                }
            } else {
                // z and r are activated already; the hidden gate's product is aside.
                gh_.copy_from_slice(&state.hidden_part[b * hid..(b + 1) * hid]);
                add_into(gh_, &xw[2 * hid..]);
            }
            d.activate(d.activations[1], gh_);
            let hb = &mut h[b * hid..(b + 1) * hid];
            for j in 0..hid {
                let z = zr[j];
                hb[j] = (T::one() - z) * gh_[j] + z * hb[j];
            }
            let at = d.y_at(t, b);
            y[at..at + hid].copy_from_slice(hb);
        }
    }
    Ok(Run {
        y,
        h,
        c: Vec::new(),
    })
}

/// A step's buffers.
struct State<T> {
    /// Pre-activations (then activations) of `z, r, h`, `batch × 3·hidden`.
    gates: Vec<T>,
    /// The recurrent product of `z, r` (without `linear_before_reset`), `batch × 2·hidden`.
    zr: Vec<T>,
    /// `r ⊙ H`, `batch × hidden`.
    reset: Vec<T>,
    /// `(r ⊙ H) Rhᵀ`, `batch × hidden`.
    hidden_part: Vec<T>,
}

/// Without `linear_before_reset`: the activated `z` and `r` of step `s` into `state.gates`,
/// and `(r ⊙ H) Rhᵀ` into `state.hidden_part`.
fn step_reset_first<T: RnnFloat>(
    d: &Direction<'_, T>,
    s: usize,
    h: &[T],
    state: &mut State<T>,
) -> Result<()> {
    let (batch, hid) = (d.dims.batch, d.dims.hidden);
    let gh = 3 * hid;
    d.r.product(d.index, 0, h, batch, &mut state.zr, None)?;
    for b in 0..batch {
        let reset = &mut state.reset[b * hid..(b + 1) * hid];
        let Some((_, row)) = d.step(s, b) else {
            reset.fill(T::zero());
            continue;
        };
        let pre = &mut state.zr[b * 2 * hid..(b + 1) * 2 * hid];
        add_into(pre, &d.xw[row..row + 2 * hid]);
        d.activate(d.activations[0], pre);
        state.gates[b * gh..b * gh + 2 * hid].copy_from_slice(pre);
        for j in 0..hid {
            reset[j] = pre[hid + j] * h[b * hid + j];
        }
    }
    d.r.product(
        d.index,
        1,
        &state.reset,
        batch,
        &mut state.hidden_part,
        None,
    )
}
