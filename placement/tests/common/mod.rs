//! Helpers shared by the placement crate's integration tests.

use spillway_placement::CostGraph;

/// Every topological launch sequence of `g` (for brute-force optima of tiny graphs): `seq` is
/// the prefix so far, `used` marks its operators, each complete sequence goes to `out`.
pub fn topo_orders(
    g: &CostGraph,
    seq: &mut Vec<usize>,
    used: &mut [bool],
    out: &mut Vec<Vec<usize>>,
) {
    let n = g.ops.len();
    if seq.len() == n {
        out.push(seq.clone());
        return;
    }
    for v in 0..n {
        if used[v] || g.edges.iter().any(|e| e.dst == v && !used[e.src]) {
            continue;
        }
        used[v] = true;
        seq.push(v);
        topo_orders(g, seq, used, out);
        seq.pop();
        used[v] = false;
    }
}
