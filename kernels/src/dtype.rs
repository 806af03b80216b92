//! Element types and the [`Element`] trait that ties a Rust type to its [`DType`].

use half::{bf16, f16};
use ndarray::{ArcArray, ArrayD, ArrayViewD, IxDyn};

use crate::Tensor;
use crate::low_precision::{
    F4E2M1, F8E4M3Fn, F8E4M3FnUz, F8E5M2, F8E5M2FnUz, F8E8M0, I2, I4, U2, U4,
};

/// Element type of a tensor, with the ONNX `TensorProto.DataType` codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// 32-bit float (ONNX FLOAT = 1).
    F32,
    /// 8-bit unsigned (UINT8 = 2).
    U8,
    /// 8-bit signed (INT8 = 3).
    I8,
    /// 16-bit unsigned (UINT16 = 4).
    U16,
    /// 16-bit signed (INT16 = 5).
    I16,
    /// 32-bit signed (INT32 = 6).
    I32,
    /// 64-bit signed (INT64 = 7).
    I64,
    /// UTF-8 string (STRING = 8).
    String,
    /// Boolean (BOOL = 9).
    Bool,
    /// IEEE half (FLOAT16 = 10).
    F16,
    /// 64-bit float (DOUBLE = 11).
    F64,
    /// 32-bit unsigned (UINT32 = 12).
    U32,
    /// 64-bit unsigned (UINT64 = 13).
    U64,
    /// bfloat16 (BFLOAT16 = 16).
    BF16,
    /// float8 E4M3FN (FLOAT8E4M3FN = 17).
    F8E4M3Fn,
    /// float8 E4M3FNUZ (FLOAT8E4M3FNUZ = 18).
    F8E4M3FnUz,
    /// float8 E5M2 (FLOAT8E5M2 = 19).
    F8E5M2,
    /// float8 E5M2FNUZ (FLOAT8E5M2FNUZ = 20).
    F8E5M2FnUz,
    /// 4-bit unsigned (UINT4 = 21).
    U4,
    /// 4-bit signed (INT4 = 22).
    I4,
    /// float4 E2M1 (FLOAT4E2M1 = 23).
    F4E2M1,
    /// float8 E8M0, the microscaling scale type (FLOAT8E8M0 = 24).
    F8E8M0,
    /// 2-bit unsigned (UINT2 = 25).
    U2,
    /// 2-bit signed (INT2 = 26).
    I2,
}

impl DType {
    /// Every supported element type.
    pub const ALL: [DType; 24] = [
        DType::F32,
        DType::U8,
        DType::I8,
        DType::U16,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::String,
        DType::Bool,
        DType::F16,
        DType::F64,
        DType::U32,
        DType::U64,
        DType::BF16,
        DType::F8E4M3Fn,
        DType::F8E4M3FnUz,
        DType::F8E5M2,
        DType::F8E5M2FnUz,
        DType::U4,
        DType::I4,
        DType::F4E2M1,
        DType::F8E8M0,
        DType::U2,
        DType::I2,
    ];

    /// The type for an ONNX `TensorProto.DataType` code, if supported.
    pub fn from_onnx(code: i32) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.onnx_code() == code)
    }

    /// The ONNX `TensorProto.DataType` code.
    pub fn onnx_code(self) -> i32 {
        match self {
            DType::F32 => 1,
            DType::U8 => 2,
            DType::I8 => 3,
            DType::U16 => 4,
            DType::I16 => 5,
            DType::I32 => 6,
            DType::I64 => 7,
            DType::String => 8,
            DType::Bool => 9,
            DType::F16 => 10,
            DType::F64 => 11,
            DType::U32 => 12,
            DType::U64 => 13,
            DType::BF16 => 16,
            DType::F8E4M3Fn => 17,
            DType::F8E4M3FnUz => 18,
            DType::F8E5M2 => 19,
            DType::F8E5M2FnUz => 20,
            DType::U4 => 21,
            DType::I4 => 22,
            DType::F4E2M1 => 23,
            DType::F8E8M0 => 24,
            DType::U2 => 25,
            DType::I2 => 26,
        }
    }

    /// Bytes per element in memory (for strings, the size of the Rust `String` handle). The
    /// 4- and 2-bit types take one byte each in memory; see [`DType::bits`] for ONNX storage.
    pub fn size_of(self) -> usize {
        match self {
            DType::U8 | DType::I8 | DType::Bool => 1,
            DType::F8E4M3Fn
            | DType::F8E4M3FnUz
            | DType::F8E5M2
            | DType::F8E5M2FnUz
            | DType::F8E8M0
            | DType::F4E2M1
            | DType::I4
            | DType::U4
            | DType::I2
            | DType::U2 => 1,
            DType::U16 | DType::I16 | DType::F16 | DType::BF16 => 2,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F64 | DType::I64 | DType::U64 => 8,
            DType::String => std::mem::size_of::<String>(),
        }
    }

    /// True for the floating-point types the kernels compute in (f32, f64, f16, bf16); the
    /// float8 and float4 types are [low precision](DType::is_low_precision) instead.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64 | DType::F16 | DType::BF16)
    }

    /// True for the float8, float4, 4-bit and 2-bit types: storage and cast only, no
    /// arithmetic (see [`crate::low_precision`]).
    pub fn is_low_precision(self) -> bool {
        matches!(
            self,
            DType::F8E4M3Fn
                | DType::F8E4M3FnUz
                | DType::F8E5M2
                | DType::F8E5M2FnUz
                | DType::F8E8M0
                | DType::F4E2M1
                | DType::I4
                | DType::U4
                | DType::I2
                | DType::U2
        )
    }

    /// Bits per element in ONNX storage (`raw_data`): 4 and 2 for the packed types, else
    /// eight times [`size_of`](DType::size_of) (strings have no fixed size: 0).
    pub fn bits(self) -> u32 {
        match self {
            DType::I4 | DType::U4 | DType::F4E2M1 => 4,
            DType::I2 | DType::U2 => 2,
            DType::String => 0,
            d => 8 * d.size_of() as u32,
        }
    }

    /// True for the signed and unsigned integer types of 8 bits and more.
    pub fn is_int(self) -> bool {
        matches!(
            self,
            DType::U8
                | DType::I8
                | DType::U16
                | DType::I16
                | DType::I32
                | DType::I64
                | DType::U32
                | DType::U64
        )
    }

    /// Lower-case name as numpy and `ml_dtypes` write it (`float32`, `int64`,
    /// `float8_e4m3fn`, …).
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "float32",
            DType::U8 => "uint8",
            DType::I8 => "int8",
            DType::U16 => "uint16",
            DType::I16 => "int16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::String => "string",
            DType::Bool => "bool",
            DType::F16 => "float16",
            DType::F64 => "float64",
            DType::U32 => "uint32",
            DType::U64 => "uint64",
            DType::BF16 => "bfloat16",
            DType::F8E4M3Fn => "float8_e4m3fn",
            DType::F8E4M3FnUz => "float8_e4m3fnuz",
            DType::F8E5M2 => "float8_e5m2",
            DType::F8E5M2FnUz => "float8_e5m2fnuz",
            DType::U4 => "uint4",
            DType::I4 => "int4",
            DType::F4E2M1 => "float4_e2m1fn",
            DType::F8E8M0 => "float8_e8m0fnu",
            DType::U2 => "uint2",
            DType::I2 => "int2",
        }
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A Rust type that can be stored in a [`Tensor`].
pub trait Element: Clone + Default + std::fmt::Debug + Send + Sync + 'static {
    /// The matching element type.
    const DTYPE: DType;
    /// Wraps an array of this type into a tensor.
    fn into_tensor(array: ArcArray<Self, IxDyn>) -> Tensor;
    /// Borrows the tensor's array if its element type is `Self`.
    fn view(tensor: &Tensor) -> Option<ArrayViewD<'_, Self>>;
    /// Shares the tensor's array (cheap clone) if its element type is `Self`.
    fn shared(tensor: &Tensor) -> Option<ArcArray<Self, IxDyn>>;
}

macro_rules! impl_element {
    ($($t:ty => $variant:ident),* $(,)?) => {$(
        impl Element for $t {
            const DTYPE: DType = DType::$variant;
            fn into_tensor(array: ArcArray<Self, IxDyn>) -> Tensor {
                Tensor::$variant(array)
            }
            fn view(tensor: &Tensor) -> Option<ArrayViewD<'_, Self>> {
                match tensor {
                    Tensor::$variant(a) => Some(a.view()),
                    _ => None,
                }
            }
            fn shared(tensor: &Tensor) -> Option<ArcArray<Self, IxDyn>> {
                match tensor {
                    Tensor::$variant(a) => Some(a.clone()),
                    _ => None,
                }
            }
        }
        impl From<ArrayD<$t>> for Tensor {
            fn from(array: ArrayD<$t>) -> Tensor {
                Tensor::$variant(array.into_shared())
            }
        }
    )*};
}

impl_element! {
    f32 => F32, u8 => U8, i8 => I8, u16 => U16, i16 => I16, i32 => I32, i64 => I64,
    String => String, bool => Bool, f16 => F16, f64 => F64, u32 => U32, u64 => U64, bf16 => BF16,
    F8E4M3Fn => F8E4M3Fn, F8E4M3FnUz => F8E4M3FnUz, F8E5M2 => F8E5M2, F8E5M2FnUz => F8E5M2FnUz,
    U4 => U4, I4 => I4, F4E2M1 => F4E2M1, F8E8M0 => F8E8M0, U2 => U2, I2 => I2,
}
