//! The sizes of one run of a recurrent node, checked against every input's shape, and where
//! each (step, direction, batch entry) lives in `X`, the states and the outputs.

use super::config::Config;
use crate::Tensor;
use crate::error::{KernelError, Result};

/// Sizes of a run, and the layout (`layout = 1`: batch-major) of `X`, `Y` and the states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dims {
    /// Steps (`seq_length`).
    pub seq: usize,
    /// Batch entries.
    pub batch: usize,
    /// Features per step of `X`.
    pub input: usize,
    /// Hidden units.
    pub hidden: usize,
    /// Directions (1, or 2 when bidirectional).
    pub dirs: usize,
    /// Gates per hidden unit.
    pub gates: usize,
    /// `layout = 1`.
    pub batch_first: bool,
}

fn shape_error(what: &str, got: &[usize], want: &[usize]) -> KernelError {
    KernelError::Shape(format!("{what} has shape {got:?}, expected {want:?}"))
}

fn expect(what: &str, t: Option<&Tensor>, want: &[usize]) -> Result<()> {
    match t {
        Some(t) if t.shape() != want => Err(shape_error(what, t.shape(), want)),
        _ => Ok(()),
    }
}

impl Dims {
    /// The sizes that `X`, `W` and `R` give, checked against `config` and the optional inputs
    /// `B`, `sequence_lens`, `initial_h`, `initial_c` and `P` (absent ones are `None`).
    #[allow(clippy::too_many_arguments)]
    pub fn check(
        config: &Config,
        x: &Tensor,
        w: &Tensor,
        r: &Tensor,
        b: Option<&Tensor>,
        lens: Option<&Tensor>,
        h0: Option<&Tensor>,
        c0: Option<&Tensor>,
        p: Option<&Tensor>,
    ) -> Result<Self> {
        let &[a0, a1, input] = x.shape() else {
            return Err(KernelError::Shape(format!(
                "X has shape {:?}, expected rank 3",
                x.shape()
            )));
        };
        let (seq, batch) = if config.batch_first {
            (a1, a0)
        } else {
            (a0, a1)
        };
        let dirs = config.reversed.len();
        let gates = config.cell.gates();
        let hidden = match (config.hidden_size, r.shape()) {
            (Some(h), _) => h,
            (None, &[_, _, h]) => h,
            (None, s) => return Err(KernelError::Shape(format!("R has shape {s:?}"))),
        };
        let d = Dims {
            seq,
            batch,
            input,
            hidden,
            dirs,
            gates,
            batch_first: config.batch_first,
        };
        let gh = gates * hidden;
        expect("W", Some(w), &[dirs, gh, input])?;
        expect("R", Some(r), &[dirs, gh, hidden])?;
        expect("B", b, &[dirs, 2 * gh])?;
        expect("sequence_lens", lens, &[batch])?;
        expect("initial_h", h0, &d.state_shape())?;
        expect("initial_c", c0, &d.state_shape())?;
        expect("P", p, &[dirs, 3 * hidden])?;
        Ok(d)
    }

    /// Rows of the gates' matrices per direction (`gates · hidden`).
    pub fn gate_rows(&self) -> usize {
        self.gates * self.hidden
    }

    /// The shape of `initial_h`, `initial_c`, `Y_h` and `Y_c`.
    pub fn state_shape(&self) -> Vec<usize> {
        if self.batch_first {
            vec![self.batch, self.dirs, self.hidden]
        } else {
            vec![self.dirs, self.batch, self.hidden]
        }
    }

    /// The shape of `Y`.
    pub fn y_shape(&self) -> Vec<usize> {
        if self.batch_first {
            vec![self.batch, self.seq, self.dirs, self.hidden]
        } else {
            vec![self.seq, self.dirs, self.batch, self.hidden]
        }
    }

    /// The row of `X` (`seq · batch` rows of `input`) holding step `t` of batch entry `b`.
    pub fn x_row(&self, t: usize, b: usize) -> usize {
        if self.batch_first {
            b * self.seq + t
        } else {
            t * self.batch + b
        }
    }

    /// Where direction `d`'s state of batch entry `b` starts in a state tensor.
    pub fn state_at(&self, d: usize, b: usize) -> usize {
        let slot = if self.batch_first {
            b * self.dirs + d
        } else {
            d * self.batch + b
        };
        slot * self.hidden
    }

    /// Where direction `d`'s output at step `t` for batch entry `b` starts in `Y`.
    pub fn y_at(&self, t: usize, d: usize, b: usize) -> usize {
        let slot = if self.batch_first {
            (b * self.seq + t) * self.dirs + d
        } else {
            (t * self.dirs + d) * self.batch + b
        };
        slot * self.hidden
    }
}
