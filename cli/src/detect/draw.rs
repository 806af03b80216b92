//! Drawing detections onto a photo: mask overlays, box outlines, and labels in an 8×8 bitmap font.

use font8x8::UnicodeFonts;
use image::{Rgb, RgbImage};

use super::detections::Detections;

/// A colour per label, from a fixed 12-colour palette.
fn colour(label: i64) -> Rgb<u8> {
    const PALETTE: [[u8; 3]; 12] = [
        [230, 25, 75],
        [60, 180, 75],
        [255, 225, 25],
        [0, 130, 200],
        [245, 130, 48],
        [145, 30, 180],
        [70, 240, 240],
        [240, 50, 230],
        [210, 245, 60],
        [250, 190, 190],
        [0, 128, 128],
        [170, 110, 40],
    ];
    Rgb(PALETTE[label.rem_euclid(PALETTE.len() as i64) as usize])
}

/// Alpha-blends `c` over every pixel whose mask probability is above 0.5. A mask of a different
/// size than the image is sampled at the nearest pixel.
fn blend_mask(img: &mut RgbImage, mask: &[f32], (mh, mw): (usize, usize), c: Rgb<u8>, alpha: f32) {
    let (w, h) = (img.width() as usize, img.height() as usize);
    if mh == 0 || mw == 0 || mask.len() != mh * mw {
        return;
    }
    for y in 0..h {
        let my = y * mh / h;
        for x in 0..w {
            let mx = x * mw / w;
            if mask[my * mw + mx] > 0.5 {
                let p = img.get_pixel_mut(x as u32, y as u32);
                for k in 0..3 {
                    p.0[k] = (f32::from(p.0[k]) * (1.0 - alpha) + f32::from(c.0[k]) * alpha) as u8;
                }
            }
        }
    }
}

fn put(img: &mut RgbImage, x: i64, y: i64, c: Rgb<u8>) {
    if x >= 0
        && y >= 0
        && (x as u64) < u64::from(img.width())
        && (y as u64) < u64::from(img.height())
    {
        img.put_pixel(x as u32, y as u32, c);
    }
}

fn fill_rect(img: &mut RgbImage, x0: i64, y0: i64, x1: i64, y1: i64, c: Rgb<u8>) {
    for y in y0..y1 {
        for x in x0..x1 {
            put(img, x, y, c);
        }
    }
}

/// A `thickness`-pixel outline inside `[x0, x1] × [y0, y1]`.
fn outline(img: &mut RgbImage, [x0, y0, x1, y1]: [i64; 4], thickness: i64, c: Rgb<u8>) {
    fill_rect(img, x0, y0, x1 + 1, y0 + thickness, c);
    fill_rect(img, x0, y1 + 1 - thickness, x1 + 1, y1 + 1, c);
    fill_rect(img, x0, y0, x0 + thickness, y1 + 1, c);
    fill_rect(img, x1 + 1 - thickness, y0, x1 + 1, y1 + 1, c);
}

/// Writes `text` with its top-left corner at `(x, y)` on a filled background; characters the
/// font lacks are drawn as `?`.
fn label(img: &mut RgbImage, x: i64, y: i64, text: &str, bg: Rgb<u8>) {
    let width = 8 * text.chars().count() as i64 + 2;
    fill_rect(img, x, y, x + width, y + 10, bg);
    let luma = 0.299 * f32::from(bg.0[0]) + 0.587 * f32::from(bg.0[1]) + 0.114 * f32::from(bg.0[2]);
    let fg = if luma > 140.0 {
        Rgb([0, 0, 0])
    } else {
        Rgb([255, 255, 255])
    };
    for (i, ch) in text.chars().enumerate() {
        let glyph = font8x8::BASIC_FONTS
            .get(ch)
            .or_else(|| font8x8::BASIC_FONTS.get('?'))
            .unwrap_or([0; 8]);
        for (row, bits) in glyph.iter().enumerate() {
            for col in 0..8 {
                // font8x8 stores the leftmost pixel of a row in the least significant bit.
                if bits & (1 << col) != 0 {
                    put(img, x + 1 + 8 * i as i64 + col, y + 1 + row as i64, fg);
                }
            }
        }
    }
}

/// Draws every detection: its mask (alpha 0.45), its box, and `class score` above the box (or
/// inside it when the box touches the top edge).
pub fn draw(img: &mut RgbImage, dets: &Detections) {
    if let Some(masks) = &dets.masks {
        for (d, m) in dets.items.iter().zip(masks) {
            blend_mask(img, m, dets.mask_size, colour(d.label), 0.45);
        }
    }
    let (w, h) = (i64::from(img.width()), i64::from(img.height()));
    for d in &dets.items {
        let clamp = |v: f32, hi: i64| (v.round() as i64).clamp(0, (hi - 1).max(0));
        let b = [
            clamp(d.bbox[0], w),
            clamp(d.bbox[1], h),
            clamp(d.bbox[2], w),
            clamp(d.bbox[3], h),
        ];
        let c = colour(d.label);
        outline(img, b, 2, c);
        let y = if b[1] >= 10 { b[1] - 10 } else { b[1] + 2 };
        label(img, b[0], y, &format!("{} {:.2}", d.class, d.score), c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::detections::Detection;

    #[test]
    fn box_outline_and_mask_blend() {
        let mut img = RgbImage::from_pixel(40, 40, Rgb([0, 0, 0]));
        let dets = Detections {
            items: vec![Detection {
                bbox: [10.0, 20.0, 30.0, 35.0],
                score: 0.9,
                label: 1,
                class: "person".into(),
                mask_pixels: Some(1),
            }],
            // A 2×2 mask over the 40×40 image: only the bottom-right quarter is set.
            masks: Some(vec![vec![0.0, 0.1, 0.2, 0.9]]),
            mask_size: (2, 2),
        };
        draw(&mut img, &dets);
        let c = colour(1);
        // Box corners and edges are the label colour; the inside of the box is not.
        assert_eq!(*img.get_pixel(10, 20), c);
        assert_eq!(*img.get_pixel(30, 35), c);
        assert_eq!(*img.get_pixel(20, 34), c);
        // Blended: 0.45 of the colour over black, inside the masked quarter only.
        let p = img.get_pixel(25, 25).0;
        for (got, full) in p.iter().zip(c.0) {
            assert_eq!(*got, (f32::from(full) * 0.45) as u8);
        }
        assert_eq!(img.get_pixel(5, 5).0, [0, 0, 0]);
    }
}
