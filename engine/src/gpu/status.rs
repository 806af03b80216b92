//! [`StatusWords`]: where a plan's kernels that check indices from the data (RoiAlign's batch
//! indices, ScatterElements' and Gather's indices) report a bad one. Each such kernel has one
//! word in the plan's arena; the plan zeroes them at the start of every run (a CUDA Graph
//! captures the memset) and reads them after it.

use spillway_kernels::cuda::ops::{self, GpuKernel};
use spillway_kernels::cuda::{CudaError, DeviceRegion, Gpu};

use super::plan::Step;
use super::{node_error, step_error};
use crate::error::{Error, Result};
use crate::graph::Graph;

/// The status words of a plan's reporting kernels, contiguous.
#[derive(Debug)]
pub(super) struct StatusWords {
    region: DeviceRegion,
    /// The node of each word, in order.
    nodes: Vec<usize>,
}

impl StatusWords {
    /// Bytes the words of `kernels` (indexed by node) take.
    pub(super) fn bytes_for(kernels: &[Box<dyn GpuKernel>]) -> usize {
        kernels.iter().filter(|k| k.reports_status()).count() * ops::STATUS_BYTES
    }

    /// The words of `kernels` in `region` ([`StatusWords::bytes_for`] bytes); `None` when no
    /// kernel reports.
    pub(super) fn place(kernels: &[Box<dyn GpuKernel>], region: DeviceRegion) -> Option<Self> {
        let nodes: Vec<usize> = (0..kernels.len())
            .filter(|&i| kernels[i].reports_status())
            .collect();
        (!nodes.is_empty()).then_some(StatusWords { region, nodes })
    }

    /// Node `node`'s word, when its kernel reports one.
    pub(super) fn word(&self, node: usize) -> Result<Option<DeviceRegion>> {
        self.nodes
            .iter()
            .position(|&n| n == node)
            .map(|k| {
                self.region
                    .sub(k * ops::STATUS_BYTES, ops::STATUS_BYTES)
                    .ok_or_else(|| Error::Internal("status word out of bounds".into()))
            })
            .transpose()
    }

    /// Enqueues the zeroing of every word on stream 0, before a run's launches.
    pub(super) fn zero(&self, gpu: &Gpu) -> Result<()> {
        gpu.zero(self.region, 0)
            .map_err(|e| step_error("zeroing the status words", e))
    }

    /// After a run (its work on stream 0 done): the error of the first kernel that set its
    /// word, naming its node. A bad index is the error the CPU kernel raises, whichever
    /// device met it.
    pub(super) fn check(&self, gpu: &Gpu, graph: &Graph, steps: &[Step]) -> Result<()> {
        let mut host = vec![0u8; self.region.bytes];
        gpu.download(self.region, &mut host)
            .map_err(|e| step_error("reading the status words", e))?;
        for (word, &i) in host.chunks_exact(ops::STATUS_BYTES).zip(&self.nodes) {
            let (Some((code, value)), Some(step)) =
                (ops::read_status(word), steps.iter().find(|s| s.node == i))
            else {
                continue;
            };
            let node = &graph.nodes[i];
            return Err(match step.kernel.status_error(code, value) {
                CudaError::Kernel(cause) => Error::Kernel {
                    node: node.name.clone(),
                    op_type: node.op_type.clone(),
                    cause,
                },
                other => node_error(node, other),
            });
        }
        Ok(())
    }
}
