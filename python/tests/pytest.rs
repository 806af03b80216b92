//! Runs the Python package's pytest suite (`python/tests/*.py`) with the project venv, so that
//! `cargo test` covers the `spillway` Python package: onnxruntime's API on onnxruntime and on
//! spillway, whole models against onnxruntime.
//!
//! The package is built and installed into the venv by `scripts/python.sh` (this test runs it
//! with `--debug` when the package is missing); a missing venv or a failed build is a failed
//! test, never a skipped one.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("python/ has a parent")
        .to_path_buf()
}

/// The newest modification time of the files under `dir`.
fn newest(dir: &Path) -> Option<SystemTime> {
    let mut newest = None;
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        let time = if path.is_dir() {
            self::newest(&path)
        } else {
            entry.metadata().ok().and_then(|m| m.modified().ok())
        };
        newest = newest_of(newest, time);
    }
    newest
}

fn newest_of(a: Option<SystemTime>, b: Option<SystemTime>) -> Option<SystemTime> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

#[test]
fn pytest_suite_passes() {
    let root = workspace_root();
    let venv = std::env::var_os("SPILLWAY_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join(".venv"));
    let python = venv.join("bin/python");
    assert!(
        python.exists(),
        "the project venv is missing at {}: run scripts/python.sh",
        venv.display()
    );
    let find_native = || {
        Command::new(&python)
            .args(["-c", "import spillway._spillway as m; print(m.__file__)"])
            .current_dir(&root)
            .output()
            .expect("running the venv's python")
    };
    let mut native = find_native();
    if !native.status.success() {
        // Not installed yet: build and install it (the dev profile; cargo's build lock is
        // free while tests run).
        println!("the spillway Python package is not installed: running scripts/python.sh --debug");
        let built = Command::new(root.join("scripts/python.sh"))
            .arg("--debug")
            .status()
            .expect("running scripts/python.sh");
        assert!(built.success(), "scripts/python.sh --debug failed");
        native = find_native();
    }
    assert!(
        native.status.success(),
        "the spillway Python package is not installed in {}: run scripts/python.sh\n{}",
        venv.display(),
        String::from_utf8_lossy(&native.stderr)
    );
    // A build older than the sources it wraps tests old code: say so (the suite still runs).
    let module = PathBuf::from(String::from_utf8_lossy(&native.stdout).trim());
    let built = std::fs::metadata(&module).and_then(|m| m.modified()).ok();
    let sources = ["python/src", "engine/src", "kernels/src", "placement/src"]
        .iter()
        .fold(None, |t, dir| newest_of(t, newest(&root.join(dir))));
    if let (Some(built), Some(sources)) = (built, sources)
        && sources > built
    {
        println!(
            "warning: {} is older than the Rust sources: run scripts/python.sh to test them",
            module.display()
        );
    }
    let status = Command::new(&python)
        .args([
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "python/tests",
        ])
        .current_dir(&root)
        .status()
        .expect("running pytest");
    assert!(
        status.success(),
        "the pytest suite failed (its output is above)"
    );
}
