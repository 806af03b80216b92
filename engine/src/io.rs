//! Getting tensors into and out of a session.

use ndarray::{ArrayBase, Dimension, OwnedRepr, ViewRepr};
use spillway_kernels::{Element, Tensor};

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
#[derive(Debug, Clone)]
pub struct SessionOutputs {
    names: Vec<String>,
    tensors: Vec<Tensor>,
}

impl SessionOutputs {
    pub(crate) fn new(names: Vec<String>, tensors: Vec<Tensor>) -> Self {
        SessionOutputs { names, tensors }
    }

    /// The output called `name`.
    pub fn get(&self, name: &str) -> Option<&Tensor> {
        self.names
            .iter()
            .position(|n| n == name)
            .map(|i| &self.tensors[i])
    }

    /// How many outputs.
    pub fn len(&self) -> usize {
        self.tensors.len()
    }

    /// True when the model has no outputs.
    pub fn is_empty(&self) -> bool {
        self.tensors.is_empty()
    }

    /// `(name, tensor)` pairs in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Tensor)> {
        self.names.iter().map(String::as_str).zip(&self.tensors)
    }

    /// The tensors, in order.
    pub fn into_tensors(self) -> Vec<Tensor> {
        self.tensors
    }
}

impl std::ops::Index<usize> for SessionOutputs {
    type Output = Tensor;
    fn index(&self, i: usize) -> &Tensor {
        &self.tensors[i]
    }
}

impl std::ops::Index<&str> for SessionOutputs {
    type Output = Tensor;
    fn index(&self, name: &str) -> &Tensor {
        self.get(name)
            .unwrap_or_else(|| panic!("no output named '{name}'"))
    }
}
