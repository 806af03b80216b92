//! What a fused convolution does to its output while it is still in cache: add a second
//! tensor `Z` (a residual) and apply an activation — ONNX Runtime's `FusedConv` epilogue.
//! The activations compute exactly what the unfused `Relu`, `LeakyRelu`, `Sigmoid`, `Tanh`,
//! `Clip`, `HardSigmoid` and `HardSwish` kernels compute, so fusing never changes a result.
//! (`HardSwish` is Spillway's addition to ORT's list: MobileNetV3's convolutions end in it.)

use super::common::Real;
use crate::cpu::unary::float_ops::unit_clamp;
use crate::error::{KernelError, Result};

/// An activation applied element by element after the convolution.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Activation {
    /// No activation (`FusedConv` without an `activation` attribute).
    Identity,
    /// `max(x, 0)` (NaN stays NaN).
    Relu,
    /// `x` for `x ≥ 0`, else `alpha · x`.
    LeakyRelu(f32),
    /// `1 / (1 + e^-x)`.
    Sigmoid,
    /// `tanh(x)`.
    Tanh,
    /// `min(max(x, min), max)`.
    Clip(f32, f32),
    /// `max(0, min(1, alpha · x + beta))`.
    HardSigmoid(f32, f32),
    /// `x · max(0, min(1, x / 6 + 1/2))`.
    HardSwish,
}

impl Activation {
    /// Parses `FusedConv`'s `activation` (absent: identity) and `activation_params`:
    /// `LeakyRelu` takes `[alpha]`, `Clip` `[min, max]`, `HardSigmoid` `[alpha, beta]`, the
    /// others (`Relu`, `Sigmoid`, `Tanh`, `HardSwish`) none. Anything else fails naming the cause.
    pub fn parse(name: Option<&str>, params: Option<&[f32]>) -> Result<Self> {
        let params = params.unwrap_or(&[]);
        let Some(name) = name else {
            return match params {
                [] => Ok(Activation::Identity),
                _ => Err(bad_params("activation_params given without an activation")),
            };
        };
        Ok(match (name, params) {
            ("Relu", []) => Activation::Relu,
            ("Sigmoid", []) => Activation::Sigmoid,
            ("Tanh", []) => Activation::Tanh,
            ("HardSwish", []) => Activation::HardSwish,
            ("LeakyRelu", &[alpha]) => Activation::LeakyRelu(alpha),
            ("Clip", &[lo, hi]) => Activation::Clip(lo, hi),
            ("HardSigmoid", &[alpha, beta]) => Activation::HardSigmoid(alpha, beta),
            ("Relu" | "Sigmoid" | "Tanh" | "HardSwish", _) => return Err(count(name, 0, params)),
            ("LeakyRelu", _) => return Err(count(name, 1, params)),
            ("Clip" | "HardSigmoid", _) => return Err(count(name, 2, params)),
            (other, _) => {
                return Err(KernelError::UnsupportedAttribute {
                    name: "activation".into(),
                    reason: format!(
                        "unknown activation '{other}' (supported: Relu, LeakyRelu, Sigmoid, \
                         Tanh, Clip, HardSigmoid, HardSwish)"
                    ),
                });
            }
        })
    }

    /// True for [`Activation::Identity`].
    pub fn is_identity(self) -> bool {
        self == Activation::Identity
    }

    /// `(lo, hi)` for the activations that are a clamp to `[lo, hi]` (none, `Relu`, `Clip`);
    /// `None` for the others.
    pub fn clamp_bounds(self) -> Option<(f32, f32)> {
        match self {
            Activation::Identity => Some((f32::NEG_INFINITY, f32::INFINITY)),
            Activation::Relu => Some((0.0, f32::INFINITY)),
            Activation::Clip(lo, hi) => Some((lo, hi)),
            _ => None,
        }
    }

    /// Applies the activation to every value.
    pub fn apply<T: Real>(self, values: &mut [T]) {
        let (zero, one) = (T::zero(), T::one());
        match self {
            Activation::Identity => {}
            Activation::Relu => values
                .iter_mut()
                .for_each(|x| *x = if *x < zero { zero } else { *x }),
            Activation::LeakyRelu(alpha) => {
                let alpha = T::of(f64::from(alpha));
                values
                    .iter_mut()
                    .for_each(|x| *x = if *x < zero { alpha * *x } else { *x });
            }
            Activation::Sigmoid => values
                .iter_mut()
                .for_each(|x| *x = one / (one + (-*x).exp())),
            Activation::Tanh => values.iter_mut().for_each(|x| *x = x.tanh()),
            Activation::Clip(lo, hi) => {
                let (lo, hi) = (T::of(f64::from(lo)), T::of(f64::from(hi)));
                values.iter_mut().for_each(|x| {
                    let v = if *x < lo { lo } else { *x };
                    *x = if v > hi { hi } else { v };
                });
            }
            Activation::HardSigmoid(alpha, beta) => {
                let (alpha, beta) = (T::of(f64::from(alpha)), T::of(f64::from(beta)));
                values
                    .iter_mut()
                    .for_each(|x| *x = unit_clamp(alpha * *x + beta));
            }
            Activation::HardSwish => {
                let (sixth, half) = (T::of(1.0 / 6.0), T::of(0.5));
                values
                    .iter_mut()
                    .for_each(|x| *x = *x * unit_clamp(*x * sixth + half));
            }
        }
    }
}

/// The wrong number of `activation_params` for `name`.
fn count(name: &str, want: usize, params: &[f32]) -> KernelError {
    bad_params(&format!(
        "{name} takes {want} activation_params, got {}",
        params.len()
    ))
}

fn bad_params(reason: &str) -> KernelError {
    KernelError::BadAttribute {
        name: "activation_params".into(),
        reason: reason.into(),
    }
}

/// A clamp epilogue as kernels finish it in registers: the bounds `(lo, hi)` and the add.
pub type Clamp<'a, T> = ((f32, f32), Option<&'a [T]>);

/// `y ← activation(y + add)` over a block of output values. `add`, when given, is laid out
/// like the output the epilogue belongs to: the value added to output element `i` is `add[i]`.
#[derive(Debug, Clone, Copy)]
pub struct Epilogue<'a, T> {
    /// Added before the activation (`FusedConv`'s `Z`).
    pub add: Option<&'a [T]>,
    /// Applied last.
    pub activation: Activation,
}

impl<'a, T: Real> Epilogue<'a, T> {
    /// The epilogue of the sub-block of the output starting at element `offset`.
    ///
    /// # Panics
    /// If `add` is shorter than `offset` (an internal contract: callers slice inside the output).
    pub fn at(&self, offset: usize) -> Epilogue<'a, T> {
        Epilogue {
            add: self.add.map(|a| &a[offset..]),
            activation: self.activation,
        }
    }

    /// `((lo, hi), add)` when the activation is a clamp (none, `Relu`, `Clip`), which
    /// kernels finish in their registers with the add; `None` for the other activations.
    pub fn clamp(&self) -> Option<Clamp<'a, T>> {
        Some((self.activation.clamp_bounds()?, self.add))
    }

    /// Finishes `values`, the output elements `offset..offset + values.len()`.
    ///
    /// # Panics
    /// If `add` does not cover those elements (an internal contract).
    pub fn finish(&self, values: &mut [T], offset: usize) {
        let add = self.add.map(|a| &a[offset..offset + values.len()]);
        if T::finish_vectorized(values, add, self.activation) {
            return;
        }
        if let Some(add) = add {
            values.iter_mut().zip(add).for_each(|(v, &z)| *v += z);
        }
        self.activation.apply(values);
    }
}
