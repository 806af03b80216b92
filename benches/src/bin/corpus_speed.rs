//! Speed on the model corpus (trained models shipped in PyPI wheels, `tests/corpus/`): Spillway
//! with 1 and 2 intra-op threads against ONNX Runtime with 1 and 2, in one process, on the
//! seeded inputs of the corpus test.
//!
//! The configurations run side by side as `spillway_benches::side_by_side` describes. The
//! table gives each configuration's median µs per run and the ratio of Spillway's best to ONNX
//! Runtime's best.
//!
//! `cargo run --release -p spillway-benches --bin corpus_speed [-- --rounds N]`; writes
//! `benches/results/corpus-speed-<date>.{md,json}`.

use anyhow::{Context, Result};
use serde_json::json;
use spillway_benches::side_by_side::{
    CONFIGURATIONS, rounds_arg, runners, time_interleaved, today,
};
use spillway_tests::corpus::fetch;
use spillway_tests::workspace_root;

fn main() -> Result<()> {
    let rounds = rounds_arg(15)?;
    let models = fetch()?;
    let mut rows = Vec::new();
    let mut table = String::from(
        "| model | what | Spillway 1t µs | Spillway 2t µs | ORT 1t µs | ORT 2t µs | Spillway best / ORT best |\n\
         | --- | --- | ---: | ---: | ---: | ---: | ---: |\n",
    );
    for model in models.iter().filter(|m| m.expect_failure.is_none()) {
        let label = format!(
            "{} `{}`",
            model.package,
            model.file.rsplit('/').next().unwrap_or("")
        );
        eprintln!("{label}");
        let bytes = std::fs::read(&model.path).with_context(|| label.clone())?;
        let mut runners = runners(&bytes).with_context(|| label.clone())?;
        let us = time_interleaved(&mut runners, &model.inputs, rounds)?;
        let ratio = us[0].min(us[1]) / us[2].min(us[3]);
        table.push_str(&format!(
            "| {label} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {ratio:.2} |\n",
            model.what, us[0], us[1], us[2], us[3]
        ));
        rows.push(json!({
            "package": model.package,
            "version": model.version,
            "file": model.file,
            "median_us": CONFIGURATIONS.iter().zip(&us).map(|(n, u)| (n.to_string(), json!(u))).collect::<serde_json::Map<_, _>>(),
            "spillway_best_over_ort_best": ratio,
        }));
    }
    println!("{table}");
    let date = today()?;
    let out = workspace_root().join("benches/results");
    std::fs::write(out.join(format!("corpus-speed-{date}.md")), &table)?;
    std::fs::write(
        out.join(format!("corpus-speed-{date}.json")),
        serde_json::to_string_pretty(&json!({ "rounds": rounds, "models": rows }))?,
    )?;
    Ok(())
}
