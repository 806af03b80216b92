//! TopK tests.
use super::*;

fn k(v: i64) -> Option<Tensor> {
    t(&[1], vec![v])
}

/// x: int32 [2, 3, 2] with ties.
fn x3() -> Option<Tensor> {
    t(&[2, 3, 2], vec![3i32, 1, 5, 5, 2, 7, 5, 0, 5, 9, 1, 9])
}

#[test]
fn middle_axis_largest_with_ties() {
    let out = run("TopK", 11, &[("axis", int(1))], &[x3(), k(2)]).unwrap();
    assert_eq!(
        parts::<i32>(&out[0]),
        (vec![2, 2, 2], vec![5, 7, 3, 5, 5, 9, 5, 9])
    );
    assert_eq!(parts::<i64>(&out[1]).1, vec![1, 2, 0, 1, 0, 1, 1, 2]);
}

#[test]
fn values_only_node_gets_one_output() {
    let out = run_with_outputs("TopK", 11, &[("axis", int(1))], &[x3(), k(2)], 1).unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!(parts::<i32>(&out[0]).1, vec![5, 7, 3, 5, 5, 9, 5, 9]);
}

#[test]
fn negative_axis_smallest() {
    let out = run(
        "TopK",
        11,
        &[("axis", int(-3)), ("largest", int(0))],
        &[x3(), k(1)],
    )
    .unwrap();
    assert_eq!(
        parts::<i32>(&out[0]),
        (vec![1, 3, 2], vec![3, 0, 5, 5, 1, 7])
    );
    assert_eq!(parts::<i64>(&out[1]).1, vec![0, 1, 0, 0, 1, 0]);
}

#[test]
fn default_axis_is_last_and_ties_prefer_lower_index() {
    let x = t(&[7], vec![1.5f64, -2.0, 7.0, 7.0, 0.25, 7.0, -9.0]);
    let out = run("TopK", 11, &[], &[x.clone(), k(4)]).unwrap();
    assert_eq!(parts::<f64>(&out[0]).1, vec![7.0, 7.0, 7.0, 1.5]);
    assert_eq!(parts::<i64>(&out[1]).1, vec![2, 3, 5, 0]);
    // Opset 1: k is an attribute.
    let out = run("TopK", 1, &[("k", int(3))], &[x]).unwrap();
    assert_eq!(parts::<i64>(&out[1]).1, vec![2, 3, 5]);
}

/// Hand-worked: NaN ranks above every number; k = 0 gives empty outputs.
#[test]
fn nan_and_empty_k() {
    let x = t(&[4], vec![1.0f32, f32::NAN, 3.0, 2.0]);
    let out = run("TopK", 11, &[], &[x.clone(), k(2)]).unwrap();
    let (_, v) = parts::<f32>(&out[0]);
    assert!(v[0].is_nan() && v[1] == 3.0);
    assert_eq!(parts::<i64>(&out[1]).1, vec![1, 2]);
    let out = run("TopK", 11, &[("largest", int(0))], &[x.clone(), k(2)]).unwrap();
    assert_eq!(parts::<f32>(&out[0]).1, vec![1.0, 2.0]);
    let out = run("TopK", 11, &[], &[x, k(0)]).unwrap();
    assert_eq!(out[0].shape(), &[0]);
    assert_eq!(out[1].shape(), &[0]);
}

/// Many rows along axis 0 (inner stride 300, parallel path). Hand-derived: column j holds
/// (i * 7 + j) % 50 for i in 0..200, so its top 3 are 49, 49, 49 at the three lowest i with
/// (7i + j) % 50 == 49.
#[test]
fn many_rows_strided() {
    let (n, cols) = (200usize, 300usize);
    let x: Vec<u16> = (0..n * cols)
        .map(|p| (((p / cols) * 7 + p % cols) % 50) as u16)
        .collect();
    let out = run("TopK", 11, &[("axis", int(0))], &[t(&[n, cols], x), k(3)]).unwrap();
    let (shape, v) = parts::<u16>(&out[0]);
    assert_eq!(shape, vec![3, cols]);
    assert!(v.iter().all(|&e| e == 49));
    let (_, idx) = parts::<i64>(&out[1]);
    for j in 0..cols {
        let want: Vec<i64> = (0..n as i64)
            .filter(|i| (i * 7 + j as i64) % 50 == 49)
            .take(3)
            .collect();
        assert_eq!(
            vec![idx[j], idx[cols + j], idx[2 * cols + j]],
            want,
            "column {j}"
        );
    }
}

#[test]
fn bad_inputs_are_errors() {
    let err = run("TopK", 11, &[("axis", int(1))], &[x3(), k(4)]);
    assert!(matches!(err, Err(KernelError::InvalidValue(_))), "{err:?}");
    let err = run("TopK", 11, &[("axis", int(1))], &[x3(), k(-1)]);
    assert!(matches!(err, Err(KernelError::InvalidValue(_))), "{err:?}");
    let err = run("TopK", 11, &[("axis", int(3))], &[x3(), k(1)]);
    assert!(
        matches!(err, Err(KernelError::BadAttribute { .. })),
        "{err:?}"
    );
    let err = run("TopK", 11, &[], &[x3(), t(&[2], vec![1i64, 1])]);
    assert!(matches!(err, Err(KernelError::Shape(_))), "{err:?}");
    let err = run("TopK", 11, &[], &[t(&[2], vec![true, false]), k(1)]);
    assert!(
        matches!(err, Err(KernelError::UnsupportedDType { .. })),
        "{err:?}"
    );
    assert!(matches!(
        build_err("TopK", 10, &[("largest", int(0))]),
        Some(KernelError::UnsupportedAttribute { .. })
    ));
    assert!(matches!(
        build_err("TopK", 1, &[]),
        Some(KernelError::BadAttribute { .. })
    ));
}

/// Long rows, where the scan keeps only candidates that beat the running `k`-th best and a
/// single row is cut into parts: against a plain stable sort of the same values (largest or
/// smallest first, NaN above every number, ties to the lower index), for a contiguous row
/// and for rows along the first axis of a 2-D input (every third element), with `k` small
/// and large against the row.
#[test]
fn long_rows_match_a_full_sort() {
    let n = 200_000;
    // Few distinct values, so ties abound; some NaNs.
    let values: Vec<f32> = (0..n)
        .map(|i| match (i * 7919) % 1009 {
            0 => f32::NAN,
            r => (r % 97) as f32 * 0.5,
        })
        .collect();
    let rank = |largest: bool, row: &[f32]| -> Vec<usize> {
        let key = |v: f32| if v.is_nan() { f32::INFINITY } else { v };
        let mut order: Vec<usize> = (0..row.len()).collect();
        // A stable sort keeps equal values in index order.
        order.sort_by(|&a, &b| {
            let (x, y) = (key(row[a]), key(row[b]));
            let by_value = x.partial_cmp(&y).unwrap();
            let nan = row[a].is_nan().cmp(&row[b].is_nan());
            let ascending = nan.then(by_value);
            if largest {
                ascending.reverse()
            } else {
                ascending
            }
        });
        order
    };
    for largest in [true, false] {
        for kk in [5usize, 3000] {
            let attrs = [("largest", int(largest as i64))];
            let x = t(&[n], values.clone());
            let out = run("TopK", 11, &attrs, &[x, k(kk as i64)]).unwrap();
            let want: Vec<i64> = rank(largest, &values)[..kk]
                .iter()
                .map(|&i| i as i64)
                .collect();
            assert_eq!(
                parts::<i64>(&out[1]).1,
                want,
                "row, largest {largest}, k {kk}"
            );
            // Three rows along axis 0: row c is values[c], values[c + 3], ...
            let rows = n / 3;
            let x = t(&[rows, 3], values[..rows * 3].to_vec());
            let attrs = [("axis", int(0)), ("largest", int(largest as i64))];
            let out = run("TopK", 11, &attrs, &[x, k(kk as i64)]).unwrap();
            let got = parts::<i64>(&out[1]).1;
            for c in 0..3 {
                let row: Vec<f32> = (0..rows).map(|j| values[j * 3 + c]).collect();
                let want: Vec<i64> = rank(largest, &row)[..kk]
                    .iter()
                    .map(|&i| i as i64)
                    .collect();
                let col: Vec<i64> = (0..kk).map(|j| got[j * 3 + c]).collect();
                assert_eq!(col, want, "column {c}, largest {largest}, k {kk}");
            }
        }
    }
}
