//! Each graph pass on its own: it does its rewrite, and the rewritten graph computes what the
//! original did (same session, optimizations off, as the reference).

use spillway::graph::{Dim, Graph, passes, shape_inference};
use spillway::{OptimizationLevel, Session, Tensor};
use spillway_tests::build::{Attr, ModelBuilder};
use spillway_tests::relative_l2;

fn load(bytes: &[u8]) -> Graph {
    spillway::onnx::load_bytes(bytes::Bytes::copy_from_slice(bytes), None).unwrap()
}

fn ops(g: &Graph) -> Vec<&str> {
    g.nodes.iter().map(|n| n.op_type.as_str()).collect()
}

fn input(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    Tensor::from_shape_vec(
        shape,
        (0..n)
            .map(|i| ((i * 37 % 101) as f32 / 50.0) - 1.0)
            .collect(),
    )
    .unwrap()
}

/// Runs the rewritten graph (no further optimization) and the original model, both on `x`.
fn assert_same_outputs(bytes: &[u8], rewritten: Graph, x: Tensor, tolerance: f64) {
    let plain = Session::builder().with_optimization(OptimizationLevel::Disabled);
    let reference = plain
        .clone()
        .commit_from_memory(bytes)
        .unwrap()
        .run([("x", x.clone())])
        .unwrap();
    let got = plain
        .commit_graph(rewritten)
        .unwrap()
        .run([("x", x)])
        .unwrap();
    for i in 0..reference.len() {
        let err = relative_l2(&reference[i], &got[i]).unwrap();
        assert!(err <= tolerance, "output {i}: relative L2 error {err}");
    }
}

fn identity_model() -> Vec<u8> {
    let mut m = ModelBuilder::new(5);
    m.input("x", &[2, 3])
        .node("Identity", &["x"], &["a"], &[])
        .node("Relu", &["a"], &["b"], &[])
        .node("Dropout", &["b"], &["c"], &[])
        .node("Neg", &["c"], &["y"], &[])
        .output("y");
    m.to_bytes(13)
}

#[test]
fn identity_and_dropout_are_removed() {
    let bytes = identity_model();
    let mut g = load(&bytes);
    passes::remove_identities(&mut g);
    assert_eq!(ops(&g), ["Relu", "Neg"]);
    assert_same_outputs(&bytes, g, input(&[2, 3]), 0.0);
}

#[test]
fn identity_producing_a_graph_output_is_kept() {
    let mut m = ModelBuilder::new(5);
    m.input("x", &[2])
        .node("Relu", &["x"], &["a"], &[])
        .node("Identity", &["a"], &["y"], &[])
        .output("y");
    let mut g = load(&m.to_bytes(13));
    passes::remove_identities(&mut g);
    assert_eq!(ops(&g), ["Relu", "Identity"]);
}

fn shape_chain_model() -> Vec<u8> {
    let mut m = ModelBuilder::new(6);
    m.input("x", &[2, 4, 6])
        .ints("idx", &[0])
        .ints("minus_one", &[-1])
        .node("Shape", &["x"], &["s"], &[])
        .node("Gather", &["s", "idx"], &["n"], &[("axis", Attr::Int(0))])
        .node(
            "Concat",
            &["n", "minus_one"],
            &["shape"],
            &[("axis", Attr::Int(0))],
        )
        .node("Reshape", &["x", "shape"], &["y"], &[])
        .output("y");
    m.to_bytes(13)
}

#[test]
fn shape_gather_concat_chain_folds_to_a_constant() {
    let bytes = shape_chain_model();
    let mut g = load(&bytes);
    shape_inference::infer(&mut g);
    passes::fold_constants(&mut g).unwrap();
    passes::remove_dead_nodes(&mut g);
    assert_eq!(ops(&g), ["Reshape"]);
    let shape_input = g.nodes[0].inputs[1].unwrap();
    assert_eq!(g.constants[&shape_input].to_i64_vec().unwrap(), [2, -1]);
    assert_eq!(
        g.value(g.outputs[0]).shape,
        Some(vec![Dim::Fixed(2), Dim::Fixed(24)])
    );
    assert_same_outputs(&bytes, g, input(&[2, 4, 6]), 0.0);
}

/// "Same" padding computed from the image's height and width at run time, as timm's NASNet
/// exports it, with a symbolic batch: `Shape` cannot fold, the dimensions it gathers can.
#[test]
fn gathered_fixed_dims_of_a_symbolic_shape_fold_and_the_pad_gets_a_shape() {
    let mut m = ModelBuilder::new(13);
    m.input("x", &[-1, 3, 5, 7])
        .ints("hw", &[2, 3])
        .ints("target", &[6, 8])
        .ints("zeros", &[0, 0, 0, 0, 0, 0])
        .node("Shape", &["x"], &["s"], &[])
        .node("Gather", &["s", "hw"], &["size"], &[("axis", Attr::Int(0))])
        .node("Sub", &["target", "size"], &["after"], &[])
        .node(
            "Concat",
            &["zeros", "after"],
            &["pads"],
            &[("axis", Attr::Int(0))],
        )
        .node("Pad", &["x", "pads"], &["y"], &[])
        .output("y");
    let bytes = m.to_bytes(13);
    let mut g = load(&bytes);
    shape_inference::infer(&mut g);
    passes::fold_constants(&mut g).unwrap();
    passes::remove_dead_nodes(&mut g);
    assert_eq!(ops(&g), ["Pad"]);
    let pads = g.nodes[0].inputs[1].unwrap();
    assert_eq!(
        g.constants[&pads].to_i64_vec().unwrap(),
        [0, 0, 0, 0, 0, 0, 1, 1]
    );
    let batch = g.value(g.outputs[0]).shape.as_ref().unwrap()[0].clone();
    assert!(matches!(batch, Dim::Symbol(_)), "the batch stays symbolic");
    assert_eq!(
        g.value(g.outputs[0]).shape.as_ref().unwrap()[1..],
        [Dim::Fixed(3), Dim::Fixed(6), Dim::Fixed(8)]
    );
    assert_same_outputs(&bytes, g, input(&[2, 3, 5, 7]), 0.0);
}

/// A resize of `x` (of `dims`) to `sizes`: `nc` (the batch and channels), then half of `x`'s
/// height and width, computed at run time from its shape as `F.interpolate(x, size=…)` is
/// exported; the resized image is `r`. `nc` is made by `add_nc`.
fn halving_resize(dims: &[i64], add_nc: impl FnOnce(&mut ModelBuilder)) -> ModelBuilder {
    let mut m = ModelBuilder::new(13);
    m.input("x", dims)
        .ints("two", &[2])
        .ints("four", &[4])
        .ints("halves", &[2, 2])
        .node("Shape", &["x"], &["s"], &[]);
    add_nc(&mut m);
    m.node("Slice", &["s", "two", "four"], &["hw"], &[])
        .node("Div", &["hw", "halves"], &["half"], &[])
        .node(
            "Concat",
            &["nc", "half"],
            &["sizes"],
            &[("axis", Attr::Int(0))],
        )
        .node("Resize", &["x", "", "", "sizes"], &["r"], &[]);
    m
}

/// `F.interpolate(x, size=…)` as PyTorch exports it: `sizes` is the batch and channels of
/// `x`'s own shape, then sizes computed at run time. The resize keeps the rank, the batch and
/// the channels, and the convolution after it knows its channels too.
#[test]
fn a_resize_to_computed_sizes_keeps_the_batch_and_channels_it_takes_from_a_shape() {
    let mut m = halving_resize(&[-1, 3, -1, -1], |m| {
        m.ints("zero", &[0])
            .node("Slice", &["s", "zero", "two"], &["nc"], &[]);
    });
    m.weight("w", &[4, 3, 1, 1], 0.5)
        .node("Conv", &["r", "w"], &["y"], &[])
        .output("y");
    let bytes = m.to_bytes(13);
    let mut g = load(&bytes);
    shape_inference::infer(&mut g);
    let n = Dim::Symbol("N".into());
    let resized = g
        .nodes
        .iter()
        .find(|n| n.op_type == "Resize")
        .unwrap()
        .outputs[0]
        .unwrap();
    // The height and width are not known: they are named after the resize's output, and the
    // 1×1 convolution keeps them.
    let (h, w) = (Dim::derived(resized, "r", 2), Dim::derived(resized, "r", 3));
    assert_eq!(
        g.value(resized).shape,
        Some(vec![n.clone(), Dim::Fixed(3), h.clone(), w.clone()])
    );
    assert_eq!(
        g.value(g.outputs[0]).shape,
        Some(vec![n, Dim::Fixed(4), h, w])
    );
    assert_same_outputs(&bytes, g, input(&[2, 3, 2, 2]), 0.0);
}

/// Sizes computed from fixed dims are known, and so is the resize's shape.
#[test]
fn a_resize_to_sizes_computed_from_fixed_dims_has_them_as_its_shape() {
    let mut m = halving_resize(&[-1, 3, 8, 6], |m| {
        m.ints("nc", &[1, 3]);
    });
    m.output("r");
    let bytes = m.to_bytes(13);
    let mut g = load(&bytes);
    shape_inference::infer(&mut g);
    assert_eq!(
        g.value(g.outputs[0]).shape,
        Some([1, 3, 4, 3].map(Dim::Fixed).to_vec())
    );
    assert_same_outputs(&bytes, g, input(&[1, 3, 8, 6]), 0.0);
}

/// torchvision's detection transform pads each image to a multiple of 32 with `F.pad`, its
/// pads computed at run time: the channels' from the largest channel count of the batch less
/// the image's own (known: 0), the height's and width's from the image's size (not known).
/// Exported, the pads go through `Concat`, `Reshape [-1, 2]`, a reversing `Slice`, `Transpose`
/// and `Reshape`; the pad keeps the channels, and so does the convolution after it.
#[test]
fn pads_known_in_part_keep_the_channels_of_a_padded_image() {
    let mut m = ModelBuilder::new(13);
    m.input("x", &[3, -1, -1])
        .weight("w", &[4, 3, 1, 1], 0.5)
        .scalar_int("i0", 0, 7)
        .scalar_int("i1", 1, 7)
        .scalar_int("i2", 2, 7)
        .scalar_float("stride", 32.0)
        .ints("zero", &[0])
        .ints("pairs", &[-1, 2])
        .ints("flat", &[-1])
        .ints("last", &[-1])
        .ints("before_first", &[-i64::MAX])
        .node("Shape", &["x"], &["s"], &[])
        .node("Gather", &["s", "i0"], &["c"], &[("axis", Attr::Int(0))])
        .node("Gather", &["s", "i1"], &["h"], &[("axis", Attr::Int(0))])
        .node("Gather", &["s", "i2"], &["w_"], &[("axis", Attr::Int(0))]);
    for d in ["h", "w_"] {
        let name = |s: &str| format!("{d}{s}");
        m.node("Cast", &[d], &[&name("f")], &[("to", Attr::Int(1))])
            .node("Div", &[&name("f"), "stride"], &[&name("q")], &[])
            .node("Ceil", &[&name("q")], &[&name("c")], &[])
            .node("Mul", &[&name("c"), "stride"], &[&name("m")], &[])
            .node(
                "Cast",
                &[&name("m")],
                &[&name("i")],
                &[("to", Attr::Int(7))],
            )
            .node("Sub", &[&name("i"), d], &[&name("p")], &[])
            .node("Unsqueeze", &[&name("p"), "zero"], &[&name("p1")], &[]);
    }
    m.node("Unsqueeze", &["c", "zero"], &["c1"], &[])
        .node("Concat", &["c1"], &["cs"], &[("axis", Attr::Int(0))])
        .node("Cast", &["cs"], &["csf"], &[("to", Attr::Int(1))])
        .node(
            "ReduceMax",
            &["csf"],
            &["cmax"],
            &[("keepdims", Attr::Int(0))],
        )
        .node("Cast", &["cmax"], &["cmi"], &[("to", Attr::Int(7))])
        .node("Sub", &["cmi", "c"], &["cp"], &[])
        .node("Unsqueeze", &["cp", "zero"], &["cp1"], &[])
        .node(
            "Concat",
            &["zero", "w_p1", "zero", "hp1", "zero", "cp1"],
            &["p6"],
            &[("axis", Attr::Int(0))],
        )
        .node("Reshape", &["p6", "pairs"], &["p32"], &[])
        .node(
            "Slice",
            &["p32", "last", "before_first", "zero", "last"],
            &["reversed"],
            &[],
        )
        .node(
            "Transpose",
            &["reversed"],
            &["t"],
            &[("perm", Attr::Ints(vec![1, 0]))],
        )
        .node("Reshape", &["t", "flat"], &["pads"], &[])
        .node("Pad", &["x", "pads"], &["padded"], &[])
        .node("Unsqueeze", &["padded", "zero"], &["batch"], &[])
        .node("Conv", &["batch", "w"], &["y"], &[])
        .output("y");
    let bytes = m.to_bytes(13);
    let mut g = load(&bytes);
    passes::optimize(&mut g, passes::Level::Basic).unwrap();
    let padded = g.nodes.iter().find(|n| n.op_type == "Pad").unwrap().outputs[0];
    let padded = padded.unwrap();
    let (h, w) = (
        Dim::derived(padded, "padded", 1),
        Dim::derived(padded, "padded", 2),
    );
    assert_eq!(
        g.value(padded).shape,
        Some(vec![Dim::Fixed(3), h.clone(), w.clone()])
    );
    assert_eq!(
        g.value(g.outputs[0]).shape,
        Some(vec![Dim::Fixed(1), Dim::Fixed(4), h, w])
    );
    // The channel pad folded away: nothing is left of its ReduceMax.
    assert!(!ops(&g).contains(&"ReduceMax"), "{:?}", ops(&g));
    assert_same_outputs(&bytes, g, input(&[3, 40, 40]), 0.0);
}

/// A resize to constant sizes has exactly that shape.
#[test]
fn a_resize_to_constant_sizes_has_them_as_its_shape() {
    let mut m = ModelBuilder::new(13);
    m.input("x", &[1, 3, 8, 6])
        .ints("sizes", &[1, 3, 4, 9])
        .node("Resize", &["x", "", "", "sizes"], &["y"], &[])
        .output("y");
    let mut g = load(&m.to_bytes(13));
    shape_inference::infer(&mut g);
    assert_eq!(
        g.value(g.outputs[0]).shape,
        Some([1, 3, 4, 9].map(Dim::Fixed).to_vec())
    );
}

#[test]
fn symbolic_dims_flow_through_shape_inference() {
    let mut m = ModelBuilder::new(7);
    m.input("x", &[-1, 3, 16, 16])
        .weight("w", &[8, 3, 3, 3], 0.5)
        .node(
            "Conv",
            &["x", "w"],
            &["c"],
            &[
                ("strides", Attr::Ints(vec![2, 2])),
                ("pads", Attr::Ints(vec![1, 1, 1, 1])),
            ],
        )
        .node("Relu", &["c"], &["r"], &[])
        .node("Flatten", &["r"], &["y"], &[])
        .output("y");
    let mut g = load(&m.to_bytes(13));
    shape_inference::infer(&mut g);
    let n = Dim::Symbol("N".into());
    let conv_out = g.nodes[0].outputs[0].unwrap();
    assert_eq!(
        g.value(conv_out).shape,
        Some(vec![n.clone(), Dim::Fixed(8), Dim::Fixed(8), Dim::Fixed(8)])
    );
    assert_eq!(g.value(g.outputs[0]).shape, Some(vec![n, Dim::Fixed(512)]));
}

/// Conv (with or without its own bias) → BatchNormalization.
fn conv_bn_model(conv_bias: bool) -> Vec<u8> {
    let conv_inputs: &[&str] = if conv_bias {
        &["x", "w", "b"]
    } else {
        &["x", "w"]
    };
    let mut m = ModelBuilder::new(8);
    m.input("x", &[1, 3, 12, 12])
        .weight("w", &[6, 3, 3, 3], 0.5)
        .weight("b", &[6], 0.2)
        .positive("scale", &[6], 0.5, 1.5)
        .weight("shift", &[6], 0.3)
        .weight("mean", &[6], 0.3)
        .positive("var", &[6], 0.2, 2.0)
        .node(
            "Conv",
            conv_inputs,
            &["c"],
            &[("pads", Attr::Ints(vec![1, 1, 1, 1]))],
        )
        .node(
            "BatchNormalization",
            &["c", "scale", "shift", "mean", "var"],
            &["y"],
            &[("epsilon", Attr::Float(1e-3))],
        )
        .output("y");
    m.to_bytes(15)
}

#[test]
fn batchnorm_folds_into_conv() {
    for conv_bias in [true, false] {
        let bytes = conv_bn_model(conv_bias);
        let mut g = load(&bytes);
        passes::fold_batchnorm_into_conv(&mut g);
        assert_eq!(ops(&g), ["Conv"]);
        assert_eq!(g.nodes[0].outputs[0], Some(g.outputs[0]));
        assert_same_outputs(&bytes, g, input(&[1, 3, 12, 12]), 1e-5);
    }
}

/// Two convolutions (4 and 6 channels, one without a bias) joined along the channels, then
/// BatchNormalization of the 10: NASNet's `final_path_bn`. With `extra_reader`, the first
/// convolution's output is also a graph output.
fn concat_bn_model(extra_reader: bool) -> Vec<u8> {
    let mut m = ModelBuilder::new(10);
    m.input("x", &[1, 3, 8, 8])
        .weight("w1", &[4, 3, 1, 1], 0.5)
        .weight("b1", &[4], 0.2)
        .weight("w2", &[6, 3, 3, 3], 0.5)
        .positive("scale", &[10], 0.5, 1.5)
        .weight("shift", &[10], 0.3)
        .weight("mean", &[10], 0.3)
        .positive("var", &[10], 0.2, 2.0)
        .node("Conv", &["x", "w1", "b1"], &["c1"], &[])
        .node(
            "Conv",
            &["x", "w2"],
            &["c2"],
            &[("pads", Attr::Ints(vec![1, 1, 1, 1]))],
        )
        .node("Concat", &["c1", "c2"], &["cat"], &[("axis", Attr::Int(1))])
        .node(
            "BatchNormalization",
            &["cat", "scale", "shift", "mean", "var"],
            &["y"],
            &[("epsilon", Attr::Float(1e-3))],
        )
        .output("y");
    if extra_reader {
        m.output("c1");
    }
    m.to_bytes(15)
}

#[test]
fn batchnorm_of_a_concat_of_convs_folds_into_each() {
    let bytes = concat_bn_model(false);
    let mut g = load(&bytes);
    passes::fold_batchnorm_into_conv(&mut g);
    assert_eq!(ops(&g), ["Conv", "Conv", "Concat"]);
    assert_eq!(g.nodes[2].outputs[0], Some(g.outputs[0]));
    assert_same_outputs(&bytes, g, input(&[1, 3, 8, 8]), 1e-5);
    // A convolution whose output is read elsewhere keeps it unnormalized: nothing folds.
    let mut g = load(&concat_bn_model(true));
    passes::fold_batchnorm_into_conv(&mut g);
    assert_eq!(ops(&g), ["Conv", "Conv", "Concat", "BatchNormalization"]);
}

#[test]
fn batchnorm_is_not_folded_when_the_conv_output_has_other_readers() {
    let mut m = ModelBuilder::new(9);
    m.input("x", &[1, 2, 4, 4])
        .weight("w", &[2, 2, 1, 1], 0.5)
        .positive("s", &[2], 0.5, 1.5)
        .weight("b", &[2], 0.1)
        .weight("m", &[2], 0.1)
        .positive("v", &[2], 0.5, 1.5)
        .node("Conv", &["x", "w"], &["c"], &[])
        .node(
            "BatchNormalization",
            &["c", "s", "b", "m", "v"],
            &["bn"],
            &[],
        )
        .node("Add", &["bn", "c"], &["y"], &[])
        .output("y");
    let mut g = load(&m.to_bytes(15));
    passes::fold_batchnorm_into_conv(&mut g);
    assert_eq!(ops(&g), ["Conv", "BatchNormalization", "Add"]);
}

#[test]
fn dead_nodes_are_removed() {
    let mut m = ModelBuilder::new(10);
    m.input("x", &[3])
        .node("Relu", &["x"], &["unused"], &[])
        .node("Neg", &["x"], &["y"], &[])
        .output("y");
    let bytes = m.to_bytes(13);
    let mut g = load(&bytes);
    passes::remove_dead_nodes(&mut g);
    assert_eq!(ops(&g), ["Neg"]);
    assert_same_outputs(&bytes, g, input(&[3]), 0.0);
}

/// `x → Conv(w, b) → <activation> → y`, with the activation's attributes and extra inputs.
fn conv_activation_model(
    opset: i64,
    activation: &str,
    attrs: &[(&str, Attr)],
    extra: &[&str],
) -> Vec<u8> {
    let mut m = ModelBuilder::new(11);
    m.input("x", &[2, 4, 7, 7])
        .weight("w", &[6, 4, 3, 3], 0.5)
        .weight("b", &[6], 0.3)
        .weight("lo", &[], 0.0)
        .node(
            "Conv",
            &["x", "w", "b"],
            &["c"],
            &[("pads", Attr::Ints(vec![1, 1, 1, 1]))],
        );
    let mut inputs = vec!["c"];
    inputs.extend_from_slice(extra);
    m.node(activation, &inputs, &["y"], attrs).output("y");
    m.to_bytes(opset)
}

/// A scalar f32 constant named `name`, appended to a model's initializers.
fn with_scalar(bytes: &[u8], name: &str, value: f32) -> Vec<u8> {
    use prost::Message;
    use spillway::onnx::proto::{ModelProto, TensorProto};
    let mut model = ModelProto::decode(bytes).unwrap();
    let graph = model.graph.as_mut().unwrap();
    graph.initializer.retain(|t| t.name() != name);
    graph.initializer.push(TensorProto {
        name: Some(name.into()),
        data_type: Some(1),
        float_data: vec![value],
        ..Default::default()
    });
    model.encode_to_vec()
}

fn attr_string(g: &Graph, name: &str) -> Option<String> {
    g.nodes[0].attrs.string(name, "").ok()
}

fn attr_floats(g: &Graph, name: &str) -> Vec<f32> {
    g.nodes[0]
        .attrs
        .opt_floats(name)
        .unwrap()
        .unwrap_or_default()
}

#[test]
fn conv_and_activation_fuse_into_fused_conv() {
    let cases: Vec<(Vec<u8>, &str, Vec<f32>)> = vec![
        (conv_activation_model(13, "Relu", &[], &[]), "Relu", vec![]),
        (
            conv_activation_model(13, "LeakyRelu", &[("alpha", Attr::Float(0.2))], &[]),
            "LeakyRelu",
            vec![0.2],
        ),
        (
            conv_activation_model(13, "LeakyRelu", &[], &[]),
            "LeakyRelu",
            vec![0.01],
        ),
        (
            conv_activation_model(13, "Sigmoid", &[], &[]),
            "Sigmoid",
            vec![],
        ),
        (conv_activation_model(13, "Tanh", &[], &[]), "Tanh", vec![]),
        (
            conv_activation_model(
                13,
                "HardSigmoid",
                &[("alpha", Attr::Float(0.3)), ("beta", Attr::Float(0.4))],
                &[],
            ),
            "HardSigmoid",
            vec![0.3, 0.4],
        ),
        (
            conv_activation_model(
                6,
                "Clip",
                &[("min", Attr::Float(-0.5)), ("max", Attr::Float(0.7))],
                &[],
            ),
            "Clip",
            vec![-0.5, 0.7],
        ),
        (
            with_scalar(
                &with_scalar(
                    &conv_activation_model(13, "Clip", &[], &["lo", "hi"]),
                    "lo",
                    -0.25,
                ),
                "hi",
                0.5,
            ),
            "Clip",
            vec![-0.25, 0.5],
        ),
        (
            with_scalar(
                &conv_activation_model(13, "Clip", &[], &["", "hi"]),
                "hi",
                6.0,
            ),
            "Clip",
            vec![f32::NEG_INFINITY, 6.0],
        ),
    ];
    for (bytes, activation, params) in cases {
        let mut g = load(&bytes);
        shape_inference::infer(&mut g);
        let conv_name = g.nodes[0].name.clone();
        assert_eq!(passes::fuse_conv_activations(&mut g), 1, "{activation}");
        assert_eq!(ops(&g), ["FusedConv"], "{activation}");
        let node = &g.nodes[0];
        assert_eq!(node.domain, "com.microsoft");
        assert_eq!(node.name, conv_name, "the fused node keeps the Conv's name");
        assert_eq!(node.outputs, vec![Some(g.outputs[0])]);
        assert_eq!(attr_string(&g, "activation").as_deref(), Some(activation));
        assert_eq!(attr_floats(&g, "activation_params"), params, "{activation}");
        assert_same_outputs(&bytes, g, input(&[2, 4, 7, 7]), 1e-6);
    }
}

/// `x → Conv → c`, `Add(c, z) → Relu → y` (or `Add(z, c)`), where `z` is `x` itself or a
/// second convolution of `x` that comes after the first in node order.
fn conv_add_relu_model(z_is_conv: bool, conv_first: bool) -> Vec<u8> {
    let mut m = ModelBuilder::new(12);
    m.input("x", &[1, 8, 6, 6])
        .weight("w", &[8, 8, 3, 3], 0.3)
        .weight("b", &[8], 0.2)
        .weight("w2", &[8, 8, 1, 1], 0.4)
        .node(
            "Conv",
            &["x", "w", "b"],
            &["c"],
            &[("pads", Attr::Ints(vec![1, 1, 1, 1]))],
        );
    let z = if z_is_conv {
        m.node("Conv", &["x", "w2"], &["z"], &[]);
        "z"
    } else {
        "x"
    };
    let add: [&str; 2] = if conv_first { ["c", z] } else { [z, "c"] };
    m.node("Add", &add, &["s"], &[])
        .node("Relu", &["s"], &["y"], &[])
        .output("y");
    m.to_bytes(13)
}

#[test]
fn conv_add_relu_fuses_with_the_residual_as_z() {
    for conv_first in [true, false] {
        let bytes = conv_add_relu_model(false, conv_first);
        let mut g = load(&bytes);
        shape_inference::infer(&mut g);
        assert_eq!(passes::fuse_conv_activations(&mut g), 1);
        assert_eq!(ops(&g), ["FusedConv"]);
        assert_eq!(g.nodes[0].inputs.len(), 4);
        assert_eq!(
            g.nodes[0].inputs[3],
            Some(g.inputs[0]),
            "Z is the residual x"
        );
        assert_same_outputs(&bytes, g, input(&[1, 8, 6, 6]), 1e-6);
    }
    // Both Add inputs are convolutions: the first becomes the FusedConv, after the second.
    let bytes = conv_add_relu_model(true, true);
    let mut g = load(&bytes);
    shape_inference::infer(&mut g);
    assert_eq!(passes::fuse_conv_activations(&mut g), 1);
    assert_eq!(ops(&g), ["Conv", "FusedConv"]);
    assert_eq!(g.nodes[1].name, "Conv_0");
    assert_eq!(g.nodes[1].inputs[3], g.nodes[0].outputs[0]);
    assert_same_outputs(&bytes, g, input(&[1, 8, 6, 6]), 1e-6);
}

#[test]
fn conv_add_fuses_with_no_activation() {
    // `Conv → Add(c, x)` ends the chain: a FusedConv with Z = x and no activation attribute.
    let mut m = ModelBuilder::new(21);
    m.input("x", &[1, 8, 6, 6])
        .weight("w", &[8, 8, 1, 1], 0.3)
        .weight("b", &[8], 0.2)
        .node("Conv", &["x", "w", "b"], &["c"], &[])
        .node("Add", &["x", "c"], &["y"], &[])
        .output("y");
    let bytes = m.to_bytes(13);
    let mut g = load(&bytes);
    shape_inference::infer(&mut g);
    assert_eq!(passes::fuse_conv_activations(&mut g), 1);
    assert_eq!(ops(&g), ["FusedConv"]);
    assert_eq!(g.nodes[0].inputs[3], Some(g.inputs[0]), "Z is x");
    assert!(!g.nodes[0].attrs.has("activation"));
    assert_same_outputs(&bytes, g, input(&[1, 8, 6, 6]), 1e-6);
    // A depthwise convolution keeps its Add: the blocked depthwise kernel takes no Z.
    let mut m = ModelBuilder::new(22);
    m.input("x", &[1, 8, 6, 6])
        .weight("w", &[8, 1, 3, 3], 0.3)
        .node(
            "Conv",
            &["x", "w"],
            &["c"],
            &[
                ("group", Attr::Int(8)),
                ("pads", Attr::Ints(vec![1, 1, 1, 1])),
            ],
        )
        .node("Add", &["c", "x"], &["y"], &[])
        .output("y");
    let mut g = load(&m.to_bytes(13));
    shape_inference::infer(&mut g);
    assert_eq!(passes::fuse_conv_activations(&mut g), 0);
    assert_eq!(ops(&g), ["Conv", "Add"]);
}

#[test]
fn conv_is_not_fused_when_the_rewrite_would_change_the_graph() {
    // The conv output is also a graph output.
    let mut m = ModelBuilder::new(13);
    m.input("x", &[1, 2, 5, 5])
        .weight("w", &[3, 2, 3, 3], 0.5)
        .node("Conv", &["x", "w"], &["c"], &[])
        .node("Relu", &["c"], &["y"], &[])
        .output("y")
        .output("c");
    let mut g = load(&m.to_bytes(13));
    shape_inference::infer(&mut g);
    assert_eq!(passes::fuse_conv_activations(&mut g), 0);
    assert_eq!(ops(&g), ["Conv", "Relu"]);
    // The conv output has a second reader.
    let mut m = ModelBuilder::new(14);
    m.input("x", &[1, 2, 5, 5])
        .weight("w", &[3, 2, 3, 3], 0.5)
        .node("Conv", &["x", "w"], &["c"], &[])
        .node("Relu", &["c"], &["r"], &[])
        .node("Add", &["r", "c"], &["y"], &[])
        .output("y");
    let mut g = load(&m.to_bytes(13));
    shape_inference::infer(&mut g);
    assert_eq!(passes::fuse_conv_activations(&mut g), 0);
    // The residual broadcasts ([1, 3, 1, 1] against [1, 3, 3, 3]).
    let mut m = ModelBuilder::new(15);
    m.input("x", &[1, 2, 5, 5])
        .weight("w", &[3, 2, 3, 3], 0.5)
        .weight("bias", &[1, 3, 1, 1], 0.5)
        .node("Conv", &["x", "w"], &["c"], &[])
        .node("Add", &["c", "bias"], &["s"], &[])
        .node("Relu", &["s"], &["y"], &[])
        .output("y");
    let mut g = load(&m.to_bytes(13));
    shape_inference::infer(&mut g);
    assert_eq!(passes::fuse_conv_activations(&mut g), 0);
    assert_eq!(ops(&g), ["Conv", "Add", "Relu"]);
    // Clip with a bound computed at run time; an activation that FusedConv lacks.
    let mut m = ModelBuilder::new(16);
    m.input("x", &[1, 2, 5, 5])
        .input("hi", &[])
        .weight("w", &[3, 2, 3, 3], 0.5)
        .node("Conv", &["x", "w"], &["c"], &[])
        .node("Clip", &["c", "", "hi"], &["k"], &[])
        .node("Conv", &["x", "w"], &["c2"], &[])
        .node("Elu", &["c2"], &["e"], &[])
        .node("Add", &["k", "e"], &["y"], &[])
        .output("y");
    let mut g = load(&m.to_bytes(13));
    shape_inference::infer(&mut g);
    assert_eq!(passes::fuse_conv_activations(&mut g), 0);
}

#[test]
fn optimize_fuses_conv_batchnorm_relu_only_at_the_extended_level() {
    let mut m = ModelBuilder::new(17);
    m.input("x", &[1, 3, 8, 8])
        .weight("w", &[4, 3, 3, 3], 0.5)
        .positive("scale", &[4], 0.5, 1.5)
        .weight("shift", &[4], 0.3)
        .weight("mean", &[4], 0.3)
        .positive("var", &[4], 0.5, 2.0)
        .node("Conv", &["x", "w"], &["c"], &[])
        .node(
            "BatchNormalization",
            &["c", "scale", "shift", "mean", "var"],
            &["bn"],
            &[],
        )
        .node("Relu", &["bn"], &["y"], &[])
        .output("y");
    let bytes = m.to_bytes(15);
    let mut basic = load(&bytes);
    passes::optimize(&mut basic, passes::Level::Basic).unwrap();
    assert_eq!(ops(&basic), ["Conv", "Relu"]);
    let mut g = load(&bytes);
    passes::optimize(&mut g, passes::Level::Extended).unwrap();
    assert_eq!(ops(&g), ["FusedConv"]);
    assert_same_outputs(&bytes, g, input(&[1, 3, 8, 8]), 1e-5);
    // A default session fuses; a session stating a GPU (dropped here: no CUDA backend in this
    // build) is the one case that would not.
    assert!(spillway::Devices::cpu().with_cuda(0, 2).has_cuda());
    assert!(
        !spillway::Devices::cpu()
            .with_virtual(1, spillway::CopyCost::FREE)
            .has_cuda()
    );
}

/// `x → Pad(pads, value) → Conv(stride 2, own pads) → y` and `Pad → AveragePool → z`, and
/// `Pad → MaxPool → m` when `max_pool`; `pool_attrs` are the average pool's.
fn pad_model(pads: &[i64], value: f32, pool_attrs: &[(&str, Attr)], max_pool: bool) -> Vec<u8> {
    let mut m = ModelBuilder::new(12);
    m.input("x", &[1, 3, 9, 8])
        .ints("pads", pads)
        .weight("value", &[], 1.0)
        .weight("w", &[4, 3, 3, 3], 0.5)
        .weight("b", &[4], 0.3)
        .node("Pad", &["x", "pads", "value"], &["p"], &[])
        .node(
            "Conv",
            &["p", "w", "b"],
            &["y"],
            &[
                ("strides", Attr::Ints(vec![2, 2])),
                ("pads", Attr::Ints(vec![0, 1, 1, 0])),
            ],
        )
        .node("AveragePool", &["p"], &["z"], pool_attrs)
        .output("y")
        .output("z");
    if max_pool {
        m.node(
            "MaxPool",
            &["p"],
            &["m"],
            &[("kernel_shape", Attr::Ints(vec![2, 2]))],
        )
        .output("m");
    }
    with_scalar(&m.to_bytes(13), "value", value)
}

/// A 3×3 stride-2 average pool's attributes, with `extra` ones.
fn pool_3x3(extra: &[(&'static str, Attr)]) -> Vec<(&'static str, Attr)> {
    let mut attrs = vec![
        ("kernel_shape", Attr::Ints(vec![3, 3])),
        ("strides", Attr::Ints(vec![2, 2])),
    ];
    attrs.extend_from_slice(extra);
    attrs
}

fn node_ints(g: &Graph, op: &str, name: &str) -> Vec<i64> {
    let node = g.nodes.iter().find(|n| n.op_type == op).unwrap();
    node.attrs.opt_ints(name).unwrap().unwrap_or_default()
}

#[test]
fn zero_pads_fold_into_the_convolution_and_the_average_pool() {
    let pads = [0, 0, 1, 2, 0, 0, 2, 1];
    for max_pool in [false, true] {
        let bytes = pad_model(&pads, 0.0, &pool_3x3(&[]), max_pool);
        let mut g = load(&bytes);
        shape_inference::infer(&mut g);
        passes::fold_constants(&mut g).unwrap();
        assert_eq!(passes::fold_pads(&mut g), 2);
        passes::remove_dead_nodes(&mut g);
        // The max pool's padding is −∞: it keeps reading the Pad's zeros.
        let expected: &[&str] = match max_pool {
            true => &["Pad", "Conv", "AveragePool", "MaxPool"],
            false => &["Conv", "AveragePool"],
        };
        assert_eq!(ops(&g), expected);
        assert_eq!(node_ints(&g, "Conv", "pads"), [1, 3, 3, 1]);
        assert_eq!(node_ints(&g, "AveragePool", "pads"), [1, 2, 2, 1]);
        let pool = g.nodes.iter().find(|n| n.op_type == "AveragePool").unwrap();
        assert_eq!(pool.attrs.int("count_include_pad", 0).unwrap(), 1);
        assert_eq!(
            g.nodes
                .iter()
                .filter(|n| n.inputs[0] == Some(g.inputs[0]))
                .count(),
            2 + usize::from(max_pool)
        );
        assert_same_outputs(&bytes, g, input(&[1, 3, 9, 8]), 1e-6);
    }
}

#[test]
fn pads_that_are_not_spatial_zeros_stay() {
    const SPATIAL: &[i64] = &[0, 0, 1, 1, 0, 0, 1, 1];
    // (the Pad's pads, its value, the average pool's attributes, readers folded)
    type Case = (&'static [i64], f32, Vec<(&'static str, Attr)>, usize);
    let cases: [Case; 4] = [
        // A value other than zero.
        (SPATIAL, 0.5, pool_3x3(&[]), 0),
        // Padding of the batch.
        (&[1, 0, 1, 1, 0, 0, 1, 1], 0.0, pool_3x3(&[]), 0),
        // A pool with padding of its own that it does not count: only the Conv folds.
        (
            SPATIAL,
            0.0,
            pool_3x3(&[("pads", Attr::Ints(vec![1, 1, 1, 1]))]),
            1,
        ),
        // A pool whose last windows may reach past the padding: only the Conv folds.
        (SPATIAL, 0.0, pool_3x3(&[("ceil_mode", Attr::Int(1))]), 1),
    ];
    for (pads, value, pool, folded) in cases {
        let bytes = pad_model(pads, value, &pool, false);
        let mut g = load(&bytes);
        shape_inference::infer(&mut g);
        passes::fold_constants(&mut g).unwrap();
        assert_eq!(
            passes::fold_pads(&mut g),
            folded,
            "pads {pads:?} value {value}"
        );
        passes::remove_dead_nodes(&mut g);
        assert_eq!(ops(&g)[0], "Pad");
        assert_same_outputs(&bytes, g, input(&[1, 3, 9, 8]), 1e-6);
    }
}

#[test]
fn optimize_folds_pads_only_at_the_extended_level() {
    let bytes = pad_model(&[0, 0, 1, 0, 0, 0, 0, 1], 0.0, &pool_3x3(&[]), false);
    let mut basic = load(&bytes);
    passes::optimize(&mut basic, passes::Level::Basic).unwrap();
    assert!(
        ops(&basic).contains(&"Pad"),
        "cuDNN takes symmetric padding only"
    );
    let mut extended = load(&bytes);
    passes::optimize(&mut extended, passes::Level::Extended).unwrap();
    assert!(!ops(&extended).contains(&"Pad"), "{:?}", ops(&extended));
}

/// How a GELU chain is written: `x / √2` or `x · (1/√2)`; constants first or second in `Add`
/// and `Mul`; `(x · a) · ½` or `(x · ½) · a`.
#[derive(Clone, Copy)]
struct GeluForm {
    divide: bool,
    constants_first: bool,
    half_first: bool,
}

/// `y = GELU(x)` written out op by op in `form`, with `one` as the constant added to `erf`;
/// `extra_output` also makes the `Erf` output a graph output.
fn gelu_model(form: GeluForm, one: f32, extra_output: bool) -> Vec<u8> {
    let mut m = ModelBuilder::new(31);
    m.input("x", &[2, 3, 40])
        .scalar_float("sqrt2", std::f32::consts::SQRT_2)
        .scalar_float("inv_sqrt2", std::f32::consts::FRAC_1_SQRT_2)
        .scalar_float("one", one)
        .scalar_float("half", 0.5);
    let pair = |a: &'static str, k: &'static str| match form.constants_first {
        true => [k, a],
        false => [a, k],
    };
    match form.divide {
        true => m.node("Div", &["x", "sqrt2"], &["u"], &[]),
        false => m.node("Mul", &pair("x", "inv_sqrt2"), &["u"], &[]),
    };
    m.node("Erf", &["u"], &["e"], &[])
        .node("Add", &pair("e", "one"), &["a"], &[]);
    match form.half_first {
        true => {
            m.node("Mul", &pair("x", "half"), &["h"], &[])
                .node("Mul", &["h", "a"], &["y"], &[])
        }
        false => {
            m.node("Mul", &["x", "a"], &["p"], &[])
                .node("Mul", &pair("p", "half"), &["y"], &[])
        }
    };
    m.output("y");
    if extra_output {
        m.output("e");
    }
    m.to_bytes(13)
}

fn gelu_forms() -> Vec<GeluForm> {
    let mut forms = Vec::new();
    for divide in [true, false] {
        for constants_first in [true, false] {
            for half_first in [true, false] {
                forms.push(GeluForm {
                    divide,
                    constants_first,
                    half_first,
                });
            }
        }
    }
    forms
}

#[test]
fn gelu_written_out_fuses_into_one_gelu() {
    for form in gelu_forms() {
        let bytes = gelu_model(form, 1.0, false);
        let mut g = load(&bytes);
        shape_inference::infer(&mut g);
        assert_eq!(passes::fuse_gelu(&mut g), 1);
        assert_eq!(ops(&g), ["Gelu"]);
        let node = &g.nodes[0];
        assert_eq!(node.name, "Erf_1", "the fused node takes the Erf's name");
        assert_eq!(node.inputs, vec![Some(g.inputs[0])]);
        assert_eq!(node.outputs, vec![Some(g.outputs[0])]);
        assert_same_outputs(&bytes, g, input(&[2, 3, 40]), 1e-6);
    }
}

#[test]
fn gelu_chains_that_differ_are_kept() {
    let form = GeluForm {
        divide: true,
        constants_first: false,
        half_first: false,
    };
    // `erf + 2` is not GELU; a value of the chain that is a graph output must survive.
    for (one, extra_output) in [(2.0, false), (1.0, true)] {
        let mut g = load(&gelu_model(form, one, extra_output));
        shape_inference::infer(&mut g);
        assert_eq!(passes::fuse_gelu(&mut g), 0);
        assert_eq!(ops(&g), ["Div", "Erf", "Add", "Mul", "Mul"]);
    }
}

/// How a `MatMul` + bias model differs from the one that fuses.
#[derive(Clone, Copy, PartialEq)]
enum BiasCase {
    /// `y = x · w + b`, the bias second (or first, in `bias_first`).
    Fuses { bias_first: bool },
    /// The product is also a graph output.
    ProductIsOutput,
    /// The bias is a graph input, not a constant.
    BiasIsInput,
    /// The bias is `[1, n]`, not a vector.
    BiasIsMatrix,
}

/// `y = x · w + b` with `x` [2, 3, 40] (a batch axis, as transformers have) and `w` [40, 24].
fn matmul_bias_model(case: BiasCase) -> Vec<u8> {
    let mut m = ModelBuilder::new(41);
    m.input("x", &[2, 3, 40]).weight("w", &[40, 24], 0.3);
    match case {
        BiasCase::BiasIsInput => m.input("b", &[24]),
        BiasCase::BiasIsMatrix => m.weight("b", &[1, 24], 0.5),
        _ => m.weight("b", &[24], 0.5),
    };
    m.node("MatMul", &["x", "w"], &["p"], &[]);
    match case {
        BiasCase::Fuses { bias_first: true } => m.node("Add", &["b", "p"], &["y"], &[]),
        _ => m.node("Add", &["p", "b"], &["y"], &[]),
    };
    m.output("y");
    if case == BiasCase::ProductIsOutput {
        m.output("p");
    }
    m.to_bytes(13)
}

#[test]
fn matmul_and_bias_add_fuse_into_matmul_bias() {
    for bias_first in [false, true] {
        let bytes = matmul_bias_model(BiasCase::Fuses { bias_first });
        let mut g = load(&bytes);
        shape_inference::infer(&mut g);
        assert_eq!(passes::fuse_matmul_bias(&mut g), 1);
        assert_eq!(ops(&g), ["MatMulBias"]);
        let node = &g.nodes[0];
        assert_eq!(node.domain, "spillway");
        assert_eq!(
            node.name, "MatMul_0",
            "the fused node takes the MatMul's name"
        );
        assert_eq!(node.inputs.len(), 3);
        assert_eq!(node.outputs, vec![Some(g.outputs[0])]);
        assert_same_outputs(&bytes, g, input(&[2, 3, 40]), 1e-6);
    }
}

#[test]
fn matmul_and_add_that_are_not_a_bias_are_kept() {
    for case in [
        BiasCase::ProductIsOutput,
        BiasCase::BiasIsInput,
        BiasCase::BiasIsMatrix,
    ] {
        let mut g = load(&matmul_bias_model(case));
        shape_inference::infer(&mut g);
        assert_eq!(passes::fuse_matmul_bias(&mut g), 0);
        assert_eq!(ops(&g), ["MatMul", "Add"]);
    }
}

/// `y = w · (x · 1/√(mean(x²) + ε))` over the last axis, as T5 exports it (`reciprocal`: the
/// `Div` makes `1 / s` and a `Mul` applies it; else `x / s`), the weight first or second;
/// `extra_output` also makes the `Sqrt` output a graph output.
fn rms_norm_model(reciprocal: bool, weight_first: bool, extra_output: bool) -> Vec<u8> {
    let mut m = ModelBuilder::new(43);
    m.input("x", &[2, 3, 40])
        .weight("w", &[40], 0.5)
        .scalar_float("two", 2.0)
        .scalar_float("eps", 1e-6)
        .scalar_float("one", 1.0)
        .node("Pow", &["x", "two"], &["p"], &[])
        .node(
            "ReduceMean",
            &["p"],
            &["m"],
            &[("axes", Attr::Ints(vec![-1])), ("keepdims", Attr::Int(1))],
        )
        .node("Add", &["m", "eps"], &["a"], &[])
        .node("Sqrt", &["a"], &["s"], &[]);
    match reciprocal {
        true => m
            .node("Div", &["one", "s"], &["r"], &[])
            .node("Mul", &["x", "r"], &["n"], &[]),
        false => m.node("Div", &["x", "s"], &["n"], &[]),
    };
    match weight_first {
        true => m.node("Mul", &["w", "n"], &["y"], &[]),
        false => m.node("Mul", &["n", "w"], &["y"], &[]),
    };
    m.output("y");
    if extra_output {
        m.output("s");
    }
    m.to_bytes(13)
}

#[test]
fn rms_norm_written_out_fuses_into_one_node() {
    for (reciprocal, weight_first) in [(true, true), (true, false), (false, true)] {
        let bytes = rms_norm_model(reciprocal, weight_first, false);
        let mut g = load(&bytes);
        shape_inference::infer(&mut g);
        assert_eq!(passes::fuse_rms_norm(&mut g), 1);
        assert_eq!(ops(&g), ["RMSNormalization"]);
        let node = &g.nodes[0];
        assert_eq!(node.domain, "spillway");
        assert_eq!(
            node.name, "ReduceMean_1",
            "the fused node takes the ReduceMean's name"
        );
        assert_eq!(node.inputs[0], Some(g.inputs[0]));
        assert_eq!(node.outputs, vec![Some(g.outputs[0])]);
        assert_same_outputs(&bytes, g, input(&[2, 3, 40]), 1e-6);
    }
}

#[test]
fn rms_norm_chains_that_differ_are_kept() {
    let mut g = load(&rms_norm_model(true, true, true));
    shape_inference::infer(&mut g);
    assert_eq!(passes::fuse_rms_norm(&mut g), 0);
    assert_eq!(g.nodes.len(), 7);
}

/// `x` (f32) → `Cast(to)` → `Relu`; `cast_is_output` also makes the cast a graph output.
fn cast_model(to: i64, cast_is_output: bool) -> Vec<u8> {
    let mut m = ModelBuilder::new(47);
    m.input("x", &[2, 5])
        .node("Cast", &["x"], &["c"], &[("to", Attr::Int(to))])
        .node("Relu", &["c"], &["y"], &[])
        .output("y");
    if cast_is_output {
        m.output("c");
    }
    m.to_bytes(13)
}

#[test]
fn casts_to_the_type_they_have_are_removed() {
    let bytes = cast_model(1, false);
    let mut g = load(&bytes);
    shape_inference::infer(&mut g);
    passes::remove_identity_casts(&mut g);
    assert_eq!(ops(&g), ["Relu"]);
    assert_eq!(g.nodes[0].inputs, vec![Some(g.inputs[0])]);
    assert_same_outputs(&bytes, g, input(&[2, 5]), 0.0);
    // To another type, or writing a graph output: kept.
    for (to, cast_is_output) in [(11, false), (1, true)] {
        let mut g = load(&cast_model(to, cast_is_output));
        shape_inference::infer(&mut g);
        passes::remove_identity_casts(&mut g);
        assert_eq!(ops(&g), ["Cast", "Relu"]);
    }
}
