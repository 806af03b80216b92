//! The fuzzing harness of Spillway: what each fuzz target does with its bytes, shared with
//! the regression test that replays every committed crash (`tests/tests/fuzz_regressions.rs`
//! includes this file by path, so the same checks run in the normal `cargo test`).
//!
//! A check panics when it finds a bug: a panic inside the engine (libFuzzer's panic hook
//! aborts on it even where the executor catches it), an [`spillway::Error::Panic`] (how the session API
//! reports a panic it caught, which the replaying tests see instead) or an [`spillway::Error::Internal`].
//! Every other error is a correct answer to a bad input.

use prost::Message;
use spillway::graph::{Dim, ValueType};
use spillway::{DType, Error, OptimizationLevel, RunLimits, Session, Tensor};

pub mod generate;
pub mod schema;

/// Every optimization level, in the order the checks try them.
pub const LEVELS: [OptimizationLevel; 3] = [
    OptimizationLevel::Disabled,
    OptimizationLevel::Basic,
    OptimizationLevel::All,
];

/// The most elements a model input may have for [`check_model_bytes`] to run the model.
const RUN_LIMIT: usize = 1 << 12;

/// Panics on an [`spillway::Error::Panic`] or [`spillway::Error::Internal`]: a panic the API caught, or a worker
/// that failed, is still a bug.
pub fn assert_not_internal<T>(what: &str, result: &Result<T, Error>) {
    if let Err(e @ (Error::Panic { .. } | Error::Internal(_))) = result {
        panic!("{what}: {e}");
    }
}

/// A session on one CPU lane with one kernel thread, at `level`.
fn builder(level: OptimizationLevel) -> spillway::SessionBuilder {
    Session::builder()
        .with_optimization(level)
        .with_intra_op_threads(1)
        .with_run_limits(RunLimits::default().with_max_tensor_bytes(Some(MAX_TENSOR_BYTES)))
}

/// The largest tensor the checks let a model make: small enough that the few tensors of a
/// generated graph stay inside libFuzzer's 4 GB (the default, half the machine's memory, would
/// let a valid model look like an out-of-memory crash), large enough for every size check
/// to be reached with ordinary values.
pub const MAX_TENSOR_BYTES: usize = 256 << 20;

/// Target `model_bytes`: loads arbitrary bytes as a model at every optimization level (load,
/// validation, optimization passes, plan compilation); a model that loads and whose inputs
/// all have small fixed shapes also runs once on seeded inputs.
pub fn check_model_bytes(data: &[u8]) {
    for level in LEVELS {
        let result = builder(level).commit_from_memory(data);
        assert_not_internal("load", &result);
        if let Ok(session) = result
            && let Some(inputs) = small_inputs(&session)
        {
            assert_not_internal("run", &session.run(inputs));
        }
    }
}

/// Seeded inputs for every declared input when each is a tensor of known element type and
/// fixed shape of at most [`RUN_LIMIT`] elements.
fn small_inputs(session: &Session) -> Option<Vec<(String, Tensor)>> {
    session
        .inputs()
        .iter()
        .enumerate()
        .map(|(i, info)| {
            let shape: Vec<usize> = info
                .shape
                .as_ref()?
                .iter()
                .map(|d| match d {
                    Dim::Fixed(n) => Some(*n),
                    _ => None,
                })
                .collect::<Option<_>>()?;
            let count = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d))?;
            if count > RUN_LIMIT {
                return None;
            }
            let dtype = info.dtype?;
            let bytes: Vec<u8> = (0..count).map(|k| (k * 37 + i * 11) as u8).collect();
            Some((
                info.name.clone(),
                generate::tensor_from_bytes(dtype, &shape, &bytes)?,
            ))
        })
        .collect()
}

/// Target `npy`: parses arbitrary bytes as a `.npy` file; what parses must hold as many
/// elements as its shape says.
pub fn check_npy(data: &[u8]) {
    if let Ok(t) = spillway::tensor_from_npy(data) {
        assert_eq!(t.len(), t.shape().iter().product::<usize>());
    }
}

/// Target `tensor_proto`: the first byte picks the declared type (tensor, sequence of
/// tensors, optional tensor, sequence of sequences), the rest is decoded as the serialized
/// `TensorProto` / `SequenceProto` / `OptionalProto`, as the conformance runner reads them.
pub fn check_tensor_proto(data: &[u8]) {
    let Some((&kind, rest)) = data.split_first() else {
        return;
    };
    let tensor = ValueType::Tensor {
        dtype: None,
        shape: None,
    };
    let declared = match kind % 4 {
        0 => tensor,
        1 => ValueType::Sequence(Box::new(tensor)),
        2 => ValueType::Optional(Box::new(tensor)),
        _ => ValueType::Sequence(Box::new(ValueType::Sequence(Box::new(tensor)))),
    };
    let _ = spillway::onnx::decode_value_bytes(rest, None, &declared);
    if kind % 4 == 0
        && let Ok(proto) = spillway::onnx::proto::TensorProto::decode(rest)
        && let Ok(t) = spillway::onnx::decode_tensor(&proto, None)
    {
        assert_eq!(t.len(), t.shape().iter().product::<usize>());
        let want: Option<usize> = proto
            .dims
            .iter()
            .map(|&d| usize::try_from(d).ok())
            .collect::<Option<Vec<_>>>()
            .map(|d| d.iter().product());
        assert_eq!(Some(t.len()), want, "decoded element count vs dims");
    }
}

/// Loads a generated graph at `level` and runs it on its generated inputs.
pub fn check_generated(g: &generate::Generated, level: OptimizationLevel) {
    let result = builder(level).commit_from_memory(&g.model);
    assert_not_internal("load", &result);
    if let Ok(session) = result {
        assert_not_internal("run", &session.run(g.inputs.clone()));
    }
}

/// Target `graph_gen`: the first byte picks the optimization level, the rest draws a small
/// graph from the supported ops' schemas (see [`generate`]; nothing happens when the bytes run
/// out before a graph is complete), which [`check_generated`] loads and runs. (One level per
/// execution: three times the executions, and the fuzzer steers the level like any choice.)
pub fn check_graph_bytes(data: &[u8]) {
    check_graph_bytes_with(data, generate::avoid_known_from_env());
}

/// [`check_graph_bytes`] with the generator's `avoid_known` given (see
/// [`generate::generate_with`]).
pub fn check_graph_bytes_with(data: &[u8], avoid_known: bool) {
    let Some((&level, rest)) = data.split_first() else {
        return;
    };
    if let Ok(g) = generate::generate_with(&mut arbitrary::Unstructured::new(rest), avoid_known) {
        check_generated(&g, LEVELS[level as usize % LEVELS.len()]);
    }
}

/// One operator schema (one version of one op), as `onnx.defs` describes it.
#[derive(Debug)]
pub struct OpSchema {
    /// Op type.
    pub op: &'static str,
    /// The opset version this schema starts at.
    pub since: i64,
    /// Formal inputs.
    pub inputs: &'static [Param],
    /// Formal outputs.
    pub outputs: &'static [Param],
    /// Attributes.
    pub attrs: &'static [AttrSpec],
}

/// Single, optional or variadic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opt {
    /// Exactly one.
    Single,
    /// Zero or one.
    Optional,
    /// One or more.
    Variadic,
}

/// A formal input or output.
#[derive(Debug)]
pub struct Param {
    /// Its name in the spec.
    pub name: &'static str,
    /// Single, optional or variadic.
    pub option: Opt,
    /// The type constraint (`T`) or a fixed type (`tensor(int64)`).
    pub constraint: &'static str,
    /// ONNX element type codes allowed.
    pub types: &'static [i32],
}

/// The type of an attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttrKind {
    /// `float`.
    Float,
    /// `int`.
    Int,
    /// `string`.
    Str,
    /// `tensor`.
    Tensor,
    /// `floats`.
    Floats,
    /// `ints`.
    Ints,
    /// `strings`.
    Strs,
}

/// A formal attribute.
#[derive(Debug)]
pub struct AttrSpec {
    /// Name.
    pub name: &'static str,
    /// Type.
    pub kind: AttrKind,
    /// Whether the op requires it.
    pub required: bool,
}

/// The element type of an ONNX code, where Spillway has one.
pub fn dtype_of(code: i32) -> Option<DType> {
    DType::from_onnx(code)
}
