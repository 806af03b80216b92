//! Which values keep one shape for every input of the session's input shapes, and which keep
//! one content. A device plan is compiled for fixed shapes: a node whose values all have fixed
//! shapes may run there in one plan; a node after a data-dependent shape (what follows
//! `NonZero` or `NonMaxSuppression` in a detection model) may run there only when its output
//! shapes follow from its input shapes alone ([`shapes_follow_input_shapes`]), in a plan
//! compiled per shape. A shape-giving input computed from such shapes (the `[N, 256, 7, 7]` a
//! detector builds from the number of boxes it kept) is *shape arithmetic*: it runs on the
//! host, and a device plan compiled for it takes its content as part of its key.

use crate::exec::value_ops::VALUE_OPS;
use crate::graph::{Graph, Node};

/// Whether the output shapes of `node` follow from the shapes of its inputs and the contents
/// of its shape arithmetic alone: not a data-dependent op, control flow or a sequence op, and
/// every input whose value gives a shape is a constant of `graph` or shape arithmetic
/// ([`FixedValues::shape_arithmetic`]). Such a node can be compiled for each set of input
/// shapes (and shape-arithmetic contents) it meets.
pub fn shapes_follow_input_shapes(graph: &Graph, fixed: &FixedValues, node: &Node) -> bool {
    let op = node.op_type.as_str();
    let standard = node.domain.is_empty() || node.domain == "ai.onnx";
    standard
        && node.subgraphs.is_empty()
        && !DATA_DEPENDENT.contains(&op)
        && (op == "Identity" || !VALUE_OPS.contains(&op))
        && shape_giving_inputs(op)
            .iter()
            .filter_map(|&i| node.inputs.get(i).copied().flatten())
            .all(|v| graph.constants.contains_key(&v) || fixed.shape_arithmetic[v.index()])
}

/// Ops whose output shapes depend on the values of their inputs, whatever is known of them.
const DATA_DEPENDENT: &[&str] = &["NonZero", "NonMaxSuppression", "Compress", "Unique"];

/// Whether nothing is known of `node`'s outputs from its inputs: a foreign domain, control
/// flow, a data-dependent shape or a value op (sequences, optionals).
fn opaque(node: &Node) -> bool {
    let op = node.op_type.as_str();
    let foreign = !(node.domain.is_empty() || node.domain == "ai.onnx");
    foreign
        || !node.subgraphs.is_empty()
        || DATA_DEPENDENT.contains(&op)
        || (op != "Identity" && VALUE_OPS.contains(&op))
}

/// Ops whose outputs are random: never one content.
const RANDOM: &[&str] = &[
    "RandomNormal",
    "RandomNormalLike",
    "RandomUniform",
    "RandomUniformLike",
    "Multinomial",
    "Bernoulli",
];

/// The inputs of `op_type` whose values (not only shapes) fix the output shapes.
fn shape_giving_inputs(op_type: &str) -> &'static [usize] {
    match op_type {
        "Reshape" | "Expand" | "Tile" | "Upsample" | "TopK" | "Squeeze" | "Unsqueeze" | "Split"
        | "OneHot" | "CenterCropPad" | "AffineGrid" | "DFT" => &[1],
        "ReduceSum" | "ReduceMean" | "ReduceMax" | "ReduceMin" | "ReduceProd" | "ReduceL1"
        | "ReduceL2" | "ReduceSumSquare" | "ReduceLogSum" | "ReduceLogSumExp" => &[1],
        "ConstantOfShape" | "BlackmanWindow" | "HannWindow" | "HammingWindow" => &[0],
        "Range" => &[0, 1, 2],
        "Slice" => &[1, 2, 3, 4],
        "Pad" => &[1, 3],
        "Resize" => &[1, 2, 3],
        "Col2Im" => &[1, 2],
        "MaxUnpool" => &[2],
        "STFT" => &[1, 2, 3],
        "MelWeightMatrix" => &[0, 1, 2],
        _ => &[],
    }
}

/// Per value (indexed by value id): whether its shape, and whether its content, is the same on
/// every run whose inputs have the shapes the session was built for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FixedValues {
    /// The value's shape is fixed by the input shapes.
    pub shape: Vec<bool>,
    /// The value's content is fixed by the input shapes (constants, `Shape` of a fixed shape
    /// and the arithmetic on them): it may be folded into a constant.
    pub content: Vec<bool>,
    /// The value is computed from shapes alone (`Shape` of any value, constants and the
    /// arithmetic on them) into a fixed shape, without being fixed itself: the shape
    /// arithmetic after a data-dependent op, a few integers that the host computes.
    pub shape_arithmetic: Vec<bool>,
}

impl FixedValues {
    /// The analysis of `graph`, whose inputs are taken to have fixed shapes.
    pub fn of(graph: &Graph) -> FixedValues {
        let n = graph.values.len();
        let mut fixed = FixedValues {
            shape: vec![false; n],
            content: vec![false; n],
            shape_arithmetic: vec![false; n],
        };
        // Shape-derived (fixed or not), by value: constants and what `Shape` gives.
        let mut from_shapes = vec![false; n];
        for v in graph.constants.keys() {
            fixed.shape[v.index()] = true;
            fixed.content[v.index()] = true;
            from_shapes[v.index()] = true;
        }
        for v in &graph.inputs {
            fixed.shape[v.index()] = true;
        }
        for node in &graph.nodes {
            let (shape, content) = fixed.of_outputs(node);
            let derived = !opaque(node)
                && !RANDOM.contains(&node.op_type.as_str())
                && (matches!(node.op_type.as_str(), "Shape" | "Size")
                    || node.present_inputs().all(|v| from_shapes[v.index()]));
            for v in node.present_outputs() {
                fixed.shape[v.index()] = shape;
                fixed.content[v.index()] = content;
                from_shapes[v.index()] = derived && shape;
                fixed.shape_arithmetic[v.index()] = derived && shape && !content;
            }
        }
        fixed
    }

    /// Whether every value `node` reads and writes has a fixed shape.
    pub fn node_has_fixed_shapes(&self, node: &Node) -> bool {
        node.present_inputs()
            .chain(node.present_outputs())
            .all(|v| self.shape[v.index()])
    }

    /// Whether `node` computes shape arithmetic (every output is): such a node runs on the
    /// host, whose device consumers take its content as part of their plans' key.
    pub fn computes_shape_arithmetic(&self, node: &Node) -> bool {
        let mut outputs = node.present_outputs().peekable();
        outputs.peek().is_some() && outputs.all(|v| self.shape_arithmetic[v.index()])
    }

    /// (shape fixed, content fixed) for the outputs of `node`.
    fn of_outputs(&self, node: &Node) -> (bool, bool) {
        let op = node.op_type.as_str();
        if opaque(node) {
            return (false, false);
        }
        let input = |i: usize| node.inputs.get(i).copied().flatten();
        let shapes_fixed = node.present_inputs().all(|v| self.shape[v.index()]);
        if op == "Shape" || op == "Size" {
            return (true, shapes_fixed);
        }
        let content =
            !RANDOM.contains(&op) && node.present_inputs().all(|v| self.content[v.index()]);
        let giving_fixed = shape_giving_inputs(op)
            .iter()
            .filter_map(|&i| input(i))
            .all(|v| self.content[v.index()]);
        (content || (shapes_fixed && giving_fixed), content)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::ValueId;
    use crate::hybrid::test_graphs::{graph_with, node};
    use spillway_kernels::Tensor;

    #[test]
    fn a_data_dependent_shape_taints_what_follows_and_shape_arithmetic_is_content() {
        // x(0) → Relu → a(1) → NonZero → nz(2) → Transpose → t(3)
        //              a → Shape → s(4) → Reshape(a, s) → r(5)
        //              t → Shape → ts(6) → Reshape(a, ts) → q(7)
        //              a → TopK(k = const 8) → (9, 10); a → TopK(k = ts) → (11, 12)
        let mut g = graph_with(13);
        g.inputs = vec![ValueId::new(0)];
        g.constants.insert(
            ValueId::new(8),
            Tensor::from_shape_vec(&[1], vec![2i64]).unwrap(),
        );
        g.nodes = vec![
            node("Relu", &[0], &[1]),
            node("NonZero", &[1], &[2]),
            node("Transpose", &[2], &[3]),
            node("Shape", &[1], &[4]),
            node("Reshape", &[1, 4], &[5]),
            node("Shape", &[3], &[6]),
            node("Reshape", &[1, 6], &[7]),
            node("TopK", &[1, 8], &[9, 10]),
            node("TopK", &[1, 6], &[11, 12]),
        ];
        let f = FixedValues::of(&g);
        let shape: Vec<usize> = (0..13).filter(|&v| f.shape[v]).collect();
        let content: Vec<usize> = (0..13).filter(|&v| f.content[v]).collect();
        assert_eq!(shape, [0, 1, 4, 5, 6, 8, 9, 10]);
        assert_eq!(content, [4, 8]);
        assert!(f.node_has_fixed_shapes(&g.nodes[0]));
        assert!(!f.node_has_fixed_shapes(&g.nodes[1]));
        assert!(!f.node_has_fixed_shapes(&g.nodes[6]));
    }

    #[test]
    fn shapes_follow_input_shapes_unless_data_or_a_computed_shape_gives_them() {
        // x(0) → NonZero → nz(1) → Transpose → t(2) → Shape → s(3)
        // Reshape(t, const 4) → r(5); Reshape(t, s) → q(6); Relu(t) → u(7)
        let mut g = graph_with(8);
        g.inputs = vec![ValueId::new(0)];
        g.constants.insert(
            ValueId::new(4),
            Tensor::from_shape_vec(&[1], vec![-1i64]).unwrap(),
        );
        g.nodes = vec![
            node("NonZero", &[0], &[1]),
            node("Transpose", &[1], &[2]),
            node("Shape", &[2], &[3]),
            node("Reshape", &[2, 4], &[5]),
            node("Reshape", &[2, 3], &[6]),
            node("Relu", &[2], &[7]),
        ];
        let follow: Vec<bool> = g
            .nodes
            .iter()
            .map(|n| shapes_follow_input_shapes(&g, &FixedValues::of(&g), n))
            .collect();
        // `s` is shape arithmetic: a plan keyed by its content compiles `Reshape(t, s)`.
        assert_eq!(follow, [false, true, true, true, true, true]);
        let f = FixedValues::of(&g);
        let arithmetic: Vec<usize> = (0..8).filter(|&v| f.shape_arithmetic[v]).collect();
        assert_eq!(arithmetic, [3]);
        assert!(f.computes_shape_arithmetic(&g.nodes[2]));
        assert!(!f.computes_shape_arithmetic(&g.nodes[4]));
    }

    #[test]
    fn random_ops_and_subgraphs_fix_no_content() {
        let mut g = graph_with(4);
        g.inputs = vec![ValueId::new(0)];
        g.nodes = vec![
            node("RandomNormalLike", &[0], &[1]),
            node("Shape", &[1], &[2]),
            node("Mul", &[2, 2], &[3]),
        ];
        let f = FixedValues::of(&g);
        assert!(f.shape[1] && !f.content[1]);
        assert!(f.content[2] && f.content[3]);
    }
}
