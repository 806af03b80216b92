//! Sliding-window geometry shared by Conv and the pools: `auto_pad`, `pads`, `strides`,
//! `dilations`, `kernel_shape` and the output size they imply.

use crate::Attributes;
use crate::error::{KernelError, Result};

/// The `auto_pad` attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AutoPad {
    /// Explicit `pads` (default zero).
    NotSet,
    /// Output = ceil(input / stride); an odd total pad puts the extra cell at the end.
    SameUpper,
    /// As `SameUpper` but the extra cell goes at the beginning.
    SameLower,
    /// No padding.
    Valid,
}

impl AutoPad {
    /// Parses the attribute (default `NOTSET`).
    pub fn parse(attrs: &Attributes) -> Result<Self> {
        match attrs.string("auto_pad", "NOTSET")?.as_str() {
            "NOTSET" | "" => Ok(AutoPad::NotSet),
            "SAME_UPPER" => Ok(AutoPad::SameUpper),
            "SAME_LOWER" => Ok(AutoPad::SameLower),
            "VALID" => Ok(AutoPad::Valid),
            other => Err(KernelError::BadAttribute {
                name: "auto_pad".into(),
                reason: format!("unknown value '{other}'"),
            }),
        }
    }
}

/// The window attributes as given, before the input shape is known.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowAttrs {
    /// `auto_pad`.
    pub auto_pad: AutoPad,
    /// `kernel_shape` if given.
    pub kernel_shape: Option<Vec<usize>>,
    /// `strides` if given.
    pub strides: Option<Vec<usize>>,
    /// `dilations` if given.
    pub dilations: Option<Vec<usize>>,
    /// `pads` if given (`[begin..., end...]`).
    pub pads: Option<Vec<usize>>,
}

fn positive(attrs: &Attributes, name: &str) -> Result<Option<Vec<usize>>> {
    let Some(v) = attrs.opt_ints(name)? else {
        return Ok(None);
    };
    v.iter()
        .map(|&x| {
            usize::try_from(x)
                .ok()
                .filter(|&u| u > 0)
                .ok_or_else(|| KernelError::BadAttribute {
                    name: name.into(),
                    reason: format!("values must be positive, got {v:?}"),
                })
        })
        .collect::<Result<Vec<_>>>()
        .map(Some)
}

impl WindowAttrs {
    /// Reads and validates the attributes (values only; lengths are checked in [`Self::resolve`]).
    pub fn parse(attrs: &Attributes) -> Result<Self> {
        let pads = match attrs.opt_ints("pads")? {
            None => None,
            Some(p) => Some(
                p.iter()
                    .map(|&x| usize::try_from(x))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|_| KernelError::BadAttribute {
                        name: "pads".into(),
                        reason: format!("negative pads are not allowed: {p:?}"),
                    })?,
            ),
        };
        Ok(WindowAttrs {
            auto_pad: AutoPad::parse(attrs)?,
            kernel_shape: positive(attrs, "kernel_shape")?,
            strides: positive(attrs, "strides")?,
            dilations: positive(attrs, "dilations")?,
            pads,
        })
    }

    /// Resolves the geometry for `input` spatial dims. `kernel` is the kernel shape from the
    /// weights (Conv) or `None` (pools: `kernel_shape` is then required).
    pub fn resolve(
        &self,
        input: &[usize],
        kernel: Option<&[usize]>,
        ceil_mode: bool,
    ) -> Result<Geometry> {
        let n = input.len();
        let kernel = match (&self.kernel_shape, kernel) {
            (Some(k), Some(w)) if k.as_slice() != w => {
                return Err(KernelError::Shape(format!(
                    "kernel_shape {k:?} differs from the weights' spatial shape {w:?}"
                )));
            }
            (_, Some(w)) => w.to_vec(),
            (Some(k), None) => k.clone(),
            (None, None) => {
                return Err(KernelError::BadAttribute {
                    name: "kernel_shape".into(),
                    reason: "required but absent".into(),
                });
            }
        };
        let check_len = |name: &str, len: usize, want: usize| -> Result<()> {
            if len != want {
                return Err(KernelError::BadAttribute {
                    name: name.into(),
                    reason: format!("has {len} values, expected {want} for {n} spatial dims"),
                });
            }
            Ok(())
        };
        check_len("kernel_shape", kernel.len(), n)?;
        let strides = self.strides.clone().unwrap_or_else(|| vec![1; n]);
        check_len("strides", strides.len(), n)?;
        let dilations = self.dilations.clone().unwrap_or_else(|| vec![1; n]);
        check_len("dilations", dilations.len(), n)?;
        let mut pad_begin = vec![0; n];
        let mut pad_end = vec![0; n];
        let mut out = vec![0; n];
        for i in 0..n {
            if strides[i] == 0 || dilations[i] == 0 {
                return Err(KernelError::BadAttribute {
                    name: if strides[i] == 0 {
                        "strides"
                    } else {
                        "dilations"
                    }
                    .into(),
                    reason: format!("must be positive, axis {i} has 0"),
                });
            }
            let dk = kernel[i]
                .checked_sub(1)
                .and_then(|k| k.checked_mul(dilations[i]))
                .and_then(|k| k.checked_add(1))
                .ok_or_else(|| KernelError::BadAttribute {
                    name: "kernel_shape".into(),
                    reason: format!(
                        "axis {i}: a window of {} with dilation {} is empty or too large",
                        kernel[i], dilations[i]
                    ),
                })?;
            match self.auto_pad {
                AutoPad::SameUpper | AutoPad::SameLower => {
                    out[i] = input[i].div_ceil(strides[i]);
                    let total = ((out[i].max(1) - 1).saturating_mul(strides[i]))
                        .saturating_add(dk)
                        .saturating_sub(input[i]);
                    let small = total / 2;
                    if self.auto_pad == AutoPad::SameUpper {
                        (pad_begin[i], pad_end[i]) = (small, total - small);
                    } else {
                        (pad_begin[i], pad_end[i]) = (total - small, small);
                    }
                }
                AutoPad::Valid | AutoPad::NotSet => {
                    if self.auto_pad == AutoPad::NotSet
                        && let Some(p) = &self.pads
                    {
                        check_len("pads", p.len(), 2 * n)?;
                        (pad_begin[i], pad_end[i]) = (p[i], p[i + n]);
                    }
                    let padded = input[i]
                        .checked_add(pad_begin[i])
                        .and_then(|p| p.checked_add(pad_end[i]))
                        .ok_or_else(|| {
                            KernelError::ResourceLimit(format!("spatial dim {i}: pads overflow"))
                        })?;
                    if padded < dk {
                        return Err(KernelError::Shape(format!(
                            "spatial dim {i}: padded input {padded} is smaller than the \
                             (dilated) kernel {dk}"
                        )));
                    }
                    let span = padded - dk;
                    out[i] = if ceil_mode {
                        span.div_ceil(strides[i])
                    } else {
                        span / strides[i]
                    } + 1;
                    // A last window that would start inside the end padding is dropped.
                    if ceil_mode && (out[i] - 1) * strides[i] >= input[i] + pad_begin[i] {
                        out[i] -= 1;
                    }
                }
            }
        }
        // The window count is the output's size per image and channel: a model's pads or
        // strides must not ask for more than a tensor may hold.
        crate::limits::checked_elements(&out, 4)?;
        Ok(Geometry {
            kernel,
            strides,
            dilations,
            pad_begin,
            pad_end,
            out,
        })
    }
}

/// The resolved window geometry for one input shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Geometry {
    /// Kernel extent per spatial dim.
    pub kernel: Vec<usize>,
    /// Stride per spatial dim.
    pub strides: Vec<usize>,
    /// Dilation per spatial dim.
    pub dilations: Vec<usize>,
    /// Padding before each spatial dim.
    pub pad_begin: Vec<usize>,
    /// Padding after each spatial dim.
    pub pad_end: Vec<usize>,
    /// Output extent per spatial dim.
    pub out: Vec<usize>,
}

/// Row-major strides of `shape`.
pub fn strides_of(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AttrValue;

    #[test]
    fn same_upper_and_lower_split_odd_padding() {
        // in 5, kernel 4, stride 1: out 5, total pad 3.
        for (mode, begin) in [("SAME_UPPER", 1), ("SAME_LOWER", 2)] {
            let a = Attributes::new().with("auto_pad", AttrValue::String(mode.into()));
            let g = WindowAttrs::parse(&a)
                .unwrap()
                .resolve(&[5], Some(&[4]), false)
                .unwrap();
            assert_eq!(g.out, vec![5]);
            assert_eq!((g.pad_begin[0], g.pad_end[0]), (begin, 3 - begin));
        }
    }

    #[test]
    fn ceil_mode_drops_window_starting_in_padding() {
        // torch: in 4, k 2, s 2, pad 1 each side, ceil -> 3 (not 4).
        let a = Attributes::new()
            .with("pads", AttrValue::Ints(vec![1, 1]))
            .with("strides", AttrValue::Ints(vec![2]));
        let w = WindowAttrs::parse(&a).unwrap();
        assert_eq!(w.resolve(&[4], Some(&[2]), true).unwrap().out, vec![3]);
        assert_eq!(w.resolve(&[4], Some(&[2]), false).unwrap().out, vec![3]);
        assert_eq!(w.resolve(&[5], Some(&[2]), true).unwrap().out, vec![3]);
        let a = Attributes::new().with("strides", AttrValue::Ints(vec![2]));
        let w = WindowAttrs::parse(&a).unwrap();
        assert_eq!(w.resolve(&[5], Some(&[2]), true).unwrap().out, vec![3]);
        assert_eq!(w.resolve(&[5], Some(&[2]), false).unwrap().out, vec![2]);
    }

    #[test]
    fn bad_values_are_errors() {
        let a = Attributes::new().with("strides", AttrValue::Ints(vec![0]));
        assert!(WindowAttrs::parse(&a).is_err());
        let a = Attributes::new().with("pads", AttrValue::Ints(vec![1, 1, 1]));
        assert!(
            WindowAttrs::parse(&a)
                .unwrap()
                .resolve(&[4, 4], Some(&[2, 2]), false)
                .is_err()
        );
        let a = Attributes::new();
        assert!(
            WindowAttrs::parse(&a)
                .unwrap()
                .resolve(&[1], Some(&[3]), false)
                .is_err()
        );
    }
}
