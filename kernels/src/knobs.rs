//! Every environment variable Spillway reads, in one place.
//!
//! What a session computes is chosen by typed options (`SessionBuilder` in the `spillway`
//! crate, [`KernelOptions`](crate::options::KernelOptions) here), never by the environment.
//! The variables left are deployment paths and diagnostics, listed in [`KNOBS`] (and by
//! `spillway knobs`); nothing else in the library calls `std::env::var`. The engine re-exports
//! this module as `spillway::knobs`.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::OnceLock;

use crate::options::GemmIsa;

/// What a variable is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KnobKind {
    /// Where to find or put files on this machine.
    Deployment,
    /// For tests and comparisons: never needed to run a model.
    Diagnostics,
}

impl std::fmt::Display for KnobKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            KnobKind::Deployment => "deployment",
            KnobKind::Diagnostics => "diagnostics",
        })
    }
}

/// One environment variable: its name, kind and what it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Knob {
    /// The variable's name.
    pub name: &'static str,
    /// Deployment path or diagnostics.
    pub kind: KnobKind,
    /// What it does, in a sentence or two.
    pub description: &'static str,
}

impl Knob {
    /// The variable's value in this process now (`None` when unset or not Unicode).
    pub fn value(&self) -> Option<String> {
        std::env::var(self.name).ok()
    }
}

/// `SPILLWAY_CACHE_DIR`.
pub const CACHE_DIR: Knob = Knob {
    name: "SPILLWAY_CACHE_DIR",
    kind: KnobKind::Deployment,
    description: "directory of the profile cache (default $HOME/.cache/spillway)",
};

/// `SPILLWAY_CUDA_LIB_PATH`.
pub const CUDA_LIB_PATH: Knob = Knob {
    name: "SPILLWAY_CUDA_LIB_PATH",
    kind: KnobKind::Deployment,
    description: "colon-separated directories whose CUDA libraries (cuDNN, cuBLAS, NVRTC \
                  wheels) are loaded before the CUDA backend starts",
};

/// `SPILLWAY_GEMM`.
pub const GEMM: Knob = Knob {
    name: "SPILLWAY_GEMM",
    kind: KnobKind::Diagnostics,
    description: "what the GEMM option `auto` means in this process: avx512, avx2 or generic \
                  (read once; scripts/test.sh reruns the tests with avx2 to cover the AVX2 \
                  kernels on AVX-512 machines)",
};

/// `SPILLWAY_SKIPPED_LOG`.
pub const SKIPPED_LOG: Knob = Knob {
    name: "SPILLWAY_SKIPPED_LOG",
    kind: KnobKind::Diagnostics,
    description: "file to which tests that lack their hardware append a SKIPPED line \
                  (scripts/test.sh counts them)",
};

/// Every variable the library reads.
pub const KNOBS: &[Knob] = &[CACHE_DIR, CUDA_LIB_PATH, GEMM, SKIPPED_LOG];

/// [`CACHE_DIR`]'s directory, when set.
pub fn cache_dir() -> Option<PathBuf> {
    std::env::var_os(CACHE_DIR.name).map(PathBuf::from)
}

/// `$HOME`, the default cache's parent.
pub fn home_dir() -> Option<PathBuf> {
    std::env::var_os("HOME").map(PathBuf::from)
}

/// [`CUDA_LIB_PATH`]'s value (a path list), when set.
pub fn cuda_lib_path() -> Option<OsString> {
    std::env::var_os(CUDA_LIB_PATH.name)
}

/// [`SKIPPED_LOG`]'s file, when set.
pub fn skipped_log() -> Option<PathBuf> {
    std::env::var_os(SKIPPED_LOG.name).map(PathBuf::from)
}

/// What [`GEMM`] names, read once per process: `None` when unset, empty or not one of the
/// instruction sets (`auto` counts as unset).
pub fn gemm() -> Option<GemmIsa> {
    static CHOSEN: OnceLock<Option<GemmIsa>> = OnceLock::new();
    *CHOSEN.get_or_init(|| {
        let value = GEMM.value()?;
        match value.parse::<GemmIsa>() {
            Ok(GemmIsa::Auto) => None,
            Ok(isa) => Some(isa),
            Err(_) => None,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_knob_is_named_once_and_described() {
        let mut names: Vec<&str> = KNOBS.iter().map(|k| k.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), KNOBS.len());
        for knob in KNOBS {
            assert!(knob.name.starts_with("SPILLWAY_"), "{knob:?}");
            assert!(!knob.description.is_empty(), "{knob:?}");
        }
    }
}
