//! A [`GpuPlan`]'s copies between the host and the GPU: its inputs in (from the host through
//! page-locked staging, or from another plan's memory on the GPU) and its outputs out (or left
//! on the GPU for another plan).

use spillway_kernels::Tensor;
use spillway_kernels::cuda::DeviceRegion;
use spillway_kernels::cuda::host::{tensor_from_bytes, write_tensor_bytes};
use spillway_kernels::cuda::memory::PinnedBuffer;
use spillway_kernels::cuda::ops::TensorDesc;

use super::plan::{Binding, GpuPlan};
use super::step_error;
use crate::error::{Error, Result};

/// `inputs` as plan inputs from the host.
pub(super) fn host_inputs(inputs: &[Tensor]) -> Vec<PlanInput<'_>> {
    inputs.iter().map(PlanInput::Host).collect()
}

/// Outputs of a download that kept none.
pub(super) fn all_downloaded(outputs: Vec<Option<Tensor>>) -> Result<Vec<Tensor>> {
    outputs
        .into_iter()
        .map(|t| t.ok_or_else(|| Error::Internal("an output was not downloaded".into())))
        .collect()
}

/// Where a plan's input comes from.
#[derive(Debug, Clone, Copy)]
pub enum PlanInput<'a> {
    /// A host tensor, uploaded.
    Host(&'a Tensor),
    /// Device memory on the same GPU holding a tensor of the input's type and shape, written
    /// by work enqueued on stream 0 before this run (another plan's output): copied on the
    /// device.
    Device(DeviceRegion),
}

/// The page-locked host buffers of a plan's inputs and outputs.
#[derive(Debug)]
pub(super) struct Staging {
    pub(super) inputs: Vec<PinnedBuffer>,
    pub(super) outputs: Vec<PinnedBuffer>,
}

impl GpuPlan {
    /// Copies `inputs` into their regions (host ones through the pinned staging on the copy
    /// stream, device ones on stream 0) and makes stream 0 wait for the copies.
    pub(super) fn upload(&self, staging: &mut Staging, inputs: &[PlanInput]) -> Result<()> {
        if inputs.len() != self.inputs.len() {
            return Err(Error::Config(format!(
                "{} inputs given, the model has {}",
                inputs.len(),
                self.inputs.len()
            )));
        }
        let mut on_device = Vec::new();
        for ((input, b), pinned) in inputs.iter().zip(&self.inputs).zip(&mut staging.inputs) {
            let t = match *input {
                PlanInput::Host(t) => t,
                PlanInput::Device(region) => {
                    if region.bytes != b.desc.bytes() {
                        return Err(Error::Internal(format!(
                            "input '{}' is {} bytes on the device, the plan's is {}",
                            b.name,
                            region.bytes,
                            b.desc.bytes()
                        )));
                    }
                    on_device.push((region, b));
                    continue;
                }
            };
            if t.dtype() != b.desc.dtype || t.shape() != b.desc.shape.as_slice() {
                return Err(Error::InputShape {
                    name: b.name.clone(),
                    got: t.shape().to_vec(),
                    expected: format!("{:?} {:?} (the plan's)", b.desc.dtype, b.desc.shape),
                });
            }
            let what = || format!("uploading input '{}'", b.name);
            // The previous run's copy of this buffer finished: that run waited for its outputs.
            let host = pinned.as_mut_slice().map_err(|e| step_error(what(), e))?;
            // Straight into page-locked memory: a detector's RoI features are tens of MiB, and
            // a buffer that size is fresh pages (page faults) on every run.
            let len = write_tensor_bytes(t, host)
                .ok_or_else(|| step_error(what(), "unsupported dtype"))?;
            self.gpu
                .upload(&host[..len], b.region)
                .map_err(|e| step_error(what(), e))?;
        }
        let copy = self.gpu.copy_in_stream();
        self.uploaded
            .record(copy)
            .and_then(|_| self.gpu.stream(0).wait(&self.uploaded))
            .map_err(|e| step_error("ordering the uploads", e))?;
        for (region, b) in on_device {
            self.gpu
                .copy_device(region, b.region, b.desc.bytes(), 0)
                .map_err(|e| step_error(format!("copying input '{}' on the device", b.name), e))?;
        }
        Ok(())
    }

    /// Waits for stream 0, fails if a kernel reported a bad value, and copies the outputs
    /// back, except those whose flag in `keep` is set (`None`): they stay in the plan's
    /// memory until its next run.
    pub(super) fn download(
        &self,
        staging: &mut Staging,
        keep: &[bool],
    ) -> Result<Vec<Option<Tensor>>> {
        self.after_main()?;
        self.gpu
            .copy_out_stream()
            .synchronize()
            .map_err(|e| step_error("waiting for the run", e))?;
        if let Some(words) = &self.status {
            words.check(&self.gpu, &self.graph, &self.steps)?;
        }
        self.outputs
            .iter()
            .zip(&mut staging.outputs)
            .enumerate()
            .map(|(i, (b, pinned))| {
                if keep.get(i) == Some(&true) {
                    return Ok(None);
                }
                let what = || format!("downloading '{}'", b.name);
                let host = pinned.as_mut_slice().map_err(|e| step_error(what(), e))?;
                let host = &mut host[..b.desc.bytes()];
                self.gpu
                    .download(b.region, host)
                    .map_err(|e| step_error(what(), e))?;
                tensor_from_bytes(b.desc.dtype, &b.desc.shape, host)
                    .map(Some)
                    .map_err(|e| step_error(what(), e))
            })
            .collect()
    }

    /// Where output `index` lives on the GPU, and its type and shape.
    pub fn output_region(&self, index: usize) -> Option<(DeviceRegion, &TensorDesc)> {
        self.outputs.get(index).map(|b| (b.region, &b.desc))
    }

    /// Output `index` as the last run left it: an output that run kept on the GPU.
    pub fn fetch_output(&self, index: usize) -> Result<Tensor> {
        let _guard = self.running.lock().unwrap_or_else(|p| p.into_inner());
        let b = self
            .outputs
            .get(index)
            .ok_or_else(|| Error::Internal(format!("the plan has no output {index}")))?;
        self.fetch(b)
    }

    /// Orders the download stream after everything enqueued on stream 0.
    pub(super) fn after_main(&self) -> Result<()> {
        self.done
            .record(self.gpu.stream(0))
            .and_then(|_| self.gpu.copy_out_stream().wait(&self.done))
            .map_err(|e| step_error("ordering the downloads", e))
    }

    pub(super) fn fetch(&self, b: &Binding) -> Result<Tensor> {
        let mut host = vec![0u8; b.desc.bytes()];
        let what = || format!("downloading '{}'", b.name);
        self.gpu
            .download(b.region, &mut host)
            .map_err(|e| step_error(what(), e))?;
        tensor_from_bytes(b.desc.dtype, &b.desc.shape, &host).map_err(|e| step_error(what(), e))
    }
}
