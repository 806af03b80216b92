//! Type information: `OrtTypeInfo` (a tensor, sequence or optional type) and
//! `OrtTensorTypeAndShapeInfo` (element type and shape), and the element-type codes.

use std::ffi::{CString, c_char};

use ort_sys::{
    ONNXTensorElementDataType as Ty, ONNXType, OrtOptionalTypeInfo, OrtSequenceTypeInfo,
    OrtStatusPtr, OrtTensorTypeAndShapeInfo, OrtTypeInfo,
};
use spillway::{DType, Dim, ValueType};

use crate::handle::{self, Handle};
use crate::status::{Result, Status, guard, guard_value};

/// The `ort` element-type code of a Spillway element type.
pub(crate) fn to_onnx(dtype: DType) -> Ty {
    match dtype {
        DType::F32 => Ty::ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT,
        DType::U8 => Ty::ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8,
        DType::I8 => Ty::ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8,
        DType::U16 => Ty::ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16,
        DType::I16 => Ty::ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16,
        DType::I32 => Ty::ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32,
        DType::I64 => Ty::ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64,
        DType::String => Ty::ONNX_TENSOR_ELEMENT_DATA_TYPE_STRING,
        DType::Bool => Ty::ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL,
        DType::F16 => Ty::ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16,
        DType::F64 => Ty::ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE,
        DType::U32 => Ty::ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32,
        DType::U64 => Ty::ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64,
        DType::BF16 => Ty::ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16,
        DType::F8E4M3Fn => Ty::ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E4M3FN,
        DType::F8E4M3FnUz => Ty::ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E4M3FNUZ,
        DType::F8E5M2 => Ty::ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E5M2,
        DType::F8E5M2FnUz => Ty::ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E5M2FNUZ,
        DType::U4 => Ty::ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT4,
        DType::I4 => Ty::ONNX_TENSOR_ELEMENT_DATA_TYPE_INT4,
        DType::F4E2M1 => Ty::ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT4E2M1,
        DType::F8E8M0 => Ty::ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E8M0,
        DType::U2 => Ty::ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT2,
        DType::I2 => Ty::ONNX_TENSOR_ELEMENT_DATA_TYPE_INT2,
    }
}

/// The Spillway element type of an `ort` code, when Spillway has it (not the complex types).
pub(crate) fn from_onnx(ty: Ty) -> Result<DType> {
    DType::ALL
        .into_iter()
        .find(|&d| to_onnx(d) == ty)
        .ok_or_else(|| {
            Status::new(
                ort_sys::OrtErrorCode::ORT_NOT_IMPLEMENTED,
                format!("element type {ty:?} is not supported by Spillway"),
            )
        })
}

/// An element type whose values `ort` can hand over as plain bytes: every type but strings
/// and the packed 4- and 2-bit types (two or four values per byte in ONNX Runtime's layout,
/// one per byte in Spillway's).
pub(crate) fn check_plain(dtype: DType) -> Result {
    if dtype == DType::String {
        return Err(Status::invalid(
            "string tensors have no plain data; use the string entries",
        ));
    }
    if dtype.bits() < 8 {
        return Err(Status::new(
            ort_sys::OrtErrorCode::ORT_NOT_IMPLEMENTED,
            format!("packed {dtype} tensors are not supported by Spillway's ort backend"),
        ));
    }
    Ok(())
}

/// What an `OrtTensorTypeAndShapeInfo` handle points to.
#[derive(Debug, Clone)]
pub(crate) struct TensorInfo {
    /// Element type (`UNDEFINED` when unknown).
    pub(crate) ty: Ty,
    /// Dimensions; -1 for a symbolic or unknown one.
    pub(crate) dims: Vec<i64>,
    /// One name per dimension ("" for none).
    pub(crate) symbols: Vec<CString>,
    /// Whether the rank is known.
    pub(crate) has_shape: bool,
}

impl Handle for TensorInfo {
    type Sys = OrtTensorTypeAndShapeInfo;
    const WHAT: &'static str = "tensor type and shape info";
}

impl TensorInfo {
    /// An element type and a shape of fixed dimensions.
    pub(crate) fn fixed(ty: Ty, dims: Vec<i64>) -> Self {
        let symbols = vec![CString::default(); dims.len()];
        TensorInfo {
            ty,
            dims,
            symbols,
            has_shape: true,
        }
    }
}

/// What an `OrtTypeInfo` handle points to. `CastTypeInfoTo*` hand out pointers into it
/// (borrowed); `GetSequenceElementType` and `GetOptionalContainedTypeInfo` hand out copies
/// (owned by the caller).
#[derive(Debug, Clone)]
pub(crate) enum TypeInfo {
    /// A tensor.
    Tensor(TensorInfo),
    /// A sequence of the boxed type (an `OrtSequenceTypeInfo` points at the box's contents).
    Sequence(Box<TypeInfo>),
    /// An optional of the boxed type (an `OrtOptionalTypeInfo` points at the box's contents).
    Optional(Box<TypeInfo>),
}

impl Handle for TypeInfo {
    type Sys = OrtTypeInfo;
    const WHAT: &'static str = "type info";
}

impl TypeInfo {
    /// The type info of a model input or output.
    pub(crate) fn from_value_type(ty: &ValueType) -> Self {
        match ty {
            ValueType::Tensor { dtype, shape } => {
                let ty = dtype.map_or(Ty::ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED, to_onnx);
                let dims = shape.as_deref().unwrap_or(&[]);
                TypeInfo::Tensor(TensorInfo {
                    ty,
                    dims: dims
                        .iter()
                        .map(|d| d.fixed().map_or(-1, |n| n as i64))
                        .collect(),
                    symbols: dims
                        .iter()
                        .map(|d| match d {
                            Dim::Symbol(s) if !s.starts_with('?') => {
                                CString::new(s.as_str()).unwrap_or_default()
                            }
                            _ => CString::default(),
                        })
                        .collect(),
                    has_shape: shape.is_some(),
                })
            }
            ValueType::Sequence(e) => TypeInfo::Sequence(Box::new(Self::from_value_type(e))),
            ValueType::Optional(e) => TypeInfo::Optional(Box::new(Self::from_value_type(e))),
        }
    }

    fn onnx_type(&self) -> ONNXType {
        match self {
            TypeInfo::Tensor(_) => ONNXType::ONNX_TYPE_TENSOR,
            TypeInfo::Sequence(_) => ONNXType::ONNX_TYPE_SEQUENCE,
            TypeInfo::Optional(_) => ONNXType::ONNX_TYPE_OPTIONAL,
        }
    }
}

/// `GetOnnxTypeFromTypeInfo`.
pub(crate) unsafe extern "system" fn GetOnnxTypeFromTypeInfo(
    info: *const OrtTypeInfo,
    out: *mut ONNXType,
) -> OrtStatusPtr {
    guard("GetOnnxTypeFromTypeInfo", || {
        // SAFETY: `info` is a type info of this crate, `out` writable (the API's contract).
        unsafe { handle::write(out, handle::get::<TypeInfo>(info)?.onnx_type()) }
    })
}

/// `CastTypeInfoToTensorInfo`: borrowed from `info`; null when it is not a tensor.
pub(crate) unsafe extern "system" fn CastTypeInfoToTensorInfo(
    info: *const OrtTypeInfo,
    out: *mut *const OrtTensorTypeAndShapeInfo,
) -> OrtStatusPtr {
    guard("CastTypeInfoToTensorInfo", || {
        // SAFETY: as in `GetOnnxTypeFromTypeInfo`.
        let info = unsafe { handle::get::<TypeInfo>(info)? };
        let ptr = match info {
            TypeInfo::Tensor(t) => (t as *const TensorInfo).cast(),
            _ => std::ptr::null(),
        };
        // SAFETY: `out` is writable (the API's contract).
        unsafe { handle::write(out, ptr) }
    })
}

/// `CastTypeInfoToSequenceTypeInfo`: borrowed from `info`; null when it is not a sequence.
pub(crate) unsafe extern "system" fn CastTypeInfoToSequenceTypeInfo(
    info: *const OrtTypeInfo,
    out: *mut *const OrtSequenceTypeInfo,
) -> OrtStatusPtr {
    guard("CastTypeInfoToSequenceTypeInfo", || {
        // SAFETY: as in `GetOnnxTypeFromTypeInfo`.
        let info = unsafe { handle::get::<TypeInfo>(info)? };
        let ptr = match info {
            TypeInfo::Sequence(e) => (&**e as *const TypeInfo).cast(),
            _ => std::ptr::null(),
        };
        // SAFETY: `out` is writable (the API's contract).
        unsafe { handle::write(out, ptr) }
    })
}

/// `CastTypeInfoToOptionalTypeInfo`: borrowed from `info`; null when it is not an optional.
pub(crate) unsafe extern "system" fn CastTypeInfoToOptionalTypeInfo(
    info: *const OrtTypeInfo,
    out: *mut *const OrtOptionalTypeInfo,
) -> OrtStatusPtr {
    guard("CastTypeInfoToOptionalTypeInfo", || {
        // SAFETY: as in `GetOnnxTypeFromTypeInfo`.
        let info = unsafe { handle::get::<TypeInfo>(info)? };
        let ptr = match info {
            TypeInfo::Optional(e) => (&**e as *const TypeInfo).cast(),
            _ => std::ptr::null(),
        };
        // SAFETY: `out` is writable (the API's contract).
        unsafe { handle::write(out, ptr) }
    })
}

/// `GetSequenceElementType`: a new type info, owned by the caller.
pub(crate) unsafe extern "system" fn GetSequenceElementType(
    info: *const OrtSequenceTypeInfo,
    out: *mut *mut OrtTypeInfo,
) -> OrtStatusPtr {
    guard("GetSequenceElementType", || {
        // SAFETY: a sequence type info points at a `TypeInfo` inside a live type info (see
        // `CastTypeInfoToSequenceTypeInfo`); `out` is writable.
        let element = unsafe { handle::get::<TypeInfo>(info.cast())? };
        unsafe { handle::write(out, element.clone().into_raw()) }
    })
}

/// `GetOptionalContainedTypeInfo`: a new type info, owned by the caller.
pub(crate) unsafe extern "system" fn GetOptionalContainedTypeInfo(
    info: *const OrtOptionalTypeInfo,
    out: *mut *mut OrtTypeInfo,
) -> OrtStatusPtr {
    guard("GetOptionalContainedTypeInfo", || {
        // SAFETY: as in `GetSequenceElementType`, for `CastTypeInfoToOptionalTypeInfo`.
        let element = unsafe { handle::get::<TypeInfo>(info.cast())? };
        unsafe { handle::write(out, element.clone().into_raw()) }
    })
}

/// `GetDenotationFromTypeInfo`: Spillway keeps no denotations: always "".
pub(crate) unsafe extern "system" fn GetDenotationFromTypeInfo(
    info: *const OrtTypeInfo,
    denotation: *mut *const c_char,
    len: *mut usize,
) -> OrtStatusPtr {
    guard("GetDenotationFromTypeInfo", || {
        // SAFETY: as in `GetOnnxTypeFromTypeInfo`; both outs writable.
        unsafe {
            handle::get::<TypeInfo>(info)?;
            handle::write(denotation, c"".as_ptr())?;
            handle::write(len, 0)
        }
    })
}

/// `ReleaseTypeInfo`.
pub(crate) unsafe extern "system" fn ReleaseTypeInfo(info: *mut OrtTypeInfo) {
    // SAFETY: `info` is null or an owned type info of this crate, released once.
    guard_value((), || unsafe { handle::release::<TypeInfo>(info) })
}

/// `CreateTensorTypeAndShapeInfo`: undefined element type, rank 0.
pub(crate) unsafe extern "system" fn CreateTensorTypeAndShapeInfo(
    out: *mut *mut OrtTensorTypeAndShapeInfo,
) -> OrtStatusPtr {
    guard("CreateTensorTypeAndShapeInfo", || {
        let info = TensorInfo::fixed(Ty::ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED, Vec::new());
        // SAFETY: `out` is writable (the API's contract).
        unsafe { handle::write(out, info.into_raw()) }
    })
}

/// `SetTensorElementType`.
pub(crate) unsafe extern "system" fn SetTensorElementType(
    info: *mut OrtTensorTypeAndShapeInfo,
    ty: Ty,
) -> OrtStatusPtr {
    guard("SetTensorElementType", || {
        // SAFETY: `info` is a tensor info of this crate the caller owns (the API's contract).
        unsafe { handle::get_mut::<TensorInfo>(info)? }.ty = ty;
        Ok(())
    })
}

/// `SetDimensions`.
pub(crate) unsafe extern "system" fn SetDimensions(
    info: *mut OrtTensorTypeAndShapeInfo,
    dims: *const i64,
    count: usize,
) -> OrtStatusPtr {
    guard("SetDimensions", || {
        // SAFETY: as in `SetTensorElementType`; `dims` holds `count` values.
        let info = unsafe { handle::get_mut::<TensorInfo>(info)? };
        let dims = unsafe { handle::slice(dims, count, "dim_values")? };
        info.dims = dims.to_vec();
        info.symbols = vec![CString::default(); count];
        info.has_shape = true;
        Ok(())
    })
}

/// `SetSymbolicDimensions`.
pub(crate) unsafe extern "system" fn SetSymbolicDimensions(
    info: *mut OrtTensorTypeAndShapeInfo,
    names: *mut *const c_char,
    count: usize,
) -> OrtStatusPtr {
    guard("SetSymbolicDimensions", || {
        // SAFETY: as in `SetDimensions`; `names` holds `count` strings.
        let info = unsafe { handle::get_mut::<TensorInfo>(info)? };
        let names = unsafe { handle::slice(names.cast_const(), count, "dim_params")? };
        info.symbols = names
            .iter()
            .map(|&p| {
                if p.is_null() {
                    Ok(CString::default())
                } else {
                    // SAFETY: each non-null name is a NUL-terminated string.
                    unsafe { handle::str(p, "a dimension name") }
                        .map(|s| CString::new(s).unwrap_or_default())
                }
            })
            .collect::<Result<_>>()?;
        Ok(())
    })
}

/// `GetTensorElementType`.
pub(crate) unsafe extern "system" fn GetTensorElementType(
    info: *const OrtTensorTypeAndShapeInfo,
    out: *mut Ty,
) -> OrtStatusPtr {
    guard("GetTensorElementType", || {
        // SAFETY: `info` is a live tensor info (owned, or borrowed from a type info); `out`
        // writable.
        unsafe { handle::write(out, handle::get::<TensorInfo>(info)?.ty) }
    })
}

/// `GetDimensionsCount`.
pub(crate) unsafe extern "system" fn GetDimensionsCount(
    info: *const OrtTensorTypeAndShapeInfo,
    out: *mut usize,
) -> OrtStatusPtr {
    guard("GetDimensionsCount", || {
        // SAFETY: as in `GetTensorElementType`.
        unsafe { handle::write(out, handle::get::<TensorInfo>(info)?.dims.len()) }
    })
}

/// `GetDimensions`: the first `len` dimensions (-1 for symbolic ones).
pub(crate) unsafe extern "system" fn GetDimensions(
    info: *const OrtTensorTypeAndShapeInfo,
    out: *mut i64,
    len: usize,
) -> OrtStatusPtr {
    guard("GetDimensions", || {
        // SAFETY: as in `GetTensorElementType`; `out` holds `len` writable values.
        let info = unsafe { handle::get::<TensorInfo>(info)? };
        let out = unsafe { handle::slice_mut(out, len.min(info.dims.len()), "dim_values")? };
        out.copy_from_slice(&info.dims[..out.len()]);
        Ok(())
    })
}

/// `GetSymbolicDimensions`: borrowed names ("" for a fixed dimension), valid while `info` is.
pub(crate) unsafe extern "system" fn GetSymbolicDimensions(
    info: *const OrtTensorTypeAndShapeInfo,
    out: *mut *const c_char,
    len: usize,
) -> OrtStatusPtr {
    guard("GetSymbolicDimensions", || {
        // SAFETY: as in `GetDimensions`.
        let info = unsafe { handle::get::<TensorInfo>(info)? };
        let out = unsafe { handle::slice_mut(out, len.min(info.symbols.len()), "dim_params")? };
        for (o, s) in out.iter_mut().zip(&info.symbols) {
            *o = s.as_ptr();
        }
        Ok(())
    })
}

/// `GetTensorShapeElementCount`: the product of the dimensions (an error with a symbolic one).
pub(crate) unsafe extern "system" fn GetTensorShapeElementCount(
    info: *const OrtTensorTypeAndShapeInfo,
    out: *mut usize,
) -> OrtStatusPtr {
    guard("GetTensorShapeElementCount", || {
        // SAFETY: as in `GetTensorElementType`.
        let info = unsafe { handle::get::<TensorInfo>(info)? };
        let count = element_count(&info.dims)?;
        // SAFETY: `out` is writable.
        unsafe { handle::write(out, count) }
    })
}

/// The number of elements of a shape with no negative dimension.
pub(crate) fn element_count(dims: &[i64]) -> Result<usize> {
    dims.iter().try_fold(1usize, |n, &d| {
        let d = usize::try_from(d)
            .map_err(|_| Status::invalid(format!("shape {dims:?} has a negative dimension")))?;
        n.checked_mul(d)
            .ok_or_else(|| Status::invalid(format!("shape {dims:?} has too many elements")))
    })
}

/// `TensorTypeAndShape_HasShape`.
pub(crate) unsafe extern "system" fn TensorTypeAndShape_HasShape(
    info: *const OrtTensorTypeAndShapeInfo,
) -> bool {
    // SAFETY: as in `GetTensorElementType`.
    guard_value(false, || {
        unsafe { handle::get::<TensorInfo>(info) }.is_ok_and(|i| i.has_shape)
    })
}

/// `ReleaseTensorTypeAndShapeInfo`.
pub(crate) unsafe extern "system" fn ReleaseTensorTypeAndShapeInfo(
    info: *mut OrtTensorTypeAndShapeInfo,
) {
    // SAFETY: `info` is null or an owned tensor info of this crate, released once.
    guard_value((), || unsafe { handle::release::<TensorInfo>(info) })
}
