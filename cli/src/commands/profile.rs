//! `spillway profile`: measure every node on every device and write the cost model.

use std::path::Path;

use anyhow::{Context, Result};
use spillway::profile::{self, ProfileOptions};
use spillway::{OptimizationLevel, Session, Tensor};

use super::devices::DeviceArgs;
use super::engine_options::EngineArgs;
use super::inputs::{DimSizes, model_inputs};
use super::progress;

/// Profiles `model` on the devices and writes the cost model JSON to `out`.
pub fn profile(
    model: &Path,
    devices: &DeviceArgs,
    out: &Path,
    options: ProfileOptions,
    dims: &DimSizes,
    engine: &EngineArgs,
) -> Result<()> {
    let devices = devices.devices()?;
    let loading = progress::spinner(format!("loading {}", model.display()));
    // A plain session gives the optimized graph, which is what a multi-device session places.
    let session = engine
        .apply(Session::builder())
        .with_optimization(OptimizationLevel::All)
        .commit_from_file(model)
        .with_context(|| format!("loading {}", model.display()));
    loading.finish_and_clear();
    let session = session?;
    let inputs: Vec<Tensor> = model_inputs(&session.inputs(), &[], dims)?
        .into_iter()
        .map(|(_, t)| t)
        .collect();
    let bar = progress::bar(0, "profiling", "nodes");
    let model_costs = profile::profile(&session, &devices, &inputs, options, &mut |done, total| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    })
    .context("profiling");
    bar.finish_and_clear();
    let model_costs = model_costs?;
    model_costs
        .save(out)
        .with_context(|| format!("writing {}", out.display()))?;
    // Each device by the name the engine gives it (`cpu`, `virtual0`, `cuda0`): its kind's
    // cost of every operator it can run, scaled by its speed.
    let sums: Vec<String> = model_costs
        .topology
        .devices
        .iter()
        .map(|device| {
            let us: f64 = model_costs
                .graph
                .ops
                .iter()
                .filter_map(|op| op.cost_us.get(&device.kind))
                .map(|us| us / device.speed.max(f64::MIN_POSITIVE))
                .sum();
            format!("{} {us:.1} µs", device.name)
        })
        .collect();
    say!(
        "{} operators on {} devices; sum of operator costs: {}; written to {}",
        model_costs.graph.ops.len(),
        model_costs.topology.devices.len(),
        sums.join(", "),
        out.display()
    );
    Ok(())
}
