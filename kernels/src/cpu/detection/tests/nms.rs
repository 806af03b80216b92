//! NonMaxSuppression tests.
use super::*;

fn small_inputs() -> (Option<Tensor>, Option<Tensor>) {
    #[rustfmt::skip]
    let boxes = vec![
        0.0, 0.0, 1.0, 1.0,   0.0, 0.1, 1.0, 1.1,   0.0, -0.1, 1.0, 0.9,
        0.0, 10.0, 1.0, 11.0, 0.0, 10.1, 1.0, 11.1, 0.0, 100.0, 1.0, 101.0f32,
    ];
    #[rustfmt::skip]
    let scores = vec![
        0.9, 0.75, 0.6, 0.95, 0.5, 0.3,
        0.5, 0.5, 0.7, 0.5, 0.2, 0.5f32,
    ];
    (t(&[1, 6, 4], boxes), t(&[1, 2, 6], scores))
}

fn rows(out: &[Tensor]) -> Vec<[i64; 3]> {
    let (shape, v) = parts::<i64>(&out[0]);
    assert_eq!(shape[1], 3);
    v.chunks_exact(3).map(|c| [c[0], c[1], c[2]]).collect()
}

#[test]
fn two_classes_with_score_threshold_and_limit() {
    let (b, sc) = small_inputs();
    let out = run(
        "NonMaxSuppression",
        11,
        &[],
        &[
            b,
            sc,
            t(&[1], vec![2i64]),
            t(&[1], vec![0.5f32]),
            t(&[1], vec![0.4f32]),
        ],
    )
    .unwrap();
    assert_eq!(rows(&out), vec![[0, 0, 3], [0, 0, 0], [0, 1, 2], [0, 1, 3]]);
}

#[test]
fn equal_scores_keep_lower_box_index_first() {
    // Class 1 has four boxes scored 0.5 (0, 1, 3, 5): the reference keeps 3 and 5 after 2,
    // and drops 0 and 1 (overlapping 2), in box order.
    let (b, sc) = small_inputs();
    let out = run(
        "NonMaxSuppression",
        11,
        &[],
        &[b, sc, t(&[1], vec![10i64]), t(&[1], vec![0.5f32]), None],
    )
    .unwrap();
    assert_eq!(
        rows(&out),
        vec![
            [0, 0, 3],
            [0, 0, 0],
            [0, 0, 5],
            [0, 1, 2],
            [0, 1, 3],
            [0, 1, 5]
        ]
    );
}

#[test]
fn center_point_boxes() {
    #[rustfmt::skip]
    let boxes = vec![
        0.5, 0.5, 1.0, 1.0,  0.5, 0.6, 1.0, 1.0,  0.5, 0.4, 1.0, 1.0,
        0.5, 10.5, 1.0, 1.0, 0.5, 10.6, 1.0, 1.0, 0.5, 100.5, 1.0, 1.0f32,
    ];
    let scores = vec![0.9, 0.75, 0.6, 0.95, 0.5, 0.3f32];
    let out = run(
        "NonMaxSuppression",
        11,
        &[("center_point_box", int(1))],
        &[
            t(&[1, 6, 4], boxes),
            t(&[1, 1, 6], scores),
            t(&[1], vec![3i64]),
            t(&[1], vec![0.5f32]),
        ],
    )
    .unwrap();
    assert_eq!(rows(&out), vec![[0, 0, 3], [0, 0, 0], [0, 0, 5]]);
}

#[test]
fn absent_max_output_selects_nothing() {
    let (b, sc) = small_inputs();
    let out = run("NonMaxSuppression", 10, &[], &[b, sc]).unwrap();
    assert_eq!(out[0].shape(), &[0, 3]);
}

/// 4 classes × 5000 boxes, enough for the parallel path; expected from ONNX Runtime (and the
/// onnx reference, which agrees) on the same generated inputs.
#[test]
fn many_boxes_match_onnx_runtime() {
    let n = 5000usize;
    let mut boxes = Vec::with_capacity(n * 4);
    for i in 0..n {
        let y1 = ((i * 37) % 1000) as f32 * 0.5;
        let x1 = ((i * 91) % 1000) as f32 * 0.5;
        let h = (5 + (i * 13) % 40) as f32;
        let w = (5 + (i * 17) % 40) as f32;
        boxes.extend_from_slice(&[y1, x1, y1 + h, x1 + w]);
    }
    let mut scores = Vec::with_capacity(4 * n);
    for c in 0..4 {
        scores.extend((0..n).map(|i| ((i * 31 + c * 17) % 997) as f32 / 997.0));
    }
    let out = run(
        "NonMaxSuppression",
        11,
        &[],
        &[
            t(&[1, n, 4], boxes),
            t(&[1, 4, n], scores),
            t(&[1], vec![200i64]),
            t(&[1], vec![0.5f32]),
            t(&[1], vec![0.1f32]),
        ],
    )
    .unwrap();
    let r = rows(&out);
    assert_eq!(r.len(), 800);
    assert_eq!(
        &r[..5],
        &[
            [0, 0, 804],
            [0, 0, 1801],
            [0, 0, 2798],
            [0, 0, 3795],
            [0, 0, 4792]
        ]
    );
    assert_eq!(r[799], [0, 3, 4371]);
    let sums: Vec<i64> = (0..4)
        .map(|c| r.iter().filter(|x| x[1] == c).map(|x| x[2]).sum())
        .collect();
    assert_eq!(sums, vec![499815, 501635, 498470, 505275]);
}

#[test]
fn bad_inputs_are_errors() {
    let (_, sc) = small_inputs();
    let bad_boxes = t(&[1, 6, 3], vec![0.0f32; 18]);
    let err = run(
        "NonMaxSuppression",
        11,
        &[],
        &[bad_boxes, sc.clone(), t(&[1], vec![1i64])],
    );
    assert!(matches!(err, Err(KernelError::Shape(_))), "{err:?}");

    let (b, _) = small_inputs();
    let short_scores = t(&[1, 1, 5], vec![0.0f32; 5]);
    let err = run("NonMaxSuppression", 11, &[], &[b.clone(), short_scores]);
    assert!(matches!(err, Err(KernelError::Shape(_))), "{err:?}");

    let err = run(
        "NonMaxSuppression",
        11,
        &[],
        &[
            b.clone(),
            sc.clone(),
            t(&[1], vec![1i64]),
            t(&[1], vec![1.5f32]),
        ],
    );
    assert!(matches!(err, Err(KernelError::InvalidValue(_))), "{err:?}");

    let f64_boxes = t(&[1, 6, 4], vec![0.0f64; 24]);
    let err = run("NonMaxSuppression", 11, &[], &[f64_boxes, sc]);
    assert!(
        matches!(err, Err(KernelError::UnsupportedDType { index: 0, .. })),
        "{err:?}"
    );

    assert!(matches!(
        build_err("NonMaxSuppression", 11, &[("center_point_box", int(2))]),
        Some(KernelError::BadAttribute { .. })
    ));
    assert!(matches!(
        build_err("NonMaxSuppression", 9, &[]),
        Some(KernelError::UnsupportedOpset { .. })
    ));
}
