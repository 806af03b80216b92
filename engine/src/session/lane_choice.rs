//! `Auto` on CPU lanes alone weighs the lanes against one lane with every core: lanes run
//! independent branches side by side, but each lane's operators get only its share of the
//! cores, which a chain of large convolutions (resnet50) cannot make up for. Unless the lanes'
//! predicted makespan is below [`LANES_MARGIN`] of one lane's, the session runs sequentially,
//! with a report that says so. Where the prediction favours the lanes, both engines run the
//! profile inputs ([`RACE_RUNS`] times each, alternately), and the lanes are kept only if their
//! median is below the same share of one lane's: the prediction had picked two lanes for
//! inception_v3 that ran 1.29× one lane's time (35.4 ms against 27.4, 2-vCPU Zen 5), and 3
//! timed runs each, without the margin, kept two lanes measured at 0.97× that ran 1.20×. Only
//! when the caller fixed neither a cost model nor the threads per lane.

use std::time::Instant;

use spillway_placement::{Policy, Schedule, SimResult, place, simulate};

use super::builder::SessionBuilder;
use super::placing::{Engine, measure};
use super::report::PlacementReport;
use crate::device::{Device, Devices};
use crate::error::{Error, Result};
use crate::exec::kernel_pool::{ThreadOptions, on_kernel_pool};
use crate::exec::run_site::RunSite;
use crate::exec::{ParallelExecutor, RunOptions, SequentialPlan};
use crate::graph::Graph;
use crate::profile::{CostModel, median_us};
use crate::value::Value;

/// The share of one lane's predicted time, and then of its measured time, under which the
/// lanes are kept. The prediction adds up operators timed alone, and lanes side by side share
/// the memory bandwidth. On the 2-vCPU Zen 5, SSDlite's two lanes were predicted within a few
/// percent of one lane either way (8.7 ms against 8.3 in one profile; ahead of it in two
/// others) and ran 1.27× its time (14.9 ms against 11.7); NASNet's, predicted at 0.93×, ran
/// 0.96×.
const LANES_MARGIN: f64 = 0.95;

/// Timed runs of each engine (after one warm-up each), alternating, when the prediction
/// favours the lanes.
const RACE_RUNS: usize = 5;

/// One lane with every core, profiled, placed and compiled: the lanes' rival.
pub(super) struct OneLane {
    pub(super) plan: SequentialPlan,
    cost_model: CostModel,
    schedule: Schedule,
    simulation: SimResult,
}

impl OneLane {
    /// The rival of `devices`' lanes, where they are CPU lanes alone and the caller fixed
    /// neither a cost model nor the threads per lane; else `None`.
    pub(super) fn candidate(
        builder: &SessionBuilder,
        graph: &Graph,
        devices: &Devices,
        inputs: &[Value],
        model_hash: u64,
    ) -> Result<Option<OneLane>> {
        let specs = devices.specs();
        let cpu_lanes_only = specs.len() == 1 && specs[0].device == Device::Cpu;
        if !cpu_lanes_only || builder.cost_model.is_some() || builder.intra_op_threads.is_some() {
            return Ok(None);
        }
        let one = Devices::cpu();
        let threads = one.threads_per_lane();
        let cost_model = measure(builder, graph, &one, inputs, threads, model_hash)?;
        let options = builder.placement_options.clone().unwrap_or_default();
        let place_err = |e: spillway_placement::PlacementError| Error::Placement(e.to_string());
        let schedule = place(
            Policy::Sequential,
            &cost_model.graph,
            &cost_model.topology,
            &options,
        )
        .map_err(place_err)?;
        let simulation =
            simulate(&cost_model.graph, &cost_model.topology, &schedule).map_err(place_err)?;
        Ok(Some(OneLane {
            plan: SequentialPlan::compile(graph)?.for_input_shapes(graph),
            cost_model,
            schedule,
            simulation,
        }))
    }

    /// Whether lanes predicted to take `lanes_makespan` µs are worth timing against this.
    pub(super) fn lanes_predicted_faster(&self, lanes_makespan: f64) -> bool {
        LANES_MARGIN * self.simulation.makespan >= lanes_makespan
    }

    /// The predictions, for the report.
    pub(super) fn predicted(&self, devices: &Devices, lanes_makespan: f64) -> String {
        format!(
            "predicted {:.0} µs; {} lanes: {:.0} µs",
            self.simulation.makespan,
            devices.total_lanes(),
            lanes_makespan
        )
    }

    /// The report's label when this is chosen, after `race` when there was one.
    pub(super) fn label(
        &self,
        devices: &Devices,
        lanes_makespan: f64,
        race: Option<&Race>,
    ) -> String {
        let predicted = self.predicted(devices, lanes_makespan);
        match race {
            Some(race) => format!(
                "Auto: one lane with every core ({}; {predicted})",
                race.describe(devices)
            ),
            None => format!("Auto: one lane with every core ({predicted})"),
        }
    }

    /// The sequential engine, reported under `label`.
    pub(super) fn into_engine(self, graph: &Graph, label: String) -> Engine {
        let one = Devices::cpu();
        let report = PlacementReport::new(
            label,
            graph,
            &one,
            self.cost_model,
            self.schedule,
            self.simulation,
        );
        Engine::Sequential {
            plan: self.plan,
            report: Some(report),
            site: RunSite::default(),
        }
    }
}

/// The median times (µs) of one lane and of the lanes on the profile inputs.
pub(super) struct Race {
    one_us: f64,
    lanes_us: f64,
}

impl Race {
    /// Runs `one` (on the kernel pool) and `lanes` on `inputs`, each once to warm up, then
    /// [`RACE_RUNS`] times, alternately.
    pub(super) fn run(
        one: &SequentialPlan,
        lanes: &ParallelExecutor,
        graph: &Graph,
        inputs: &[Value],
        threads: ThreadOptions,
    ) -> Result<Race> {
        let run_one = || -> Result<f64> {
            let bound = graph.inputs.iter().copied().zip(inputs.iter().cloned());
            let start = Instant::now();
            on_kernel_pool(threads, || one.run(bound.collect()))?;
            Ok(start.elapsed().as_secs_f64() * 1e6)
        };
        let run_lanes = || -> Result<f64> {
            let start = Instant::now();
            lanes.run(inputs.to_vec(), RunOptions::default())?;
            Ok(start.elapsed().as_secs_f64() * 1e6)
        };
        run_one()?;
        run_lanes()?;
        let (mut one_us, mut lanes_us) = (Vec::new(), Vec::new());
        for _ in 0..RACE_RUNS {
            one_us.push(run_one()?);
            lanes_us.push(run_lanes()?);
        }
        Ok(Race {
            one_us: median_us(one_us),
            lanes_us: median_us(lanes_us),
        })
    }

    /// Whether the lanes beat one lane by the margin.
    pub(super) fn lanes_faster(&self) -> bool {
        self.lanes_us < LANES_MARGIN * self.one_us
    }

    /// The measured times, for the report.
    pub(super) fn describe(&self, devices: &Devices) -> String {
        format!(
            "measured {:.0} µs; {} lanes: {:.0} µs",
            self.one_us,
            devices.total_lanes(),
            self.lanes_us
        )
    }
}
