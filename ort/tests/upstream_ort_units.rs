//! Unit tests of the `ort` crate (`ort` 2.0.0-rc.15: `src/session/metadata.rs`,
//! `src/value/mod.rs`, `src/value/impl_sequence.rs`, `src/memory.rs`,
//! `src/value/impl_tensor/extract.rs`; MIT OR Apache-2.0, see `tests/data/LICENSE-MIT-ort`), run
//! on Spillway. Adapted only in the imports (`crate::`/`super::` become `ort::`, one `use` block
//! per source file), `test_util::test_env` (an environment on Spillway here), the model path
//! (this crate's copy of `tests/data/upsample.onnx`), and the `cuda` feature gate (ort's `cuda`
//! feature is on for these tests). Two are ignored, with the reason: they fail on Spillway.

use std::sync::OnceLock;

use ort::environment::Environment;

fn test_env() -> &'static Environment {
    static ENV: OnceLock<Environment> = OnceLock::new();
    ENV.get_or_init(|| {
        ort::set_api(spillway_ort::api());
        ort::init()
            .with_name("upstream-units")
            .build()
            .expect("environment")
    })
}

/// From `src/session/metadata.rs`.
mod session_metadata {
    use super::test_env;
    use ort::session::Session;

    #[test]
    fn test_custom_missing_key() -> ort::Result<()> {
        let _ = test_env();
        let session = Session::builder(test_env())?.commit_from_file(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/upsample.onnx"
        ))?;
        assert_eq!(session.metadata()?.custom("does-not-exist"), None);
        Ok(())
    }
}

/// From `src/value/mod.rs`.
mod value_mod {
    use super::test_env;
    use ort::value::{
        DynTensorValueType, Map, Sequence, Tensor, TensorRef, TensorRefMut, TensorValueType,
    };

    #[test]
    fn test_casting_tensor() -> ort::Result<()> {
        let _ = test_env();
        let tensor: Tensor<i32> = Tensor::from_array((vec![5], vec![1, 2, 3, 4, 5]))?;

        let dyn_tensor = tensor.into_dyn();
        let mut tensor: Tensor<i32> = dyn_tensor.downcast()?;

        {
            let dyn_tensor_ref = tensor.view().into_dyn();
            let tensor_ref: TensorRef<i32> = dyn_tensor_ref.downcast()?;
            assert_eq!(tensor_ref.extract_tensor(), tensor.extract_tensor());
        }
        {
            let dyn_tensor_ref = tensor.view().into_dyn();
            let tensor_ref: TensorRef<i32> = dyn_tensor_ref.downcast()?;
            assert_eq!(tensor_ref.extract_tensor(), tensor.extract_tensor());
        }

        // Ensure mutating a TensorRefMut mutates the original tensor.
        {
            let dyn_tensor_ref = tensor.view_mut().into_dyn();
            let mut tensor_ref: TensorRefMut<i32> = dyn_tensor_ref.downcast()?;
            let (_, data) = tensor_ref.extract_tensor_mut();
            data[2] = 42;
        }
        {
            let (_, data) = tensor.extract_tensor_mut();
            assert_eq!(data[2], 42);
        }

        // chain a bunch of up/downcasts
        {
            let tensor = tensor
                .into_dyn()
                .downcast::<DynTensorValueType>()?
                .into_dyn()
                .downcast::<TensorValueType<i32>>()?
                .upcast()
                .into_dyn();
            let tensor = tensor.view();
            let tensor = tensor.downcast::<TensorValueType<i32>>()?;
            let (_, data) = tensor.extract_tensor();
            assert_eq!(data, [1, 2, 42, 4, 5]);
        }

        Ok(())
    }

    #[test]
    #[ignore = "Spillway has no maps: CreateValue answers ORT_NOT_IMPLEMENTED for ONNX_TYPE_MAP"]
    fn test_sequence_map() -> ort::Result<()> {
        let _ = test_env();
        let map_contents = [
            ("meaning".to_owned(), 42.0),
            ("pi".to_owned(), std::f32::consts::PI),
        ];
        let value = Sequence::new([Map::<String, f32>::new(map_contents)?])?;

        for map in value.extract_sequence() {
            let map = map
                .extract_key_values()
                .into_iter()
                .collect::<std::collections::HashMap<_, _>>();
            assert_eq!(map["meaning"], 42.0);
            assert_eq!(map["pi"], std::f32::consts::PI);
        }

        Ok(())
    }
}

/// From `src/value/impl_sequence.rs`.
mod value_impl_sequence {
    use super::test_env;
    use ort::value::{Sequence, Shape, Tensor};

    #[test]
    #[ignore = "`Tensor::clone` copies through an ONNX Runtime `.ort`-format model, which Spillway cannot load"]
    fn test_sequence_basic() -> ort::Result<()> {
        let _ = test_env();
        let _env = test_env();

        let tensor1 = Tensor::from_array((Shape::new([5]), vec![1i32, 2, 3, 4, 5]))?;
        let tensor2 = Tensor::from_array((Shape::new([5]), vec![5i32, 4, 3, 2, 1]))?;
        let tensor3 = Tensor::from_array((Shape::new([5]), vec![10i32, 2, 30, 4, 50]))?;
        let tensors = [tensor1, tensor2, tensor3];

        let seq = Sequence::new(tensors.clone())?;
        assert_eq!(seq.len(), 3);
        assert_eq!(seq.iter().len(), 3);

        for (i, tensor) in seq.iter().enumerate() {
            assert_eq!(tensors[i].extract_tensor(), tensor.extract_tensor());
        }
        let mut iter = Sequence::new(tensors.clone())?.into_iter();
        assert_eq!(iter.len(), 3);
        iter.next();
        assert_eq!(iter.len(), 2);
        assert_eq!(iter.by_ref().count(), 2);
        assert_eq!(iter.len(), 0);

        for (i, tensor) in seq.into_iter().enumerate() {
            assert_eq!(tensors[i].extract_tensor(), tensor.extract_tensor());
        }

        Ok(())
    }
}

/// From `src/memory.rs`.
mod memory {
    use super::test_env;
    use ort::memory::{AllocationDevice, AllocatorType, MemoryInfo, MemoryType};

    #[test]
    fn test_memory_info_eq() -> ort::Result<()> {
        let _ = test_env();
        let a = MemoryInfo::new(
            AllocationDevice::CUDA,
            1,
            AllocatorType::Device,
            MemoryType::Default,
        )?;
        let b = MemoryInfo::new(
            AllocationDevice::CUDA,
            1,
            AllocatorType::Device,
            MemoryType::Default,
        )?;
        assert_eq!(a, b);
        assert_eq!(a.to_owned(), a);
        let c = MemoryInfo::new(
            AllocationDevice::CPU,
            0,
            AllocatorType::Device,
            MemoryType::Default,
        )?;
        assert_ne!(a, c);
        Ok(())
    }

    #[test]
    fn test_cpu_accessible() -> ort::Result<()> {
        let _ = test_env();
        let mem = MemoryInfo::new(
            AllocationDevice::CUDA_PINNED,
            0,
            AllocatorType::Device,
            MemoryType::Default,
        )?;
        assert!(mem.is_cpu_accessible());
        let mem = MemoryInfo::new(
            AllocationDevice::CUDA,
            0,
            AllocatorType::Device,
            MemoryType::Default,
        )?;
        assert!(!mem.is_cpu_accessible());
        let mem = MemoryInfo::new(
            AllocationDevice::CPU,
            0,
            AllocatorType::Device,
            MemoryType::Default,
        )?;
        assert!(mem.is_cpu_accessible());
        Ok(())
    }
}

/// From `src/value/impl_tensor/extract.rs`.
mod value_impl_tensor_extract {
    use super::test_env;
    use ort::{
        memory::Allocator,
        value::{Shape, Tensor},
    };

    #[test]
    fn test_extract_scalar() -> ort::Result<()> {
        let _ = test_env();
        let tensor = Tensor::<f32>::new(&Allocator::default(), Shape::new([2i64]))?;
        assert!(tensor.try_extract_scalar::<f32>().is_err());

        let tensor = Tensor::<f32>::new(&Allocator::default(), Shape::new([1i64]))?;
        assert!(tensor.try_extract_scalar::<f32>().is_ok());
        let tensor = Tensor::<f32>::new(&Allocator::default(), Shape::default())?;
        assert!(tensor.try_extract_scalar::<f32>().is_ok());

        Ok(())
    }

    #[test]
    fn test_bad_extract() -> ort::Result<()> {
        let _ = test_env();
        let tensor = Tensor::<f32>::new(&Allocator::default(), Shape::new([5i64]))?;
        assert!(tensor.try_extract_scalar::<f64>().is_err());
        Ok(())
    }
}
