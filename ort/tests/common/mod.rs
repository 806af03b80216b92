//! Tiny ONNX models for the tests, encoded by hand (protobuf wire format), so the tests need no
//! model files or Python.

#![allow(dead_code)]

/// Protobuf field writer.
#[derive(Default)]
pub struct Msg(Vec<u8>);

impl Msg {
    fn varint(&mut self, mut v: u64) {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                self.0.push(b);
                return;
            }
            self.0.push(b | 0x80);
        }
    }
    fn key(&mut self, field: u32, wire: u32) {
        self.varint(((field << 3) | wire) as u64);
    }
    /// An integer field.
    pub fn int(mut self, field: u32, v: i64) -> Self {
        self.key(field, 0);
        self.varint(v as u64);
        self
    }
    /// A bytes / string / message field.
    pub fn bytes(mut self, field: u32, b: &[u8]) -> Self {
        self.key(field, 2);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
        self
    }
    /// A string field.
    pub fn str(self, field: u32, s: &str) -> Self {
        self.bytes(field, s.as_bytes())
    }
    /// A nested message field.
    pub fn msg(self, field: u32, m: Msg) -> Self {
        self.bytes(field, &m.0)
    }
    /// The encoded bytes.
    pub fn finish(self) -> Vec<u8> {
        self.0
    }
}

/// A dimension: a size, or a name when negative.
pub enum D {
    /// A fixed size.
    N(i64),
    /// A named (symbolic) size.
    S(&'static str),
}

/// `ValueInfoProto` of a tensor.
pub fn tensor_info(name: &str, elem: i32, dims: &[D]) -> Msg {
    let mut shape = Msg::default();
    for d in dims {
        shape = shape.msg(
            1,
            match d {
                D::N(n) => Msg::default().int(1, *n),
                D::S(s) => Msg::default().str(2, s),
            },
        );
    }
    let tensor = Msg::default().int(1, elem as i64).msg(2, shape);
    Msg::default()
        .str(1, name)
        .msg(2, Msg::default().msg(1, tensor))
}

/// `ValueInfoProto` of a sequence of tensors.
pub fn sequence_info(name: &str, elem: i32) -> Msg {
    let tensor = Msg::default().int(1, elem as i64);
    let seq = Msg::default().msg(1, Msg::default().msg(1, tensor));
    Msg::default()
        .str(1, name)
        .msg(2, Msg::default().msg(4, seq))
}

/// A `NodeProto`.
pub fn node(op: &str, inputs: &[&str], outputs: &[&str]) -> Msg {
    let mut n = Msg::default();
    for i in inputs {
        n = n.str(1, i);
    }
    for o in outputs {
        n = n.str(2, o);
    }
    n.str(4, op)
}

/// A float initializer (`TensorProto` with raw data).
pub fn floats(name: &str, dims: &[i64], values: &[f32]) -> Msg {
    let mut t = Msg::default();
    for &d in dims {
        t = t.int(1, d);
    }
    let raw: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    t.int(2, 1).str(8, name).bytes(9, &raw)
}

/// A model (opset 17) from nodes, initializers, inputs and outputs, with metadata.
pub fn model(nodes: Vec<Msg>, inits: Vec<Msg>, inputs: Vec<Msg>, outputs: Vec<Msg>) -> Vec<u8> {
    let mut g = Msg::default();
    for n in nodes {
        g = g.msg(1, n);
    }
    g = g.str(2, "test_graph");
    for i in inits {
        g = g.msg(5, i);
    }
    g = g.str(10, "a graph for spillway-ort's tests");
    for i in inputs {
        g = g.msg(11, i);
    }
    for o in outputs {
        g = g.msg(12, o);
    }
    Msg::default()
        .int(1, 8)
        .str(2, "spillway-ort-tests")
        .str(3, "1.0")
        .str(4, "dev.spillway")
        .int(5, 7)
        .str(6, "test description")
        .msg(7, g)
        .msg(8, Msg::default().str(1, "").int(2, 17))
        .msg(
            14,
            Msg::default().str(1, "custom_key").str(2, "custom_value"),
        )
        .finish()
}

/// An `Identity` model over one tensor of element type `elem` and shape `[N, 3]`.
pub fn identity(elem: i32) -> Vec<u8> {
    model(
        vec![node("Identity", &["x"], &["y"])],
        vec![],
        vec![tensor_info("x", elem, &[D::S("N"), D::N(3)])],
        vec![tensor_info("y", elem, &[D::S("N"), D::N(3)])],
    )
}

/// `y = relu(x @ w + b)` with `x: [N, 4]`, `w: [4, 3]`, `b: [3]`.
pub fn mlp() -> Vec<u8> {
    let w: Vec<f32> = (0..12).map(|i| (i as f32 - 6.0) / 7.0).collect();
    model(
        vec![
            node("MatMul", &["x", "w"], &["xw"]),
            node("Add", &["xw", "b"], &["z"]),
            node("Relu", &["z"], &["y"]),
        ],
        vec![
            floats("w", &[4, 3], &w),
            floats("b", &[3], &[0.1, -0.2, 0.3]),
        ],
        vec![tensor_info("x", 1, &[D::S("N"), D::N(4)])],
        vec![tensor_info("y", 1, &[D::S("N"), D::N(3)])],
    )
}

/// `s = SequenceConstruct(a, b)` and `n = SequenceLength(s)`.
pub fn sequence() -> Vec<u8> {
    model(
        vec![
            node("SequenceConstruct", &["a", "b"], &["s"]),
            node("SequenceLength", &["s"], &["n"]),
        ],
        vec![],
        vec![
            tensor_info("a", 1, &[D::N(2)]),
            tensor_info("b", 1, &[D::N(2)]),
        ],
        vec![sequence_info("s", 1), tensor_info("n", 7, &[])],
    )
}

/// The bundled model of the README's first command.
pub fn bundled_model() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../models/small/inception_block.onnx")
}
