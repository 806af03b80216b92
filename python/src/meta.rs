//! The model's metadata (producer, domain, version, doc strings, `metadata_props`).
//!
//! The engine has no public accessor for these fields, so this module decodes them from the
//! model's bytes itself: only the handful of `ModelProto` / `GraphProto` fields listed below,
//! every other field (nodes, initializers) is skipped by the protobuf decoder unread.

use std::collections::HashMap;

/// `ModelProto`, only the fields `get_modelmeta` reports.
#[derive(Clone, PartialEq, prost::Message)]
struct ModelHeader {
    #[prost(string, tag = "2")]
    producer_name: String,
    #[prost(string, tag = "4")]
    domain: String,
    #[prost(int64, tag = "5")]
    model_version: i64,
    #[prost(string, tag = "6")]
    doc_string: String,
    #[prost(message, optional, tag = "7")]
    graph: Option<GraphHeader>,
    #[prost(message, repeated, tag = "14")]
    metadata_props: Vec<StringPair>,
}

/// `GraphProto`, only its name and doc string.
#[derive(Clone, PartialEq, prost::Message)]
struct GraphHeader {
    #[prost(string, tag = "2")]
    name: String,
    #[prost(string, tag = "10")]
    doc_string: String,
}

/// `StringStringEntryProto`.
#[derive(Clone, PartialEq, prost::Message)]
struct StringPair {
    #[prost(string, tag = "1")]
    key: String,
    #[prost(string, tag = "2")]
    value: String,
}

/// What onnxruntime's `ModelMetadata` holds.
#[derive(Debug, Clone, Default)]
pub struct ModelMeta {
    /// `producer_name`.
    pub producer_name: String,
    /// The graph's name.
    pub graph_name: String,
    /// `domain`.
    pub domain: String,
    /// The model's doc string.
    pub description: String,
    /// The graph's doc string.
    pub graph_description: String,
    /// `model_version`.
    pub version: i64,
    /// `metadata_props`.
    pub custom_metadata_map: HashMap<String, String>,
}

/// Decodes the metadata of a serialized `ModelProto`.
pub fn decode(bytes: &[u8]) -> Result<ModelMeta, prost::DecodeError> {
    use prost::Message;
    let header = ModelHeader::decode(bytes)?;
    let graph = header.graph.unwrap_or_default();
    Ok(ModelMeta {
        producer_name: header.producer_name,
        graph_name: graph.name,
        domain: header.domain,
        description: header.doc_string,
        graph_description: graph.doc_string,
        version: header.model_version,
        custom_metadata_map: header
            .metadata_props
            .into_iter()
            .map(|p| (p.key, p.value))
            .collect(),
    })
}
