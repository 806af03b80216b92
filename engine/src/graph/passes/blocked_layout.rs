//! Moves a CNN's images into blocks of 16 channels (NCHW16c), ONNX Runtime's layout on
//! AVX-512 CPUs (its `NchwcTransformer`), wherever the kernels of the `spillway.nchw16c`
//! domain can take them: in that layout a convolution's tiles are stored without a
//! transpose and pools combine whole vectors of channels.
//!
//! Walking the nodes in order, a value is blocked when its producer was rewritten to give
//! blocks:
//! - a 2-D `Conv` or `FusedConv` (group 1, `f32`, constant 4-D weights) gives blocks when its
//!   output channels fill blocks (a multiple of 16, or a last block padded by at most a
//!   quarter of the channels: NASNet's 42, 84 and 168), its residual `Z`, if any, is blocked
//!   with the output's shape, and every reader of its output can take blocks; it reads its
//!   input in blocks when that is blocked, in planes otherwise (a network's first
//!   convolution reads the image as it comes). A convolution that only reads blocks writes
//!   planes (`blocked_output` 0);
//! - a depthwise `Conv` or `FusedConv` (one group per channel, channels that fill blocks as
//!   above, no `Z`) gives blocks when it reads blocks;
//! - `MaxPool` and `AveragePool` (2-D, one output, no dilations), `Concat` along the
//!   channels, `Relu`, and `Add` of two values of the same shape (a symbolic batch allowed)
//!   give blocks when all they read is blocked; a `Concat` whose inputs before the last leave
//!   padding becomes the blocked `Concat`, which packs the live channels;
//! - `Pad` of the height and width with a constant gives blocks when it reads blocks;
//! - `GlobalAveragePool` of blocks gives the usual planar `[N, C, 1, 1]`.
//!
//! A convolution writes blocks for a depthwise convolution, a `Relu` or an `Add` only when
//! their own readers (a few levels on) take blocks too, and for an `Add` when its other input
//! comes from a node that can give blocks: a reorder later would cost more than the planar
//! output.
//!
//! Any other reader of a blocked value, and the graph's outputs, get the planar value back
//! from a `ReorderOutput` placed right after the producer. Blocked values are 5-D
//! `[N, ⌈C / 16⌉, H, W, 16]` tensors named after their planar value, so shape inference and
//! the memory plan treat them like any tensor; where `C` leaves padding, `ReorderOutput` and
//! `GlobalAveragePool` carry it as their attribute `channels`. The pass runs in CPU-only
//! sessions on CPUs with AVX-512 ([`spillway_kernels::cpu::nn::blocked::available`]);
//! `SPILLWAY_BLOCKED=0` turns it off.

use std::collections::{HashMap, HashSet};

use spillway_kernels::cpu::nn::blocked::{BLOCK, DOMAIN};
use spillway_kernels::{AttrValue, DType};

use crate::graph::{Dim, Graph, Node, ValueId, ValueInfo};

/// The opset of the rewritten nodes.
const VERSION: i64 = 1;

/// How a node is rewritten.
#[derive(Debug, Clone, Copy)]
enum Rewrite {
    /// A convolution: whether it reads blocks and whether it writes them.
    Conv { reads: bool, writes: bool },
    /// A pool or `Concat` of blocks, giving blocks.
    Blocks,
    /// A depthwise convolution of blocks, giving blocks.
    Depthwise,
    /// `Relu` or `Add` of blocks, giving blocks: the same op on the 5-D values.
    Elementwise,
    /// `GlobalAveragePool` of blocks, giving planes.
    Global,
    /// `Pad` of the height and width of blocks (`[top, left, bottom, right]`, the constant),
    /// giving blocks.
    Pad([i64; 4], f32),
}

/// Rewrites every eligible node into the blocked layout; returns how many it rewrote.
pub fn block_layouts(graph: &mut Graph) -> usize {
    // Planar value → its blocked twin.
    let mut blocked: HashMap<ValueId, ValueId> = HashMap::new();
    let readers = Readers::of(graph);
    let mut rewritten = 0;
    for i in 0..graph.nodes.len() {
        let Some(rewrite) = rewrite_of(graph, &graph.nodes[i], &blocked, &readers) else {
            continue;
        };
        let node = blocked_node(graph, i, rewrite, &mut blocked);
        graph.nodes[i] = node;
        rewritten += 1;
    }
    if rewritten > 0 {
        restore_planar(graph, &blocked);
    }
    rewritten
}

/// The nodes reading each value, as (node index, input index), and the values whose producer
/// can give blocks from what it reads ([`may_give_blocks`]), in the graph as it was before
/// the pass: a value is looked up before any of its readers is rewritten.
struct Readers {
    readers: HashMap<ValueId, Vec<(usize, usize)>>,
    givers: HashSet<ValueId>,
}

impl Readers {
    fn of(graph: &Graph) -> Readers {
        let mut readers: HashMap<ValueId, Vec<(usize, usize)>> = HashMap::new();
        let mut givers = HashSet::new();
        for (i, node) in graph.nodes.iter().enumerate() {
            for (at, v) in node.inputs.iter().enumerate() {
                if let Some(v) = v {
                    readers.entry(*v).or_default().push((i, at));
                }
            }
            if let [Some(y)] = node.outputs[..]
                && may_give_blocks(graph, node, y, &givers)
            {
                givers.insert(y);
            }
        }
        Readers { readers, givers }
    }

    /// True when `v` is not a graph output and every node reading it takes blocks there,
    /// looking `depth` levels further through the readers that pass blocks on.
    fn take_blocks(&self, graph: &Graph, v: ValueId, depth: usize) -> bool {
        !graph.outputs.contains(&v)
            && self.readers.get(&v).is_none_or(|readers| {
                readers
                    .iter()
                    .all(|&(i, at)| takes_blocks(graph, &graph.nodes[i], at, self, depth))
            })
    }
}

/// How many levels of depthwise convolutions, `Relu`s and `Add`s a convolution looks through
/// to decide whether blocks will be read where its output goes.
const LOOK_AHEAD: usize = 4;

/// How `node` can be rewritten given the values already blocked; `None` when it cannot.
fn rewrite_of(
    graph: &Graph,
    node: &Node,
    blocked: &HashMap<ValueId, ValueId>,
    readers: &Readers,
) -> Option<Rewrite> {
    let is_blocked = |v: &Option<ValueId>| v.is_some_and(|v| blocked.contains_key(&v));
    if node.outputs.len() != 1 || node.outputs[0].is_none() || !node.subgraphs.is_empty() {
        return None;
    }
    if blockable_conv(graph, node) {
        return conv_rewrite(graph, node, blocked, readers);
    }
    if blockable_depthwise(graph, node) {
        return is_blocked(&node.inputs[0]).then_some(Rewrite::Depthwise);
    }
    if let Some((pads, value)) = spatial_pad(graph, node) {
        return is_blocked(&node.inputs[0]).then_some(Rewrite::Pad(pads, value));
    }
    let reads_blocks = !node.inputs.is_empty() && node.inputs.iter().all(is_blocked);
    if !reads_blocks {
        return None;
    }
    if plain_pool(node) || channel_concat(node) {
        return Some(Rewrite::Blocks);
    }
    if same_shape_elementwise(graph, node) {
        return Some(Rewrite::Elementwise);
    }
    (default_domain(node)
        && node.op_type == "GlobalAveragePool"
        && node.attrs.names().next().is_none())
    .then_some(Rewrite::Global)
}

fn default_domain(node: &Node) -> bool {
    node.domain.is_empty() || node.domain == "ai.onnx"
}

/// The constant weights of a `Conv` or `FusedConv` whose attributes the blocked kernels know
/// and whose declared inputs are all present, if `node` is one.
fn conv_weights<'g>(graph: &'g Graph, node: &Node) -> Option<&'g spillway_kernels::Tensor> {
    let fused = node.op_type == "FusedConv" && node.domain == "com.microsoft";
    if !(fused || node.op_type == "Conv" && default_domain(node)) {
        return None;
    }
    let mut known = spillway_kernels::cpu::nn::conv::ATTRIBUTES.to_vec();
    if fused {
        known.extend(["activation", "activation_params"]);
    }
    let w = node.inputs.get(1).copied().flatten()?;
    (node.attrs.names().all(|n| known.contains(&n))
        && node.declared_inputs == node.inputs.len()
        && node.outputs.len() == 1)
        .then(|| graph.constants.get(&w))
        .flatten()
        .filter(|w| w.dtype() == DType::F32)
}

/// A 2-D `Conv` or `FusedConv` the blocked kernel runs: group 1, `f32` constant 4-D weights,
/// at most `X, W, B, Z`, attributes it knows.
fn blockable_conv(graph: &Graph, node: &Node) -> bool {
    conv_weights(graph, node).is_some_and(|w| w.shape().len() == 4)
        && node.attrs.int("group", 1).is_ok_and(|g| g == 1)
        && node.inputs.len() <= 4
}

/// A depthwise 2-D `Conv` or `FusedConv` the blocked kernel runs: `group` equal to the channel
/// count, which may be blocked ([`paddable`]), `f32` constant `[C, 1, kH, kW]` weights, at
/// most `X, W, B`.
fn blockable_depthwise(graph: &Graph, node: &Node) -> bool {
    let weights = conv_weights(graph, node);
    let channels = weights.and_then(|w| match *w.shape() {
        [c, 1, _, _] if paddable(c) => Some(c),
        _ => None,
    });
    let image = node
        .inputs
        .first()
        .copied()
        .flatten()
        .map(|x| graph.value(x));
    let planar = image.is_some_and(|info| {
        info.dtype == Some(DType::F32)
            && matches!(info.shape.as_deref(), Some([_, Dim::Fixed(c), _, _]) if Some(*c) == channels)
    });
    channels.is_some_and(|c| node.attrs.int("group", 1).is_ok_and(|g| g as usize == c))
        && node.inputs.len() <= 3
        && planar
}

/// `Relu`, or `Add` of two `f32` values of one 4-D shape, known but for a symbolic batch
/// (one symbol is one size: an exported model's `batch`): on blocked values the same op
/// gives the blocked result.
fn same_shape_elementwise(graph: &Graph, node: &Node) -> bool {
    let arity = match node.op_type.as_str() {
        "Relu" => 1,
        "Add" => 2,
        _ => return false,
    };
    let shapes: Option<Vec<&ValueInfo>> = node
        .inputs
        .iter()
        .map(|v| v.map(|v| graph.value(v)))
        .collect();
    default_domain(node)
        && node.attrs.names().next().is_none()
        && node.inputs.len() == arity
        && shapes.is_some_and(|infos| {
            infos.iter().all(|info| {
                info.dtype == Some(DType::F32)
                    && info.shape == infos[0].shape
                    && info.shape.as_deref().is_some_and(|s| {
                        s.len() == 4
                            && matches!(s[0], Dim::Fixed(_) | Dim::Symbol(_))
                            && s[1..].iter().all(|d| matches!(d, Dim::Fixed(_)))
                    })
            })
        })
}

/// True when `node`'s output `y` may be blocked, judged by the node and by what it reads
/// (`givers` holds the values before `node` that may be blocked): a convolution with whole
/// blocks of output channels (it reads planes or blocks), a depthwise convolution whose image
/// may be blocked, or a pool, `Concat` or elementwise node of the pass all of whose inputs may
/// be.
fn may_give_blocks(graph: &Graph, node: &Node, y: ValueId, givers: &HashSet<ValueId>) -> bool {
    if blockable_conv(graph, node) {
        return block_count(graph.value(y)).is_some();
    }
    if blockable_depthwise(graph, node) {
        return node.inputs[0].is_some_and(|x| givers.contains(&x));
    }
    if spatial_pad(graph, node).is_some() {
        return node.inputs[0].is_some_and(|x| givers.contains(&x));
    }
    (plain_pool(node) || channel_concat(node) || same_shape_elementwise(graph, node))
        && node
            .inputs
            .iter()
            .all(|v| v.is_some_and(|v| givers.contains(&v)))
}

/// `[top, left, bottom, right]` and the constant of a `Pad` in constant mode of a 4-D `f32`
/// image's height and width only, its pads (and constant, if given) constant; `None` for any
/// other node.
fn spatial_pad(graph: &Graph, node: &Node) -> Option<([i64; 4], f32)> {
    if node.op_type != "Pad"
        || !default_domain(node)
        || node.outputs.len() != 1
        || node.attrs.names().any(|n| n != "mode" && n != "pads")
        || node.attrs.string("mode", "constant").ok()? != "constant"
    {
        return None;
    }
    let x = graph.value(node.inputs.first().copied().flatten()?);
    if x.dtype != Some(DType::F32) || x.shape.as_ref().is_none_or(|s| s.len() != 4) {
        return None;
    }
    let constant = |i: usize| {
        node.inputs
            .get(i)
            .copied()
            .flatten()
            .map(|v| graph.constants.get(&v))
    };
    // Opset 11 moved the pads into input 1, and 18 added the axes (input 3).
    let pads = match node.opset {
        ..11 => node.attrs.opt_ints("pads").ok()??,
        _ => constant(1)??.to_i64_vec().ok()?,
    };
    let value = match constant(2) {
        None => 0.0,
        Some(t) => {
            let t = t?;
            (t.dtype() == DType::F32 && t.len() == 1).then(|| t.to_f64_vec().ok())??[0] as f32
        }
    };
    match (pads.as_slice(), node.inputs.get(3).copied().flatten()) {
        (&[0, 0, top, left, 0, 0, bottom, right], None) => {
            Some(([top, left, bottom, right], value))
        }
        _ => None,
    }
}

/// A 2-D `MaxPool` or `AveragePool` the blocked kernel runs: one output, no dilations.
fn plain_pool(node: &Node) -> bool {
    let known = [
        "auto_pad",
        "kernel_shape",
        "pads",
        "strides",
        "ceil_mode",
        "count_include_pad",
        "dilations",
        "storage_order",
    ];
    matches!(node.op_type.as_str(), "MaxPool" | "AveragePool")
        && default_domain(node)
        && node.opset >= 7
        && node.outputs.len() == 1
        && node.inputs.len() == 1
        && node.attrs.names().all(|n| known.contains(&n))
        && node
            .attrs
            .opt_ints("dilations")
            .is_ok_and(|d| d.is_none_or(|d| d.iter().all(|&d| d == 1)))
        && node.attrs.int("storage_order", 0).is_ok_and(|s| s == 0)
        && node
            .attrs
            .opt_ints("kernel_shape")
            .is_ok_and(|k| k.is_some_and(|k| k.len() == 2))
}

/// A `Concat` along the channels of 4-D images.
fn channel_concat(node: &Node) -> bool {
    node.op_type == "Concat"
        && default_domain(node)
        && node.attrs.names().all(|n| n == "axis")
        && node.attrs.int("axis", 0).is_ok_and(|a| a == 1 || a == -3)
}

/// True when `node` can read a blocked value as its input `at` (when its other inputs allow);
/// for the nodes that pass blocks on, when their readers take blocks too (`depth` levels on).
fn takes_blocks(graph: &Graph, node: &Node, at: usize, readers: &Readers, depth: usize) -> bool {
    if blockable_conv(graph, node) {
        return at == 0 || at == 3;
    }
    let passes_on = |node: &Node| {
        depth > 0
            && node.outputs.len() == 1
            && node.outputs[0].is_some_and(|y| readers.take_blocks(graph, y, depth - 1))
    };
    if blockable_depthwise(graph, node) {
        return at == 0 && passes_on(node);
    }
    if same_shape_elementwise(graph, node) {
        let others = node
            .inputs
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != at)
            .all(|(_, v)| v.is_some_and(|v| readers.givers.contains(&v)));
        return others && passes_on(node);
    }
    plain_pool(node)
        || channel_concat(node)
        || (at == 0 && spatial_pad(graph, node).is_some())
        || (default_domain(node) && node.op_type == "GlobalAveragePool")
}

/// The rewrite of a convolution ([`blockable_conv`]), if it has one. It writes blocks only
/// when every reader of its output takes blocks: a planar reader (a depthwise convolution, a
/// `Flatten`) would need a reorder, a copy of the whole output.
fn conv_rewrite(
    graph: &Graph,
    node: &Node,
    blocked: &HashMap<ValueId, ValueId>,
    readers: &Readers,
) -> Option<Rewrite> {
    let x = node.inputs.first().copied().flatten()?;
    let planar = |v: ValueId| {
        let info = graph.value(v);
        (info.dtype == Some(DType::F32) && info.shape.as_ref().is_some_and(|s| s.len() == 4))
            .then_some(())
    };
    let y = node.outputs[0]?;
    planar(x)?;
    planar(y)?;
    // The blocked kernel adds a residual of the output's shape only (no broadcasting).
    let z = node.inputs.get(3).copied().flatten();
    if let Some(z) = z {
        let (zs, ys) = (&graph.value(z).shape, &graph.value(y).shape);
        let known = ys
            .as_ref()
            .is_some_and(|s| s.iter().all(|d| *d != Dim::Unknown));
        if zs != ys || !known {
            return None;
        }
    }
    let readers_take_blocks = readers.take_blocks(graph, y, LOOK_AHEAD);
    let reads = blocked.contains_key(&x);
    let writes = block_count(graph.value(y)).is_some()
        && z.is_none_or(|z| blocked.contains_key(&z))
        && readers_take_blocks;
    (reads || writes).then_some(Rewrite::Conv { reads, writes })
}

/// `⌈C / 16⌉` for a planar `[N, C, H, W]` value whose fixed `C` fills its blocks well enough
/// ([`paddable`]).
fn block_count(info: &ValueInfo) -> Option<usize> {
    match info.shape.as_deref()? {
        [_, Dim::Fixed(c), _, _] if paddable(*c) => Some(c.div_ceil(BLOCK)),
        _ => None,
    }
}

/// True when `c` channels may be stored in blocks: whole ones, or with a last block's
/// padding at most a quarter of `c` (42 channels in 48, 168 in 176; not 24 in 32), which the
/// blocked kernels then compute and move for nothing.
fn paddable(c: usize) -> bool {
    c > 0 && 4 * (c.div_ceil(BLOCK) * BLOCK - c) <= c
}

/// The fixed channel count of a planar `[N, C, H, W]` value.
fn channel_count(info: &ValueInfo) -> Option<usize> {
    match info.shape.as_deref()? {
        [_, Dim::Fixed(c), _, _] => Some(*c),
        _ => None,
    }
}

/// Node `i` rewritten as `rewrite` says, its inputs read from their blocked twins where it
/// reads blocks, and its output's blocked twin made (and recorded) where it writes them.
fn blocked_node(
    graph: &mut Graph,
    i: usize,
    rewrite: Rewrite,
    blocked: &mut HashMap<ValueId, ValueId>,
) -> Node {
    let mut node = graph.nodes[i].clone();
    let twin = |v: &mut Option<ValueId>, blocked: &HashMap<ValueId, ValueId>| {
        if let Some(b) = v.and_then(|p| blocked.get(&p)) {
            *v = Some(*b);
        }
    };
    let writes = match rewrite {
        Rewrite::Conv { reads, writes } => {
            if reads {
                twin(&mut node.inputs[0], blocked);
            }
            if let Some(z) = node.inputs.get_mut(3).filter(|_| writes) {
                twin(z, blocked);
            }
            if !writes {
                node.attrs.insert("blocked_output", AttrValue::Int(0));
            }
            node.op_type = "Conv".into();
            writes
        }
        Rewrite::Blocks => {
            if node.op_type == "Concat" {
                concat_of_blocks(graph, &mut node);
            }
            node.inputs.iter_mut().for_each(|v| twin(v, blocked));
            node.attrs.remove("dilations");
            node.attrs.remove("storage_order");
            true
        }
        Rewrite::Depthwise => {
            twin(&mut node.inputs[0], blocked);
            node.op_type = "Conv".into();
            true
        }
        Rewrite::Elementwise => {
            node.inputs.iter_mut().for_each(|v| twin(v, blocked));
            true
        }
        Rewrite::Pad([top, left, bottom, right], value) => {
            twin(&mut node.inputs[0], blocked);
            node.inputs.truncate(1);
            node.declared_inputs = 1;
            node.attrs = spillway_kernels::Attributes::default();
            node.attrs
                .insert("pads", AttrValue::Ints(vec![top, left, bottom, right]));
            node.attrs.insert("value", AttrValue::Float(value));
            true
        }
        Rewrite::Global => {
            if let Some(c) = node.inputs[0].and_then(|x| padded_channels(graph.value(x))) {
                node.attrs.insert("channels", AttrValue::Int(c as i64));
            }
            twin(&mut node.inputs[0], blocked);
            false
        }
    };
    if writes {
        let y = node.outputs[0].expect("rewritten nodes have their output");
        let info = graph.value(y).clone();
        let shape = info.shape.as_deref().map(blocked_shape);
        let b = graph.add_value(ValueInfo {
            name: format!("{}_nchw16c", info.name),
            dtype: info.dtype,
            shape,
            kind: info.kind,
        });
        blocked.insert(y, b);
        node.outputs[0] = Some(b);
    }
    // `Concat` of whole blocks stays the default domain's: along axis 1 it joins blocks as
    // they are; so do `Relu` and `Add`, which compute each element alone.
    let default_concat = node.op_type == "Concat" && node.domain != DOMAIN;
    if !matches!(rewrite, Rewrite::Elementwise) && !default_concat {
        node.domain = DOMAIN.into();
        node.opset = VERSION;
    }
    node
}

/// The planar `Concat` `node` made a concatenation of blocks: the default domain's along axis
/// 1 when every input but the last fills its blocks (the blocks join as they are), else the
/// blocked `Concat`, told each input's live channels.
fn concat_of_blocks(graph: &Graph, node: &mut Node) {
    let channels: Vec<usize> = node
        .inputs
        .iter()
        .map(|v| {
            v.and_then(|v| channel_count(graph.value(v)))
                .expect("blocked values have fixed channels")
        })
        .collect();
    let whole_before_last = channels
        .split_last()
        .is_some_and(|(_, before)| before.iter().all(|c| c % BLOCK == 0));
    if whole_before_last {
        node.attrs.insert("axis", AttrValue::Int(1));
        return;
    }
    node.attrs.remove("axis");
    node.attrs.insert(
        "channels",
        AttrValue::Ints(channels.iter().map(|&c| c as i64).collect()),
    );
    node.domain = DOMAIN.into();
}

/// The channel count of a planar value whose blocks are padded (not a multiple of 16).
fn padded_channels(info: &ValueInfo) -> Option<usize> {
    channel_count(info).filter(|c| c % BLOCK != 0)
}

/// `[N, ⌈C / 16⌉, H, W, 16]` for a planar `[N, C, H, W]` (an unknown block count where `C` is
/// not fixed).
pub(crate) fn blocked_shape(planar: &[Dim]) -> Vec<Dim> {
    let mut shape = planar.to_vec();
    if let Some(c) = shape.get_mut(1) {
        *c = c
            .fixed()
            .map_or(Dim::Unknown, |c| Dim::Fixed(c.div_ceil(BLOCK)));
    }
    shape.push(Dim::Fixed(BLOCK));
    shape
}

/// Gives every planar value that is still read (by a node not rewritten, or as a graph
/// output) a `ReorderOutput` from its blocked twin, right after the twin's producer.
fn restore_planar(graph: &mut Graph, blocked: &HashMap<ValueId, ValueId>) {
    let mut read: HashSet<ValueId> = graph.outputs.iter().copied().collect();
    for node in &graph.nodes {
        read.extend(node.present_inputs());
    }
    let producers = graph.producers();
    let mut after: HashMap<usize, Vec<Node>> = HashMap::new();
    for (&planar, &twin) in blocked {
        if !read.contains(&planar) {
            continue;
        }
        let at = producers[&twin];
        let mut attrs = spillway_kernels::Attributes::default();
        if let Some(c) = padded_channels(graph.value(planar)) {
            attrs.insert("channels", AttrValue::Int(c as i64));
        }
        after.entry(at).or_default().push(Node {
            name: format!("{}_reorder", graph.nodes[at].name),
            op_type: "ReorderOutput".into(),
            domain: DOMAIN.into(),
            opset: VERSION,
            attrs,
            inputs: vec![Some(twin)],
            declared_inputs: 1,
            outputs: vec![Some(planar)],
            subgraphs: Vec::new(),
            type_attrs: Vec::new(),
        });
    }
    let nodes = std::mem::take(&mut graph.nodes);
    for (i, node) in nodes.into_iter().enumerate() {
        graph.nodes.push(node);
        graph.nodes.extend(after.remove(&i).unwrap_or_default());
    }
}
