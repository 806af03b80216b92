//! Reading a photo and turning it into a detector's input tensor.

use std::path::Path;

use image::RgbImage;
use spillway_kernels::Tensor;

use super::DetectError;

/// Decodes a JPEG or PNG file (any colour type) into 8-bit RGB.
pub fn read_rgb(path: &Path) -> Result<RgbImage, DetectError> {
    let img = image::open(path).map_err(|source| DetectError::Image {
        path: path.display().to_string(),
        source,
    })?;
    Ok(img.to_rgb8())
}

/// The torchvision detectors' input: a `3 × H × W` float tensor, RGB, each channel in `[0, 1]`
/// (the byte value divided by 255, as `torchvision.transforms.functional.to_tensor` does).
pub fn to_chw_tensor(img: &RgbImage) -> Result<Tensor, DetectError> {
    let (w, h) = (img.width() as usize, img.height() as usize);
    let mut data = vec![0f32; 3 * h * w];
    for (x, y, px) in img.enumerate_pixels() {
        let i = y as usize * w + x as usize;
        for c in 0..3 {
            data[c * h * w + i] = f32::from(px.0[c]) / 255.0;
        }
    }
    Tensor::from_shape_vec(&[3, h, w], data).map_err(|e| DetectError::Tensor(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn planar_layout_and_scale() {
        // A 2×1 image: red then (0, 51, 255). Channel planes: R = [1, 0], G = [0, 0.2], B = [0, 1].
        let mut img = RgbImage::new(2, 1);
        img.put_pixel(0, 0, image::Rgb([255, 0, 0]));
        img.put_pixel(1, 0, image::Rgb([0, 51, 255]));
        let t = to_chw_tensor(&img).unwrap();
        assert_eq!(t.shape(), &[3, 1, 2]);
        let v = t.to_f64_vec().unwrap();
        let expected = [1.0, 0.0, 0.0, 0.2, 0.0, 1.0];
        for (a, b) in v.iter().zip(expected) {
            assert!((a - b).abs() < 1e-6, "{v:?}");
        }
    }
}
