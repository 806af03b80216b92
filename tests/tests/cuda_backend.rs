//! The CUDA backend on whatever machine runs the tests: the probe never panics, names what
//! is missing, and a session asked for a GPU it cannot use fails with that reason (or falls
//! back to the CPU when allowed). The GPU kernels themselves are checked against the CPU
//! kernels on a GPU machine by `gpu_check` (`scripts/gpu_run.sh`).
#![cfg(feature = "cuda")]

use spillway::{Devices, Session};
use spillway_kernels::cuda::{CudaError, CudaUnavailable, Gpu, GpuOptions, probe};
use spillway_tests::workspace_root;

#[test]
fn probe_lists_gpus_or_names_the_missing_piece() {
    match probe() {
        Ok(system) => {
            assert!(!system.gpus.is_empty());
            for gpu in &system.gpus {
                assert!(gpu.compute_capability.0 >= 5, "{gpu:?}");
                assert!(gpu.total_memory > 0 && gpu.multiprocessors > 0, "{gpu:?}");
            }
            let missing = system.gpu(system.gpus.len() as u32).unwrap_err();
            assert!(
                matches!(missing, CudaUnavailable::NoSuchDevice { .. }),
                "{missing}"
            );
        }
        Err(reason) => {
            let text = reason.to_string();
            let named = match &reason {
                CudaUnavailable::NoDriver => text.contains("libcuda.so.1"),
                CudaUnavailable::MissingLibrary { file, .. } => text.contains(file),
                _ => !text.is_empty(),
            };
            assert!(named, "{text}");
        }
    }
}

#[test]
fn opening_a_gpu_without_cuda_is_a_typed_error() {
    let Err(reason) = probe() else {
        // A GPU machine: opening must work.
        let gpu = Gpu::open(0, 2, GpuOptions::default()).unwrap();
        assert_eq!(gpu.num_streams(), 2);
        return;
    };
    let err = Gpu::open(0, 2, GpuOptions::default()).unwrap_err();
    assert_eq!(err, CudaError::Unavailable(reason.clone()));
    let model = workspace_root().join("models/small/inception_block.onnx");
    let err = Session::builder()
        .with_devices(Devices::cpu().with_cuda(0, 2))
        .commit_from_file(&model)
        .unwrap_err();
    assert!(
        err.to_string().contains(&reason.to_string()),
        "the session error does not carry the probe's reason: {err}"
    );
}
