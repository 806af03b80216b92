//! Pad: constant, edge, reflect and wrap padding; negative pads crop first.

use ndarray::{ArcArray, IxDyn};

use super::util::{min_opset, norm_axes, opt_ints, tensor_from};
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input, opt_input};
use crate::{Element, Tensor, dispatch_all};

/// How out-of-range positions are filled.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    Constant,
    Edge,
    Reflect,
    Wrap,
}

/// Pad. Opsets 2–10 take `pads` and `value` as attributes; 11+ as inputs, with
/// `axes` as input 3 from 18.
#[derive(Debug)]
pub struct Pad {
    mode: Mode,
    /// `(pads, value)` for opsets before 11.
    attrs: Option<(Vec<i64>, f32)>,
}

/// Builds [`Pad`].
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    min_opset(spec, 2)?;
    let a = spec.attrs;
    let attrs = if spec.opset < 11 {
        a.only(&["mode", "pads", "value"])?;
        let pads = a
            .opt_ints("pads")?
            .ok_or_else(|| KernelError::BadAttribute {
                name: "pads".into(),
                reason: "required".into(),
            })?;
        Some((pads, a.float("value", 0.0)?))
    } else {
        a.only(&["mode"])?;
        None
    };
    let mode = match a.string("mode", "constant")?.as_str() {
        "constant" => Mode::Constant,
        "edge" => Mode::Edge,
        "reflect" => Mode::Reflect,
        "wrap" if spec.opset >= 19 => Mode::Wrap,
        other => {
            return Err(KernelError::UnsupportedAttribute {
                name: "mode".into(),
                reason: format!("unknown pad mode '{other}'"),
            });
        }
    };
    Ok(Box::new(Pad { mode, attrs }))
}

impl Kernel for Pad {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        let rank = x.rank();
        let (pads, value, axes) = match &self.attrs {
            Some((p, v)) => (p.clone(), Some(Tensor::scalar(*v)), None),
            None => {
                let value = opt_input(inputs, 2).filter(|t| !t.is_empty()).cloned();
                (
                    input(inputs, 1)?.to_i64_vec()?,
                    value,
                    opt_ints(opt_input(inputs, 3))?,
                )
            }
        };
        let axes = match axes {
            Some(a) => norm_axes(&a, rank)?,
            None => (0..rank).collect(),
        };
        if pads.len() != 2 * axes.len() {
            return Err(KernelError::Shape(format!(
                "Pad: {} pads for {} axes",
                pads.len(),
                axes.len()
            )));
        }
        let mut begin = vec![0i64; rank];
        let mut end = vec![0i64; rank];
        for (i, &ax) in axes.iter().enumerate() {
            begin[ax] = pads[i];
            end[ax] = pads[i + axes.len()];
        }
        let padded: Option<Vec<usize>> = (0..rank)
            .map(|ax| {
                let n = i64::try_from(x.shape()[ax]).ok()?;
                // Negative pads crop: their negation must exist too.
                begin[ax].checked_neg()?;
                end[ax].checked_neg()?;
                let out = n.checked_add(begin[ax])?.checked_add(end[ax])?;
                usize::try_from(out.max(0)).ok()
            })
            .collect();
        let padded = padded.ok_or_else(|| {
            KernelError::InvalidValue(format!("pads {pads:?} overflow the axes' sizes"))
        })?;
        let elements = crate::limits::checked_elements(&padded, x.dtype().size_of())?;
        if elements == 0 {
            // Checked like the maps below, without building them.
            for ax in 0..rank {
                axis_extent(x.shape()[ax], begin[ax], end[ax], self.mode)?;
            }
            return Ok(vec![Tensor::zeros(x.dtype(), &padded)]);
        }
        let maps = (0..rank)
            .map(|ax| axis_map(x.shape()[ax], begin[ax], end[ax], self.mode))
            .collect::<Result<Vec<_>>>()?;
        // A value given as an input has the data's type; the opset-2 attribute is a float.
        let value = match value {
            Some(v) if v.dtype() != x.dtype() => Some(super::cast::cast_tensor(&v, x.dtype())?),
            v => v,
        };
        let out = dispatch_all!(x, a => pad_typed(a, &maps, value.as_ref())?);
        Ok(vec![out])
    }
}

/// `(crop_lo, kept, out)` of one axis: the source elements cropped before, those kept, and
/// the output's length; an error for pads that remove more than the axis has, or that pad an
/// empty axis with its own elements.
fn axis_extent(n: usize, begin: i64, end: i64, mode: Mode) -> Result<(i64, i64, i64)> {
    let n = n as i64;
    let crop_lo = (-begin).max(0);
    let kept = n - crop_lo - (-end).max(0);
    let out = kept + begin.max(0) + end.max(0);
    if kept < 0 || out < 0 {
        return Err(KernelError::InvalidValue(format!(
            "pads ({begin}, {end}) remove more than the {n} elements of an axis"
        )));
    }
    if kept == 0 && out > 0 && mode != Mode::Constant {
        return Err(KernelError::InvalidValue(format!(
            "{mode:?} padding of an empty axis"
        )));
    }
    Ok((crop_lo, kept, out))
}

/// For each output position along one axis, the source index (`None` = the constant).
fn axis_map(n: usize, begin: i64, end: i64, mode: Mode) -> Result<Vec<Option<usize>>> {
    let (crop_lo, kept, out) = axis_extent(n, begin, end, mode)?;
    let pre = begin.max(0);
    Ok((0..out)
        .map(|i| {
            let j = i - pre;
            let k = if (0..kept).contains(&j) {
                Some(j)
            } else {
                match mode {
                    Mode::Constant => None,
                    Mode::Edge => Some(j.clamp(0, kept - 1)),
                    Mode::Wrap => Some(j.rem_euclid(kept)),
                    Mode::Reflect if kept == 1 => Some(0),
                    Mode::Reflect => {
                        let m = j.rem_euclid(2 * (kept - 1));
                        Some(if m >= kept { 2 * (kept - 1) - m } else { m })
                    }
                }
            };
            k.map(|k| (k + crop_lo) as usize)
        })
        .collect())
}

/// `(lo, first, len)` when `map` is `lo` padding cells, then source positions `first..first +
/// len` in order, then padding cells (always so in constant mode); `None` otherwise.
fn contiguous_run(map: &[Option<usize>]) -> Option<(usize, usize, usize)> {
    let lo = map.iter().position(Option::is_some)?;
    let first = map[lo]?;
    let len = map[lo..].iter().take_while(|s| s.is_some()).count();
    let in_order = (0..len).all(|j| map[lo + j] == Some(first + j));
    let rest_padding = map[lo + len..].iter().all(Option::is_none);
    (in_order && rest_padding).then_some((lo, first, len))
}

fn pad_typed<T: Element>(
    a: &ArcArray<T, IxDyn>,
    maps: &[Vec<Option<usize>>],
    value: Option<&Tensor>,
) -> Result<Tensor> {
    let fill = match value {
        Some(v) => v.view::<T>()?.iter().next().cloned().unwrap_or_default(),
        None => T::default(),
    };
    let out_shape: Vec<usize> = maps.iter().map(Vec::len).collect();
    let total: usize = out_shape.iter().product();
    let std = a.as_standard_layout();
    let src = std.as_slice().expect("standard layout");
    let rank = maps.len();
    if rank == 0 {
        return tensor_from(&out_shape, src.to_vec());
    }
    let mut data = crate::output_buffer::empty(0, total);
    if total == 0 {
        return tensor_from(&out_shape, data);
    }
    let mut strides = vec![1usize; rank];
    for i in (0..rank - 1).rev() {
        strides[i] = strides[i + 1] * a.shape()[i + 1];
    }
    let last = &maps[rank - 1];
    let run = contiguous_run(last);
    let mut counter = vec![0usize; rank - 1];
    loop {
        let base: Option<usize> = counter
            .iter()
            .enumerate()
            .map(|(d, &c)| maps[d][c].map(|s| s * strides[d]))
            .sum();
        match base {
            None => data.extend(std::iter::repeat_n(fill.clone(), last.len())),
            Some(b) => match run {
                // One copied run between two fills: slices, not an element-wise map.
                Some((lo, first, len)) => {
                    data.extend(std::iter::repeat_n(fill.clone(), lo));
                    data.extend_from_slice(&src[b + first..b + first + len]);
                    data.extend(std::iter::repeat_n(fill.clone(), last.len() - lo - len));
                }
                None => data.extend(
                    last.iter()
                        .map(|s| s.map_or_else(|| fill.clone(), |s| src[b + s].clone())),
                ),
            },
        }
        let mut d = rank - 1;
        loop {
            if d == 0 {
                return tensor_from(&out_shape, data);
            }
            d -= 1;
            counter[d] += 1;
            if counter[d] < out_shape[d] {
                break;
            }
            counter[d] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AttrValue, Attributes};

    fn run(
        mode: &str,
        x: &Tensor,
        pads: &[i64],
        value: Option<&Tensor>,
        axes: Option<&[i64]>,
    ) -> Result<Tensor> {
        let attrs = Attributes::new().with("mode", AttrValue::String(mode.into()));
        let spec = NodeSpec {
            op_type: "Pad",
            domain: "",
            opset: 19,
            attrs: &attrs,
            num_inputs: 4,
            num_outputs: 1,
            options: Default::default(),
        };
        let p = Tensor::from_shape_vec(&[pads.len()], pads.to_vec()).unwrap();
        let ax = axes.map(|a| Tensor::from_shape_vec(&[a.len()], a.to_vec()).unwrap());
        Ok(build(&spec)?
            .run(&[Some(x), Some(&p), value, ax.as_ref()])?
            .remove(0))
    }

    fn x() -> Tensor {
        Tensor::from_shape_vec(&[3, 2], vec![1i32, 2, 3, 4, 5, 6]).unwrap()
    }

    #[test]
    fn modes_match_numpy() {
        // np.pad([[1,2],[3,4],[5,6]], ((0,0),(2,1)), mode=...) for each mode
        let cases: [(&str, Vec<i32>); 4] = [
            (
                "constant",
                vec![0, 0, 1, 2, 0, 0, 0, 3, 4, 0, 0, 0, 5, 6, 0],
            ),
            ("edge", vec![1, 1, 1, 2, 2, 3, 3, 3, 4, 4, 5, 5, 5, 6, 6]),
            ("reflect", vec![1, 2, 1, 2, 1, 3, 4, 3, 4, 3, 5, 6, 5, 6, 5]),
            ("wrap", vec![1, 2, 1, 2, 1, 3, 4, 3, 4, 3, 5, 6, 5, 6, 5]),
        ];
        for (mode, exp) in cases {
            let out = run(mode, &x(), &[0, 2, 0, 1], None, None).unwrap();
            assert_eq!(out, Tensor::from_shape_vec(&[3, 5], exp).unwrap(), "{mode}");
        }
        // np.pad(np.arange(1,5), (3,0), mode='reflect') == [4,3,2,1,2,3,4]
        let v = Tensor::from_shape_vec(&[4], vec![1i32, 2, 3, 4]).unwrap();
        let out = run("reflect", &v, &[3, 0], None, None).unwrap();
        assert_eq!(
            out,
            Tensor::from_shape_vec(&[7], vec![4i32, 3, 2, 1, 2, 3, 4]).unwrap()
        );
    }

    #[test]
    fn constant_value_axes_and_crop() {
        let val = Tensor::scalar(9i32);
        // axes [-2]: pad rows by (1, 0) with 9; crop: pads -1 at the end of axis 1
        let out = run("constant", &x(), &[1, 0], Some(&val), Some(&[-2])).unwrap();
        assert_eq!(
            out,
            Tensor::from_shape_vec(&[4, 2], vec![9i32, 9, 1, 2, 3, 4, 5, 6]).unwrap()
        );
        let out = run("constant", &x(), &[0, 0, 0, -1], None, None).unwrap();
        assert_eq!(
            out,
            Tensor::from_shape_vec(&[3, 1], vec![1i32, 3, 5]).unwrap()
        );
        assert!(matches!(
            run("constant", &x(), &[0, -3, 0, 0], None, None),
            Err(KernelError::InvalidValue(_))
        ));
        assert!(matches!(
            run("constant", &x(), &[0, 1], None, None),
            Err(KernelError::Shape(_))
        ));
    }

    #[test]
    fn unknown_mode_is_typed_error() {
        assert!(matches!(
            run("mirror", &x(), &[0, 0, 0, 0], None, None),
            Err(KernelError::UnsupportedAttribute { .. })
        ));
    }

    /// Pads that leave an axis empty give the empty output without building the other axes'
    /// maps (the graph_gen fuzzer found a 2^40-long one), and keep the maps' checks.
    #[test]
    fn empty_outputs_build_no_maps() {
        let x = Tensor::from_shape_vec(&[2, 3], vec![1.0f32; 6]).unwrap();
        let empty = run("constant", &x, &[0, 1 << 20, -2, 0], None, None).unwrap();
        assert_eq!(empty.shape(), &[0, (1 << 20) + 3]);
        assert!(matches!(
            run("constant", &x, &[0, 1 << 40, -2, 0], None, None),
            Err(KernelError::ResourceLimit(_))
        ));
        assert!(matches!(
            run("constant", &x, &[0, 0, -3, 0], None, None),
            Err(KernelError::InvalidValue(_))
        ));
    }
}
