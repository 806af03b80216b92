//! Every generated CUDA kernel compiles with NVRTC 13 for the reference GPU's architecture
//! (sm_90, H100/H200). NVRTC comes from the project venv (`scripts/venv.sh` installs the
//! `nvidia-cuda-nvrtc` wheel); no GPU is needed.
#![cfg(feature = "cuda")]

use std::path::PathBuf;

use spillway_kernels::cuda::codegen::{ENTRY, catalogue};
use spillway_kernels::cuda::{compile::compile_ptx, libraries};

/// The venv's NVRTC directory (`SPILLWAY_VENV`, else `<workspace>/.venv`).
fn venv_nvrtc_dir() -> PathBuf {
    let venv = std::env::var_os("SPILLWAY_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.venv"));
    let lib = venv.join("lib");
    let python = std::fs::read_dir(&lib)
        .unwrap_or_else(|e| panic!("{}: {e}; run scripts/venv.sh", lib.display()))
        .filter_map(|e| e.ok())
        .find(|e| e.file_name().to_string_lossy().starts_with("python"))
        .expect("no python directory in the venv; run scripts/venv.sh");
    python.path().join("site-packages/nvidia/cu13/lib")
}

#[test]
fn every_generated_kernel_compiles_for_sm90() {
    if std::env::var_os(libraries::LIB_PATH_VAR).is_none() {
        // SAFETY: the only test in this binary; nothing else reads the environment yet.
        unsafe { std::env::set_var(libraries::LIB_PATH_VAR, venv_nvrtc_dir()) };
    }
    let kernels = catalogue();
    let mut failures = Vec::new();
    for kernel in &kernels {
        match compile_ptx(kernel, (9, 0)) {
            Ok(ptx) => {
                assert!(
                    ptx.contains(&format!(".entry {ENTRY}")),
                    "{}: PTX has no entry {ENTRY}",
                    kernel.key
                );
                assert!(
                    ptx.contains(".target sm_90"),
                    "{}: wrong target",
                    kernel.key
                );
            }
            Err(e) => failures.push(format!("{e}\n--- source ---\n{}", kernel.source)),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} kernels failed:\n{}",
        failures.len(),
        kernels.len(),
        failures.join("\n")
    );
    println!("{} kernels compiled for sm_90", kernels.len());
}
