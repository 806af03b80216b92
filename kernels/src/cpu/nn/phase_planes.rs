//! An image plane copied into a padded buffer split into its stride phases, so that windowed
//! operators (depthwise convolution, pooling) read every kernel tap as one long contiguous run.
//!
//! Phase `(a, b)` holds the padded pixels `(s_h·i + a, s_w·j + b)`. Output `(y, x)`'s tap
//! `(u, v)` reads padded pixel `(s_h·y + d_h·u, s_w·x + d_w·v)`, which is element
//! `(y + ⌊d_h·u / s_h⌋, x + ⌊d_w·v / s_w⌋)` of phase `(d_h·u mod s_h, d_w·v mod s_w)`: for
//! consecutive outputs, consecutive elements of one phase plane. Computing the outputs at the
//! phase planes' width (`cols`, the columns past the output's width cropped away afterwards),
//! each tap is then a single run over the whole output plane, whatever the stride, dilation or
//! padding, and rows of 7 or 14 pixels cost no per-row loop overhead.

/// The padded phase layout of one plane, with where each tap reads.
#[derive(Debug, Clone)]
pub(super) struct PhasePlanes {
    /// Image width, strides and leading pads (rows, columns).
    image_width: usize,
    strides: [usize; 2],
    pads: [usize; 2],
    /// Output width.
    out_width: usize,
    /// Rows and columns of every phase plane.
    rows: usize,
    cols: usize,
    /// Offset of each tap's first read, in kernel order (row-major).
    pub taps: Vec<usize>,
    /// Length of the padded buffer: the phase planes and the slack the last block reads.
    pub len: usize,
    /// Outputs computed per plane: output rows × `cols`, rounded up to the block length.
    pub computed: usize,
    /// Where the columns of an image row go, one span per column phase.
    spans: Vec<ColumnSpan>,
}

/// The image columns of one column phase: every `stride`-th column from `from`, `count` of
/// them, land at `to..to + count` of a padded row (counted from the row's first phase).
#[derive(Debug, Clone, Copy)]
struct ColumnSpan {
    from: usize,
    to: usize,
    count: usize,
}

/// A 2-d window geometry: `[rows, columns]` for each field.
#[derive(Debug, Clone, Copy)]
pub(super) struct Window2d {
    pub image: [usize; 2],
    pub out: [usize; 2],
    pub kernel: [usize; 2],
    pub strides: [usize; 2],
    pub dilations: [usize; 2],
    /// Leading padding.
    pub pads: [usize; 2],
}

impl PhasePlanes {
    /// The layout for `window`, with outputs computed in blocks of `block`.
    pub fn new(window: &Window2d, block: usize) -> PhasePlanes {
        let Window2d {
            image,
            out,
            kernel,
            strides: [sh, sw],
            dilations,
            pads,
        } = *window;
        // The padded extent every tap of every output reaches, and at least the image.
        let reach = |d: usize| {
            let needed = (out[d].max(1) - 1) * window.strides[d] + (kernel[d] - 1) * dilations[d];
            (needed + 1).max(pads[d] + image[d])
        };
        let (rows, cols) = (reach(0).div_ceil(sh), reach(1).div_ceil(sw));
        let plane = rows * cols;
        let mut taps = Vec::with_capacity(kernel[0] * kernel[1]);
        for u in 0..kernel[0] {
            for v in 0..kernel[1] {
                let (r, c) = (u * dilations[0], v * dilations[1]);
                let phase = (r % sh) * sw + c % sw;
                taps.push(phase * plane + (r / sh) * cols + c / sw);
            }
        }
        let computed = (out[0] * cols).div_ceil(block) * block;
        let last = taps.iter().copied().max().unwrap_or(0);
        let (iw, pw) = (image[1], pads[1]);
        // Image column `x` is padded column `x + pw`: phase `(x + pw) % sw`, column
        // `(x + pw) / sw`. The first `sw` image columns start the spans, in column order.
        let spans = (0..sw.min(iw))
            .map(|from| ColumnSpan {
                from,
                to: ((from + pw) % sw) * plane + (from + pw) / sw,
                count: (iw - from).div_ceil(sw),
            })
            .collect();
        PhasePlanes {
            image_width: iw,
            strides: [sh, sw],
            pads,
            out_width: out[1],
            rows,
            cols,
            taps,
            len: (sh * sw * plane).max(last + computed),
            computed,
            spans,
        }
    }

    /// Copies one image plane into the interior of its phase planes in `padded` (`len` long).
    /// The padding cells are never written: fill the buffer once with the padding value.
    #[inline(always)]
    pub fn scatter<T: Copy>(&self, plane: &[T], padded: &mut [T]) {
        let iw = self.image_width;
        if iw == 0 {
            // An empty image (its output is all padding): nothing to copy.
            return;
        }
        let [sh, sw] = self.strides;
        let (phase_rows, cols) = (sw * self.rows * self.cols, self.cols);
        // Padded row `iy + ph` lies in row phase `a`, row `i` of its phase planes.
        let (mut a, mut i) = (self.pads[0] % sh, self.pads[0] / sh);
        for src in plane.chunks_exact(iw) {
            let row = &mut padded[a * phase_rows + i * cols..];
            if sw == 1 {
                row[self.pads[1]..self.pads[1] + iw].copy_from_slice(src);
            } else if let [even, odd] = self.spans[..] {
                // Stride 2: even and odd columns go to two phases, one pair at a time.
                let (lo, hi) = row.split_at_mut(even.to.max(odd.to));
                let (to_even, to_odd) = if even.to < odd.to {
                    (&mut lo[even.to..], hi)
                } else {
                    (hi, &mut lo[odd.to..])
                };
                let n = iw / 2;
                if iw % 2 == 1 {
                    to_even[n] = src[iw - 1];
                }
                let (to_even, to_odd, pairs) = (&mut to_even[..n], &mut to_odd[..n], &src[..2 * n]);
                for k in 0..n {
                    (to_even[k], to_odd[k]) = (pairs[2 * k], pairs[2 * k + 1]);
                }
            } else {
                for span in &self.spans {
                    let dst = &mut row[span.to..span.to + span.count];
                    let src = &src[span.from..span.from + (span.count - 1) * sw + 1];
                    for (k, d) in dst.iter_mut().enumerate() {
                        *d = src[k * sw];
                    }
                }
            }
            a += 1;
            if a == sh {
                (a, i) = (0, i + 1);
            }
        }
    }

    /// Copies the outputs computed at the phase planes' width (`computed`, row stride `cols`)
    /// into `out`, the output plane.
    #[inline(always)]
    pub fn crop<T: Copy>(&self, computed: &[T], out: &mut [T]) {
        let ow = self.out_width;
        for (row, sum) in out.chunks_exact_mut(ow).zip(computed.chunks(self.cols)) {
            row.iter_mut().zip(sum).for_each(|(o, &v)| *o = v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every tap of every output reads, through the layout, the padded image's pixel by the
    /// definition (`NaN` standing for padding), over strides 1–3, dilations 1–2, odd and even
    /// sizes, asymmetric pads and images smaller than the kernel.
    #[test]
    fn taps_read_the_padded_pixels() {
        let geometries = [
            // (image, kernel, strides, dilations, pads begin, pads end)
            ([14, 14], [3, 3], [1, 1], [1, 1], [1, 1], [1, 1]),
            ([15, 15], [3, 3], [2, 2], [1, 1], [1, 1], [1, 1]),
            ([16, 13], [3, 3], [2, 2], [1, 1], [0, 0], [1, 1]),
            ([10, 13], [3, 3], [3, 3], [1, 1], [1, 1], [1, 1]),
            ([6, 20], [3, 5], [1, 2], [1, 1], [1, 2], [1, 2]),
            ([12, 12], [3, 3], [1, 1], [2, 2], [2, 2], [2, 2]),
            ([2, 2], [3, 3], [1, 1], [1, 1], [1, 1], [1, 1]),
            ([1, 21], [1, 5], [1, 2], [1, 1], [0, 2], [0, 2]),
            ([9, 9], [3, 3], [2, 2], [1, 1], [0, 0], [1, 1]),
            ([3, 0], [1, 1], [1, 1], [1, 1], [1, 1], [1, 1]),
        ];
        for (image, kernel, strides, dilations, pads, ends) in geometries {
            let out: [usize; 2] = std::array::from_fn(|d| {
                (image[d] + pads[d] + ends[d] - dilations[d] * (kernel[d] - 1) - 1) / strides[d] + 1
            });
            let window = Window2d {
                image,
                out,
                kernel,
                strides,
                dilations,
                pads,
            };
            let layout = PhasePlanes::new(&window, 8);
            let plane: Vec<f32> = (0..image[0] * image[1]).map(|i| i as f32).collect();
            let mut padded = vec![f32::NAN; layout.len];
            layout.scatter(&plane, &mut padded);
            for (t, &tap) in layout.taps.iter().enumerate() {
                let (u, v) = (t / kernel[1], t % kernel[1]);
                for y in 0..out[0] {
                    for x in 0..out[1] {
                        let r = (y * strides[0] + u * dilations[0]) as i64 - pads[0] as i64;
                        let c = (x * strides[1] + v * dilations[1]) as i64 - pads[1] as i64;
                        let inside =
                            (0..image[0] as i64).contains(&r) && (0..image[1] as i64).contains(&c);
                        let got = padded[tap + y * layout.cols + x];
                        let context = format!("{window:?} tap ({u}, {v}) output ({y}, {x})");
                        if inside {
                            assert_eq!(got, plane[r as usize * image[1] + c as usize], "{context}");
                        } else {
                            assert!(got.is_nan(), "{context}: padding read {got}");
                        }
                    }
                }
            }
            assert!(layout.computed >= out[0] * layout.cols && layout.computed.is_multiple_of(8));
            let last = layout.taps.iter().max().copied().unwrap_or(0);
            assert!(
                last + layout.computed <= layout.len,
                "{window:?}: the last block overruns"
            );
        }
    }
}
