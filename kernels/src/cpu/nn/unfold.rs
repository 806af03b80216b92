//! `Col2Im` (opset 18) and `MaxUnpool` (9, 11, 22): kernels that scatter values back into an
//! image, as the ONNX reference does.
//!
//! Col2Im: input `[N, C·∏block, L]`, the `L` sliding blocks of an image of `image_shape`;
//! each column value is added at its position in the image (`[N, C, *image_shape]`), blocks
//! placed by `strides`, `dilations` and `pads`. MaxUnpool: `X` written at `I`'s flat indices
//! into zeros of the shape pooling inverts (`(in - 1)·stride - pads + kernel`); with
//! `output_shape`, that result sits in the leading corner of a zero tensor of that shape.
//! Computed in `f64` (exact for every integer of 53 bits or fewer).

use super::common::min_opset;
use crate::cpu::shape::cast::cast_tensor;
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input, opt_input};
use crate::limits::checked_elements;
use crate::{DType, Tensor};

fn ints_attr(spec: &NodeSpec<'_>, name: &str) -> Result<Option<Vec<usize>>> {
    spec.attrs
        .opt_ints(name)?
        .map(|v| {
            v.iter()
                .map(|&x| {
                    usize::try_from(x).map_err(|_| KernelError::BadAttribute {
                        name: name.into(),
                        reason: format!("negative entry in {v:?}"),
                    })
                })
                .collect()
        })
        .transpose()
}

/// Row-major multi-index of `flat` in `dims`.
fn unravel(mut flat: usize, dims: &[usize], out: &mut [usize]) {
    for d in (0..dims.len()).rev() {
        out[d] = flat % dims[d];
        flat /= dims[d];
    }
}

fn back_to(values: Vec<f64>, shape: &[usize], dtype: DType) -> Result<Tensor> {
    let t = Tensor::from_shape_vec(shape, values)?;
    match dtype {
        DType::F64 => Ok(t),
        _ => cast_tensor(&t, dtype),
    }
}

/// A built `Col2Im`.
#[derive(Debug)]
pub struct Col2Im {
    dilations: Option<Vec<usize>>,
    pads: Option<Vec<usize>>,
    strides: Option<Vec<usize>>,
}

/// Builds `Col2Im`.
pub fn build_col2im(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    min_opset(spec.opset, 18, "Col2Im")?;
    spec.attrs.only(&["dilations", "pads", "strides"])?;
    if spec.num_inputs != 3 {
        return Err(KernelError::Arity("Col2Im takes three inputs".into()));
    }
    Ok(Box::new(Col2Im {
        dilations: ints_attr(spec, "dilations")?,
        pads: ints_attr(spec, "pads")?,
        strides: ints_attr(spec, "strides")?,
    }))
}

impl Kernel for Col2Im {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        let dims = |i: usize, what: &str| -> Result<Vec<usize>> {
            input(inputs, i)?
                .to_i64_vec()?
                .iter()
                .map(|&v| crate::limits::dim(v, what))
                .collect()
        };
        let (image, block) = (dims(1, "image_shape")?, dims(2, "block_shape")?);
        let nd = image.len();
        let or = |v: &Option<Vec<usize>>, default: usize, len: usize| {
            v.clone().unwrap_or_else(|| vec![default; len])
        };
        let (dil, pads, strides) = (
            or(&self.dilations, 1, nd),
            or(&self.pads, 0, 2 * nd),
            or(&self.strides, 1, nd),
        );
        if block.len() != nd || dil.len() != nd || pads.len() != 2 * nd || strides.len() != nd {
            return Err(KernelError::Shape(format!(
                "image_shape {image:?}, block_shape {block:?}, dilations, pads and strides disagree on the rank"
            )));
        }
        let &[n, cols, l] = x.shape() else {
            return Err(KernelError::Shape(format!(
                "Col2Im takes a 3-D input, got {:?}",
                x.shape()
            )));
        };
        let k: usize = block.iter().product();
        if k == 0 || cols % k != 0 || strides.contains(&0) {
            return Err(KernelError::Shape(format!(
                "{cols} columns do not hold whole blocks of {block:?}"
            )));
        }
        let c = cols / k;
        // Blocks per spatial dim.
        let mut blocks = vec![0usize; nd];
        for d in 0..nd {
            let span = dil[d] * (block[d].max(1) - 1) + 1;
            let room = image[d] + pads[d] + pads[nd + d];
            blocks[d] = if room >= span {
                (room - span) / strides[d] + 1
            } else {
                0
            };
        }
        if blocks.iter().product::<usize>() != l {
            return Err(KernelError::Shape(format!(
                "{l} blocks given, the geometry makes {blocks:?}"
            )));
        }
        let mut out_shape = vec![n, c];
        out_shape.extend_from_slice(&image);
        let plane: usize = image.iter().product();
        let total = checked_elements(&out_shape, 8)?;
        let xs = x.to_f64_vec()?;
        let mut y = vec![0f64; total];
        let (mut kk, mut bb) = (vec![0usize; nd], vec![0usize; nd]);
        for ni in 0..n {
            for col in 0..cols {
                let ci = col / k;
                unravel(col % k, &block, &mut kk);
                for b in 0..l {
                    unravel(b, &blocks, &mut bb);
                    let mut at = 0usize;
                    let mut inside = true;
                    for d in 0..nd {
                        let p = (bb[d] * strides[d] + kk[d] * dil[d]) as i64 - pads[d] as i64;
                        if p < 0 || p >= image[d] as i64 {
                            inside = false;
                            break;
                        }
                        at = at * image[d] + p as usize;
                    }
                    if inside {
                        y[(ni * c + ci) * plane + at] += xs[(ni * cols + col) * l + b];
                    }
                }
            }
        }
        Ok(vec![back_to(y, &out_shape, x.dtype())?])
    }
}

/// A built `MaxUnpool`.
#[derive(Debug)]
pub struct MaxUnpool {
    kernel: Vec<usize>,
    pads: Option<Vec<usize>>,
    strides: Option<Vec<usize>>,
}

/// Builds `MaxUnpool`.
pub fn build_max_unpool(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    min_opset(spec.opset, 9, "MaxUnpool")?;
    spec.attrs.only(&["kernel_shape", "pads", "strides"])?;
    if !(2..=3).contains(&spec.num_inputs) {
        return Err(KernelError::Arity(
            "MaxUnpool takes two or three inputs".into(),
        ));
    }
    let kernel = ints_attr(spec, "kernel_shape")?.ok_or_else(|| KernelError::BadAttribute {
        name: "kernel_shape".into(),
        reason: "required but absent".into(),
    })?;
    Ok(Box::new(MaxUnpool {
        kernel,
        pads: ints_attr(spec, "pads")?,
        strides: ints_attr(spec, "strides")?,
    }))
}

impl Kernel for MaxUnpool {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let (x, indices) = (input(inputs, 0)?, input(inputs, 1)?);
        let shape = x.shape();
        let nd = self.kernel.len();
        if shape.len() != nd + 2 || indices.shape() != shape {
            return Err(KernelError::Shape(format!(
                "X {shape:?} and I {:?} must match a {nd}-D kernel",
                indices.shape()
            )));
        }
        let pads = self.pads.clone().unwrap_or_else(|| vec![0; 2 * nd]);
        let strides = self.strides.clone().unwrap_or_else(|| vec![1; nd]);
        if pads.len() != 2 * nd || strides.len() != nd {
            return Err(KernelError::Shape(
                "pads or strides do not fit the kernel".into(),
            ));
        }
        let mut inferred = shape[..2].to_vec();
        for d in 0..nd {
            let grown = (shape[d + 2].max(1) - 1) * strides[d] + self.kernel[d];
            inferred.push(grown.checked_sub(pads[d] + pads[nd + d]).ok_or_else(|| {
                KernelError::Shape(format!("pads {pads:?} exceed the unpooled size"))
            })?);
        }
        let total = checked_elements(&inferred, 8)?;
        let mut y = vec![0f64; total];
        for (&v, &i) in x.to_f64_vec()?.iter().zip(&indices.to_i64_vec()?) {
            let i = usize::try_from(i)
                .ok()
                .filter(|&i| i < total)
                .ok_or_else(|| {
                    KernelError::InvalidValue(format!("index {i} is outside the {total} outputs"))
                })?;
            y[i] = v;
        }
        let out_shape = match opt_input(inputs, 2) {
            None => inferred.clone(),
            Some(t) => {
                let s: Vec<usize> = t
                    .to_i64_vec()?
                    .iter()
                    .map(|&v| crate::limits::dim(v, "output_shape"))
                    .collect::<Result<_>>()?;
                if s.len() != inferred.len() || s.iter().zip(&inferred).any(|(a, b)| a < b) {
                    return Err(KernelError::Shape(format!(
                        "output_shape {s:?} is smaller than the unpooled {inferred:?}"
                    )));
                }
                s
            }
        };
        if out_shape == inferred {
            return Ok(vec![back_to(y, &inferred, x.dtype())?]);
        }
        // The unpooled values in the leading corner of the larger output.
        let out_total = checked_elements(&out_shape, 8)?;
        let mut out = vec![0f64; out_total];
        let mut idx = vec![0usize; inferred.len()];
        for (flat, &v) in y.iter().enumerate() {
            unravel(flat, &inferred, &mut idx);
            let at = idx.iter().zip(&out_shape).fold(0, |a, (&i, &d)| a * d + i);
            out[at] = v;
        }
        Ok(vec![back_to(out, &out_shape, x.dtype())?])
    }
}
