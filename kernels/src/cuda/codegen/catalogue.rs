//! Every generated kernel in its representative forms: what the NVRTC compile check builds
//! and what a GPU session may compile ahead of time.

use super::binary::{self, BinaryOp, Layout};
use super::normalize;
use super::pool::{self, PoolKind};
use super::reduce::{self, ReduceOp};
use super::unary;
use super::{KernelSource, MAX_RANK, copy};
use crate::DType;

/// The element types the generated kernels are built for.
const TYPES: [DType; 7] = [
    DType::F32,
    DType::F64,
    DType::I32,
    DType::I64,
    DType::I8,
    DType::U8,
    DType::Bool,
];

/// Every kernel source: each unary op, binary op and reduction on every type it is defined
/// for, the broadcast layouts at every rank for `float`, casts between every pair of types,
/// the copy and fill kernels for every element size, softmax and the channel affine map.
pub fn catalogue() -> Vec<KernelSource> {
    let mut all = Vec::new();
    for dtype in TYPES {
        all.extend(
            unary::all_float_ops()
                .into_iter()
                .filter_map(|op| unary::source(op, dtype)),
        );
        all.extend(unary::clip_source(dtype, Some(0.0), Some(6.0)));
        for to in TYPES {
            all.extend(unary::cast_source(dtype, to));
        }
        for op in BinaryOp::ALL {
            all.extend(binary::source(op, dtype, Layout::Same));
            all.extend(binary::source(op, dtype, Layout::Strided { rank: 4 }));
        }
        all.extend(binary::where_source(dtype, 4));
        all.extend(
            ReduceOp::ALL
                .into_iter()
                .filter_map(|op| reduce::source(op, dtype)),
        );
        for log in [false, true] {
            all.extend(normalize::softmax_source(dtype, log));
        }
        all.extend(normalize::channel_affine_source(dtype));
        for relu in [false, true] {
            all.extend(normalize::bias_add_source(dtype, relu));
        }
        for kind in [
            PoolKind::Max,
            PoolKind::AverageExcludePad,
            PoolKind::AverageIncludePad,
        ] {
            all.extend(pool::source(kind, dtype));
        }
    }
    all.push(unary::not_source());
    for rank in 1..=MAX_RANK {
        all.extend(binary::source(
            BinaryOp::Add,
            DType::F32,
            Layout::Strided { rank },
        ));
    }
    for bytes in [1, 2, 4, 8] {
        all.extend(copy::fill_source(bytes));
        all.extend(copy::gather_source(bytes));
        for rank in 1..=MAX_RANK {
            all.extend(copy::strided_copy_source(bytes, rank));
        }
    }
    all.extend(super::detection::all_sources());
    // Types that share a C type (uint8 and bool) give the same kernel twice: keep one.
    let mut seen = std::collections::HashSet::new();
    all.retain(|k| seen.insert(k.key.clone()));
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_names_exactly_one_source() {
        let mut by_key = std::collections::HashMap::new();
        let mut sources = Vec::new();
        for dtype in TYPES {
            sources.extend(
                TYPES
                    .into_iter()
                    .filter_map(|to| unary::cast_source(dtype, to)),
            );
            sources.extend(
                BinaryOp::ALL
                    .into_iter()
                    .filter_map(|op| binary::source(op, dtype, Layout::Same)),
            );
        }
        for k in sources {
            if let Some(other) = by_key.insert(k.key.clone(), k.source.clone()) {
                assert_eq!(other, k.source, "{} names two sources", k.key);
            }
        }
        let all = catalogue();
        assert!(all.len() > 300, "{} kernels", all.len());
    }
}
