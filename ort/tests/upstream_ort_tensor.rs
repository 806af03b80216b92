//! The unit tests of the `ort` crate's tensor values (`ort` 2.0.0-rc.15, `src/value/impl_tensor/mod.rs`,
//! MIT OR Apache-2.0: see `tests/data/LICENSE-MIT-ort`), run on Spillway. Adapted only in the
//! imports (`crate::` becomes `ort::`), the `ndarray` feature gates (always on here) and a first
//! line in each test that switches `ort` to Spillway.

use std::sync::Once;

fn setup() {
    static SET: Once = Once::new();
    SET.call_once(|| {
        ort::set_api(spillway_ort::api());
    });
}

mod tests {
    use super::setup;
    use std::sync::Arc;

    use ndarray::{ArcArray1, Array1, CowArray};

    use ort::value::{Shape, SymbolicDimensions, Tensor, TensorElementType};
    use ort::{
        memory::{AllocationDevice, Allocator, AllocatorType, MemoryInfo, MemoryType},
        value::{TensorRef, TensorRefMut, ValueType},
    };

    #[test]
    fn test_tensor_value() -> ort::Result<()> {
        setup();
        let v: Vec<f32> = vec![1., 2., 3., 4., 5.];
        let value = Tensor::from_array(Array1::from_vec(v.clone()))?;
        assert_eq!(
            value.dtype().tensor_type(),
            Some(TensorElementType::Float32)
        );
        assert_eq!(
            value.dtype(),
            &ValueType::Tensor {
                ty: TensorElementType::Float32,
                shape: Shape::new([v.len() as i64]),
                dimension_symbols: SymbolicDimensions::empty(1)
            }
        );

        let (shape, data) = value.extract_tensor();
        assert_eq!(&**shape, [v.len() as i64]);
        assert_eq!(data, &v);

        Ok(())
    }

    #[test]
    fn test_tensor_from_bad_shapes() -> ort::Result<()> {
        setup();
        let v: Vec<f32> = vec![1., 2., 3., 4., 5.];

        assert!(Tensor::from_array((Vec::<i64>::new(), vec![0.0])).is_ok());

        assert!(TensorRef::from_array_view((vec![4i64], &*v)).is_err());
        assert!(TensorRef::from_array_view((vec![67i64], &*v)).is_err());
        assert!(TensorRef::from_array_view((vec![1i64, 5, -1], &*v)).is_err());
        assert!(TensorRef::from_array_view(((), [0.0f32, 1.0].as_slice())).is_err());

        Ok(())
    }

    #[test]
    fn test_tensor_from_raw() -> ort::Result<()> {
        setup();
        let mut v: Vec<f32> = vec![1., 2., 3., 4., 5.];

        let value = unsafe {
            TensorRefMut::<f32>::from_raw(
                MemoryInfo::new(
                    AllocationDevice::CPU,
                    0,
                    AllocatorType::Device,
                    MemoryType::Default,
                )?,
                v.as_mut_ptr().cast(),
                Shape::new(vec![5i64]),
            )?
        };
        assert_eq!(
            value.dtype().tensor_type(),
            Some(TensorElementType::Float32)
        );
        assert_eq!(
            value.dtype(),
            &ValueType::Tensor {
                ty: TensorElementType::Float32,
                shape: Shape::new([v.len() as i64]),
                dimension_symbols: SymbolicDimensions::empty(1)
            }
        );

        let (shape, data) = value.extract_tensor();
        assert_eq!(&**shape, [v.len() as i64]);
        assert_eq!(data, &v);

        assert!(value.try_upgrade().is_err());

        Ok(())
    }

    #[test]
    fn test_empty_tensor() -> ort::Result<()> {
        setup();
        let value = Tensor::<f32>::new(&Allocator::default(), Shape::empty(0))?;
        let _ = value.try_extract_tensor::<f32>()?;

        let value = Tensor::<f32>::new(&Allocator::default(), Shape::empty(4))?;
        let _ = value.try_extract_tensor::<f32>()?;

        let value = Tensor::<f32>::new(&Allocator::default(), Shape::new([1, 0, 512]))?;
        let _ = value.try_extract_tensor::<f32>()?;

        Ok(())
    }

    #[test]
    fn test_tensor_lifetimes() -> ort::Result<()> {
        setup();
        let v: Vec<f32> = vec![1., 2., 3., 4., 5.];

        let arc1 = ArcArray1::from_vec(v.clone());
        let arc2 = ArcArray1::clone(&arc1);
        let value = TensorRef::from_array_view(arc2.clone())?;
        drop((arc1, arc2));

        assert_eq!(value.extract_tensor().1, &v);

        let cow = CowArray::from(Array1::from_vec(v.clone()));
        let value = TensorRef::from_array_view(&cow)?;
        assert_eq!(value.extract_tensor().1, &v);

        Ok(())
    }

    #[test]
    fn test_tensor_raw_lifetimes() -> ort::Result<()> {
        setup();
        let v: Vec<f32> = vec![1., 2., 3., 4., 5.];

        let arc = Arc::new(v.clone().into_boxed_slice());
        let shape = vec![v.len() as i64];
        let value = TensorRef::from_array_view((shape, Arc::clone(&arc)))?;
        drop(arc);
        assert_eq!(value.try_extract_tensor::<f32>()?.1, &v);

        Ok(())
    }

    #[test]
    fn test_string_tensor_ndarray() -> ort::Result<()> {
        setup();
        let v = Array1::from_vec(vec![
            "hello world".to_string(),
            "こんにちは世界".to_string(),
        ]);

        let value = Tensor::from_string_array(v.view())?;
        let extracted = value.try_extract_string_array()?;
        assert_eq!(extracted, v.into_dyn());

        Ok(())
    }

    #[test]
    fn test_string_tensor_raw() -> ort::Result<()> {
        setup();
        let v = vec!["hello world".to_string(), "こんにちは世界".to_string()];

        let value = Tensor::from_string_array((vec![v.len() as i64], &*v))?;
        let (extracted_shape, extracted_view) = value.try_extract_strings()?;
        assert_eq!(&**extracted_shape, [v.len() as i64]);
        assert_eq!(extracted_view, v);

        Ok(())
    }

    #[test]
    fn test_tensor_raw_inputs() -> ort::Result<()> {
        setup();
        let v: Vec<f32> = vec![1., 2., 3., 4., 5.];

        let shape = [v.len()];
        let value_arc_box =
            TensorRef::from_array_view((shape, Arc::new(v.clone().into_boxed_slice())))?;
        let value_box = Tensor::from_array((shape, v.clone().into_boxed_slice()))?;
        let value_vec = Tensor::from_array((shape, v.clone()))?;
        let value_slice = TensorRef::from_array_view((shape, &v[..]))?;

        assert_eq!(value_arc_box.extract_tensor().1, &v);
        assert_eq!(value_box.extract_tensor().1, &v);
        assert_eq!(value_vec.extract_tensor().1, &v);
        assert_eq!(value_slice.extract_tensor().1, &v);

        Ok(())
    }

    #[test]
    fn test_tensor_index() -> ort::Result<()> {
        setup();
        let mut tensor = Tensor::new(&Allocator::default(), Shape::new([1, 3, 224, 224]))?;

        tensor[[0, 2, 42, 42]] = 1.0;
        assert_eq!(tensor[[0, 2, 42, 42]], 1.0);

        for y in 0..224 {
            for x in 0..224 {
                tensor[[0, 1, y, x]] = -1.0;
            }
        }
        assert_eq!(tensor[[0, 1, 0, 0]], -1.0);
        assert_eq!(tensor[[0, 1, 223, 223]], -1.0);

        assert_eq!(tensor[[0, 2, 42, 42]], 1.0);

        Ok(())
    }
}
