//! [`StreamAssignment`]: which compute stream runs each node of a GPU plan, and in which order
//! the nodes are launched.

use spillway_placement::Schedule;

use crate::error::{Error, Result};
use crate::graph::Graph;

/// Which compute stream runs each node, and the order the nodes are launched in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamAssignment {
    /// Per node, indexed like `Graph::nodes`: its compute stream.
    pub stream: Vec<usize>,
    /// Node indices in launch order (a topological order).
    pub order: Vec<usize>,
}

impl StreamAssignment {
    /// Every node on stream 0, in graph order.
    pub fn single_stream(nodes: usize) -> Self {
        StreamAssignment {
            stream: vec![0; nodes],
            order: (0..nodes).collect(),
        }
    }

    /// The streams and launch order of a one-GPU `schedule` (device 0, its streams).
    pub fn from_schedule(schedule: &Schedule) -> Self {
        StreamAssignment {
            stream: schedule.ops.iter().map(|p| p.stream).collect(),
            order: schedule.sequence(),
        }
    }
}

/// Fails unless `assignment` gives every node a stream and launches each node once, after
/// its producers.
pub(super) fn check_assignment(graph: &Graph, assignment: &StreamAssignment) -> Result<()> {
    let n = graph.nodes.len();
    if assignment.stream.len() != n || assignment.order.len() != n {
        return Err(Error::Placement(format!(
            "the stream assignment covers {} / {} nodes of {n}",
            assignment.stream.len(),
            assignment.order.len()
        )));
    }
    let producers = graph.producers();
    let mut position = vec![usize::MAX; n];
    for (at, &i) in assignment.order.iter().enumerate() {
        if i >= n || position[i] != usize::MAX {
            return Err(Error::Placement(format!(
                "the launch order is not a permutation (node index {i})"
            )));
        }
        position[i] = at;
    }
    for (i, node) in graph.nodes.iter().enumerate() {
        for v in node.present_inputs() {
            if let Some(&p) = producers.get(&v)
                && position[p] > position[i]
            {
                return Err(Error::Placement(format!(
                    "node '{}' is launched before its producer '{}'",
                    node.name, graph.nodes[p].name
                )));
            }
        }
    }
    Ok(())
}
