//! RoiAlign tests. The expected values are the reference outputs printed as f64, kept verbatim.
#![allow(clippy::excessive_precision)]

use super::*;
use half::f16;

/// X = (arange(168) * 0.37 % 5) as f32, shape [2, 2, 6, 7]; four rois, one partly outside the
/// map and one smaller than a pixel.
fn inputs() -> [Option<Tensor>; 3] {
    let x: Vec<f32> = (0..168).map(|i| (i as f32 * 0.37) % 5.0).collect();
    #[rustfmt::skip]
    let rois = vec![0.5, 1.0, 9.0, 7.0,  2.0, 2.5, 4.0, 3.0,  -3.0, -2.0, 20.0, 15.0,  1.0, 1.0, 1.2, 1.1f32];
    [
        t(&[2, 2, 6, 7], x),
        t(&[4, 4], rois),
        t(&[4], vec![1i64, 0, 1, 0]),
    ]
}

fn run_roi(opset: i64, attrs: &[(&str, AttrValue)], inputs: &[Option<Tensor>]) -> Vec<f32> {
    let out = run("RoiAlign", opset, attrs, inputs).unwrap();
    assert_eq!(out[0].shape(), &[4, 2, 3, 2]);
    parts::<f32>(&out[0]).1
}

fn x_check(got: &[f32], want: &[f32]) {
    assert_close(got, want, 1e-5);
}

#[test]
fn avg_half_pixel_adaptive_sampling() {
    let got = run_roi(
        16,
        &[
            ("output_height", int(3)),
            ("output_width", int(2)),
            ("spatial_scale", AttrValue::Float(0.5)),
        ],
        &inputs(),
    );
    #[rustfmt::skip]
    let want = [
        2.675625801086426, 2.923680067062378, 2.7656261920928955, 3.0136802196502686, 2.855626344680786, 3.103680372238159,
        3.215625762939453, 2.196319818496704, 3.3056259155273438, 2.2863194942474365, 2.9615981578826904, 1.6818751096725464,
        2.3279168605804443, 2.5129165649414062, 2.543750047683716, 2.728749990463257, 2.7595834732055664, 2.9445834159851074,
        2.8679168224334717, 3.052917003631592, 3.0837502479553223, 3.2687501907348633, 3.2995834350585938, 3.4845833778381348,
        1.456220269203186, 0.6479167938232422, 2.332489490509033, 1.093611240386963, 1.6830593347549438, 0.4555095434188843,
        1.5070563554763794, 0.8279170989990234, 2.1153719425201416, 1.3636112213134766, 1.508844256401062, 0.6355096101760864,
        0.030833343043923378, 0.049333348870277405, 0.07400002330541611, 0.09250002354383469, 0.11716671288013458, 0.13566669821739197,
        0.5708333253860474, 0.5893332958221436, 0.6140000820159912, 0.6324999928474426, 0.6571666598320007, 0.6756666302680969f32,
    ];
    x_check(&got, &want);
}

#[test]
fn max_mode_is_max_of_weighted_corners() {
    let got = run_roi(
        16,
        &[
            ("coordinate_transformation_mode", s("output_half_pixel")),
            ("mode", s("max")),
            ("output_height", int(3)),
            ("output_width", int(2)),
            ("sampling_ratio", int(2)),
            ("spatial_scale", AttrValue::Float(0.5)),
        ],
        &inputs(),
    );
    #[rustfmt::skip]
    let want = [
        2.790703058242798, 3.2489054203033447, 1.265625, 1.9907824993133545, 2.904609441757202, 3.3712494373321533,
        3.13242244720459, 0.7943747043609619, 1.607344388961792, 2.3831241130828857, 2.7890636920928955, 0.8379685282707214,
        1.7266666889190674, 1.9424998760223389, 0.8633331656455994, 0.9712497591972351, 0.48125016689300537, 0.8050000667572021,
        2.0416665077209473, 2.257500410079956, 1.020833134651184, 1.128749966621399, 0.9537501335144043, 1.277500867843628,
        3.398280382156372, 2.268749475479126, 2.182915687561035, 2.4114060401916504, 4.029998779296875, 0.859375,
        3.683749198913574, 2.640000104904175, 2.406015396118164, 2.7671878337860107, 4.569999694824219, 1.2306256294250488,
        1.9424999952316284, 1.9424999952316284, 2.37416672706604, 2.37416672706604, 1.9424996376037598, 1.9424996376037598,
        2.296875, 2.296875, 2.8072917461395264, 2.8072917461395264, 2.296874523162842, 2.296874523162842f32,
    ];
    x_check(&got, &want);
}

/// Opset 10 has no coordinate_transformation_mode and behaves as `output_half_pixel`. Expected
/// from ONNX Runtime (the onnx reference evaluator wrongly applies half_pixel at opset 10).
#[test]
fn opset_10_is_output_half_pixel() {
    let got = run_roi(
        10,
        &[
            ("output_height", int(3)),
            ("output_width", int(2)),
            ("sampling_ratio", int(3)),
            ("spatial_scale", AttrValue::Float(0.7)),
        ],
        &inputs(),
    );
    #[rustfmt::skip]
    let want = [
        3.274763822555542, 1.7636319398880005, 3.5674307346343994, 1.7428724765777588, 2.683091163635254, 2.3207242488861084,
        3.0470175743103027, 2.137737274169922, 2.201876163482666, 2.09706974029541, 2.465376377105713, 2.834181070327759,
        1.0746296644210815, 1.3336296081542969, 1.475000262260437, 1.7340000867843628, 2.338334083557129, 2.5973339080810547,
        1.6146302223205566, 1.8736299276351929, 2.015000581741333, 2.274000644683838, 2.8783345222473145, 3.1373343467712402,
        2.148716688156128, 0.0, 2.9141736030578613, 0.0, 0.0, 0.0,
        2.688716411590576, 0.0, 2.2608091831207275, 0.0, 0.0, 0.0,
        2.5961663722991943, 2.7811667919158936, 2.459500312805176, 2.6445000171661377, 1.656166672706604, 1.8411668539047241,
        3.136166572570801, 3.3211669921875, 2.999500036239624, 3.1845006942749023, 2.196166753768921, 2.381167411804199f32,
    ];
    x_check(&got, &want);
    // The attribute does not exist at opset 10.
    assert!(matches!(
        build_err(
            "RoiAlign",
            10,
            &[("coordinate_transformation_mode", s("half_pixel"))]
        ),
        Some(KernelError::UnsupportedAttribute { .. })
    ));
}

/// Bins of many samples (adaptive grids up to 23×9 and a 5×5 grid): no tap merging.
#[test]
fn large_sample_grids() {
    #[rustfmt::skip]
    let cases: [(i64, [f32; 16]); 2] = [
        (0, [2.857917547225952, 1.0268003940582275, 2.3854174613952637, 1.350800633430481,
             1.567500114440918, 1.9375, 2.1075010299682617, 2.4774999618530273,
             0.7553595900535583, 0.0, 0.7971161603927612, 0.0,
             1.6280001401901245, 1.665000081062317, 2.1680002212524414, 2.205000162124634]),
        (5, [2.870551109313965, 1.0060802698135376, 2.3895504474639893, 1.330080509185791,
             1.5674999952316284, 1.9375, 2.1075010299682617, 2.4775002002716064,
             1.1461601257324219, 0.0, 1.1353602409362793, 0.0,
             1.628000020980835, 1.665000319480896, 2.1680002212524414, 2.205000400543213]),
    ];
    for (ratio, want) in cases {
        let out = run(
            "RoiAlign",
            16,
            &[("output_width", int(2)), ("sampling_ratio", int(ratio))],
            &inputs(),
        )
        .unwrap();
        assert_eq!(out[0].shape(), &[4, 2, 1, 2]);
        x_check(&parts::<f32>(&out[0]).1, &want);
    }
}

/// Same as the first case in float16: computed in f32, rounded once.
#[test]
fn float16_follows_float32() {
    let [x, rois, b] = inputs();
    let to16 = |t: &Tensor| {
        let (shape, v) = parts::<f32>(t);
        Tensor::from_shape_vec(&shape, v.into_iter().map(f16::from_f32).collect()).unwrap()
    };
    let out = run(
        "RoiAlign",
        22,
        &[
            ("output_height", int(3)),
            ("output_width", int(2)),
            ("spatial_scale", AttrValue::Float(0.5)),
        ],
        &[
            Some(to16(x.as_ref().unwrap())),
            Some(to16(rois.as_ref().unwrap())),
            b,
        ],
    )
    .unwrap();
    let got: Vec<f32> = parts::<f16>(&out[0]).1.iter().map(|v| v.to_f32()).collect();
    // Spot values of avg_half_pixel_adaptive_sampling at half precision.
    assert_close(&got[..2], &[2.675625801086426, 2.923680067062378], 2e-3);
    assert_close(&got[47..], &[0.6756666302680969], 2e-3);
}

fn feature(n: usize, c: usize) -> Vec<f32> {
    (0..n * c * 400)
        .map(|i| ((i * 7919) % 1000) as f32 / 100.0)
        .collect()
}

fn generated_rois(r: usize) -> (Vec<f32>, Vec<i64>) {
    let mut rois = Vec::new();
    for i in 0..r {
        let x1 = ((i * 37) % 15) as f32 * 0.9;
        let y1 = ((i * 53) % 15) as f32 * 0.8;
        let x2 = x1 + 2.0 + ((i * 11) % 9) as f32;
        let y2 = y1 + 1.5 + ((i * 7) % 10) as f32;
        rois.extend_from_slice(&[x1, y1, x2, y2]);
    }
    (rois, (0..r as i64).map(|i| i % 2).collect())
}

/// 40 rois × 64 channels × 7×7 (parallel over rois); spot values from ONNX Runtime.
#[test]
fn many_rois_match_onnx_runtime() {
    let (rois, b) = generated_rois(40);
    let out = run(
        "RoiAlign",
        16,
        &[
            ("output_height", int(7)),
            ("output_width", int(7)),
            ("spatial_scale", AttrValue::Float(0.75)),
        ],
        &[
            t(&[2, 64, 20, 20], feature(2, 64)),
            t(&[40, 4], rois),
            t(&[40], b),
        ],
    )
    .unwrap();
    let (shape, y) = parts::<f32>(&out[0]);
    assert_eq!(shape, vec![40, 64, 7, 7]);
    let spots: Vec<f32> = [0, 777, 12345, 50000, 99999, 125439]
        .iter()
        .map(|&p| y[p])
        .collect();
    assert_close(
        &spots,
        &[
            0.0,
            2.0696427822113037,
            7.236289024353027,
            6.300536155700684,
            5.442499160766602,
            3.780963182449341,
        ],
        1e-5,
    );
    let sum: f64 = y.iter().map(|&v| f64::from(v)).sum();
    assert!((sum - 628540.7665421814).abs() < 1.0, "sum {sum}");
}

/// One roi × 512 channels in max mode (parallel over channels); spot values from ONNX Runtime.
#[test]
fn one_roi_many_channels_match_onnx_runtime() {
    let (rois, _) = generated_rois(1);
    let out = run(
        "RoiAlign",
        16,
        &[
            ("coordinate_transformation_mode", s("output_half_pixel")),
            ("mode", s("max")),
            ("output_height", int(7)),
            ("output_width", int(7)),
            ("sampling_ratio", int(2)),
            ("spatial_scale", AttrValue::Float(0.75)),
        ],
        &[
            t(&[1, 512, 20, 20], feature(1, 512)),
            t(&[1, 4], rois),
            t(&[1], vec![0i64]),
        ],
    )
    .unwrap();
    let (_, y) = parts::<f32>(&out[0]);
    let spots = [y[0], y[4321], y[y.len() - 1]];
    assert_close(
        &spots,
        &[1.4176218509674072, 3.385788679122925, 5.913304328918457],
        1e-5,
    );
    let sum: f64 = y.iter().map(|&v| f64::from(v)).sum();
    assert!((sum - 89602.84208357334).abs() < 0.5, "sum {sum}");
}

#[test]
fn bad_inputs_are_errors() {
    let [x, rois, _] = inputs();
    let attrs = [("output_height", int(2))];
    let err = run(
        "RoiAlign",
        16,
        &attrs,
        &[x.clone(), rois.clone(), t(&[4], vec![0i64, 1, 2, 0])],
    );
    assert!(matches!(err, Err(KernelError::InvalidValue(_))), "{err:?}");
    let err = run(
        "RoiAlign",
        16,
        &attrs,
        &[x.clone(), rois.clone(), t(&[4], vec![0i64, -1, 0, 0])],
    );
    assert!(matches!(err, Err(KernelError::InvalidValue(_))), "{err:?}");
    let err = run(
        "RoiAlign",
        16,
        &attrs,
        &[
            x.clone(),
            t(&[2, 5], vec![0.0f32; 10]),
            t(&[2], vec![0i64; 2]),
        ],
    );
    assert!(matches!(err, Err(KernelError::Shape(_))), "{err:?}");
    let err = run(
        "RoiAlign",
        16,
        &attrs,
        &[x.clone(), rois.clone(), t(&[3], vec![0i64; 3])],
    );
    assert!(matches!(err, Err(KernelError::Shape(_))), "{err:?}");
    let err = run(
        "RoiAlign",
        16,
        &attrs,
        &[
            t(&[2, 6, 7], vec![0.0f32; 84]),
            rois.clone(),
            t(&[4], vec![0i64; 4]),
        ],
    );
    assert!(matches!(err, Err(KernelError::Shape(_))), "{err:?}");
    let err = run(
        "RoiAlign",
        16,
        &attrs,
        &[x, t(&[4, 4], vec![0.0f64; 16]), t(&[4], vec![0i64; 4])],
    );
    assert!(matches!(err, Err(KernelError::DTypeMismatch(_))), "{err:?}");
    // Infinite rois with adaptive sampling would need an unbounded sample table.
    let [x, _, _] = inputs();
    let err = run(
        "RoiAlign",
        16,
        &attrs,
        &[
            x,
            t(&[1, 4], vec![0.0, 0.0, f32::INFINITY, 1.0]),
            t(&[1], vec![0i64]),
        ],
    );
    assert!(matches!(err, Err(KernelError::InvalidValue(_))), "{err:?}");
    assert!(matches!(
        build_err("RoiAlign", 16, &[("mode", s("median"))]),
        Some(KernelError::UnsupportedAttribute { .. })
    ));
    assert!(matches!(
        build_err("RoiAlign", 16, &[("output_width", int(0))]),
        Some(KernelError::BadAttribute { .. })
    ));
}
