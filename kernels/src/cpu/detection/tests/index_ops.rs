//! GatherND, ScatterND, ScatterElements / Scatter and NonZero.

use super::*;

#[test]
fn gather_nd_batch_dims_and_negative_indices() {
    let d = t(&[2, 3, 4], (0..24).map(|v| v as f32).collect());
    let i = t(&[2, 2, 2], vec![1i64, -1, 0, 2, 2, 0, -3, 3]);
    let out = run("GatherND", 13, &[("batch_dims", int(1))], &[d.clone(), i]).unwrap();
    assert_eq!(
        parts::<f32>(&out[0]),
        (vec![2, 2], vec![7.0, 2.0, 20.0, 15.0])
    );
    // Whole-slice gather: rows 1, 0 and -1 (= 1) of the first axis.
    let i = t(&[3, 1], vec![1i64, 0, -1]);
    let out = run("GatherND", 11, &[], &[d, i]).unwrap();
    let (shape, v) = parts::<f32>(&out[0]);
    assert_eq!(shape, vec![3, 3, 4]);
    assert_eq!(v[0], 12.0);
    assert_eq!(v[12], 0.0);
    assert_eq!(v[24..], (12..24).map(|v| v as f32).collect::<Vec<_>>()[..]);
}

#[test]
fn gather_nd_strings_and_int32_indices() {
    let d = t(&[2, 2], ["a", "b", "c", "d"].map(String::from).to_vec());
    let out = run("GatherND", 13, &[], &[d, t(&[2, 2], vec![1i32, 0, 0, 1])]).unwrap();
    assert_eq!(parts::<String>(&out[0]).1, vec!["c", "b"]);
}

#[test]
fn gather_nd_errors() {
    let d = t(&[2, 3], vec![0.0f32; 6]);
    let err = run("GatherND", 13, &[], &[d.clone(), t(&[1, 2], vec![2i64, 0])]);
    assert!(matches!(err, Err(KernelError::InvalidValue(_))), "{err:?}");
    let err = run(
        "GatherND",
        13,
        &[],
        &[d.clone(), t(&[1, 3], vec![0i64, 0, 0])],
    );
    assert!(matches!(err, Err(KernelError::Shape(_))), "{err:?}");
    let err = run(
        "GatherND",
        13,
        &[("batch_dims", int(1))],
        &[d.clone(), t(&[3, 1], vec![0i64; 3])],
    );
    assert!(matches!(err, Err(KernelError::Shape(_))), "{err:?}");
    let err = run("GatherND", 13, &[], &[d, t(&[1, 1], vec![0.0f32])]);
    assert!(
        matches!(err, Err(KernelError::UnsupportedDType { index: 1, .. })),
        "{err:?}"
    );
    assert!(build_err("GatherND", 11, &[("batch_dims", int(1))]).is_some());
}

#[test]
fn scatter_nd_reductions() {
    let data = t(&[3, 4], (0..12).map(|v| v as f32).collect());
    let i = t(&[3, 2], vec![1i64, 2, -2, 2, 0, -1]);
    let u = t(&[3], vec![10.0f32, 20.0, 30.0]);
    let out = run(
        "ScatterND",
        16,
        &[("reduction", s("add"))],
        &[data.clone(), i, u],
    )
    .unwrap();
    let want = [0., 1., 2., 33., 4., 5., 36., 7., 8., 9., 10., 11.];
    assert_eq!(parts::<f32>(&out[0]).1, want);

    let i = t(&[2, 1], vec![2i64, 0]);
    let u = t(
        &[2, 4],
        vec![-1.0f32, 100.0, -1.0, 100.0, 50.0, -50.0, 50.0, -50.0],
    );
    let out = run(
        "ScatterND",
        18,
        &[("reduction", s("max"))],
        &[data.clone(), i.clone(), u.clone()],
    )
    .unwrap();
    let want = [50., 1., 50., 3., 4., 5., 6., 7., 8., 100., 10., 100.];
    assert_eq!(parts::<f32>(&out[0]).1, want);
    // Hand-worked: plain assignment replaces rows 2 and 0.
    let out = run("ScatterND", 11, &[], &[data, i, u]).unwrap();
    let want = [50., -50., 50., -50., 4., 5., 6., 7., -1., 100., -1., 100.];
    assert_eq!(parts::<f32>(&out[0]).1, want);
}

#[test]
fn scatter_nd_errors() {
    let data = t(&[3, 4], vec![0i64; 12]);
    let err = run(
        "ScatterND",
        16,
        &[],
        &[
            data.clone(),
            t(&[1, 1], vec![3i64]),
            t(&[1, 4], vec![0i64; 4]),
        ],
    );
    assert!(matches!(err, Err(KernelError::InvalidValue(_))), "{err:?}");
    let err = run(
        "ScatterND",
        16,
        &[],
        &[
            data.clone(),
            t(&[1, 1], vec![0i64]),
            t(&[1, 3], vec![0i64; 3]),
        ],
    );
    assert!(matches!(err, Err(KernelError::Shape(_))), "{err:?}");
    let err = run(
        "ScatterND",
        16,
        &[],
        &[data, t(&[1, 3], vec![0i64; 3]), t(&[1], vec![0i64])],
    );
    assert!(matches!(err, Err(KernelError::Shape(_))), "{err:?}");
    let b = t(&[2], vec![true, false]);
    let err = run(
        "ScatterND",
        16,
        &[("reduction", s("add"))],
        &[b, t(&[1, 1], vec![0i64]), t(&[1], vec![true])],
    );
    assert!(
        matches!(err, Err(KernelError::UnsupportedDType { index: 0, .. })),
        "{err:?}"
    );
    assert!(matches!(
        build_err("ScatterND", 16, &[("reduction", s("max"))]),
        Some(KernelError::UnsupportedAttribute { .. })
    ));
    assert!(matches!(
        build_err("ScatterND", 13, &[("reduction", s("add"))]),
        Some(KernelError::UnsupportedAttribute { .. })
    ));
}

fn scatter_elements_inputs() -> [Option<Tensor>; 3] {
    [
        t(&[2, 3, 4], (0..24i64).collect()),
        t(&[2, 1, 4], vec![2i64, -1, 0, 1, 0, 0, -3, 2]),
        t(&[2, 1, 4], vec![100i64, -5, 7, 200, -1, 30, 40, 50]),
    ]
}

#[test]
fn scatter_elements_reductions_on_middle_axis() {
    let inputs = scatter_elements_inputs();
    let out = run(
        "ScatterElements",
        18,
        &[("axis", int(1)), ("reduction", s("max"))],
        &inputs,
    )
    .unwrap();
    #[rustfmt::skip]
    let want = [0, 1, 7, 3, 4, 5, 6, 200, 100, 9, 10, 11, 12, 30, 40, 15, 16, 17, 18, 19, 20, 21, 22, 50];
    assert_eq!(parts::<i64>(&out[0]).1, want);
    let out = run(
        "ScatterElements",
        16,
        &[("axis", int(-2)), ("reduction", s("mul"))],
        &inputs,
    )
    .unwrap();
    #[rustfmt::skip]
    let want = [0, 1, 14, 3, 4, 5, 6, 1400, 800, -45, 10, 11, -12, 390, 560, 15, 16, 17, 18, 19, 20, 21, 22, 1150];
    assert_eq!(parts::<i64>(&out[0]).1, want);
}

#[test]
fn scatter_elements_last_axis_and_scatter_alias() {
    let [data, _, _] = scatter_elements_inputs();
    let i = t(&[2, 1, 1], vec![1i32, 0]);
    let u = t(&[2, 1, 1], vec![9i64, 8]);
    let mut want: Vec<i64> = (0..24).collect();
    want[1] = 9;
    want[12] = 8;
    for (op, opset) in [("ScatterElements", 13), ("Scatter", 9)] {
        let out = run(
            op,
            opset,
            &[("axis", int(2))],
            &[data.clone(), i.clone(), u.clone()],
        )
        .unwrap();
        assert_eq!(parts::<i64>(&out[0]).1, want, "{op}");
    }
}

#[test]
fn scatter_elements_errors() {
    let [data, i, u] = scatter_elements_inputs();
    let bad_i = t(&[2, 1, 4], vec![3i64, 0, 0, 0, 0, 0, 0, 0]);
    let err = run(
        "ScatterElements",
        13,
        &[("axis", int(1))],
        &[data.clone(), bad_i, u.clone()],
    );
    assert!(matches!(err, Err(KernelError::InvalidValue(_))), "{err:?}");
    let err = run(
        "ScatterElements",
        13,
        &[("axis", int(1))],
        &[data.clone(), i.clone(), t(&[2, 4], vec![0i64; 8])],
    );
    assert!(matches!(err, Err(KernelError::Shape(_))), "{err:?}");
    let wide = t(&[2, 1, 5], vec![0i64; 10]);
    let err = run(
        "ScatterElements",
        13,
        &[("axis", int(1))],
        &[data.clone(), wide.clone(), wide],
    );
    assert!(matches!(err, Err(KernelError::Shape(_))), "{err:?}");
    let err = run(
        "ScatterElements",
        13,
        &[("axis", int(3))],
        &[data.clone(), i.clone(), u.clone()],
    );
    assert!(
        matches!(err, Err(KernelError::BadAttribute { .. })),
        "{err:?}"
    );
    let err = run(
        "ScatterElements",
        13,
        &[("axis", int(1))],
        &[data, i, t(&[2, 1, 4], vec![0i32; 8])],
    );
    assert!(matches!(err, Err(KernelError::DTypeMismatch(_))), "{err:?}");
    assert!(matches!(
        build_err("Scatter", 11, &[]),
        Some(KernelError::UnsupportedOpset { .. })
    ));
    assert!(matches!(
        build_err("ScatterElements", 13, &[("reduction", s("add"))]),
        Some(KernelError::UnsupportedAttribute { .. })
    ));
    assert!(matches!(
        build_err("Scatter", 9, &[("reduction", s("add"))]),
        Some(KernelError::UnsupportedAttribute { .. })
    ));
}

#[test]
fn nonzero_bool_float_string_scalar() {
    let x = t(&[2, 3], vec![true, false, true, false, false, true]);
    let out = run("NonZero", 13, &[], &[x]).unwrap();
    assert_eq!(parts::<i64>(&out[0]), (vec![2, 3], vec![0, 0, 1, 0, 2, 2]));
    let x = t(&[1, 2, 2], vec![0.0f32, 1.5, -0.0, f32::NAN]);
    let out = run("NonZero", 13, &[], &[x]).unwrap();
    assert_eq!(parts::<i64>(&out[0]), (vec![3, 2], vec![0, 0, 0, 1, 1, 1]));
    // Hand-worked: non-empty strings are non-zero.
    let x = t(&[3], ["", "x", "yz"].map(String::from).to_vec());
    let out = run("NonZero", 9, &[], &[x]).unwrap();
    assert_eq!(parts::<i64>(&out[0]), (vec![1, 2], vec![1, 2]));
    // A scalar is a one-element vector (ONNX Runtime).
    let out = run("NonZero", 13, &[], &[Some(Tensor::scalar(3.0f32))]).unwrap();
    assert_eq!(parts::<i64>(&out[0]), (vec![1, 1], vec![0]));
    let out = run("NonZero", 13, &[], &[Some(Tensor::scalar(0i32))]).unwrap();
    assert_eq!(out[0].shape(), &[1, 0]);
}
