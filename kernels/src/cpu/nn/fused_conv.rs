//! `com.microsoft` `FusedConv` (ONNX Runtime's contrib op, version 1): a `Conv` whose output
//! gets a second tensor added and an activation applied before it is written out:
//! `Y = activation(conv(X, W) + B + Z)`. Inputs `X, W, B?, Z?` (`Z` has `Y`'s shape, or —
//! Spillway's extension, for residuals whose shapes a graph cannot prove equal — broadcasts
//! against it as `Add` does); the
//! attributes are `Conv`'s plus `activation` (`Relu`, `LeakyRelu`, `Sigmoid`, `Tanh`, `Clip`,
//! `HardSigmoid`; absent: none) and `activation_params` (`LeakyRelu`: alpha; `Clip`: min, max;
//! `HardSigmoid`: alpha, beta). The convolution is [`Conv`]'s, with the work done in its
//! epilogue.

use super::common::min_opset;
use super::conv::{self, Conv};
use super::epilogue::Activation;
use crate::Tensor;
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, opt_input};

/// The domain `FusedConv` lives in.
pub const DOMAIN: &str = "com.microsoft";

/// A built `FusedConv`.
#[derive(Debug)]
pub struct FusedConv {
    conv: Conv,
    activation: Activation,
}

/// Builds `FusedConv`.
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    min_opset(spec.opset, 1, "FusedConv")?;
    let mut known = conv::ATTRIBUTES.to_vec();
    known.extend(["activation", "activation_params"]);
    spec.attrs.only(&known)?;
    Ok(Box::new(FusedConv {
        conv: Conv::parse(spec.attrs, spec.options)?,
        activation: activation_attrs(spec.attrs)?,
    }))
}

/// The activation that `activation` and `activation_params` in `attrs` name (none when
/// absent).
pub(super) fn activation_attrs(attrs: &crate::Attributes) -> Result<Activation> {
    let name = attrs
        .has("activation")
        .then(|| attrs.string("activation", ""))
        .transpose()?;
    let params = attrs.opt_floats("activation_params")?;
    Activation::parse(name.as_deref(), params.as_deref())
}

impl Kernel for FusedConv {
    fn choice(&self) -> Option<String> {
        self.conv.choice()
    }

    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        if inputs.len() > 4 {
            return Err(KernelError::Arity(format!(
                "FusedConv takes at most 4 inputs (X, W, B, Z), got {}",
                inputs.len()
            )));
        }
        let conv_inputs = &inputs[..inputs.len().min(3)];
        self.conv
            .run_fused(conv_inputs, opt_input(inputs, 3), self.activation)
    }
}
