//! The flags of the session options that every command building a session takes (threads,
//! layout, kernel algorithms), and `spillway knobs`.

use clap::Args;
use spillway::kernel_options::{GemmIsa, Winograd};
use spillway::{ActivationLayout, KernelOptions, SessionBuilder, ThreadOptions};

/// How the session computes: kernel threads, activation layout, kernel algorithms.
#[derive(Args, Debug, Clone, Default)]
pub struct EngineArgs {
    /// The packed GEMM's instruction set: `auto` (the CPU's best), `avx512`, `avx2`, or
    /// `generic` (no packed micro-kernels: no Winograd, no blocked layout).
    #[arg(long, value_name = "ISA", default_value = "auto", value_parser = parse_gemm)]
    pub gemm: GemmIsa,
    /// When 3×3 (and 1×r) convolutions run by Winograd: `auto` (where it pays), `always`
    /// (wherever it applies) or `never`.
    #[arg(long, value_name = "WHEN", default_value = "auto", value_parser = parse_winograd)]
    pub winograd: Winograd,
    /// No tiles of four vectors for AVX-512 products (they take two or three).
    #[arg(long)]
    pub no_four_panels: bool,
    /// Keep activations in planes: no blocked (NCHW16c) layout.
    #[arg(long)]
    pub no_blocked: bool,
    /// Kernel threads wait for work spinning between kernels (the default).
    #[arg(long, overrides_with = "no_spin")]
    pub spin: bool,
    /// Kernel threads sleep between kernels instead of spinning.
    #[arg(long, overrides_with = "spin")]
    pub no_spin: bool,
    /// Pin each kernel thread to its own CPU (off by default).
    #[arg(long, overrides_with = "no_pin_threads")]
    pub pin_threads: bool,
    /// Leave the kernel threads unpinned (the default).
    #[arg(long, overrides_with = "pin_threads")]
    pub no_pin_threads: bool,
}

fn parse_gemm(s: &str) -> Result<GemmIsa, String> {
    s.parse()
}

fn parse_winograd(s: &str) -> Result<Winograd, String> {
    s.parse()
}

impl EngineArgs {
    /// The kernel options the flags ask for.
    pub fn kernel_options(&self) -> KernelOptions {
        KernelOptions::default()
            .with_gemm(self.gemm)
            .with_winograd(self.winograd)
            .with_four_vector_panels(!self.no_four_panels)
    }

    /// The thread options the flags ask for.
    pub fn thread_options(&self) -> ThreadOptions {
        ThreadOptions::default()
            .with_spin(!self.no_spin)
            .with_pin(self.pin_threads)
    }

    /// `builder` with the options the flags ask for.
    pub fn apply(&self, builder: SessionBuilder) -> SessionBuilder {
        let layout = match self.no_blocked {
            true => ActivationLayout::Planar,
            false => ActivationLayout::Blocked,
        };
        builder
            .with_kernel_options(self.kernel_options())
            .with_thread_options(self.thread_options())
            .with_layout(layout)
    }
}

/// `spillway knobs`: every environment variable Spillway reads, what it does, and its value
/// here.
pub fn knobs() {
    for knob in spillway::knobs::KNOBS {
        let value = knob.value().unwrap_or_else(|| "(unset)".into());
        say!("{} = {value}", knob.name);
        say!("    {}: {}", knob.kind, knob.description);
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        engine: EngineArgs,
    }

    fn parse(args: &[&str]) -> EngineArgs {
        Cli::try_parse_from(std::iter::once("x").chain(args.iter().copied()))
            .expect("flags parse")
            .engine
    }

    #[test]
    fn defaults_spin_and_do_not_pin() {
        let args = parse(&[]);
        assert_eq!(args.thread_options(), ThreadOptions::default());
        assert!(!args.thread_options().pin);
        assert_eq!(args.kernel_options(), KernelOptions::default());
    }

    #[test]
    fn flags_set_the_options() {
        let args = parse(&[
            "--gemm",
            "avx2",
            "--winograd",
            "never",
            "--no-four-panels",
            "--no-blocked",
            "--no-spin",
            "--pin-threads",
        ]);
        let kernel = args.kernel_options();
        assert_eq!(kernel.gemm, GemmIsa::Avx2);
        assert_eq!(kernel.winograd, Winograd::Never);
        assert!(!kernel.four_vector_panels);
        assert!(args.no_blocked);
        let threads = args.thread_options();
        assert!(!threads.spin && threads.pin);
        // The last of a pair wins.
        assert!(parse(&["--no-spin", "--spin"]).thread_options().spin);
        assert!(
            !parse(&["--pin-threads", "--no-pin-threads"])
                .thread_options()
                .pin
        );
    }

    #[test]
    fn unknown_choices_are_refused() {
        let cli =
            |args: &[&str]| Cli::try_parse_from(std::iter::once("x").chain(args.iter().copied()));
        assert!(cli(&["--gemm", "sse"]).is_err());
        assert!(cli(&["--winograd", "sometimes"]).is_err());
    }
}
