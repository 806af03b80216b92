use super::rearrange::slice_start;
use super::*;

fn ints(values: &[i64]) -> Vec<Element> {
    values.iter().map(|&v| Element::Int(v)).collect()
}

#[test]
fn slice_counts_follow_the_onnx_clamping_rules() {
    // Forward, with an end past the axis.
    assert_eq!(slice_count(1, 100, 2, 6), Some(3)); // 1, 3, 5
    // Backward over the whole axis, as PyTorch writes `flip` (end = -INT64_MAX).
    assert_eq!(slice_count(-1, -i64::MAX, -1, 3), Some(3)); // 2, 1, 0
    assert_eq!(slice_start(-1, -1, 3), 2);
    // Backward from past the end, by two.
    assert_eq!(slice_count(10, 0, -2, 5), Some(2)); // 4, 2
    // Empty when the bounds cross, and on an empty axis.
    assert_eq!(slice_count(4, 2, 1, 6), Some(0));
    assert_eq!(slice_count(0, 4, -1, 6), Some(0));
    assert_eq!(slice_count(-1, -i64::MAX, -1, 0), Some(0));
    assert_eq!(slice_count(0, 1, 0, 3), None, "a zero step is an error");
    // Steps at i64's limits (rounding up overflowed i64; found by the graph_gen fuzzer).
    assert_eq!(slice_count(0, 5, i64::MAX, 5), Some(1));
    assert_eq!(slice_count(4, -i64::MAX, i64::MIN, 5), Some(1));
}

#[test]
fn broadcasting_repeats_size_one_axes_and_aligns_from_the_right() {
    // [2, 1] against [3]: element (i, j) of [2, 3] reads (i, 0).
    let picks: Vec<usize> = (0..6)
        .map(|at| broadcast_index(at, &[2, 3], &[2, 1]))
        .collect();
    assert_eq!(picks, [0, 0, 0, 1, 1, 1]);
    let picks: Vec<usize> = (0..6)
        .map(|at| broadcast_index(at, &[2, 3], &[3]))
        .collect();
    assert_eq!(picks, [0, 1, 2, 0, 1, 2]);
    let a = Partial::new(vec![2, 1], ints(&[1, 2])).unwrap();
    let b = Partial::new(vec![3], ints(&[10, 20, 30])).unwrap();
    assert_eq!(broadcast_shape(&[&a, &b]), Some(vec![2, 3]));
    let c = Partial::new(vec![2], ints(&[1, 2])).unwrap();
    assert_eq!(broadcast_shape(&[&b, &c]), None, "3 against 2");
}

#[test]
fn arithmetic_is_exact_or_unknown() {
    use Element::{Int, Symbol, Unknown};
    let n = || Symbol("n".into());
    assert_eq!(arithmetic("Sub", &[Int(3), Int(3)], DType::I64), Int(0));
    assert_eq!(arithmetic("Div", &[Int(480), Int(32)], DType::F32), Int(15));
    // 481 / 32 is no integer, in floats or as C's truncation: unknown.
    assert_eq!(arithmetic("Div", &[Int(481), Int(32)], DType::F32), Unknown);
    assert_eq!(arithmetic("Div", &[Int(481), Int(32)], DType::I64), Unknown);
    assert_eq!(
        arithmetic("Mul", &[Int(1 << 20), Int(1 << 20)], DType::I32),
        Unknown
    );
    assert_eq!(arithmetic("Add", &[Int(1), Unknown], DType::I64), Unknown);
    // A symbol is one size.
    assert_eq!(arithmetic("Sub", &[n(), n()], DType::I64), Int(0));
    assert_eq!(arithmetic("Max", &[n(), n()], DType::I64), n());
    assert_eq!(arithmetic("Mul", &[Int(1), n()], DType::I64), n());
    assert_eq!(
        arithmetic("Sub", &[n(), Symbol("m".into())], DType::I64),
        Unknown
    );
    assert_eq!(arithmetic("Where", &[Int(0), Int(5), n()], DType::I64), n());
    assert_eq!(cast(Int(300), DType::U8), Unknown, "no wrap-around");
    assert_eq!(cast(Int(2), DType::Bool), Int(1));
    assert_eq!(cast(n(), DType::F32), Unknown);
}

#[test]
fn constants_are_known_where_they_hold_integers() {
    let t = Tensor::from_shape_vec(&[3], vec![2.0f32, 2.5, -4.0]).unwrap();
    assert_eq!(
        of_tensor(&t).unwrap().elements,
        [Element::Int(2), Element::Unknown, Element::Int(-4)]
    );
    let big = Tensor::from_shape_vec(&[MAX_ELEMENTS + 1], vec![0i64; MAX_ELEMENTS + 1]).unwrap();
    assert_eq!(of_tensor(&big), None, "too large to track");
}
