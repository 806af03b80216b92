//! What a model says about itself: producer, version, doc strings, `metadata_props`
//! (ONNX Runtime's `ModelMetadata`).

use std::collections::BTreeMap;

/// A model's metadata, as its `ModelProto` gives it (empty strings and zero where absent).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ModelMetadata {
    /// `producer_name`: the tool that wrote the model.
    pub producer_name: String,
    /// `producer_version`.
    pub producer_version: String,
    /// `domain`: the model's namespace.
    pub domain: String,
    /// `model_version`.
    pub model_version: i64,
    /// The model's `doc_string`.
    pub description: String,
    /// The main graph's name.
    pub graph_name: String,
    /// The main graph's `doc_string`.
    pub graph_description: String,
    /// `metadata_props`: the model's custom key–value pairs.
    pub custom: BTreeMap<String, String>,
}
