//! The value operators on their own: positions, defaults, attributes, and the errors the spec
//! asks for. Expected values are worked by hand from the ONNX spec.

use spillway_kernels::{DType, KernelError, Tensor};

use super::ValueOp;
use crate::graph::ValueType;
use crate::value::{Sequence, Value};

fn t(shape: &[usize], data: &[f32]) -> Tensor {
    Tensor::from_shape_vec(shape, data.to_vec()).unwrap()
}

fn seq(parts: &[Tensor]) -> Value {
    Value::Sequence(Sequence::new(DType::F32, parts.to_vec()).unwrap())
}

fn run(op: &ValueOp, args: &[Option<&Value>]) -> Result<Value, KernelError> {
    op.run(args).map(|mut v| v.remove(0))
}

fn i64s(v: &[i64]) -> Value {
    Value::Tensor(Tensor::from_shape_vec(&[v.len()], v.to_vec()).unwrap())
}

#[test]
fn split_to_sequence_default_scalar_and_list_splits() {
    // x = [[0, 1, 2], [3, 4, 5]], split along axis 1.
    let x = Value::Tensor(t(&[2, 3], &[0., 1., 2., 3., 4., 5.]));
    let split = |keepdims| ValueOp::SplitToSequence { axis: -1, keepdims };
    // No split: three [2, 1] columns, or [2] with keepdims = 0.
    let kept = run(&split(true), &[Some(&x)]).unwrap();
    assert_eq!(
        kept,
        seq(&[
            t(&[2, 1], &[0., 3.]),
            t(&[2, 1], &[1., 4.]),
            t(&[2, 1], &[2., 5.])
        ])
    );
    let squeezed = run(&split(false), &[Some(&x)]).unwrap();
    assert_eq!(
        squeezed,
        seq(&[t(&[2], &[0., 3.]), t(&[2], &[1., 4.]), t(&[2], &[2., 5.])])
    );
    // A scalar split of 2: a [2, 2] part and a shorter [2, 1] one; keepdims is ignored.
    let two = Value::Tensor(Tensor::scalar(2i64));
    assert_eq!(
        run(&split(false), &[Some(&x), Some(&two)]).unwrap(),
        seq(&[t(&[2, 2], &[0., 1., 3., 4.]), t(&[2, 1], &[2., 5.])])
    );
    // A list split [1, 2].
    assert_eq!(
        run(&split(true), &[Some(&x), Some(&i64s(&[1, 2]))]).unwrap(),
        seq(&[t(&[2, 1], &[0., 3.]), t(&[2, 2], &[1., 2., 4., 5.])])
    );
    // Lengths that do not add up, a non-positive scalar, an axis out of range.
    for bad in [i64s(&[1, 1]), Value::Tensor(Tensor::scalar(0i64))] {
        assert!(matches!(
            run(&split(true), &[Some(&x), Some(&bad)]),
            Err(KernelError::InvalidValue(_))
        ));
    }
    let far = ValueOp::SplitToSequence {
        axis: 2,
        keepdims: true,
    };
    assert!(matches!(
        run(&far, &[Some(&x)]),
        Err(KernelError::InvalidValue(_))
    ));
    // A float split is not an index type.
    let f = Value::Tensor(Tensor::scalar(1.0f32));
    assert!(matches!(
        run(&split(true), &[Some(&x), Some(&f)]),
        Err(KernelError::UnsupportedDType { index: 1, .. })
    ));
}

#[test]
fn erase_defaults_to_the_last_and_rejects_an_empty_sequence() {
    let s = seq(&[t(&[1], &[1.]), t(&[1], &[2.])]);
    let erased = run(&ValueOp::SequenceErase, &[Some(&s)]).unwrap();
    assert_eq!(erased, seq(&[t(&[1], &[1.])]));
    let empty = Value::Sequence(Sequence::empty(DType::F32));
    assert!(matches!(
        run(&ValueOp::SequenceErase, &[Some(&empty)]),
        Err(KernelError::InvalidValue(_))
    ));
    // Insert with no position appends; into an empty sequence of another type is an error.
    let x = Value::Tensor(t(&[1], &[3.]));
    assert_eq!(
        run(&ValueOp::SequenceInsert, &[Some(&s), Some(&x)]).unwrap(),
        seq(&[t(&[1], &[1.]), t(&[1], &[2.]), t(&[1], &[3.])])
    );
    let ints = Value::Sequence(Sequence::empty(DType::I64));
    assert!(matches!(
        run(&ValueOp::SequenceInsert, &[Some(&ints), Some(&x)]),
        Err(KernelError::DTypeMismatch(_))
    ));
}

#[test]
fn concat_from_sequence_axes() {
    // Two [2] tensors: concat → [4]; stack on axis 0 → [2, 2]; stack on axis -1 → [2, 2]
    // transposed.
    let s = seq(&[t(&[2], &[1., 2.]), t(&[2], &[3., 4.])]);
    let op = |axis, new_axis| ValueOp::ConcatFromSequence { axis, new_axis };
    assert_eq!(
        run(&op(0, false), &[Some(&s)]).unwrap(),
        Value::Tensor(t(&[4], &[1., 2., 3., 4.]))
    );
    assert_eq!(
        run(&op(0, true), &[Some(&s)]).unwrap(),
        Value::Tensor(t(&[2, 2], &[1., 2., 3., 4.]))
    );
    assert_eq!(
        run(&op(-1, true), &[Some(&s)]).unwrap(),
        Value::Tensor(t(&[2, 2], &[1., 3., 2., 4.]))
    );
    // Without new_axis the axis range is [-1, 0]; with it, [-2, 1].
    assert!(run(&op(1, false), &[Some(&s)]).is_err());
    assert!(run(&op(-2, true), &[Some(&s)]).is_ok());
    assert!(run(&op(2, true), &[Some(&s)]).is_err());
    // A tensor where a sequence is expected.
    let x = Value::Tensor(t(&[1], &[0.]));
    assert!(matches!(
        run(&op(0, false), &[Some(&x)]),
        Err(KernelError::ValueKind { index: 0, .. })
    ));
}

#[test]
fn optionals() {
    let x = Value::Tensor(t(&[1], &[1.]));
    let wrap = ValueOp::Optional { declared: None };
    let some = run(&wrap, &[Some(&x)]).unwrap();
    assert_eq!(some, Value::some(x.clone()));
    // The type attribute must agree with the input.
    let ints = ValueOp::Optional {
        declared: Some(ValueType::Tensor {
            dtype: Some(DType::I64),
            shape: None,
        }),
    };
    assert!(matches!(
        run(&ints, &[Some(&x)]),
        Err(KernelError::DTypeMismatch(_))
    ));
    assert_eq!(run(&ints, &[None]).unwrap(), Value::none());
    // Optionals do not nest.
    assert!(run(&wrap, &[Some(&some)]).is_err());

    let has15 = ValueOp::OptionalHasElement {
        accepts_plain: false,
    };
    let has18 = ValueOp::OptionalHasElement {
        accepts_plain: true,
    };
    let yes = Value::Tensor(Tensor::scalar(true));
    let no = Value::Tensor(Tensor::scalar(false));
    assert_eq!(run(&has15, &[Some(&some)]).unwrap(), yes);
    assert_eq!(run(&has15, &[Some(&Value::none())]).unwrap(), no);
    assert!(matches!(
        run(&has15, &[Some(&x)]),
        Err(KernelError::ValueKind { .. })
    ));
    assert_eq!(run(&has18, &[Some(&x)]).unwrap(), yes);
    assert_eq!(run(&has18, &[None]).unwrap(), no);

    let get18 = ValueOp::OptionalGetElement {
        accepts_plain: true,
    };
    assert_eq!(run(&get18, &[Some(&some)]).unwrap(), x);
    assert_eq!(run(&get18, &[Some(&x)]).unwrap(), x);
    assert!(matches!(
        run(&get18, &[Some(&Value::none())]),
        Err(KernelError::InvalidValue(_))
    ));
}
