//! Graph families that are not the crate's own: the HIOS authors' published generator, the
//! RandWire and NASNet-A structures IOS, HIOS and LIOS evaluate on, and fork-join graphs. With
//! the crate's own [`hios_layered`] and [`series_parallel`] they make the [`Family`] list a study
//! can sweep, so that claims are not measured only on the generator they were tuned on.

use std::collections::{BTreeSet, HashSet};

use serde::{Deserialize, Serialize};

use super::{Builder, LayeredParams, hios_layered, hios_topology, series_parallel};
use crate::graph::{Boundness, Concurrency, CostGraph, DeviceKind, Edge, Op, SlowdownModel};
use crate::rng::Rng;
use crate::topology::{Device, Topology};

/// Parameters of [`hios_code`], the HIOS authors' own random-DAG generator.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HiosCodeParams {
    /// Operators, the single source and the single sink included (default 200).
    pub ops: usize,
    /// Layers, the source's and the sink's included (default 14, as HIOS §V-A; at least 3).
    pub layers: usize,
    /// Edges (default 400). If the edges that connect consecutive layers already exceed it, the
    /// authors' script discards the graph; here the draw is repeated (see [`hios_code`]).
    pub edges: usize,
    /// Communication-to-computation ratio p (default 0.8).
    pub p: f64,
}

impl Default for HiosCodeParams {
    fn default() -> Self {
        HiosCodeParams {
            ops: 200,
            layers: 14,
            edges: 400,
            p: 0.8,
        }
    }
}

/// The HIOS authors' random DAG, as their published simulation code builds it
/// (github.com/SHUs-Lab/HIOS, `simulation/main.py`, functions `generate_nodes`,
/// `generate_edges`, `set_edge_weight`, `read_graph` and `create_graph_files`, commit
/// f39529d), drawn with this crate's [`Rng`] instead of Python's `random`:
///
/// * **Layers.** Layer 0 holds only the source (op 0 of the script) and the last layer only the
///   sink (op `ops − 1`). With `min = ⌈layers / 2⌉` and `max = ⌈10 · layers⌉` operators per
///   layer, passes over the inner layers `1..layers − 1` each add `randint(max(min − size, 0),
///   min(min, max − size))` operators to a layer (so the first pass gives every inner layer
///   exactly `min`, later passes 0..=min more) until all `ops − 2` inner operators are placed.
/// * **Edges.** For each pair of consecutive layers, every operator of the upper layer gets an
///   edge to a uniformly drawn operator of the next layer, then every operator of the next layer
///   gets an edge from a uniformly drawn operator of the upper one (duplicates skipped). The
///   remaining edges are drawn by `src layer = randint(1, layers − 2)`, `dst layer =
///   randint(src + 1, layers − 1)`, uniform operators in each, duplicates redrawn, until exactly
///   `edges` edges exist. So no extra edge leaves the source, and extra edges may skip layers.
/// * **Costs.** Execution time `randint(1000, 40000) / 10000` ms (0.1–4 ms in steps of 0.1 µs),
///   utilization `randint(6000, 10000) / 10000`. Transfer time of edge `(u, v)`:
///   `max(0.1 ms, p · exec(v))`: the script's `set_edge_weight` multiplies the **consumer's**
///   execution time by the ratio (both of its branches use `dst_node`), writes the graph, and
///   `read_graph` rescales by `p / 0.8` and applies `max(0.1, ·)`; for a graph written at 0.8
///   and read at `p`, which is how a p-sweep over one graph set works, that is `p · exec(v)`.
///   Here bytes = transfer µs (use [`hios_topology`], 1 byte/µs).
/// * **Concurrency.** The script's stage latency for operators sharing a GPU is
///   `½ Σ t + ½ max(Σ t · u, max t)`; this crate has no such model, so the graph uses the
///   [`SlowdownModel::Resource`] model with `resource = utilization` (0.6–1.0), which is the
///   closest of the crate's models (two operators already saturate a GPU).
///
/// Differences from the script, all forced or harmless: operators are renumbered layer by layer
/// (the script numbers inner operators in the order its passes place them, so ids are not
/// sorted by layer; the graph is the same up to that relabelling, and here every edge goes from
/// a smaller to a larger id); where the consecutive-layer edges exceed `edges` the script
/// discards the graph and this function draws again from the same stream (64 tries, then it
/// keeps those edges, exceeding `edges`); where `min · layers ≥ ops`, which the script skips,
/// `min` is lowered so every inner layer still gets an operator; where all inner layers are
/// full (`ops` above about `10 · layers²`) `max` is raised.
pub fn hios_code(params: &HiosCodeParams, seed: u64) -> CostGraph {
    hios_code_layers(params, seed).0
}

/// [`hios_code`] together with each operator's layer (0 = the source's, `layers − 1` = the
/// sink's).
pub fn hios_code_layers(params: &HiosCodeParams, seed: u64) -> (CostGraph, Vec<usize>) {
    let mut rng = Rng::new(seed);
    let nl = params.layers.max(3);
    let n = params.ops.max(nl);
    let inner = nl - 2;
    let mut min = nl.div_ceil(2).min((n - 2) / inner).max(1);
    let mut max = 10 * nl;
    if max * inner < n - 2 {
        max = (n - 2).div_ceil(inner) + min;
    }
    min = min.min(max);
    for attempt in 0..64 {
        // generate_nodes: layer lists of the script's ids.
        let mut layers: Vec<Vec<usize>> = vec![Vec::new(); nl];
        layers[0].push(0);
        let mut id = 1;
        while id < n - 1 {
            for layer in layers.iter_mut().take(nl - 1).skip(1) {
                let size = layer.len();
                let lo = min.saturating_sub(size);
                let hi = min.min(max.saturating_sub(size)).max(lo);
                let r = (lo + rng.below(hi - lo + 1)).min(n - 1 - id);
                layer.extend(id..id + r);
                id += r;
                if id == n - 1 {
                    break;
                }
            }
        }
        layers[nl - 1].push(n - 1);
        let mut exec = vec![0.0; n];
        let mut util = vec![0.0; n];
        for v in 0..n {
            exec[v] = (1000 + rng.below(39_001)) as f64 / 10.0;
            util[v] = (6000 + rng.below(4001)) as f64 / 10_000.0;
        }
        // generate_edges.
        let mut list: Vec<(usize, usize)> = Vec::new();
        let mut set = HashSet::new();
        let mut budget = params.edges as i64;
        for l in 0..nl - 1 {
            let (src, dst) = (&layers[l], &layers[l + 1]);
            for &u in src {
                let v = dst[rng.below(dst.len())];
                if set.insert((u, v)) {
                    list.push((u, v));
                    budget -= 1;
                }
            }
            for &v in dst {
                let u = src[rng.below(src.len())];
                if set.insert((u, v)) {
                    list.push((u, v));
                    budget -= 1;
                }
            }
        }
        if budget < 0 && attempt < 63 {
            continue;
        }
        // Extra edges: bounded by the pairs that exist (the script would loop forever).
        let layer_of = layer_index(&layers, n);
        let after: Vec<usize> = (0..nl)
            .map(|l| layers[l + 1..].iter().map(Vec::len).sum())
            .collect();
        let pairs: usize = (1..nl - 1).map(|l| layers[l].len() * after[l]).sum();
        let used = list.iter().filter(|&&(u, _)| layer_of[u] >= 1).count();
        let mut budget = budget.min((pairs - used) as i64);
        while budget > 0 {
            let sl = 1 + rng.below(nl - 2);
            let dl = sl + 1 + rng.below(nl - 1 - sl);
            let u = layers[sl][rng.below(layers[sl].len())];
            let v = layers[dl][rng.below(layers[dl].len())];
            if set.insert((u, v)) {
                list.push((u, v));
                budget -= 1;
            }
        }
        // Renumber layer by layer (an isomorphism), then build the cost graph.
        let mut new_id = vec![0; n];
        let mut layer = Vec::with_capacity(n);
        for (l, ops) in layers.iter().enumerate() {
            for &v in ops {
                new_id[v] = layer.len();
                layer.push(l);
            }
        }
        let mut ops = vec![Op::gpu("", 0.0); n];
        for v in 0..n {
            ops[new_id[v]] = Op {
                name: format!("op{}", new_id[v]),
                kind: format!("L{}", layer_of[v]),
                cost_us: [(DeviceKind::Gpu, exec[v])].into_iter().collect(),
                resource: util[v],
                bound: Boundness::Compute,
            };
        }
        let edges = list
            .iter()
            .map(|&(u, v)| Edge {
                src: new_id[u],
                dst: new_id[v],
                bytes: (params.p * exec[v]).max(100.0),
            })
            .collect();
        let g = CostGraph {
            ops,
            edges,
            concurrency: Concurrency {
                model: SlowdownModel::Resource,
                table: Vec::new(),
            },
        };
        return (g, layer);
    }
    unreachable!("the last attempt always returns")
}

fn layer_index(layers: &[Vec<usize>], n: usize) -> Vec<usize> {
    let mut of = vec![0; n];
    for (l, ops) in layers.iter().enumerate() {
        for &v in ops {
            of[v] = l;
        }
    }
    of
}

/// Parameters of [`randwire`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RandWireParams {
    /// Nodes of each stage's Watts–Strogatz graph (default `[16, 32, 32, 32]`: IOS's
    /// `randwire_large`, graphs `ws-16-4-0.75`, `ws-32-4-0.75` ×3).
    pub stages: Vec<usize>,
    /// Each node's ring neighbours before rewiring (default 4).
    pub k: usize,
    /// Rewiring probability (default 0.75).
    pub p: f64,
}

impl Default for RandWireParams {
    fn default() -> Self {
        RandWireParams {
            stages: vec![16, 32, 32, 32],
            k: 4,
            p: 0.75,
        }
    }
}

/// An undirected Watts–Strogatz graph as networkx's `connected_watts_strogatz_graph` builds it
/// (ring lattice of `k / 2` neighbours a side; each lattice edge `(u, u + j)` rewired with
/// probability `p` to `(u, w)`, `w` uniform among non-neighbours; redrawn until connected, at
/// most 100 tries, then the last draw). Returns the sorted edge list `(a, b)`, `a < b`.
pub fn watts_strogatz(n: usize, k: usize, p: f64, rng: &mut Rng) -> Vec<(usize, usize)> {
    let half = (k / 2).min(n.saturating_sub(1) / 2).max(1);
    let mut adj: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); n];
    for _try in 0..100 {
        adj.iter_mut().for_each(BTreeSet::clear);
        if n < 2 {
            break;
        }
        for j in 1..=half {
            for u in 0..n {
                let v = (u + j) % n;
                adj[u].insert(v);
                adj[v].insert(u);
            }
        }
        for j in 1..=half {
            for u in 0..n {
                let v = (u + j) % n;
                if rng.f64() >= p {
                    continue;
                }
                if adj[u].len() >= n - 1 {
                    continue;
                }
                let mut w = rng.below(n);
                while w == u || adj[u].contains(&w) {
                    w = rng.below(n);
                }
                adj[u].remove(&v);
                adj[v].remove(&u);
                adj[u].insert(w);
                adj[w].insert(u);
            }
        }
        if connected(&adj) {
            break;
        }
    }
    let mut edges = Vec::new();
    for (a, ns) in adj.iter().enumerate() {
        edges.extend(ns.iter().filter(|&&b| b > a).map(|&b| (a, b)));
    }
    edges
}

fn connected(adj: &[BTreeSet<usize>]) -> bool {
    let mut seen = vec![false; adj.len()];
    let mut stack = vec![0];
    seen[0] = true;
    while let Some(u) = stack.pop() {
        for &v in &adj[u] {
            if !seen[v] {
                seen[v] = true;
                stack.push(v);
            }
        }
    }
    seen.iter().all(|&s| s)
}

/// RandWire (Xie et al. 2019) as IOS's `randwire_large` builds it (the model IOS, HIOS and LIOS
/// evaluate; LIOS counts 120 operators and 260 edges): a stem (3×3 conv, identity); per stage a
/// [`watts_strogatz`] graph whose edges point from the smaller to the larger node id, each node
/// one ReLU-separable-conv-BN operator (`SepConv`) reading the sum of its in-neighbours (the
/// stage input if it has none), and an `Add` of the nodes without out-edges; a tail (ReLU, 1×1
/// conv, global pool). 121 operators with the default stages. Costs as the crate's other
/// DNN-like generators (GPU µs by kind: Conv 40–400, SepConv 30–200, others 5–40; a CPU cost;
/// 10 kB–4 MB per edge: use [`nvlink_topology`]).
pub fn randwire(params: &RandWireParams, seed: u64) -> CostGraph {
    let mut b = Builder::new(seed);
    let stem = b.op("Conv", &[]);
    let mut x = b.op("Identity", &[stem]);
    for &n in &params.stages {
        let edges = watts_strogatz(n, params.k, params.p, &mut b.rng);
        let mut ins = vec![Vec::new(); n];
        let mut has_out = vec![false; n];
        for &(a, c) in &edges {
            ins[c].push(a);
            has_out[a] = true;
        }
        let mut id = vec![0; n];
        for v in 0..n {
            let inputs: Vec<usize> = if ins[v].is_empty() {
                vec![x]
            } else {
                ins[v].iter().map(|&a| id[a]).collect()
            };
            id[v] = b.op("SepConv", &inputs);
        }
        let outs: Vec<usize> = (0..n).filter(|&v| !has_out[v]).map(|v| id[v]).collect();
        x = b.op("Add", &outs);
    }
    let r = b.op("Relu", &[x]);
    let c = b.op("Conv", &[r]);
    b.op("Pool", &[c]);
    b.g
}

/// Parameters of [`nasnet_a`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct NasNetParams {
    /// Normal cells after each stack's first cell (default 5: NASNet-A Large, "6 @ 4032").
    pub normal_per_stack: usize,
}

impl Default for NasNetParams {
    fn default() -> Self {
        NasNetParams {
            normal_per_stack: 5,
        }
    }
}

/// NASNet-A Large wired cell by cell as IOS's `nasnet_large` builds it (the model IOS, HIOS and
/// LIOS evaluate; LIOS counts 374 operators, 576 edges): a 3×3 conv, the two stem cells, then
/// three stacks of a first cell and `normal_per_stack` normal cells, with a reduction cell
/// between stacks; a ReLU and a global pool. Each IOS operator is one op here: ReLU-conv (`Conv`),
/// ReLU-separable-conv (`SepConv`, two per separable branch), pooling (`Pool`), and the sums and
/// concatenations (`Add` / `Concat`, one op per `identity`). 374 operators with the default, as LIOS counts
/// (the input placeholder not counted). Costs as [`randwire`]'s.
pub fn nasnet_a(params: &NasNetParams, seed: u64) -> CostGraph {
    let mut b = Builder::new(seed);
    fn sep(b: &mut Builder, x: usize) -> usize {
        let a = b.op("SepConv", &[x]);
        b.op("SepConv", &[a])
    }
    fn join(b: &mut Builder, groups: &[&[usize]]) -> usize {
        let mut ins: Vec<usize> = Vec::new();
        for g in groups {
            for &v in *g {
                if !ins.contains(&v) {
                    ins.push(v);
                }
            }
        }
        b.op(if groups.len() > 1 { "Concat" } else { "Add" }, &ins)
    }
    fn stem0(b: &mut Builder, x: usize) -> usize {
        let x1 = b.op("Conv", &[x]);
        let c0l = sep(b, x1);
        let c0r = sep(b, x);
        let c0 = join(b, &[&[c0l, c0r]]);
        let c1l = b.op("Pool", &[x1]);
        let c1r = sep(b, x);
        let c1 = join(b, &[&[c1l, c1r]]);
        let c2l = b.op("Pool", &[x1]);
        let c2r = sep(b, x);
        let c3r = b.op("Pool", &[c0]);
        let c4l = sep(b, c0);
        let c4r = b.op("Pool", &[x1]);
        join(b, &[&[c1], &[c2l, c2r], &[c3r, c0], &[c4l, c4r]])
    }
    fn stem1(b: &mut Builder, hp: usize, h: usize) -> usize {
        let xl = b.op("Conv", &[hp]);
        let xr1 = b.op("Conv", &[h]);
        let xr2 = b.op("Conv", &[h]);
        let xr = join(b, &[&[xr1, xr2]]);
        let c0l = sep(b, xl);
        let c0r = sep(b, xr);
        let c0 = join(b, &[&[c0l, c0r]]);
        let c1l = b.op("Pool", &[xl]);
        let c1r = sep(b, xr);
        let c1 = join(b, &[&[c1l, c1r]]);
        let c2l = b.op("Pool", &[xl]);
        let c2r = sep(b, xr);
        let c3r = b.op("Pool", &[c0]);
        let c4l = sep(b, c0);
        let c4r = b.op("Pool", &[xl]);
        join(b, &[&[c1], &[c2l, c2r], &[c3r, c1], &[c4l, c4r]])
    }
    fn first(b: &mut Builder, x: usize, prev: usize) -> usize {
        let xl1 = b.op("Conv", &[prev]);
        let xl2 = b.op("Conv", &[prev]);
        let xl = join(b, &[&[xl1], &[xl2]]);
        let xr = b.op("Conv", &[x]);
        let c0l = sep(b, xr);
        let c0r = sep(b, xr);
        let c1l = sep(b, xl);
        let c1r = sep(b, xl);
        let c2l = b.op("Pool", &[xr]);
        let c3l = b.op("Pool", &[xl]);
        let c3r = b.op("Pool", &[xl]);
        let c4l = sep(b, xr);
        join(
            b,
            &[
                &[xl],
                &[c0l, c0r],
                &[c1l, c1r],
                &[c2l, xl],
                &[c3l, c3r],
                &[c4l, xr],
            ],
        )
    }
    fn normal(b: &mut Builder, x: usize, prev: usize) -> usize {
        let xl = b.op("Conv", &[prev]);
        let xr = b.op("Conv", &[x]);
        let c0l = sep(b, xr);
        let c0r = sep(b, xl);
        let c1l = sep(b, xl);
        let c1r = sep(b, xl);
        let c2l = b.op("Pool", &[xr]);
        let c3l = b.op("Pool", &[xl]);
        let c3r = b.op("Pool", &[xl]);
        let c4l = sep(b, xr);
        join(
            b,
            &[
                &[c0l, c0r],
                &[c1l, c1r],
                &[c2l, xl],
                &[c3l, c3r],
                &[c4l, xr],
            ],
        )
    }
    fn reduction(b: &mut Builder, x: usize, prev: usize) -> usize {
        let xl = b.op("Conv", &[prev]);
        let xr = b.op("Conv", &[x]);
        let c0l = sep(b, xr);
        let c0r = sep(b, xl);
        let c0 = join(b, &[&[c0l, c0r]]);
        let c1l = b.op("Pool", &[xr]);
        let c1r = sep(b, xl);
        let c1 = join(b, &[&[c1l, c1r]]);
        let c2l = b.op("Pool", &[xr]);
        let c2r = sep(b, xl);
        let c3r = b.op("Pool", &[c0]);
        let c4l = sep(b, c0);
        let c4r = b.op("Pool", &[xr]);
        join(b, &[&[c1l, c1r], &[c2l, c2r], &[c1, c3r], &[c4l, c4r]])
    }
    let v1 = b.op("Conv", &[]);
    let v2 = stem0(&mut b, v1);
    let v3 = stem1(&mut b, v2, v1);
    let (mut prev2, mut prev) = (v2, v3);
    for stack in 0..3 {
        if stack > 0 {
            let red = reduction(&mut b, prev, prev2);
            let f = first(&mut b, red, prev2);
            (prev2, prev) = (red, f);
        } else {
            let f = first(&mut b, prev, prev2);
            (prev2, prev) = (prev, f);
        }
        for _ in 0..params.normal_per_stack {
            let c = normal(&mut b, prev, prev2);
            (prev2, prev) = (prev, c);
        }
    }
    let r = b.op("Relu", &[prev]);
    b.op("Pool", &[r]);
    b.g
}

/// Parameters of [`fork_join`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ForkJoinParams {
    /// Operators (default 200).
    pub ops: usize,
    /// Most branches of one fork (default 8; at least 2).
    pub max_width: usize,
    /// Most operators on one branch (default 4; at least 1).
    pub max_depth: usize,
}

impl Default for ForkJoinParams {
    fn default() -> Self {
        ForkJoinParams {
            ops: 200,
            max_width: 8,
            max_depth: 4,
        }
    }
}

/// A chain of fork-join stages (the task-graph shape of split/merge DNN blocks and of the
/// fork-join benchmarks in the DAG-scheduling literature): a source, then stages each forking
/// from the previous join into `2..=max_width` branches of `1..=max_depth` operators (uniform)
/// that meet in a join operator, which forks the next stage. The last stage is trimmed so the
/// graph has exactly `ops` operators (a trailing chain op when fewer than 3 remain). Branch
/// operators are `Conv` or `SepConv`, forks/joins `Concat`; costs as [`randwire`]'s.
pub fn fork_join(params: &ForkJoinParams, seed: u64) -> CostGraph {
    let mut b = Builder::new(seed);
    let n = params.ops.max(1);
    let max_w = params.max_width.max(2);
    let max_d = params.max_depth.max(1);
    let mut x = b.op("Conv", &[]);
    loop {
        let left = n - b.g.ops.len();
        if left == 0 {
            break;
        }
        if left < 3 {
            x = b.op("Conv", &[x]);
            continue;
        }
        let w = 2 + b.rng.below(max_w - 1);
        let mut lens: Vec<usize> = (0..w).map(|_| 1 + b.rng.below(max_d)).collect();
        // Trim to fit `left − 1` branch operators (one for the join), keeping two branches.
        while lens.iter().sum::<usize>() > left - 1 {
            let i = (0..lens.len()).max_by_key(|&i| lens[i]).unwrap_or(0);
            if lens[i] > 1 {
                lens[i] -= 1;
            } else {
                lens.pop();
            }
        }
        let mut tails = Vec::new();
        for &len in &lens {
            let mut y = x;
            for _ in 0..len {
                let kind = if b.rng.below(2) == 0 {
                    "Conv"
                } else {
                    "SepConv"
                };
                y = b.op(kind, &[y]);
            }
            tails.push(y);
        }
        x = b.op("Concat", &tails);
    }
    b.g
}

/// `m` GPUs with `streams` each, fully meshed at 25 GB/s per direction (25 000 bytes/µs) with
/// 5 µs per copy: one NVLink-2 link or PCIe 4.0 ×16 peer-to-peer. For the byte-sized DNN-like
/// families ([`randwire`], [`nasnet_a`], [`series_parallel`], [`fork_join`]).
pub fn nvlink_topology(m: usize, streams: usize) -> Topology {
    Topology::full_mesh(
        (0..m)
            .map(|i| Device::gpu(format!("gpu{i}"), streams))
            .collect(),
        25_000.0,
        5.0,
    )
}

/// A graph family at the sizes the papers evaluate, for studies that compare policies across
/// structures they were not tuned on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    /// The crate's own reading of HIOS §V-A: [`hios_layered`] with its defaults.
    Layered,
    /// The HIOS authors' generator: [`hios_code`] with its defaults (200 ops, 14 layers, 400
    /// edges, p = 0.8).
    HiosCode,
    /// [`randwire`] with IOS's `randwire_large` stages (121 ops).
    RandWire,
    /// [`nasnet_a`], NASNet-A Large (374 ops).
    NasNetA,
    /// [`series_parallel`] with 200 ops.
    SeriesParallel,
    /// [`fork_join`] with 200 ops.
    ForkJoin,
}

impl Family {
    /// Every family, the crate's own first.
    pub const ALL: [Family; 6] = [
        Family::Layered,
        Family::HiosCode,
        Family::RandWire,
        Family::NasNetA,
        Family::SeriesParallel,
        Family::ForkJoin,
    ];

    /// snake_case name.
    pub fn name(self) -> &'static str {
        match self {
            Family::Layered => "layered",
            Family::HiosCode => "hios_code",
            Family::RandWire => "randwire",
            Family::NasNetA => "nasnet_a",
            Family::SeriesParallel => "series_parallel",
            Family::ForkJoin => "fork_join",
        }
    }

    /// The graph of this family for `seed`, at its default size.
    pub fn graph(self, seed: u64) -> CostGraph {
        match self {
            Family::Layered => hios_layered(&LayeredParams::default(), seed),
            Family::HiosCode => hios_code(&HiosCodeParams::default(), seed),
            Family::RandWire => randwire(&RandWireParams::default(), seed),
            Family::NasNetA => nasnet_a(&NasNetParams::default(), seed),
            Family::SeriesParallel => series_parallel(200, seed),
            Family::ForkJoin => fork_join(&ForkJoinParams::default(), seed),
        }
    }

    /// The machine the family's edge weights are meant for: [`hios_topology`] (bytes are µs)
    /// for the two HIOS generators, [`nvlink_topology`] for the byte-sized DNN-like ones.
    pub fn topology(self, gpus: usize, streams: usize) -> Topology {
        match self {
            Family::Layered | Family::HiosCode => hios_topology(gpus, streams),
            _ => nvlink_topology(gpus, streams),
        }
    }
}
