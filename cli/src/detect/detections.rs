//! The detectors' outputs (`boxes`, `scores`, `labels`, optional `masks`) read by name.

use serde::Serialize;
use spillway_kernels::Tensor;

use super::DetectError;
use super::coco::class_name;

/// One detection, in input-image pixels.
#[derive(Debug, Clone, Serialize)]
pub struct Detection {
    /// `[x1, y1, x2, y2]`.
    #[serde(rename = "box")]
    pub bbox: [f32; 4],
    /// The model's score.
    pub score: f32,
    /// The COCO label id.
    pub label: i64,
    /// The label's COCO class name.
    pub class: String,
    /// Pixels of the mask above 0.5, for models with a `masks` output.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mask_pixels: Option<usize>,
}

/// Detections and, for Mask R-CNN, their `N × H × W` mask probabilities.
#[derive(Debug, Clone)]
pub struct Detections {
    /// The detections, in the model's output order.
    pub items: Vec<Detection>,
    /// One `H × W` probability plane per detection, row-major, when the model outputs masks.
    pub masks: Option<Vec<Vec<f32>>>,
    /// The masks' `(height, width)`.
    pub mask_size: (usize, usize),
}

fn named<'a>(outputs: &'a [(String, Tensor)], name: &str) -> Option<&'a Tensor> {
    outputs.iter().find(|(n, _)| n == name).map(|(_, t)| t)
}

fn required<'a>(outputs: &'a [(String, Tensor)], name: &str) -> Result<&'a Tensor, DetectError> {
    named(outputs, name).ok_or_else(|| DetectError::Output(format!("no output named '{name}'")))
}

impl Detections {
    /// Reads the named outputs of a torchvision detector; keeps detections with
    /// `score >= threshold`.
    pub fn from_outputs(
        outputs: &[(String, Tensor)],
        threshold: f32,
    ) -> Result<Detections, DetectError> {
        let bad = |e: spillway_kernels::KernelError| DetectError::Output(e.to_string());
        let boxes = required(outputs, "boxes")?.view::<f32>().map_err(bad)?;
        let scores = required(outputs, "scores")?.view::<f32>().map_err(bad)?;
        let labels = required(outputs, "labels")?.view::<i64>().map_err(bad)?;
        let n = scores.len();
        if boxes.shape() != [n, 4] || labels.len() != n {
            return Err(DetectError::Output(format!(
                "boxes {:?}, scores {:?}, labels {:?} do not describe the same detections",
                boxes.shape(),
                scores.shape(),
                labels.shape()
            )));
        }
        let masks = match named(outputs, "masks") {
            Some(m) => {
                let m = m.view::<f32>().map_err(bad)?;
                match *m.shape() {
                    [k, 1, h, w] if k == n => Some((m, h, w)),
                    _ => {
                        return Err(DetectError::Output(format!(
                            "masks {:?} is not [{n}, 1, H, W]",
                            m.shape()
                        )));
                    }
                }
            }
            None => None,
        };
        let mut items = Vec::new();
        let mut planes = Vec::new();
        let boxes: Vec<f32> = boxes.iter().copied().collect();
        let scores: Vec<f32> = scores.iter().copied().collect();
        let labels: Vec<i64> = labels.iter().copied().collect();
        let mask_data: Option<Vec<f32>> =
            masks.as_ref().map(|(m, _, _)| m.iter().copied().collect());
        let (mh, mw) = masks.as_ref().map_or((0, 0), |(_, h, w)| (*h, *w));
        for i in 0..n {
            if scores[i] < threshold {
                continue;
            }
            let plane = mask_data
                .as_ref()
                .map(|d| d[i * mh * mw..(i + 1) * mh * mw].to_vec());
            items.push(Detection {
                bbox: [
                    boxes[4 * i],
                    boxes[4 * i + 1],
                    boxes[4 * i + 2],
                    boxes[4 * i + 3],
                ],
                score: scores[i],
                label: labels[i],
                class: class_name(labels[i]),
                mask_pixels: plane
                    .as_ref()
                    .map(|p| p.iter().filter(|&&v| v > 0.5).count()),
            });
            if let Some(p) = plane {
                planes.push(p);
            }
        }
        Ok(Detections {
            items,
            masks: mask_data.map(|_| planes),
            mask_size: (mh, mw),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_by_threshold_and_reads_masks() {
        let outputs = vec![
            (
                "boxes".to_string(),
                Tensor::from_shape_vec(&[2, 4], vec![0f32, 1., 2., 3., 4., 5., 6., 7.]).unwrap(),
            ),
            (
                "labels".to_string(),
                Tensor::from_shape_vec(&[2], vec![17i64, 1]).unwrap(),
            ),
            (
                "scores".to_string(),
                Tensor::from_shape_vec(&[2], vec![0.9f32, 0.3]).unwrap(),
            ),
            (
                "masks".to_string(),
                Tensor::from_shape_vec(&[2, 1, 1, 2], vec![0.7f32, 0.2, 0.9, 0.9]).unwrap(),
            ),
        ];
        let d = Detections::from_outputs(&outputs, 0.5).unwrap();
        assert_eq!(d.items.len(), 1);
        assert_eq!(d.items[0].class, "cat");
        assert_eq!(d.items[0].bbox, [0., 1., 2., 3.]);
        assert_eq!(d.items[0].mask_pixels, Some(1));
        assert_eq!(d.masks.unwrap(), vec![vec![0.7, 0.2]]);
    }

    #[test]
    fn mismatched_lengths_are_an_error() {
        let outputs = vec![
            (
                "boxes".to_string(),
                Tensor::from_shape_vec(&[1, 4], vec![0f32; 4]).unwrap(),
            ),
            (
                "labels".to_string(),
                Tensor::from_shape_vec(&[2], vec![1i64, 1]).unwrap(),
            ),
            (
                "scores".to_string(),
                Tensor::from_shape_vec(&[2], vec![0.9f32, 0.3]).unwrap(),
            ),
        ];
        assert!(Detections::from_outputs(&outputs, 0.0).is_err());
    }
}
