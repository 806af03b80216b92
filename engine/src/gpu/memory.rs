//! Where a GPU plan's node outputs live: reshapes in their source's bytes, graph outputs in
//! their own, and the rest sharing bytes as the plan's happens-before order (data edges and
//! stream order) allows (`memory::happens_before`, the engine's one planner).

use std::collections::HashMap;

use spillway_kernels::cuda::memory::aligned;

use super::assignment::StreamAssignment;
use super::plan::ALIASES;
use crate::error::Result;
use crate::graph::{Graph, ValueId};
use crate::memory::happens_before::{Buffer, HappensBefore, share};

/// Device bytes of a plan's node outputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ValueMemory {
    /// Bytes they take in the plan.
    pub bytes: usize,
    /// Bytes they would take with one buffer each.
    pub unshared_bytes: usize,
}

/// Places every node output of `graph` from offset `*at` on: aliases (reshapes) share their
/// source's bytes; graph outputs get their own; with `reuse`, the rest share bytes as the
/// happens-before order of `assignment` allows, else each gets its own. Adds `(offset, bytes)`
/// per value to `offsets` (which already holds the constants and inputs) and advances `*at`.
pub(super) fn place_values(
    graph: &Graph,
    assignment: &StreamAssignment,
    bytes_of: &dyn Fn(ValueId) -> Result<usize>,
    offsets: &mut HashMap<ValueId, (usize, usize)>,
    at: &mut usize,
    reuse: bool,
) -> Result<ValueMemory> {
    let producers = graph.producers();
    let mut position = vec![0; graph.nodes.len()];
    for (pos, &i) in assignment.order.iter().enumerate() {
        position[i] = pos;
    }
    let mut successors: Vec<Vec<usize>> = vec![Vec::new(); graph.nodes.len()];
    let mut last_on_stream: HashMap<usize, usize> = HashMap::new();
    let mut buffer_of: HashMap<ValueId, usize> = HashMap::new();
    let mut buffers: Vec<Buffer> = Vec::new();
    let mut members: Vec<Vec<ValueId>> = Vec::new();
    let mut own: Vec<bool> = Vec::new();
    for (pos, &i) in assignment.order.iter().enumerate() {
        let node = &graph.nodes[i];
        if let Some(prev) = last_on_stream.insert(assignment.stream[i], pos) {
            successors[prev].push(pos);
        }
        for v in node.present_inputs() {
            if let Some(&p) = producers.get(&v) {
                successors[position[p]].push(pos);
            }
            if let Some(&b) = buffer_of.get(&v) {
                buffers[b].readers.push(pos);
            }
        }
        let alias_of = node
            .inputs
            .first()
            .copied()
            .flatten()
            .filter(|_| ALIASES.contains(&node.op_type.as_str()));
        for v in node.present_outputs() {
            let bytes = bytes_of(v)?;
            let b = match alias_of {
                Some(src) if buffer_of.contains_key(&src) => buffer_of[&src],
                Some(src) if offsets.contains_key(&src) => {
                    // A reshape of an input or a constant reads its bytes in place.
                    let region = offsets[&src];
                    offsets.insert(v, region);
                    continue;
                }
                _ => {
                    buffers.push(Buffer {
                        bytes: 0,
                        producer: pos,
                        readers: Vec::new(),
                    });
                    members.push(Vec::new());
                    own.push(!reuse);
                    buffers.len() - 1
                }
            };
            buffers[b].bytes = buffers[b].bytes.max(bytes);
            members[b].push(v);
            own[b] |= graph.outputs.contains(&v);
            buffer_of.insert(v, b);
        }
    }
    let mut base = vec![0; buffers.len()];
    for b in (0..buffers.len()).filter(|&b| own[b]) {
        base[b] = *at;
        *at += aligned(buffers[b].bytes.max(1));
    }
    let shared: Vec<usize> = (0..buffers.len()).filter(|&b| !own[b]).collect();
    let list: Vec<Buffer> = shared.iter().map(|&b| buffers[b].clone()).collect();
    let (relative, size) = share(&list, &HappensBefore::new(&successors), aligned(1));
    for (&b, o) in shared.iter().zip(relative) {
        base[b] = *at + o;
    }
    *at += size;
    for (b, values) in members.iter().enumerate() {
        for &v in values {
            offsets.insert(v, (base[b], bytes_of(v)?));
        }
    }
    let aligned_sum = |bs: &mut dyn Iterator<Item = &Buffer>| -> usize {
        bs.map(|b| aligned(b.bytes.max(1))).sum()
    };
    Ok(ValueMemory {
        bytes: aligned_sum(&mut (0..buffers.len()).filter(|&b| own[b]).map(|b| &buffers[b])) + size,
        unshared_bytes: aligned_sum(&mut buffers.iter()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::values::{descs, specialize};
    use crate::graph::passes::{Level, PassOptions, optimize_with};

    /// The bundled model on its input shape, and each value's bytes.
    fn model() -> (Graph, Vec<usize>) {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../models/small/inception_block.onnx"
        );
        let mut graph = crate::onnx::load_file(std::path::Path::new(path)).unwrap();
        optimize_with(&mut graph, Level::Basic, &PassOptions::default()).unwrap();
        let input = spillway_kernels::Tensor::from_shape_vec(
            &[1, 3, 64, 64],
            (0..3 * 64 * 64).map(|i| (i % 7) as f32 - 3.0).collect(),
        )
        .unwrap();
        let values = specialize(&mut graph, &[input]).unwrap();
        let bytes = descs(&values)
            .iter()
            .map(|d| d.as_ref().map_or(0, |d| d.bytes()))
            .collect();
        (graph, bytes)
    }

    /// Whether node `a` must finish before node `b` starts: a path of data edges and stream
    /// order from `a` to `b` (searched directly, not with `HappensBefore`).
    fn ordered(graph: &Graph, assignment: &StreamAssignment, a: usize, b: usize) -> bool {
        let producers = graph.producers();
        let position: HashMap<usize, usize> = assignment
            .order
            .iter()
            .enumerate()
            .map(|(p, &i)| (i, p))
            .collect();
        let mut stack = vec![b];
        let mut seen = vec![false; graph.nodes.len()];
        while let Some(n) = stack.pop() {
            if n == a {
                return true;
            }
            if std::mem::replace(&mut seen[n], true) {
                continue;
            }
            // Direct predecessors: producers of n's inputs, and the node before n on its stream.
            stack.extend(
                graph.nodes[n]
                    .present_inputs()
                    .filter_map(|v| producers.get(&v)),
            );
            let on_stream = assignment.order[..position[&n]]
                .iter()
                .rev()
                .find(|&&m| assignment.stream[m] == assignment.stream[n]);
            stack.extend(on_stream);
        }
        false
    }

    /// Every two node outputs whose bytes overlap are either one buffer (a reshape of the
    /// other) or ordered: all uses of one happen before the other is written.
    fn check_no_conflicts(graph: &Graph, bytes: &[usize], assignment: &StreamAssignment) {
        let mut offsets = HashMap::new();
        let mut at = 0;
        let bytes_of = |v: ValueId| Ok(bytes[v.index()]);
        let used = place_values(graph, assignment, &bytes_of, &mut offsets, &mut at, true).unwrap();
        assert!(used.bytes < used.unshared_bytes, "{used:?}");
        let producers = graph.producers();
        let uses = |v: ValueId| -> Vec<usize> {
            let mut u: Vec<usize> = (0..graph.nodes.len())
                .filter(|&n| graph.nodes[n].present_inputs().any(|x| x == v))
                .collect();
            u.push(producers[&v]);
            u
        };
        let values: Vec<ValueId> = offsets.keys().copied().collect();
        for &x in &values {
            for &y in &values {
                let ((ox, bx), (oy, by)) = (offsets[&x], offsets[&y]);
                if x >= y || ox >= oy + by || oy >= ox + bx || ox == oy {
                    continue; // distinct, disjoint, or one buffer (same start)
                }
                let (px, py) = (producers[&x], producers[&y]);
                let x_then_y = uses(x).iter().all(|&u| ordered(graph, assignment, u, py));
                let y_then_x = uses(y).iter().all(|&u| ordered(graph, assignment, u, px));
                assert!(
                    x_then_y || y_then_x,
                    "'{}' and '{}' overlap but may be alive together",
                    graph.name(x),
                    graph.name(y)
                );
            }
        }
    }

    #[test]
    fn shared_values_never_overlap_while_alive() {
        let (graph, bytes) = model();
        let n = graph.nodes.len();
        check_no_conflicts(&graph, &bytes, &StreamAssignment::single_stream(n));
        // Three streams, round robin in graph order: branches run side by side.
        let streams = StreamAssignment {
            stream: (0..n).map(|i| i % 3).collect(),
            order: (0..n).collect(),
        };
        check_no_conflicts(&graph, &bytes, &streams);
    }
}
