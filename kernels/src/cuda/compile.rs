//! NVRTC: generated CUDA C to PTX for one GPU architecture. Compiling needs only the NVRTC
//! library, not a GPU, so the tests compile every generated kernel on any machine.

use cudarc::nvrtc::{CompileError, CompileOptions};

use super::codegen::KernelSource;
use super::error::{CudaError, CudaResult};
use super::probe;

/// PTX text for `source`, compiled for compute capability `arch` (e.g. `(9, 0)`).
pub fn compile_ptx(source: &KernelSource, arch: (u32, u32)) -> CudaResult<String> {
    if !probe::nvrtc_present() {
        return Err(probe::CudaUnavailable::MissingLibrary {
            library: "NVRTC",
            file: "libnvrtc.so.13",
        }
        .into());
    }
    let options = CompileOptions {
        options: vec![
            format!("--gpu-architecture=compute_{}{}", arch.0, arch.1),
            "--std=c++17".into(),
        ],
        name: Some(format!("{}.cu", source.key.replace('/', "_"))),
        ..Default::default()
    };
    let ptx = cudarc::nvrtc::compile_ptx_with_opts(&source.source, options).map_err(|e| {
        let log = match &e {
            CompileError::CompileError { log, .. } => log.to_string_lossy().into_owned(),
            other => format!("{other:?}"),
        };
        CudaError::Compile {
            key: source.key.clone(),
            log,
        }
    })?;
    Ok(ptx.to_src())
}
