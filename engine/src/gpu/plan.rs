//! [`GpuPlan`]: a graph compiled for one GPU — kernels, memory, streams and events.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use spillway_kernels::cuda::cudarc::driver::CudaEvent;
use spillway_kernels::cuda::cudarc::driver::sys::CUevent_flags;
use spillway_kernels::cuda::host::tensor_bytes;
use spillway_kernels::cuda::memory::PinnedBuffer;
use spillway_kernels::cuda::memory::aligned;
use spillway_kernels::cuda::ops::{self, GpuIo, GpuKernel, GpuNode, TensorDesc};
use spillway_kernels::cuda::{DeviceArena, DeviceRegion, Gpu};
use spillway_kernels::{NodeSpec, Tensor};

use super::assignment::StreamAssignment;
use super::assignment::check_assignment;
use super::memory::{ValueMemory, place_values};
use super::status::StatusWords;
use super::transfer::{PlanInput, Staging, all_downloaded, host_inputs};
use super::{node_error, step_error};
use crate::error::{Error, Result};
use crate::graph::{Graph, Node, ValueId};

/// Ops whose output is their input's bytes under another shape: the output shares the
/// input's region and the launch copies nothing.
pub(super) const ALIASES: &[&str] = &["Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"];

/// One node, ready to launch.
#[derive(Debug)]
pub(super) struct Step {
    pub(super) node: usize,
    pub(super) kernel: Box<dyn GpuKernel>,
    pub(super) stream: usize,
    pub(super) inputs: Vec<Option<DeviceRegion>>,
    pub(super) outputs: Vec<DeviceRegion>,
    pub(super) workspace: Option<DeviceRegion>,
    /// Its status word, when its kernel reports one.
    pub(super) status: Option<DeviceRegion>,
    /// Events (indices into `GpuPlan::events`) of producers on other streams.
    pub(super) waits: Vec<usize>,
    /// The event this step records for consumers on other streams.
    pub(super) record: Option<usize>,
}

/// A graph input or output and where it lives on the GPU.
#[derive(Debug, Clone)]
pub(super) struct Binding {
    pub(super) name: String,
    pub(super) desc: TensorDesc,
    pub(super) region: DeviceRegion,
}

/// A graph compiled for one GPU: built kernels, one arena holding the constants, the inputs,
/// every intermediate value and a workspace per stream, and the events that order the
/// streams. [`GpuPlan::run`] uploads inputs, launches every node and downloads the outputs;
/// launching never waits on the host except for the final download.
#[derive(Debug)]
pub struct GpuPlan {
    pub(super) gpu: Arc<Gpu>,
    pub(super) graph: Graph,
    _arena: DeviceArena,
    arena_bytes: usize,
    #[cfg_attr(not(feature = "internals"), allow(dead_code))] // read through the internals
    value_memory: ValueMemory,
    pub(super) steps: Vec<Step>,
    /// Compute streams used, stream 0 (where runs start and end) first.
    pub(super) streams: Vec<usize>,
    pub(super) inputs: Vec<Binding>,
    pub(super) outputs: Vec<Binding>,
    /// Every value on the GPU, for [`GpuPlan::read_value`].
    #[cfg_attr(not(feature = "internals"), allow(dead_code))] // read through the internals
    values: HashMap<ValueId, Binding>,
    pub(super) events: Vec<CudaEvent>,
    /// Recorded on stream 0 at the start of a launch; the other streams wait on it.
    pub(super) fork: CudaEvent,
    /// One per stream other than 0, recorded at its end; stream 0 waits on them.
    pub(super) joins: Vec<CudaEvent>,
    /// Recorded after uploads (copy stream) and after the last launch (stream 0).
    pub(super) uploaded: CudaEvent,
    pub(super) done: CudaEvent,
    /// The words of the kernels that report a status.
    pub(super) status: Option<StatusWords>,
    /// Page-locked staging, one buffer per input then one per output, so that copies run
    /// asynchronously at full speed. Runs are serialized by `running`, which guards these.
    pub(super) running: Mutex<Staging>,
}

impl GpuPlan {
    /// Compiles `graph` for `gpu`: `descs[v]` is value `v`'s type and shape (every value a
    /// node reads or writes needs one), `assignment` the stream and launch order of each node.
    /// Fails, naming the node, when a node has no GPU kernel for its types and attributes.
    pub fn compile(
        graph: &Graph,
        descs: &[Option<TensorDesc>],
        gpu: Arc<Gpu>,
        assignment: &StreamAssignment,
    ) -> Result<GpuPlan> {
        GpuPlan::compile_with(graph, descs, gpu, assignment, true)
    }

    /// [`GpuPlan::compile`] with one buffer per value, so that [`GpuPlan::read_value`] sees
    /// every value of the last run (for finding where the GPU departs from a reference).
    #[cfg(feature = "internals")]
    pub fn compile_unshared(
        graph: &Graph,
        descs: &[Option<TensorDesc>],
        gpu: Arc<Gpu>,
        assignment: &StreamAssignment,
    ) -> Result<GpuPlan> {
        GpuPlan::compile_with(graph, descs, gpu, assignment, false)
    }

    fn compile_with(
        graph: &Graph,
        descs: &[Option<TensorDesc>],
        gpu: Arc<Gpu>,
        assignment: &StreamAssignment,
        reuse: bool,
    ) -> Result<GpuPlan> {
        check_assignment(graph, assignment)?;
        // Building kernels may measure them and allocating uses stream 0.
        let sharing = gpu.clone();
        let _streams = sharing.sharing_streams();
        let desc_of = |v: ValueId| -> Result<&TensorDesc> {
            descs
                .get(v.index())
                .and_then(Option::as_ref)
                .ok_or_else(|| {
                    Error::InvalidModel(format!(
                        "value '{}' has no known shape for the GPU plan",
                        graph.name(v)
                    ))
                })
        };
        let kernels = graph
            .nodes
            .iter()
            .map(|node| build_kernel(&gpu, graph, node, &desc_of))
            .collect::<Result<Vec<_>>>()?;

        // The arena: constants, inputs, node outputs (aliases share their input's region),
        // then one workspace per stream.
        let mut offsets: HashMap<ValueId, (usize, usize)> = HashMap::new();
        let mut at = 0usize;
        let mut place = |v: ValueId, bytes: usize, offsets: &mut HashMap<_, _>| {
            offsets.insert(v, (at, bytes));
            at += aligned(bytes.max(1));
        };
        let mut constant_ids: Vec<ValueId> = graph
            .nodes
            .iter()
            .flat_map(|n| n.present_inputs())
            .filter(|v| graph.constants.contains_key(v))
            .collect();
        constant_ids.sort_unstable();
        constant_ids.dedup();
        for &v in constant_ids.iter().chain(&graph.inputs) {
            if !offsets.contains_key(&v) {
                place(v, desc_of(v)?.bytes(), &mut offsets);
            }
        }
        let bytes_of = |v: ValueId| desc_of(v).map(TensorDesc::bytes);
        let value_memory =
            place_values(graph, assignment, &bytes_of, &mut offsets, &mut at, reuse)?;
        let mut workspace_at: HashMap<usize, (usize, usize)> = HashMap::new();
        for (i, kernel) in kernels.iter().enumerate() {
            let entry = workspace_at.entry(assignment.stream[i]).or_default();
            entry.1 = entry.1.max(kernel.workspace_bytes());
        }
        // Runs start and end on stream 0, whether or not a node runs there.
        let mut streams: Vec<usize> = assignment.stream.iter().copied().chain([0]).collect();
        streams.sort_unstable();
        streams.dedup();
        for s in &streams {
            if let Some(w) = workspace_at.get_mut(s) {
                w.0 = at;
                at += aligned(w.1.max(1));
            }
        }
        let status_bytes = StatusWords::bytes_for(&kernels);
        let status_at = at;
        at += aligned(status_bytes);
        let arena = DeviceArena::new(gpu.stream(0), at)
            .map_err(|e| step_error("allocating the arena", e))?;
        let region = |(offset, bytes): (usize, usize)| -> Result<DeviceRegion> {
            arena
                .region()
                .sub(offset, bytes)
                .ok_or_else(|| Error::Internal("GPU arena layout out of bounds".into()))
        };
        let status = StatusWords::place(&kernels, region((status_at, status_bytes))?);
        for &v in &constant_ids {
            let bytes = tensor_bytes(&graph.constants[&v])
                .ok_or_else(|| step_error(format!("constant '{}'", graph.name(v)), "dtype"))?;
            gpu.upload(&bytes, region(offsets[&v])?)
                .map_err(|e| step_error(format!("uploading constant '{}'", graph.name(v)), e))?;
        }
        gpu.copy_in_stream()
            .synchronize()
            .map_err(|e| step_error("uploading constants", e))?;

        // Steps with their regions and the events between streams.
        let producers = graph.producers();
        let mut record: Vec<Option<usize>> = vec![None; graph.nodes.len()];
        let mut events = 0;
        let mut steps = Vec::with_capacity(graph.nodes.len());
        for (i, kernel) in kernels.into_iter().enumerate() {
            let node = &graph.nodes[i];
            let stream = assignment.stream[i];
            let mut waits = Vec::new();
            for v in node.present_inputs() {
                if let Some(&p) = producers.get(&v)
                    && assignment.stream[p] != stream
                {
                    let e = *record[p].get_or_insert_with(|| {
                        events += 1;
                        events - 1
                    });
                    if !waits.contains(&e) {
                        waits.push(e);
                    }
                }
            }
            let inputs = node.inputs[..node.declared_inputs]
                .iter()
                .map(|v| v.map(|v| region(offsets[&v])).transpose())
                .collect::<Result<_>>()?;
            let outputs = node
                .present_outputs()
                .map(|v| region(offsets[&v]))
                .collect::<Result<_>>()?;
            let workspace = (kernel.workspace_bytes() > 0)
                .then(|| region(workspace_at[&stream]))
                .transpose()?;
            let status = match &status {
                Some(words) => words.word(i)?,
                None => None,
            };
            steps.push(Step {
                node: i,
                kernel,
                stream,
                inputs,
                outputs,
                workspace,
                status,
                waits,
                record: None,
            });
        }
        for step in &mut steps {
            step.record = record[step.node];
        }
        let mut ordered: Vec<Option<Step>> = steps.into_iter().map(Some).collect();
        let steps = assignment
            .order
            .iter()
            .map(|&i| ordered[i].take().expect("the order is a permutation"))
            .collect();

        let new_event = || {
            gpu.context()
                .new_event(Some(CUevent_flags::CU_EVENT_DISABLE_TIMING))
                .map_err(|e| step_error("creating an event", e))
        };
        let events = (0..events).map(|_| new_event()).collect::<Result<_>>()?;
        let joins = streams[1..]
            .iter()
            .map(|_| new_event())
            .collect::<Result<_>>()?;
        let binding = |v: &ValueId| -> Result<Binding> {
            Ok(Binding {
                name: graph.name(*v).to_string(),
                desc: desc_of(*v)?.clone(),
                region: region(offsets[v])?,
            })
        };
        let pinned = |d: &TensorDesc| {
            PinnedBuffer::new(gpu.context(), d.bytes())
                .map_err(|e| step_error("allocating pinned staging memory", e))
        };
        let staging = Staging {
            inputs: graph
                .inputs
                .iter()
                .map(|v| pinned(desc_of(*v)?))
                .collect::<Result<_>>()?,
            outputs: graph
                .outputs
                .iter()
                .map(|v| pinned(desc_of(*v)?))
                .collect::<Result<_>>()?,
        };
        let values = offsets
            .keys()
            .map(|v| Ok((*v, binding(v)?)))
            .collect::<Result<_>>()?;
        Ok(GpuPlan {
            status,
            values,
            inputs: graph.inputs.iter().map(binding).collect::<Result<_>>()?,
            outputs: graph.outputs.iter().map(binding).collect::<Result<_>>()?,
            fork: new_event()?,
            uploaded: new_event()?,
            done: new_event()?,
            joins,
            events,
            steps,
            streams,
            arena_bytes: at,
            value_memory,
            _arena: arena,
            graph: graph.clone(),
            gpu,
            running: Mutex::new(staging),
        })
    }

    /// Bytes of device memory the plan holds (constants, values and workspaces).
    pub fn arena_bytes(&self) -> usize {
        self.arena_bytes
    }

    /// Device bytes of the node outputs, shared as the stream order allows, against one
    /// buffer each.
    #[cfg(feature = "internals")]
    pub fn value_memory(&self) -> ValueMemory {
        self.value_memory
    }

    /// The GPU it runs on.
    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }

    /// How many compute streams it launches on.
    pub fn streams_used(&self) -> usize {
        self.streams.len()
    }

    /// Uploads `inputs` (one per graph input, in order), launches every node and returns the
    /// outputs.
    pub fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        all_downloaded(self.run_with(&host_inputs(inputs), &[])?)
    }

    /// [`GpuPlan::run`] with inputs that may be on the device, keeping the outputs whose flag
    /// in `keep` is set on the device (`None`: it stays in the plan's memory until its next run, see [`GpuPlan::fetch_output`]).
    pub fn run_with(&self, inputs: &[PlanInput], keep: &[bool]) -> Result<Vec<Option<Tensor>>> {
        let mut staging = self.running.lock().unwrap_or_else(|p| p.into_inner());
        let _streams = self.gpu.sharing_streams();
        self.upload(&mut staging, inputs)?;
        self.enqueue()?;
        self.download(&mut staging, keep)
    }

    /// Enqueues every node on its stream (stream 0 forks to the others and joins them at the
    /// end); returns without waiting for the GPU.
    pub fn enqueue(&self) -> Result<()> {
        let main = self.gpu.stream(0);
        let ordering = |e| step_error("ordering the streams", e);
        if let Some(words) = &self.status {
            words.zero(&self.gpu)?;
        }
        self.fork.record(main).map_err(ordering)?;
        for &s in &self.streams[1..] {
            self.gpu.stream(s).wait(&self.fork).map_err(ordering)?;
        }
        for step in &self.steps {
            self.launch(step)?;
        }
        for (&s, join) in self.streams[1..].iter().zip(&self.joins) {
            join.record(self.gpu.stream(s)).map_err(ordering)?;
            main.wait(join).map_err(ordering)?;
        }
        Ok(())
    }

    /// Launches one step after the events it waits on, then records its own.
    pub(super) fn launch(&self, step: &Step) -> Result<()> {
        let node = &self.graph.nodes[step.node];
        let stream = self.gpu.stream(step.stream);
        for &e in &step.waits {
            stream
                .wait(&self.events[e])
                .map_err(|e| node_error(node, e))?;
        }
        let io = GpuIo {
            inputs: &step.inputs,
            outputs: &step.outputs,
            workspace: step.workspace,
            status: step.status,
        };
        step.kernel
            .launch(&self.gpu, step.stream, &io)
            .map_err(|e| node_error(node, e))?;
        if let Some(e) = step.record {
            self.events[e]
                .record(stream)
                .map_err(|e| node_error(node, e))?;
        }
        Ok(())
    }

    /// Value `v` as the last run left it (`None` when the plan does not hold it); in a plan
    /// from [`GpuPlan::compile`], a later value may have taken its bytes.
    #[cfg(feature = "internals")]
    pub fn read_value(&self, v: ValueId) -> Result<Option<Tensor>> {
        let _guard = self.running.lock().unwrap_or_else(|p| p.into_inner());
        let _streams = self.gpu.sharing_streams();
        let Some(b) = self.values.get(&v) else {
            return Ok(None);
        };
        self.after_main()?;
        self.fetch(b).map(Some)
    }

    /// Each node's GPU time alone, µs: the median over `repeats` passes of events around
    /// each launch, launching in plan order (use a one-stream plan so nodes do not overlap).
    pub fn profile_nodes(&self, repeats: usize) -> Result<Vec<f64>> {
        let _guard = self.running.lock().unwrap_or_else(|p| p.into_inner());
        let _streams = self.gpu.sharing_streams();
        let timing = || {
            self.gpu
                .context()
                .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(|e| step_error("creating a timing event", e))
        };
        let marks: Vec<(CudaEvent, CudaEvent)> = self
            .steps
            .iter()
            .map(|_| Ok((timing()?, timing()?)))
            .collect::<Result<_>>()?;
        let mut samples = vec![Vec::with_capacity(repeats); self.graph.nodes.len()];
        for _ in 0..repeats.max(1) {
            for (step, (start, end)) in self.steps.iter().zip(&marks) {
                let stream = self.gpu.stream(step.stream);
                let node = &self.graph.nodes[step.node];
                start.record(stream).map_err(|e| node_error(node, e))?;
                self.launch(step)?;
                end.record(stream).map_err(|e| node_error(node, e))?;
            }
            self.gpu
                .stream(0)
                .synchronize()
                .map_err(|e| step_error("profiling", e))?;
            for (step, (start, end)) in self.steps.iter().zip(&marks) {
                let ms = start
                    .elapsed_ms(end)
                    .map_err(|e| step_error("reading a timing event", e))?;
                samples[step.node].push(f64::from(ms) * 1000.0);
            }
        }
        Ok(samples
            .into_iter()
            .map(|mut s| {
                s.sort_by(f64::total_cmp);
                s[s.len() / 2]
            })
            .collect())
    }
}

/// The GPU kernel of `node`, built for the shapes `desc_of` gives, or why there is none.
pub(super) fn build_kernel<'d>(
    gpu: &Gpu,
    graph: &Graph,
    node: &Node,
    desc_of: &dyn Fn(ValueId) -> Result<&'d TensorDesc>,
) -> Result<Box<dyn GpuKernel>> {
    if !node.subgraphs.is_empty() {
        return Err(node_error(node, "control flow does not run on the GPU"));
    }
    // Unused outputs are dropped from the end; one in the middle needs its shape.
    let used = node
        .outputs
        .iter()
        .rposition(Option::is_some)
        .map_or(0, |i| i + 1);
    let inputs: Vec<Option<TensorDesc>> = node.inputs[..node.declared_inputs]
        .iter()
        .map(|v| v.map(|v| desc_of(v).cloned()).transpose())
        .collect::<Result<_>>()?;
    let outputs: Vec<TensorDesc> = node.outputs[..used]
        .iter()
        .map(|v| match v {
            Some(v) => desc_of(*v).cloned(),
            None => Err(node_error(node, "an unused output before a used one")),
        })
        .collect::<Result<_>>()?;
    let constants: Vec<Option<&Tensor>> = node.inputs[..node.declared_inputs]
        .iter()
        .map(|v| v.and_then(|v| graph.constants.get(&v)))
        .collect();
    let spec = NodeSpec {
        num_outputs: used,
        ..node.spec()
    };
    let gpu_node = GpuNode {
        spec: &spec,
        inputs: &inputs,
        outputs: &outputs,
        constants: &constants,
    };
    ops::build(gpu, &gpu_node).map_err(|e| node_error(node, e))
}
