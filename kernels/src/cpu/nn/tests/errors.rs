//! Bad attributes, ranks, channels and dtypes give typed errors, never panics.

use super::run_op;
use crate::error::KernelError;
use crate::{AttrValue, Attributes, Tensor};

fn t(shape: &[usize]) -> Tensor {
    Tensor::from_shape_vec(shape, vec![1.0f32; shape.iter().product()]).unwrap()
}

fn ints(v: &[i64]) -> AttrValue {
    AttrValue::Ints(v.to_vec())
}

#[test]
fn conv_rejects_bad_shapes_and_attributes() {
    let x = t(&[1, 3, 5, 5]);
    // Channels: W expects 2 input channels, X has 3.
    let r = run_op(
        "Conv",
        22,
        &Attributes::new(),
        &[Some(&x), Some(&t(&[4, 2, 3, 3]))],
        1,
    );
    assert!(matches!(r, Err(KernelError::Shape(_))), "{r:?}");
    // Rank mismatch.
    let r = run_op(
        "Conv",
        22,
        &Attributes::new(),
        &[Some(&x), Some(&t(&[4, 3, 3]))],
        1,
    );
    assert!(matches!(r, Err(KernelError::Shape(_))), "{r:?}");
    // Kernel larger than the padded input.
    let r = run_op(
        "Conv",
        22,
        &Attributes::new(),
        &[Some(&x), Some(&t(&[4, 3, 7, 7]))],
        1,
    );
    assert!(matches!(r, Err(KernelError::Shape(_))), "{r:?}");
    // Bias of the wrong length.
    let r = run_op(
        "Conv",
        22,
        &Attributes::new(),
        &[Some(&x), Some(&t(&[4, 3, 3, 3])), Some(&t(&[3]))],
        1,
    );
    assert!(matches!(r, Err(KernelError::Shape(_))), "{r:?}");
    // Unknown auto_pad, zero group, unknown attribute, strides of the wrong length.
    let a = Attributes::new().with("auto_pad", AttrValue::String("SAME".into()));
    assert!(matches!(
        run_op("Conv", 22, &a, &[Some(&x)], 1),
        Err(KernelError::BadAttribute { .. })
    ));
    let a = Attributes::new().with("group", AttrValue::Int(0));
    assert!(matches!(
        run_op("Conv", 22, &a, &[Some(&x)], 1),
        Err(KernelError::BadAttribute { .. })
    ));
    let a = Attributes::new().with("alpha", AttrValue::Float(1.0));
    assert!(matches!(
        run_op("Conv", 22, &a, &[Some(&x)], 1),
        Err(KernelError::UnsupportedAttribute { .. })
    ));
    let a = Attributes::new().with("strides", ints(&[1]));
    let r = run_op("Conv", 22, &a, &[Some(&x), Some(&t(&[4, 3, 3, 3]))], 1);
    assert!(matches!(r, Err(KernelError::BadAttribute { .. })), "{r:?}");
    // Mixed dtypes and integer input.
    let w64 = Tensor::from_shape_vec(&[4, 3, 3, 3], vec![0.0f64; 108]).unwrap();
    let r = run_op("Conv", 22, &Attributes::new(), &[Some(&x), Some(&w64)], 1);
    assert!(matches!(r, Err(KernelError::DTypeMismatch(_))), "{r:?}");
    let xi = Tensor::from_shape_vec(&[1, 1, 2, 2], vec![1i32; 4]).unwrap();
    let r = run_op("Conv", 22, &Attributes::new(), &[Some(&xi), Some(&xi)], 1);
    assert!(
        matches!(r, Err(KernelError::UnsupportedDType { .. })),
        "{r:?}"
    );
}

#[test]
fn conv_transpose_rejects_bad_shapes() {
    let x = t(&[1, 2, 3, 3]);
    let r = run_op(
        "ConvTranspose",
        22,
        &Attributes::new(),
        &[Some(&x), Some(&t(&[3, 1, 2, 2]))],
        1,
    );
    assert!(matches!(r, Err(KernelError::Shape(_))), "{r:?}");
    let a = Attributes::new().with("pads", ints(&[3, 3, 3, 3]));
    let r = run_op(
        "ConvTranspose",
        22,
        &a,
        &[Some(&x), Some(&t(&[2, 1, 2, 2]))],
        1,
    );
    assert!(matches!(r, Err(KernelError::Shape(_))), "{r:?}");
    let a = Attributes::new().with("output_padding", ints(&[-1, 0]));
    assert!(matches!(
        run_op("ConvTranspose", 22, &a, &[Some(&x)], 1),
        Err(KernelError::BadAttribute { .. })
    ));
    // An output past the tensor limit is a resource error before anything is allocated (it
    // was a "capacity overflow" panic: graph_gen's campaign), whether the size comes from
    // `output_shape` or from the strides; pads past i64 are a bad attribute.
    let w = t(&[2, 1, 2, 2]);
    let huge = 1i64 << 40;
    let a = Attributes::new().with("output_shape", ints(&[huge, huge]));
    let r = run_op("ConvTranspose", 22, &a, &[Some(&x), Some(&w)], 1);
    assert!(matches!(r, Err(KernelError::ResourceLimit(_))), "{r:?}");
    let a = Attributes::new().with("strides", ints(&[huge, huge]));
    let r = run_op("ConvTranspose", 22, &a, &[Some(&x), Some(&w)], 1);
    assert!(matches!(r, Err(KernelError::ResourceLimit(_))), "{r:?}");
    let a = Attributes::new()
        .with("strides", ints(&[huge, huge]))
        .with("auto_pad", AttrValue::String("SAME_UPPER".into()));
    let r = run_op("ConvTranspose", 22, &a, &[Some(&x), Some(&w)], 1);
    assert!(matches!(r, Err(KernelError::ResourceLimit(_))), "{r:?}");
    let a = Attributes::new().with("pads", ints(&[i64::MAX, 0, i64::MAX, 0]));
    let r = run_op("ConvTranspose", 22, &a, &[Some(&x), Some(&w)], 1);
    assert!(
        matches!(
            r,
            Err(KernelError::BadAttribute { .. } | KernelError::Shape(_))
        ),
        "{r:?}"
    );
}

#[test]
fn gemm_and_matmul_reject_mismatched_dims() {
    let r = run_op(
        "Gemm",
        13,
        &Attributes::new(),
        &[Some(&t(&[2, 3])), Some(&t(&[2, 3]))],
        1,
    );
    assert!(matches!(r, Err(KernelError::Shape(_))), "{r:?}");
    let r = run_op(
        "Gemm",
        13,
        &Attributes::new(),
        &[Some(&t(&[2, 3])), Some(&t(&[3, 4])), Some(&t(&[3]))],
        1,
    );
    assert!(matches!(r, Err(KernelError::Shape(_))), "{r:?}");
    let r = run_op(
        "Gemm",
        13,
        &Attributes::new(),
        &[Some(&t(&[2, 3, 1])), Some(&t(&[3, 4]))],
        1,
    );
    assert!(matches!(r, Err(KernelError::Shape(_))), "{r:?}");
    // C is required before opset 11.
    let r = run_op(
        "Gemm",
        9,
        &Attributes::new(),
        &[Some(&t(&[2, 3])), Some(&t(&[3, 4]))],
        1,
    );
    assert!(matches!(r, Err(KernelError::Arity(_))), "{r:?}");
    let a = Attributes::new().with("transA", AttrValue::Int(2));
    assert!(matches!(
        run_op("Gemm", 13, &a, &[], 1),
        Err(KernelError::BadAttribute { .. })
    ));
    // A non-integral alpha for an integer Gemm is refused rather than truncated.
    let i = Tensor::from_shape_vec(&[1, 1], vec![2i64]).unwrap();
    let a = Attributes::new().with("alpha", AttrValue::Float(0.5));
    assert!(matches!(
        run_op("Gemm", 13, &a, &[Some(&i), Some(&i)], 1),
        Err(KernelError::UnsupportedAttribute { .. })
    ));

    let r = run_op(
        "MatMul",
        13,
        &Attributes::new(),
        &[Some(&t(&[2, 3])), Some(&t(&[4, 2]))],
        1,
    );
    assert!(matches!(r, Err(KernelError::Shape(_))), "{r:?}");
    let r = run_op(
        "MatMul",
        13,
        &Attributes::new(),
        &[Some(&t(&[2, 2, 3])), Some(&t(&[3, 3, 2]))],
        1,
    );
    assert!(matches!(r, Err(KernelError::Shape(_))), "{r:?}");
    let s = Tensor::scalar(1.0f32);
    let r = run_op("MatMul", 13, &Attributes::new(), &[Some(&s), Some(&s)], 1);
    assert!(matches!(r, Err(KernelError::Shape(_))), "{r:?}");
    let b = Tensor::from_shape_vec(&[2, 2], vec![true; 4]).unwrap();
    let r = run_op("MatMul", 13, &Attributes::new(), &[Some(&b), Some(&b)], 1);
    assert!(
        matches!(r, Err(KernelError::UnsupportedDType { .. })),
        "{r:?}"
    );
}

#[test]
fn pools_and_norms_reject_bad_input() {
    let x = t(&[1, 2, 4, 4]);
    // kernel_shape is required; dilations do not exist for AveragePool before opset 19.
    assert!(matches!(
        run_op("MaxPool", 22, &Attributes::new(), &[Some(&x)], 1),
        Err(KernelError::BadAttribute { .. })
    ));
    let a = Attributes::new()
        .with("kernel_shape", ints(&[2, 2]))
        .with("dilations", ints(&[2, 2]));
    assert!(matches!(
        run_op("AveragePool", 11, &a, &[Some(&x)], 1),
        Err(KernelError::UnsupportedAttribute { .. })
    ));
    let a = Attributes::new().with("kernel_shape", ints(&[2, 2]));
    let r = run_op("MaxPool", 22, &a, &[Some(&t(&[4, 4]))], 1);
    assert!(matches!(r, Err(KernelError::Shape(_))), "{r:?}");
    let a = Attributes::new().with("kernel_shape", ints(&[2]));
    let r = run_op("AveragePool", 22, &a, &[Some(&x)], 1);
    assert!(matches!(r, Err(KernelError::BadAttribute { .. })), "{r:?}");
    let s = Tensor::from_shape_vec(&[1, 1, 2, 2], vec!["a".to_string(); 4]).unwrap();
    let a = Attributes::new().with("kernel_shape", ints(&[2, 2]));
    let r = run_op("MaxPool", 22, &a, &[Some(&s)], 1);
    assert!(
        matches!(r, Err(KernelError::UnsupportedDType { .. })),
        "{r:?}"
    );

    // BatchNormalization: channel count mismatch, spatial = 0.
    let c3 = t(&[3]);
    let r = run_op(
        "BatchNormalization",
        15,
        &Attributes::new(),
        &[Some(&x), Some(&c3), Some(&c3), Some(&c3), Some(&c3)],
        1,
    );
    assert!(matches!(r, Err(KernelError::Shape(_))), "{r:?}");
    let a = Attributes::new().with("spatial", AttrValue::Int(0));
    assert!(matches!(
        run_op("BatchNormalization", 7, &a, &[], 1),
        Err(KernelError::UnsupportedAttribute { .. })
    ));
    // Training statistics: at most five outputs before opset 14, three from it.
    let c2 = t(&[2]);
    let params = [Some(&x), Some(&c2), Some(&c2), Some(&c2), Some(&c2)];
    let r = run_op("BatchNormalization", 9, &Attributes::new(), &params, 6);
    assert!(matches!(r, Err(KernelError::Arity(_))), "{r:?}");
    let training = Attributes::new().with("training_mode", AttrValue::Int(1));
    let r = run_op("BatchNormalization", 15, &training, &params, 5);
    assert!(matches!(r, Err(KernelError::Arity(_))), "{r:?}");
    let r = run_op("BatchNormalization", 15, &Attributes::new(), &params, 3);
    assert!(
        matches!(r, Err(KernelError::UnsupportedAttribute { .. })),
        "{r:?}"
    );
    // stash_type 0 (UNDEFINED) is read as float without Mean/InvStdDev outputs, as ORT reads
    // it, and refused with them (the type they would have); an integer type is refused.
    for (stash, outputs, ok) in [(0, 1, true), (0, 3, false), (1, 3, true), (7, 1, false)] {
        let a = Attributes::new().with("stash_type", AttrValue::Int(stash));
        let r = run_op(
            "LayerNormalization",
            17,
            &a,
            &[Some(&x), Some(&t(&[4]))],
            outputs,
        );
        assert_eq!(
            r.is_ok(),
            ok,
            "stash_type {stash}, {outputs} outputs: {r:?}"
        );
    }
    // LayerNormalization: axis out of range, Scale that does not broadcast.
    let a = Attributes::new().with("axis", AttrValue::Int(4));
    let r = run_op("LayerNormalization", 17, &a, &[Some(&x), Some(&t(&[4]))], 1);
    assert!(matches!(r, Err(KernelError::BadAttribute { .. })), "{r:?}");
    let r = run_op(
        "LayerNormalization",
        17,
        &Attributes::new(),
        &[Some(&x), Some(&t(&[3]))],
        1,
    );
    assert!(matches!(r, Err(KernelError::Shape(_))), "{r:?}");
    // LRN needs a positive size.
    let a = Attributes::new().with("size", AttrValue::Int(0));
    assert!(matches!(
        run_op("LRN", 13, &a, &[Some(&x)], 1),
        Err(KernelError::BadAttribute { .. })
    ));
}

#[test]
fn einsum_rejects_bad_equations() {
    let m = t(&[2, 3]);
    let eq = |s: &str| Attributes::new().with("equation", AttrValue::String(s.into()));
    assert!(matches!(
        run_op("Einsum", 12, &eq("ij,jk->ik"), &[Some(&m)], 1),
        Err(KernelError::Arity(_))
    ));
    assert!(matches!(
        run_op("Einsum", 12, &eq("i1->i"), &[Some(&m)], 1),
        Err(KernelError::BadAttribute { .. })
    ));
    assert!(matches!(
        run_op("Einsum", 12, &eq("ijk->i"), &[Some(&m)], 1),
        Err(KernelError::Shape(_))
    ));
    assert!(matches!(
        run_op("Einsum", 12, &eq("ij->iz"), &[Some(&m)], 1),
        Err(KernelError::BadAttribute { .. })
    ));
    let r = run_op(
        "Einsum",
        12,
        &eq("ij,ij->i"),
        &[Some(&m), Some(&t(&[2, 4]))],
        1,
    );
    assert!(matches!(r, Err(KernelError::Shape(_))), "{r:?}");
}
