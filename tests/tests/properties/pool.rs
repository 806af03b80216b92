//! `MaxPool` and `AveragePool` (2-D) against the spec: kernel, strides, dilations (MaxPool),
//! asymmetric pads, `ceil_mode` (a last window that would start in the end padding is dropped,
//! as in ONNX Runtime and PyTorch) and `count_include_pad` (the divisor counts the pads
//! inside the padded image, never positions past it).

use proptest::prelude::*;
use spillway_kernels::attrs::AttrValue;

use super::{assert_all_close, config, run_kernel, tensor, values};

#[derive(Debug, Clone)]
struct Case {
    nc: [usize; 2],
    hw: [usize; 2],
    kernel: [usize; 2],
    strides: [usize; 2],
    dilations: [usize; 2],
    pads: [usize; 4],
    ceil: bool,
    include_pad: bool,
}

impl Case {
    fn out_dim(&self, i: usize) -> Option<usize> {
        let len = self.hw[i];
        let padded = len + self.pads[i] + self.pads[i + 2];
        let span = self.dilations[i] * (self.kernel[i] - 1) + 1;
        if padded < span {
            return None;
        }
        let s = self.strides[i];
        let mut out = if self.ceil {
            (padded - span).div_ceil(s) + 1
        } else {
            (padded - span) / s + 1
        };
        if self.ceil && (out - 1) * s >= len + self.pads[i] {
            out -= 1;
        }
        Some(out)
    }
    fn out(&self) -> Option<[usize; 2]> {
        Some([self.out_dim(0)?, self.out_dim(1)?])
    }
}

/// The pooled values: `max` over the window's positions inside the image, or their mean with
/// the divisor of `count_include_pad`.
fn reference(c: &Case, x: &[f32], max: bool) -> Vec<f64> {
    let [oh, ow] = c.out().expect("valid case");
    let [h, w] = c.hw;
    let mut y = Vec::new();
    for plane in 0..c.nc[0] * c.nc[1] {
        for oy in 0..oh {
            for ox in 0..ow {
                let start = [
                    (oy * c.strides[0]) as isize - c.pads[0] as isize,
                    (ox * c.strides[1]) as isize - c.pads[1] as isize,
                ];
                let mut best = f64::NEG_INFINITY;
                let mut sum = 0.0;
                let mut count = 0usize;
                for ky in 0..c.kernel[0] {
                    for kx in 0..c.kernel[1] {
                        let iy = start[0] + (ky * c.dilations[0]) as isize;
                        let ix = start[1] + (kx * c.dilations[1]) as isize;
                        if iy < 0 || ix < 0 || iy >= h as isize || ix >= w as isize {
                            continue;
                        }
                        let v = x[(plane * h + iy as usize) * w + ix as usize] as f64;
                        if v > best {
                            best = v;
                        }
                        sum += v;
                        count += 1;
                    }
                }
                if max {
                    y.push(best);
                } else {
                    let divisor = if c.include_pad {
                        // Positions inside the padded image [-pad_begin, len + pad_end).
                        let along = |i: usize| {
                            let end = (start[i] + c.kernel[i] as isize)
                                .min((c.hw[i] + c.pads[i + 2]) as isize);
                            (end - start[i]) as usize
                        };
                        along(0) * along(1)
                    } else {
                        count
                    };
                    y.push(sum / divisor as f64);
                }
            }
        }
    }
    y
}

fn case(max: bool) -> impl Strategy<Value = (Case, Vec<f32>)> {
    (
        ([1usize..=2, 1usize..=3], [1usize..=8, 1usize..=8]),
        (
            [1usize..=3, 1usize..=3],
            [1usize..=3, 1usize..=3],
            [1usize..=2, 1usize..=2],
        ),
        (
            [0usize..=2, 0usize..=2, 0usize..=2, 0usize..=2],
            any::<bool>(),
            any::<bool>(),
        ),
    )
        .prop_map(
            move |((nc, hw), (kernel, strides, dilations), (pads, ceil, include_pad))| {
                // Pads smaller than the kernel (the spec's and ORT's rule).
                let pads = [
                    pads[0].min(kernel[0] - 1),
                    pads[1].min(kernel[1] - 1),
                    pads[2].min(kernel[0] - 1),
                    pads[3].min(kernel[1] - 1),
                ];
                Case {
                    nc,
                    hw,
                    kernel,
                    strides,
                    dilations: if max { dilations } else { [1, 1] },
                    pads,
                    ceil,
                    include_pad,
                }
            },
        )
        .prop_filter("non-empty output", |c| {
            c.out().is_some_and(|[a, b]| a > 0 && b > 0)
        })
        .prop_flat_map(|c| {
            let len = c.nc[0] * c.nc[1] * c.hw[0] * c.hw[1];
            (Just(c), values(len, false))
        })
}

fn check(c: &Case, x: &[f32], max: bool) -> Result<(), TestCaseError> {
    let ints = |v: &[usize]| AttrValue::Ints(v.iter().map(|&d| d as i64).collect());
    let mut attrs = vec![
        ("kernel_shape", ints(&c.kernel)),
        ("strides", ints(&c.strides)),
        ("pads", ints(&c.pads)),
        ("ceil_mode", AttrValue::Int(c.ceil as i64)),
    ];
    let (op, opset) = if max {
        attrs.push(("dilations", ints(&c.dilations)));
        ("MaxPool", 12)
    } else {
        attrs.push(("count_include_pad", AttrValue::Int(c.include_pad as i64)));
        ("AveragePool", 11)
    };
    let image = tensor(&[c.nc[0], c.nc[1], c.hw[0], c.hw[1]], x);
    let out = run_kernel(op, opset, &attrs, &[Some(&image)], 1)
        .map_err(|e| TestCaseError::fail(format!("{op} {c:?}: {e}")))?;
    let [oh, ow] = c.out().expect("valid case");
    assert_all_close(
        &format!("{op} {c:?}"),
        &[c.nc[0], c.nc[1], oh, ow],
        &reference(c, x, max),
        &out[0],
        &[1e-5],
        1e-5,
    )
}

proptest! {
    #![proptest_config(config(128))]
    #[test]
    fn max_pool((c, x) in case(true)) {
        check(&c, &x, true)?;
    }

    #[test]
    fn average_pool((c, x) in case(false)) {
        check(&c, &x, false)?;
    }
}
