//! Runs the Python package's pytest suite (`python/tests/*.py`) inside this test binary, so
//! that `cargo test` covers the `spillway` Python package: onnxruntime's API on onnxruntime and
//! on spillway, whole models against onnxruntime.
//!
//! The native module is the one this build compiled (the `spillway_python` library, linked into
//! this binary), not a separately built wheel: the test embeds the Python interpreter that pyo3
//! was built against, registers the module as `spillway._spillway`, puts `python/` (the
//! package's Python sources) and the project venv's site-packages (numpy, onnx, onnxruntime,
//! pytest, from `scripts/venv.sh`) on `sys.path`, and calls `pytest.main`. So the suite always
//! tests the current sources, and the test build is the only build. A missing venv, a venv of
//! another Python version or a failing test is a failed test, never a skipped one.

use std::path::{Path, PathBuf};

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyModule};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("python/ has a parent")
        .to_path_buf()
}

/// Puts the package's sources and the venv's site-packages first on `sys.path` (the venv's
/// `.pth` files processed, as its own interpreter would), and fails when the venv was made by
/// another Python version than the one embedded here.
const BOOTSTRAP: &std::ffi::CStr = c"
import os, site, sys
version = f'python{sys.version_info[0]}.{sys.version_info[1]}'
packages = f'{venv}/lib/{version}/site-packages'
if not os.path.isdir(packages):
    found = sorted(os.listdir(f'{venv}/lib')) if os.path.isdir(f'{venv}/lib') else []
    raise RuntimeError(
        f'the venv {venv} has no {version} site-packages (it has {found}): the embedded '
        f'interpreter is {sys.version.split()[0]}; recreate the venv with that Python '
        '(scripts/venv.sh) or build pyo3 against the venv\\'s (PYO3_PYTHON)')
before = list(sys.path)
site.addsitedir(packages)
added = [p for p in sys.path if p not in before]
sys.path[:] = [sources] + added + before
";

#[test]
fn pytest_suite_passes() {
    let root = workspace_root();
    let venv = std::env::var_os("SPILLWAY_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join(".venv"));
    assert!(
        venv.join("bin/python").exists(),
        "the project venv is missing at {}: run scripts/venv.sh",
        venv.display()
    );
    // pytest's paths (conftest, expected_failures.txt) are relative to the workspace root.
    std::env::set_current_dir(&root).expect("entering the workspace root");
    Python::initialize();
    let exit_code = Python::attach(|py| -> PyResult<i32> {
        let globals = PyDict::new(py);
        globals.set_item("venv", venv.to_string_lossy())?;
        globals.set_item("sources", root.join("python").to_string_lossy())?;
        py.run(BOOTSTRAP, Some(&globals), None)?;
        let native = pyo3::wrap_pymodule!(spillway_python::spillway_native)(py);
        py.import("sys")?
            .getattr("modules")?
            .set_item("spillway._spillway", native)?;
        let spillway = py.import("spillway")?;
        let package = spillway.getattr("__file__")?.extract::<String>()?;
        assert!(
            Path::new(&package).starts_with(root.join("python")),
            "`import spillway` found {package}, not the sources under python/"
        );
        let pytest: Bound<'_, PyModule> = py.import("pytest")?;
        let args = vec!["-q", "-p", "no:cacheprovider", "python/tests"];
        pytest.call_method1("main", (args,))?.extract()
    });
    let exit_code = exit_code.unwrap_or_else(|e| {
        Python::attach(|py| e.print(py));
        panic!("the pytest suite could not start: {e}")
    });
    assert_eq!(
        exit_code, 0,
        "the pytest suite failed with exit code {exit_code} (its output is above)"
    );
}
