//! Detection correctness study: every zoo detector present × every photo in `models/images`,
//! Spillway against ONNX Runtime (1 intra-op thread) on the same input tensor.
//!
//! Checks: same detection count; labels equal; scores within 1e-4 absolute; boxes within 1e-3
//! relative (|a - b| <= 1e-3 · max(|b|, 1)); where the order is ambiguous (ORT's scores closer
//! than twice the score tolerance, ties included) the run is compared as a set; masks (Mask
//! R-CNN) binarized at 0.5 with IoU >= 0.99, except a mask pasted at other pixels because its
//! box lies across a pixel boundary from the reference's (named with its IoU instead). Writes
//! `benches/results/detection-<date>.{md,json}`.
//!
//! `cargo run --release -p spillway-benches --bin detection_check -- [--zoo DIR] [--only a,b]`
//! (ORT comes from the project venv, `SPILLWAY_VENV` or `<root>/.venv`).

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde_json::json;
use spillway::Session;
use spillway_cli::detect::{read_rgb, to_chw_tensor};
use spillway_tests::assert_close;
use spillway_tests::detections::{compare, extract};
use spillway_tests::oracle::{Oracle, OrtConfig};

const MODELS: [&str; 6] = [
    "ssdlite320_mobilenet_v3_large",
    "fasterrcnn_mobilenet_v3_large_320_fpn",
    "ssd300_vgg16",
    "retinanet_resnet50_fpn",
    "fasterrcnn_resnet50_fpn",
    "maskrcnn_resnet50_fpn",
];

/// `; masks pasted apart: IoU …` for the masks `compare` counted apart, else nothing.
fn paste_note(c: &spillway_tests::detections::Comparison) -> String {
    if c.paste_shifted.is_empty() {
        return String::new();
    }
    let ious: Vec<String> = c.paste_shifted.iter().map(|v| format!("{v:.4}")).collect();
    format!("; masks pasted a pixel apart: IoU {}", ious.join(", "))
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .context("root")?
        .to_path_buf();
    let mut zoo = root.join("models/zoo");
    let mut only: Option<Vec<String>> = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--zoo" => zoo = PathBuf::from(it.next().context("--zoo DIR")?),
            "--only" => {
                only = Some(
                    it.next()
                        .context("--only a,b")?
                        .split(',')
                        .map(String::from)
                        .collect(),
                )
            }
            other => bail!("unknown argument {other}"),
        }
    }
    let mut photos: Vec<PathBuf> = std::fs::read_dir(root.join("models/images"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jpg" || x == "png"))
        .collect();
    photos.sort();
    let mut rows = Vec::new();
    let mut md = String::from(
        "| model | photo | detections (ORT / Spillway) | max box rel diff | max score diff | min mask IoU | tied | Spillway s | ORT 1-thread s | result | ORT optimized vs unoptimized |\n|---|---|---|---:|---:|---:|---:|---:|---:|---|---|\n",
    );
    let mut summary =
        String::from("| model | Spillway / ORT-1-thread time (sum over photos) |\n|---|---:|\n");
    for model in MODELS {
        if only.as_ref().is_some_and(|o| !o.iter().any(|m| m == model)) {
            continue;
        }
        let path = zoo.join(format!("{model}.onnx"));
        if !path.exists() {
            eprintln!("{model}: not present at {}", path.display());
            continue;
        }
        eprintln!("{model}: loading");
        let session = match Session::builder()
            .with_intra_op_threads(1)
            .commit_from_file(&path)
        {
            Ok(s) => s,
            Err(e) => {
                let err = format!("Spillway load: {e}");
                eprintln!("{model}: {err}");
                md += &format!("| {model} | all | - | - | - | - | - | - | - | FAIL: {err} | - |\n");
                rows.push(json!({"model": model, "error": err}));
                continue;
            }
        };
        let names: Vec<String> = session.outputs().iter().map(|v| v.name.clone()).collect();
        let mut ort = Oracle::load(&path, OrtConfig::default())?;
        // ORT without its graph optimizations: how far float reordering alone moves this
        // model's detections (the noise floor a second engine cannot be expected to beat).
        let mut ort_plain = Oracle::load(
            &path,
            OrtConfig {
                optimize: false,
                ..OrtConfig::default()
            },
        )?;
        let (mut t_s, mut t_o) = (0.0, 0.0);
        for photo in &photos {
            let stem = photo
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            let input = to_chw_tensor(&read_rgb(photo)?)?;
            let inputs = vec![("image".to_string(), input)];
            let t0 = Instant::now();
            let ort_out = ort.run(&inputs)?;
            let ort_s = t0.elapsed().as_secs_f64();
            let t0 = Instant::now();
            let sp = session.run(inputs.clone());
            let sp_s = t0.elapsed().as_secs_f64();
            let o = extract(&names, &ort_out)?;
            let ort_self = match compare(&o, &extract(&names, &ort_plain.run(&inputs)?)?) {
                Ok(c) => format!(
                    "ok (box {:.1e}, score {:.1e}{})",
                    c.max_box_rel,
                    c.max_score_abs,
                    paste_note(&c)
                ),
                Err(e) => format!("differs: {e}"),
            };
            let (result, cmp, count_s) = match sp {
                Err(e) => (format!("FAIL: Spillway run: {e}"), None, None),
                Ok(out) => {
                    let tensors = out.into_tensors();
                    let s = extract(&names, &tensors)?;
                    let n = s.scores.len();
                    // The strict in-order check first (numpy-style allclose on each output).
                    let in_order = ["boxes", "scores", "labels"].iter().all(|k| {
                        let i = names.iter().position(|x| x == k);
                        i.is_some_and(|i| {
                            assert_close(&ort_out[i], &tensors[i], 1e-3, 1e-4).is_ok()
                        })
                    });
                    t_s += sp_s;
                    t_o += ort_s;
                    match compare(&o, &s) {
                        Ok(c) => (
                            format!(
                                "ok ({}{})",
                                if in_order { "in order" } else { "ties as sets" },
                                paste_note(&c)
                            ),
                            Some(c),
                            Some(n),
                        ),
                        Err(e) => (format!("FAIL: {e}"), None, Some(n)),
                    }
                }
            };
            eprintln!("{model} {stem}: {result} (Spillway {sp_s:.3} s, ORT {ort_s:.3} s)");
            let f = |v: Option<f64>, p: usize| v.map_or("-".into(), |x| format!("{x:.p$e}"));
            md += &format!(
                "| {model} | {stem} | {} / {} | {} | {} | {} | {} | {sp_s:.3} | {ort_s:.3} | {result} | {ort_self} |\n",
                o.scores.len(),
                count_s.map_or("-".into(), |n| n.to_string()),
                f(cmp.as_ref().map(|c| c.max_box_rel), 1),
                f(cmp.as_ref().map(|c| c.max_score_abs), 1),
                cmp.as_ref()
                    .filter(|_| o.masks.is_some())
                    .map_or("-".into(), |c| format!("{:.4}", c.min_mask_iou)),
                cmp.as_ref().map_or("-".into(), |c| c.ties.to_string()),
            );
            rows.push(json!({
                "model": model, "photo": stem, "ort_count": o.scores.len(), "spillway_count": count_s,
                "max_box_rel": cmp.as_ref().map(|c| c.max_box_rel),
                "max_score_abs": cmp.as_ref().map(|c| c.max_score_abs),
                "min_mask_iou": cmp.as_ref().filter(|_| o.masks.is_some()).map(|c| c.min_mask_iou),
                "tied": cmp.as_ref().map(|c| c.ties),
                "masks_pasted_apart": cmp.as_ref().map(|c| &c.paste_shifted),
                "spillway_s": sp_s, "ort_1thread_s": ort_s, "result": result,
                "ort_optimized_vs_unoptimized": ort_self,
            }));
        }
        if t_o > 0.0 {
            summary += &format!("| {model} | {:.2} |\n", t_s / t_o);
        }
    }
    let date = std::process::Command::new("date").arg("+%F").output()?;
    let date = String::from_utf8_lossy(&date.stdout).trim().to_string();
    let dir = root.join("benches/results");
    let doc = format!(
        "# Detection correctness: Spillway vs ONNX Runtime ({date})\n\n\
         `cargo run --release -p spillway-benches --bin detection_check`. Both engines get the same \
         3×480×640 tensor decoded from `models/images/*.jpg`; Spillway and ORT each use 1 intra-op \
         thread; one timed run per photo, no warm-up (the first photo's time includes first-run costs).\n\n\
         Tolerances: labels equal, scores ≤ 1e-4 absolute, boxes ≤ 1e-3 relative, runs of \
         detections whose order is ambiguous (neighbouring ORT scores within 2e-4, so that each may \
         move by 1e-4; ties included) compared as sets (column \"tied\"), masks binarized at 0.5 with IoU ≥ 0.99. \
         A mask whose box, within the box tolerance, widens (× 30/28, as torchvision pastes masks) to a \
         corner on the other side of a pixel boundary than the reference's is pasted at other pixels and \
         resampled to another size: such masks are named in the result with their IoU, not held to the \
         bound. \"in order\" means numpy-style \
         allclose also passes output by output without any re-ordering. The last column applies the \
         same check to ORT against itself (all graph optimizations vs none): where it also differs, \
         float reordering alone moves the result past a tolerance or a boundary.\n\n{md}\n{summary}"
    );
    std::fs::write(dir.join(format!("detection-{date}.md")), doc)?;
    std::fs::write(
        dir.join(format!("detection-{date}.json")),
        serde_json::to_string_pretty(&json!({"date": date, "rows": rows}))?,
    )?;
    println!("{md}\n{summary}");
    Ok(())
}
