//! The packed weights a `Conv` or `ConvTranspose` keeps between runs: the same kernel run with
//! other weights must use those weights (never the cached ones), and running the first weights
//! again must still be right. The reference is a direct convolution by the definition in f64
//! for `Conv`, and the `f64` run (the generic matrix core) for `ConvTranspose`.

use super::values;
use crate::kernel::NodeSpec;
use crate::{AttrValue, Attributes, Tensor};

/// `y[o, i, j] = Σ_{c, u, v} x[c, i·s + u − p, j·s + v − p] · w[o, c, u, v]`, batch 1, one group.
#[allow(clippy::too_many_arguments)]
fn direct(
    x: &[f32],
    w: &[f32],
    ch: usize,
    hw: usize,
    oc: usize,
    k: usize,
    s: usize,
    p: usize,
) -> Vec<f64> {
    let out = (hw + 2 * p - k) / s + 1;
    let mut y = vec![0.0f64; oc * out * out];
    for o in 0..oc {
        for i in 0..out {
            for j in 0..out {
                let mut acc = 0.0f64;
                for c in 0..ch {
                    for u in 0..k {
                        for v in 0..k {
                            let (r, q) =
                                ((i * s + u) as i64 - p as i64, (j * s + v) as i64 - p as i64);
                            if r < 0 || q < 0 || r >= hw as i64 || q >= hw as i64 {
                                continue;
                            }
                            let xv = x[(c * hw + r as usize) * hw + q as usize] as f64;
                            acc += xv * w[((o * ch + c) * k + u) * k + v] as f64;
                        }
                    }
                }
                y[(o * out + i) * out + j] = acc;
            }
        }
    }
    y
}

#[test]
fn other_weights_are_never_answered_from_the_cache() {
    let (ch, hw, oc, k, s, p) = (5, 9, 19, 3, 2, 1);
    let mut attrs = Attributes::new();
    attrs.insert("pads", AttrValue::Ints(vec![1, 1, 1, 1]));
    attrs.insert("strides", AttrValue::Ints(vec![2, 2]));
    let spec = NodeSpec {
        op_type: "Conv",
        domain: "",
        opset: 22,
        attrs: &attrs,
        num_inputs: 2,
        num_outputs: 1,
        options: Default::default(),
    };
    let conv = crate::cpu::build(&spec).unwrap();
    let xs = values(ch * hw * hw, 1);
    let x = Tensor::from_shape_vec(&[1, ch, hw, hw], xs.clone()).unwrap();
    let weights: Vec<Vec<f32>> = (2..5).map(|seed| values(oc * ch * k * k, seed)).collect();
    let tensors: Vec<Tensor> = weights
        .iter()
        .map(|w| Tensor::from_shape_vec(&[oc, ch, k, k], w.clone()).unwrap())
        .collect();
    // First weights twice (packed, then cached), the others, then the first again.
    for &i in &[0usize, 0, 1, 2, 0, 1] {
        let y = conv.run(&[Some(&x), Some(&tensors[i])]).unwrap();
        let want = direct(&xs, &weights[i], ch, hw, oc, k, s, p);
        let got = y[0].view::<f32>().unwrap();
        assert_eq!(got.shape(), &[1, oc, 5, 5]);
        for (g, w) in got.iter().zip(&want) {
            assert!(
                (*g as f64 - w).abs() <= 1e-5 * (1.0 + w.abs()),
                "weights {i}: {g} vs {w}"
            );
        }
    }
}

/// Runs `ConvTranspose` (opset 22) with `attrs` on `x` and `w`.
fn conv_transpose(attrs: &Attributes, x: &Tensor, w: &Tensor) -> Tensor {
    let spec = NodeSpec {
        op_type: "ConvTranspose",
        domain: "",
        opset: 22,
        attrs,
        num_inputs: 2,
        num_outputs: 1,
        options: Default::default(),
    };
    crate::cpu::build(&spec)
        .unwrap()
        .run(&[Some(x), Some(w)])
        .unwrap()
        .remove(0)
}

#[test]
fn conv_transpose_packed_weights_follow_the_weights_given() {
    // (X shape, W shape, attributes): a mask head's 2×2 stride-2 upsampling with a depth past
    // one packed block (300 input channels), and groups with strides and pads.
    let ints = |v: &[i64]| AttrValue::Ints(v.to_vec());
    let cases = [
        (
            vec![2, 300, 4, 4],
            vec![300, 6, 2, 2],
            Attributes::new().with("strides", ints(&[2, 2])),
        ),
        (
            vec![1, 8, 5, 5],
            vec![8, 3, 3, 3],
            Attributes::new()
                .with("group", AttrValue::Int(2))
                .with("strides", ints(&[2, 2]))
                .with("pads", ints(&[1, 1, 1, 1])),
        ),
    ];
    for (xs, ws, attrs) in cases {
        let spec = NodeSpec {
            op_type: "ConvTranspose",
            domain: "",
            opset: 22,
            attrs: &attrs,
            num_inputs: 2,
            num_outputs: 1,
            options: Default::default(),
        };
        // One kernel for every run, as a session keeps it: the packed weights stay with it.
        let kernel = crate::cpu::build(&spec).unwrap();
        let x = Tensor::from_shape_vec(&xs, values(xs.iter().product(), 1)).unwrap();
        let weights: Vec<Tensor> = (2..4)
            .map(|seed| Tensor::from_shape_vec(&ws, values(ws.iter().product(), seed)).unwrap())
            .collect();
        let wide = |t: &Tensor| Tensor::from(t.view::<f32>().unwrap().mapv(f64::from));
        for &i in &[0usize, 0, 1, 0] {
            let got = kernel
                .run(&[Some(&x), Some(&weights[i])])
                .unwrap()
                .remove(0);
            // The f64 run goes through the generic matrix core, not the packed GEMM.
            let want = conv_transpose(&attrs, &wide(&x), &wide(&weights[i]));
            assert_eq!(got.shape(), want.shape());
            let want = want.view::<f64>().unwrap();
            for (g, w) in got.view::<f32>().unwrap().iter().zip(want.iter()) {
                assert!(
                    (*g as f64 - w).abs() <= 1e-5 * (1.0 + w.abs()),
                    "{xs:?} weights {i}: {g} vs {w}"
                );
            }
        }
    }
}
