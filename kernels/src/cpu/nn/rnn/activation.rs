//! The activation functions the recurrent operators take by name (`activations`), with their
//! parameters from `activation_alpha` / `activation_beta`.

use super::element::RnnFloat;
use crate::Attributes;
use crate::error::{KernelError, Result};

/// One activation function of a recurrent cell.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Activation {
    /// `max(x, 0)`.
    Relu,
    /// `tanh(x)`.
    Tanh,
    /// `1 / (1 + e^-x)`.
    Sigmoid,
    /// `alpha · x + beta`.
    Affine(f32, f32),
    /// `x` for `x ≥ 0`, else `alpha · x`.
    LeakyRelu(f32),
    /// `x` for `x > alpha`, else 0.
    ThresholdedRelu(f32),
    /// `alpha · tanh(beta · x)`.
    ScaledTanh(f32, f32),
    /// `max(0, min(1, alpha · x + beta))`.
    HardSigmoid(f32, f32),
    /// `x` for `x ≥ 0`, else `alpha · (e^x − 1)`.
    Elu(f32),
    /// `x / (1 + |x|)`.
    Softsign,
    /// `ln(1 + e^x)`.
    Softplus,
}

/// How many of `activation_alpha` and `activation_beta` a function takes, and their defaults
/// (those of the ONNX operators of the same name).
fn parameters(name: &str) -> Option<(usize, f32, f32)> {
    Some(match name {
        "relu" | "tanh" | "sigmoid" | "softsign" | "softplus" => (0, 0.0, 0.0),
        "affine" => (2, 1.0, 0.0),
        "leakyrelu" => (1, 0.01, 0.0),
        "thresholdedrelu" => (1, 1.0, 0.0),
        "scaledtanh" => (2, 1.0, 1.0),
        "hardsigmoid" => (2, 0.2, 0.5),
        "elu" => (1, 1.0, 0.0),
        _ => return None,
    })
}

impl Activation {
    /// The function named `name` (any case), taking its alpha and beta (when it has them) from
    /// the front of `alphas` and `betas`, else their defaults.
    fn parse(
        name: &str,
        alphas: &mut impl Iterator<Item = f32>,
        betas: &mut impl Iterator<Item = f32>,
    ) -> Result<Self> {
        let lower = name.to_ascii_lowercase();
        let (count, mut alpha, mut beta) =
            parameters(&lower).ok_or_else(|| KernelError::UnsupportedAttribute {
                name: "activations".into(),
                reason: format!("unknown activation function '{name}'"),
            })?;
        if count >= 1 {
            alpha = alphas.next().unwrap_or(alpha);
        }
        if count >= 2 {
            beta = betas.next().unwrap_or(beta);
        }
        Ok(match lower.as_str() {
            "relu" => Activation::Relu,
            "tanh" => Activation::Tanh,
            "sigmoid" => Activation::Sigmoid,
            "softsign" => Activation::Softsign,
            "softplus" => Activation::Softplus,
            "affine" => Activation::Affine(alpha, beta),
            "leakyrelu" => Activation::LeakyRelu(alpha),
            "thresholdedrelu" => Activation::ThresholdedRelu(alpha),
            "scaledtanh" => Activation::ScaledTanh(alpha, beta),
            "hardsigmoid" => Activation::HardSigmoid(alpha, beta),
            _ => Activation::Elu(alpha),
        })
    }

    /// `xs[i] ← f(xs[i])`.
    pub fn apply<T: RnnFloat>(self, xs: &mut [T]) {
        let zero = T::zero();
        let one = T::one();
        match self {
            Activation::Relu => xs.iter_mut().for_each(|x| *x = x.max(zero)),
            Activation::Tanh => T::tanh_slice(xs),
            Activation::Sigmoid => T::sigmoid_slice(xs),
            Activation::Affine(a, b) => {
                let (a, b) = (T::of(a as f64), T::of(b as f64));
                xs.iter_mut().for_each(|x| *x = a * *x + b);
            }
            Activation::LeakyRelu(a) => {
                let a = T::of(a as f64);
                xs.iter_mut()
                    .for_each(|x| *x = if *x >= zero { *x } else { a * *x });
            }
            Activation::ThresholdedRelu(a) => {
                let a = T::of(a as f64);
                xs.iter_mut()
                    .for_each(|x| *x = if *x > a { *x } else { zero });
            }
            Activation::ScaledTanh(a, b) => {
                let (a, b) = (T::of(a as f64), T::of(b as f64));
                xs.iter_mut().for_each(|x| *x = b * *x);
                T::tanh_slice(xs);
                xs.iter_mut().for_each(|x| *x = a * *x);
            }
            Activation::HardSigmoid(a, b) => {
                let (a, b) = (T::of(a as f64), T::of(b as f64));
                xs.iter_mut()
                    .for_each(|x| *x = crate::cpu::unary::float_ops::unit_clamp(a * *x + b));
            }
            Activation::Elu(a) => {
                let a = T::of(a as f64);
                xs.iter_mut().for_each(|x| {
                    if *x < zero {
                        *x = a * x.exp_m1();
                    }
                });
            }
            Activation::Softsign => xs.iter_mut().for_each(|x| *x = *x / (one + x.abs())),
            Activation::Softplus => xs.iter_mut().for_each(|x| {
                // ln(1 + e^x) without overflow for large x.
                *x = if *x > zero {
                    *x + (-*x).exp().ln_1p()
                } else {
                    x.exp().ln_1p()
                }
            }),
        }
    }
}

/// The node's activation functions: `per_direction` of them per direction (`defaults` when
/// the node names none; one direction's list serves both of a bidirectional node), with
/// `activation_alpha` and `activation_beta` consumed in that order by the functions that take
/// them (as ONNX Runtime reads them).
pub fn parse_list(attrs: &Attributes, defaults: &[&str], dirs: usize) -> Result<Vec<Activation>> {
    let per_direction = defaults.len();
    let mut names = attrs
        .opt_strings("activations")?
        .unwrap_or_else(|| defaults.iter().map(|s| s.to_string()).collect());
    if names.len() == per_direction && dirs == 2 {
        names.extend_from_within(..);
    }
    if names.len() != per_direction * dirs {
        return Err(KernelError::BadAttribute {
            name: "activations".into(),
            reason: format!(
                "{} functions for {dirs} direction(s), expected {}",
                names.len(),
                per_direction * dirs
            ),
        });
    }
    let alphas = attrs.opt_floats("activation_alpha")?.unwrap_or_default();
    let betas = attrs.opt_floats("activation_beta")?.unwrap_or_default();
    let (mut alphas, mut betas) = (alphas.into_iter(), betas.into_iter());
    names
        .iter()
        .map(|n| Activation::parse(n, &mut alphas, &mut betas))
        .collect()
}
