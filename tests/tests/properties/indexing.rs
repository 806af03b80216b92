//! `Gather`, `GatherElements`, `ScatterElements` (every reduction) and `ScatterND` against the
//! spec, with negative indices and negative axes. Scatters without a reduction get distinct
//! targets (the spec leaves duplicates undefined); with one, duplicates apply in index order.

use proptest::prelude::*;
use spillway_kernels::attrs::AttrValue;

use super::{assert_all_close, config, run_kernel, strides, tensor, tensor_i64, unravel, values};

/// A data shape of rank 1 to 3 (dims 1 to 4), an axis in it (as given: maybe negative, and
/// normalized) and the data.
fn data_and_axis() -> impl Strategy<Value = (Vec<usize>, i64, usize, Vec<f32>)> {
    prop::collection::vec(1usize..=4, 1..=3).prop_flat_map(|shape| {
        let r = shape.len();
        let len = shape.iter().product();
        (Just(shape), 0..r, any::<bool>(), values(len, true)).prop_map(move |(s, a, neg, d)| {
            let given = if neg { a as i64 - r as i64 } else { a as i64 };
            (s, given, a, d)
        })
    })
}

/// `v` in `-d..d` from a raw draw, negative half the time.
fn index(raw: u32, d: usize) -> i64 {
    let i = (raw as usize % d) as i64;
    if raw & 0x8000_0000 != 0 {
        i - d as i64
    } else {
        i
    }
}

fn norm(i: i64, d: usize) -> usize {
    if i < 0 {
        (i + d as i64) as usize
    } else {
        i as usize
    }
}

fn fail(what: &str, e: impl std::fmt::Display) -> TestCaseError {
    TestCaseError::fail(format!("{what}: {e}"))
}

proptest! {
    #![proptest_config(config(128))]

    #[test]
    fn gather(
        (shape, axis, a, data) in data_and_axis(),
        idx_shape in prop::collection::vec(0usize..=3, 0..=2),
        raw in prop::collection::vec(any::<u32>(), 16),
    ) {
        let d = shape[a];
        let count: usize = idx_shape.iter().product();
        let idx: Vec<i64> = (0..count).map(|i| index(raw[i % raw.len()].wrapping_add(i as u32 * 7919), d)).collect();
        let mut out_shape = shape[..a].to_vec();
        out_shape.extend(&idx_shape);
        out_shape.extend(&shape[a + 1..]);
        let ds = strides(&shape);
        let want: Vec<f64> = (0..out_shape.iter().product())
            .map(|flat| {
                let o = unravel(flat, &out_shape);
                let ki = idx_shape.len();
                let j = strides(&idx_shape).iter().zip(&o[a..a + ki]).map(|(s, i)| s * i).sum::<usize>();
                let mut di = o[..a].to_vec();
                di.push(norm(idx[j], d));
                di.extend(&o[a + ki..]);
                data[di.iter().zip(&ds).map(|(i, s)| i * s).sum::<usize>()] as f64
            })
            .collect();
        let x = tensor(&shape, &data);
        let i = tensor_i64(&idx_shape, &idx);
        let out = run_kernel("Gather", 13, &[("axis", AttrValue::Int(axis))], &[Some(&x), Some(&i)], 1)
            .map_err(|e| fail("Gather", e))?;
        assert_all_close(&format!("Gather {shape:?} axis {axis} indices {idx_shape:?} {idx:?}"), &out_shape, &want, &out[0], &[0.0], 0.0)?;
    }

    #[test]
    fn gather_elements(
        (shape, axis, a, data) in data_and_axis(),
        along in 0usize..=4,
        shrink in prop::collection::vec(0usize..=1, 3),
        raw in prop::collection::vec(any::<u32>(), 16),
    ) {
        let idx_shape: Vec<usize> = shape.iter().enumerate()
            .map(|(k, &d)| if k == a { along } else { (d - shrink[k].min(d - 1)).max(1) })
            .collect();
        let count: usize = idx_shape.iter().product();
        let d = shape[a];
        let idx: Vec<i64> = (0..count).map(|i| index(raw[i % raw.len()].wrapping_add(i as u32 * 104_729), d)).collect();
        let ds = strides(&shape);
        let want: Vec<f64> = (0..count).map(|flat| {
            let mut o = unravel(flat, &idx_shape);
            o[a] = norm(idx[flat], d);
            data[o.iter().zip(&ds).map(|(i, s)| i * s).sum::<usize>()] as f64
        }).collect();
        let x = tensor(&shape, &data);
        let i = tensor_i64(&idx_shape, &idx);
        let out = run_kernel("GatherElements", 13, &[("axis", AttrValue::Int(axis))], &[Some(&x), Some(&i)], 1)
            .map_err(|e| fail("GatherElements", e))?;
        assert_all_close(&format!("GatherElements {shape:?} axis {axis} indices {idx_shape:?} {idx:?}"), &idx_shape, &want, &out[0], &[0.0], 0.0)?;
    }

    #[test]
    fn scatter_elements(
        (shape, axis, a, data) in data_and_axis(),
        reduction in prop::sample::select(vec!["none", "add", "mul", "max", "min"]),
        along in 0usize..=4,
        shrink in prop::collection::vec(0usize..=1, 3),
        raw in prop::collection::vec(any::<u32>(), 32),
        updates_raw in values(64, false),
    ) {
        let d = shape[a];
        let along = if reduction == "none" { along.min(d) } else { along };
        let idx_shape: Vec<usize> = shape.iter().enumerate()
            .map(|(k, &dk)| if k == a { along } else { (dk - shrink[k].min(dk - 1)).max(1) })
            .collect();
        let count: usize = idx_shape.iter().product();
        let mut idx: Vec<i64> = (0..count).map(|i| index(raw[i % raw.len()].wrapping_add(i as u32 * 7919), d)).collect();
        if reduction == "none" {
            // Distinct targets along the axis on every line: a rotation of 0..d, signs kept.
            let is = strides(&idx_shape);
            for (flat, v) in idx.iter_mut().enumerate() {
                let o = unravel(flat, &idx_shape);
                let line = flat - o[a] * is[a];
                let shift = raw[line % raw.len()] as usize;
                let t = ((o[a] + shift) % d) as i64;
                *v = if *v < 0 { t - d as i64 } else { t };
            }
        }
        // Max and min of NaN are left to the implementation: finite data for them.
        let data: Vec<f32> = if matches!(reduction, "max" | "min") {
            data.iter().map(|v| if v.is_finite() { *v } else { 0.5 }).collect()
        } else {
            data
        };
        let updates: Vec<f32> = (0..count).map(|i| updates_raw[i % updates_raw.len()]).collect();
        let ds = strides(&shape);
        let mut want: Vec<f64> = data.iter().map(|&v| v as f64).collect();
        for flat in 0..count {
            let mut o = unravel(flat, &idx_shape);
            o[a] = norm(idx[flat], d);
            let t = o.iter().zip(&ds).map(|(i, s)| i * s).sum::<usize>();
            // In f32, as the kernel computes.
            let (cur, u) = (want[t] as f32, updates[flat]);
            want[t] = match reduction {
                "add" => cur + u,
                "mul" => cur * u,
                "max" => cur.max(u),
                "min" => cur.min(u),
                _ => u,
            } as f64;
        }
        let x = tensor(&shape, &data);
        let i = tensor_i64(&idx_shape, &idx);
        let up = tensor(&idx_shape, &updates);
        let attrs = [("axis", AttrValue::Int(axis)), ("reduction", AttrValue::String(reduction.into()))];
        let out = run_kernel("ScatterElements", 18, &attrs, &[Some(&x), Some(&i), Some(&up)], 1)
            .map_err(|e| fail("ScatterElements", e))?;
        assert_all_close(&format!("ScatterElements {reduction} {shape:?} axis {axis} indices {idx_shape:?} {idx:?}"), &shape, &want, &out[0], &[1e-5], 1e-5)?;
    }

    #[test]
    fn scatter_nd(
        shape in prop::collection::vec(1usize..=4, 1..=3),
        k_raw in 1usize..=3,
        m_raw in 0usize..=6,
        raw in prop::collection::vec(any::<u32>(), 64),
        reduction in prop::sample::select(vec!["none", "add", "mul"]),
        fill in values(128, true),
    ) {
        let k = k_raw.min(shape.len());
        let prefix: Vec<usize> = shape[..k].to_vec();
        let tuples: usize = prefix.iter().product();
        let m = if reduction == "none" { m_raw.min(tuples) } else { m_raw };
        // Distinct tuples for "none": the first m of a seeded shuffle of all of them.
        let mut order: Vec<usize> = (0..tuples).collect();
        order.sort_by_key(|&t| raw[t % raw.len()].wrapping_mul(t as u32 + 1));
        let picks: Vec<usize> = (0..m).map(|j| if reduction == "none" { order[j] } else { raw[j % raw.len()] as usize % tuples }).collect();
        let mut idx = Vec::new();
        for (j, &t) in picks.iter().enumerate() {
            for (q, &v) in unravel(t, &prefix).iter().enumerate() {
                let neg = raw[(j * 3 + q) % raw.len()] & 1 == 1;
                idx.push(if neg { v as i64 - prefix[q] as i64 } else { v as i64 });
            }
        }
        let slice: usize = shape[k..].iter().product();
        let data: Vec<f32> = (0..shape.iter().product::<usize>()).map(|i| fill[i % fill.len()]).collect();
        let updates: Vec<f32> = (0..m * slice).map(|i| fill[(i * 5 + 3) % fill.len()]).collect();
        let mut want: Vec<f64> = data.iter().map(|&v| v as f64).collect();
        for (j, &t) in picks.iter().enumerate() {
            for s in 0..slice {
                let (cur, u) = (want[t * slice + s] as f32, updates[j * slice + s]);
                want[t * slice + s] = match reduction {
                    "add" => cur + u,
                    "mul" => cur * u,
                    _ => u,
                } as f64;
            }
        }
        let mut up_shape = vec![m];
        up_shape.extend(&shape[k..]);
        let x = tensor(&shape, &data);
        let i = tensor_i64(&[m, k], &idx);
        let up = tensor(&up_shape, &updates);
        let attrs = [("reduction", AttrValue::String(reduction.into()))];
        let out = run_kernel("ScatterND", 18, &attrs, &[Some(&x), Some(&i), Some(&up)], 1)
            .map_err(|e| fail("ScatterND", e))?;
        assert_all_close(&format!("ScatterND {reduction} {shape:?} indices [{m}, {k}] {idx:?}"), &shape, &want, &out[0], &[1e-5], 1e-5)?;
    }
}
