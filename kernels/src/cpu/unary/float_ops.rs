//! The floating-point elementwise functions (activations and math), each a plain map
//! that is monomorphised per op and type so the loop has no per-element dispatch.

use std::mem::MaybeUninit;

use half::{bf16, f16};
use ndarray::{ArrayD, ArrayViewD, IxDyn};
use rayon::prelude::*;

use super::real::Real;
use crate::Tensor;
use crate::cpu::binary::broadcast::{PAR_THRESHOLD, build_vec, unary_map};
use crate::error::{KernelError, Result};

/// A floating-point unary function with its attribute values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FloatOp {
    /// `max(x, 0)`.
    Relu,
    /// `x < 0 ? alpha * x : x`.
    LeakyRelu(f32),
    /// `1 / (1 + exp(-x))`.
    Sigmoid,
    /// `max(0, min(1, alpha * x + beta))`.
    HardSigmoid(f32, f32),
    /// `x * max(0, min(1, x / 6 + 0.5))`.
    HardSwish,
    /// `tanh(x)`.
    Tanh,
    /// `x >= 0 ? x : alpha * (exp(x) - 1)`.
    Elu(f32),
    /// `gamma * (x > 0 ? x : alpha * (exp(x) - 1))`.
    Selu(f32, f32),
    /// `max(0, x) + min(0, alpha * (exp(x / alpha) - 1))`.
    Celu(f32),
    /// `ln(1 + exp(x))`.
    Softplus,
    /// `x / (1 + |x|)`.
    Softsign,
    /// Square root.
    Sqrt,
    /// `e^x`.
    Exp,
    /// Natural logarithm.
    Log,
    /// `-x`.
    Neg,
    /// `|x|`.
    Abs,
    /// -1, 0 or 1 (NaN stays NaN).
    Sign,
    /// Round down.
    Floor,
    /// Round up.
    Ceil,
    /// Round to nearest, halves to even.
    Round,
    /// `1 / x`.
    Reciprocal,
    /// The error function.
    Erf,
    /// GELU; `true` for the tanh approximation.
    Gelu(bool),
    /// Cosine.
    Cos,
    /// Sine.
    Sin,
    /// Tangent.
    Tan,
    /// Arccosine.
    Acos,
    /// Arcsine.
    Asin,
    /// Arctangent.
    Atan,
    /// Hyperbolic cosine.
    Cosh,
    /// Hyperbolic sine.
    Sinh,
    /// Inverse hyperbolic cosine.
    Acosh,
    /// Inverse hyperbolic sine.
    Asinh,
    /// Inverse hyperbolic tangent.
    Atanh,
    /// `x > alpha ? x : 0`.
    ThresholdedRelu(f32),
    /// `x < -lambd ? x + bias : (x > lambd ? x - bias : 0)`, as `(bias, lambd)`.
    Shrink(f32, f32),
    /// `x * tanh(ln(1 + e^x))`.
    Mish,
    /// `x * sigmoid(alpha * x)`.
    Swish(f32),
}

/// `max(0, min(1, v))` as ONNX (numpy) means it: NaN stays NaN (Rust's `max`/`min` drop it).
pub(crate) fn unit_clamp<F: num_traits::Float>(v: F) -> F {
    if v < F::zero() {
        F::zero()
    } else if v > F::one() {
        F::one()
    } else {
        v
    }
}

/// `op` applied to every element of a float array.
pub fn float_map<F: Real>(op: FloatOp, a: &ArrayViewD<'_, F>) -> ArrayD<F> {
    let zero = F::zero();
    let one = F::one();
    let half = F::of(0.5);
    match op {
        FloatOp::Relu => unary_map(a, |&x: &F| if x < zero { zero } else { x }),
        FloatOp::LeakyRelu(alpha) => {
            let alpha = F::of(alpha as f64);
            unary_map(a, move |&x: &F| if x < zero { alpha * x } else { x })
        }
        FloatOp::Sigmoid => in_place(a, F::sigmoid_slice),
        FloatOp::HardSigmoid(alpha, beta) => {
            let (alpha, beta) = (F::of(alpha as f64), F::of(beta as f64));
            unary_map(a, move |&x: &F| unit_clamp(alpha * x + beta))
        }
        FloatOp::HardSwish => {
            let sixth = F::of(1.0 / 6.0);
            unary_map(a, move |&x: &F| x * unit_clamp(x * sixth + half))
        }
        FloatOp::Tanh => unary_map(a, |&x: &F| x.tanh()),
        FloatOp::Elu(alpha) => {
            let alpha = F::of(alpha as f64);
            unary_map(
                a,
                move |&x: &F| if x >= zero { x } else { alpha * x.exp_m1() },
            )
        }
        FloatOp::Selu(alpha, gamma) => {
            let (alpha, gamma) = (F::of(alpha as f64), F::of(gamma as f64));
            unary_map(a, move |&x: &F| {
                if x > zero {
                    gamma * x
                } else {
                    gamma * (alpha * x.exp() - alpha)
                }
            })
        }
        FloatOp::Celu(alpha) => {
            let alpha = F::of(alpha as f64);
            // ONNX's `max(0, x) + min(0, alpha · (exp(x / alpha) - 1))` with NaN-propagating
            // max and min, as numpy's: NaN in gives NaN, and so does alpha = 0.
            unary_map(a, move |&x: &F| {
                let negative = alpha * (x / alpha).exp_m1();
                let positive = if x > zero || x.is_nan() { x } else { zero };
                positive
                    + if negative < zero || negative.is_nan() {
                        negative
                    } else {
                        zero
                    }
            })
        }
        FloatOp::Softplus => unary_map(a, |&x: &F| {
            // Stable form: never evaluates exp of a large positive number.
            if x > zero {
                x + (-x).exp().ln_1p()
            } else {
                x.exp().ln_1p()
            }
        }),
        FloatOp::Softsign => unary_map(a, |&x: &F| x / (one + x.abs())),
        FloatOp::Sqrt => unary_map(a, |&x: &F| x.sqrt()),
        FloatOp::Exp => in_place(a, |xs| F::exp_slice(xs, zero)),
        FloatOp::Log => unary_map(a, |&x: &F| x.ln()),
        FloatOp::Neg => unary_map(a, |&x: &F| -x),
        FloatOp::Abs => unary_map(a, |&x: &F| x.abs()),
        FloatOp::Sign => unary_map(a, |&x: &F| {
            if x > zero {
                one
            } else if x < zero {
                -one
            } else {
                x
            }
        }),
        FloatOp::Floor => unary_map(a, |&x: &F| x.floor()),
        FloatOp::Ceil => unary_map(a, |&x: &F| x.ceil()),
        FloatOp::Round => unary_map(a, |&x: &F| x.round_even()),
        FloatOp::Reciprocal => unary_map(a, |&x: &F| one / x),
        FloatOp::Erf => in_place(a, F::erf_slice),
        FloatOp::Gelu(false) => in_place(a, F::gelu_slice),
        FloatOp::Gelu(true) => {
            let k = F::of((2.0 / std::f64::consts::PI).sqrt());
            let c = F::of(0.044715);
            unary_map(a, move |&x: &F| {
                half * x * (one + (k * (x + c * x * x * x)).tanh())
            })
        }
        FloatOp::Cos => unary_map(a, |&x: &F| x.cos()),
        FloatOp::Sin => unary_map(a, |&x: &F| x.sin()),
        FloatOp::Tan => unary_map(a, |&x: &F| x.tan()),
        FloatOp::Acos => unary_map(a, |&x: &F| x.acos()),
        FloatOp::Asin => unary_map(a, |&x: &F| x.asin()),
        FloatOp::Atan => unary_map(a, |&x: &F| x.atan()),
        FloatOp::Cosh => unary_map(a, |&x: &F| x.cosh()),
        FloatOp::Sinh => unary_map(a, |&x: &F| x.sinh()),
        FloatOp::Acosh => unary_map(a, |&x: &F| x.acosh()),
        FloatOp::Asinh => unary_map(a, |&x: &F| x.asinh()),
        FloatOp::Atanh => unary_map(a, |&x: &F| x.atanh()),
        FloatOp::ThresholdedRelu(alpha) => {
            let alpha = F::of(alpha as f64);
            unary_map(a, move |&x: &F| if x > alpha { x } else { zero })
        }
        FloatOp::Shrink(bias, lambd) => {
            let (bias, lambd) = (F::of(bias as f64), F::of(lambd as f64));
            unary_map(a, move |&x: &F| {
                if x < -lambd {
                    x + bias
                } else if x > lambd {
                    x - bias
                } else {
                    zero
                }
            })
        }
        FloatOp::Mish => unary_map(a, |&x: &F| {
            // softplus in the stable form of `Softplus` above.
            let sp = if x > zero {
                x + (-x).exp().ln_1p()
            } else {
                x.exp().ln_1p()
            };
            x * sp.tanh()
        }),
        FloatOp::Swish(alpha) => {
            let alpha = F::of(alpha as f64);
            unary_map(a, move |&x: &F| x / (one + (-alpha * x).exp()))
        }
    }
}

/// A copy of `a` (standard layout) with `f` applied to its elements in place.
fn in_place<F: Real>(a: &ArrayViewD<'_, F>, f: impl Fn(&mut [F]) + Sync) -> ArrayD<F> {
    let a = a.as_standard_layout();
    let src = a.as_slice().expect("standard layout is contiguous");
    // The copy goes to the output's offered (or pooled) buffer, not to fresh pages, a chunk
    // at a time, each finished by `f` while it is still in L1 (a whole copy, then `f` over
    // it, made two trips through memory for RetinaNet's 8 M scores).
    let data = build_vec(src.len(), |out| {
        let finish = |(out, src): (&mut [MaybeUninit<F>], &[F])| {
            for (o, &s) in out.iter_mut().zip(src) {
                o.write(s);
            }
            // SAFETY: every element of `out` was written just above.
            f(unsafe { &mut *(out as *mut [MaybeUninit<F>] as *mut [F]) });
        };
        if src.len() >= PAR_THRESHOLD {
            out.par_chunks_mut(IN_CACHE)
                .zip(src.par_chunks(IN_CACHE))
                .for_each(finish);
        } else {
            out.chunks_mut(IN_CACHE)
                .zip(src.chunks(IN_CACHE))
                .for_each(finish);
        }
    });
    ArrayD::from_shape_vec(IxDyn(a.shape()), data).expect("length equals the shape's size")
}

/// Elements [`in_place`] copies and finishes at a time (16 KiB of `f32`).
const IN_CACHE: usize = 4096;

/// `op` on a float tensor (half types computed in `f32`), or `UnsupportedDType`.
pub fn float_tensor(op: FloatOp, x: &Tensor) -> Result<Tensor> {
    Ok(match x {
        Tensor::F32(a) => Tensor::from(float_map(op, &a.view())),
        Tensor::F64(a) => Tensor::from(float_map(op, &a.view())),
        Tensor::F16(a) => {
            let wide = a.mapv(f16::to_f32);
            Tensor::from(float_map(op, &wide.view()).mapv(f16::from_f32))
        }
        Tensor::BF16(a) => {
            let wide = a.mapv(bf16::to_f32);
            Tensor::from(float_map(op, &wide.view()).mapv(bf16::from_f32))
        }
        other => {
            return Err(KernelError::UnsupportedDType {
                index: 0,
                dtype: other.dtype(),
            });
        }
    })
}
