//! An operator schema as `onnx.defs` states it, and the lookup of the version a node uses.

use spillway_kernels::AttrValue;

/// An attribute's type in an operator's schema (the kinds `ai.onnx`'s schemas use).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AttrKind {
    Float,
    Int,
    String,
    Tensor,
    Graph,
    Floats,
    Ints,
    Strings,
    SparseTensor,
    TypeProto,
}

impl AttrKind {
    /// Whether `value` (an attribute as loaded) has this type. Graph- and type-valued
    /// attributes are held apart from the others and checked by name only.
    pub(super) fn admits(self, value: &AttrValue) -> bool {
        matches!(
            (self, value),
            (AttrKind::Float, AttrValue::Float(_))
                | (AttrKind::Int, AttrValue::Int(_))
                | (AttrKind::String, AttrValue::String(_))
                | (AttrKind::Tensor, AttrValue::Tensor(_))
                | (AttrKind::Floats, AttrValue::Floats(_))
                | (AttrKind::Ints, AttrValue::Ints(_))
                | (AttrKind::Strings, AttrValue::Strings(_))
        )
    }
}

/// One version of an `ai.onnx` operator: what a node of it may list.
#[derive(Debug)]
pub(super) struct Schema {
    /// The op type.
    pub op: &'static str,
    /// The opset version that introduced this version of the operator.
    pub since: i64,
    /// The least and the most inputs a node lists.
    pub inputs: (u32, u32),
    /// The least and the most outputs a node lists.
    pub outputs: (u32, u32),
    /// Per formal input: `R` required, `O` optional, `V` variadic (the last one).
    pub formal: &'static str,
    /// Each attribute: name, type, whether it is required.
    pub attrs: &'static [(&'static str, AttrKind, bool)],
}

impl Schema {
    /// The version of `op` a model importing `opset` uses: the latest introduced at or before
    /// it. `None` when the operator is not in `ai.onnx`, or came after `opset`.
    pub(super) fn find(op: &str, opset: i64) -> Option<&'static Schema> {
        let all = super::schemas::SCHEMAS;
        let first = all.partition_point(|s| s.op < op);
        all[first..]
            .iter()
            .take_while(|s| s.op == op)
            .filter(|s| s.since <= opset)
            .last()
    }

    /// Whether any version of `op` exists in `ai.onnx`.
    pub(super) fn exists(op: &str) -> bool {
        let all = super::schemas::SCHEMAS;
        all.get(all.partition_point(|s| s.op < op))
            .is_some_and(|s| s.op == op)
    }

    /// Whether formal input `index` must be given (not optional, not past a variadic's
    /// least count).
    pub(super) fn requires_input(&self, index: usize) -> bool {
        match self.formal.as_bytes().get(index) {
            Some(b'R') => true,
            Some(b'V') => index < self.inputs.0 as usize,
            Some(_) => false,
            // Past the formal list: more of a variadic.
            None => false,
        }
    }
}
