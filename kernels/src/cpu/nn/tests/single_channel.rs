//! Convolutions of one input channel: short filters run the direct depthwise kernel, long ones
//! (an STFT written as a 1-d convolution) the packed GEMM; both against the definition in f64.

use crate::cpu::binary::test_util::run1;
use crate::test_values::uniform as seeded;
use crate::{AttrValue, Tensor};

#[test]
fn one_channel_1d_convolutions_match_the_definition() {
    // (filters, taps, stride, length): an STFT (257 filters of 512 taps, hop 160) and a short
    // filter bank that stays on the direct kernel.
    for (filters, taps, stride, length) in [(257, 512, 160, 1280), (16, 9, 2, 100), (8, 64, 1, 200)]
    {
        let x = seeded(length, 3);
        let w = seeded(filters * taps, 5);
        let b = seeded(filters, 7);
        let out = (length - taps) / stride + 1;
        let y = run1(
            "Conv",
            11,
            &[("strides", AttrValue::Ints(vec![stride as i64]))],
            &[
                &Tensor::from_shape_vec(&[1, 1, length], x.clone()).unwrap(),
                &Tensor::from_shape_vec(&[filters, 1, taps], w.clone()).unwrap(),
                &Tensor::from_shape_vec(&[filters], b.clone()).unwrap(),
            ],
        )
        .unwrap();
        assert_eq!(y.shape(), &[1, filters, out]);
        let got = y.to_f64_vec().unwrap();
        for f in 0..filters {
            for i in 0..out {
                let want = b[f] as f64
                    + (0..taps)
                        .map(|t| x[i * stride + t] as f64 * w[f * taps + t] as f64)
                        .sum::<f64>();
                let g = got[f * out + i];
                assert!(
                    (g - want).abs() <= 1e-4 * (1.0 + want.abs()),
                    "{filters}x{taps} stride {stride}: y[{f}, {i}] = {g}, want {want}"
                );
            }
        }
    }
}
