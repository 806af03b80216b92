//! Every CPU kernel fed the low-precision types: a typed error or a result, never a panic;
//! arithmetic kernels refuse them with `UnsupportedDType`.

use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::error::KernelError;
use crate::kernel::NodeSpec;
use crate::low_precision::from_codes;
use crate::{Attributes, DType, Tensor};

const LOW: [DType; 10] = [
    DType::F8E4M3Fn,
    DType::F8E4M3FnUz,
    DType::F8E5M2,
    DType::F8E5M2FnUz,
    DType::F8E8M0,
    DType::F4E2M1,
    DType::I4,
    DType::U4,
    DType::I2,
    DType::U2,
];

fn low_tensor(dtype: DType) -> Tensor {
    from_codes(dtype, &[2, 3], vec![0, 1, 2, 3, 0x7F, 0x80]).unwrap()
}

fn spec<'a>(op_type: &'a str, attrs: &'a Attributes, num_inputs: usize) -> NodeSpec<'a> {
    NodeSpec {
        op_type,
        domain: "",
        opset: 21,
        attrs,
        num_inputs,
        num_outputs: 1,
        options: Default::default(),
    }
}

#[test]
fn no_kernel_panics_on_low_precision_inputs() {
    let attrs = Attributes::new();
    for op in super::supported_ops() {
        for n in 1..=3 {
            let Ok(kernel) = super::build(&spec(op, &attrs, n)) else {
                continue;
            };
            for dtype in LOW {
                let x = low_tensor(dtype);
                let inputs: Vec<Option<&Tensor>> = vec![Some(&x); n];
                let outcome = catch_unwind(AssertUnwindSafe(|| kernel.run(&inputs)));
                assert!(outcome.is_ok(), "{op} with {n} {dtype} inputs panicked");
            }
        }
    }
}

#[test]
fn arithmetic_kernels_refuse_low_precision_types() {
    let attrs = Attributes::new();
    let ops = [
        ("Add", 2),
        ("Mul", 2),
        ("Relu", 1),
        ("Sqrt", 1),
        ("Abs", 1),
        ("MatMul", 2),
        ("Softmax", 1),
        ("ReduceSum", 1),
        ("Equal", 2),
        ("Less", 2),
        ("NonZero", 1),
        ("Trilu", 1),
        ("Sum", 2),
    ];
    for (op, n) in ops {
        let kernel = super::build(&spec(op, &attrs, n)).unwrap();
        for dtype in LOW {
            let x = low_tensor(dtype);
            let inputs: Vec<Option<&Tensor>> = vec![Some(&x); n];
            match kernel.run(&inputs) {
                Err(KernelError::UnsupportedDType { dtype: d, .. }) => assert_eq!(d, dtype),
                other => panic!("{op} on {dtype}: expected UnsupportedDType, got {other:?}"),
            }
        }
    }
}

#[test]
fn data_movement_kernels_carry_low_precision_types() {
    let attrs = Attributes::new().with("perm", crate::AttrValue::Ints(vec![1, 0]));
    let kernel = super::build(&spec("Transpose", &attrs, 1)).unwrap();
    let x = from_codes(DType::I4, &[2, 3], vec![1, 2, 3, 4, 5, 6]).unwrap();
    let y = kernel.run(&[Some(&x)]).unwrap().remove(0);
    assert_eq!(y.dtype(), DType::I4);
    assert_eq!(y.shape(), [3, 2]);
    assert_eq!(
        crate::low_precision::values(&y).unwrap(),
        [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]
    );
    let attrs = Attributes::new();
    let kernel = super::build(&spec("Identity", &attrs, 1)).unwrap();
    let x = low_tensor(DType::F8E5M2);
    assert_eq!(kernel.run(&[Some(&x)]).unwrap()[0], x);
}
