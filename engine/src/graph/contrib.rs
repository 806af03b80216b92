//! ONNX Runtime's `com.microsoft` contrib ops that its transformer optimizer writes into BERT-,
//! GPT- and ViT-style models, lowered at load into the standard ops that define them, so that
//! validation, shape inference, the fusions and every device see only standard ops:
//!
//! | contrib op | lowered to |
//! | --- | --- |
//! | `Gelu(X)` | `Gelu` (exact) |
//! | `BiasGelu(A, B)` | `Add`, `Gelu` (exact) |
//! | `FastGelu(X, bias?)` | (`Add`), `Gelu` (`approximate = "tanh"`) |
//! | `QuickGelu(X; alpha = 1.702)` | `Mul`, `Sigmoid`, `Mul` |
//! | `SkipLayerNormalization(X, skip, gamma, beta?, bias?; epsilon = 1e-12)` | `Add`, (`Add`), `LayerNormalization` (axis −1) |
//! | `SkipSimplifiedLayerNormalization(X, skip, gamma, bias?; epsilon = 1e-12)` | `Add`, (`Add`), `RMSNormalization` (axis −1) |
//! | `EmbedLayerNormalization(ids, segment_ids?, word, position, segment?, gamma, beta, mask?, position_ids?; epsilon = 1e-12)` | `Gather`s, `Add`s, `LayerNormalization`; the mask index as `ReduceSum` of the mask's ones |
//! | `MatMulNBits(A, B, scales, zero_points?, g_idx?, bias?; K, N, bits, block_size)` | `MatMul` with the weights dequantized at load, (`Add`) |
//! | `Attention(input, weights, bias?, mask_index?; num_heads, …)` | `MatMul`, (`Add`), `Split`, the mask, `Attention` (opset 23) |
//! | `MultiHeadAttention(query, key, value, bias?, key_padding_mask?, attention_bias?; num_heads, …)` | (`Split`, `Add`s), the mask, `Attention` (opset 23) |
//!
//! `MatMulNBits` needs constant weights, scales and zero points; its weights become a float
//! matrix (what ONNX Runtime computes with at `accuracy_level` 0, at 8 / `bits` times the
//! memory). The attention ops take 3-D `[batch, sequence, hidden]` inputs without a KV cache
//! (`past`, `present` are refused); a key mask (1-D lengths or 2-D 0/1) becomes the additive
//! bias `(1 − mask) · mask_filter_value` that ONNX Runtime adds, and `unidirectional` the
//! causal mask.
//!
//! The skip normalizations' optional outputs map onto the lowered nodes: `mean` and
//! `inv_std_var` are `LayerNormalization`'s second and third outputs, and
//! `input_skip_bias_sum` is the last `Add`'s output. Every other `com.microsoft` op stays as it
//! is and is refused, naming the node, when its kernel is built.

use spillway_kernels::{AttrValue, Attributes, Tensor};

use super::{Dim, Graph, Node, ValueId, ValueInfo};
use crate::error::{Error, Result};

/// The domain of ONNX Runtime's contrib ops.
pub const DOMAIN: &str = "com.microsoft";

/// The contrib ops [`lower`] rewrites.
pub const LOWERED_OPS: &[&str] = &[
    "Attention",
    "BiasGelu",
    "EmbedLayerNormalization",
    "FastGelu",
    "Gelu",
    "MatMulNBits",
    "MultiHeadAttention",
    "QuickGelu",
    "SkipLayerNormalization",
    "SkipSimplifiedLayerNormalization",
];

/// ONNX Runtime's default `epsilon` of the skip normalizations.
const SKIP_NORM_EPSILON: f32 = 1e-12;
/// `QuickGelu`'s default `alpha`.
const QUICK_GELU_ALPHA: f32 = 1.702;

/// Rewrites every contrib op of [`LOWERED_OPS`] in `graph` and its subgraphs; returns how many.
pub fn lower(graph: &mut Graph) -> Result<usize> {
    let mut count = 0;
    for node in &mut graph.nodes {
        for sub in &mut node.subgraphs {
            count += lower(&mut sub.graph)?;
        }
    }
    let nodes = std::mem::take(&mut graph.nodes);
    let mut lowered = Vec::with_capacity(nodes.len());
    for node in nodes {
        if node.domain == DOMAIN && LOWERED_OPS.contains(&node.op_type.as_str()) {
            lowered.extend(lower_node(graph, &node)?);
            count += 1;
        } else {
            lowered.push(node);
        }
    }
    graph.nodes = lowered;
    Ok(count)
}

/// The standard nodes that compute `node`, in order.
fn lower_node(graph: &mut Graph, node: &Node) -> Result<Vec<Node>> {
    let invalid = |rule: String| Error::InvalidNode {
        node: node.name.clone(),
        op_type: node.op_type.clone(),
        rule,
    };
    let input = |i: usize| node.inputs.get(i).copied().flatten();
    // The inputs that must be present, how many it may have, how many outputs.
    let (required, most, outputs): (&[usize], usize, usize) = match node.op_type.as_str() {
        "Gelu" => (&[0], 1, 1),
        "BiasGelu" => (&[0, 1], 2, 1),
        "FastGelu" => (&[0], 2, 1),
        "QuickGelu" => (&[0], 1, 1),
        "SkipLayerNormalization" => (&[0, 1, 2], 5, 4),
        "SkipSimplifiedLayerNormalization" => (&[0, 1, 2], 4, 4),
        "MatMulNBits" => (&[0, 1, 2], 6, 1),
        "Attention" => (&[0, 1], 7, 2),
        "EmbedLayerNormalization" => (&[0, 2, 3, 5, 6], 9, 3),
        _ => (&[0], 10, 4), // MultiHeadAttention: key and value are checked when read
    };
    let declared = node.declared_inputs;
    if declared > most || required.iter().any(|&i| input(i).is_none()) {
        return Err(invalid(format!(
            "takes at most {most} inputs, with inputs {required:?} present; it has {declared}"
        )));
    }
    if node.outputs.len() > outputs || node.outputs.first().copied().flatten().is_none() {
        return Err(invalid(format!(
            "has at most {outputs} outputs, the first present; it has {}",
            node.outputs.len()
        )));
    }
    let output = |i: usize| node.outputs.get(i).copied().flatten();
    let mut lowering = Lowering {
        graph,
        from: node,
        nodes: Vec::new(),
    };
    let x = input(0).expect("checked: the first input is present");
    let y = output(0).expect("checked: the first output is present");
    match node.op_type.as_str() {
        "MatMulNBits" => {
            let weights = dequantized_weights(lowering.graph, node).map_err(invalid)?;
            let weights = lowering.constant(weights);
            match input(5) {
                Some(bias) => {
                    let product = lowering.push("MatMul", 13, Attributes::new(), vec![x, weights], None);
                    lowering.add(product, bias, Some(y));
                }
                None => {
                    lowering.push("MatMul", 13, Attributes::new(), vec![x, weights], Some(y));
                }
            }
        }
        "Attention" | "MultiHeadAttention" => {
            let attention = AttentionNode::read(lowering.graph, node).map_err(invalid)?;
            attention.lower(&mut lowering, y);
        }
        "EmbedLayerNormalization" => {
            let epsilon = node
                .attrs
                .float("epsilon", SKIP_NORM_EPSILON)
                .map_err(|e| invalid(e.to_string()))?;
            lowering.embed_layer_norm(node, epsilon);
        }
        "Gelu" => lowering.gelu(x, "none", y),
        "BiasGelu" => {
            let sum = lowering.add(x, input(1).expect("checked"), None);
            lowering.gelu(sum, "none", y);
        }
        "FastGelu" => {
            let sum = match input(1) {
                Some(bias) => lowering.add(x, bias, None),
                None => x,
            };
            lowering.gelu(sum, "tanh", y);
        }
        "QuickGelu" => {
            let alpha = node
                .attrs
                .float("alpha", QUICK_GELU_ALPHA)
                .map_err(|e| invalid(e.to_string()))?;
            let alpha = lowering.constant(Tensor::scalar(alpha));
            let scaled = lowering.push("Mul", 14, Attributes::new(), vec![x, alpha], None);
            let gate = lowering.push("Sigmoid", 13, Attributes::new(), vec![scaled], None);
            lowering.push("Mul", 14, Attributes::new(), vec![x, gate], Some(y));
        }
        simplified => {
            let simplified = simplified == "SkipSimplifiedLayerNormalization";
            let epsilon = node
                .attrs
                .float("epsilon", SKIP_NORM_EPSILON)
                .map_err(|e| invalid(e.to_string()))?;
            let bias = input(if simplified { 3 } else { 4 });
            let skip = input(1).expect("checked");
            let sum_output = output(3);
            let sum = lowering.add(x, skip, sum_output.filter(|_| bias.is_none()));
            let sum = match bias {
                Some(bias) => lowering.add(sum, bias, sum_output),
                None => sum,
            };
            let attrs = Attributes::new()
                .with("axis", AttrValue::Int(-1))
                .with("epsilon", AttrValue::Float(epsilon));
            let gamma = input(2).expect("checked");
            if simplified {
                if output(1).is_some() || output(2).is_some() {
                    return Err(invalid(
                        "its mean and inv_std_var outputs are not supported".into(),
                    ));
                }
                lowering.push("RMSNormalization", 23, attrs, vec![sum, gamma], Some(y));
            } else {
                let mut inputs = vec![Some(sum), Some(gamma)];
                if let Some(beta) = input(3) {
                    inputs.push(Some(beta));
                }
                lowering.push_node(
                    "LayerNormalization",
                    17,
                    attrs,
                    inputs,
                    vec![Some(y), output(1), output(2)],
                );
            }
        }
    }
    Ok(lowering.nodes)
}

/// The nodes replacing one contrib node, named after it.
struct Lowering<'a> {
    graph: &'a mut Graph,
    from: &'a Node,
    nodes: Vec<Node>,
}

impl Lowering<'_> {
    /// Adds a node reading `inputs`; returns its output: `output`, or a new value.
    fn push(
        &mut self,
        op_type: &str,
        opset: i64,
        attrs: Attributes,
        inputs: Vec<ValueId>,
        output: Option<ValueId>,
    ) -> ValueId {
        let output = output.unwrap_or_else(|| {
            let name = format!("{}/{op_type}#{}", self.from.name, self.nodes.len());
            self.graph.add_value(ValueInfo::named(name))
        });
        let inputs = inputs.into_iter().map(Some).collect();
        self.push_node(op_type, opset, attrs, inputs, vec![Some(output)]);
        output
    }

    /// Adds a node reading `inputs` with `count` new outputs; returns them.
    fn push_many(
        &mut self,
        op_type: &str,
        opset: i64,
        attrs: Attributes,
        inputs: Vec<Option<ValueId>>,
        count: usize,
    ) -> Vec<ValueId> {
        let outputs: Vec<ValueId> = (0..count)
            .map(|i| {
                let name = format!("{}/{op_type}#{}:{i}", self.from.name, self.nodes.len());
                self.graph.add_value(ValueInfo::named(name))
            })
            .collect();
        self.push_node(op_type, opset, attrs, inputs, outputs.iter().copied().map(Some).collect());
        outputs
    }

    fn push_node(
        &mut self,
        op_type: &str,
        opset: i64,
        attrs: Attributes,
        inputs: Vec<Option<ValueId>>,
        outputs: Vec<Option<ValueId>>,
    ) {
        // Named after the contrib node, so that errors name what the model has.
        let name = format!("{}/{op_type}#{}", self.from.name, self.nodes.len());
        self.nodes.push(Node {
            name,
            op_type: op_type.to_string(),
            domain: String::new(),
            opset,
            attrs,
            declared_inputs: inputs.len(),
            inputs,
            outputs,
            subgraphs: Vec::new(),
            type_attrs: Vec::new(),
        });
    }

    /// `EmbedLayerNormalization`: the word, position (given ids, else `0..S`) and segment
    /// embeddings summed and normalized; the mask index is each row's count of ones in the
    /// mask (zeros without a mask), as ONNX Runtime gives it.
    fn embed_layer_norm(&mut self, node: &Node, epsilon: f32) {
        let input = |i: usize| node.inputs.get(i).copied().flatten();
        let output = |i: usize| node.outputs.get(i).copied().flatten();
        let none = Attributes::new;
        let ids = input(0).expect("checked: the ids are present");
        let gather = |l: &mut Self, table: ValueId, at: ValueId| {
            l.push("Gather", 13, none(), vec![table, at], None)
        };
        let word = gather(self, input(2).expect("checked"), ids);
        let positions = match input(8) {
            Some(p) => p,
            None => {
                let attrs = ints_attr("start", 1).with("end", AttrValue::Int(2));
                let length = self.push("Shape", 15, attrs, vec![ids], None);
                let length = self.push("Squeeze", 13, none(), vec![length], None);
                let zero = self.constant(Tensor::scalar(0i64));
                let one = self.constant(Tensor::scalar(1i64));
                self.push("Range", 11, none(), vec![zero, length, one], None)
            }
        };
        let position = gather(self, input(3).expect("checked"), positions);
        let mut sum = self.add(word, position, None);
        if let (Some(segments), Some(table)) = (input(1), input(4)) {
            let segment = gather(self, table, segments);
            sum = self.add(sum, segment, None);
        }
        if let Some(out) = output(2) {
            sum = self.push("Identity", 16, none(), vec![sum], Some(out));
        }
        let attrs = Attributes::new()
            .with("axis", AttrValue::Int(-1))
            .with("epsilon", AttrValue::Float(epsilon));
        let (gamma, beta) = (input(5).expect("checked"), input(6).expect("checked"));
        let y = output(0).expect("checked: the first output is present");
        self.push_node(
            "LayerNormalization",
            17,
            attrs,
            vec![Some(sum), Some(gamma), Some(beta)],
            vec![Some(y)],
        );
        let Some(mask_index) = output(1) else { return };
        match input(7) {
            Some(mask) => {
                let one = self.constant(Tensor::scalar(1i32));
                let ones = self.push("Equal", 13, none(), vec![mask, one], None);
                let ones = self.push("Cast", 19, ints_attr("to", INT32), vec![ones], None);
                let axes = self.constant(Tensor::from_shape_vec(&[1], vec![1i64]).expect("one axis"));
                let attrs = ints_attr("keepdims", 0);
                self.push("ReduceSum", 13, attrs, vec![ones, axes], Some(mask_index));
            }
            None => {
                let attrs = ints_attr("start", 0).with("end", AttrValue::Int(1));
                let batch = self.push("Shape", 15, attrs, vec![ids], None);
                let zero = Tensor::from_shape_vec(&[1], vec![0i32]).expect("one value");
                let attrs = Attributes::new().with("value", AttrValue::Tensor(zero));
                self.push("ConstantOfShape", 9, attrs, vec![batch], Some(mask_index));
            }
        }
    }

    fn add(&mut self, a: ValueId, b: ValueId, output: Option<ValueId>) -> ValueId {
        self.push("Add", 14, Attributes::new(), vec![a, b], output)
    }

    fn gelu(&mut self, x: ValueId, approximate: &str, output: ValueId) {
        let attrs = Attributes::new().with("approximate", AttrValue::String(approximate.into()));
        self.push("Gelu", 20, attrs, vec![x], Some(output));
    }

    fn constant(&mut self, value: Tensor) -> ValueId {
        let name = format!("{}/constant#{}", self.from.name, self.nodes.len());
        let id = self.graph.add_value(ValueInfo {
            dtype: Some(value.dtype()),
            shape: Some(value.shape().iter().map(|&d| Dim::Fixed(d)).collect()),
            ..ValueInfo::named(name)
        });
        self.graph.constants.insert(id, value);
        id
    }
}

/// The constant tensor at input `i` of `node`, if the model gives one.
fn constant_input<'g>(graph: &'g Graph, node: &Node, i: usize) -> Option<&'g Tensor> {
    graph.constants.get(&node.inputs.get(i).copied().flatten()?)
}

/// `MatMulNBits`' weights as the float `[K, N]` matrix they encode: element `k` of column `n`
/// is `(q − zero_point) · scale` of its block, `q` the `bits`-wide field `k` of `B[n]`'s blocks
/// (lowest bits first), the zero point `2^(bits−1)` unless given (packed like `B`, or float).
fn dequantized_weights(graph: &Graph, node: &Node) -> std::result::Result<Tensor, String> {
    let attrs = &node.attrs;
    let int = |name: &str| attrs.req_int(name).map_err(|e| e.to_string());
    let (k, n) = (int("K")?, int("N")?);
    let bits = attrs.int("bits", 4).map_err(|e| e.to_string())?;
    let block = int("block_size")?;
    if ![2, 4, 8].contains(&bits) {
        return Err(format!("bits = {bits}: 2, 4 and 8 are supported"));
    }
    if k <= 0 || n <= 0 || block < 16 || !(block as u64).is_power_of_two() {
        return Err(format!(
            "K = {k}, N = {n}, block_size = {block}: positive sizes and a power-of-two block of at least 16"
        ));
    }
    if node.inputs.get(4).copied().flatten().is_some() {
        return Err("g_idx (act-order) is not supported".into());
    }
    let (k, n, bits, block) = (k as usize, n as usize, bits as usize, block as usize);
    let blocks = k.div_ceil(block);
    let per_byte = 8 / bits;
    let blob = block / per_byte;
    let need_constant = |what: &str| format!("its {what} must be a constant (an initializer)");
    let packed = constant_input(graph, node, 1).ok_or_else(|| need_constant("B"))?;
    let packed = packed
        .view::<u8>()
        .map_err(|_| "B must be uint8".to_string())?;
    // Checked: the sizes come from the model. B's bytes then bound every size below.
    let bytes = n.checked_mul(blocks).and_then(|nb| nb.checked_mul(blob));
    if bytes != Some(packed.len()) {
        return Err(format!(
            "B has {} bytes, N · ⌈K / block_size⌉ · block_size · bits / 8 = {bytes:?}",
            packed.len()
        ));
    }
    let scales = constant_input(graph, node, 2).ok_or_else(|| need_constant("scales"))?;
    let scales: Vec<f32> = scales
        .to_f64_vec()
        .map_err(|e| e.to_string())?
        .into_iter()
        .map(|s| s as f32)
        .collect();
    if scales.len() != n * blocks {
        return Err(format!("scales has {} values, N · blocks = {}", scales.len(), n * blocks));
    }
    let field = |bytes: &[u8], i: usize| -> f32 {
        let byte = bytes[i / per_byte];
        ((byte >> (bits * (i % per_byte))) & ((1u16 << bits) - 1) as u8) as f32
    };
    let zero_points: Vec<f32> = match node.inputs.get(3).copied().flatten() {
        None => vec![(1u32 << (bits - 1)) as f32; n * blocks],
        Some(_) => {
            let zp = constant_input(graph, node, 3).ok_or_else(|| need_constant("zero_points"))?;
            match zp.view::<u8>() {
                Ok(bytes) => {
                    let bytes: Vec<u8> = bytes.iter().copied().collect();
                    let row = blocks.div_ceil(per_byte);
                    if bytes.len() != n * row {
                        return Err(format!(
                            "zero_points has {} bytes, N · ⌈blocks · bits / 8⌉ = {}",
                            bytes.len(),
                            n * row
                        ));
                    }
                    (0..n * blocks)
                        .map(|i| field(&bytes[(i / blocks) * row..], i % blocks))
                        .collect()
                }
                Err(_) => {
                    let zp: Vec<f32> = zp
                        .to_f64_vec()
                        .map_err(|e| e.to_string())?
                        .into_iter()
                        .map(|z| z as f32)
                        .collect();
                    if zp.len() != n * blocks {
                        return Err(format!("zero_points has {} values, N · blocks = {}", zp.len(), n * blocks));
                    }
                    zp
                }
            }
        }
    };
    let packed: Vec<u8> = packed.iter().copied().collect();
    let mut weights = vec![0f32; k * n];
    for col in 0..n {
        for b in 0..blocks {
            let bytes = &packed[(col * blocks + b) * blob..][..blob];
            let (scale, zero) = (scales[col * blocks + b], zero_points[col * blocks + b]);
            for i in 0..block.min(k - b * block) {
                weights[(b * block + i) * n + col] = (field(bytes, i) - zero) * scale;
            }
        }
    }
    Tensor::from_shape_vec(&[k, n], weights).map_err(|e| e.to_string())
}

/// A `com.microsoft` `Attention` or `MultiHeadAttention` node, read for lowering.
struct AttentionNode {
    /// `Attention`: the input and the packed projection weights and bias; `MultiHeadAttention`:
    /// query, key, value and the packed projection bias.
    inputs: Vec<Option<ValueId>>,
    packed: bool,
    heads: i64,
    /// `[Dq, Dk, Dv]` of the packed projection.
    hidden: Option<[usize; 3]>,
    /// The key mask and its rank (1: lengths, 2: 0/1 per key).
    mask: Option<(ValueId, usize)>,
    /// `attention_bias`: added to the scores, broadcast to `[batch, heads, S, T]`.
    bias: Option<ValueId>,
    causal: bool,
    scale: f32,
    filter: f32,
}

impl AttentionNode {
    fn read(graph: &Graph, node: &Node) -> std::result::Result<AttentionNode, String> {
        let packed = node.op_type == "Attention";
        let input = |i: usize| node.inputs.get(i).copied().flatten();
        let attrs = &node.attrs;
        let heads = attrs.req_int("num_heads").map_err(|e| e.to_string())?;
        if heads <= 0 {
            return Err(format!("num_heads = {heads} must be positive"));
        }
        let (mask_at, bias_at, cache) = if packed {
            (3, 5, [4, 6])
        } else {
            (4, 5, [6, 7])
        };
        if cache.iter().any(|&i| input(i).is_some()) || node.outputs.iter().skip(1).any(Option::is_some) {
            return Err("a KV cache (past inputs, present outputs) is not supported".into());
        }
        if !packed && (input(1).is_none() || input(2).is_none()) {
            return Err("query, key and value must all be given (packed QKV is not supported)".into());
        }
        for i in if packed { 0..1 } else { 0..3 } {
            let rank = input(i).and_then(|v| graph.value(v).shape.as_ref().map(Vec::len));
            if rank != Some(3) {
                return Err(format!(
                    "input {i} must be a 3-D [batch, sequence, hidden] tensor (declared rank {rank:?})"
                ));
            }
        }
        let mask = match input(mask_at) {
            None => None,
            Some(m) => match graph.value(m).shape.as_ref().map(Vec::len) {
                Some(rank @ (1 | 2)) => Some((m, rank)),
                rank => {
                    return Err(format!(
                        "the key mask must be 1-D lengths or a 2-D 0/1 mask (declared rank {rank:?})"
                    ));
                }
            },
        };
        let hidden = if packed {
            let width = constant_input(graph, node, 1)
                .map(|w| w.shape().to_vec())
                .or_else(|| {
                    graph.value(input(1)?).shape.as_ref()?.iter().map(|d| d.fixed()).collect()
                })
                .filter(|s| s.len() == 2)
                .map(|s| s[1])
                .ok_or("the weights' shape must be known (2-D)")?;
            let sizes = attrs.opt_ints("qkv_hidden_sizes").map_err(|e| e.to_string())?;
            let sizes = match sizes.as_deref() {
                None => [width / 3; 3],
                Some(&[q, k, v]) if q > 0 && k > 0 && v > 0 => [q as usize, k as usize, v as usize],
                Some(other) => return Err(format!("qkv_hidden_sizes {other:?}: three positive sizes")),
            };
            if sizes.iter().sum::<usize>() != width || sizes[0] != sizes[1] {
                return Err(format!(
                    "qkv_hidden_sizes {sizes:?} must sum to the weights' width {width}, with Q and K equal"
                ));
            }
            Some(sizes)
        } else {
            None
        };
        Ok(AttentionNode {
            inputs: node.inputs.iter().take(4).copied().collect(),
            packed,
            heads,
            hidden,
            mask,
            bias: input(bias_at),
            causal: attrs.int("unidirectional", 0).map_err(|e| e.to_string())? != 0,
            scale: attrs.float("scale", 0.0).map_err(|e| e.to_string())?,
            filter: attrs.float("mask_filter_value", -10000.0).map_err(|e| e.to_string())?,
        })
    }

    fn lower(&self, lowering: &mut Lowering<'_>, output: ValueId) {
        let given = |i: usize| self.inputs.get(i).copied().flatten();
        let (q, k, v) = if self.packed {
            let x = given(0).expect("checked: the input is present");
            let weights = given(1).expect("checked: the weights are present");
            let mut qkv = lowering.push("MatMul", 13, Attributes::new(), vec![x, weights], None);
            if let Some(bias) = given(2) {
                qkv = lowering.add(qkv, bias, None);
            }
            let [dq, dk, dv] = self.hidden.expect("read: packed attention has its sizes");
            let sizes = lowering.constant(
                Tensor::from_shape_vec(&[3], vec![dq as i64, dk as i64, dv as i64])
                    .expect("three sizes"),
            );
            let parts = lowering.push_many("Split", 18, ints_attr("axis", -1), vec![Some(qkv), Some(sizes)], 3);
            (parts[0], parts[1], parts[2])
        } else {
            let (mut q, mut k, mut v) = (
                given(0).expect("checked"),
                given(1).expect("checked"),
                given(2).expect("checked"),
            );
            if let Some(bias) = given(3) {
                let attrs = ints_attr("axis", 0).with("num_outputs", AttrValue::Int(3));
                let parts = lowering.push_many("Split", 18, attrs, vec![Some(bias)], 3);
                q = lowering.add(q, parts[0], None);
                k = lowering.add(k, parts[1], None);
                v = lowering.add(v, parts[2], None);
            }
            (q, k, v)
        };
        // ONNX Runtime adds the key mask's bias and `attention_bias` to the scores.
        let mask = self
            .mask
            .map(|(mask, rank)| self.additive_mask(lowering, mask, rank, k));
        let mask = match (mask, self.bias) {
            (Some(a), Some(b)) => Some(lowering.add(a, b, None)),
            (a, b) => a.or(b),
        };
        let mut inputs = vec![Some(q), Some(k), Some(v)];
        inputs.extend(mask.map(Some));
        let mut attrs = Attributes::new()
            .with("q_num_heads", AttrValue::Int(self.heads))
            .with("kv_num_heads", AttrValue::Int(self.heads))
            .with("is_causal", AttrValue::Int(i64::from(self.causal)));
        if self.scale != 0.0 {
            attrs.insert("scale", AttrValue::Float(self.scale));
        }
        lowering.push_node("Attention", 23, attrs, inputs, vec![Some(output)]);
    }

    /// `(1 − mask) · mask_filter_value` as `[batch, 1, 1, T]`, from a 2-D 0/1 mask or from
    /// 1-D lengths (key `j` of batch `b` counts when `j < lengths[b]`; `T` is `key`'s length).
    fn additive_mask(&self, lowering: &mut Lowering<'_>, mask: ValueId, rank: usize, key: ValueId) -> ValueId {
        let none = Attributes::new;
        let ones = if rank == 2 {
            lowering.push("Cast", 19, ints_attr("to", FLOAT), vec![mask], None)
        } else {
            let attrs = ints_attr("start", 1).with("end", AttrValue::Int(2));
            let length = lowering.push("Shape", 15, attrs, vec![key], None);
            let length = lowering.push("Squeeze", 13, none(), vec![length], None);
            let zero = lowering.constant(Tensor::scalar(0i64));
            let one = lowering.constant(Tensor::scalar(1i64));
            let positions = lowering.push("Range", 11, none(), vec![zero, length, one], None);
            let lengths = lowering.push("Cast", 19, ints_attr("to", INT64), vec![mask], None);
            let axis = lowering.constant(Tensor::from_shape_vec(&[1], vec![1i64]).expect("one axis"));
            let lengths = lowering.push("Unsqueeze", 13, none(), vec![lengths, axis], None);
            let valid = lowering.push("Less", 13, none(), vec![positions, lengths], None);
            lowering.push("Cast", 19, ints_attr("to", FLOAT), vec![valid], None)
        };
        let one = lowering.constant(Tensor::scalar(1f32));
        let masked = lowering.push("Sub", 14, none(), vec![one, ones], None);
        let filter = lowering.constant(Tensor::scalar(self.filter));
        let bias = lowering.push("Mul", 14, none(), vec![masked, filter], None);
        let axes = lowering.constant(Tensor::from_shape_vec(&[2], vec![1i64, 2]).expect("two axes"));
        lowering.push("Unsqueeze", 13, none(), vec![bias, axes], None)
    }
}

/// ONNX's element type codes used by the lowered `Cast`s.
const FLOAT: i64 = 1;
const INT32: i64 = 6;
const INT64: i64 = 7;

fn ints_attr(name: &str, value: i64) -> Attributes {
    Attributes::new().with(name, AttrValue::Int(value))
}
