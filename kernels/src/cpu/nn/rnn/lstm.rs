//! The `LSTM` cell, gates `i, o, f, c`:
//!
//! ```text
//! i = f(Xi + H Riᵀ + Pi ⊙ C + bi)      f = f(Xf + H Rfᵀ + Pf ⊙ C + bf)   (or 1 − i)
//! c = g(Xc + H Rcᵀ + bc)               C' = f ⊙ C + i ⊙ c
//! o = f(Xo + H Roᵀ + Po ⊙ C' + bo)     H' = o ⊙ h(C')
//! ```
//!
//! with every pre-activation clipped when `clip` is set.

use super::direction::{Direction, Run, add_into};
use super::element::RnnFloat;
use crate::error::Result;

/// Runs one direction; `input_forget` couples the forget gate to the input gate.
pub(super) fn run<T: RnnFloat>(d: &Direction<'_, T>, input_forget: bool) -> Result<Run<T>> {
    let (batch, hid) = (d.dims.batch, d.dims.hidden);
    let gh = 4 * hid;
    let [f, g, h_act] = [d.activations[0], d.activations[1], d.activations[2]];
    let mut h = d.h0.clone();
    let mut c = d.c0.clone();
    let mut y = d.zero_outputs();
    let mut gates = vec![T::zero(); batch * gh];
    for s in 0..d.dims.seq {
        d.r.product(d.index, 0, &h, batch, &mut gates, None)?;
        for b in 0..batch {
            let Some((t, row)) = d.step(s, b) else {
                continue;
            };
            let pre = &mut gates[b * gh..(b + 1) * gh];
            add_into(pre, &d.xw[row..row + gh]);
            let (gi, rest) = pre.split_at_mut(hid);
            let (go, rest) = rest.split_at_mut(hid);
            let (gf, gc) = rest.split_at_mut(hid);
            let cb = &mut c[b * hid..(b + 1) * hid];
            if let Some(p) = d.peepholes {
                gi.iter_mut()
                    .zip(&p[..hid])
                    .zip(cb.iter())
                    .for_each(|((x, &p), &c)| *x += p * c);
                gf.iter_mut()
                    .zip(&p[2 * hid..])
                    .zip(cb.iter())
                    .for_each(|((x, &p), &c)| *x += p * c);
            }
            d.activate(f, gi);
            if input_forget {
                gf.iter_mut()
                    .zip(gi.iter())
                    .for_each(|(x, &i)| *x = T::one() - i);
            } else {
                d.activate(f, gf);
            }
            d.activate(g, gc);
            for j in 0..hid {
                cb[j] = gf[j] * cb[j] + gi[j] * gc[j];
            }
            if let Some(p) = d.peepholes {
                go.iter_mut()
                    .zip(&p[hid..2 * hid])
                    .zip(cb.iter())
                    .for_each(|((x, &p), &c)| *x += p * c);
            }
            d.activate(f, go);
            // h(C') in the cell gate's place, which is spent.
            gc.copy_from_slice(cb);
            h_act.apply(gc);
            let hb = &mut h[b * hid..(b + 1) * hid];
            for j in 0..hid {
                hb[j] = go[j] * gc[j];
            }
            let at = d.y_at(t, b);
            y[at..at + hid].copy_from_slice(hb);
        }
    }
    Ok(Run { y, h, c })
}
