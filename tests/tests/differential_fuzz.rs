//! A short seeded run of the differential fuzzer (`tests/src/bin/diff_fuzz.rs` runs long
//! ones): every generated graph that either engine accepts must run on both, at every
//! optimization level, with the same outputs within tolerance. Graphs ORT has no kernel or
//! opset for are counted apart (it cannot judge them).

use spillway_tests::differential::{ORT_CRASHES, Outcome, check_seed};

/// Seeds that disagree for a known reason: `(seed, why)`. The list only shrinks: the test
/// fails when a listed seed agrees.
const KNOWN: &[(u64, &str)] = &[
    (
        361,
        "ArgMax over an empty axis of an empty [0, 0, 2] tensor with keepdims: ORT returns the \
         input's shape, ONNX's shape inference (and Spillway) the kept axis as 1: [0, 1, 2]; both \
         are empty",
    ),
    (
        3175,
        "ReduceLogSum over an axis of an empty tensor: ORT leaves the axis unreduced ([4, 0, 0, \
         4]); ONNX's keepdims rule (and Spillway) gives [4, 0, 1, 4]",
    ),
    (
        3660,
        "GatherND with batch_dims -2: a count of batch axes cannot be negative (Spillway refuses \
         it); ORT runs it",
    ),
    (
        4051,
        "Clip of int64 with a 1-element 1-D max: ORT refuses it for integers and accepts it for \
         floats; Spillway accepts both",
    ),
    (
        4940,
        "ReduceMean of an empty tensor: ORT gives 0, ONNX's reference (numpy) and Spillway NaN \
         (0 / 0)",
    ),
    (
        5306,
        "Range of 1-element 1-D initializers: ORT's shape inference refuses them, its kernel \
         accepts the same from graph inputs; Spillway accepts both",
    ),
    (
        5439,
        "ReduceLogSumExp of int64: ORT subtracts the maximum and exponentiates in int64 (every \
         smaller term truncates to 0, giving the maximum, 5); ONNX's reference computes in \
         float64 as Spillway does (6)",
    ),
    (
        5899,
        "ReduceMax over axes [0, -1, 1] of an empty [2, 0, 4, 4]: ORT leaves the input's shape; \
         ONNX's keepdims rule (and Spillway) gives [1, 1, 4, 1]",
    ),
    (
        6247,
        "ReduceProd of an empty tensor: ORT leaves the reduced axis at 3 (see 3175)",
    ),
];

/// The seeds the test runs (`diff_fuzz` runs further).
const SEEDS: std::ops::Range<u64> = 0..7800;

#[test]
fn random_graphs_agree_with_ort() {
    let (mut agreed, mut unjudged) = (0, 0);
    let mut findings = Vec::new();
    let mut fixed = Vec::new();
    for seed in SEEDS.filter(|s| !ORT_CRASHES.contains(s)) {
        let known = KNOWN.iter().find(|(s, _)| *s == seed);
        match (check_seed(seed, 1024), known) {
            (Outcome::Agreed, Some(_)) => fixed.push(seed),
            (Outcome::Agreed, None) => agreed += 1,
            (Outcome::Unjudged(_), None) => unjudged += 1,
            (Outcome::Finding(f), None) => {
                findings.push(format!("seed {}: {:?}: {}", f.seed, f.ops, f.what))
            }
            _ => {}
        }
    }
    assert!(
        findings.is_empty(),
        "disagreements:\n{}",
        findings.join("\n")
    );
    assert!(
        fixed.is_empty(),
        "known seeds agree now, remove them: {fixed:?}"
    );
    println!("{agreed} graphs agreed, {unjudged} ran where ORT has no kernel or opset for them");
    assert!(
        agreed >= 400,
        "only {agreed} of {} seeds gave a graph both engines ran",
        SEEDS.end
    );
}
