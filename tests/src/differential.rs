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
pub const ORT_CRASHES: &[u64] = &[
    2719, 7881, 11271, 11447, 12498, 13587, 18691, 19866, 20826, 21061, 26209, 33141, 33251,
];

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
    /// deviate from ONNX (`ort_deviation`), or ORT runs a `Constant` that ONNX forbids.
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
/// and scalar inputs, and reads the first value of a list), a `Squeeze` axis listed twice, a
/// `GatherND` index past its dimension (ORT reads out of bounds), a negative `batch_dims`, an
/// `Expand` shape that is not 1-D, a pooling window larger than the padded input (ONNX's
/// output-size formula gives no element), a `BatchNormalization` of rank 1 (ONNX's input is
/// `N × C × …`), a `Split` whose `num_outputs` differs from its output count (onnx.reference
/// then returns the first of `num_outputs` parts, ORT ignores the attribute), an `ArgMax` or
/// `ArgMin` over an empty axis (there is no index to give: onnx.reference raises; ORT returns
/// the input's empty shape, the axis unreduced).
const ONNX_RULES_ORT_SKIPS: &[&str] = &[
    "exactly one value attribute is required",
    "the axis must be a scalar",
    "is out of range for rank",
    "is repeated in",
    "is out of range for a dimension of size",
    "attribute 'batch_dims'",
    "must be 1-D (a list of integers)",
    "is smaller than the (dilated) kernel",
    "BatchNormalization needs rank >= 2",
    "differs from the node's",
    "cannot take the arg",
];

/// ORT's refusals of scalar-like inputs that are not 0-D: ONNX asks for scalars (`Clip`'s
/// bounds, `Range`'s operands, `CumSum`'s axis); ORT applies the rule for some element types,
/// some ranks or only at load, and Spillway takes any one-element tensor as the scalar for
/// every type, as ORT does for float `Clip`.
const ORT_SCALAR_RULES: &[&str] = &[
    "min should be a scalar",
    "max should be a scalar",
    "should be scalar like tensor",
    "Input to 'Range' op should be scalars",
    "Axis tensor should be 0D or 1D",
];

/// Spillway's refusal of `Dropout` in training mode with a non-zero ratio (random output,
/// which no second engine reproduces).
const TRAINING_DROPOUT: &str = "Dropout in training mode";

/// How [`run_ort`] reports a panic of the `ort` crate.
const ORT_BINDING_PANICKED: &str = "ORT's Rust binding panicked";

/// The reductions whose results ORT shapes differently from ONNX on empty inputs.
const REDUCTIONS: &[&str] = &[
    "ReduceMean",
    "ReduceSum",
    "ReduceSumSquare",
    "ReduceProd",
    "ReduceMax",
    "ReduceMin",
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",
    "ReduceLogSumExp",
    "ArgMax",
    "ArgMin",
];

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
    // for rank 3 and more and any size and alpha. Its LayerNormalization refuses normalizing
    // over no element, and its pools an empty channel or spatial axis; ONNX defines both
    // (the result is empty or NaN).
    let kernel_limit = error.contains("/nn/lrn.")
        || error.contains("Size of X.shape[axis:] must be at least 1")
        || error.contains("Only N can be zero");
    kernel_limit
        || error.contains("exclude_outside can be set to 1 when")
        || error.contains("saturate is only used for cast to float 8")
        || error.contains("ORT output of type String is not handled")
        || error.contains("Could not find an implementation for")
        || error.contains(ORT_BINDING_PANICKED)
        || error.contains("only *guarantees* support for models stamped with official released")
}

/// The facts about a generated graph the deviation rules look at.
struct GraphFacts {
    /// The default-domain opset.
    opset: i64,
    /// The op types of its nodes.
    ops: Vec<String>,
    /// Whether a node has a `saturate` attribute other than 0 or 1.
    odd_saturate: bool,
    /// Whether a node is a `Dropout` with a mask output.
    dropout_mask: bool,
    /// Whether a graph input declares a `dim_value` of 0.
    zero_dim_input: bool,
}

impl GraphFacts {
    fn read(model: &[u8]) -> Option<Self> {
        use prost::Message;
        use spillway::onnx::proto::tensor_shape_proto::dimension::Value as Dim;
        let proto = spillway::onnx::proto::ModelProto::decode(model).ok()?;
        let opset = proto
            .opset_import
            .iter()
            .find(|o| o.domain.as_deref().unwrap_or("").is_empty())
            .and_then(|o| o.version)?;
        let graph = proto.graph.as_ref()?;
        let ops = graph
            .node
            .iter()
            .map(|n| n.op_type.clone().unwrap_or_default())
            .collect();
        let casts_with_odd_saturate = graph.node.iter().any(|n| {
            matches!(n.op_type.as_deref(), Some("Cast" | "CastLike"))
                && n.attribute.iter().any(|a| {
                    a.name.as_deref() == Some("saturate") && !matches!(a.i, Some(0 | 1) | None)
                })
        });
        let dropout_mask = graph
            .node
            .iter()
            .any(|n| n.op_type.as_deref() == Some("Dropout") && n.output.len() > 1);
        let zero_dim_input = graph.input.iter().any(|i| {
            let tensor = match i.r#type.as_ref().and_then(|t| t.value.as_ref()) {
                Some(spillway::onnx::proto::type_proto::Value::TensorType(t)) => t,
                _ => return false,
            };
            tensor.shape.as_ref().is_some_and(|s| {
                s.dim
                    .iter()
                    .any(|d| matches!(d.value, Some(Dim::DimValue(0))))
            })
        });
        Some(Self {
            opset,
            ops,
            odd_saturate: casts_with_odd_saturate,
            dropout_mask,
            zero_dim_input,
        })
    }

    fn has(&self, op: &str) -> bool {
        self.ops.iter().any(|o| o == op)
    }

    fn has_any(&self, ops: &[&str]) -> bool {
        ops.iter().any(|op| self.has(op))
    }

    fn has_reduction(&self) -> bool {
        REDUCTIONS.iter().any(|r| self.has(r))
    }
}

/// Whether every output pair either agrees or differs only as `deviates` allows.
fn differs_only_where(
    want: &[Tensor],
    got: &[Tensor],
    deviates: impl Fn(&Tensor, &Tensor) -> bool,
) -> bool {
    want.len() == got.len()
        && want
            .iter()
            .zip(got)
            .all(|(w, g)| crate::assert_close(w, g, RTOL, ATOL).is_ok() || deviates(w, g))
}

/// Whether the tensors have one shape and every element that differs satisfies `allowed`
/// (ORT's value, Spillway's value).
fn elements_differ_only_where(w: &Tensor, g: &Tensor, allowed: impl Fn(f64, f64) -> bool) -> bool {
    if w.shape() != g.shape() || w.dtype() != g.dtype() {
        return false;
    }
    match (w.to_f64_vec(), g.to_f64_vec()) {
        (Ok(w), Ok(g)) => w.iter().zip(&g).all(|(&a, &b)| {
            let close =
                a == b || (a - b).abs() <= ATOL + RTOL * b.abs() || (a.is_nan() && b.is_nan());
            close || allowed(a, b)
        }),
        _ => false,
    }
}

/// Why outputs that differ are ORT's deviation from ONNX rather than Spillway's error, for the
/// deviations checked by hand (each was compared with `onnx.reference`):
/// - a `Cast`/`CastLike` whose `saturate` (a flag for float8 targets) is neither 0 nor 1: ORT
///   then returns garbage for ordinary casts (e.g. int64 1 → float 5.99e14);
/// - `Dropout`'s mask before opset 12: ORT's kernel zero-fills it where ONNX (and ORT from
///   opset 12) says nothing was dropped;
/// - a reduction over an empty axis: ORT leaves the axis unreduced (or gives the input's shape)
///   where ONNX's keepdims rule gives 1 or removes it; its `ReduceMean` of nothing is 0 where
///   ONNX's (0 / 0) is NaN;
/// - an integer `ReduceLogSumExp`: ORT subtracts the maximum and exponentiates in the integer
///   type (every smaller term truncates to 0); ONNX's reference computes in float64;
/// - `ReduceMin`/`ReduceMax` over a NaN: ORT's result depends on where the NaN is (it is kept
///   only first); numpy's, which ONNX's reference uses, is NaN;
/// - an integer `ReduceLogSum`: the log of a sum that is not positive, converted to integers;
/// - a max over nothing but -inf: ORT's `GlobalMaxPool` starts from the type's lowest finite
///   value instead of -inf;
/// - an integer output where every differing element is ORT's integer minimum: the result of
///   converting NaN or an out-of-range float to an integer, undefined in C++ (x86 gives the
///   minimum), which Spillway saturates.
fn ort_deviation(
    facts: &GraphFacts,
    empty_input: bool,
    want: &[Tensor],
    got: &[Tensor],
) -> Option<&'static str> {
    if facts.odd_saturate {
        return Some("ORT misreads a Cast whose saturate flag is neither 0 nor 1");
    }
    if facts.dropout_mask && facts.opset < 12 {
        return Some("ORT zero-fills Dropout's mask before opset 12");
    }
    let empty_reduction_shape = differs_only_where(want, got, |w, g| {
        w.shape() != g.shape() && (empty_input || w.is_empty() || g.is_empty())
    });
    if facts.has_reduction() && empty_reduction_shape {
        return Some("ORT leaves a reduced empty axis unreduced; ONNX's keepdims rule does not");
    }
    let nan_for_number = differs_only_where(want, got, |w, g| {
        elements_differ_only_where(w, g, |_, b| b.is_nan())
    });
    if facts.has("ReduceMean") && nan_for_number {
        return Some("ORT's ReduceMean of nothing is 0; ONNX's (0 / 0) is NaN");
    }
    if facts.has_any(&["ReduceMin", "ReduceMax"]) && nan_for_number {
        return Some(
            "ORT's ReduceMin and ReduceMax skip a NaN unless it comes first; ONNX's (numpy's) \
             propagate it",
        );
    }
    let integer_outputs = differs_only_where(want, got, |w, _| w.dtype().is_int());
    if facts.has("ReduceLogSumExp") && integer_outputs {
        return Some("ORT computes an integer ReduceLogSumExp in the integer type");
    }
    if facts.has("ReduceLogSum") && integer_outputs {
        return Some(
            "an integer ReduceLogSum of a non-positive sum is NaN or -inf converted to the \
             integer type, undefined in C++ (ORT gives the minimum); Spillway saturates",
        );
    }
    let lowest_for_minus_inf = differs_only_where(want, got, |w, g| {
        elements_differ_only_where(w, g, |a, b| {
            b == f64::NEG_INFINITY && (a == f64::from(f32::MIN) || a == f64::MIN)
        })
    });
    if lowest_for_minus_inf {
        return Some("ORT's max over only -inf gives the type's lowest finite value");
    }
    let only_int_min = differs_only_where(want, got, |w, g| {
        let min = match w.dtype() {
            spillway::DType::I64 => i64::MIN,
            spillway::DType::I32 => i32::MIN as i64,
            _ => return false,
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

/// Why an error of ORT's alone is ORT's deviation, not Spillway's: one of [`ORT_SCALAR_RULES`];
/// a broadcast of an empty axis against a longer one after a reduction (the axis ORT left
/// unreduced, see [`ort_deviation`]); ORT's shape inference taking a graph input's
/// `dim_value: 0` as a fixed 0 where Spillway takes it as dynamic, as exporters mean it; or
/// its shape inference refusing what follows a `PRelu` whose slope broadcasts X larger, or a
/// `NonZero` of a scalar, whose shape it infers as
/// `[0, n]` where its own kernel gives `[1, n]`.
fn ort_refusal_deviation(facts: &GraphFacts, error: &str) -> Option<&'static str> {
    if ORT_SCALAR_RULES.iter().any(|rule| error.contains(rule)) {
        return Some("ORT refuses a one-element tensor as a scalar for this type or rank");
    }
    if facts.has_reduction() && error.contains("Can broadcast 0 by") {
        return Some("ORT broadcasts the empty axis its reduction left unreduced");
    }
    if facts.zero_dim_input && error.contains("[ShapeInferenceError]") {
        return Some("ORT's shape inference takes an input's dim_value 0 as fixed");
    }
    if facts.has("PRelu") && error.contains("[ShapeInferenceError]") {
        return Some(
            "ORT's shape inference gives PRelu the shape of X; its kernel (as Spillway and \
             ONNX's reference) broadcasts X and the slope both ways",
        );
    }
    if facts.has("NonZero") && error.contains("[ShapeInferenceError]") {
        return Some(
            "ORT's shape inference gives NonZero of a scalar the shape [0, n]; its kernel (as \
             Spillway, and numpy before 2.1) gives [1, n]",
        );
    }
    None
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
    let Some(facts) = GraphFacts::read(&g.model) else {
        return finding("the generated model does not decode".into());
    };
    let empty_input = g.inputs.iter().any(|(_, t)| t.is_empty());
    // Where ORT fails running a node and so does Spillway without optimizations, an optimized
    // level that runs has removed the failing node (e.g. a `Shape` of it folded to a constant).
    let removed_failing_node = |e: &str| {
        e.starts_with("run:")
            && ours.first().is_some_and(|(level, r)| {
                *level == OptimizationLevel::Disabled
                    && r.as_ref().is_err_and(|ours| ours.starts_with("run:"))
            })
    };
    for (level, result) in &ours {
        match (&ort, result) {
            (Ok(want), Ok(got)) => {
                if let Err(m) = compare(want, got) {
                    if let Some(why) = ort_deviation(&facts, empty_input, want, got) {
                        return Outcome::Unjudged(format!("{m}: {why}"));
                    }
                    return finding(format!("{level:?} vs ORT: {m}"));
                }
            }
            (Err(e), Ok(_)) if ort_cannot_judge(e) => return Outcome::Unjudged(e.clone()),
            (Err(e), Ok(_)) => {
                if let Some(why) = ort_refusal_deviation(&facts, e) {
                    return Outcome::Unjudged(format!("{e}: {why}"));
                }
                if removed_failing_node(e) {
                    return Outcome::Unjudged(format!(
                        "{e}: {level:?} removed the node both engines fail on without \
                         optimizations"
                    ));
                }
                return finding(format!("ORT rejects ({e}), {level:?} runs"));
            }
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
