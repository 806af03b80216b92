//! `AttributeProto` → [`AttrValue`].

use std::path::Path;

use spillway_kernels::{AttrValue, Attributes};

use super::proto::AttributeProto;
use super::proto::attribute_proto::AttributeType;
use super::tensor::decode_tensor;
use crate::error::{Error, Result};

fn utf8(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Converts a node's attributes. Graph-, sparse- and type-valued attributes are rejected
/// with an error naming the node: no supported operator uses them.
pub fn convert_attributes(
    node: &str,
    protos: &[AttributeProto],
    base_dir: Option<&Path>,
) -> Result<Attributes> {
    let mut attrs = Attributes::new();
    for a in protos {
        let name = a.name();
        if a.ref_attr_name.is_some() {
            return Err(Error::InvalidModel(format!(
                "node '{node}': attribute '{name}' refers to a function attribute outside a function"
            )));
        }
        let kind = a
            .r#type
            .map(|_| a.r#type())
            .unwrap_or_else(|| infer_kind(a));
        let value = match kind {
            AttributeType::Float => AttrValue::Float(a.f()),
            AttributeType::Int => AttrValue::Int(a.i()),
            AttributeType::String => AttrValue::String(utf8(a.s())),
            AttributeType::Tensor => {
                let t = a.t.as_ref().ok_or_else(|| {
                    Error::InvalidModel(format!(
                        "node '{node}': tensor attribute '{name}' has no tensor"
                    ))
                })?;
                AttrValue::Tensor(decode_tensor(t, base_dir)?)
            }
            AttributeType::Floats => AttrValue::Floats(a.floats.clone()),
            AttributeType::Ints => AttrValue::Ints(a.ints.clone()),
            AttributeType::Strings => {
                AttrValue::Strings(a.strings.iter().map(|s| utf8(s)).collect())
            }
            other => {
                return Err(Error::InvalidModel(format!(
                    "node '{node}': attribute '{name}' of type {} is not supported",
                    other.as_str_name()
                )));
            }
        };
        attrs.insert(name, value);
    }
    Ok(attrs)
}

/// Old models (IR < 4) may omit the attribute type: infer it from which field is set.
fn infer_kind(a: &AttributeProto) -> AttributeType {
    if a.f.is_some() {
        AttributeType::Float
    } else if a.i.is_some() {
        AttributeType::Int
    } else if a.s.is_some() {
        AttributeType::String
    } else if a.t.is_some() {
        AttributeType::Tensor
    } else if a.g.is_some() {
        AttributeType::Graph
    } else if !a.floats.is_empty() {
        AttributeType::Floats
    } else if !a.ints.is_empty() {
        AttributeType::Ints
    } else if !a.strings.is_empty() {
        AttributeType::Strings
    } else {
        AttributeType::Undefined
    }
}
