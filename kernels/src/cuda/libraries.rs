//! Finding the CUDA libraries at run time.
//!
//! cudarc opens each library by its soname (`libcuda.so.1`, `libnvrtc.so.13`, `libcublas.so.13`,
//! `libcudnn.so.9`, ...), so the dynamic loader finds them on `LD_LIBRARY_PATH` and in the system
//! directories. On machines where cuDNN, cuBLAS and NVRTC come as Python wheels
//! (`site-packages/nvidia/*/lib`), list those directories in `SPILLWAY_CUDA_LIB_PATH`
//! (colon-separated): every CUDA library found there is opened once with `RTLD_GLOBAL` (from the
//! first directory that has it), and the loader then resolves the later open by soname to the
//! library already loaded.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use libloading::os::unix::{Library, RTLD_GLOBAL, RTLD_NOW};

/// The environment variable naming extra library directories.
pub const LIB_PATH_VAR: &str = crate::knobs::CUDA_LIB_PATH.name;

/// File-name prefixes of the libraries the backend uses (cuDNN 9 opens its sub-libraries
/// `libcudnn_*.so.9` itself, so those are preloaded too).
const PREFIXES: [&str; 5] = [
    "libcuda.so",
    "libnvrtc",
    "libcublas",
    "libcudnn",
    "libcudart",
];

/// The libraries preloaded from [`LIB_PATH_VAR`]; kept open for the life of the process.
static PRELOADED: OnceLock<Vec<PathBuf>> = OnceLock::new();

/// Opens every CUDA library in the directories of [`LIB_PATH_VAR`] (once per process) and
/// returns the paths that were loaded. Files that fail to open are skipped: the probe that
/// follows reports what is still missing.
pub fn preload() -> &'static [PathBuf] {
    PRELOADED.get_or_init(|| {
        let Some(dirs) = crate::knobs::cuda_lib_path() else {
            return Vec::new();
        };
        let mut loaded: Vec<PathBuf> = Vec::new();
        for dir in std::env::split_paths(&dirs) {
            for path in candidates(&dir) {
                // The first directory that has a library wins: a second copy (another cuDNN
                // install on the path, say) mixes versions, which cuDNN 9 refuses with
                // CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH.
                if loaded.iter().any(|p| p.file_name() == path.file_name()) {
                    continue;
                }
                // SAFETY: opening a library runs its initializers; these are NVIDIA's CUDA
                // libraries, which the backend is about to open anyway.
                if let Ok(lib) = unsafe { Library::open(Some(&path), RTLD_NOW | RTLD_GLOBAL) } {
                    std::mem::forget(lib);
                    loaded.push(path);
                }
            }
        }
        loaded
    })
}

/// The CUDA library files in `dir`, in an order that opens dependencies first (the base
/// libraries before cuDNN's sub-libraries, which link against them).
fn candidates(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.contains(".so") && PREFIXES.iter().any(|pre| n.starts_with(pre)))
        })
        .collect();
    files.sort_by_key(|p| {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        (name.starts_with("libcudnn_"), name.to_string())
    });
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_keep_cuda_libraries_base_first() {
        let dir = std::env::temp_dir().join(format!("spillway-libs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for name in [
            "libcudnn_cnn.so.9",
            "libcudnn.so.9",
            "libnvrtc.so.13",
            "libz.so.1",
            "README",
        ] {
            std::fs::write(dir.join(name), b"").unwrap();
        }
        let names: Vec<String> = candidates(&dir)
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(
            names,
            ["libcudnn.so.9", "libnvrtc.so.13", "libcudnn_cnn.so.9"]
        );
    }
}
