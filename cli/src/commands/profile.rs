//! `spillway profile`: measure every node on every device and write the cost model.

use std::path::Path;

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use spillway::profile::{self, ProfileOptions};
use spillway::{OptimizationLevel, Session, Tensor};

use super::devices::DeviceArgs;
use super::engine_options::EngineArgs;
use super::inputs::{DimSizes, model_inputs};

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
    // A plain session gives the optimized graph, which is what a multi-device session places.
    let session = engine
        .apply(Session::builder())
        .with_optimization(OptimizationLevel::All)
        .commit_from_file(model)
        .with_context(|| format!("loading {}", model.display()))?;
    let inputs: Vec<Tensor> = model_inputs(&session.inputs(), &[], dims)?
        .into_iter()
        .map(|(_, t)| t)
        .collect();
    let bar = ProgressBar::new(session.graph().nodes.len() as u64);
    bar.set_style(
        ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} nodes ({elapsed})")
            .context("progress bar template")?
            .progress_chars("=> "),
    );
    bar.set_message("profiling");
    let model_costs = profile::profile(
        session.graph(),
        &devices,
        &inputs,
        options,
        &mut |done, total| {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
        },
    )
    .context("profiling")?;
    bar.finish_with_message("profiled");
    model_costs
        .save(out)
        .with_context(|| format!("writing {}", out.display()))?;
    let mut per_kind: std::collections::BTreeMap<String, f64> = Default::default();
    for op in &model_costs.graph.ops {
        for (kind, us) in &op.cost_us {
            *per_kind.entry(format!("{kind:?}")).or_default() += us;
        }
    }
    let sums: Vec<String> = per_kind
        .iter()
        .map(|(k, us)| format!("{k} {us:.1} µs"))
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
