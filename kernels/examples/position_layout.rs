//! Would a channel-blocked image (NCHW16c, ORT's layout) speed up the position tiles? This
//! study runs the position-tile loop of a 3×3 convolution (8 positions × 32 channels per
//! tile, the image read in place) on an NCHW padded image and on an NCHW16c one, whose depth
//! order puts 16 consecutive depth steps in one cache line; "cold" streams 128 MiB through
//! the caches before each product, as the other layers of a model do. Also prints the
//! machine's FMA peak. `cargo run --release -p spillway-kernels --example position_layout`.
//!
//! The tile here stores its accumulators without the engine's transpose; the two layouts pay
//! the same for that, so the comparison between them stands.
//!
//! Measured 2026-11-25 on an AMD EPYC build machine (2 vCPUs, FMA peak 115 GFLOP/s: AVX-512 at
//! half width), GFLOP/s, kc 256 / 512:
//!
//! | 3×3 conv | NCHW hot | NCHW cold | NCHW16c cold |
//! |---|---:|---:|---:|
//! | 64←64, 56² | 102 / 114 | 101 / 102 | 110 / 114 |
//! | 128←128, 28² | 114 / 115 | 112 / 112 | 113 / 113 |
//! | 256←256, 14² | 112 / 113 | 107 / 107 | 109 / 110 |
//! | 512←512, 7² | 97 / 99 | 87 / 87 | 88 / 90 |
//!
//! The blocked image gains 1–3 % (8 % on the 56² image at kc 256, 12 % at kc 512): the
//! position tiles' inner loop runs at 87–99 % of peak on either layout, so a blocked layout
//! would pay through what it saves around that loop (the tile transpose, cropping, separate
//! epilogue passes), not inside it.

mod timing;

#[cfg(target_arch = "x86_64")]
mod study {
    use std::arch::x86_64::*;
    use std::time::Instant;

    /// 24 independent FMA chains: the core's multiply-add peak in GFLOP/s.
    #[target_feature(enable = "avx512f")]
    fn fma_chains(iters: usize) -> f32 {
        let mut acc = [_mm512_setzero_ps(); 24];
        let (a, b) = (_mm512_set1_ps(1.000_000_1), _mm512_set1_ps(0.999_999_9));
        for _ in 0..iters {
            for r in acc.iter_mut() {
                *r = _mm512_fmadd_ps(a, b, *r);
            }
        }
        _mm512_reduce_add_ps(
            acc.iter()
                .fold(_mm512_setzero_ps(), |s, &r| _mm512_add_ps(s, r)),
        )
    }

    /// `C[32 × 8] (+)= W[kc × 32]ᵀ · img[offsets[p] + pos[i]]`, the engine's position tile.
    ///
    /// # Safety
    /// AVX-512F; every `img + offsets[p] + pos[i]` (`p < kc`) and `c + 16·v·ldc + 16·i + 0..16`
    /// lie in their buffers; `w` holds `kc · 32` floats.
    #[target_feature(enable = "avx512f")]
    unsafe fn tile(
        kc: usize,
        w: *const f32,
        img: *const f32,
        offsets: &[usize],
        pos: &[usize; 8],
        c: *mut f32,
        ldc: usize,
    ) {
        let mut acc = [[_mm512_setzero_ps(); 8]; 2];
        // SAFETY: the caller's contract.
        unsafe {
            for (p, &offset) in offsets[..kc].iter().enumerate() {
                let base = img.add(offset);
                let wv = [
                    _mm512_loadu_ps(w.add(p * 32)),
                    _mm512_loadu_ps(w.add(p * 32 + 16)),
                ];
                for (i, &at) in pos.iter().enumerate() {
                    let x = _mm512_set1_ps(*base.add(at));
                    for v in 0..2 {
                        acc[v][i] = _mm512_fmadd_ps(x, wv[v], acc[v][i]);
                    }
                }
            }
            for (v, row) in acc.iter().enumerate() {
                for (i, &r) in row.iter().enumerate() {
                    let d = c.add(16 * v * ldc + 16 * i);
                    _mm512_storeu_ps(d, _mm512_add_ps(r, _mm512_loadu_ps(d)));
                }
            }
        }
    }

    /// GFLOP/s of a 3×3 convolution `m ← ch` on a `side²` image (padding 1), depth blocks of
    /// `kc`, on an NCHW16c image when `blocked`, with the caches flushed before each product
    /// when `cold`.
    fn conv(ch: usize, side: usize, m: usize, kc: usize, blocked: bool, cold: bool) -> f64 {
        let width = side + 2;
        let plane = width * width;
        let img = vec![0.5f32; ch * plane + 64];
        // Depth step p: (c, u, v) in NCHW; (c / 16, u, v, c % 16) in NCHW16c.
        let offsets: Vec<usize> = if blocked {
            (0..ch / 16)
                .flat_map(|cb| {
                    (0..9).flat_map(move |t| {
                        (0..16).map(move |ci| cb * plane * 16 + (t / 3 * width + t % 3) * 16 + ci)
                    })
                })
                .collect()
        } else {
            (0..ch)
                .flat_map(|c| (0..9).map(move |t| c * plane + t / 3 * width + t % 3))
                .collect()
        };
        let count = side * side;
        let tiles = count.div_ceil(8);
        let pos: Vec<usize> = (0..tiles * 8)
            .map(|e| {
                let q = e.min(count - 1);
                (q / side * width + q % side) * if blocked { 16 } else { 1 }
            })
            .collect();
        let k = ch * 9;
        let w = vec![0.25f32; k * m];
        let ldc = tiles * 8;
        let mut c = vec![0.0f32; m * ldc * 16 + 256];
        let mut flush = vec![1.0f32; 32 << 20];
        let reps = 20;
        let mut best = f64::MAX;
        for _ in 0..5 {
            let mut seconds = 0.0;
            for _ in 0..reps {
                if cold {
                    flush.iter_mut().step_by(16).for_each(|x| *x += 1.0);
                }
                let start = Instant::now();
                for pc in (0..k).step_by(kc) {
                    let depth = kc.min(k - pc);
                    for jp in 0..m / 32 {
                        let panel = &w[pc * m + jp * depth * 32..];
                        for t in 0..tiles {
                            let p: [usize; 8] = pos[t * 8..t * 8 + 8].try_into().expect("8");
                            // SAFETY: AVX-512F was checked; offsets and positions stay inside
                            // the padded image, the panel holds depth · 32 floats, and the
                            // tile's outputs lie inside `c`.
                            unsafe {
                                tile(
                                    depth,
                                    panel.as_ptr(),
                                    img.as_ptr(),
                                    &offsets[pc..],
                                    &p,
                                    c.as_mut_ptr().add(jp * 32 * ldc + t * 8),
                                    ldc,
                                )
                            };
                        }
                    }
                }
                seconds += start.elapsed().as_secs_f64();
            }
            best = best.min(seconds / reps as f64);
        }
        std::hint::black_box((&c, &flush));
        2.0 * (m * k * count) as f64 / best / 1e9
    }

    pub fn run() {
        if !is_x86_feature_detected!("avx512f") {
            println!("this CPU has no AVX-512F: nothing to measure");
            return;
        }
        let iters = 20_000_000;
        // SAFETY: AVX-512F was checked above.
        let seconds = super::timing::median_secs(
            || _ = std::hint::black_box(unsafe { fma_chains(iters) }),
            5,
        );
        println!(
            "FMA peak: {:.1} GFLOP/s",
            (iters * 24 * 32) as f64 / seconds / 1e9
        );
        println!("| 3×3 conv | kc | NCHW hot | NCHW cold | NCHW16c cold |");
        println!("|---|---:|---:|---:|---:|");
        for (ch, side) in [(64, 56), (128, 28), (256, 14), (512, 7)] {
            for kc in [256, 512] {
                println!(
                    "| {ch}←{ch}, {side}² | {kc} | {:.1} | {:.1} | {:.1} |",
                    conv(ch, side, ch, kc, false, false),
                    conv(ch, side, ch, kc, false, true),
                    conv(ch, side, ch, kc, true, true),
                );
            }
        }
    }
}

fn main() {
    #[cfg(target_arch = "x86_64")]
    study::run();
    #[cfg(not(target_arch = "x86_64"))]
    println!("position tiles are x86-64 only");
}
