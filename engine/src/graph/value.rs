//! What the graph knows about a value before running: name, element type and shape.

use spillway_kernels::DType;

/// One dimension of a shape known before running.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Dim {
    /// A fixed size.
    Fixed(usize),
    /// A named size, bound by the inputs at run time (`batch`, `N`, …).
    Symbol(String),
    /// Nothing is known.
    Unknown,
}

impl Dim {
    /// The size, if fixed.
    pub fn fixed(&self) -> Option<usize> {
        match self {
            Dim::Fixed(n) => Some(*n),
            _ => None,
        }
    }
}

impl std::fmt::Display for Dim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Dim::Fixed(n) => write!(f, "{n}"),
            Dim::Symbol(s) => f.write_str(s),
            Dim::Unknown => f.write_str("?"),
        }
    }
}

/// Formats a shape as `[1, batch, ?]`.
pub fn shape_to_string(shape: &[Dim]) -> String {
    let dims: Vec<String> = shape.iter().map(Dim::to_string).collect();
    format!("[{}]", dims.join(", "))
}

/// A value of the graph.
#[derive(Debug, Clone, PartialEq)]
pub struct ValueInfo {
    /// The name in the model file.
    pub name: String,
    /// Element type, when known.
    pub dtype: Option<DType>,
    /// Shape, when the rank is known.
    pub shape: Option<Vec<Dim>>,
}

impl ValueInfo {
    /// A value with nothing known but its name.
    pub fn named(name: impl Into<String>) -> Self {
        ValueInfo {
            name: name.into(),
            dtype: None,
            shape: None,
        }
    }

    /// The shape, if every dimension is fixed.
    pub fn fixed_shape(&self) -> Option<Vec<usize>> {
        self.shape.as_ref()?.iter().map(Dim::fixed).collect()
    }
}
