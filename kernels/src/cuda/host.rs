//! Tensors as the bytes a GPU region holds (row-major, native endianness) and back.

use half::{bf16, f16};

use super::error::{CudaError, CudaResult};
use crate::{DType, Element, Tensor, dispatch_copy};

/// The tensor's elements as contiguous bytes; `None` for strings, which have no device form.
pub fn tensor_bytes(t: &Tensor) -> Option<Vec<u8>> {
    let mut bytes = vec![0u8; t.len() * t.dtype().size_of()];
    write_tensor_bytes(t, &mut bytes)?;
    Some(bytes)
}

/// Writes the tensor's elements as contiguous bytes (what [`tensor_bytes`] gives) to the start
/// of `out`, without an intermediate buffer when the tensor is laid out row-major; returns how
/// many bytes it wrote. `None` for strings and when `out` is too short.
pub fn write_tensor_bytes(t: &Tensor, out: &mut [u8]) -> Option<usize> {
    dispatch_copy!(t, a => {
        let standard = a.as_standard_layout();
        let slice = standard.as_slice()?;
        // SAFETY: the element types here are plain numbers or `bool` (one byte, 0 or 1);
        // viewing their memory as bytes is sound and the length is exact.
        let bytes = unsafe {
            std::slice::from_raw_parts(slice.as_ptr().cast::<u8>(), std::mem::size_of_val(slice))
        };
        out.get_mut(..bytes.len())?.copy_from_slice(bytes);
        Some(bytes.len())
    }, _other => None)
}

/// The elements of `bytes` (a whole number of `T`s), in storage from
/// [`crate::output_buffer`]: a pooled buffer when the caller offers a pool (a large download
/// then lands in memory already mapped, not in fresh pages to fault in), else a new one.
fn read<T: Element + Copy + 'static>(bytes: &[u8]) -> Vec<T> {
    let len = bytes.len() / std::mem::size_of::<T>();
    crate::output_buffer::build(0, len, |dst| {
        // SAFETY: `dst` holds `len` slots of `T`, exactly `bytes.len()` bytes, and `T` is a
        // plain number type for which every bit pattern is valid.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                dst.as_mut_ptr().cast::<u8>(),
                len * std::mem::size_of::<T>(),
            )
        }
    })
}

/// A tensor of `dtype` and `shape` from the bytes [`tensor_bytes`] gives.
pub fn tensor_from_bytes(dtype: DType, shape: &[usize], bytes: &[u8]) -> CudaResult<Tensor> {
    let len: usize = shape.iter().product();
    if bytes.len() != len * dtype.size_of() || dtype == DType::String {
        return Err(CudaError::Unsupported(format!(
            "{} bytes for a {dtype:?} tensor of shape {shape:?}",
            bytes.len()
        )));
    }
    let t = match dtype {
        DType::F32 => Tensor::from_shape_vec(shape, read::<f32>(bytes)),
        DType::F64 => Tensor::from_shape_vec(shape, read::<f64>(bytes)),
        DType::F16 => Tensor::from_shape_vec(shape, read::<f16>(bytes)),
        DType::BF16 => Tensor::from_shape_vec(shape, read::<bf16>(bytes)),
        DType::I8 => Tensor::from_shape_vec(shape, read::<i8>(bytes)),
        DType::U8 => Tensor::from_shape_vec(shape, read::<u8>(bytes)),
        DType::I16 => Tensor::from_shape_vec(shape, read::<i16>(bytes)),
        DType::U16 => Tensor::from_shape_vec(shape, read::<u16>(bytes)),
        DType::I32 => Tensor::from_shape_vec(shape, read::<i32>(bytes)),
        DType::U32 => Tensor::from_shape_vec(shape, read::<u32>(bytes)),
        DType::I64 => Tensor::from_shape_vec(shape, read::<i64>(bytes)),
        DType::U64 => Tensor::from_shape_vec(shape, read::<u64>(bytes)),
        DType::Bool => Tensor::from_shape_vec(shape, bytes.iter().map(|&b| b != 0).collect()),
        other => {
            return Err(CudaError::Unsupported(format!(
                "{other:?} has no device form"
            )));
        }
    };
    Ok(t?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_round_trip_every_numeric_type() {
        let cases = [
            Tensor::from_shape_vec(&[2, 2], vec![1.5f32, -2.0, 0.0, 7.25]).unwrap(),
            Tensor::from_shape_vec(&[3], vec![-1i64, 0, i64::MAX]).unwrap(),
            Tensor::from_shape_vec(&[2], vec![true, false]).unwrap(),
            Tensor::from_shape_vec(&[2], vec![f16::from_f32(0.5), f16::from_f32(-3.0)]).unwrap(),
            Tensor::from_shape_vec(&[1], vec![200u8]).unwrap(),
        ];
        for t in cases {
            let bytes = tensor_bytes(&t).unwrap();
            assert_eq!(bytes.len(), t.len() * t.dtype().size_of());
            assert_eq!(tensor_from_bytes(t.dtype(), t.shape(), &bytes).unwrap(), t);
        }
    }

    #[test]
    fn transposed_views_are_laid_out_row_major() {
        let t = Tensor::from_shape_vec(&[2, 2], vec![1i32, 2, 3, 4]).unwrap();
        let transposed = match &t {
            Tensor::I32(a) => Tensor::I32(a.clone().reversed_axes()),
            _ => unreachable!(),
        };
        let bytes = tensor_bytes(&transposed).unwrap();
        assert_eq!(read::<i32>(&bytes), [1, 3, 2, 4]);
    }

    #[test]
    fn bytes_are_written_in_place_and_a_short_buffer_is_refused() {
        let t = Tensor::from_shape_vec(&[3], vec![1.0f32, -2.0, 4.5]).unwrap();
        let mut out = vec![7u8; 16];
        assert_eq!(write_tensor_bytes(&t, &mut out), Some(12));
        assert_eq!(&out[..12], tensor_bytes(&t).unwrap().as_slice());
        assert_eq!(&out[12..], [7; 4]);
        assert_eq!(write_tensor_bytes(&t, &mut [0u8; 11]), None);
    }

    #[test]
    fn wrong_lengths_and_strings_are_errors() {
        assert!(tensor_from_bytes(DType::F32, &[2], &[0; 7]).is_err());
        assert!(tensor_from_bytes(DType::String, &[0], &[]).is_err());
    }
}
