//! [`KernelOptions`]: the kernel-algorithm choices a session makes for its CPU kernels.
//!
//! The options travel with each kernel: a builder receives them in its
//! [`NodeSpec`](crate::NodeSpec), and the kernels that pack weights for the packed GEMM keep
//! them with their weights. Two sessions in one process can therefore run the same model with
//! different choices.

/// Which instruction set the packed GEMM's micro-kernels may use (the products of `Conv`,
/// `ConvTranspose`, `Gemm`, `MatMul` and the recurrent ops, and Winograd's transforms).
///
/// A choice the CPU lacks falls to the next one it has: `Avx512` on a CPU with AVX2 alone runs
/// AVX2. Vector code outside the packed GEMM (epilogues, pools) follows the CPU.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum GemmIsa {
    /// The best this CPU has, unless the diagnostics knob `SPILLWAY_GEMM` names another
    /// ([`crate::knobs`]).
    #[default]
    Auto,
    /// AVX-512F (or AVX2 where the CPU lacks it).
    Avx512,
    /// AVX2 + FMA, even where the CPU has AVX-512.
    Avx2,
    /// No packed micro-kernels: every product goes to the generic matrix core
    /// (`matrixmultiply`), and neither Winograd nor the blocked layout applies.
    Generic,
}

impl GemmIsa {
    /// The name the CLI and `SPILLWAY_GEMM` use: `auto`, `avx512`, `avx2` or `generic`.
    pub fn name(self) -> &'static str {
        match self {
            GemmIsa::Auto => "auto",
            GemmIsa::Avx512 => "avx512",
            GemmIsa::Avx2 => "avx2",
            GemmIsa::Generic => "generic",
        }
    }
}

impl std::str::FromStr for GemmIsa {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(GemmIsa::Auto),
            "avx512" => Ok(GemmIsa::Avx512),
            "avx2" => Ok(GemmIsa::Avx2),
            "generic" => Ok(GemmIsa::Generic),
            _ => Err(format!(
                "unknown GEMM instruction set {s:?} (auto, avx512, avx2, generic)"
            )),
        }
    }
}

impl std::fmt::Display for GemmIsa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// When a 3×3 convolution with unit strides (or a 1×r / r×1 one of a blocked image) runs by
/// Winograd's minimal filtering instead of the packed GEMM.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Winograd {
    /// Where it applies and is predicted to pay (enough output tiles and channels).
    #[default]
    Auto,
    /// Wherever it applies (channels in whole blocks of 16, a packed GEMM instruction set).
    Always,
    /// Never.
    Never,
}

impl Winograd {
    /// The name the CLI uses: `auto`, `always` or `never`.
    pub fn name(self) -> &'static str {
        match self {
            Winograd::Auto => "auto",
            Winograd::Always => "always",
            Winograd::Never => "never",
        }
    }
}

impl std::str::FromStr for Winograd {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Winograd::Auto),
            "always" => Ok(Winograd::Always),
            "never" => Ok(Winograd::Never),
            _ => Err(format!(
                "unknown Winograd choice {s:?} (auto, always, never)"
            )),
        }
    }
}

impl std::fmt::Display for Winograd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The kernel-algorithm overrides of a session's CPU kernels. The defaults are the measured
/// best choices; the others exist to compare and to work around a problem.
///
/// ```
/// use spillway_kernels::options::{GemmIsa, KernelOptions, Winograd};
///
/// let options = KernelOptions::default()
///     .with_gemm(GemmIsa::Avx2)
///     .with_winograd(Winograd::Never);
/// assert!(options.four_vector_panels);
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KernelOptions {
    /// The packed GEMM's instruction set (default [`GemmIsa::Auto`]).
    pub gemm: GemmIsa,
    /// Whether AVX-512 products whose output channels are whole panels of 64 take tiles of
    /// four vectors × 6 positions (default on; off, they take two or three vectors).
    pub four_vector_panels: bool,
    /// When convolutions run by Winograd (default [`Winograd::Auto`]).
    pub winograd: Winograd,
}

impl Default for KernelOptions {
    fn default() -> Self {
        KernelOptions {
            gemm: GemmIsa::Auto,
            four_vector_panels: true,
            winograd: Winograd::Auto,
        }
    }
}

impl KernelOptions {
    /// Sets the packed GEMM's instruction set.
    pub fn with_gemm(mut self, gemm: GemmIsa) -> Self {
        self.gemm = gemm;
        self
    }

    /// Turns panels of four vectors on or off.
    pub fn with_four_vector_panels(mut self, on: bool) -> Self {
        self.four_vector_panels = on;
        self
    }

    /// Sets when convolutions run by Winograd.
    pub fn with_winograd(mut self, winograd: Winograd) -> Self {
        self.winograd = winograd;
        self
    }

    /// The instruction set the packed GEMM runs on with these options on this CPU; `None`
    /// where it does not run (the generic matrix core takes every product).
    pub fn gemm_isa(&self) -> Option<crate::cpu::nn::packed_gemm::Isa> {
        crate::cpu::nn::packed_gemm::Isa::for_choice(self.gemm)
    }
}

/// What a kernel with several algorithms computed with, as [`crate::Kernel::choice`] reports
/// it (`winograd-avx512`, `packed-avx2`, `generic`, ...).
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// Winograd's minimal filtering, its products on the packed GEMM on this instruction set.
    Winograd(crate::cpu::nn::packed_gemm::Isa),
    /// The packed GEMM on this instruction set.
    Packed(crate::cpu::nn::packed_gemm::Isa),
    /// The generic matrix core (the options leave no packed GEMM).
    Generic,
}

impl std::fmt::Display for Choice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Choice::Winograd(isa) => write!(f, "winograd-{}", isa.name()),
            Choice::Packed(isa) => write!(f, "packed-{}", isa.name()),
            Choice::Generic => f.write_str("generic"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back() {
        for g in [
            GemmIsa::Auto,
            GemmIsa::Avx512,
            GemmIsa::Avx2,
            GemmIsa::Generic,
        ] {
            assert_eq!(g.name().parse::<GemmIsa>(), Ok(g));
        }
        for w in [Winograd::Auto, Winograd::Always, Winograd::Never] {
            assert_eq!(w.name().parse::<Winograd>(), Ok(w));
        }
        assert!("avx".parse::<GemmIsa>().is_err());
        assert!("yes".parse::<Winograd>().is_err());
    }

    #[test]
    fn generic_has_no_packed_gemm() {
        let generic = KernelOptions::default().with_gemm(GemmIsa::Generic);
        assert_eq!(generic.gemm_isa(), None);
    }
}
