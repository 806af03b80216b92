//! The shape rules validation checks once shapes are inferred: the ones whose violation a
//! kernel might not notice (a blocked image's padded channels hide a channel count that does
//! not match the weights) or would only report at run time.

use super::invalid;
use crate::error::Result;
use crate::graph::{Dim, Graph, Node};

/// Checks every node of `graph` (subgraphs have their own shapes, inferred as they run).
pub(super) fn check(graph: &Graph) -> Result<()> {
    for node in &graph.nodes {
        if !(node.domain.is_empty() || node.domain == "ai.onnx") {
            continue;
        }
        let shape = |i: usize| -> Option<&[Dim]> {
            let v = node.inputs.get(i).copied().flatten()?;
            graph.value(v).shape.as_deref()
        };
        match node.op_type.as_str() {
            "Conv" | "ConvTranspose" => check_conv(node, shape(0), shape(1), shape(2))?,
            "MatMul" | "MatMulInteger" => check_matmul(node, shape(0), shape(1))?,
            "Add" | "Sub" | "Mul" | "Div" | "Pow" | "Mod" | "And" | "Or" | "Xor" | "Equal"
            | "Less" | "LessOrEqual" | "Greater" | "GreaterOrEqual" | "PRelu" | "Where" | "Max"
            | "Min" | "Sum" | "Mean" => {
                let shapes: Vec<_> = (0..node.inputs.len()).map(shape).collect();
                check_broadcast(node, &shapes)?
            }
            _ => {}
        }
        for &index in vector_inputs(node) {
            if let Some(rank) = shape(index).map(<[Dim]>::len)
                && rank != 1
            {
                return Err(invalid(
                    node,
                    format!("input {index} must be 1-D (a list of integers), it has rank {rank}"),
                ));
            }
        }
    }
    Ok(())
}

/// The inputs an op's definition makes 1-D lists: a shape, repeats, slice bounds.
fn vector_inputs(node: &Node) -> &'static [usize] {
    match node.op_type.as_str() {
        "Reshape" | "Expand" | "Tile" => &[1],
        "ConstantOfShape" => &[0],
        "Slice" if node.opset >= 10 => &[1, 2, 3, 4],
        _ => &[],
    }
}

fn fixed(shape: Option<&[Dim]>, axis: usize) -> Option<usize> {
    shape?.get(axis)?.fixed()
}

/// `Conv`: the image's channels are the weights' input channels times `group`, the output
/// channels a multiple of `group`, the bias one per output channel. `ConvTranspose`: the
/// image's channels are the weights' first dimension.
fn check_conv(node: &Node, x: Option<&[Dim]>, w: Option<&[Dim]>, b: Option<&[Dim]>) -> Result<()> {
    let group = node.attrs.int("group", 1).unwrap_or(1);
    if group < 1 {
        return Err(invalid(
            node,
            format!("group is {group}, must be at least 1"),
        ));
    }
    let group = group as usize;
    if let (Some(x), Some(w)) = (x, w)
        && x.len() != w.len()
    {
        return Err(invalid(
            node,
            format!(
                "X has rank {} and W rank {}: they must match",
                x.len(),
                w.len()
            ),
        ));
    }
    let transposed = node.op_type == "ConvTranspose";
    let (x_c, w_in, w_0) = (
        fixed(x, 1),
        fixed(w, if transposed { 0 } else { 1 }),
        fixed(w, 0),
    );
    if let (Some(x_c), Some(w_in)) = (x_c, w_in) {
        let expected = if transposed { w_in } else { w_in * group };
        if x_c != expected {
            return Err(invalid(
                node,
                format!(
                    "X has {x_c} channels, W expects {expected} ({w_in} per group × {group} groups)"
                ),
            ));
        }
    }
    if !transposed && let Some(m) = w_0 {
        if m % group != 0 {
            return Err(invalid(
                node,
                format!("W has {m} output channels, not a multiple of group {group}"),
            ));
        }
        if let Some(b) = fixed(b, 0)
            && b != m
        {
            return Err(invalid(
                node,
                format!("B has {b} values for {m} output channels"),
            ));
        }
    }
    Ok(())
}

/// `MatMul`: the inner dimensions agree (after NumPy's promotion of vectors).
fn check_matmul(node: &Node, a: Option<&[Dim]>, b: Option<&[Dim]>) -> Result<()> {
    let (Some(a), Some(b)) = (a, b) else {
        return Ok(());
    };
    if a.is_empty() || b.is_empty() {
        return Err(invalid(
            node,
            "MatMul's inputs must have rank 1 or more".into(),
        ));
    }
    let k_a = a[a.len() - 1].fixed();
    let k_b = b[b.len().saturating_sub(2).min(b.len() - 1)].fixed();
    if let (Some(k_a), Some(k_b)) = (k_a, k_b)
        && k_a != k_b
    {
        return Err(invalid(
            node,
            format!("A's last dimension is {k_a}, B's inner dimension {k_b}: they must match"),
        ));
    }
    Ok(())
}

/// NumPy broadcasting: aligned from the last axis, fixed sizes are equal or one of them 1.
fn check_broadcast(node: &Node, shapes: &[Option<&[Dim]>]) -> Result<()> {
    let rank = shapes.iter().flatten().map(|s| s.len()).max().unwrap_or(0);
    for back in 1..=rank {
        let mut size: Option<usize> = None;
        for s in shapes.iter().flatten() {
            let Some(d) = s.len().checked_sub(back).and_then(|a| s[a].fixed()) else {
                continue;
            };
            match size {
                Some(n) if d != n && d != 1 && n != 1 => {
                    let shown: Vec<_> = shapes
                        .iter()
                        .map(|s| s.map_or("?".into(), crate::graph::shape_to_string))
                        .collect();
                    return Err(invalid(
                        node,
                        format!("shapes {} do not broadcast", shown.join(" and ")),
                    ));
                }
                Some(n) if n != 1 => {}
                _ => size = Some(d),
            }
        }
    }
    Ok(())
}
