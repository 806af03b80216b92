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
        // An initializer's shape is its tensor's when its value info declares none.
        let shapes: Vec<Option<Vec<Dim>>> = node
            .inputs
            .iter()
            .map(|v| {
                let v = (*v)?;
                graph.value(v).shape.clone().or_else(|| {
                    let t = graph.constants.get(&v)?;
                    Some(t.shape().iter().map(|&d| Dim::Fixed(d)).collect())
                })
            })
            .collect();
        let shape = |i: usize| -> Option<&[Dim]> { shapes.get(i)?.as_deref() };
        match node.op_type.as_str() {
            "Conv" | "ConvTranspose" => check_conv(node, shape(0), shape(1), shape(2))?,
            "MaxPool" | "AveragePool" | "LpPool" => check_pool(node, shape(0))?,
            "Upsample" if node.opset >= 10 => {
                return Err(invalid(
                    node,
                    "Upsample is deprecated from opset 10 (Resize replaces it)".into(),
                ));
            }
            "MatMul" | "MatMulInteger" => check_matmul(node, shape(0), shape(1))?,
            "Add" | "Sub" | "Mul" | "Div" | "Pow" | "Mod" | "And" | "Or" | "Xor" | "Equal"
            | "Less" | "LessOrEqual" | "Greater" | "GreaterOrEqual" | "PRelu" | "Where" | "Max"
            | "Min" | "Sum" | "Mean" => {
                let shapes: Vec<_> = (0..node.inputs.len()).map(shape).collect();
                check_broadcast(node, &shapes)?
            }
            "ArgMax" | "ArgMin" => check_axis(node, shape(0))?,
            "GlobalAveragePool" | "GlobalMaxPool" | "GlobalLpPool" => {
                if let Some(rank) = shape(0).map(<[Dim]>::len)
                    && rank < 3
                {
                    return Err(invalid(
                        node,
                        format!("X must have rank 3 or more (N, C, spatial…), it has rank {rank}"),
                    ));
                }
            }
            "InstanceNormalization" => {
                for (index, name) in [(1, "scale"), (2, "B")] {
                    if let Some(rank) = shape(index).map(<[Dim]>::len)
                        && rank != 1
                    {
                        return Err(invalid(
                            node,
                            format!(
                                "{name} must be 1-D (one value per channel), it has rank {rank}"
                            ),
                        ));
                    }
                }
            }
            "Split" => check_split(node, shape(0))?,
            "Unsqueeze" => check_unsqueeze(graph, node, shape(0))?,
            "Flatten" => check_flatten(node, shape(0))?,
            "Slice" if shape(0).is_some_and(<[Dim]>::is_empty) => {
                return Err(invalid(
                    node,
                    "data is a scalar: it has no axes to slice".into(),
                ));
            }
            "ConstantOfShape" => {
                if let Some(spillway_kernels::AttrValue::Tensor(t)) = node.attrs.get("value")
                    && !(t.shape().len() == 1 && t.len() == 1)
                {
                    return Err(invalid(
                        node,
                        format!(
                            "attribute 'value' must be a 1-D tensor of one element, it has shape {:?}",
                            t.shape()
                        ),
                    ));
                }
            }
            _ => {}
        }
        if node.op_type == "Mod"
            && node.attrs.int("fmod", 0).unwrap_or(0) == 0
            && let Some(dtype) = node
                .inputs
                .first()
                .copied()
                .flatten()
                .and_then(|v| graph.value(v).dtype)
            && dtype.is_float()
        {
            return Err(invalid(
                node,
                format!("fmod must be 1 for floating-point inputs ({dtype})"),
            ));
        }
        for &index in scalar_inputs(node) {
            if let Some(rank) = shape(index).map(<[Dim]>::len)
                && rank != 0
            {
                return Err(invalid(
                    node,
                    format!("input {index} must be a scalar, it has rank {rank}"),
                ));
            }
        }
        if node.op_type == "TopK"
            && node.opset >= 10
            && let Some(k) = shape(1)
            && !(k.len() == 1 && k[0].fixed().is_none_or(|n| n == 1))
        {
            return Err(invalid(
                node,
                format!(
                    "K must be a 1-D tensor of one value, it has shape {}",
                    crate::graph::shape_to_string(k)
                ),
            ));
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
        "ReduceSum" | "Squeeze" if node.opset >= 13 => &[1],
        "ReduceMax" | "ReduceMin" | "ReduceMean" | "ReduceProd" | "ReduceL1" | "ReduceL2"
        | "ReduceLogSum" | "ReduceLogSumExp" | "ReduceSumSquare"
            if node.opset >= 18 =>
        {
            &[1]
        }
        _ => &[],
    }
}

/// The inputs an op's definition makes scalars.
fn scalar_inputs(node: &Node) -> &'static [usize] {
    match node.op_type.as_str() {
        "Dropout" if node.opset >= 12 => &[1, 2],
        _ => &[],
    }
}

/// `ArgMax`/`ArgMin`: `axis` lies in `[-rank, rank - 1]`.
fn check_axis(node: &Node, x: Option<&[Dim]>) -> Result<()> {
    let Some(rank) = x.map(<[Dim]>::len) else {
        return Ok(());
    };
    let axis = node.attrs.int("axis", 0).unwrap_or(0);
    let rank = rank as i64;
    if axis < -rank || axis >= rank.max(1) {
        return Err(invalid(
            node,
            format!("axis {axis} is out of range for rank {rank}"),
        ));
    }
    Ok(())
}

/// `Unsqueeze`: each axis lies in `[-r, r - 1]` of the output's rank `r`, once.
fn check_unsqueeze(graph: &Graph, node: &Node, x: Option<&[Dim]>) -> Result<()> {
    if node.opset >= 13
        && let Some(rank) = node
            .inputs
            .get(1)
            .copied()
            .flatten()
            .and_then(|v| graph.value(v).shape.as_ref().map(Vec::len))
        && rank > 1
    {
        return Err(invalid(
            node,
            format!("axes must be a list of integers, it has rank {rank}"),
        ));
    }
    let axes = if node.opset >= 13 {
        node.inputs
            .get(1)
            .copied()
            .flatten()
            .and_then(|v| graph.constants.get(&v))
            .and_then(|t| t.to_i64_vec().ok())
    } else {
        node.attrs.ints("axes").ok()
    };
    let (Some(x), Some(axes)) = (x, axes) else {
        return Ok(());
    };
    let rank = (x.len() + axes.len()) as i64;
    let mut seen = vec![false; rank as usize];
    for &axis in &axes {
        let a = if axis < 0 { axis + rank } else { axis };
        if !(0..rank).contains(&a) || std::mem::replace(&mut seen[a as usize], true) {
            return Err(invalid(
                node,
                format!("axes {axes:?} are out of range or repeated for an output of rank {rank}"),
            ));
        }
    }
    Ok(())
}

/// `Flatten`: `axis` lies in `[0, r]`, from opset 11 in `[-r, r]`.
fn check_flatten(node: &Node, x: Option<&[Dim]>) -> Result<()> {
    let Some(rank) = x.map(|x| x.len() as i64) else {
        return Ok(());
    };
    let axis = node.attrs.int("axis", 1).unwrap_or(1);
    let lowest = if node.opset >= 11 { -rank } else { 0 };
    if axis < lowest || axis > rank {
        return Err(invalid(
            node,
            format!("axis {axis} is out of range [{lowest}, {rank}] for rank {rank}"),
        ));
    }
    Ok(())
}

/// `Split` without sizes: from opset 18 `num_outputs` must say how many parts; before it the
/// axis must divide evenly into the outputs.
fn check_split(node: &Node, x: Option<&[Dim]>) -> Result<()> {
    let sizes_given = if node.opset >= 13 {
        node.inputs.get(1).copied().flatten().is_some()
    } else {
        node.attrs.get("split").is_some()
    };
    if sizes_given {
        return Ok(());
    }
    if node.opset >= 18 {
        if node.attrs.get("num_outputs").is_none() {
            return Err(invalid(
                node,
                "neither the 'split' input nor the 'num_outputs' attribute is given".into(),
            ));
        }
        return Ok(());
    }
    let Some(x) = x else {
        return Ok(());
    };
    let axis = node.attrs.int("axis", 0).unwrap_or(0);
    let axis = if axis < 0 {
        axis + x.len() as i64
    } else {
        axis
    };
    let parts = node.outputs.len();
    if let Some(n) = usize::try_from(axis).ok().and_then(|a| fixed(Some(x), a))
        && parts > 0
        && n % parts != 0
    {
        return Err(invalid(
            node,
            format!("axis {axis} of size {n} does not split evenly into {parts} outputs"),
        ));
    }
    Ok(())
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
    if let Some(spatial) = x.or(w).map(|s| s.len().saturating_sub(2)) {
        check_window_lengths(node, spatial)?;
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

/// The window attributes of a convolution or pooling have one value per spatial axis (`pads`
/// two).
fn check_window_lengths(node: &Node, spatial: usize) -> Result<()> {
    for (name, per_axis) in [
        ("pads", 2),
        ("strides", 1),
        ("dilations", 1),
        ("kernel_shape", 1),
    ] {
        if node.attrs.get(name).is_some()
            && let Ok(values) = node.attrs.ints(name)
            && values.len() != per_axis * spatial
        {
            return Err(invalid(
                node,
                format!(
                    "{name} has {} values, {} expected for {spatial} spatial axes",
                    values.len(),
                    per_axis * spatial
                ),
            ));
        }
    }
    Ok(())
}

/// Pooling: the window attributes' lengths, and each pad smaller than the window (a window
/// wholly inside the padding pools nothing).
fn check_pool(node: &Node, x: Option<&[Dim]>) -> Result<()> {
    let Ok(kernel) = node.attrs.ints("kernel_shape") else {
        return Ok(());
    };
    check_window_lengths(node, x.map_or(kernel.len(), |x| x.len().saturating_sub(2)))?;
    if let Ok(pads) = node.attrs.ints("pads")
        && pads.len() == 2 * kernel.len()
        && let Some(axis) = (0..pads.len()).find(|&i| pads[i] >= kernel[i % kernel.len()])
    {
        return Err(invalid(
            node,
            format!(
                "pad {} of axis {} is not smaller than the window ({})",
                pads[axis],
                axis % kernel.len(),
                kernel[axis % kernel.len()]
            ),
        ));
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
