//! A small builder for ONNX models in Rust (prost types), so tests make their own models
//! without Python.

use prost::Message;
use spillway::onnx::proto::{
    self, AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto,
    TypeProto, ValueInfoProto,
};

/// An attribute value for [`ModelBuilder::node`].
#[derive(Debug, Clone)]
pub enum Attr {
    /// An int.
    Int(i64),
    /// A float.
    Float(f32),
    /// Ints.
    Ints(Vec<i64>),
    /// Floats.
    Floats(Vec<f32>),
    /// A string.
    Str(&'static str),
    /// Strings.
    Strs(Vec<&'static str>),
}

/// Accumulates a graph and serializes it as a model.
#[derive(Default)]
pub struct ModelBuilder {
    graph: GraphProto,
    seed: u64,
}

fn value_info(name: &str, elem_type: i32, dims: &[i64]) -> ValueInfoProto {
    use proto::tensor_shape_proto::{Dimension, dimension::Value};
    let shape = proto::TensorShapeProto {
        dim: dims
            .iter()
            .map(|&d| Dimension {
                value: Some(if d < 0 {
                    Value::DimParam("N".into())
                } else {
                    Value::DimValue(d)
                }),
                ..Default::default()
            })
            .collect(),
    };
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(proto::type_proto::Value::TensorType(
                proto::type_proto::Tensor {
                    elem_type: Some(elem_type),
                    shape: Some(shape),
                },
            )),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// `tensor(elem_type)` of unknown shape.
pub fn tensor_type(elem_type: i32) -> TypeProto {
    TypeProto {
        value: Some(proto::type_proto::Value::TensorType(
            proto::type_proto::Tensor {
                elem_type: Some(elem_type),
                shape: None,
            },
        )),
        ..Default::default()
    }
}

/// `seq(elem)`.
pub fn sequence_type(elem: TypeProto) -> TypeProto {
    TypeProto {
        value: Some(proto::type_proto::Value::SequenceType(Box::new(
            proto::type_proto::Sequence {
                elem_type: Some(Box::new(elem)),
            },
        ))),
        ..Default::default()
    }
}

/// `optional(elem)`.
pub fn optional_type(elem: TypeProto) -> TypeProto {
    TypeProto {
        value: Some(proto::type_proto::Value::OptionalType(Box::new(
            proto::type_proto::Optional {
                elem_type: Some(Box::new(elem)),
            },
        ))),
        ..Default::default()
    }
}

fn typed_value_info(name: &str, ty: TypeProto) -> ValueInfoProto {
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(ty),
        ..Default::default()
    }
}

impl ModelBuilder {
    /// An input of any ONNX type (sequences, optionals: see [`sequence_type`]).
    pub fn input_of_type(&mut self, name: &str, ty: TypeProto) -> &mut Self {
        self.graph.input.push(typed_value_info(name, ty));
        self
    }

    /// An output of any ONNX type.
    pub fn output_of_type(&mut self, name: &str, ty: TypeProto) -> &mut Self {
        self.graph.output.push(typed_value_info(name, ty));
        self
    }

    /// Sets a type-valued attribute (`Optional`'s `type`) on the last node.
    pub fn type_attr(&mut self, name: &str, ty: TypeProto) -> &mut Self {
        if let Some(node) = self.graph.node.last_mut() {
            let mut p = AttributeProto {
                name: Some(name.into()),
                tp: Some(ty),
                ..Default::default()
            };
            p.set_type(proto::attribute_proto::AttributeType::TypeProto);
            node.attribute.push(p);
        }
        self
    }

    /// An empty model whose random weights come from `seed`.
    pub fn new(seed: u64) -> Self {
        ModelBuilder {
            graph: GraphProto {
                name: Some("test".into()),
                ..Default::default()
            },
            seed: seed | 1,
        }
    }

    fn next(&mut self) -> f32 {
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        ((self.seed >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    /// A float input; a negative dim is the symbolic batch `N`.
    pub fn input(&mut self, name: &str, dims: &[i64]) -> &mut Self {
        self.graph.input.push(value_info(name, 1, dims));
        self
    }

    /// A float output of unspecified shape.
    pub fn output(&mut self, name: &str) -> &mut Self {
        self.graph.output.push(ValueInfoProto {
            name: Some(name.into()),
            ..Default::default()
        });
        self
    }

    /// A random float initializer scaled by `scale`.
    pub fn weight(&mut self, name: &str, dims: &[i64], scale: f32) -> &mut Self {
        let n: i64 = dims.iter().product();
        let data: Vec<f32> = (0..n).map(|_| self.next() * scale).collect();
        self.graph.initializer.push(TensorProto {
            name: Some(name.into()),
            dims: dims.to_vec(),
            data_type: Some(1),
            float_data: data,
            ..Default::default()
        });
        self
    }

    /// A positive random float initializer in [lo, hi] (variances, scales).
    pub fn positive(&mut self, name: &str, dims: &[i64], lo: f32, hi: f32) -> &mut Self {
        let n: i64 = dims.iter().product();
        let data: Vec<f32> = (0..n)
            .map(|_| lo + (self.next() + 1.0) * 0.5 * (hi - lo))
            .collect();
        self.graph.initializer.push(TensorProto {
            name: Some(name.into()),
            dims: dims.to_vec(),
            data_type: Some(1),
            float_data: data,
            ..Default::default()
        });
        self
    }

    /// A float initializer with the given values.
    pub fn floats(&mut self, name: &str, dims: &[i64], values: &[f32]) -> &mut Self {
        self.graph.initializer.push(TensorProto {
            name: Some(name.into()),
            dims: dims.to_vec(),
            data_type: Some(1),
            float_data: values.to_vec(),
            ..Default::default()
        });
        self
    }

    /// A scalar integer initializer: int32 (`elem_type` 6) or int64 (7).
    pub fn scalar_int(&mut self, name: &str, value: i64, elem_type: i32) -> &mut Self {
        let mut t = TensorProto {
            name: Some(name.into()),
            dims: Vec::new(),
            data_type: Some(elem_type),
            ..Default::default()
        };
        match elem_type {
            6 => t.int32_data = vec![value as i32],
            _ => t.int64_data = vec![value],
        }
        self.graph.initializer.push(t);
        self
    }

    /// A scalar float initializer.
    pub fn scalar_float(&mut self, name: &str, value: f32) -> &mut Self {
        self.graph.initializer.push(TensorProto {
            name: Some(name.into()),
            dims: Vec::new(),
            data_type: Some(1),
            float_data: vec![value],
            ..Default::default()
        });
        self
    }

    /// A uint8 initializer with the given values.
    pub fn bytes(&mut self, name: &str, dims: &[i64], values: &[u8]) -> &mut Self {
        self.graph.initializer.push(TensorProto {
            name: Some(name.into()),
            dims: dims.to_vec(),
            data_type: Some(2),
            raw_data: Some(values.to_vec().into()),
            ..Default::default()
        });
        self
    }

    /// An int32 1-D initializer.
    pub fn int32s(&mut self, name: &str, values: &[i32]) -> &mut Self {
        self.graph.initializer.push(TensorProto {
            name: Some(name.into()),
            dims: vec![values.len() as i64],
            data_type: Some(6),
            int32_data: values.to_vec(),
            ..Default::default()
        });
        self
    }

    /// An int64 1-D initializer.
    pub fn ints(&mut self, name: &str, values: &[i64]) -> &mut Self {
        self.graph.initializer.push(TensorProto {
            name: Some(name.into()),
            dims: vec![values.len() as i64],
            data_type: Some(7),
            int64_data: values.to_vec(),
            ..Default::default()
        });
        self
    }

    /// A node.
    pub fn node(
        &mut self,
        op: &str,
        inputs: &[&str],
        outputs: &[&str],
        attrs: &[(&str, Attr)],
    ) -> &mut Self {
        let attribute = attrs
            .iter()
            .map(|(name, a)| {
                let mut p = AttributeProto {
                    name: Some((*name).into()),
                    ..Default::default()
                };
                use proto::attribute_proto::AttributeType as T;
                match a {
                    Attr::Int(v) => {
                        p.i = Some(*v);
                        p.set_type(T::Int);
                    }
                    Attr::Float(v) => {
                        p.f = Some(*v);
                        p.set_type(T::Float);
                    }
                    Attr::Ints(v) => {
                        p.ints = v.clone();
                        p.set_type(T::Ints);
                    }
                    Attr::Floats(v) => {
                        p.floats = v.clone();
                        p.set_type(T::Floats);
                    }
                    Attr::Str(s) => {
                        p.s = Some(bytes::Bytes::from_static(s.as_bytes()));
                        p.set_type(T::String);
                    }
                    Attr::Strs(v) => {
                        p.strings = v
                            .iter()
                            .map(|s| bytes::Bytes::from_static(s.as_bytes()))
                            .collect();
                        p.set_type(T::Strings);
                    }
                }
                p
            })
            .collect();
        let index = self.graph.node.len();
        self.graph.node.push(NodeProto {
            name: Some(format!("{op}_{index}")),
            op_type: Some(op.into()),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: outputs.iter().map(|s| s.to_string()).collect(),
            attribute,
            ..Default::default()
        });
        self
    }

    /// An int64 scalar input (loop trip counts) or a bool scalar input (conditions).
    pub fn scalar_input(&mut self, name: &str, elem_type: i32) -> &mut Self {
        self.graph.input.push(value_info(name, elem_type, &[]));
        self
    }

    /// A typed output (subgraph outputs must declare their types).
    pub fn typed_output(&mut self, name: &str, elem_type: i32, dims: &[i64]) -> &mut Self {
        self.graph.output.push(value_info(name, elem_type, dims));
        self
    }

    /// A typed input of any element type.
    pub fn typed_input(&mut self, name: &str, elem_type: i32, dims: &[i64]) -> &mut Self {
        self.graph.input.push(value_info(name, elem_type, dims));
        self
    }

    /// A typed input whose dims are written as `dim_value`s exactly as given, `-1` included
    /// (as Paddle's exporters write a dynamic dimension).
    pub fn input_with_dim_values(&mut self, name: &str, elem_type: i32, dims: &[i64]) -> &mut Self {
        use proto::tensor_shape_proto::dimension::Value;
        let dims: Vec<Value> = dims.iter().map(|&d| Value::DimValue(d)).collect();
        self.input_with_dims(name, elem_type, dims)
    }

    /// A typed input whose dims are written as given: each a `dim_value` when it parses as an
    /// integer, else a `dim_param` of that name (`"?"` included, as Paddle's exporters write
    /// an unknown dimension).
    pub fn input_with_dim_names(&mut self, name: &str, elem_type: i32, dims: &[&str]) -> &mut Self {
        use proto::tensor_shape_proto::dimension::Value;
        let dims: Vec<Value> = dims
            .iter()
            .map(|d| match d.parse() {
                Ok(v) => Value::DimValue(v),
                Err(_) => Value::DimParam(d.to_string()),
            })
            .collect();
        self.input_with_dims(name, elem_type, dims)
    }

    fn input_with_dims(
        &mut self,
        name: &str,
        elem_type: i32,
        dims: Vec<proto::tensor_shape_proto::dimension::Value>,
    ) -> &mut Self {
        use proto::tensor_shape_proto::Dimension;
        let mut info = value_info(name, elem_type, &[]);
        if let Some(proto::type_proto::Value::TensorType(t)) =
            info.r#type.as_mut().and_then(|t| t.value.as_mut())
        {
            t.shape = Some(proto::TensorShapeProto {
                dim: dims
                    .into_iter()
                    .map(|d| Dimension {
                        value: Some(d),
                        ..Default::default()
                    })
                    .collect(),
            });
        }
        self.graph.input.push(info);
        self
    }

    /// The graph built so far (to use as a subgraph).
    pub fn graph(&self) -> GraphProto {
        self.graph.clone()
    }

    /// A node with one graph-valued attribute per `(name, graph)` (If, Loop).
    pub fn node_with_graphs(
        &mut self,
        op: &str,
        inputs: &[&str],
        outputs: &[&str],
        graphs: Vec<(&str, GraphProto)>,
    ) -> &mut Self {
        self.node(op, inputs, outputs, &[]);
        let node = self.graph.node.last_mut().expect("just pushed");
        for (name, g) in graphs {
            let mut p = AttributeProto {
                name: Some(name.into()),
                g: Some(g),
                ..Default::default()
            };
            p.set_type(proto::attribute_proto::AttributeType::Graph);
            node.attribute.push(p);
        }
        self
    }

    /// Puts the last node added in `domain` (e.g. `com.microsoft`).
    pub fn in_domain(&mut self, domain: &str) -> &mut Self {
        if let Some(node) = self.graph.node.last_mut() {
            node.domain = Some(domain.into());
        }
        self
    }

    /// Serializes with the given default-domain opset.
    pub fn to_bytes(&self, opset: i64) -> Vec<u8> {
        self.to_bytes_with(opset, &[])
    }

    /// Serializes with the given default-domain opset and the `(domain, version)` imports of
    /// other domains.
    pub fn to_bytes_with(&self, opset: i64, domains: &[(&str, i64)]) -> Vec<u8> {
        let mut opset_import = vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(opset),
        }];
        opset_import.extend(domains.iter().map(|(d, v)| OperatorSetIdProto {
            domain: Some((*d).into()),
            version: Some(*v),
        }));
        ModelProto {
            ir_version: Some(8),
            opset_import,
            producer_name: Some("spillway-tests".into()),
            graph: Some(self.graph.clone()),
            ..Default::default()
        }
        .encode_to_vec()
    }
}
