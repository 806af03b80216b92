//! Reading a photo and turning it into a detector's input tensor.

use std::path::Path;

use image::RgbImage;
use spillway_kernels::Tensor;

use super::DetectError;

/// Decodes a JPEG or PNG file (any colour type) into 8-bit RGB.
pub fn read_rgb(path: &Path) -> Result<RgbImage, DetectError> {
    let bytes = std::fs::read(path).map_err(|e| DetectError::Image {
        path: path.display().to_string(),
        source: image::ImageError::IoError(e),
    })?;
    if let Some(reason) = jpeg_truncation(&bytes) {
        return Err(DetectError::Truncated {
            path: path.display().to_string(),
            reason: reason.into(),
        });
    }
    let img = image::load_from_memory(&bytes).map_err(|source| DetectError::Image {
        path: path.display().to_string(),
        source,
    })?;
    Ok(img.to_rgb8())
}

/// Why a JPEG file is cut short, if it is: its last scan (after the last start-of-scan
/// marker) must be followed by the end-of-image marker. Decoders accept a truncated scan and
/// make up the rest of the picture.
fn jpeg_truncation(bytes: &[u8]) -> Option<&'static str> {
    const SOI: [u8; 2] = [0xFF, 0xD8];
    const SOS: [u8; 2] = [0xFF, 0xDA];
    const EOI: [u8; 2] = [0xFF, 0xD9];
    if !bytes.starts_with(&SOI) {
        return None;
    }
    let last_scan = bytes.windows(2).rposition(|w| w == SOS);
    let Some(last_scan) = last_scan else {
        return Some("the JPEG has no image data (no start-of-scan marker)");
    };
    match bytes[last_scan..].windows(2).any(|w| w == EOI) {
        true => None,
        false => Some("the JPEG is truncated (no end-of-image marker after its last scan)"),
    }
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

    #[test]
    fn a_truncated_jpeg_is_an_error() {
        let img = RgbImage::from_fn(64, 48, |x, y| image::Rgb([x as u8 * 4, y as u8 * 5, 90]));
        let mut jpeg = Vec::new();
        img.write_to(
            &mut std::io::Cursor::new(&mut jpeg),
            image::ImageFormat::Jpeg,
        )
        .unwrap();
        let dir = std::env::temp_dir().join(format!("spillway-jpeg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (whole, cut) = (dir.join("whole.jpg"), dir.join("cut.jpg"));
        std::fs::write(&whole, &jpeg).unwrap();
        std::fs::write(&cut, &jpeg[..jpeg.len() * 2 / 3]).unwrap();
        assert_eq!(read_rgb(&whole).unwrap().dimensions(), (64, 48));
        let err = read_rgb(&cut).unwrap_err();
        assert!(matches!(err, DetectError::Truncated { .. }), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
