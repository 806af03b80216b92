//! The placement report: where each node of a session runs and what the simulator predicts.

use spillway_placement::{Schedule, SimResult};

use crate::device::Devices;
use crate::graph::Graph;
use crate::profile::CostModel;

/// Where each node runs and what the simulator predicts.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PlacementReport {
    /// The policy that made the schedule.
    pub policy: String,
    /// Per node: (node name, op type, device, lane).
    pub nodes: Vec<(String, String, String, usize)>,
    /// Predicted makespan, µs.
    pub predicted_makespan_us: f64,
    /// Lower bound on the makespan, µs.
    pub lower_bound_us: f64,
    /// The cost model the schedule was made from.
    pub cost_model: CostModel,
    /// The schedule.
    pub schedule: Schedule,
    /// The simulation of the schedule.
    pub simulation: SimResult,
    /// GPU memory the session holds (its plans' arenas), bytes; `None` without a GPU.
    pub gpu_bytes: Option<usize>,
    /// A session split between the CPU and a GPU: the values that pass from GPU segment to
    /// GPU segment without leaving the GPU (`None` for other sessions).
    pub kept_on_gpu: Option<usize>,
}

impl PlacementReport {
    /// The report of `schedule` (made by `policy`) for `graph` on `devices`.
    pub(super) fn new(
        policy: String,
        graph: &Graph,
        devices: &Devices,
        cost_model: CostModel,
        schedule: Schedule,
        simulation: SimResult,
    ) -> Self {
        let names: Vec<String> = devices
            .specs()
            .iter()
            .map(|s| s.device.to_string())
            .collect();
        PlacementReport {
            policy,
            nodes: graph
                .nodes
                .iter()
                .zip(&schedule.ops)
                .map(|(n, p)| {
                    (
                        n.name.clone(),
                        n.op_type.clone(),
                        names[p.device].clone(),
                        p.stream,
                    )
                })
                .collect(),
            predicted_makespan_us: simulation.makespan,
            lower_bound_us: simulation.lower_bound,
            cost_model,
            schedule,
            simulation,
            gpu_bytes: None,
            kept_on_gpu: None,
        }
    }

    /// The schedule drawn as a Gantt chart (SVG).
    pub fn gantt_svg(&self) -> String {
        spillway_placement::gantt::gantt_svg(
            &self.cost_model.graph,
            &self.cost_model.topology,
            &self.simulation,
        )
    }
}

impl std::fmt::Display for PlacementReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "policy {}: predicted makespan {:.1} µs (lower bound {:.1} µs)",
            self.policy, self.predicted_makespan_us, self.lower_bound_us
        )?;
        for (name, op, device, lane) in &self.nodes {
            writeln!(f, "  {name:<40} {op:<20} {device}/{lane}")?;
        }
        Ok(())
    }
}
