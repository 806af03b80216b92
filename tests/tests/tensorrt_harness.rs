//! The TensorRT comparison script (`scripts/tensorrt_bench.py`): TensorRT cannot be installed
//! on these machines, so what is tested is that it says so in one line and exits 0, and that it
//! rejects a malformed argument.

use std::process::Command;

use spillway_tests::{venv, workspace_root};

fn run_script(args: &[&str]) -> std::process::Output {
    Command::new(venv().join("bin/python"))
        .arg(workspace_root().join("scripts/tensorrt_bench.py"))
        .args(args)
        .current_dir(workspace_root())
        .output()
        .expect("the venv's python runs")
}

#[test]
fn without_tensorrt_the_script_says_so_and_exits_zero() {
    let out = run_script(&["models/small/inception_block.onnx"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "exit {:?}: {stdout}", out.status);
    let has_trtexec = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("trtexec").exists()));
    if has_trtexec {
        // A machine with TensorRT gets a JSON line with the latency instead.
        assert!(stdout.contains("median_ms"), "{stdout}");
    } else {
        assert_eq!(
            stdout.trim(),
            "TensorRT is not installed (no `tensorrt` Python package, no `trtexec` on PATH): skipped."
        );
        spillway_kernels::testing::skipped("TensorRT is not installed: checked the message only");
    }
}

#[test]
fn a_malformed_shape_is_refused() {
    let out = run_script(&["models/small/inception_block.onnx", "--shape", "image"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--shape wants NAME=D0xD1x..."));
}
