//! What a recurrent node's attributes say: the cell, its directions, sizes, clip, layout and
//! activation functions.

use super::activation::{Activation, parse_list};
use crate::error::{KernelError, Result};
use crate::kernel::NodeSpec;

/// The cell a recurrent node runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cell {
    /// `LSTM`; `input_forget` couples the forget gate to the input gate (`f = 1 − i`).
    Lstm {
        /// The `input_forget` attribute.
        input_forget: bool,
    },
    /// `GRU`; `linear_before_reset` applies the reset gate after the recurrent product.
    Gru {
        /// The `linear_before_reset` attribute.
        linear_before_reset: bool,
    },
    /// `RNN`: one gate.
    Rnn,
}

impl Cell {
    /// Gates per hidden unit (rows of `W` and `R` per hidden unit).
    pub fn gates(self) -> usize {
        match self {
            Cell::Lstm { .. } => 4,
            Cell::Gru { .. } => 3,
            Cell::Rnn => 1,
        }
    }

    /// The activation functions of one direction when the node names none.
    fn default_activations(self) -> &'static [&'static str] {
        match self {
            Cell::Lstm { .. } => &["Sigmoid", "Tanh", "Tanh"],
            Cell::Gru { .. } => &["Sigmoid", "Tanh"],
            Cell::Rnn => &["Tanh"],
        }
    }

    /// How many outputs the node may list (`Y`, `Y_h`, and `Y_c` for `LSTM`).
    pub fn max_outputs(self) -> usize {
        match self {
            Cell::Lstm { .. } => 3,
            _ => 2,
        }
    }
}

/// A recurrent node's attributes.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The cell.
    pub cell: Cell,
    /// Runs of the sequence: `[false]` (forward), `[true]` (reverse) or `[false, true]`
    /// (bidirectional); `true` means reversed.
    pub reversed: Vec<bool>,
    /// The `hidden_size` attribute, when given.
    pub hidden_size: Option<usize>,
    /// Pre-activations are clipped to `[-clip, clip]`.
    pub clip: Option<f32>,
    /// `layout = 1`: `X`, `Y` and the states are batch-major.
    pub batch_first: bool,
    /// The activation functions, one direction's after the other's.
    pub activations: Vec<Activation>,
}

impl Config {
    /// Reads the attributes of `spec` (an `LSTM`, `GRU` or `RNN` node).
    pub fn parse(spec: &NodeSpec<'_>) -> Result<Self> {
        let attrs = spec.attrs;
        let cell = match spec.op_type {
            "LSTM" => {
                attrs.only(&[
                    "activation_alpha",
                    "activation_beta",
                    "activations",
                    "clip",
                    "direction",
                    "hidden_size",
                    "input_forget",
                    "layout",
                ])?;
                Cell::Lstm {
                    input_forget: attrs.flag("input_forget", false)?,
                }
            }
            "GRU" => {
                attrs.only(&[
                    "activation_alpha",
                    "activation_beta",
                    "activations",
                    "clip",
                    "direction",
                    "hidden_size",
                    "layout",
                    "linear_before_reset",
                ])?;
                Cell::Gru {
                    linear_before_reset: attrs.flag("linear_before_reset", false)?,
                }
            }
            _ => {
                attrs.only(&[
                    "activation_alpha",
                    "activation_beta",
                    "activations",
                    "clip",
                    "direction",
                    "hidden_size",
                    "layout",
                ])?;
                Cell::Rnn
            }
        };
        let reversed = match attrs.string("direction", "forward")?.as_str() {
            "forward" => vec![false],
            "reverse" => vec![true],
            "bidirectional" => vec![false, true],
            other => {
                return Err(KernelError::BadAttribute {
                    name: "direction".into(),
                    reason: format!("'{other}' is not forward, reverse or bidirectional"),
                });
            }
        };
        let hidden_size = match attrs.opt_int("hidden_size")? {
            Some(h) if h > 0 => Some(h as usize),
            Some(h) => {
                return Err(KernelError::BadAttribute {
                    name: "hidden_size".into(),
                    reason: format!("{h} is not positive"),
                });
            }
            None => None,
        };
        let clip = attrs.opt_float("clip")?;
        if clip.is_some_and(|c| c.is_nan() || c < 0.0) {
            return Err(KernelError::BadAttribute {
                name: "clip".into(),
                reason: format!("{clip:?} is not a non-negative threshold"),
            });
        }
        let batch_first = match attrs.int("layout", 0)? {
            0 => false,
            1 => true,
            l => {
                return Err(KernelError::BadAttribute {
                    name: "layout".into(),
                    reason: format!("{l} is neither 0 nor 1"),
                });
            }
        };
        if spec.num_outputs > cell.max_outputs() {
            return Err(KernelError::Arity(format!(
                "{} outputs, {} lists at most {}",
                spec.num_outputs,
                spec.op_type,
                cell.max_outputs()
            )));
        }
        let activations = parse_list(attrs, cell.default_activations(), reversed.len())?;
        Ok(Config {
            cell,
            reversed,
            hidden_size,
            clip,
            batch_first,
            activations,
        })
    }

    /// The activation functions of direction `d`.
    pub fn activations_of(&self, d: usize) -> &[Activation] {
        let per = self.activations.len() / self.reversed.len();
        &self.activations[d * per..(d + 1) * per]
    }
}
