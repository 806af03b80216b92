//! CUDA C sources for the operators cuDNN and cuBLAS do not cover, generated once per
//! (operator, element type, shape class) and compiled by NVRTC (see [`super::compile`]).
//!
//! Every generated module defines one `extern "C" __global__` function named [`ENTRY`]. Index
//! arithmetic is 64-bit and every kernel walks its elements with a grid-stride loop, so any
//! grid size is correct and [`launch_shape`] only picks an efficient one.

pub mod binary;
mod catalogue;
pub mod copy;
pub mod detection;
pub mod normalize;
pub mod pool;
pub mod reduce;
pub mod unary;

pub use catalogue::catalogue;

use crate::DType;

/// The name of the kernel function in every generated module.
pub const ENTRY: &str = "spillway_kernel";

/// Largest tensor rank the index-arithmetic kernels accept (ranks are padded to this).
pub const MAX_RANK: usize = 8;

/// A generated CUDA C module: its source and a key that names what it computes (the
/// compiled-module cache is keyed by it).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KernelSource {
    /// What the kernel computes, e.g. `"unary/Relu/float"`.
    pub key: String,
    /// The CUDA C source.
    pub source: String,
}

/// The CUDA C type that stores `dtype` on the device, if the generated kernels support it.
/// Booleans are one byte (`unsigned char`), as on the host.
pub fn c_type(dtype: DType) -> Option<&'static str> {
    Some(match dtype {
        DType::F32 => "float",
        DType::F64 => "double",
        DType::I8 => "signed char",
        DType::U8 | DType::Bool => "unsigned char",
        DType::I16 => "short",
        DType::U16 => "unsigned short",
        DType::I32 => "int",
        DType::U32 => "unsigned int",
        DType::I64 => "long long",
        DType::U64 => "unsigned long long",
        _ => return None,
    })
}

/// Whether `dtype` is a floating-point type in the generated kernels.
pub fn is_float(dtype: DType) -> bool {
    matches!(dtype, DType::F32 | DType::F64)
}

/// The shape-and-strides argument the broadcast and copy kernels take by value: the
/// iteration shape (padded with leading 1s to [`MAX_RANK`]) and, for up to three operands,
/// the element stride of each dimension (0 where the operand is broadcast).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Strides {
    /// Iteration shape.
    pub dims: [i64; MAX_RANK],
    /// Per-operand element strides.
    pub strides: [[i64; MAX_RANK]; 3],
}

/// The CUDA C declaration matching [`Strides`].
pub(crate) const STRIDES_DECL: &str =
    "struct Strides { long long dims[8]; long long strides[3][8]; };\n";

/// NVRTC has no `<math.h>`: the one constant the kernels use from it.
pub(crate) const INFINITY_DECL: &str = "#define INFINITY __int_as_float(0x7f800000)\n";

/// The grid-stride loop header every elementwise kernel uses, over `n` elements with index `i`.
pub(crate) const GRID_STRIDE_LOOP: &str = "for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)";

/// Threads per block for the elementwise kernels.
pub const BLOCK: u32 = 256;

/// (grid, block) for an elementwise kernel over `n` elements on a GPU with `multiprocessors`
/// SMs: enough blocks to fill the GPU a few times over, never more than the elements need.
pub fn launch_shape(n: usize, multiprocessors: u32) -> (u32, u32) {
    let needed = n.div_ceil(BLOCK as usize).max(1);
    let cap = (multiprocessors.max(1) as usize) * 32;
    (needed.min(cap) as u32, BLOCK)
}

impl Strides {
    /// Row-major iteration over `shape` with each operand's strides given for the same rank
    /// (`operand_strides[k][d]`); pads every array with leading 1s / 0s to [`MAX_RANK`].
    pub fn new(shape: &[usize], operand_strides: &[&[i64]]) -> Option<Strides> {
        if shape.len() > MAX_RANK || operand_strides.len() > 3 {
            return None;
        }
        let pad = MAX_RANK - shape.len();
        let mut s = Strides {
            dims: [1; MAX_RANK],
            strides: [[0; MAX_RANK]; 3],
        };
        for (d, &n) in shape.iter().enumerate() {
            s.dims[pad + d] = n as i64;
        }
        for (k, strides) in operand_strides.iter().enumerate() {
            if strides.len() != shape.len() {
                return None;
            }
            s.strides[k][pad..].copy_from_slice(strides);
        }
        Some(s)
    }
}

/// Row-major (contiguous) element strides of `shape`.
pub fn contiguous_strides(shape: &[usize]) -> Vec<i64> {
    let mut strides = vec![0i64; shape.len()];
    let mut step = 1i64;
    for d in (0..shape.len()).rev() {
        strides[d] = step;
        step *= shape[d] as i64;
    }
    strides
}

/// Strides of an operand of shape `operand` broadcast (numpy rules) to `out`: 0 on every
/// dimension the operand lacks or has as 1. `None` when the shapes do not broadcast.
pub fn broadcast_strides(operand: &[usize], out: &[usize]) -> Option<Vec<i64>> {
    if operand.len() > out.len() {
        return None;
    }
    let own = contiguous_strides(operand);
    let offset = out.len() - operand.len();
    let mut strides = vec![0i64; out.len()];
    for (d, (&n, &s)) in operand.iter().zip(&own).enumerate() {
        let o = out[offset + d];
        if n == o {
            strides[offset + d] = if n == 1 { 0 } else { s };
        } else if n != 1 {
            return None;
        }
    }
    Some(strides)
}

/// The loop that turns the flat index `i` into per-operand offsets `o0..o{operands-1}` from a
/// `Strides s` argument (only the innermost `rank` dimensions are walked).
pub(crate) fn offsets_code(rank: usize, operands: usize) -> String {
    let mut code = String::from("long long r = i;");
    for k in 0..operands {
        code.push_str(&format!(" long long o{k} = 0;"));
    }
    code.push_str(&format!(
        "\n    #pragma unroll\n    for (int d = {last}; d >= {first}; --d) {{ long long c = r % s.dims[d]; r /= s.dims[d];",
        last = MAX_RANK - 1,
        first = MAX_RANK - rank.max(1),
    ));
    for k in 0..operands {
        code.push_str(&format!(" o{k} += c * s.strides[{k}][d];"));
    }
    code.push_str(" }\n");
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcast_strides_follow_numpy_rules() {
        assert_eq!(contiguous_strides(&[2, 3, 4]), [12, 4, 1]);
        assert_eq!(broadcast_strides(&[3, 1], &[2, 3, 4]), Some(vec![0, 1, 0]));
        assert_eq!(broadcast_strides(&[4], &[2, 3, 4]), Some(vec![0, 0, 1]));
        assert_eq!(broadcast_strides(&[], &[2, 3]), Some(vec![0, 0]));
        assert_eq!(broadcast_strides(&[3], &[2, 4]), None);
    }

    #[test]
    fn strides_pad_to_max_rank() {
        let s = Strides::new(&[2, 3], &[&[3, 1], &[0, 1]]).unwrap();
        assert_eq!(s.dims, [1, 1, 1, 1, 1, 1, 2, 3]);
        assert_eq!(s.strides[0][6..], [3, 1]);
        assert_eq!(s.strides[1][6..], [0, 1]);
        assert_eq!(s.strides[2], [0; MAX_RANK]);
        assert!(Strides::new(&[1; 9], &[]).is_none());
    }

    #[test]
    fn launch_shape_caps_the_grid() {
        assert_eq!(launch_shape(1, 132), (1, BLOCK));
        assert_eq!(launch_shape(1000, 132), (4, BLOCK));
        assert_eq!(launch_shape(1 << 30, 132), (132 * 32, BLOCK));
    }
}
