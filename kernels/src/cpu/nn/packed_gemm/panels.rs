//! How the weights of a product in position tiles are cut into channel panels, and the
//! transposed packings of them that the tiles read ([`TransposedA`]).

use std::sync::OnceLock;

use super::position_tile::{AVX2_HEIGHT, POSITIONS};
use super::{Isa, KC, PackedA};
#[cfg(doc)]
use crate::KernelOptions;
use crate::cpu::aligned::AlignedFloats;

/// Channel panels of `vectors` vectors of `lanes` channels each (a tile's width), the last
/// one as many whole vectors as the channels left need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Panels {
    /// Vectors per full panel.
    pub(super) vectors: usize,
    /// Channels per vector.
    pub(super) lanes: usize,
}

impl Panels {
    /// The panels of the tiles for an `m × k` product on `isa`: on AVX-512, four vectors
    /// ([`FOUR`]) where `four` allows them ([`KernelOptions::four_vector_panels`]), the
    /// channels are whole such panels and the product is not `token_major`; else three vectors for cell tiles (`cells`) at least
    /// [`THREE_VECTOR_DEPTH`] deep where they take fewer tile costs ([`tile_cost`]) than two,
    /// else two; on AVX2, two.
    ///
    /// A tile of three vectors has 24 accumulators against 16 and broadcasts a third less
    /// often: 4–5 % faster on NASNet's 1×1 convolutions of blocked images 336 and more deep
    /// (`conv_rate`, one thread); resnet50's (64 to 1024 deep, into 128 to 512 channels)
    /// ran the same. The general tiles also hold 8 positions in registers: with
    /// three vectors, Winograd's products and planar 3×3 convolutions ran 5–15 % slower.
    ///
    /// A tile of four vectors × 6 positions (ONNX Runtime's NCHWc tile on AVX-512) has 24
    /// accumulators too, and a product half as many panels as with two, so the image is
    /// read half as often: in resnet50's and googlenet's traces (one thread, Xeon with
    /// AVX-512, panels of four vectors off alternating) their 1×1 and strided convolutions ran
    /// 0.83–0.95× the time, the stems 0.93–0.95×; Winograd's token-major products ran
    /// 1.02–1.17× and keep the narrower panels.
    pub(super) fn for_product(
        isa: Isa,
        four: bool,
        (cells, token_major): (bool, bool),
        m: usize,
        k: usize,
    ) -> Panels {
        let (two, three) = (
            Panels {
                vectors: 2,
                lanes: isa.lanes(),
            },
            Panels {
                vectors: 3,
                lanes: 16,
            },
        );
        if isa == Isa::Avx512 && !token_major && m.is_multiple_of(FOUR.full()) && four {
            return FOUR;
        }
        let deep_cells = isa == Isa::Avx512 && cells && k >= THREE_VECTOR_DEPTH;
        match deep_cells && three.cost(m) < two.cost(m) {
            true => three,
            false => two,
        }
    }

    /// Positions per tile for `count` outputs. AVX2: [`AVX2_HEIGHT`] (twelve accumulators).
    /// AVX-512: 6 for panels of four vectors (24 accumulators), else 7 where that leaves
    /// clearly fewer lanes empty than 8 (a 7×7 output is seven tiles of 7, against 49 of 56
    /// lanes in tiles of 8), else 8.
    pub(super) fn height(self, isa: Isa, count: usize) -> usize {
        let lanes = |height: usize| count.div_ceil(height) * height;
        if isa == Isa::Avx2 {
            AVX2_HEIGHT
        } else if self.vectors == 4 {
            FOUR_HEIGHT
        } else if 100 * lanes(7) < 97 * lanes(8) {
            7
        } else {
            POSITIONS
        }
    }

    /// What a column of tiles across `m` channels costs, in [`tile_cost`]s.
    fn cost(self, m: usize) -> usize {
        (0..self.count(m))
            .map(|jp| tile_cost(self.width(m, jp) / self.lanes))
            .sum()
    }

    /// Channels per full panel.
    pub(super) fn full(self) -> usize {
        self.vectors * self.lanes
    }

    /// How many panels `m` channels take.
    pub(super) fn count(self, m: usize) -> usize {
        m.div_ceil(self.full())
    }

    /// The width of panel `jp` of `m` channels: a full panel, or the last one's channels
    /// rounded up to whole vectors.
    pub(super) fn width(self, m: usize, jp: usize) -> usize {
        (m - jp * self.full())
            .min(self.full())
            .next_multiple_of(self.lanes)
    }

    /// Channels of `m` once padded to whole panels.
    pub(super) fn padded(self, m: usize) -> usize {
        (0..self.count(m)).map(|jp| self.width(m, jp)).sum()
    }
}

/// The shallowest product given panels of three vectors (`conv_rate`, one thread, 1×1 on
/// blocked images): 96 → 42 at 83² ran 7 % faster, 168 → 168 at 42² the same, and 84 → 84
/// at 42² 1 % slower; in NASNet's traces its 42- and 84-deep ones ran up to 13 % slower.
const THREE_VECTOR_DEPTH: usize = 96;

/// Panels of four vectors (64 channels) in tiles of [`FOUR_HEIGHT`] positions, for products
/// whose channels are whole such panels.
const FOUR: Panels = Panels {
    vectors: 4,
    lanes: 16,
};

/// Positions per tile of [`FOUR`] panels.
const FOUR_HEIGHT: usize = 6;

/// What a tile of `vectors` vectors of channels costs, in percent of a tile of two (its
/// broadcasts take the same time whatever its width): one vector 65 (`conv_rate`, 16 against
/// 32 channels), three 143 (4.5 % less per multiply-add than two). Four only by estimate
/// (24 multiply-adds a row against 16): its panels are all full, so only their count matters.
pub(super) fn tile_cost(vectors: usize) -> usize {
    match vectors {
        1 => 65,
        2 => 100,
        3 => 143,
        _ => 180,
    }
}

/// The weights `A` (`m × k`) transposed into channel panels for the position tiles, packed on
/// first use, once for each cut of [`Panels`] a product asks for: for each `KC` block of
/// depth, the panels one after the other, `kc` rows of the panel's width each.
#[derive(Debug, Clone, Default)]
pub(super) struct TransposedA {
    /// In panels of two, three and four vectors.
    by_channels: [OnceLock<AlignedFloats>; 3],
    /// In panels of two, three and four vectors, depth rows tap by tap within each block of
    /// 16 channels.
    by_taps: [OnceLock<AlignedFloats>; 3],
}

/// Derived from the weights; two packings of the same weights are equal whatever was cached.
impl PartialEq for TransposedA {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl PackedA {
    /// The weights transposed into `panels`, packed on first use.
    pub(super) fn transposed(&self, panels: Panels) -> &[f32] {
        self.transposed.by_channels[slot(panels)]
            .get_or_init(|| self.pack_transposed(panels, |p| p))
            .as_slice()
    }

    /// The weights of a window of `taps` taps over channels in whole blocks of 16 transposed
    /// into `panels`, their depth rows `(c, u, v)` reordered tap by tap within each block,
    /// `(c / 16, u, v, c % 16)`: every 16 rows are then one cell's 16 channels of a blocked
    /// image, as the cell strips read them. Packed on first use (a `PackedA` holds one
    /// convolution's weights, so `taps` is always the same).
    pub(super) fn transposed_by_taps(&self, panels: Panels, taps: usize) -> &[f32] {
        debug_assert!(self.k.is_multiple_of(16 * taps));
        let per_block = 16 * taps;
        self.transposed.by_taps[slot(panels)]
            .get_or_init(|| {
                self.pack_transposed(panels, |q| {
                    let (b, r) = (q / per_block, q % per_block);
                    (b * 16 + r % 16) * taps + r / 16
                })
            })
            .as_slice()
    }

    /// The transposed packing of [`TransposedA`], its depth row `q` the weights' row
    /// `row_of(q)`.
    fn pack_transposed(&self, panels: Panels, row_of: impl Fn(usize) -> usize) -> AlignedFloats {
        let (m, k) = (self.m, self.k);
        let (mr, _) = self.isa.tile();
        let full = panels.full();
        let mut out = Vec::with_capacity(panels.padded(m) * k);
        for pc in (0..k).step_by(KC) {
            let kc = KC.min(k - pc);
            for jp in 0..panels.count(m) {
                let width = panels.width(m, jp);
                for q in pc..pc + kc {
                    let p = row_of(q);
                    let (pa, ka) = (p / KC * KC, KC.min(k - p / KC * KC));
                    out.extend((0..width).map(|j| {
                        let row = jp * full + j;
                        if row < m {
                            self.panel(pa, ka, row / mr)[(p - pa) * mr + row % mr]
                        } else {
                            0.0
                        }
                    }));
                }
            }
        }
        AlignedFloats::from_slice(&out)
    }
}

/// The slot of [`TransposedA`] for `panels`.
fn slot(panels: Panels) -> usize {
    match panels.vectors {
        v @ 2..=4 => v - 2,
        v => unreachable!("panels of {v} vectors"),
    }
}

#[cfg(test)]
mod tests {
    use super::{Isa, Panels};

    #[test]
    fn four_vectors_for_whole_panels_of_64_three_for_deep_cell_tiles() {
        let vectors = |layout, m, k| Panels::for_product(Isa::Avx512, true, layout, m, k).vectors;
        let (cells, general, token_major) = ((true, false), (false, false), (false, true));
        // Whole panels of 64 channels, unless the product is token-major.
        assert_eq!(vectors(cells, 64, 16), 4);
        assert_eq!(vectors(general, 256, 27), 4);
        assert_eq!(vectors(token_major, 256, 256), 2);
        // 168 channels: 3 + 3 + 3 + 2 vectors against 5 × 2 + 1.
        assert_eq!(vectors(cells, 168, 1008), 3);
        assert_eq!(vectors(cells, 672 + 16, 672), 3);
        // Too shallow, or general tiles.
        assert_eq!(vectors(cells, 168, 168), 3);
        assert_eq!(vectors(cells, 84, 84), 2);
        assert_eq!(vectors(general, 168, 1008), 2);
        // 32 channels: a panel of two vectors either way.
        assert_eq!(vectors(cells, 32, 1008), 2);
        let avx2 = Panels::for_product(Isa::Avx2, true, cells, 128, 1008);
        assert_eq!((avx2.vectors, avx2.lanes), (2, 8));
        // Positions per tile: 6 for four vectors, else 7 or 8 as fewer lanes stay empty.
        let height = |m, count| {
            let panels = Panels::for_product(Isa::Avx512, true, cells, m, 84);
            panels.height(Isa::Avx512, count)
        };
        assert_eq!(height(64, 49), 6);
        assert_eq!(height(84, 49), 7);
        assert_eq!(height(84, 64), 8);
    }

    #[test]
    fn panels_round_the_last_up_to_whole_vectors() {
        let three = Panels {
            vectors: 3,
            lanes: 16,
        };
        let widths = |p: Panels, m: usize| -> Vec<usize> {
            (0..p.count(m)).map(|jp| p.width(m, jp)).collect()
        };
        assert_eq!(widths(three, 168), vec![48, 48, 48, 32]);
        assert_eq!(widths(three, 150), vec![48, 48, 48, 16]);
        assert_eq!(widths(three, 96), vec![48, 48]);
        assert_eq!(three.padded(168), 176);
        let two = Panels {
            vectors: 2,
            lanes: 16,
        };
        assert_eq!(
            widths(two, 168),
            vec![32; 5].into_iter().chain([16]).collect::<Vec<_>>()
        );
        assert_eq!(widths(two, 20), vec![32]);
        let avx2 = Panels {
            vectors: 2,
            lanes: 8,
        };
        assert_eq!(widths(avx2, 20), vec![16, 8]);
        assert_eq!(avx2.padded(20), 24);
    }
}
