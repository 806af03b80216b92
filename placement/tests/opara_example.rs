//! Opara (seed 002) on the worked example its text gives, checked by hand.
//!
//! What is missing: §III-A says "we present an illustrative example in Appendix A", but the
//! appendix (its DAG figure and the resulting streams) is not in the paper text we have, and
//! Fig. 6 (the GoogLeNet timeline) is an image. What the text *does* state about Fig. 6 (§V-B,
//! "Timeline of operator executions") is: a segment of GoogLeNet has four operators 1–4; CUDA
//! Graph runs them sequentially in one stream; Nimble launches them in the order 1, 2, 3, 4 on
//! 2 streams; Opara "prioritizes operator 4 and initiates more streams than Nimble, so that
//! operators 4, 1, and 2 can be executed in parallel". The segment is reconstructed as a
//! GoogLeNet inception block (torchvision order of branches: 1×1 conv; 1×1 → 3×3 conv;
//! 1×1 → 5×5 conv; max-pool → 1×1 conv; then the concat), so operators 1–4 are the first
//! operator of each branch and operator 4 is the max-pool — memory-intensive in Opara's
//! operator table (`max_pool` in its list), the convs compute-intensive. The per-op resource
//! demands are not in the text; the values below are ours, chosen distinct so that Alg. 2's
//! "least resource first" is decided by them, and the expected order is derived by hand.

use spillway_placement::policy::{Options, Policy, opara, place};
use spillway_placement::*;

/// The inception block: 0 stem conv; branch heads 1 (1×1 conv), 2 (1×1 conv), 3 (1×1 conv),
/// 4 (max-pool); branch tails 5 (3×3 conv after 2), 6 (5×5 conv after 3), 7 (1×1 conv after
/// 4); 8 the concat of 1, 5, 6, 7.
fn inception_block() -> CostGraph {
    let spec = [
        (Boundness::Compute, 0.5),
        (Boundness::Compute, 0.3),
        (Boundness::Compute, 0.2),
        (Boundness::Compute, 0.25),
        (Boundness::Memory, 0.1),
        (Boundness::Compute, 0.6),
        (Boundness::Compute, 0.7),
        (Boundness::Compute, 0.35),
        (Boundness::Memory, 0.05),
    ];
    let ops = spec
        .iter()
        .enumerate()
        .map(|(i, &(b, r))| {
            let mut o = Op::gpu(format!("{i}"), 1.0);
            o.bound = b;
            o.resource = r;
            o
        })
        .collect();
    let edges = [
        (0, 1),
        (0, 2),
        (0, 3),
        (0, 4),
        (2, 5),
        (3, 6),
        (4, 7),
        (1, 8),
        (5, 8),
        (6, 8),
        (7, 8),
    ]
    .iter()
    .map(|&(src, dst)| Edge {
        src,
        dst,
        bytes: 0.0,
    })
    .collect();
    CostGraph {
        ops,
        edges,
        concurrency: Concurrency::default(),
    }
}

/// Alg. 1 by hand, topological order 0..8: 0 opens s0; 1 takes 0's flag → s0; 2, 3, 4 find
/// 0's flag used → s1, s2, s3; 5, 6, 7 take their only predecessor's flag → s1, s2, s3; 8's
/// first predecessor 1 is unflagged → s0. Four streams: one per branch, so the branch heads
/// 1, 2, 4 (and 3) are on different streams — "4, 1 and 2 can be executed in parallel" and
/// more streams than Nimble's 2.
#[test]
fn opara_alg1_gives_one_stream_per_inception_branch() {
    let g = inception_block();
    let (stream, opened) = opara::allocate_streams(&g.dag().unwrap());
    assert_eq!(stream, vec![0, 0, 1, 2, 3, 1, 2, 3, 0]);
    assert_eq!(opened, 4);
    assert!(opened > 2, "the text: more streams than Nimble's 2");
    let heads = [stream[4], stream[1], stream[2]];
    assert!(heads[0] != heads[1] && heads[1] != heads[2] && heads[0] != heads[2]);
}

/// Alg. 2 by hand (memory list first, then alternate; least resource first; a list that is
/// empty is skipped): ready {0}: mem empty → 0. Ready mem {4}, comp {1,2,3} → mem: 4 (ready
/// 7). comp {1,2,3,7} → 2 (0.2; ready 5). mem empty → comp {1,3,5,7} → 3 (0.25; ready 6).
/// mem empty → 1 (0.3). → 7 (0.35). → 5 (0.6). → 6 (0.7; 8 ready, mem). → 8.
/// Operator 4 (the max-pool) is launched before the other branch heads 1, 2, 3: "Opara
/// prioritizes operator 4", where Nimble's order is 1, 2, 3, 4.
#[test]
fn opara_alg2_prioritizes_the_max_pool_branch() {
    let g = inception_block();
    let order = opara::launch_order(&g, &g.dag().unwrap());
    assert_eq!(order, vec![0, 4, 2, 3, 1, 7, 5, 6, 8]);
    let pos = |v: usize| order.iter().position(|&x| x == v).unwrap();
    assert!(pos(4) < pos(1) && pos(4) < pos(2) && pos(4) < pos(3));
}

/// The whole policy through [`place`]: on one GPU with 4 streams the schedule carries Alg. 1's
/// streams unchanged and Alg. 2's launch order as the op order.
#[test]
fn opara_policy_carries_both_algorithms() {
    let g = inception_block();
    let t = Topology::gpus(1, 4);
    let s = place(Policy::Opara, &g, &t, &Options::default()).unwrap();
    let streams: Vec<usize> = s.ops.iter().map(|o| o.stream).collect();
    assert_eq!(streams, vec![0, 0, 1, 2, 3, 1, 2, 3, 0]);
    let mut by_order: Vec<usize> = (0..9).collect();
    by_order.sort_by_key(|&v| s.ops[v].order);
    assert_eq!(by_order, vec![0, 4, 2, 3, 1, 7, 5, 6, 8]);
    assert!(s.ops.iter().all(|o| o.device == 0));
}
