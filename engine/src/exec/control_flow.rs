//! `If` and `Loop`: nodes whose work is a subgraph, run by a nested plan with the captured
//! outer-scope values bound as extra inputs.

use ndarray::{ArcArray, Axis, IxDyn, concatenate};
use spillway_kernels::{DType, Element, KernelError, Tensor, dispatch_all};

use super::SequentialPlan;
use super::loop_append::{self, Append};
use crate::error::{Error, Result};
use crate::graph::{Node, Subgraph, ValueId, ValueKind};
use crate::value::Value;

/// A compiled subgraph and how to bind it.
#[derive(Debug)]
pub struct SubPlan {
    plan: Box<SequentialPlan>,
    /// Declared element types of the subgraph's outputs (for empty scan outputs).
    output_dtypes: Vec<Option<DType>>,
    inputs: Vec<ValueId>,
    /// Per formal input: declared `optional(…)`, so a plain value passed in is wrapped.
    optional_inputs: Vec<bool>,
    formal_inputs: usize,
    capture_positions: Vec<usize>,
}

impl SubPlan {
    fn compile(sub: &Subgraph) -> Result<Self> {
        Ok(SubPlan {
            plan: Box::new(SequentialPlan::compile(&sub.graph)?),
            output_dtypes: sub
                .graph
                .outputs
                .iter()
                .map(|v| sub.graph.value(*v).dtype)
                .collect(),
            inputs: sub.graph.inputs.clone(),
            optional_inputs: sub
                .graph
                .inputs
                .iter()
                .take(sub.formal_inputs)
                .map(|v| matches!(sub.graph.value(*v).kind, ValueKind::Optional(_)))
                .collect(),
            formal_inputs: sub.formal_inputs,
            capture_positions: sub.capture_positions.clone(),
        })
    }

    /// Runs with the formal inputs given and the captures taken from the node's arguments.
    fn run(&self, formal: Vec<Value>, node_args: &[Option<&Value>]) -> Result<Vec<Value>> {
        if formal.len() != self.formal_inputs {
            return Err(Error::Internal(format!(
                "subgraph given {} inputs, it declares {}",
                formal.len(),
                self.formal_inputs
            )));
        }
        // A Loop body may declare a carried value `optional(T)` and return a plain `T` for it
        // (the backend test `test_loop16_seq_none` does): the next iteration sees it wrapped.
        let formal = formal
            .into_iter()
            .zip(&self.optional_inputs)
            .map(|(v, &optional)| match v {
                Value::Optional(_) => v,
                plain if optional => Value::some(plain),
                plain => plain,
            });
        let mut bound: Vec<(ValueId, Value)> = self.inputs.iter().copied().zip(formal).collect();
        for (&value, &pos) in self.inputs[self.formal_inputs..]
            .iter()
            .zip(&self.capture_positions)
        {
            let t = node_args.get(pos).copied().flatten().ok_or_else(|| {
                Error::Internal(format!("captured value at input {pos} was not computed"))
            })?;
            bound.push((value, t.clone()));
        }
        self.plan.run(bound).map(|(outputs, _)| outputs)
    }
}

/// A control-flow node, compiled.
#[derive(Debug)]
pub enum ControlFlow {
    /// `If`: then and else branches.
    If {
        then_branch: SubPlan,
        else_branch: SubPlan,
    },
    /// `Loop`: the body (with its appended carried values' `Concat`s taken out).
    Loop {
        /// The rewritten body.
        body: SubPlan,
        /// The carried values the loop appends to.
        appends: Vec<Append>,
    },
}

fn invalid(msg: String) -> KernelError {
    KernelError::InvalidValue(msg)
}

impl ControlFlow {
    /// Compiles `If` / `Loop`; `None` for any other node.
    pub fn compile(node: &Node) -> Result<Option<Self>> {
        let find = |attr: &str| {
            node.subgraphs
                .iter()
                .find(|s| s.attr == attr)
                .ok_or_else(|| {
                    Error::InvalidModel(format!(
                        "node '{}' ({}) has no '{attr}' subgraph",
                        node.name, node.op_type
                    ))
                })
        };
        let default_domain = node.domain.is_empty() || node.domain == "ai.onnx";
        match node.op_type.as_str() {
            "If" if default_domain => Ok(Some(ControlFlow::If {
                then_branch: SubPlan::compile(find("then_branch")?)?,
                else_branch: SubPlan::compile(find("else_branch")?)?,
            })),
            "Loop" if default_domain => {
                let (body, appends) = loop_append::rewrite(find("body")?)?;
                Ok(Some(ControlFlow::Loop {
                    body: SubPlan::compile(&body)?,
                    appends,
                }))
            }
            _ => Ok(None),
        }
    }

    /// Runs the node. Kernel-level problems (a non-boolean condition, scan outputs of changing
    /// shape) are `KernelError`s that the caller wraps with the node's name; errors inside a
    /// subgraph already name the inner node.
    pub fn run(
        &self,
        args: &[Option<&Value>],
        declared: usize,
    ) -> Result<Result<Vec<Value>, KernelError>> {
        match self {
            ControlFlow::If {
                then_branch,
                else_branch,
            } => {
                let cond = match tensor_input(args, 0).and_then(scalar_bool) {
                    Ok(c) => c,
                    Err(e) => return Ok(Err(e)),
                };
                let branch = if cond { then_branch } else { else_branch };
                branch.run(Vec::new(), args).map(Ok)
            }
            ControlFlow::Loop { body, appends } => run_loop(body, appends, args, declared),
        }
    }
}

/// Input `index` as a tensor; `None` when absent.
fn tensor_input<'a>(
    args: &[Option<&'a Value>],
    index: usize,
) -> Result<Option<&'a Tensor>, KernelError> {
    match args.get(index).copied().flatten() {
        None => Ok(None),
        Some(Value::Tensor(t)) => Ok(Some(t)),
        Some(other) => Err(KernelError::ValueKind {
            index,
            expected: "a tensor".into(),
            got: other.type_string(),
        }),
    }
}

fn scalar_bool(t: Option<&Tensor>) -> Result<bool, KernelError> {
    let t = t.ok_or_else(|| KernelError::Arity("the condition input is missing".into()))?;
    let v = t.view::<bool>()?;
    if v.len() != 1 {
        return Err(invalid(format!(
            "the condition must hold one element, it has shape {:?}",
            v.shape()
        )));
    }
    Ok(*v.iter().next().expect("one element"))
}

/// ONNX `Loop`: inputs (M?, cond?, v_initial…), body (iter, cond, carried…) → (cond, carried…,
/// scans…); outputs (carried final…, scans stacked along a new axis 0).
fn run_loop(
    body: &SubPlan,
    appends: &[Append],
    args: &[Option<&Value>],
    declared: usize,
) -> Result<Result<Vec<Value>, KernelError>> {
    let (m, c) = match (tensor_input(args, 0), tensor_input(args, 1)) {
        (Ok(m), Ok(c)) => (m, c),
        (Err(e), _) | (_, Err(e)) => return Ok(Err(e)),
    };
    let max_trips = match m {
        Some(t) => match t.to_i64_vec() {
            Ok(v) if v.len() == 1 => Some(v[0]),
            Ok(_) => return Ok(Err(invalid("M must be a scalar".into()))),
            Err(e) => return Ok(Err(e)),
        },
        None => None,
    };
    let mut cond = match c {
        Some(t) => match scalar_bool(Some(t)) {
            Ok(c) => c,
            Err(e) => return Ok(Err(e)),
        },
        None => true,
    };
    let mut carried: Vec<Value> = Vec::new();
    for i in 2..declared {
        match args.get(i).copied().flatten() {
            Some(t) => carried.push(t.clone()),
            None => {
                return Ok(Err(KernelError::Arity(format!(
                    "loop-carried input {i} is missing"
                ))));
            }
        }
    }
    let n_carried = carried.len();
    // The parts of each appended carried value; the body keeps seeing the initial value (it
    // reads it only in the `Concat` taken out).
    let initial = carried.clone();
    let mut parts: Vec<Vec<Tensor>> = vec![Vec::new(); appends.len()];
    let mut scans: Vec<Vec<Tensor>> = Vec::new();
    let mut iteration: i64 = 0;
    while cond && max_trips.is_none_or(|m| iteration < m) {
        if let Err(e) = super::limits::check_loop(iteration as u64) {
            return Ok(Err(e));
        }
        let mut formal = vec![
            Value::Tensor(Tensor::scalar(iteration)),
            Value::Tensor(Tensor::scalar(cond)),
        ];
        formal.extend(carried.iter().cloned());
        let outputs = body.run(formal, args)?;
        if outputs.len() < 1 + n_carried {
            return Ok(Err(invalid(format!(
                "the body returned {} outputs, expected at least {}",
                outputs.len(),
                1 + n_carried
            ))));
        }
        let mut outputs = outputs.into_iter();
        let next_cond = match outputs.next() {
            Some(Value::Tensor(t)) => Ok(t),
            Some(other) => Err(KernelError::ValueKind {
                index: 0,
                expected: "a boolean tensor (the body's condition output)".into(),
                got: other.type_string(),
            }),
            None => Err(KernelError::Arity("the body returned no condition".into())),
        };
        cond = match next_cond.and_then(|t| scalar_bool(Some(&t))) {
            Ok(c) => c,
            Err(e) => return Ok(Err(e)),
        };
        carried = outputs.by_ref().take(n_carried).collect();
        for (append, acc) in appends.iter().zip(&mut parts) {
            match std::mem::replace(
                &mut carried[append.carried],
                initial[append.carried].clone(),
            ) {
                Value::Tensor(t) => acc.push(t),
                other => {
                    return Ok(Err(KernelError::ValueKind {
                        index: 1 + append.carried,
                        expected: "a tensor (the part a Concat appends)".into(),
                        got: other.type_string(),
                    }));
                }
            }
        }
        let scan_values: Vec<Value> = outputs.collect();
        if scans.is_empty() {
            scans = vec![Vec::new(); scan_values.len()];
        }
        for (k, (acc, v)) in scans.iter_mut().zip(scan_values).enumerate() {
            match v {
                Value::Tensor(t) => acc.push(t),
                other => {
                    return Ok(Err(KernelError::ValueKind {
                        index: 1 + n_carried + k,
                        expected: "a tensor (scan outputs are stacked)".into(),
                        got: other.type_string(),
                    }));
                }
            }
        }
        iteration += 1;
    }
    if iteration == 0 {
        // No iteration ran: every scan output is empty, typed as the body declares it.
        let n_scans = body.output_dtypes.len().saturating_sub(1 + n_carried);
        scans = vec![Vec::new(); n_scans];
    }
    let mut results = carried;
    for (append, acc) in appends.iter().zip(&parts) {
        if acc.is_empty() {
            continue;
        }
        let Value::Tensor(first) = &initial[append.carried] else {
            return Ok(Err(KernelError::ValueKind {
                index: 2 + append.carried,
                expected: "a tensor (a Concat appends to it)".into(),
                got: initial[append.carried].type_string(),
            }));
        };
        results[append.carried] = Value::Tensor(append.join(first, acc)?);
    }
    for (k, acc) in scans.into_iter().enumerate() {
        if acc.is_empty() {
            let dtype = body
                .output_dtypes
                .get(1 + n_carried + k)
                .copied()
                .flatten()
                .unwrap_or(DType::F32);
            results.push(Value::Tensor(Tensor::zeros(dtype, &[0])));
            continue;
        }
        match stack(&acc) {
            Ok(t) => results.push(Value::Tensor(t)),
            Err(e) => return Ok(Err(e)),
        }
    }
    Ok(Ok(results))
}

/// Stacks same-shaped tensors along a new leading axis.
fn stack(parts: &[Tensor]) -> Result<Tensor, KernelError> {
    let first = parts
        .first()
        .ok_or_else(|| invalid("no scan values".into()))?;
    if parts
        .iter()
        .any(|p| p.shape() != first.shape() || p.dtype() != first.dtype())
    {
        return Err(invalid(
            "scan outputs change shape or type between iterations".into(),
        ));
    }
    let mut shape = vec![1];
    shape.extend_from_slice(first.shape());
    let expanded: Vec<Tensor> = parts
        .iter()
        .map(|p| p.reshaped(&shape))
        .collect::<Result<_, _>>()?;
    dispatch_all!(first, a => stack_typed(a, &expanded))
}

fn stack_typed<T: Element>(
    _: &ArcArray<T, IxDyn>,
    parts: &[Tensor],
) -> Result<Tensor, KernelError> {
    let views = parts
        .iter()
        .map(|t| t.view::<T>())
        .collect::<Result<Vec<_>, _>>()?;
    let joined = concatenate(Axis(0), &views).map_err(|e| invalid(e.to_string()))?;
    Ok(T::into_tensor(joined.into_shared()))
}
