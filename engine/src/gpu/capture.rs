//! [`CapturedPlan`]: a [`GpuPlan`]'s whole multi-stream launch sequence captured once as a
//! CUDA Graph and replayed with one launch (Opara §4), for fixed input shapes.

use std::sync::{Arc, Mutex};

use spillway_kernels::Tensor;
use spillway_kernels::cuda::cudarc::driver::CudaGraph;
use spillway_kernels::cuda::cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};

use super::plan::GpuPlan;
use super::step_error;
use super::transfer::PlanInput;
#[cfg(feature = "internals")]
use super::transfer::{all_downloaded, host_inputs};
use crate::error::Result;

/// A plan and its captured graph. The graph replays exactly the launches of
/// [`GpuPlan::enqueue`], events between streams included, on the plan's memory.
pub struct CapturedPlan {
    plan: Arc<GpuPlan>,
    /// CUDA graphs are not internally synchronized: one thread at a time.
    graph: Mutex<OwnedGraph>,
}

/// A captured graph that may move between threads.
struct OwnedGraph(CudaGraph);

// SAFETY: CUDA allows a graph and its executable to be used from any thread as long as no two
// calls touch them at the same time ("Graph objects are not internally synchronized"); the
// only access is through `CapturedPlan::graph`'s mutex.
unsafe impl Send for OwnedGraph {}

impl std::fmt::Debug for CapturedPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CapturedPlan").finish_non_exhaustive()
    }
}

impl CapturedPlan {
    /// Captures `plan`'s launch sequence. Every kernel is already built (and compiled), so
    /// capturing only records launches.
    pub fn capture(plan: Arc<GpuPlan>) -> Result<CapturedPlan> {
        let _guard = plan.running.lock().unwrap_or_else(|p| p.into_inner());
        // Alone on the streams: another thread's work there would join the capture.
        let streams = plan.gpu.capturing_streams();
        let main = plan.gpu.stream(0);
        main.synchronize()
            .map_err(|e| step_error("waiting before the capture", e))?;
        main.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED)
            .map_err(|e| step_error("beginning the capture", e))?;
        let launched = plan.enqueue();
        // End the capture whatever happened, so the stream is usable again.
        let ended = main.end_capture(CUgraphInstantiate_flags(0));
        launched?;
        let graph = ended
            .map_err(|e| step_error("ending the capture", e))?
            .ok_or_else(|| step_error("ending the capture", "no graph was captured"))?;
        graph
            .upload()
            .map_err(|e| step_error("uploading the graph", e))?;
        drop(streams);
        drop(_guard);
        Ok(CapturedPlan {
            plan,
            graph: Mutex::new(OwnedGraph(graph)),
        })
    }

    /// The plan it replays.
    #[cfg(feature = "internals")]
    pub fn plan(&self) -> &Arc<GpuPlan> {
        &self.plan
    }

    /// Launches the captured graph on stream 0 without waiting for it.
    pub fn replay(&self) -> Result<()> {
        let _streams = self.plan.gpu.sharing_streams();
        self.launch()
    }

    fn launch(&self) -> Result<()> {
        self.graph
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .0
            .launch()
            .map_err(|e| step_error("replaying the graph", e))
    }

    /// Uploads `inputs`, replays the graph and returns the outputs.
    #[cfg(feature = "internals")]
    pub fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        all_downloaded(self.run_with(&host_inputs(inputs), &[])?)
    }

    /// [`CapturedPlan::run`] with inputs that may be on the device, keeping the outputs
    /// whose flag in `keep` is set on the device (`None`: it stays in the plan's memory until its next run, see [`GpuPlan::fetch_output`]).
    pub fn run_with(&self, inputs: &[PlanInput], keep: &[bool]) -> Result<Vec<Option<Tensor>>> {
        let mut staging = self.plan.running.lock().unwrap_or_else(|p| p.into_inner());
        let _streams = self.plan.gpu.sharing_streams();
        self.plan.upload(&mut staging, inputs)?;
        self.launch()?;
        self.plan.download(&mut staging, keep)
    }
}
