//! A GPU segment of a graph split between the CPU and one GPU ([`super::HybridEngine`]): a
//! [`GpuEngine`] as the split plan's segment work, what it keeps on the GPU for other GPU
//! segments ([`GpuKept`]), and the compiler of such segments for new shapes.

use std::any::Any;
use std::sync::Arc;

use spillway_kernels::Tensor;
use spillway_kernels::cuda::ops::TensorDesc;
use spillway_kernels::cuda::{DeviceRegion, Gpu};
use spillway_placement::Policy;

use super::engine::GpuEngine;
use super::plan::GpuPlan;
use super::transfer::PlanInput;
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::hybrid::{KeptValue, SegmentCompiler, SegmentValue, SegmentWork, all_on_host, hosted};
use crate::value::{Value, all_tensors};

/// A GPU segment.
#[derive(Debug)]
struct DeviceSegment(GpuEngine);

/// Where a GPU segment's input is.
enum Source {
    Host(Tensor),
    Gpu(DeviceRegion),
}

/// An output a GPU segment kept in its plan's memory.
#[derive(Debug)]
struct GpuKept {
    plan: Arc<GpuPlan>,
    index: usize,
    shape: Vec<usize>,
}

impl KeptValue for GpuKept {
    fn shape(&self) -> &[usize] {
        &self.shape
    }

    fn fetch(&self) -> Result<Value> {
        self.plan.fetch_output(self.index).map(Value::Tensor)
    }
}

impl SegmentWork for DeviceSegment {
    fn run(&self, inputs: Vec<Value>) -> Result<Vec<Value>> {
        all_on_host(self.run_with(hosted(inputs), &[])?)
    }

    /// A kept input that another GPU segment on the same GPU wrote is copied on the GPU.
    fn run_with(&self, inputs: Vec<SegmentValue>, keep: &[bool]) -> Result<Vec<SegmentValue>> {
        let plan = self.0.plan();
        let sources = inputs
            .into_iter()
            .map(|input| match input {
                SegmentValue::Kept(k) => match (k.as_ref() as &dyn Any).downcast_ref::<GpuKept>() {
                    Some(g) if Arc::ptr_eq(g.plan.gpu(), plan.gpu()) => g
                        .plan
                        .output_region(g.index)
                        .map(|(region, _)| Source::Gpu(region))
                        .ok_or_else(|| Error::Internal("a kept output is not in its plan".into())),
                    _ => Ok(Source::Host(tensor(k.fetch()?)?)),
                },
                SegmentValue::Host(v) => Ok(Source::Host(tensor(v)?)),
            })
            .collect::<Result<Vec<_>>>()?;
        let inputs: Vec<PlanInput> = sources
            .iter()
            .map(|s| match s {
                Source::Host(t) => PlanInput::Host(t),
                Source::Gpu(region) => PlanInput::Device(*region),
            })
            .collect();
        let outputs = self.0.run_with(&inputs, keep)?;
        Ok(outputs
            .into_iter()
            .enumerate()
            .map(|(index, t)| match t {
                Some(t) => SegmentValue::Host(Value::Tensor(t)),
                None => SegmentValue::Kept(Arc::new(GpuKept {
                    plan: plan.clone(),
                    index,
                    shape: plan
                        .output_region(index)
                        .map(|(_, d)| d.shape.clone())
                        .unwrap_or_default(),
                })),
            })
            .collect())
    }

    fn keeps_outputs(&self) -> bool {
        true
    }

    fn device_bytes(&self) -> usize {
        self.0.choice().arena_bytes
    }

    fn device_node_us(&self) -> Result<Option<Vec<f64>>> {
        self.0.plan().profile_nodes(5).map(Some)
    }
}

/// Compiles GPU segments: a [`GpuEngine`] on the session's GPU. At session build its streams
/// follow the session's stream policy; during a run (a new shape) it is compiled on one
/// stream, without measuring.
#[derive(Debug)]
pub(super) struct GpuCompiler {
    pub(super) gpu: Arc<Gpu>,
    pub(super) streams: usize,
    pub(super) stream_policy: Policy,
}

impl SegmentCompiler for GpuCompiler {
    fn compile(
        &self,
        graph: &Graph,
        inputs: &[Value],
        values: &[Option<Value>],
        measure: bool,
    ) -> Result<Box<dyn SegmentWork>> {
        let mut descs: Vec<Option<TensorDesc>> = values.iter().map(desc).collect();
        descs.resize(graph.values.len(), None);
        for (v, t) in &graph.constants {
            descs[v.index()] = Some(TensorDesc::new(t.dtype(), t.shape()));
        }
        let (streams, policy) = if measure {
            (self.streams, self.stream_policy)
        } else {
            (1, Policy::Sequential)
        };
        Ok(Box::new(DeviceSegment(GpuEngine::build_on(
            self.gpu.clone(),
            graph,
            &tensors(inputs.to_vec())?,
            &descs,
            streams,
            policy,
        )?)))
    }
}

/// A value's type and shape (`None`: not a tensor, or not computed).
pub(super) fn desc(value: &Option<Value>) -> Option<TensorDesc> {
    match value {
        Some(Value::Tensor(t)) => Some(TensorDesc::new(t.dtype(), t.shape())),
        _ => None,
    }
}

/// The tensor of `value`: GPU nodes read tensors only.
fn tensor(value: Value) -> Result<Tensor> {
    match value {
        Value::Tensor(t) => Ok(t),
        other => Err(Error::Internal(format!(
            "a GPU segment was given {}",
            other.type_string()
        ))),
    }
}

/// The tensors of `values`: GPU nodes read tensors only.
pub(super) fn tensors(values: Vec<Value>) -> Result<Vec<Tensor>> {
    all_tensors(values).map_err(|other| {
        Error::Internal(format!("a GPU segment was given {}", other.type_string()))
    })
}
