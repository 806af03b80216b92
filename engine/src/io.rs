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
