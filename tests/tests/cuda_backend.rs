//! The CUDA backend on whatever machine runs the tests: the probe never panics, names what
//! is missing, and a session asked for a GPU it cannot use fails with that reason (or falls
//! back to the CPU when allowed). The GPU kernels themselves are checked against the CPU
//! kernels on a GPU machine by `gpu_check`, and this file's tests run there too
//! (`scripts/gpu_run.sh` carries the test binary).
#![cfg(feature = "cuda")]

use spillway::{Devices, Placement, Session, Tensor};
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

/// Every output of `got` within 1e-4 of `want`'s, relative to its largest magnitude (at least 1).
fn assert_close(got: &[Tensor], want: &[Tensor], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (g, w) in got.iter().zip(want) {
        assert_eq!(g.shape(), w.shape(), "{what}");
        let (g, w) = (g.to_f64_vec().unwrap(), w.to_f64_vec().unwrap());
        let scale = w.iter().fold(0f64, |m, x| m.max(x.abs()));
        // NaN against NaN is equal, NaN against a number infinitely far (`f64::max` would
        // drop the NaN).
        let worst = g
            .iter()
            .zip(&w)
            .fold(0f64, |m, (a, b)| match (a.is_nan(), b.is_nan()) {
                (true, true) => m,
                (false, false) => m.max((a - b).abs()),
                _ => f64::INFINITY,
            });
        assert!(worst <= 1e-4 * scale.max(1.0), "{what}: {worst}");
    }
}

/// Without a GPU: checks that `session` fails with `DeviceUnavailable` and returns true.
fn unavailable_without_gpu(session: impl FnOnce() -> spillway::Result<Session>) -> bool {
    if probe().is_ok() {
        return false;
    }
    let err = session().unwrap_err();
    assert!(
        matches!(err, spillway::Error::DeviceUnavailable { .. }),
        "{err}"
    );
    spillway_kernels::testing::skipped("no CUDA GPU: checked the typed error only");
    true
}

/// With a GPU: a session on it matches the CPU session on the bundled model for every stream
/// policy, also from several threads at once; an input of another shape is a typed error and
/// the session stays usable. Without one: creating the session is a typed error.
#[test]
fn gpu_sessions_match_the_cpu_session() {
    let model = workspace_root().join("models/small/inception_block.onnx");
    let gpu_session = |policy| {
        Session::builder()
            .with_devices(Devices::cpu().with_cuda(0, 3))
            .with_placement(policy)
            .commit_from_file(&model)
    };
    if unavailable_without_gpu(|| gpu_session(Placement::Auto)) {
        return;
    }
    let cpu = Session::builder().commit_from_file(&model).unwrap();
    let name = cpu.inputs()[0].name.clone();
    let input = |seed| spillway_tests::seeded_f32(&[1, 3, 64, 64], seed);
    let want = |seed| {
        cpu.run([(name.as_str(), input(seed))])
            .unwrap()
            .into_tensors()
    };
    for policy in [
        Placement::Sequential,
        Placement::Lios,
        Placement::Opara,
        Placement::Greedy,
        Placement::Auto,
    ] {
        let session = gpu_session(policy).unwrap();
        let report = session.placement_report().unwrap();
        assert!(report.nodes.iter().all(|n| n.2 == "cuda0"), "{report}");
        let close =
            |got: Vec<Tensor>, want: Vec<Tensor>| assert_close(&got, &want, &format!("{policy:?}"));
        std::thread::scope(|scope| {
            for t in 0..3u64 {
                let (session, name) = (&session, &name);
                scope.spawn(move || {
                    for r in 0..3 {
                        let seed = 11 + (t + r) % 3;
                        let got = session.run([(name.as_str(), input(seed))]).unwrap();
                        close(got.into_tensors(), want(seed));
                    }
                });
            }
        });
        let wrong = spillway_tests::seeded_f32(&[2, 3, 64, 64], 5);
        let err = session.run([(name.as_str(), wrong)]).unwrap_err();
        assert!(matches!(err, spillway::Error::InputShape { .. }), "{err}");
        let got = session.run([(name.as_str(), input(12))]).unwrap();
        close(got.into_tensors(), want(12));
    }
}

/// With a GPU: a model whose second half has data-dependent shapes (`NonZero`) runs split
/// between the CPU and the GPU under GPU first, `CommSd` and `Auto`, matches the CPU session on
/// other data from several threads, and stays usable after a wrong shape and a failing node.
/// Without one: creating the session is a typed error.
#[test]
fn split_sessions_match_the_cpu_session() {
    use spillway::Value;
    let bytes = spillway_tests::fixtures::split_model();
    let gpu_session = |policy| {
        Session::builder()
            .with_devices(Devices::cpu().with_cuda(0, 2))
            .with_placement(policy)
            .commit_from_memory(&bytes)
    };
    if unavailable_without_gpu(|| gpu_session(Placement::Auto)) {
        return;
    }
    let cpu = Session::builder()
        .with_optimization(spillway::OptimizationLevel::Basic)
        .commit_from_memory(&bytes)
        .unwrap();
    let inputs = |seed: u64, idx: [i64; 2]| {
        vec![
            (
                "x",
                Value::Tensor(spillway_tests::seeded_f32(&[1, 4, 6, 6], seed)),
            ),
            (
                "idx",
                Value::Tensor(Tensor::from_shape_vec(&[2], idx.to_vec()).unwrap()),
            ),
        ]
    };
    let close = |got: spillway::SessionOutputs, want: spillway::SessionOutputs| {
        assert_close(&got.into_tensors(), &want.into_tensors(), "split")
    };
    for policy in [Placement::Sequential, Placement::CommSd, Placement::Auto] {
        let session = gpu_session(policy).unwrap();
        let report = session.placement_report().unwrap();
        let on = |op: &str| report.nodes.iter().find(|n| n.1 == op).unwrap().2.clone();
        assert_eq!(on("NonZero"), "cpu", "{report}");
        if policy == Placement::Sequential {
            assert_eq!(on("Conv"), "cuda0", "{report}");
            // `picked` passes from the first GPU segment to the last over NonZero's.
            assert!(report.kept_on_gpu >= Some(1), "{report}");
        }
        std::thread::scope(|scope| {
            for t in 0..3u64 {
                let (session, cpu) = (&session, &cpu);
                scope.spawn(move || {
                    for r in 0..3u64 {
                        let seed = 20 + t * 3 + r;
                        let idx = [(seed * 7 % 288) as i64, (seed * 13 % 288) as i64];
                        let got = session.run_values(inputs(seed, idx)).unwrap();
                        close(got, cpu.run_values(inputs(seed, idx)).unwrap());
                    }
                });
            }
        });
        let mut wrong = inputs(5, [0, 1]);
        wrong[0].1 = Value::Tensor(spillway_tests::seeded_f32(&[1, 4, 7, 7], 5));
        let err = session.run_values(wrong).unwrap_err();
        assert!(matches!(err, spillway::Error::InputShape { .. }), "{err}");
        let err = session.run_values(inputs(6, [0, 288])).unwrap_err();
        assert!(matches!(err, spillway::Error::Kernel { .. }), "{err}");
        close(
            session.run_values(inputs(7, [10, 20])).unwrap(),
            cpu.run_values(inputs(7, [10, 20])).unwrap(),
        );
    }
}
