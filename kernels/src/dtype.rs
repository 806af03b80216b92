//! Element types and the [`Element`] trait that ties a Rust type to its [`DType`].

use half::{bf16, f16};
use ndarray::{ArcArray, ArrayD, ArrayViewD, IxDyn};

use crate::Tensor;

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
}

impl DType {
    /// Every supported element type.
    pub const ALL: [DType; 14] = [
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
        }
    }

    /// Bytes per element (for strings, the size of the Rust `String` handle).
    pub fn size_of(self) -> usize {
        match self {
            DType::U8 | DType::I8 | DType::Bool => 1,
            DType::U16 | DType::I16 | DType::F16 | DType::BF16 => 2,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F64 | DType::I64 | DType::U64 => 8,
            DType::String => std::mem::size_of::<String>(),
        }
    }

    /// True for the floating-point types.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64 | DType::F16 | DType::BF16)
    }

    /// True for the signed and unsigned integer types.
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

    /// Lower-case name as numpy writes it (`float32`, `int64`, …).
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
}
