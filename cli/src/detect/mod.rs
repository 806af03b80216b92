//! `spillway detect`: runs a torchvision-style detector on photos and draws what it finds.
//!
//! The model takes one `3 × H × W` RGB float image in `[0, 1]` named `image` and outputs
//! `boxes`, `scores`, `labels` (and `masks` for Mask R-CNN), found by name.

mod coco;
mod detections;
mod draw;
mod input;

use std::path::{Path, PathBuf};

pub use coco::{COCO_CLASSES, class_name};
pub use detections::{Detection, Detections};
pub use draw::draw;
pub use input::{read_rgb, to_chw_tensor};

use spillway::Session;

/// What can go wrong while detecting.
#[derive(Debug, thiserror::Error)]
pub enum DetectError {
    /// The photo could not be read or decoded.
    #[error("reading {path}: {source}")]
    Image {
        /// The file.
        path: String,
        /// The decoder's error.
        source: image::ImageError,
    },
    /// The photo's file is cut short: the decoder would fill the missing part with grey.
    #[error("reading {path}: {reason}")]
    Truncated {
        /// The file.
        path: String,
        /// What is missing.
        reason: String,
    },
    /// The input tensor could not be built.
    #[error("building the input tensor: {0}")]
    Tensor(String),
    /// The model's outputs are not a detector's.
    #[error("detector outputs: {0}")]
    Output(String),
    /// The model failed to run.
    #[error(transparent)]
    Run(#[from] spillway::Error),
    /// Writing a result file failed.
    #[error("writing {path}: {message}")]
    Write {
        /// The file.
        path: String,
        /// The reason.
        message: String,
    },
}

/// The files one photo produced and how long the model took.
#[derive(Debug, Clone)]
pub struct DetectReport {
    /// `<name>.detections.png`.
    pub png: PathBuf,
    /// `<name>.detections.json`.
    pub json: PathBuf,
    /// Detections kept (score at or above the threshold).
    pub kept: usize,
    /// Seconds the model ran.
    pub seconds: f64,
}

/// Runs `session` on the photo at `path`, keeps detections scoring at least `threshold`, and
/// writes `<out>/<stem>.detections.png` and `<out>/<stem>.detections.json`.
pub fn detect_file(
    session: &Session,
    path: &Path,
    out: &Path,
    threshold: f32,
) -> Result<DetectReport, DetectError> {
    let mut img = read_rgb(path)?;
    let input = to_chw_tensor(&img)?;
    let input_name = session
        .inputs()
        .first()
        .map_or_else(|| "image".to_string(), |i| i.name.clone());
    let start = std::time::Instant::now();
    let outputs = session.run([(input_name, input)])?;
    let seconds = start.elapsed().as_secs_f64();
    let named: Vec<(String, spillway_kernels::Tensor)> = outputs
        .iter()
        .map(|(n, t)| (n.to_string(), t.clone()))
        .collect();
    let dets = Detections::from_outputs(&named, threshold)?;
    draw(&mut img, &dets);
    let stem = path
        .file_stem()
        .map_or_else(|| "image".into(), |s| s.to_string_lossy().into_owned());
    let write_err = |p: &Path, e: &dyn std::fmt::Display| DetectError::Write {
        path: p.display().to_string(),
        message: e.to_string(),
    };
    std::fs::create_dir_all(out).map_err(|e| write_err(out, &e))?;
    let png = out.join(format!("{stem}.detections.png"));
    img.save(&png).map_err(|e| write_err(&png, &e))?;
    let json = out.join(format!("{stem}.detections.json"));
    let doc = serde_json::json!({
        "image": path.display().to_string(),
        "width": img.width(),
        "height": img.height(),
        "score_threshold": threshold,
        "seconds": seconds,
        "detections": dets.items,
    });
    let text = serde_json::to_string_pretty(&doc).map_err(|e| write_err(&json, &e))?;
    std::fs::write(&json, text).map_err(|e| write_err(&json, &e))?;
    Ok(DetectReport {
        png,
        json,
        kept: dets.items.len(),
        seconds,
    })
}
