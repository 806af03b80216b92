//! Getting tensors and other values into and out of a session.

use ndarray::{ArrayBase, Dimension, OwnedRepr, ViewRepr};
use spillway_kernels::{Element, Tensor};

use crate::error::{Error, Result};
use crate::value::Value;

/// Converts ndarray arrays (owned or views, any dimensionality) into a [`Tensor`].
/// Owned arrays move without copying; views are copied.
pub trait IntoTensor {
    /// The tensor.
    fn into_tensor(self) -> Tensor;
}

impl IntoTensor for Tensor {
    fn into_tensor(self) -> Tensor {
        self
    }
}

impl<T: Element, D: Dimension> IntoTensor for ArrayBase<OwnedRepr<T>, D> {
    fn into_tensor(self) -> Tensor {
        T::into_tensor(self.into_dyn().into_shared())
    }
}

impl<T: Element, D: Dimension> IntoTensor for ArrayBase<ViewRepr<&T>, D> {
    fn into_tensor(self) -> Tensor {
        T::into_tensor(self.to_owned().into_dyn().into_shared())
    }
}

/// Builds the input list of [`Session::run`](crate::Session::run):
/// `inputs!["x" => array, "mask" => other]`.
#[macro_export]
macro_rules! inputs {
    ($($name:expr => $value:expr),* $(,)?) => {
        vec![$(($name, $crate::IntoTensor::into_tensor($value))),*]
    };
}

/// The outputs of one run, in the model's order, addressable by name or position.
///
/// Outputs are [`Value`]s: tensors, sequences or optionals. The tensor accessors (`get`,
/// `tensor`, indexing, `iter`, `into_tensors`) are for tensor outputs; the value accessors
/// (`value`, `values`, `iter_values`, `into_values`) read any output.
#[derive(Debug, Clone)]
pub struct SessionOutputs {
    names: Vec<String>,
    values: Vec<Value>,
}

impl SessionOutputs {
    pub(crate) fn new(names: Vec<String>, values: Vec<Value>) -> Self {
        SessionOutputs { names, values }
    }

    fn position(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }

    /// The tensor output called `name`; `None` when there is no such output or it is not a
    /// tensor (see [`SessionOutputs::tensor`] for an error that says which).
    pub fn get(&self, name: &str) -> Option<&Tensor> {
        self.position(name).and_then(|i| self.values[i].as_tensor())
    }

    /// The tensor output called `name`: [`Error::UnknownOutput`] when there is none,
    /// [`Error::OutputKind`] when it is a sequence or an optional.
    pub fn tensor(&self, name: &str) -> Result<&Tensor> {
        let i = self.position(name).ok_or_else(|| Error::UnknownOutput {
            name: name.to_string(),
            expected: self.names.join(", "),
        })?;
        self.tensor_at(i)
    }

    /// The tensor output at position `i`, with the errors of [`SessionOutputs::tensor`].
    pub fn tensor_at(&self, i: usize) -> Result<&Tensor> {
        let value = self.values.get(i).ok_or_else(|| Error::UnknownOutput {
            name: format!("#{i}"),
            expected: self.names.join(", "),
        })?;
        value.as_tensor().ok_or_else(|| Error::OutputKind {
            name: self.names[i].clone(),
            got: value.type_string(),
        })
    }

    /// The output called `name`, whatever its kind.
    pub fn value(&self, name: &str) -> Option<&Value> {
        self.position(name).map(|i| &self.values[i])
    }

    /// The outputs, in order.
    pub fn values(&self) -> &[Value] {
        &self.values
    }

    /// How many outputs.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// True when the model has no outputs.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// `(name, tensor)` pairs in order.
    ///
    /// # Panics
    /// When an output is not a tensor (use [`SessionOutputs::iter_values`]).
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Tensor)> {
        self.iter_values().map(|(n, v)| {
            (
                n,
                v.as_tensor()
                    .unwrap_or_else(|| panic!("output '{n}' is {}, not a tensor", v.type_string())),
            )
        })
    }

    /// `(name, value)` pairs in order.
    pub fn iter_values(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.names.iter().map(String::as_str).zip(&self.values)
    }

    /// The tensors, in order.
    ///
    /// # Panics
    /// When an output is not a tensor (use [`SessionOutputs::try_into_tensors`]).
    pub fn into_tensors(self) -> Vec<Tensor> {
        match self.try_into_tensors() {
            Ok(t) => t,
            Err(e) => panic!("{e}"),
        }
    }

    /// The tensors, in order; [`Error::OutputKind`] when an output is not a tensor.
    pub fn try_into_tensors(self) -> Result<Vec<Tensor>> {
        self.names
            .into_iter()
            .zip(self.values)
            .map(|(name, v)| {
                v.into_tensor().map_err(|v| Error::OutputKind {
                    name,
                    got: v.type_string(),
                })
            })
            .collect()
    }

    /// The values, in order.
    pub fn into_values(self) -> Vec<Value> {
        self.values
    }
}

impl std::ops::Index<usize> for SessionOutputs {
    type Output = Tensor;
    /// # Panics
    /// When there is no output `i` or it is not a tensor.
    fn index(&self, i: usize) -> &Tensor {
        self.tensor_at(i).unwrap_or_else(|e| panic!("{e}"))
    }
}

impl std::ops::Index<&str> for SessionOutputs {
    type Output = Tensor;
    /// # Panics
    /// When there is no output `name` or it is not a tensor.
    fn index(&self, name: &str) -> &Tensor {
        self.tensor(name).unwrap_or_else(|e| panic!("{e}"))
    }
}

/// Reads a `.npy` array (format versions 1 to 3, any byte order, C or Fortran order) of
/// one of the element types `f32`, `f64`, `i64`, `i32`, `i16`, `i8`, `u8`, `u16`, `u32`,
/// `u64` or `bool`, or little-endian `float16` (`<f2`).
///
/// Untrusted bytes are safe to pass: a header or a shape that claims more bytes than `bytes`
/// holds is an error before anything is allocated for it.
pub fn tensor_from_npy(bytes: &[u8]) -> Result<Tensor> {
    let find = |haystack: &[u8], needle: &[u8]| {
        haystack
            .windows(needle.len())
            .position(|window| window == needle)
    };
    use ndarray::ArrayD;
    use ndarray_npy::npy::header::Header;
    use ndarray_npy::{ReadNpyError, ReadNpyExt};

    let bad = |what: String| Error::Npy(what);
    // The header's length field comes before the header: check it against the bytes we have
    // (the parser allocates the length it reads).
    const MAGIC: &[u8] = b"\x93NUMPY";
    if bytes.len() < MAGIC.len() + 2 || &bytes[..MAGIC.len()] != MAGIC {
        return Err(bad("no .npy magic string".into()));
    }
    let (len_field, header_len) = match bytes[MAGIC.len()] {
        1 => (
            2,
            bytes
                .get(8..10)
                .map(|b| u16::from_le_bytes([b[0], b[1]]) as usize),
        ),
        2 | 3 => (
            4,
            bytes
                .get(8..12)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize),
        ),
        v => return Err(bad(format!("format version {v} is not supported"))),
    };
    let header_len = header_len.ok_or_else(|| bad("truncated header".into()))?;
    let data_start = 8 + len_field + header_len;
    if data_start > bytes.len() {
        return Err(bad(format!(
            "the header claims {header_len} bytes, the data holds {}",
            bytes.len() - 8 - len_field
        )));
    }
    // A header is a dict holding a tuple (the shape): deeper nesting is no array we read, and
    // the header parser backtracks exponentially in the depth (a 134-byte header of nested
    // braces took seconds).
    let mut depth = 0usize;
    for &b in &bytes[8 + len_field..data_start] {
        match b {
            b'{' | b'(' | b'[' => depth += 1,
            b'}' | b')' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        if depth > 2 {
            return Err(bad(
                "the header nests deeper than a dict holding a tuple".into()
            ));
        }
    }
    let mut reader = bytes;
    let header = Header::from_reader(&mut reader).map_err(|e| bad(e.to_string()))?;
    // Every element takes at least one byte: a shape of more elements than bytes left is
    // wrong whatever its type (and would be allocated before the data is read).
    let count = header
        .shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| bad(format!("shape {:?} overflows", header.shape)))?;
    if count > bytes.len() - data_start {
        return Err(bad(format!(
            "shape {:?} needs more data than the {} bytes present",
            header.shape,
            bytes.len() - data_start
        )));
    }
    // A header naming another type is tried as the next one; any other failure (data shorter
    // than the shape) is reported as it is.
    macro_rules! try_type {
        ($($t:ty),*) => {$(
            match ArrayD::<$t>::read_npy(bytes) {
                Ok(a) => return Ok(Tensor::from(a)),
                Err(ReadNpyError::WrongDescriptor(_)) => {}
                Err(e) => return Err(bad(format!("not a readable .npy file: {e}"))),
            }
        )*};
    }
    try_type!(f32, f64, i64, i32, i16, i8, u8, u16, u32, u64, bool);
    // float16 (`<f2`): the same header read as `<u2` (a descriptor of the same length), the
    // elements taken as half-precision bits.
    let header_bytes = &bytes[8 + len_field..data_start];
    if let Some(at) = find(header_bytes, b"'<f2'") {
        let mut as_bits = bytes.to_vec();
        as_bits[8 + len_field + at..][..5].copy_from_slice(b"'<u2'");
        let bits = ArrayD::<u16>::read_npy(&as_bits[..])
            .map_err(|e| bad(format!("not a readable .npy file: {e}")))?;
        return Ok(Tensor::from(bits.mapv(half::f16::from_bits)));
    }
    Err(bad(format!(
        "element type {} is not supported (or the data does not match the header)",
        header.type_descriptor
    )))
}
