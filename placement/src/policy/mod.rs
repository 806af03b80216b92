//! Every placement policy, one file each, behind one entry point [`place`].

pub mod auto;
mod auto_search;
pub mod common;
pub mod cpop;
pub mod eft;
pub mod greedy;
pub mod heft;
pub mod hios_lp;
pub mod hios_mr;
pub mod hios_window;
pub mod ios;
pub mod lios;
pub mod lookahead;
pub mod milp;
pub mod milp_solver;
mod milp_warm;
pub mod nimble;
pub mod opara;
pub mod peft;
pub mod sequential;
pub mod sir;
pub mod sortinghat;

use serde::{Deserialize, Serialize};

use crate::error::{PlacementError, Result};
use crate::graph::CostGraph;
use crate::schedule::Schedule;
use crate::topology::Topology;
use common::Ctx;

/// Knobs of the policies; `Options::default()` gives the papers' defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Options {
    /// HIOS Alg. 2 maximum window size w.
    pub window: usize,
    /// SIR+ slowdown threshold α, µs.
    pub alpha_us: f64,
    /// SIR+ Comm+SD iteration cap.
    pub max_iter: usize,
    /// IOS size limit.
    pub ios_max_ops: usize,
    /// IOS pruning: most operators per stage.
    pub ios_r: usize,
    /// IOS pruning: most ending operators considered per state.
    pub ios_s: usize,
    /// MILP time limit, seconds.
    pub milp_time_limit_s: f64,
    /// MILP size limit (operators).
    pub milp_max_ops: usize,
    /// MILP solver (default: the strongest this build has).
    #[serde(default)]
    pub milp_solver: milp_solver::MilpSolver,
    /// SortingHat: dominators per submodel.
    pub sortinghat_doms: usize,
    /// SortingHat: a submodel larger than this is list-scheduled instead of solved exactly.
    pub sortinghat_milp_ops: usize,
    /// Auto: wall-clock cap of the whole search, ms (a safety cap: `auto_max_evals` is meant to
    /// end the search first, so that the answer depends on the seed only).
    pub auto_budget_ms: u64,
    /// Auto: most simulator calls of the starts and the local search.
    pub auto_max_evals: usize,
    /// Auto: which starts and moves its search uses (all by default; fewer for ablations).
    #[serde(default)]
    pub auto_ingredients: auto::Ingredients,
    /// Auto: run Milp/SortingHat/Ios among the candidates when the graph is at most this big.
    pub auto_exact_ops: usize,
    /// Seed of every randomized step.
    pub seed: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            window: 3,
            alpha_us: 100.0,
            max_iter: 10,
            ios_max_ops: 24,
            ios_r: 4,
            ios_s: 8,
            milp_time_limit_s: 10.0,
            milp_max_ops: 40,
            milp_solver: milp_solver::MilpSolver::default(),
            sortinghat_doms: 1,
            sortinghat_milp_ops: 10,
            auto_budget_ms: 900,
            auto_max_evals: 4_000,
            auto_ingredients: auto::Ingredients::default(),
            auto_exact_ops: 12,
            seed: 1,
        }
    }
}

/// Every policy by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Policy {
    /// [`sequential::sequential`].
    Sequential,
    /// [`greedy::greedy`].
    Greedy,
    /// [`heft::heft`].
    Heft,
    /// [`lios::lios`].
    Lios,
    /// [`opara::opara`].
    Opara,
    /// [`hios_lp::hios_lp`].
    HiosLp,
    /// [`hios_mr::hios_mr`].
    HiosMr,
    /// [`sir::qd`].
    Qd,
    /// [`sir::sd`].
    Sd,
    /// [`sir::comm_sd`].
    CommSd,
    /// [`nimble::nimble`].
    Nimble,
    /// [`ios::ios`].
    Ios,
    /// [`milp::milp`].
    Milp,
    /// [`sortinghat::sortinghat`].
    SortingHat,
    /// [`auto::auto`].
    Auto,
}

impl Policy {
    /// All policies, `Auto` last.
    pub const ALL: [Policy; 15] = [
        Policy::Sequential,
        Policy::Greedy,
        Policy::Heft,
        Policy::Lios,
        Policy::Opara,
        Policy::HiosLp,
        Policy::HiosMr,
        Policy::Qd,
        Policy::Sd,
        Policy::CommSd,
        Policy::Nimble,
        Policy::Ios,
        Policy::Milp,
        Policy::SortingHat,
        Policy::Auto,
    ];

    /// snake_case name.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Sequential => "sequential",
            Policy::Greedy => "greedy",
            Policy::Heft => "heft",
            Policy::Lios => "lios",
            Policy::Opara => "opara",
            Policy::HiosLp => "hios_lp",
            Policy::HiosMr => "hios_mr",
            Policy::Qd => "qd",
            Policy::Sd => "sd",
            Policy::CommSd => "comm_sd",
            Policy::Nimble => "nimble",
            Policy::Ios => "ios",
            Policy::Milp => "milp",
            Policy::SortingHat => "sortinghat",
            Policy::Auto => "auto",
        }
    }
}

impl std::str::FromStr for Policy {
    type Err = PlacementError;
    fn from_str(s: &str) -> Result<Self> {
        Policy::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| PlacementError::InvalidValue(format!("unknown policy {s:?}")))
    }
}

/// Runs `policy` on the inputs. Every schedule returned has been validated against them.
pub fn place(policy: Policy, g: &CostGraph, t: &Topology, opts: &Options) -> Result<Schedule> {
    let c = Ctx::new(g, t)?;
    let s = place_ctx(policy, &c, opts)?;
    s.validate(g, &c.dag, t)?;
    Ok(s)
}

pub(crate) fn place_ctx(policy: Policy, c: &Ctx, o: &Options) -> Result<Schedule> {
    match policy {
        Policy::Sequential => sequential::sequential(c),
        Policy::Greedy => greedy::greedy(c),
        Policy::Heft => heft::heft(c),
        Policy::Lios => lios::lios(c),
        Policy::Opara => opara::opara(c),
        Policy::HiosLp => hios_lp::hios_lp(c, o.window),
        Policy::HiosMr => hios_mr::hios_mr(c, o.window),
        Policy::Qd => sir::qd(c),
        Policy::Sd => sir::sd(c, o.alpha_us),
        Policy::CommSd => Ok(sir::comm_sd(c, o.alpha_us, o.max_iter)?.0),
        Policy::Nimble => nimble::nimble(c),
        Policy::Ios => ios::ios(c, o.ios_max_ops, o.ios_r, o.ios_s),
        Policy::Milp => Ok(milp::milp(c, o)?.schedule),
        Policy::SortingHat => sortinghat::sortinghat(c, o),
        Policy::Auto => Ok(auto::auto(c, o)?.schedule),
    }
}
