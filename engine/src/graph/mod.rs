//! The engine's graph IR: dense ids, values with types and shapes, nodes in topological order.

mod blocked_inference;
pub mod contrib;
mod ids;
pub mod known_values;
mod node;
pub mod passes;
pub mod shape_inference;
mod shape_rules;
pub mod validate;
mod value;
mod value_kinds;

use std::collections::HashMap;

use spillway_kernels::{KernelOptions, Tensor};

pub use ids::ValueId;
pub use node::{Node, Subgraph};
pub use value::{Dim, ValueInfo, ValueKind, ValueType, shape_to_string};

use crate::error::{Error, Result};

/// A model's computation graph.
///
/// Values are addressed by [`ValueId`]; `nodes` is kept in topological order.
#[derive(Debug, Clone, Default)]
pub struct Graph {
    /// Every value, indexed by `ValueId::index`.
    pub values: Vec<ValueInfo>,
    /// Nodes in topological order.
    pub nodes: Vec<Node>,
    /// Inputs the caller must provide, in model order.
    pub inputs: Vec<ValueId>,
    /// Outputs returned to the caller, in model order.
    pub outputs: Vec<ValueId>,
    /// Values known before running (initializers, folded constants).
    pub constants: HashMap<ValueId, Tensor>,
    /// The kernel-algorithm choices the graph's CPU kernels are built with (the session's;
    /// see [`Graph::set_kernel_options`]).
    pub kernel_options: KernelOptions,
    /// What the model says about itself (empty for subgraphs and built graphs).
    pub metadata: crate::ModelMetadata,
}

impl Graph {
    /// Sets the options the CPU kernels of this graph and of every subgraph are built with.
    pub fn set_kernel_options(&mut self, options: KernelOptions) {
        self.kernel_options = options;
        for node in &mut self.nodes {
            for sub in &mut node.subgraphs {
                sub.graph.set_kernel_options(options);
            }
        }
    }

    /// Adds a value and returns its id.
    pub fn add_value(&mut self, info: ValueInfo) -> ValueId {
        self.values.push(info);
        ValueId::new(self.values.len() - 1)
    }

    /// The value's info.
    pub fn value(&self, id: ValueId) -> &ValueInfo {
        &self.values[id.index()]
    }

    /// The value's name.
    pub fn name(&self, id: ValueId) -> &str {
        &self.values[id.index()].name
    }

    /// For each value, the index in `nodes` of the node producing it.
    pub fn producers(&self) -> HashMap<ValueId, usize> {
        let mut map = HashMap::new();
        for (i, node) in self.nodes.iter().enumerate() {
            for v in node.present_outputs() {
                map.insert(v, i);
            }
        }
        map
    }

    /// Removes the nodes marked in `remove` (by index), keeping the others in order; returns
    /// how many it removed.
    pub fn remove_nodes(&mut self, remove: &[bool]) -> usize {
        let mut i = 0;
        self.nodes.retain(|_| {
            i += 1;
            !remove[i - 1]
        });
        remove.iter().filter(|&&r| r).count()
    }

    /// The value of `v` when it is a constant one-element `f32` tensor.
    pub fn constant_f32_scalar(&self, v: ValueId) -> Option<f32> {
        let view = self.constants.get(&v)?.view::<f32>().ok()?;
        (view.len() == 1).then(|| view.iter().next().copied())?
    }

    /// For each value, how many node inputs (plus graph outputs) read it.
    pub fn use_counts(&self) -> Vec<usize> {
        let mut counts = vec![0; self.values.len()];
        for node in &self.nodes {
            for v in node.present_inputs() {
                counts[v.index()] += 1;
            }
        }
        for v in &self.outputs {
            counts[v.index()] += 1;
        }
        counts
    }

    /// Reorders `nodes` topologically (stable: model order among ready nodes) and fails
    /// on a cycle or on an input that nothing produces.
    pub fn sort_topologically(&mut self) -> Result<()> {
        let producers = self.producers();
        let mut pending: Vec<usize> = vec![0; self.nodes.len()];
        let mut consumers: Vec<Vec<usize>> = vec![Vec::new(); self.nodes.len()];
        let available = |v: &ValueId| self.inputs.contains(v) || self.constants.contains_key(v);
        for (i, node) in self.nodes.iter().enumerate() {
            for v in node.present_inputs() {
                match producers.get(&v) {
                    Some(&p) => {
                        pending[i] += 1;
                        consumers[p].push(i);
                    }
                    None if available(&v) => {}
                    None => {
                        return Err(Error::InvalidModel(format!(
                            "node '{}' reads '{}', which no node, input or initializer provides",
                            node.name,
                            self.name(v)
                        )));
                    }
                }
            }
        }
        let mut ready: std::collections::BTreeSet<usize> =
            (0..self.nodes.len()).filter(|&i| pending[i] == 0).collect();
        let mut order = Vec::with_capacity(self.nodes.len());
        while let Some(i) = ready.pop_first() {
            order.push(i);
            for &c in &consumers[i] {
                pending[c] -= 1;
                if pending[c] == 0 {
                    ready.insert(c);
                }
            }
        }
        if order.len() != self.nodes.len() {
            let stuck = (0..self.nodes.len())
                .find(|&i| pending[i] > 0)
                .map(|i| self.nodes[i].name.clone());
            return Err(Error::InvalidModel(format!(
                "the graph has a cycle (through node '{}')",
                stuck.unwrap_or_default()
            )));
        }
        let mut slots: Vec<Option<Node>> = std::mem::take(&mut self.nodes)
            .into_iter()
            .map(Some)
            .collect();
        self.nodes = order
            .into_iter()
            .map(|i| slots[i].take().expect("each index once"))
            .collect();
        Ok(())
    }
}
