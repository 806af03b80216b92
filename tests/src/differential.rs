//! Differential fuzzing for wrong answers: small random graphs of supported ops (the fuzz
//! harness's generator, `fuzz/src/generate.rs`) run by Spillway at every optimization level
//! and by ONNX Runtime (optimizations off: its plain kernels). A graph both engines reject is
//! skipped; an error on one side only, a different output count, element type or shape, or
//! values further apart than the tolerance (NaN equal to NaN) is a [`Finding`].

use spillway::{OptimizationLevel, Session, Tensor};

use crate::fuzz_harness::generate::{Generated, generate_with};
use crate::fuzz_harness::{LEVELS, assert_not_internal};
use crate::oracle::{Oracle, OrtConfig};

/// Seeds whose graph crashes ONNX Runtime itself (a SIGSEGV while it loads the model), which
/// would end the process: skipped.
pub const ORT_CRASHES: &[u64] = &[2719, 7881];

/// Relative and absolute tolerance of float outputs.
pub const RTOL: f64 = 1e-4;
/// See [`RTOL`].
pub const ATOL: f64 = 1e-5;

/// What one seed gave.
#[derive(Debug)]
pub enum Outcome {
    /// The bytes ran out before a graph was complete.
    NoGraph,
    /// Both engines rejected the graph (at load or at run).
    BothRejected,
    /// Every engine and level agreed.
    Agreed,
    /// ONNX Runtime cannot judge the graph: it has no kernel for an op at this opset and type,
    /// the model's opset is newer than it supports, the outputs differ where ORT is known to
    /// deviate from ONNX ([`ort_deviation`]), or ORT runs a `Constant` that ONNX forbids.
    Unjudged(String),
    /// A disagreement.
    Finding(Finding),
}

/// A disagreement, with what reproduces it.
#[derive(Debug)]
pub struct Finding {
    /// The seed of the generator's bytes.
    pub seed: u64,
    /// The op types of the graph, in order.
    pub ops: Vec<&'static str>,
    /// What differed.
    pub what: String,
    /// The model, to save beside the report.
    pub model: Vec<u8>,
}

/// The generator's bytes for `seed` (xorshift, `len` bytes).
pub fn seed_bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect()
}

fn run_spillway(g: &Generated, level: OptimizationLevel) -> Result<Vec<Tensor>, String> {
    let session = Session::builder()
        .with_optimization(level)
        .with_intra_op_threads(1)
        .commit_from_memory(&g.model);
    assert_not_internal("load", &session);
    let session = session.map_err(|e| format!("load: {e}"))?;
    let out = session.run(g.inputs.clone());
    assert_not_internal("run", &out);
    out.map_err(|e| format!("run: {e}"))?
        .try_into_tensors()
        .map_err(|e| format!("outputs: {e}"))
}

fn run_ort(g: &Generated) -> Result<Vec<Tensor>, String> {
    let config = OrtConfig {
        optimize: false,
        ..OrtConfig::default()
    };
    // The `ort` crate panics on some of ORT's answers (a dim_value below -1 in a model's
    // types): that is ORT refusing the model, not a finding.
    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut oracle =
            Oracle::load_bytes(&g.model, config).map_err(|e| format!("load: {e:#}"))?;
        oracle.run(&g.inputs).map_err(|e| format!("run: {e:#}"))
    }));
    run.unwrap_or_else(|panic| {
        let message = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        Err(format!("{ORT_BINDING_PANICKED}: {message}"))
    })
}

/// Spillway's refusals of what ONNX forbids and ORT lets through: a `Constant` with several
/// value attributes (`onnx.checker` refuses it, ORT takes one of them), an axis outside
/// `[-rank, rank - 1]` or an axis input that is not a scalar (ORT skips the checks on empty
/// and scalar inputs, and reads the first value of a list).
const ONNX_RULES_ORT_SKIPS: &[&str] = &[
    "exactly one value attribute is required",
    "the axis must be a scalar",
    "is out of range for rank",
];

/// Spillway's refusal of `Dropout` in training mode with a non-zero ratio (random output,
/// which no second engine reproduces).
const TRAINING_DROPOUT: &str = "Dropout in training mode";

/// How [`run_ort`] reports a panic of the `ort` crate.
const ORT_BINDING_PANICKED: &str = "ORT's Rust binding panicked";

/// Compares two engines' outputs.
fn compare(expected: &[Tensor], actual: &[Tensor]) -> Result<(), String> {
    if expected.len() != actual.len() {
        return Err(format!(
            "{} outputs, expected {}",
            actual.len(),
            expected.len()
        ));
    }
    for (i, (e, a)) in expected.iter().zip(actual).enumerate() {
        crate::assert_close(e, a, RTOL, ATOL).map_err(|m| format!("output {i}: {m}"))?;
    }
    Ok(())
}

/// Whether ORT's error says it lacks what the graph needs rather than that the graph is wrong:
/// no kernel for an (op, opset, type), a limit of its kernel the ONNX definition does not have,
/// an opset past the newest it supports, or types its Rust
/// binding cannot read (it panics on a `dim_value` below -1, which Spillway reads as dynamic).
fn ort_cannot_judge(error: &str) -> bool {
    // ORT's LRN kernel takes only 4-D inputs, odd sizes and a positive alpha; ONNX defines LRN
    // for rank 3 and more and any size and alpha.
    let lrn_limit = error.contains("/nn/lrn.");
    lrn_limit
        || error.contains("exclude_outside can be set to 1 when")
        || error.contains("saturate is only used for cast to float 8")
        || error.contains("ORT output of type String is not handled")
        || error.contains("Could not find an implementation for")
        || error.contains(ORT_BINDING_PANICKED)
        || error.contains("only *guarantees* support for models stamped with official released")
}

/// Why outputs that differ are ORT's deviation from ONNX rather than Spillway's error, for the
/// deviations checked by hand (each was compared with `onnx.reference`):
/// - a `Cast`/`CastLike` whose `saturate` (a flag for float8 targets) is neither 0 nor 1: ORT
///   then returns garbage for ordinary casts (e.g. int64 1 → float 5.99e14);
/// - `Dropout`'s mask before opset 12: ORT's kernel zero-fills it where ONNX (and ORT from
///   opset 12) says nothing was dropped;
/// - an integer output where every differing element is ORT's integer minimum: the result of
///   converting NaN or an out-of-range float to an integer, undefined in C++ (x86 gives the
///   minimum), which Spillway saturates.
fn ort_deviation(model: &[u8], want: &[Tensor], got: &[Tensor]) -> Option<&'static str> {
    use prost::Message;
    let proto = spillway::onnx::proto::ModelProto::decode(model).ok()?;
    let opset = proto
        .opset_import
        .iter()
        .find(|o| o.domain.as_deref().unwrap_or("").is_empty())
        .and_then(|o| o.version)?;
    let graph = proto.graph.as_ref()?;
    for node in &graph.node {
        let op = node.op_type.as_deref().unwrap_or("");
        let odd_saturate = node.attribute.iter().any(|a| {
            a.name.as_deref() == Some("saturate") && !matches!(a.i, Some(0) | Some(1) | None)
        });
        if matches!(op, "Cast" | "CastLike") && odd_saturate {
            return Some("ORT misreads a Cast whose saturate flag is neither 0 nor 1");
        }
        if op == "Dropout" && opset < 12 && node.output.len() > 1 {
            return Some("ORT zero-fills Dropout's mask before opset 12");
        }
    }
    let only_int_min = want.iter().zip(got).all(|(w, g)| {
        let min = match w.dtype() {
            spillway::DType::I64 => i64::MIN,
            spillway::DType::I32 => i32::MIN as i64,
            _ => return w.shape() == g.shape() && crate::assert_close(w, g, RTOL, ATOL).is_ok(),
        };
        match (w.to_i64_vec(), g.to_i64_vec()) {
            (Ok(w), Ok(g)) => {
                w.len() == g.len() && w.iter().zip(&g).all(|(a, b)| a == b || *a == min)
            }
            _ => false,
        }
    });
    only_int_min.then_some(
        "ORT's conversion of NaN or an out-of-range float to an integer is undefined (x86 gives \
         the minimum); Spillway saturates",
    )
}

/// Generates the graph of `seed` and compares the engines on it.
pub fn check_seed(seed: u64, len: usize) -> Outcome {
    let bytes = seed_bytes(seed, len);
    // Clear of the pending bugs (a huge allocation would abort the process).
    let Ok(g) = generate_with(&mut arbitrary::Unstructured::new(&bytes), true) else {
        return Outcome::NoGraph;
    };
    let finding = |what: String| {
        Outcome::Finding(Finding {
            seed,
            ops: g.ops.clone(),
            what,
            model: g.model.clone(),
        })
    };
    let ort = run_ort(&g);
    let ours: Vec<(OptimizationLevel, Result<Vec<Tensor>, String>)> = LEVELS
        .iter()
        .map(|&level| (level, run_spillway(&g, level)))
        .collect();
    let all_rejected = ort.is_err() && ours.iter().all(|(_, r)| r.is_err());
    if all_rejected {
        return Outcome::BothRejected;
    }
    for (level, result) in &ours {
        match (&ort, result) {
            (Ok(want), Ok(got)) => {
                if let Err(m) = compare(want, got) {
                    if let Some(why) = ort_deviation(&g.model, want, got) {
                        return Outcome::Unjudged(format!("{m}: {why}"));
                    }
                    return finding(format!("{level:?} vs ORT: {m}"));
                }
            }
            (Err(e), Ok(_)) if ort_cannot_judge(e) => return Outcome::Unjudged(e.clone()),
            (Err(e), Ok(_)) => return finding(format!("ORT rejects ({e}), {level:?} runs")),
            (Ok(_), Err(e)) if ONNX_RULES_ORT_SKIPS.iter().any(|rule| e.contains(rule)) => {
                return Outcome::Unjudged(format!("ORT accepts what ONNX forbids: {e}"));
            }
            (Ok(_), Err(e)) if e.contains(TRAINING_DROPOUT) => {
                return Outcome::Unjudged(format!("random in ORT: {e}"));
            }
            (Ok(_), Err(e)) => return finding(format!("ORT runs, {level:?} rejects: {e}")),
            (Err(_), Err(_)) => {}
        }
    }
    Outcome::Agreed
}
