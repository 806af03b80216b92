//! Shared buffers: the static plan the CPU executor follows. Intermediates of one element type
//! whose lifetimes (in the sequential order) do not overlap share one buffer, which the executor
//! takes back when a value's last reader has run and offers to the kernel producing the next
//! value of that buffer. Assignment is greedy by size over shared objects (TensorFlow Lite's
//! "greedy by size" for shared objects): largest value first, into the best-fitting buffer whose
//! values are all dead by then, growing the largest one when none is large enough. Values whose
//! size is unknown before the run are not planned: they are marked `pooled`, and their memory
//! comes from the run's [`spillway_kernels::buffer_pool::Pool`] by best fit at run time.

use spillway_kernels::DType;

use crate::graph::{Graph, ValueId};

/// Which buffer each intermediate uses, and how large each buffer is planned to be.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SharedBuffers {
    /// The buffer of each value, indexed by value; `None` for values that are not planned
    /// (graph inputs and outputs, constants, sequences, unknown element types).
    pub buffer_of: Vec<Option<usize>>,
    /// Planned bytes of each buffer: its largest value.
    pub bytes: Vec<usize>,
    /// Whether each value (by index) is an intermediate of unknown size, whose memory comes
    /// from the run's pool.
    pub pooled: Vec<bool>,
}

/// One buffer while planning.
struct Planned {
    dtype: DType,
    bytes: usize,
    /// Lifetimes `(first, last)` of the values assigned so far.
    spans: Vec<(usize, usize)>,
}

impl Planned {
    fn free_during(&self, (first, last): (usize, usize)) -> bool {
        self.spans.iter().all(|&(f, l)| l < first || last < f)
    }
}

/// Plans the shared buffers of `graph`'s intermediate tensors, whose nodes run in list order.
pub fn plan(graph: &Graph) -> SharedBuffers {
    let (first, last) = super::lifetimes(graph);
    let mut items: Vec<(ValueId, DType, usize)> = Vec::new();
    let mut pooled = vec![false; graph.values.len()];
    for (index, info) in graph.values.iter().enumerate() {
        let id = ValueId::new(index);
        if first[index] == usize::MAX || graph.outputs.contains(&id) || !info.kind.is_tensor() {
            continue;
        }
        let Some(dtype) = info.dtype else { continue };
        match info.fixed_bytes() {
            Some(bytes) => items.push((id, dtype, bytes)),
            None => pooled[index] = true,
        }
    }
    // Largest first; ties in production order.
    items.sort_by(|a, b| {
        b.2.cmp(&a.2)
            .then(first[a.0.index()].cmp(&first[b.0.index()]))
    });
    let mut buffers: Vec<Planned> = Vec::new();
    let mut buffer_of = vec![None; graph.values.len()];
    for (id, dtype, bytes) in items {
        let span = (first[id.index()], last[id.index()]);
        let free = || {
            buffers
                .iter()
                .enumerate()
                .filter(|(_, b)| b.dtype == dtype && b.free_during(span))
        };
        // The smallest buffer that holds the value, else the largest one (which grows).
        let best = free()
            .filter(|(_, b)| b.bytes >= bytes)
            .min_by_key(|(_, b)| b.bytes)
            .or_else(|| free().max_by_key(|(_, b)| b.bytes))
            .map(|(i, _)| i);
        let index = best.unwrap_or_else(|| {
            buffers.push(Planned {
                dtype,
                bytes: 0,
                spans: Vec::new(),
            });
            buffers.len() - 1
        });
        let buffer = &mut buffers[index];
        buffer.bytes = buffer.bytes.max(bytes);
        buffer.spans.push(span);
        buffer_of[id.index()] = Some(index);
    }
    SharedBuffers {
        buffer_of,
        bytes: buffers.iter().map(|b| b.bytes).collect(),
        pooled,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{Dim, Node, ValueInfo};
    use spillway_kernels::Attributes;

    /// A chain `x → Relu → a → Relu → b → Relu → c → Relu → y` with the given sizes for a, b, c.
    fn chain(sizes: [usize; 3]) -> Graph {
        let mut g = Graph::default();
        let mut value = |name: &str, len: usize| {
            let mut info = ValueInfo::named(name);
            info.dtype = Some(DType::F32);
            info.shape = Some(vec![Dim::Fixed(len)]);
            g.values.push(info);
            ValueId::new(g.values.len() - 1)
        };
        let x = value("x", 4);
        let a = value("a", sizes[0]);
        let b = value("b", sizes[1]);
        let c = value("c", sizes[2]);
        let y = value("y", 4);
        g.inputs = vec![x];
        g.outputs = vec![y];
        for (i, (from, to)) in [(x, a), (a, b), (b, c), (c, y)].into_iter().enumerate() {
            g.nodes.push(Node {
                name: format!("relu{i}"),
                op_type: "Relu".into(),
                domain: String::new(),
                opset: 14,
                attrs: Attributes::new(),
                inputs: vec![Some(from)],
                declared_inputs: 1,
                outputs: vec![Some(to)],
                subgraphs: Vec::new(),
                type_attrs: Vec::new(),
            });
        }
        g
    }

    #[test]
    fn values_alive_together_get_different_buffers_and_dead_ones_are_reused() {
        let g = chain([100, 200, 50]);
        let plan = plan(&g);
        let of = |i: usize| plan.buffer_of[i].expect("planned");
        // a and b overlap (b is produced while a is read), b and c too; a and c do not.
        assert_ne!(of(1), of(2));
        assert_ne!(of(2), of(3));
        assert_eq!(of(1), of(3), "c reuses a's buffer");
        assert_eq!(plan.bytes.len(), 2);
        assert_eq!(plan.bytes[of(1)], 400, "a's 100 floats; c's 50 fit in it");
        assert_eq!(plan.bytes[of(2)], 800);
        // Inputs and outputs belong to the caller.
        assert_eq!(plan.buffer_of[0], None);
        assert_eq!(plan.buffer_of[4], None);
    }

    #[test]
    fn values_of_unknown_size_are_pooled_not_planned() {
        let mut g = chain([10, 10, 10]);
        g.values[2].shape = Some(vec![Dim::Symbol("n".into())]);
        let plan = plan(&g);
        assert_eq!(plan.buffer_of[2], None);
        assert!(plan.pooled[2]);
        assert!(!plan.pooled[1] && plan.buffer_of[1].is_some());
        assert!(
            !plan.pooled[0] && !plan.pooled[4],
            "inputs and outputs are the caller's"
        );
    }

    #[test]
    fn element_types_do_not_share() {
        let mut g = chain([10, 10, 10]);
        g.values[3].dtype = Some(DType::I64);
        let plan = plan(&g);
        assert_ne!(plan.buffer_of[1], plan.buffer_of[3]);
        assert_eq!(plan.bytes.len(), 3);
    }
}
