//! Loop-carried values that grow by one `Concat` per iteration — `acc' = Concat(acc, part)`,
//! how scripted exports collect per-iteration results (Mask R-CNN's pasted masks). Run as
//! written, iteration `i` copies everything appended so far into a fresh buffer: quadratic in
//! the trip count. Instead the body is rewritten to return `part` itself; the loop keeps the
//! parts and concatenates them once, after the last iteration, with the same `Concat` kernel.

use spillway_kernels::{Kernel, KernelError, Tensor};

use super::build_kernel;
use crate::error::{Error, Result};
use crate::graph::Subgraph;

/// One appended loop-carried value.
#[derive(Debug)]
pub struct Append {
    /// Its index among the loop-carried values.
    pub carried: usize,
    /// The `Concat` node that the body no longer runs.
    node: String,
    kernel: Box<dyn Kernel>,
}

impl Append {
    /// `Concat(initial, parts…)`: the value the loop as written would carry out. A failure
    /// (parts whose shapes or types disagree) names the body's `Concat` node.
    pub fn join(&self, initial: &Tensor, parts: &[Tensor]) -> Result<Tensor> {
        let fail = |cause| Error::Kernel {
            node: self.node.clone(),
            op_type: "Concat".into(),
            cause,
        };
        let inputs: Vec<Option<&Tensor>> =
            std::iter::once(initial).chain(parts).map(Some).collect();
        let mut out = self.kernel.run(&inputs).map_err(fail)?;
        out.pop()
            .ok_or_else(|| fail(KernelError::Arity("Concat returned no output".into())))
    }
}

/// The body with every appended carried value's `Concat` removed (the body returns the part
/// in its place), and those values. A carried value qualifies when its input is read only by
/// a two-input `Concat` (as the first input) whose output is the matching body output and is
/// read by nothing else.
pub fn rewrite(body: &Subgraph) -> Result<(Subgraph, Vec<Append>)> {
    let mut out = body.clone();
    let mut appends = Vec::new();
    let graph = &body.graph;
    let uses = graph.use_counts();
    let producers = graph.producers();
    let carried = body.formal_inputs.saturating_sub(2);
    let mut removed = Vec::new();
    for k in 0..carried {
        let (Some(&acc), Some(&next)) = (graph.inputs.get(2 + k), graph.outputs.get(1 + k)) else {
            continue;
        };
        let Some(&p) = producers.get(&next) else {
            continue;
        };
        let node = &graph.nodes[p];
        let default_domain = node.domain.is_empty() || node.domain == "ai.onnx";
        let [Some(first), Some(part)] = node.inputs[..] else {
            continue;
        };
        // `next` is read once: as the body output.
        if node.op_type != "Concat"
            || !default_domain
            || first != acc
            || part == acc
            || uses[acc.index()] != 1
            || uses[next.index()] != 1
        {
            continue;
        }
        appends.push(Append {
            carried: k,
            node: node.name.clone(),
            kernel: build_kernel(node)?,
        });
        out.graph.outputs[1 + k] = part;
        removed.push(p);
    }
    removed.sort_unstable();
    for p in removed.into_iter().rev() {
        out.graph.nodes.remove(p);
    }
    Ok((out, appends))
}
