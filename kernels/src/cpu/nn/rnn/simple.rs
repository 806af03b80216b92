//! The `RNN` cell: `H' = f(X Wᵀ + H Rᵀ + Wb + Rb)`, the pre-activation clipped when `clip`
//! is set.

use super::direction::{Direction, Run, add_into};
use super::element::RnnFloat;
use crate::error::Result;

/// Runs one direction.
pub(super) fn run<T: RnnFloat>(d: &Direction<'_, T>) -> Result<Run<T>> {
    let (batch, hid) = (d.dims.batch, d.dims.hidden);
    let mut h = d.h0.clone();
    let mut y = d.zero_outputs();
    let mut pre = vec![T::zero(); batch * hid];
    for s in 0..d.dims.seq {
        d.r.product(d.index, 0, &h, batch, &mut pre, None)?;
        for b in 0..batch {
            let Some((t, row)) = d.step(s, b) else {
                continue;
            };
            let hb = &mut pre[b * hid..(b + 1) * hid];
            add_into(hb, &d.xw[row..row + hid]);
            d.activate(d.activations[0], hb);
            h[b * hid..(b + 1) * hid].copy_from_slice(hb);
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
