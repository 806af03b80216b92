//! `ModelProto` → [`Graph`].

use std::collections::{HashMap, HashSet};
use std::path::Path;

use bytes::Bytes;
use prost::Message;
use spillway_kernels::DType;

use super::attributes::convert_attributes;
use super::proto::{self, GraphProto, ModelProto, ValueInfoProto};
use super::tensor::decode_tensor;
use crate::error::{Error, Result};
use crate::graph::{Dim, Graph, Node, Subgraph, ValueId, ValueInfo, ValueKind, ValueType};

/// The newest default-domain opset this engine knows (onnx 1.22).
pub const MAX_OPSET: i64 = 27;

/// Loads a model file. The file is memory-mapped and decoded without copying its `bytes`
/// fields; external data files are resolved relative to the model's folder.
pub fn load_file(path: &Path) -> Result<Graph> {
    let io = |cause| Error::Io {
        path: path.display().to_string(),
        cause,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(Error::InvalidModel(format!(
            "{} is not a file (a directory or a device): give the path of a .onnx file",
            path.display()
        )));
    }
    if meta.len() == 0 {
        return Err(Error::InvalidModel(format!(
            "{} is empty (0 bytes): not an ONNX model",
            path.display()
        )));
    }
    // SAFETY: the map is read-only; if another process truncates the file while we decode,
    // reads may fault (SIGBUS) — the same caveat every mmap-based loader (ORT, tract) accepts.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io)?;
    let dir = path.parent().unwrap_or(Path::new("."));
    load_bytes(Bytes::from_owner(map), Some(dir))
}

/// Loads a model from bytes. `base_dir` resolves external data; `None` forbids it.
pub fn load_bytes(bytes: Bytes, base_dir: Option<&Path>) -> Result<Graph> {
    if bytes.is_empty() {
        return Err(Error::InvalidModel("the model is empty (0 bytes)".into()));
    }
    let model = ModelProto::decode(bytes).map_err(|e| Error::Decode(e.to_string()))?;
    let graph = model
        .graph
        .as_ref()
        .ok_or_else(|| Error::InvalidModel("the model has no graph".into()))?;
    let ctx = Context {
        default_opset: default_opset(&model)?,
        model: &model,
        base_dir,
    };
    let mut no_outer = |_: &str| None;
    let (mut built, _) = Builder::new(&ctx, graph, &mut no_outer).build(graph)?;
    built.metadata = metadata(&model, graph);
    Ok(built)
}

/// The metadata of `model`, whose main graph is `graph`.
fn metadata(model: &ModelProto, graph: &GraphProto) -> crate::ModelMetadata {
    let text = |s: &Option<String>| s.clone().unwrap_or_default();
    crate::ModelMetadata {
        producer_name: text(&model.producer_name),
        producer_version: text(&model.producer_version),
        domain: text(&model.domain),
        model_version: model.model_version.unwrap_or(0),
        description: text(&model.doc_string),
        graph_name: text(&graph.name),
        graph_description: text(&graph.doc_string),
        custom: model
            .metadata_props
            .iter()
            .map(|p| (text(&p.key), text(&p.value)))
            .collect(),
    }
}

fn default_opset(model: &ModelProto) -> Result<i64> {
    let found = model
        .opset_import
        .iter()
        .find(|o| matches!(o.domain(), "" | "ai.onnx"))
        .map(|o| o.version());
    match found {
        Some(v) if (1..=MAX_OPSET).contains(&v) => Ok(v),
        Some(v) => Err(Error::InvalidModel(format!(
            "the model imports opset {v} of the default domain; supported: 1 to {MAX_OPSET}"
        ))),
        // IR version 1 and 2 models had no opset_import and mean opset 1.
        None if model.ir_version() <= 2 && model.ir_version() > 0 => Ok(1),
        None => Err(Error::InvalidModel(
            "the model imports no default-domain opset".into(),
        )),
    }
}

/// What every scope of one model shares.
struct Context<'m> {
    default_opset: i64,
    model: &'m ModelProto,
    base_dir: Option<&'m Path>,
}

impl Context<'_> {
    fn opset(&self, domain: &str) -> i64 {
        if matches!(domain, "" | "ai.onnx") {
            return self.default_opset;
        }
        self.model
            .opset_import
            .iter()
            .find(|o| o.domain() == domain)
            .map(|o| o.version())
            .unwrap_or(0)
    }
}

/// Resolves a name in the enclosing scopes, returning the id in the immediately enclosing one.
type Outer<'o> = dyn FnMut(&str) -> Option<ValueId> + 'o;

/// Builds one graph scope (the main graph or a subgraph).
struct Builder<'c, 'o> {
    ctx: &'c Context<'c>,
    graph: Graph,
    names: HashMap<String, ValueId>,
    /// Names used as inputs before the node defining them (the model is not sorted).
    forward: HashSet<ValueId>,
    /// Every name this scope defines (inputs, initializers, node outputs).
    local: HashSet<String>,
    /// `(local value, value in the enclosing scope)` for each captured name.
    captures: Vec<(ValueId, ValueId)>,
    outer: &'o mut Outer<'o>,
}

impl<'c, 'o> Builder<'c, 'o> {
    fn new(ctx: &'c Context<'c>, g: &proto::GraphProto, outer: &'o mut Outer<'o>) -> Self {
        let local = g
            .input
            .iter()
            .map(|v| v.name().to_string())
            .chain(g.initializer.iter().map(|t| t.name().to_string()))
            .chain(g.node.iter().flat_map(|n| n.output.iter().cloned()))
            .collect();
        Builder {
            ctx,
            graph: Graph::default(),
            names: HashMap::new(),
            forward: HashSet::new(),
            local,
            captures: Vec::new(),
            outer,
        }
    }

    /// Builds the scope; returns the graph and its captures of enclosing-scope values.
    fn build(mut self, g: &proto::GraphProto) -> Result<(Graph, Vec<(ValueId, ValueId)>)> {
        let base_dir = self.ctx.base_dir;
        for init in &g.initializer {
            let tensor = decode_tensor(init, base_dir)?;
            let info = ValueInfo {
                name: init.name().to_string(),
                dtype: Some(tensor.dtype()),
                shape: Some(tensor.shape().iter().map(|&d| Dim::Fixed(d)).collect()),
                kind: ValueKind::Tensor,
            };
            let id = self.define(info)?;
            self.graph.constants.insert(id, tensor);
        }
        if !g.sparse_initializer.is_empty() {
            return Err(Error::InvalidModel(
                "sparse initializers are not supported".into(),
            ));
        }
        for input in &g.input {
            // Older exporters list initializers among the inputs too; those stay constants.
            if let Some(&id) = self.names.get(input.name())
                && self.graph.constants.contains_key(&id)
            {
                continue;
            }
            let id = self.define(value_info(input)?)?;
            self.graph.inputs.push(id);
        }
        for (index, n) in g.node.iter().enumerate() {
            self.add_node(index, n)?;
        }
        for out in &g.output {
            let id = self.resolve(out.name());
            self.merge_info(id, out)?;
            self.graph.outputs.push(id);
        }
        for vi in &g.value_info {
            if let Some(&id) = self.names.get(vi.name()) {
                self.merge_info(id, vi)?;
            }
        }
        // A name read (by a node or as an output) that nothing defines: no input,
        // initializer, node output or enclosing-scope value.
        if let Some(&id) = self.forward.iter().min_by_key(|id| id.index()) {
            return Err(Error::InvalidModel(format!(
                "value '{}' is used but never defined",
                self.graph.values[id.index()].name
            )));
        }
        let mut graph = self.graph;
        graph
            .inputs
            .extend(self.captures.iter().map(|(local, _)| *local));
        graph.sort_topologically()?;
        Ok((graph, self.captures))
    }

    fn add_node(&mut self, index: usize, n: &proto::NodeProto) -> Result<()> {
        let name = if n.name().is_empty() {
            format!("{}#{index}", n.op_type())
        } else {
            n.name().to_string()
        };
        let (graph_attrs, plain): (Vec<_>, Vec<_>) =
            n.attribute.iter().cloned().partition(|a| a.g.is_some());
        let (type_attrs, plain): (Vec<_>, Vec<_>) = plain.into_iter().partition(|a| a.tp.is_some());
        let type_attrs = type_attrs
            .iter()
            .map(|a| {
                let tp = a.tp.as_ref().expect("partitioned on tp");
                Ok((a.name().to_string(), value_type(&name, tp)?))
            })
            .collect::<Result<Vec<_>>>()?;
        let attrs = convert_attributes(&name, &plain, self.ctx.base_dir)?;
        let mut inputs: Vec<Option<ValueId>> = n
            .input
            .iter()
            .map(|s| {
                if s.is_empty() {
                    None
                } else {
                    Some(self.resolve(s))
                }
            })
            .collect();
        let declared_inputs = inputs.len();
        let mut subgraphs = Vec::new();
        for a in &graph_attrs {
            let body = a.g.as_ref().expect("partitioned on g");
            let ctx = self.ctx;
            let (graph, captures) = {
                let mut outer = |name: &str| Some(self.resolve(name));
                Builder::new(ctx, body, &mut outer).build(body)?
            };
            let mut capture_positions = Vec::with_capacity(captures.len());
            for (_, outer_id) in &captures {
                let pos = match inputs[declared_inputs..]
                    .iter()
                    .position(|v| *v == Some(*outer_id))
                {
                    Some(p) => declared_inputs + p,
                    None => {
                        inputs.push(Some(*outer_id));
                        inputs.len() - 1
                    }
                };
                capture_positions.push(pos);
            }
            let formal_inputs = graph.inputs.len() - captures.len();
            subgraphs.push(Subgraph {
                attr: a.name().to_string(),
                graph,
                formal_inputs,
                capture_positions,
            });
        }
        let outputs = n
            .output
            .iter()
            .map(|s| {
                if s.is_empty() {
                    Ok(None)
                } else {
                    self.define(ValueInfo::named(s.as_str())).map(Some)
                }
            })
            .collect::<Result<Vec<_>>>()?;
        self.graph.nodes.push(Node {
            name,
            op_type: n.op_type().to_string(),
            domain: n.domain().to_string(),
            opset: self.ctx.opset(n.domain()),
            attrs,
            inputs,
            declared_inputs,
            outputs,
            subgraphs,
            type_attrs,
        });
        Ok(())
    }

    /// Defines a new value; a name defined twice is an invalid model (SSA).
    fn define(&mut self, info: ValueInfo) -> Result<ValueId> {
        if let Some(&id) = self.names.get(&info.name) {
            if self.forward.remove(&id) {
                self.graph.values[id.index()] = info;
                return Ok(id);
            }
            return Err(Error::InvalidModel(format!(
                "value '{}' is defined more than once",
                info.name
            )));
        }
        let name = info.name.clone();
        let id = self.graph.add_value(info);
        self.names.insert(name, id);
        Ok(id)
    }

    /// Resolves a name read in this scope: a local value (possibly defined later: the model
    /// need not be sorted), else a capture from an enclosing scope. A name nothing defines
    /// gets an id that the topological sort reports as dangling.
    fn resolve(&mut self, name: &str) -> ValueId {
        if let Some(&id) = self.names.get(name) {
            return id;
        }
        if !self.local.contains(name)
            && let Some(outer_id) = (self.outer)(name)
        {
            let id = self.graph.add_value(ValueInfo::named(name));
            self.names.insert(name.to_string(), id);
            self.captures.push((id, outer_id));
            return id;
        }
        let id = self.graph.add_value(ValueInfo::named(name));
        self.names.insert(name.to_string(), id);
        self.forward.insert(id);
        id
    }

    fn merge_info(&mut self, id: ValueId, proto: &ValueInfoProto) -> Result<()> {
        let parsed = value_info(proto)?;
        let slot = &mut self.graph.values[id.index()];
        if slot.kind.is_tensor() && !parsed.kind.is_tensor() {
            slot.kind = parsed.kind;
            slot.dtype = None;
            slot.shape = None;
            return Ok(());
        }
        if !slot.kind.is_tensor() || !parsed.kind.is_tensor() {
            return Ok(());
        }
        if slot.dtype.is_none() {
            slot.dtype = parsed.dtype;
        }
        if slot.shape.is_none() {
            slot.shape = parsed.shape;
        }
        Ok(())
    }
}

/// Reads a declared value: tensor, sequence or optional types. Map and sparse types are
/// rejected.
fn value_info(p: &ValueInfoProto) -> Result<ValueInfo> {
    match p.r#type.as_ref() {
        None => Ok(ValueInfo::named(p.name())),
        Some(t) => Ok(ValueInfo::typed(p.name(), value_type(p.name(), t)?)),
    }
}

/// `TypeProto` → [`ValueType`]; `name` is the value's, for errors.
pub(crate) fn value_type(name: &str, t: &proto::TypeProto) -> Result<ValueType> {
    use proto::type_proto::Value;
    let elem = |e: Option<&proto::TypeProto>| match e {
        Some(e) => value_type(name, e),
        None => Ok(ValueType::any_tensor()),
    };
    match t.value.as_ref() {
        None => Ok(ValueType::any_tensor()),
        Some(Value::TensorType(t)) => tensor_type(name, t),
        Some(Value::SequenceType(s)) => {
            let e = elem(s.elem_type.as_deref())?;
            if !matches!(e, ValueType::Tensor { .. }) {
                return Err(Error::InvalidModel(format!(
                    "value '{name}' is a sequence of {e}: only sequences of tensors are supported"
                )));
            }
            Ok(ValueType::Sequence(Box::new(e)))
        }
        Some(Value::OptionalType(o)) => {
            let e = elem(o.elem_type.as_deref())?;
            if matches!(e, ValueType::Optional(_)) {
                return Err(Error::InvalidModel(format!(
                    "value '{name}' is an optional of an optional, which ONNX does not allow"
                )));
            }
            Ok(ValueType::Optional(Box::new(e)))
        }
        Some(_) => Err(Error::InvalidModel(format!(
            "value '{name}' is a map or sparse tensor (not supported; tensors, sequences of \
             tensors and optionals are)"
        ))),
    }
}

fn tensor_type(name: &str, t: &proto::type_proto::Tensor) -> Result<ValueType> {
    let dtype = match t.elem_type {
        // 0 is UNDEFINED: an element type left open.
        Some(code) if code != 0 => Some(DType::from_onnx(code).ok_or_else(|| {
            Error::InvalidModel(format!(
                "value '{name}': element type code {code} is not supported"
            ))
        })?),
        _ => None,
    };
    let shape = t.shape.as_ref().map(|shape| {
        use proto::tensor_shape_proto::dimension::Value as D;
        shape
            .dim
            .iter()
            .map(|d| match &d.value {
                // Exporters write a dynamic dim as `dim_value` -1 (Paddle) or 0, or leave it
                // empty: all three are dynamic, as ONNX Runtime takes them. Paddle's exporter
                // also names every unknown dim `?`: not one symbol (equal sizes), but unknowns.
                Some(D::DimValue(v)) if *v > 0 => Dim::Fixed(*v as usize),
                Some(D::DimParam(s)) if !s.is_empty() && s != "?" => Dim::Symbol(s.clone()),
                _ => Dim::Unknown,
            })
            .collect()
    });
    Ok(ValueType::Tensor { dtype, shape })
}
