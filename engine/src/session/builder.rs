//! [`SessionBuilder`]: devices, placement, cost model, thread budget, optimization.

use std::path::{Path, PathBuf};

use spillway_kernels::KernelOptions;
use spillway_placement::{Options, Policy};

use super::Session;
use super::placing::{self, Engine};
use crate::device::Devices;
use crate::error::{Error, Result};
use crate::exec::kernel_pool::ThreadOptions;
use crate::exec::run_site::RunSite;
use crate::exec::{QueueKind, SequentialPlan};
use crate::graph::{Graph, passes};
use crate::profile::ProfileOptions;

/// How much the graph is rewritten before it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OptimizationLevel {
    /// Run the model exactly as written.
    Disabled,
    /// Identity/Dropout removal, constant folding (with shape inference), BatchNorm folding.
    Basic,
    /// `Basic`, then fusions: `Conv` + activation (and `Conv` + `Add` + `Relu`) into the
    /// `com.microsoft` `FusedConv`, which only the CPU implements — so a session that includes
    /// a CUDA GPU gets `Basic` only.
    #[default]
    All,
}

/// How activations are laid out between the CPU kernels.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ActivationLayout {
    /// Blocks of 16 channels (NCHW16c) where the optimizer finds a chain of convolutions and
    /// pools that runs faster that way, planes elsewhere (default, at
    /// [`OptimizationLevel::All`], on a CPU with AVX2 or AVX-512 and a packed GEMM the
    /// [`KernelOptions`] leave).
    #[default]
    Blocked,
    /// Planes (NCHW) everywhere: the blocked layout pass does not run.
    Planar,
}

/// Configures and creates a [`Session`].
///
/// Everything that changes what a session computes is an option here, not an environment
/// variable: two sessions in one process may differ. Besides devices, placement and
/// optimization:
///
/// - [`SessionBuilder::with_thread_options`] (or [`with_spinning`](Self::with_spinning),
///   [`with_thread_pinning`](Self::with_thread_pinning)): whether kernel threads spin between
///   kernels (default on) and are pinned to CPUs (default off);
/// - [`SessionBuilder::with_layout`]: the blocked (NCHW16c) layout, or planes only;
/// - [`SessionBuilder::with_kernel_options`]: kernel-algorithm overrides, the packed GEMM's
///   instruction set, panels of four vectors, Winograd never / always / where it pays.
///
/// ```no_run
/// use spillway::{ActivationLayout, KernelOptions, Session};
/// use spillway::kernel_options::{GemmIsa, Winograd};
///
/// let session = Session::builder()
///     .with_layout(ActivationLayout::Planar)
///     .with_kernel_options(
///         KernelOptions::default()
///             .with_gemm(GemmIsa::Avx2)
///             .with_winograd(Winograd::Never),
///     )
///     .with_thread_pinning(true)
///     .commit_from_file("model.onnx")?;
/// # Ok::<(), spillway::Error>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct SessionBuilder {
    pub(super) optimization: OptimizationLevel,
    pub(super) devices: Devices,
    pub(super) placement: Option<Policy>,
    pub(super) placement_options: Option<Options>,
    pub(super) cost_model: Option<PathBuf>,
    pub(super) intra_op_threads: Option<usize>,
    pub(super) allow_oversubscription: bool,
    pub(super) queue: QueueKind,
    pub(super) profile_shapes: Vec<(String, Vec<usize>)>,
    pub(super) profile_options: ProfileOptions,
    pub(super) use_profile_cache: bool,
    pub(super) tf32: bool,
    pub(super) limits: crate::exec::RunLimits,
    pub(super) threads: ThreadOptions,
    pub(super) layout: ActivationLayout,
    pub(super) kernel_options: KernelOptions,
}

impl SessionBuilder {
    /// How the kernel threads behave: spinning between kernels (default on) and pinning to
    /// CPUs (default off). See [`ThreadOptions`]. (A session split between the CPU and a GPU
    /// runs its CPU segments with the defaults.)
    pub fn with_thread_options(mut self, threads: ThreadOptions) -> Self {
        self.threads = threads;
        self
    }

    /// Whether the kernel threads wait for work spinning instead of sleeping while a run is
    /// on them (default on; [`ThreadOptions::spin`]).
    pub fn with_spinning(mut self, spin: bool) -> Self {
        self.threads.spin = spin;
        self
    }

    /// Whether each kernel thread is pinned to its own CPU (default off: a library does not
    /// pin its host's threads unasked; [`ThreadOptions::pin`]).
    pub fn with_thread_pinning(mut self, pin: bool) -> Self {
        self.threads.pin = pin;
        self
    }

    /// How activations are laid out between the CPU kernels (default
    /// [`ActivationLayout::Blocked`]).
    pub fn with_layout(mut self, layout: ActivationLayout) -> Self {
        self.layout = layout;
        self
    }

    /// The kernel-algorithm choices of the session's CPU kernels (default
    /// [`KernelOptions::default`], the measured best). See [`KernelOptions`].
    pub fn with_kernel_options(mut self, options: KernelOptions) -> Self {
        self.kernel_options = options;
        self
    }

    /// Lets cuBLAS and cuDNN use TF32 tensor cores for `float` on a GPU (faster, about 1e-3
    /// relative error). Off by default, so GPU outputs match the CPU's.
    pub fn with_tf32(mut self, tf32: bool) -> Self {
        self.tf32 = tf32;
        self
    }

    /// What each run may take: the largest tensor, its time, a `Loop`'s iterations. A run past
    /// a limit fails with a typed error naming the node, and the session stays usable. The
    /// tensor limit also holds for the constants folded while the session is created.
    pub fn with_run_limits(mut self, limits: crate::exec::RunLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Sets the optimization level (default: [`OptimizationLevel::All`]).
    pub fn with_optimization(mut self, level: OptimizationLevel) -> Self {
        self.optimization = level;
        self
    }

    /// The devices to run on (default: the CPU, one lane).
    pub fn with_devices(mut self, devices: Devices) -> Self {
        self.devices = devices;
        self
    }

    /// The placement policy (default: `Auto` with several devices or lanes, else `Sequential`).
    /// On CPU lanes alone (no cost model given, threads per lane not fixed), `Auto` also
    /// predicts one lane with every core and runs that unless the lanes are predicted at least
    /// 5 % faster, and then times both on the profile inputs and keeps the faster; the
    /// placement report says which it chose and why.
    ///
    /// With a GPU among the devices and a model it runs whole, every node runs on it and the
    /// policy assigns its streams: `Sequential` one stream; `Lios`, `Opara`, `Greedy` or `Heft`
    /// from the nodes' measured GPU times; `Auto` (the default) measures one stream and each
    /// of those and keeps the fastest. A model it cannot run whole is split between the CPU
    /// and the GPU: `Sequential` puts every node it can on the GPU, `Qd`, `Sd`, `CommSd` and
    /// `Milp` overflow nodes to the CPU (SIR+), and `Auto` times GPU first, GPU first with the
    /// GPU segments the CPU runs faster moved to it, and GPU first on fixed shapes only, and
    /// keeps the fastest.
    pub fn with_placement(mut self, policy: Policy) -> Self {
        self.placement = Some(policy);
        self
    }

    /// Tuning of the placement policies (windows, thresholds, time limits, seed).
    pub fn with_placement_options(mut self, options: Options) -> Self {
        self.placement_options = Some(options);
        self
    }

    /// Uses a saved cost model (JSON from `spillway profile`) instead of profiling.
    pub fn with_cost_model(mut self, path: impl AsRef<Path>) -> Self {
        self.cost_model = Some(path.as_ref().to_path_buf());
        self
    }

    /// Input shapes to profile with (symbolic dims otherwise take 1).
    pub fn with_profile_shape(mut self, input: &str, shape: &[usize]) -> Self {
        self.profile_shapes
            .push((input.to_string(), shape.to_vec()));
        self
    }

    /// How the profiler measures (warm-up, repeats).
    pub fn with_profile_options(mut self, options: ProfileOptions) -> Self {
        self.profile_options = options;
        self
    }

    /// Reuses and writes profiles in the cache directory (see [`crate::profile::cache_dir`]).
    pub fn with_profile_cache(mut self, enabled: bool) -> Self {
        self.use_profile_cache = enabled;
        self
    }

    /// Threads each CPU lane's kernels may use (default: the cores divided by the lanes).
    pub fn with_intra_op_threads(mut self, threads: usize) -> Self {
        self.intra_op_threads = Some(threads.max(1));
        self
    }

    /// Allows lanes × intra-op threads to exceed the cores.
    pub fn allow_oversubscription(mut self, allow: bool) -> Self {
        self.allow_oversubscription = allow;
        self
    }

    /// The ready-queue implementation (default lock-free; `Mutex` exists for comparisons).
    pub fn with_queue(mut self, queue: QueueKind) -> Self {
        self.queue = queue;
        self
    }

    /// Loads, optimizes and compiles a model file.
    pub fn commit_from_file(self, path: impl AsRef<Path>) -> Result<Session> {
        let _span = tracing::info_span!("load", path = %path.as_ref().display()).entered();
        let graph = crate::onnx::load_file(path.as_ref())?;
        let hash = file_hash(path.as_ref());
        self.commit(graph, hash)
    }

    /// Loads, optimizes and compiles a model held in memory (external data is not allowed).
    pub fn commit_from_memory(self, bytes: &[u8]) -> Result<Session> {
        let _span = tracing::info_span!("load", bytes = bytes.len()).entered();
        let graph = crate::onnx::load_bytes(bytes::Bytes::copy_from_slice(bytes), None)?;
        self.commit(graph, hash_bytes(bytes))
    }

    /// Optimizes and compiles a graph built or rewritten by the caller.
    ///
    /// Internal: the engine's own view, outside the API's stability promise.
    #[cfg(any(test, feature = "internals"))]
    #[doc(hidden)]
    pub fn commit_graph(self, graph: Graph) -> Result<Session> {
        self.commit(graph, 0)
    }

    /// Validates, optimizes and compiles `graph`. A panic on the way (a bug) is an
    /// [`Error::Panic`], not a panic across the API.
    fn commit(self, graph: Graph, model_hash: u64) -> Result<Session> {
        let commit = std::panic::AssertUnwindSafe(|| self.commit_unguarded(graph, model_hash));
        std::panic::catch_unwind(commit).unwrap_or_else(|payload| {
            Err(Error::Panic {
                context: "creating the session".into(),
                message: crate::error::panic_message(&*payload),
            })
        })
    }

    fn commit_unguarded(self, mut graph: Graph, model_hash: u64) -> Result<Session> {
        let (devices, dropped) = self.devices.split_available();
        if let Some((device, reason)) = dropped.first() {
            if !self.devices.fallback_allowed() {
                return Err(Error::DeviceUnavailable {
                    device: device.to_string(),
                    reason: reason.clone(),
                });
            }
            for (device, reason) in &dropped {
                tracing::warn!(%device, %reason, "device unavailable: falling back to the remaining devices");
            }
        }
        {
            let _span = tracing::info_span!("validate").entered();
            crate::graph::contrib::lower(&mut graph)?;
            crate::graph::validate::validate(&mut graph)?;
        }
        let level = match self.optimization {
            OptimizationLevel::Disabled => None,
            OptimizationLevel::Basic => Some(passes::Level::Basic),
            // FusedConv has no GPU kernel: with a GPU in the session, keep every Conv placeable.
            OptimizationLevel::All if devices.has_cuda() => Some(passes::Level::Basic),
            OptimizationLevel::All => Some(passes::Level::Extended),
        };
        graph.set_kernel_options(self.kernel_options);
        if let Some(level) = level {
            let _span = tracing::info_span!("optimize", ?level).entered();
            let limits = Some(self.limits.start());
            let passes = passes::PassOptions::default()
                .with_blocked_layout(self.layout == ActivationLayout::Blocked);
            crate::exec::limits::scoped(limits, || {
                passes::optimize_with(&mut graph, level, &passes)
            })?;
            // Passes may add subgraphs' nodes: every graph builds with the session's options.
            graph.set_kernel_options(self.kernel_options);
        }
        #[cfg(feature = "cuda")]
        if devices.has_cuda() {
            let engine = placing::build_gpu(&self, &mut graph, &devices)?;
            return Ok(Session::new(
                graph,
                engine,
                devices,
                self.limits,
                self.threads,
            ));
        }
        let parallel = devices.specs().len() > 1
            || devices.total_lanes() > 1
            || self.placement.is_some_and(|p| p != Policy::Sequential);
        let engine = if parallel {
            placing::build(&self, &graph, &devices, model_hash)?
        } else {
            let _span = tracing::info_span!("compile").entered();
            Engine::Sequential {
                plan: SequentialPlan::compile(&graph)?.for_input_shapes(&graph),
                report: None,
                site: RunSite::default(),
            }
        };
        Ok(Session::new(
            graph,
            engine,
            devices,
            self.limits,
            self.threads,
        ))
    }
}

fn hash_bytes(bytes: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}

fn file_hash(path: &Path) -> u64 {
    std::fs::read(path).map(|b| hash_bytes(&b)).unwrap_or(0)
}
