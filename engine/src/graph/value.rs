//! What the graph knows about a value before running: name, kind (tensor, sequence,
//! optional), element type and shape.

use super::ValueId;
use spillway_kernels::DType;

/// One dimension of a shape known before running.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Dim {
    /// A fixed size.
    Fixed(usize),
    /// A named size: one of the inputs' (`batch`, `N`, …), bound when they arrive, or one that
    /// shape inference derives and cannot compute before running ([`Dim::derived`]), named
    /// so that sizes it proves equal show as equal.
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

/// How the name of a derived symbol begins (no input's dim name does in practice).
const DERIVED: char = '?';

impl Dim {
    /// The size of axis `axis` of value `id` (named `name`), not known before running: a
    /// symbol that the dims proven equal to it share. Both the id and the name are in it, so
    /// that two values never share one, even where names repeat or a graph is rebuilt with
    /// other ids.
    pub fn derived(id: ValueId, name: &str, axis: usize) -> Dim {
        Dim::Symbol(format!("{DERIVED}{name}#{}:{axis}", id.index()))
    }

    /// True for a symbol that shape inference derived ([`Dim::derived`]).
    pub fn is_derived(&self) -> bool {
        matches!(self, Dim::Symbol(s) if s.starts_with(DERIVED))
    }
}

impl std::fmt::Display for Dim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Dim::Fixed(n) => write!(f, "{n}"),
            Dim::Symbol(_) if self.is_derived() => f.write_str("?"),
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

/// The ONNX type of a value, as the model declares it (`TypeProto`).
#[derive(Debug, Clone, PartialEq)]
pub enum ValueType {
    /// `tensor(T)`: element type and shape when known.
    Tensor {
        /// Element type.
        dtype: Option<DType>,
        /// Shape, when the rank is known.
        shape: Option<Vec<Dim>>,
    },
    /// `seq(T)`.
    Sequence(Box<ValueType>),
    /// `optional(T)`.
    Optional(Box<ValueType>),
}

impl ValueType {
    /// A tensor of unknown element type and shape.
    pub fn any_tensor() -> Self {
        ValueType::Tensor {
            dtype: None,
            shape: None,
        }
    }
}

impl std::fmt::Display for ValueType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ValueType::Tensor { dtype: Some(d), .. } => write!(f, "tensor({d})"),
            ValueType::Tensor { dtype: None, .. } => f.write_str("tensor"),
            ValueType::Sequence(e) => write!(f, "seq({e})"),
            ValueType::Optional(e) => write!(f, "optional({e})"),
        }
    }
}

/// What kind of value a graph value is. For a tensor, [`ValueInfo::dtype`] and
/// [`ValueInfo::shape`] describe it; for a sequence or an optional they are `None` and the
/// element's type is here.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum ValueKind {
    /// A tensor (the default: every value the model does not declare otherwise).
    #[default]
    Tensor,
    /// A sequence whose elements have this type.
    Sequence(Box<ValueType>),
    /// An optional whose element has this type.
    Optional(Box<ValueType>),
}

impl ValueKind {
    /// True for a tensor.
    pub fn is_tensor(&self) -> bool {
        matches!(self, ValueKind::Tensor)
    }
}

/// The largest tensor the memory planners place ahead of a run (256 TiB: sums and offsets
/// of a graph's buffers stay far from overflowing).
pub const PLANNABLE_BYTES: usize = 1 << 48;

/// A value of the graph.
#[derive(Debug, Clone, PartialEq)]
pub struct ValueInfo {
    /// The name in the model file.
    pub name: String,
    /// Element type, when known (tensors only).
    pub dtype: Option<DType>,
    /// Shape, when the rank is known (tensors only).
    pub shape: Option<Vec<Dim>>,
    /// Tensor, sequence or optional.
    pub kind: ValueKind,
}

impl ValueInfo {
    /// A value with nothing known but its name.
    pub fn named(name: impl Into<String>) -> Self {
        ValueInfo {
            name: name.into(),
            dtype: None,
            shape: None,
            kind: ValueKind::Tensor,
        }
    }

    /// A value of the declared ONNX type.
    pub fn typed(name: impl Into<String>, ty: ValueType) -> Self {
        let mut info = ValueInfo::named(name);
        match ty {
            ValueType::Tensor { dtype, shape } => {
                info.dtype = dtype;
                info.shape = shape;
            }
            ValueType::Sequence(e) => info.kind = ValueKind::Sequence(e),
            ValueType::Optional(e) => info.kind = ValueKind::Optional(e),
        }
        info
    }

    /// The value's full ONNX type.
    pub fn value_type(&self) -> ValueType {
        match &self.kind {
            ValueKind::Tensor => ValueType::Tensor {
                dtype: self.dtype,
                shape: self.shape.clone(),
            },
            ValueKind::Sequence(e) => ValueType::Sequence(e.clone()),
            ValueKind::Optional(e) => ValueType::Optional(e.clone()),
        }
    }

    /// The shape, if every dimension is fixed.
    pub fn fixed_shape(&self) -> Option<Vec<usize>> {
        self.shape.as_ref()?.iter().map(Dim::fixed).collect()
    }

    /// The bytes of a tensor of fixed shape and known element type, when no larger than
    /// `PLANNABLE_BYTES` (2^48) (a model may declare any size; larger ones are left to run time,
    /// where allocating them fails with a resource error).
    pub fn fixed_bytes(&self) -> Option<usize> {
        let elements = self
            .fixed_shape()?
            .iter()
            .try_fold(1usize, |n, &d| n.checked_mul(d))?;
        let bytes = elements.checked_mul(self.dtype?.size_of())?;
        (bytes <= PLANNABLE_BYTES).then_some(bytes)
    }
}
