//! `OrtValue`: tensors (every element type Spillway has but the packed 4- and 2-bit ones; strings
//! through the entries of [`crate::strings`]), sequences of tensors, and empty optionals, and the entries that
//! create, inspect and read them.

use std::ffi::{c_int, c_void};

use ort_sys::{
    ONNXTensorElementDataType as Ty, ONNXType, OrtAllocator, OrtMemoryInfo, OrtStatusPtr,
    OrtTensorTypeAndShapeInfo, OrtTypeInfo, OrtValue,
};
use spillway::{DType, Sequence, Tensor, Value};
use spillway_kernels::{Element, dispatch_all, dispatch_copy};

use crate::handle::{self, Handle};
use crate::memory::{self, MemoryInfo};
use crate::status::{Result, Status, guard, guard_value};
use crate::types::{self, TensorInfo, TypeInfo, element_count};

/// What an `OrtValue` handle points to.
#[derive(Debug)]
pub(crate) enum ValueHandle {
    /// A tensor.
    Tensor(TensorValue),
    /// A sequence of tensors of one element type.
    Sequence {
        /// Element type.
        dtype: DType,
        /// The tensors (each owns its data).
        items: Vec<TensorValue>,
    },
    /// An empty optional (a model output that holds no value).
    None,
}

impl Handle for ValueHandle {
    type Sys = OrtValue;
    const WHAT: &'static str = "value";
}

/// A tensor value: its shape and where its elements are.
#[derive(Debug)]
pub(crate) struct TensorValue {
    dims: Vec<i64>,
    data: Data,
}

/// Where a tensor's elements are.
#[derive(Debug)]
enum Data {
    /// In a Spillway tensor this crate owns, in standard (row-major) layout. Writing through
    /// the pointer `GetTensorMutableData` gives first makes the array unique (copy on write),
    /// so a value never writes into memory a session or another value shares.
    Owned(Tensor),
    /// In the caller's buffer (`CreateTensorWithDataAsOrtValue`), which outlives the value; it
    /// is copied into a Spillway tensor when a run reads it. With a deleter, the value frees the
    /// buffer with that allocator when released.
    Borrowed {
        ptr: *mut u8,
        dtype: DType,
        deleter: Option<*mut OrtAllocator>,
    },
}

impl Drop for Data {
    fn drop(&mut self) {
        if let Data::Borrowed {
            ptr,
            deleter: Some(allocator),
            ..
        } = *self
        {
            // SAFETY: the buffer was handed over with this allocator as its deleter
            // (`CreateTensorWithDataAndDeleterAsOrtValue`) and is freed once, here.
            unsafe {
                if let Some(free) = (*allocator).Free {
                    free(allocator, ptr.cast());
                }
            }
        }
    }
}

/// The shape of a Spillway tensor as `ort` dims.
fn dims_of(shape: &[usize]) -> Vec<i64> {
    shape.iter().map(|&d| d as i64).collect()
}

/// `dims` as a Spillway shape (no negative dimension).
fn shape_of(dims: &[i64]) -> Result<Vec<usize>> {
    element_count(dims)?;
    Ok(dims.iter().map(|&d| d as usize).collect())
}

/// `t` in standard layout (a copy only when it is strided).
fn standard(t: Tensor) -> Tensor {
    if dispatch_all!(&t, a => a.is_standard_layout()) {
        return t;
    }
    dispatch_all!(&t, a => Element::into_tensor(a.as_standard_layout().into_owned().into_shared()))
}

/// A Spillway tensor of `dtype` and `shape` holding a copy of the bytes at `src`.
///
/// # Safety
/// `src` points to `count(shape) * dtype.size_of()` readable bytes of `dtype` elements.
unsafe fn tensor_from_bytes(dtype: DType, shape: &[usize], src: *const u8) -> Result<Tensor> {
    types::check_plain(dtype)?;
    let count: usize = shape.iter().product();
    if dtype == DType::Bool {
        // SAFETY: `count` readable bytes (the caller's contract); read as u8 so that bytes
        // other than 0 and 1 are not invalid bools.
        let bytes = unsafe { handle::slice(src, count, "data")? };
        let data = bytes.iter().map(|&b| b != 0).collect();
        return Tensor::from_shape_vec(shape, data).map_err(|e| Status::fail(e.to_string()));
    }
    let mut tensor = Tensor::zeros(dtype, shape);
    let dst = mut_ptr(&mut tensor)?;
    if count > 0 {
        // SAFETY: `dst` is the unique, contiguous storage of `count` elements of `dtype` just
        // allocated; `src` holds as many bytes (the caller's contract); they do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(src, dst.cast(), count * dtype.size_of()) };
    }
    Ok(tensor)
}

/// The data pointer of an owned tensor, made unique first (copy on write).
fn mut_ptr(tensor: &mut Tensor) -> Result<*mut c_void> {
    dispatch_copy!(tensor, a => Ok(a.as_mut_ptr().cast()), _s => Err(Status::invalid(
        "string tensors have no plain data; use the string entries"
    )))
}

impl TensorValue {
    /// A tensor value owning `t`.
    pub(crate) fn owned(t: Tensor) -> Self {
        let t = standard(t);
        TensorValue {
            dims: dims_of(t.shape()),
            data: Data::Owned(t),
        }
    }

    /// The element type.
    pub(crate) fn dtype(&self) -> DType {
        match &self.data {
            Data::Owned(t) => t.dtype(),
            Data::Borrowed { dtype, .. } => *dtype,
        }
    }

    /// The number of elements.
    fn len(&self) -> usize {
        self.dims.iter().map(|&d| d as usize).product()
    }

    /// The elements as a Spillway tensor: shared for owned data, a copy of a caller's buffer.
    pub(crate) fn to_tensor(&self) -> Result<Tensor> {
        match &self.data {
            Data::Owned(t) => Ok(t.clone()),
            // SAFETY: a borrowed buffer holds the value's elements and outlives it (checked at
            // creation, the API's contract).
            Data::Borrowed { ptr, dtype, .. } => unsafe {
                tensor_from_bytes(*dtype, &shape_of(&self.dims)?, *ptr)
            },
        }
    }

    /// The data pointer, writable.
    fn data_mut(&mut self) -> Result<*mut c_void> {
        match &mut self.data {
            Data::Owned(t) => mut_ptr(t),
            Data::Borrowed { ptr, .. } => Ok(ptr.cast()),
        }
    }

    /// The strings of a string tensor.
    pub(crate) fn strings(&self) -> Result<&ndarray::ArcArray<String, ndarray::IxDyn>> {
        match &self.data {
            Data::Owned(Tensor::String(a)) => Ok(a),
            _ => Err(Status::invalid(format!(
                "the tensor holds {}, not strings",
                self.dtype()
            ))),
        }
    }

    /// The strings of a string tensor, writable.
    pub(crate) fn strings_mut(&mut self) -> Result<&mut ndarray::ArcArray<String, ndarray::IxDyn>> {
        let dtype = self.dtype();
        match &mut self.data {
            Data::Owned(Tensor::String(a)) => Ok(a),
            _ => Err(Status::invalid(format!(
                "the tensor holds {dtype}, not strings"
            ))),
        }
    }

    /// Copies `t` into this value's storage (a caller's preallocated output).
    pub(crate) fn overwrite(&mut self, t: Tensor) -> Result {
        if t.dtype() != self.dtype() || t.shape() != shape_of(&self.dims)?.as_slice() {
            return Err(Status::invalid(format!(
                "the preallocated output is {} {:?}, the model produced {} {:?}",
                self.dtype(),
                self.dims,
                t.dtype(),
                t.shape()
            )));
        }
        if t.dtype() == DType::String {
            *self.strings_mut()? = t
                .shared::<String>()
                .map_err(|e| Status::fail(e.to_string()))?;
            return Ok(());
        }
        types::check_plain(t.dtype())?;
        let t = standard(t);
        let bytes = t.len() * t.dtype().size_of();
        let src: *const u8 = dispatch_all!(&t, a => a.as_ptr().cast());
        let dst = self.data_mut()?;
        // SAFETY: both hold `len` elements of one plain type in standard layout; `dst` is this
        // value's unique storage, distinct from the run's output `t`.
        unsafe { std::ptr::copy_nonoverlapping(src, dst.cast::<u8>(), bytes) };
        Ok(())
    }

    fn info(&self) -> TensorInfo {
        TensorInfo::fixed(types::to_onnx(self.dtype()), self.dims.clone())
    }
}

impl ValueHandle {
    /// A handle for a run's output (or a sequence element).
    pub(crate) fn from_value(value: Value) -> Result<Self> {
        Ok(match value {
            Value::Tensor(t) => ValueHandle::Tensor(TensorValue::owned(t)),
            Value::Sequence(s) => ValueHandle::Sequence {
                dtype: s.dtype(),
                items: s
                    .into_tensors()
                    .into_iter()
                    .map(TensorValue::owned)
                    .collect(),
            },
            Value::Optional(Some(v)) => Self::from_value(*v)?,
            Value::Optional(None) => ValueHandle::None,
        })
    }

    /// The value as Spillway takes it for a run.
    pub(crate) fn to_value(&self) -> Result<Value> {
        Ok(match self {
            ValueHandle::Tensor(t) => Value::Tensor(t.to_tensor()?),
            ValueHandle::Sequence { dtype, items } => Value::Sequence(
                Sequence::new(
                    *dtype,
                    items
                        .iter()
                        .map(TensorValue::to_tensor)
                        .collect::<Result<_>>()?,
                )
                .map_err(|e| Status::invalid(e.to_string()))?,
            ),
            ValueHandle::None => Value::none(),
        })
    }

    /// The tensor, or an error naming what the value is.
    pub(crate) fn tensor(&self) -> Result<&TensorValue> {
        match self {
            ValueHandle::Tensor(t) => Ok(t),
            other => Err(Status::invalid(format!(
                "the value is {}, not a tensor",
                other.kind()
            ))),
        }
    }

    /// The tensor, writable.
    pub(crate) fn tensor_mut(&mut self) -> Result<&mut TensorValue> {
        match self {
            ValueHandle::Tensor(t) => Ok(t),
            other => Err(Status::invalid(format!(
                "the value is {}, not a tensor",
                other.kind()
            ))),
        }
    }

    /// What the value is, for messages.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            ValueHandle::Tensor(_) => "a tensor",
            ValueHandle::Sequence { .. } => "a sequence",
            ValueHandle::None => "an empty optional",
        }
    }

    fn type_info(&self) -> TypeInfo {
        match self {
            ValueHandle::Tensor(t) => TypeInfo::Tensor(t.info()),
            ValueHandle::Sequence { dtype, .. } => {
                TypeInfo::Sequence(Box::new(TypeInfo::Tensor(TensorInfo {
                    has_shape: false,
                    ..TensorInfo::fixed(types::to_onnx(*dtype), Vec::new())
                })))
            }
            ValueHandle::None => TypeInfo::Optional(Box::new(TypeInfo::Tensor(TensorInfo::fixed(
                Ty::ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED,
                Vec::new(),
            )))),
        }
    }
}

/// Borrows a value handle.
///
/// # Safety
/// `value` is null or a live value of this crate not mutated during `'a`.
pub(crate) unsafe fn value<'a>(value: *const OrtValue) -> Result<&'a ValueHandle> {
    // SAFETY: the caller's contract.
    unsafe { handle::get::<ValueHandle>(value) }
}

/// Borrows a value handle mutably.
///
/// # Safety
/// `value` is null or a live value of this crate nothing else uses during `'a`.
pub(crate) unsafe fn value_mut<'a>(value: *mut OrtValue) -> Result<&'a mut ValueHandle> {
    // SAFETY: the caller's contract.
    unsafe { handle::get_mut::<ValueHandle>(value) }
}

/// `CreateTensorAsOrtValue`: a zeroed tensor in host memory (any host allocator).
pub(crate) unsafe extern "system" fn CreateTensorAsOrtValue(
    allocator: *mut OrtAllocator,
    shape: *const i64,
    shape_len: usize,
    ty: Ty,
    out: *mut *mut OrtValue,
) -> OrtStatusPtr {
    guard("CreateTensorAsOrtValue", || {
        // SAFETY: a valid allocator, `shape_len` dims and a writable `out` (the API's contract).
        unsafe {
            if let Some(table) = allocator.as_ref()
                && let Some(info) = table.Info
            {
                memory::check_host(info(allocator))?;
            }
        }
        // SAFETY: the array holds that many elements (the API's contract).
        let dims = unsafe { handle::slice(shape, shape_len, "shape")? }.to_vec();
        let dtype = types::from_onnx(ty)?;
        if dtype != DType::String {
            types::check_plain(dtype)?;
        }
        let tensor = Tensor::zeros(dtype, &shape_of(&dims)?);
        let value = ValueHandle::Tensor(TensorValue {
            dims,
            data: Data::Owned(tensor),
        });
        // SAFETY: the out-parameter is writable (the API's contract).
        unsafe { handle::write(out, value.into_raw()) }
    })
}

/// Makes a tensor over a caller's buffer (the arguments of the C entry, and its deleter).
///
/// # Safety
/// The `CreateTensorWithDataAsOrtValue` contract: `data` holds `data_len` bytes that outlive the
/// value, `shape` holds `shape_len` dims, `out` is writable, `info` is a live memory info.
#[allow(clippy::too_many_arguments)]
unsafe fn borrowed(
    info: *const OrtMemoryInfo,
    data: *mut c_void,
    data_len: usize,
    shape: *const i64,
    shape_len: usize,
    ty: Ty,
    deleter: Option<*mut OrtAllocator>,
    out: *mut *mut OrtValue,
) -> Result {
    // SAFETY: the caller's contract.
    unsafe { memory::check_host(info)? };
    let dims = unsafe { handle::slice(shape, shape_len, "shape")? }.to_vec();
    let dtype = types::from_onnx(ty)?;
    types::check_plain(dtype)?;
    let needed = element_count(&dims)?
        .checked_mul(dtype.size_of())
        .ok_or_else(|| Status::invalid("the tensor is too large"))?;
    if data_len < needed {
        return Err(Status::invalid(format!(
            "the buffer holds {data_len} bytes; a {dtype} tensor of shape {dims:?} needs {needed}"
        )));
    }
    if needed > 0 && data.is_null() {
        return Err(Status::invalid("the data pointer is null"));
    }
    if !(data as usize).is_multiple_of(dtype.size_of()) {
        return Err(Status::invalid(format!(
            "the data pointer is not aligned for {dtype}"
        )));
    }
    let value = ValueHandle::Tensor(TensorValue {
        dims,
        data: Data::Borrowed {
            ptr: data.cast(),
            dtype,
            deleter,
        },
    });
    // SAFETY: the caller's contract.
    unsafe { handle::write(out, value.into_raw()) }
}

/// `CreateTensorWithDataAsOrtValue`: a tensor over the caller's host buffer (not copied).
pub(crate) unsafe extern "system" fn CreateTensorWithDataAsOrtValue(
    info: *const OrtMemoryInfo,
    data: *mut c_void,
    data_len: usize,
    shape: *const i64,
    shape_len: usize,
    ty: Ty,
    out: *mut *mut OrtValue,
) -> OrtStatusPtr {
    // SAFETY: the API's contract, as `borrowed` requires.
    guard("CreateTensorWithDataAsOrtValue", || unsafe {
        borrowed(info, data, data_len, shape, shape_len, ty, None, out)
    })
}

/// `CreateTensorWithDataAndDeleterAsOrtValue`: as above; the value frees the buffer with
/// `deleter` when released.
pub(crate) unsafe extern "system" fn CreateTensorWithDataAndDeleterAsOrtValue(
    deleter: *mut OrtAllocator,
    data: *mut c_void,
    data_len: usize,
    shape: *const i64,
    shape_len: usize,
    ty: Ty,
    out: *mut *mut OrtValue,
) -> OrtStatusPtr {
    guard("CreateTensorWithDataAndDeleterAsOrtValue", || {
        if deleter.is_null() {
            return Err(Status::invalid("the deleter is null"));
        }
        // SAFETY: the API's contract; a non-null deleter is a valid allocator.
        let info = unsafe { (*deleter).Info.map_or(std::ptr::null(), |f| f(deleter)) };
        unsafe {
            borrowed(
                info,
                data,
                data_len,
                shape,
                shape_len,
                ty,
                Some(deleter),
                out,
            )
        }
    })
}

/// `ReleaseValue`.
pub(crate) unsafe extern "system" fn ReleaseValue(value: *mut OrtValue) {
    // SAFETY: null or a value of this crate, released once.
    guard_value((), || unsafe { handle::release::<ValueHandle>(value) })
}

/// `IsTensor`.
pub(crate) unsafe extern "system" fn IsTensor(
    value: *const OrtValue,
    out: *mut c_int,
) -> OrtStatusPtr {
    guard("IsTensor", || {
        // SAFETY: a live value, a writable `out` (the API's contract).
        let is = matches!(unsafe { self::value(value)? }, ValueHandle::Tensor(_));
        unsafe { handle::write(out, is as c_int) }
    })
}

/// `IsSparseTensor`: never.
pub(crate) unsafe extern "system" fn IsSparseTensor(
    value: *const OrtValue,
    out: *mut c_int,
) -> OrtStatusPtr {
    guard("IsSparseTensor", || {
        // SAFETY: as in `IsTensor`.
        unsafe {
            self::value(value)?;
            handle::write(out, 0)
        }
    })
}

/// `HasValue`: 0 for an empty optional.
pub(crate) unsafe extern "system" fn HasValue(
    value: *const OrtValue,
    out: *mut c_int,
) -> OrtStatusPtr {
    guard("HasValue", || {
        // SAFETY: as in `IsTensor`.
        let has = !matches!(unsafe { self::value(value)? }, ValueHandle::None);
        unsafe { handle::write(out, has as c_int) }
    })
}

/// `GetValueType`.
pub(crate) unsafe extern "system" fn GetValueType(
    value: *const OrtValue,
    out: *mut ONNXType,
) -> OrtStatusPtr {
    guard("GetValueType", || {
        // SAFETY: as in `IsTensor`.
        let ty = match unsafe { self::value(value)? } {
            ValueHandle::Tensor(_) => ONNXType::ONNX_TYPE_TENSOR,
            ValueHandle::Sequence { .. } => ONNXType::ONNX_TYPE_SEQUENCE,
            ValueHandle::None => ONNXType::ONNX_TYPE_OPTIONAL,
        };
        unsafe { handle::write(out, ty) }
    })
}

/// `GetTypeInfo`: a new type info owned by the caller.
pub(crate) unsafe extern "system" fn GetTypeInfo(
    value: *const OrtValue,
    out: *mut *mut OrtTypeInfo,
) -> OrtStatusPtr {
    guard("GetTypeInfo", || {
        // SAFETY: as in `IsTensor`.
        let info = unsafe { self::value(value)? }.type_info();
        unsafe { handle::write(out, info.into_raw()) }
    })
}

/// `GetTensorTypeAndShape`: a new tensor info owned by the caller.
pub(crate) unsafe extern "system" fn GetTensorTypeAndShape(
    value: *const OrtValue,
    out: *mut *mut OrtTensorTypeAndShapeInfo,
) -> OrtStatusPtr {
    guard("GetTensorTypeAndShape", || {
        // SAFETY: as in `IsTensor`.
        let info = unsafe { self::value(value)? }.tensor()?.info();
        unsafe { handle::write(out, info.into_raw()) }
    })
}

/// `GetTensorElementTypeAndShapeDataReference`: the dims are borrowed from the value.
pub(crate) unsafe extern "system" fn GetTensorElementTypeAndShapeDataReference(
    value: *const OrtValue,
    ty: *mut Ty,
    dims: *mut *const i64,
    len: *mut usize,
) -> OrtStatusPtr {
    guard("GetTensorElementTypeAndShapeDataReference", || {
        // SAFETY: as in `IsTensor`, three writable outs.
        let t = unsafe { self::value(value)? }.tensor()?;
        unsafe {
            handle::write(ty, types::to_onnx(t.dtype()))?;
            handle::write(dims, t.dims.as_ptr())?;
            handle::write(len, t.dims.len())
        }
    })
}

/// `GetTensorMemoryInfo`: always the (borrowed) CPU memory info.
pub(crate) unsafe extern "system" fn GetTensorMemoryInfo(
    value: *const OrtValue,
    out: *mut *const OrtMemoryInfo,
) -> OrtStatusPtr {
    guard("GetTensorMemoryInfo", || {
        // SAFETY: as in `IsTensor`.
        unsafe {
            self::value(value)?.tensor()?;
            handle::write(out, MemoryInfo::cpu_ptr())
        }
    })
}

/// `GetTensorSizeInBytes`.
pub(crate) unsafe extern "system" fn GetTensorSizeInBytes(
    value: *const OrtValue,
    out: *mut usize,
) -> OrtStatusPtr {
    guard("GetTensorSizeInBytes", || {
        // SAFETY: as in `IsTensor`.
        let t = unsafe { self::value(value)? }.tensor()?;
        types::check_plain(t.dtype())?;
        unsafe { handle::write(out, t.len() * t.dtype().size_of()) }
    })
}

/// `GetTensorMutableData`: the elements, row-major; valid until the value is released or
/// changed by another entry.
pub(crate) unsafe extern "system" fn GetTensorMutableData(
    value: *mut OrtValue,
    out: *mut *mut c_void,
) -> OrtStatusPtr {
    guard("GetTensorMutableData", || {
        // SAFETY: a live value the caller may mutate, a writable `out` (the API's contract).
        let t = unsafe { value_mut(value)? }.tensor_mut()?;
        types::check_plain(t.dtype())?;
        let ptr = t.data_mut()?;
        unsafe { handle::write(out, ptr) }
    })
}

/// `GetTensorData`: as `GetTensorMutableData`, read-only.
pub(crate) unsafe extern "system" fn GetTensorData(
    value: *const OrtValue,
    out: *mut *const c_void,
) -> OrtStatusPtr {
    guard("GetTensorData", || {
        // SAFETY: as in `IsTensor`.
        let t = unsafe { self::value(value)? }.tensor()?;
        types::check_plain(t.dtype())?;
        let ptr: *const c_void = match &t.data {
            Data::Owned(t) => dispatch_all!(t, a => a.as_ptr().cast()),
            Data::Borrowed { ptr, .. } => ptr.cast_const().cast(),
        };
        // SAFETY: the out-parameter is writable (the API's contract).
        unsafe { handle::write(out, ptr) }
    })
}

/// `TensorAt`: a pointer to one element, by row-major indices.
pub(crate) unsafe extern "system" fn TensorAt(
    value: *mut OrtValue,
    index: *const i64,
    len: usize,
    out: *mut *mut c_void,
) -> OrtStatusPtr {
    guard("TensorAt", || {
        // SAFETY: as in `GetTensorMutableData`; `index` holds `len` values.
        let t = unsafe { value_mut(value)? }.tensor_mut()?;
        let index = unsafe { handle::slice(index, len, "location")? };
        if index.len() != t.dims.len() {
            return Err(Status::invalid(format!(
                "{} indices for a tensor of rank {}",
                index.len(),
                t.dims.len()
            )));
        }
        let mut offset = 0usize;
        for (&i, &d) in index.iter().zip(&t.dims) {
            if i < 0 || i >= d {
                return Err(Status::invalid(format!(
                    "index {index:?} is outside {:?}",
                    t.dims
                )));
            }
            offset = offset * d as usize + i as usize;
        }
        let size = t.dtype().size_of();
        types::check_plain(t.dtype())?;
        let base = t.data_mut()?;
        // SAFETY: `offset` is inside the tensor's contiguous storage (checked above).
        unsafe { handle::write(out, base.cast::<u8>().add(offset * size).cast()) }
    })
}
