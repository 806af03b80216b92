//! Moves a CNN's images into blocks of 16 channels (NCHW16c), ONNX Runtime's layout on
//! AVX-512 CPUs (its `NchwcTransformer`; on AVX2 it blocks 8 channels, and we keep 16 there,
//! two vectors), wherever the kernels of the `spillway.nchw16c`
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
//!   channels, `Relu`, and `Add` or `Mul` of two values of the same shape or of one that
//!   scales the other's channels (`[N, C, 1, 1]`: MobileNetV3's squeeze-and-excitation)
//!   give blocks when all they read is blocked (symbolic sizes allowed: a model's `batch`, or
//!   a height that shape inference proved equal, [`crate::graph::Dim::derived`]); a `Concat`
//!   whose inputs before the last leave padding becomes the blocked `Concat`, which packs the
//!   live channels;
//! - `Pad` of the height and width with a constant gives blocks when it reads blocks;
//! - `GlobalAveragePool` of blocks gives the usual planar `[N, C, 1, 1]`.
//!
//! A `Relu` that alone reads a concatenation of blocks is then folded into it
//! ([`concat_relu`]), and one read only by depthwise convolutions into them
//! ([`depthwise_relu`]).
//!
//! A convolution writes blocks for a depthwise convolution, a `Relu`, an `Add` or a `Mul`
//! only when their own readers (a few levels on) take blocks too, and for an `Add` or a `Mul`
//! when its other input comes from a node that can give blocks: a reorder later would cost
//! more than the planar output.
//!
//! Any other reader of a blocked value, and the graph's outputs, get the planar value back
//! from a `ReorderOutput` placed right after the producer. Blocked values are 5-D
//! `[N, ⌈C / 16⌉, H, W, 16]` tensors named after their planar value, so shape inference and
//! the memory plan treat them like any tensor; where `C` leaves padding, `ReorderOutput` and
//! `GlobalAveragePool` carry it as their attribute `channels`. The pass runs in CPU-only
//! sessions on CPUs with AVX-512 or AVX2 + FMA ([`spillway_kernels::cpu::nn::blocked::available`])
//! whose kernel options leave a packed GEMM; [`super::PassOptions::blocked_layout`] (the
//! session's `ActivationLayout::Planar`) turns it off.

use std::collections::{HashMap, HashSet};

mod concat_relu;
mod depthwise_relu;
mod eligible;

use spillway_kernels::cpu::nn::blocked::{BLOCK, DOMAIN};
use spillway_kernels::{AttrValue, DType};

use crate::graph::{Dim, Graph, Node, ValueId, ValueInfo};
use eligible::{
    block_count, blockable_conv, blockable_depthwise, blockable_elementwise, channel_concat,
    channel_count, default_domain, padded_channels, plain_pool, spatial_pad,
};

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
    /// `Relu`, `Add` or `Mul` of blocks, giving blocks: the same op on the 5-D values.
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
        concat_relu::fold_relus_into_concats(graph);
        depthwise_relu::fold_relus_into_depthwise(graph);
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
    if blockable_elementwise(graph, node) {
        return Some(Rewrite::Elementwise);
    }
    (default_domain(node)
        && node.op_type == "GlobalAveragePool"
        && node.attrs.names().next().is_none())
    .then_some(Rewrite::Global)
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
    (plain_pool(node) || channel_concat(node) || blockable_elementwise(graph, node))
        && node
            .inputs
            .iter()
            .all(|v| v.is_some_and(|v| givers.contains(&v)))
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
    if blockable_elementwise(graph, node) {
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
    // they are; so do `Relu`, `Add` and `Mul`, which compute each element alone (a padded
    // channel's lanes stay finite: zero, or a product or sum of finite lanes).
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
