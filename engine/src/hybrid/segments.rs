//! Splitting a graph whose nodes run on the host or on one device into segments: runs of
//! nodes of one side that can execute as a unit (a device segment is one captured plan).
//!
//! A node's depth is the most side changes on any path from the graph's inputs to it; the
//! nodes of one side and one depth form a segment. Depth never decreases along an edge and
//! grows across a change of side, so a path that leaves a segment never comes back to it (each
//! segment is convex) and ordering segments by depth is a topological order of them.

use std::collections::HashSet;

use crate::graph::{Graph, ValueId};

/// Where a node of a hybrid plan runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// The host CPU: any op, any shape.
    Host,
    /// The device: ops with a device kernel, on fixed shapes.
    Device,
}

/// Nodes of one side that run as a unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    /// Where it runs.
    pub side: Side,
    /// Its nodes: indices into the graph's nodes, in the graph's order.
    pub nodes: Vec<usize>,
    /// The values it reads from outside (graph inputs and other segments' outputs, not
    /// constants), in order of first use.
    pub inputs: Vec<ValueId>,
    /// The values it writes that another segment reads or the graph returns.
    pub outputs: Vec<ValueId>,
}

/// The segments of `graph` when node `i` runs on `sides[i]`, in a topological order.
pub fn partition(graph: &Graph, sides: &[Side]) -> Vec<Segment> {
    let producers = graph.producers();
    let mut depth = vec![0usize; graph.nodes.len()];
    for (i, node) in graph.nodes.iter().enumerate() {
        depth[i] = node
            .present_inputs()
            .filter_map(|v| producers.get(&v))
            .map(|&p| depth[p] + usize::from(sides[p] != sides[i]))
            .max()
            .unwrap_or(0);
    }
    let mut keys: Vec<(usize, bool)> = (0..graph.nodes.len())
        .map(|i| (depth[i], sides[i] == Side::Device))
        .collect();
    keys.sort_unstable();
    keys.dedup();
    let segment_of: Vec<usize> = (0..graph.nodes.len())
        .map(|i| {
            keys.binary_search(&(depth[i], sides[i] == Side::Device))
                .expect("every key is listed")
        })
        .collect();
    let mut segments: Vec<Segment> = keys
        .iter()
        .map(|&(_, device)| Segment {
            side: if device { Side::Device } else { Side::Host },
            nodes: Vec::new(),
            inputs: Vec::new(),
            outputs: Vec::new(),
        })
        .collect();
    let graph_outputs: HashSet<ValueId> = graph.outputs.iter().copied().collect();
    let mut is_output = vec![false; graph.values.len()];
    for (i, node) in graph.nodes.iter().enumerate() {
        let s = segment_of[i];
        segments[s].nodes.push(i);
        for v in node.present_inputs() {
            if graph.constants.contains_key(&v) {
                continue;
            }
            let produced = producers.get(&v);
            if produced.is_some_and(|&p| segment_of[p] == s) {
                continue;
            }
            if produced.is_some() {
                is_output[v.index()] = true;
            }
            if !segments[s].inputs.contains(&v) {
                segments[s].inputs.push(v);
            }
        }
    }
    for (i, node) in graph.nodes.iter().enumerate() {
        for v in node.present_outputs() {
            if is_output[v.index()] || graph_outputs.contains(&v) {
                segments[segment_of[i]].outputs.push(v);
            }
        }
    }
    segments
}

/// The graph of `segment` alone: its nodes, its inputs and outputs as graph inputs and
/// outputs, the constants its nodes read, and every value of `graph` (ids are kept).
pub fn segment_graph(graph: &Graph, segment: &Segment) -> Graph {
    let nodes: Vec<_> = segment
        .nodes
        .iter()
        .map(|&i| graph.nodes[i].clone())
        .collect();
    let constants = nodes
        .iter()
        .flat_map(|n| n.present_inputs())
        .filter_map(|v| graph.constants.get(&v).map(|t| (v, t.clone())))
        .collect();
    Graph {
        values: graph.values.clone(),
        nodes,
        inputs: segment.inputs.clone(),
        outputs: segment.outputs.clone(),
        constants,
        kernel_options: graph.kernel_options,
        metadata: crate::ModelMetadata::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hybrid::test_graphs::{graph_with, node};

    fn ids(v: &[usize]) -> Vec<ValueId> {
        v.iter().map(|&i| ValueId::new(i)).collect()
    }

    /// Whether some path leaves segment `s` and comes back to it.
    fn reenters(graph: &Graph, segments: &[Segment], s: usize) -> bool {
        let of = |i: usize| segments.iter().position(|seg| seg.nodes.contains(&i));
        let producers = graph.producers();
        // outside[i]: node i is outside s and reachable from s.
        let mut outside = vec![false; graph.nodes.len()];
        for (i, node) in graph.nodes.iter().enumerate() {
            let from = node.present_inputs().filter_map(|v| producers.get(&v));
            let mut reached = false;
            for &p in from {
                if of(p) == Some(s) || outside[p] {
                    reached = true;
                }
                if outside[p] && of(i) == Some(s) {
                    return true;
                }
            }
            outside[i] = reached && of(i) != Some(s);
        }
        false
    }

    #[test]
    fn a_host_branch_splits_the_device_nodes_after_it_and_no_segment_is_reentered() {
        // x(0) → A(dev) → 1 → B(dev) → 2 → C(dev) → 3
        //               1 → H(host) → 4
        //               3, 4 → D(dev) → 5 (output); 2 → E(host) → 6 (output)
        let mut g = graph_with(7);
        g.inputs = ids(&[0]);
        g.outputs = ids(&[5, 6]);
        g.nodes = vec![
            node("Relu", &[0], &[1]),
            node("Relu", &[1], &[2]),
            node("Relu", &[2], &[3]),
            node("NonZero", &[1], &[4]),
            node("Add", &[3, 4], &[5]),
            node("NonZero", &[2], &[6]),
        ];
        use Side::{Device, Host};
        let sides = [Device, Device, Device, Host, Device, Host];
        let segments = partition(&g, &sides);
        let segment = |side, nodes: &[usize], inputs: &[usize], outputs: &[usize]| Segment {
            side,
            nodes: nodes.to_vec(),
            inputs: ids(inputs),
            outputs: ids(outputs),
        };
        assert_eq!(
            segments,
            [
                segment(Device, &[0, 1, 2], &[0], &[1, 2, 3]),
                segment(Host, &[3, 5], &[1, 2], &[4, 6]),
                segment(Device, &[4], &[3, 4], &[5]),
            ]
        );
        for s in 0..segments.len() {
            assert!(!reenters(&g, &segments, s), "segment {s} is re-entered");
        }
    }

    #[test]
    fn segments_of_random_sides_are_convex_cover_every_node_and_come_in_topological_order() {
        // A layered random DAG, sides drawn at random.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move |m: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % m as u64) as usize
        };
        for _ in 0..50 {
            let n = 30;
            let mut g = graph_with(n + 1);
            g.inputs = ids(&[0]);
            g.outputs = ids(&[n]);
            let mut sides = Vec::new();
            for i in 0..n {
                let a = next(i + 1);
                let b = next(i + 1);
                g.nodes.push(node("Add", &[a, b], &[i + 1]));
                sides.push(if next(3) == 0 {
                    Side::Host
                } else {
                    Side::Device
                });
            }
            let segments = partition(&g, &sides);
            let mut covered: Vec<usize> = segments.iter().flat_map(|s| s.nodes.clone()).collect();
            covered.sort_unstable();
            assert_eq!(covered, (0..n).collect::<Vec<_>>());
            for (s, seg) in segments.iter().enumerate() {
                assert!(seg.nodes.iter().all(|&i| sides[i] == seg.side));
                assert!(!reenters(&g, &segments, s), "segment {s} is re-entered");
                // Every input comes from an earlier segment or the graph.
                for v in &seg.inputs {
                    let from = segments.iter().position(|o| o.outputs.contains(v));
                    assert!(from.is_none_or(|f| f < s) && (from.is_some() || g.inputs.contains(v)));
                }
            }
        }
    }
}
