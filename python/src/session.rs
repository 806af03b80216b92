//! `NativeSession`: a [`spillway::Session`] as a Python class.

use std::sync::Mutex;
use std::time::Instant;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use spillway::{
    Devices, OptimizationLevel, Placement, RunOptions, Session, TraceEvent, Value, ValueType,
};

use crate::convert::{engine_error, to_python, to_value, type_string};
use crate::errors::{engine, invalid_argument, raise};

/// Trace events of the profiled runs so far, on one time axis from `start`.
struct Profile {
    start: Instant,
    events: Vec<TraceEvent>,
}

/// A loaded model (`spillway.InferenceSession` wraps it). `run` may be called from many
/// Python threads at once: it releases the GIL while the engine computes.
#[pyclass(module = "spillway._spillway", frozen)]
pub struct NativeSession {
    session: Session,
    inputs: Vec<(String, ValueType)>,
    outputs: Vec<(String, ValueType)>,
    profile: Mutex<Option<Profile>>,
}

/// Parses a placement policy name, ignoring case, `-` and `_` (`hios-lp` is `HiosLp`).
fn parse_policy(py: Python<'_>, name: &str) -> PyResult<Placement> {
    let wanted: String = name
        .chars()
        .filter(|c| *c != '-' && *c != '_')
        .collect::<String>()
        .to_ascii_lowercase();
    Placement::ALL
        .iter()
        .find(|p| format!("{p:?}").to_ascii_lowercase() == wanted)
        .copied()
        .ok_or_else(|| {
            let known: Vec<String> = Placement::ALL.iter().map(|p| format!("{p:?}")).collect();
            invalid_argument(
                py,
                format!("unknown placement '{name}'; known: {}", known.join(", ")),
            )
        })
}

/// Runs `f`, turning a panic into an engine-style error (never a panic across into Python).
fn guarded<T>(context: &str, f: impl FnOnce() -> spillway::Result<T>) -> spillway::Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|payload| {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        Err(spillway::Error::Panic {
            context: context.into(),
            message,
        })
    })
}

/// A Python shape: ints for fixed dims, the name for symbolic ones, `None` for unknown.
fn shape_to_python(py: Python<'_>, ty: &ValueType) -> PyResult<Py<PyAny>> {
    match ty {
        ValueType::Tensor {
            shape: Some(shape), ..
        } => {
            let dims = shape
                .iter()
                .map(|d| -> PyResult<Py<PyAny>> {
                    Ok(match d {
                        spillway::Dim::Fixed(n) => n.into_pyobject(py)?.into_any().unbind(),
                        spillway::Dim::Symbol(s) => s.into_pyobject(py)?.into_any().unbind(),
                        _ => py.None(),
                    })
                })
                .collect::<PyResult<Vec<_>>>()?;
            Ok(PyList::new(py, dims)?.into_any().unbind())
        }
        // Unknown rank, or not a tensor: onnxruntime reports an empty list.
        _ => Ok(PyList::empty(py).into_any().unbind()),
    }
}

#[pymethods]
impl NativeSession {
    /// Loads `model` (a path or the bytes of an ONNX file) and compiles it.
    ///
    /// `optimization`: 0 none, 1 basic, 2 all. `cpu_lanes`: CPU worker lanes. `cuda`:
    /// `(ordinal, streams)` for each GPU. `virtual_lanes`: lanes of each Virtual device.
    /// `placement`: a policy name. `allow_fallback`: drop unavailable devices (off by default:
    /// a missing GPU is an error).
    #[new]
    #[pyo3(signature = (model, *, intra_op_threads=None, optimization=2, cpu_lanes=1, cuda=Vec::new(), virtual_lanes=Vec::new(), placement=None, allow_fallback=false, spinning=None, profiling=false))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        model: &Bound<'_, PyAny>,
        intra_op_threads: Option<usize>,
        optimization: u8,
        cpu_lanes: usize,
        cuda: Vec<(u32, usize)>,
        virtual_lanes: Vec<usize>,
        placement: Option<String>,
        allow_fallback: bool,
        spinning: Option<bool>,
        profiling: bool,
    ) -> PyResult<Self> {
        let mut devices = Devices::cpu().with_cpu_lanes(cpu_lanes);
        for lanes in virtual_lanes {
            devices = devices.with_virtual(lanes, spillway::CopyCost::PCIE);
        }
        for (ordinal, streams) in cuda {
            devices = devices.with_cuda(ordinal, streams);
        }
        let mut builder = Session::builder()
            .with_devices(devices.allow_fallback(allow_fallback))
            .with_optimization(match optimization {
                0 => OptimizationLevel::Disabled,
                1 => OptimizationLevel::Basic,
                _ => OptimizationLevel::All,
            });
        if let Some(threads) = intra_op_threads.filter(|&n| n > 0) {
            builder = builder.with_intra_op_threads(threads);
        }
        if let Some(name) = placement {
            builder = builder.with_placement(parse_policy(py, &name)?);
        }
        if let Some(spin) = spinning {
            builder = builder.with_spinning(spin);
        }
        let session = if let Ok(bytes) = model.cast::<PyBytes>() {
            let bytes = bytes.as_bytes();
            py.detach(|| guarded("creating the session", || builder.commit_from_memory(bytes)))
                .map_err(engine_error(py))?
        } else {
            let path: String = py
                .import("os")?
                .call_method1("fspath", (model,))
                .map_err(|_| {
                    invalid_argument(
                        py,
                        format!(
                            "the model must be a path or bytes, not {}",
                            model
                                .get_type()
                                .name()
                                .map(|n| n.to_string())
                                .unwrap_or_default()
                        ),
                    )
                })?
                .extract()?;
            py.detach(|| guarded("creating the session", || builder.commit_from_file(&path)))
                .map_err(engine_error(py))?
        };
        let declared = |infos: Vec<&spillway::ValueInfo>| {
            infos
                .into_iter()
                .map(|v| (v.name.clone(), v.value_type()))
                .collect::<Vec<_>>()
        };
        let inputs = declared(session.inputs());
        let outputs = declared(session.outputs());
        Ok(NativeSession {
            session,
            inputs,
            outputs,
            profile: Mutex::new(profiling.then(|| Profile {
                start: Instant::now(),
                events: Vec::new(),
            })),
        })
    }

    /// The inputs as `(name, type, shape)`.
    fn inputs(&self, py: Python<'_>) -> PyResult<Vec<(String, String, Py<PyAny>)>> {
        describe(py, &self.inputs)
    }

    /// The outputs as `(name, type, shape)`.
    fn outputs(&self, py: Python<'_>) -> PyResult<Vec<(String, String, Py<PyAny>)>> {
        describe(py, &self.outputs)
    }

    /// The devices the session runs on (`cpu`, `cuda0`, `virtual0`).
    fn devices(&self) -> Vec<String> {
        self.session
            .devices()
            .specs()
            .iter()
            .map(|s| s.device.to_string())
            .collect()
    }

    /// The model's metadata as a dict (onnxruntime's `ModelMetadata` fields).
    fn metadata<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let meta = self.session.metadata();
        let dict = PyDict::new(py);
        dict.set_item("producer_name", &meta.producer_name)?;
        dict.set_item("graph_name", &meta.graph_name)?;
        dict.set_item("domain", &meta.domain)?;
        dict.set_item("description", &meta.description)?;
        dict.set_item("graph_description", &meta.graph_description)?;
        dict.set_item("version", meta.model_version)?;
        dict.set_item("custom_metadata_map", meta.custom.clone())?;
        Ok(dict)
    }

    /// Runs the model: `feed` maps input names to arrays (lists of arrays for sequence inputs,
    /// `None` for an empty optional); returns the outputs named in `output_names` (all when
    /// `None` or empty), in that order. The GIL is released while the engine computes.
    #[pyo3(signature = (output_names, feed))]
    fn run(
        &self,
        py: Python<'_>,
        output_names: Option<Vec<String>>,
        feed: &Bound<'_, PyDict>,
    ) -> PyResult<Vec<Py<PyAny>>> {
        // Which outputs, by position, checked before running.
        let wanted: Vec<usize> = match output_names.filter(|n| !n.is_empty()) {
            None => (0..self.outputs.len()).collect(),
            Some(names) => names
                .iter()
                .map(|name| {
                    self.outputs
                        .iter()
                        .position(|(n, _)| n == name)
                        .ok_or_else(|| {
                            engine(
                                py,
                                spillway::Error::UnknownOutput {
                                    name: name.clone(),
                                    expected: self
                                        .outputs
                                        .iter()
                                        .map(|(n, _)| n.as_str())
                                        .collect::<Vec<_>>()
                                        .join(", "),
                                },
                            )
                        })
                })
                .collect::<PyResult<_>>()?,
        };
        let mut values: Vec<(String, Value)> = Vec::with_capacity(feed.len());
        for (key, object) in feed.iter() {
            let name: String = key
                .extract()
                .map_err(|_| invalid_argument(py, "input names must be str"))?;
            let declared = self.inputs.iter().find(|(n, _)| *n == name).map(|(_, t)| t);
            let value = to_value(py, &name, &object, declared)?;
            values.push((name, value));
        }
        let trace = self
            .profile
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|p| p.start);
        let options = RunOptions::default().with_trace(trace.is_some());
        let session = &self.session;
        let (outputs, report) = py
            .detach(|| {
                let began = Instant::now();
                guarded("running the session", || {
                    session.run_values_with_options(values, &options)
                })
                .map(|(out, report)| (out, (began, report)))
            })
            .map_err(engine_error(py))?;
        if let (Some(start), (began, report)) = (trace, &report) {
            let offset = began.saturating_duration_since(start).as_secs_f64() * 1e6;
            if let Some(profile) = self
                .profile
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .as_mut()
            {
                profile
                    .events
                    .extend(report.trace.iter().flatten().cloned().map(|mut e| {
                        e.start_us += offset;
                        e
                    }));
            }
        }
        let mut all: Vec<Option<Value>> = outputs.into_values().into_iter().map(Some).collect();
        let mut result = Vec::with_capacity(wanted.len());
        for (k, &i) in wanted.iter().enumerate() {
            // The last request of an output moves it; earlier ones (a name asked twice) clone.
            let value = if wanted[k + 1..].contains(&i) {
                all[i].clone()
            } else {
                all[i].take()
            };
            let value = value.ok_or_else(|| raise(py, "Fail", "an output was missing"))?;
            result.push(to_python(py, &self.outputs[i].0, value)?);
        }
        Ok(result)
    }

    /// Writes the trace of the profiled runs so far as Chrome-trace JSON to `path` and starts
    /// a new one; `False` when profiling is off.
    fn end_profiling(&self, py: Python<'_>, path: String) -> PyResult<bool> {
        let mut guard = self.profile.lock().unwrap_or_else(|p| p.into_inner());
        let Some(profile) = guard.as_mut() else {
            return Ok(false);
        };
        let events = std::mem::take(&mut profile.events);
        let json = spillway::chrome_trace_json(&events, &self.devices());
        std::fs::write(&path, json)
            .map_err(|e| raise(py, "Fail", format!("cannot write {path}: {e}")))?;
        Ok(true)
    }

    /// Where each node runs and the predicted makespan, as a dict; `None` for a one-lane CPU
    /// session.
    fn placement_report<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let Some(report) = self.session.placement_report() else {
            return Ok(None);
        };
        let dict = PyDict::new(py);
        dict.set_item("policy", &report.policy)?;
        dict.set_item("predicted_makespan_us", report.predicted_makespan_us)?;
        dict.set_item("lower_bound_us", report.lower_bound_us)?;
        dict.set_item("nodes", report.nodes.clone())?;
        dict.set_item("gpu_bytes", report.gpu_bytes)?;
        dict.set_item("kept_on_gpu", report.kept_on_gpu)?;
        Ok(Some(dict))
    }

    /// Times `repeats` runs of [`Session::run`] on `feed` from Rust (the inputs converted once,
    /// before timing), in seconds each: the baseline of the Python front-end's overhead
    /// (`python/bench/overhead.py`).
    fn _time_native_runs(
        &self,
        py: Python<'_>,
        feed: &Bound<'_, PyDict>,
        repeats: usize,
    ) -> PyResult<Vec<f64>> {
        let mut tensors = Vec::with_capacity(feed.len());
        for (key, object) in feed.iter() {
            let name: String = key.extract()?;
            let declared = self.inputs.iter().find(|(n, _)| *n == name).map(|(_, t)| t);
            match to_value(py, &name, &object, declared)? {
                Value::Tensor(t) => tensors.push((name, t)),
                _ => return Err(invalid_argument(py, "only tensor inputs are timed")),
            }
        }
        let session = &self.session;
        py.detach(|| {
            (0..repeats)
                .map(|_| {
                    let start = Instant::now();
                    session.run(tensors.clone())?;
                    Ok(start.elapsed().as_secs_f64())
                })
                .collect::<spillway::Result<Vec<f64>>>()
        })
        .map_err(engine_error(py))
    }

    /// The placement's schedule drawn as a Gantt chart (SVG); `None` for a one-lane CPU
    /// session.
    fn gantt_svg(&self) -> Option<String> {
        self.session.placement_report().map(|r| r.gantt_svg())
    }
}

/// `(name, type, shape)` of declared values.
fn describe(
    py: Python<'_>,
    values: &[(String, ValueType)],
) -> PyResult<Vec<(String, String, Py<PyAny>)>> {
    values
        .iter()
        .map(|(name, ty)| Ok((name.clone(), type_string(ty), shape_to_python(py, ty)?)))
        .collect()
}
