//! NumPy arrays to engine values and back.
//!
//! In: an array's elements are copied once, into the engine tensor's own buffer (the engine's
//! tensors own reference-counted arrays, so it cannot borrow NumPy's memory). Out: an output
//! array that no one else holds is handed to NumPy as it is (NumPy's array points into the
//! Rust buffer and keeps it alive); one the engine still shares (an initializer returned as an
//! output) is copied. Strings travel as NumPy object arrays of `str`, as in onnxruntime.

use ndarray::{ArcArray, IxDyn};
use numpy::{
    PyArrayDescrMethods, PyArrayDyn, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods,
};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};
use spillway::{DType, IntoTensor, Sequence, Tensor, Value, ValueType};

use crate::errors::{engine, invalid_argument, raise};

/// The ONNX type of a declared value as onnxruntime spells it: `tensor(float)`,
/// `seq(tensor(int64))`, `optional(tensor(float))`.
pub fn type_string(ty: &ValueType) -> String {
    match ty {
        ValueType::Tensor { dtype, .. } => {
            format!("tensor({})", dtype.map_or("undefined", ort_dtype_name))
        }
        ValueType::Sequence(e) => format!("seq({})", type_string(e)),
        ValueType::Optional(e) => format!("optional({})", type_string(e)),
    }
}

/// onnxruntime's name of an element type (ONNX's `TensorProto.DataType` names, lower case).
pub fn ort_dtype_name(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => "float",
        DType::F64 => "double",
        DType::F8E4M3Fn => "float8e4m3fn",
        DType::F8E4M3FnUz => "float8e4m3fnuz",
        DType::F8E5M2 => "float8e5m2",
        DType::F8E5M2FnUz => "float8e5m2fnuz",
        DType::F4E2M1 => "float4e2m1",
        DType::F8E8M0 => "float8e8m0",
        other => other.name(),
    }
}

/// Converts what Python passed for an input of declared type `declared` (when the model has
/// an input of that name) into an engine value.
pub fn to_value(
    py: Python<'_>,
    name: &str,
    object: &Bound<'_, PyAny>,
    declared: Option<&ValueType>,
) -> PyResult<Value> {
    match declared {
        Some(ValueType::Sequence(element)) => {
            let items: Vec<Bound<'_, PyAny>> = if let Ok(list) = object.cast::<PyList>() {
                list.iter().collect()
            } else if let Ok(tuple) = object.cast::<PyTuple>() {
                tuple.iter().collect()
            } else {
                return Err(invalid_argument(
                    py,
                    format!("input '{name}' is a sequence: pass a list of arrays"),
                ));
            };
            let tensors = items
                .iter()
                .map(|item| to_tensor(py, name, item, element_dtype(element)))
                .collect::<PyResult<Vec<_>>>()?;
            let dtype = match (element.as_ref(), tensors.first()) {
                (ValueType::Tensor { dtype: Some(d), .. }, _) => *d,
                (_, Some(t)) => t.dtype(),
                _ => {
                    return Err(invalid_argument(
                        py,
                        format!("input '{name}': an empty sequence of unknown element type"),
                    ));
                }
            };
            let sequence = Sequence::new(dtype, tensors)
                .map_err(|e| invalid_argument(py, format!("input '{name}': {e}")))?;
            Ok(Value::Sequence(sequence))
        }
        Some(ValueType::Optional(element)) => {
            if object.is_none() {
                Ok(Value::none())
            } else {
                Ok(Value::some(to_value(py, name, object, Some(element))?))
            }
        }
        Some(ty) => Ok(Value::Tensor(to_tensor(
            py,
            name,
            object,
            element_dtype(ty),
        )?)),
        None => Ok(Value::Tensor(to_tensor(py, name, object, None)?)),
    }
}

/// The element type of a declared tensor.
fn element_dtype(ty: &ValueType) -> Option<DType> {
    match ty {
        ValueType::Tensor { dtype, .. } => *dtype,
        _ => None,
    }
}

/// NumPy's name of an element type, for `numpy.asarray(..., dtype=)`.
fn numpy_dtype_name(dtype: DType) -> Option<&'static str> {
    Some(match dtype {
        DType::F32 => "float32",
        DType::F64 => "float64",
        DType::F16 => "float16",
        DType::I64 => "int64",
        DType::I32 => "int32",
        DType::I16 => "int16",
        DType::I8 => "int8",
        DType::U8 => "uint8",
        DType::U16 => "uint16",
        DType::U32 => "uint32",
        DType::U64 => "uint64",
        DType::Bool => "bool",
        DType::String => "object",
        _ => return None,
    })
}

/// Copies a NumPy array into an engine tensor; anything else `numpy.asarray` takes (a list,
/// a scalar) becomes an array of the declared element type first, as in onnxruntime.
pub fn to_tensor(
    py: Python<'_>,
    name: &str,
    object: &Bound<'_, PyAny>,
    declared: Option<DType>,
) -> PyResult<Tensor> {
    let numpy = py.import("numpy")?;
    let array = match object.cast::<PyUntypedArray>() {
        Ok(a) => a.clone(),
        Err(_) => numpy
            .call_method1("asarray", (object, declared.and_then(numpy_dtype_name)))?
            .cast_into::<PyUntypedArray>()
            .map_err(|e| invalid_argument(py, format!("input '{name}': {e}")))?,
    };
    // Non-native byte order: to native first (NumPy's own copy), then the one copy below.
    let array = if array.dtype().is_native_byteorder() == Some(false) {
        let native = array.dtype().call_method1("newbyteorder", ("=",))?;
        array
            .call_method1("astype", (native,))?
            .cast_into::<PyUntypedArray>()?
    } else {
        array
    };
    macro_rules! numeric {
        ($($t:ty),*) => {$(
            if let Ok(typed) = array.cast::<PyArrayDyn<$t>>() {
                let view = typed.try_readonly().map_err(|e| {
                    invalid_argument(py, format!("input '{name}': {e}"))
                })?;
                return Ok(view.as_array().to_owned().into_tensor());
            }
        )*};
    }
    numeric!(
        f32,
        f64,
        half::f16,
        i64,
        i32,
        i16,
        i8,
        u8,
        u16,
        u32,
        u64,
        bool
    );
    let dtype = array.dtype();
    let shape = array.shape().to_vec();
    match dtype.kind() {
        // bfloat16 from ml_dtypes: its bits as uint16.
        _ if dtype.to_string() == "bfloat16" => {
            let bits = array
                .call_method1("view", (numpy.getattr("uint16")?,))?
                .cast_into::<PyArrayDyn<u16>>()?;
            let view = bits.readonly();
            Ok(view.as_array().mapv(half::bf16::from_bits).into_tensor())
        }
        // str, bytes or Python objects (onnxruntime's string tensors are object arrays).
        b'U' | b'S' | b'O' | b'V' => {
            let items = array.call_method0("ravel")?.call_method0("tolist")?;
            let items = items.cast::<PyList>()?;
            let mut strings = Vec::with_capacity(items.len());
            for item in items.iter() {
                if let Ok(s) = item.cast::<PyString>() {
                    strings.push(s.to_str()?.to_owned());
                } else if let Ok(b) = item.cast::<PyBytes>() {
                    let text = std::str::from_utf8(b.as_bytes()).map_err(|e| {
                        invalid_argument(
                            py,
                            format!("input '{name}': bytes that are not UTF-8: {e}"),
                        )
                    })?;
                    strings.push(text.to_owned());
                } else {
                    return Err(invalid_argument(
                        py,
                        format!(
                            "input '{name}': an object array holds {}, not str: only string tensors travel as object arrays",
                            item.get_type().name()?
                        ),
                    ));
                }
            }
            Tensor::from_shape_vec(&shape, strings).map_err(|e| invalid_argument(py, e.to_string()))
        }
        _ => Err(invalid_argument(
            py,
            format!(
                "input '{name}' has NumPy element type {dtype}, which Spillway has no tensor type for"
            ),
        )),
    }
}

/// A tensor's array as a NumPy array: moved when the engine holds it nowhere else.
fn owned_to_numpy<'py, T: numpy::Element + Clone>(
    py: Python<'py>,
    array: ArcArray<T, IxDyn>,
) -> Bound<'py, PyAny> {
    numpy::PyArray::from_owned_array(py, array.into_owned()).into_any()
}

/// Converts an output value to Python: a tensor to a NumPy array, a sequence to a list of
/// arrays, an optional to its value or `None`.
pub fn to_python(py: Python<'_>, name: &str, value: Value) -> PyResult<Py<PyAny>> {
    Ok(match value {
        Value::Tensor(t) => tensor_to_numpy(py, name, t)?.unbind(),
        Value::Sequence(s) => {
            let items = s
                .into_tensors()
                .into_iter()
                .map(|t| tensor_to_numpy(py, name, t))
                .collect::<PyResult<Vec<_>>>()?;
            PyList::new(py, items)?.into_any().unbind()
        }
        Value::Optional(None) => py.None(),
        Value::Optional(Some(v)) => to_python(py, name, *v)?,
    })
}

/// Converts an output tensor to a NumPy array.
pub fn tensor_to_numpy<'py>(
    py: Python<'py>,
    name: &str,
    tensor: Tensor,
) -> PyResult<Bound<'py, PyAny>> {
    Ok(match tensor {
        Tensor::F32(a) => owned_to_numpy(py, a),
        Tensor::F64(a) => owned_to_numpy(py, a),
        Tensor::F16(a) => owned_to_numpy(py, a),
        Tensor::I64(a) => owned_to_numpy(py, a),
        Tensor::I32(a) => owned_to_numpy(py, a),
        Tensor::I16(a) => owned_to_numpy(py, a),
        Tensor::I8(a) => owned_to_numpy(py, a),
        Tensor::U8(a) => owned_to_numpy(py, a),
        Tensor::U16(a) => owned_to_numpy(py, a),
        Tensor::U32(a) => owned_to_numpy(py, a),
        Tensor::U64(a) => owned_to_numpy(py, a),
        Tensor::Bool(a) => owned_to_numpy(py, a),
        Tensor::String(a) => {
            let shape = a.shape().to_vec();
            let items = PyList::new(py, a.iter().map(String::as_str))?;
            let numpy = py.import("numpy")?;
            let kwargs = pyo3::types::PyDict::new(py);
            kwargs.set_item("dtype", numpy.getattr("object_")?)?;
            numpy
                .call_method("array", (items,), Some(&kwargs))?
                .call_method1("reshape", (PyTuple::new(py, shape)?,))?
        }
        Tensor::BF16(a) => {
            // ml_dtypes' bfloat16 when it is installed (onnx depends on it).
            let ml_dtypes = py.import("ml_dtypes").map_err(|_| {
                raise(
                    py,
                    "NotImplemented",
                    format!("output '{name}' is bfloat16: install ml_dtypes to read it from NumPy"),
                )
            })?;
            let bits = a.mapv(half::bf16::to_bits);
            numpy::PyArray::from_owned_array(py, bits)
                .call_method1("view", (ml_dtypes.getattr("bfloat16")?,))?
        }
        other => {
            return Err(raise(
                py,
                "NotImplemented",
                format!(
                    "output '{name}' has element type {}, which NumPy has no type for",
                    other.dtype()
                ),
            ));
        }
    })
}

/// Maps an engine error to its Python exception (a helper for closures).
pub fn engine_error(py: Python<'_>) -> impl Fn(spillway::Error) -> PyErr + '_ {
    move |e| engine(py, e)
}
