//! `Auto`: every applicable policy and several constructive starts, then a local search aimed at
//! the critical path, stopped early at the lower bound.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::bound::lower_bound;
use crate::error::Result;
use crate::policy::auto_search::{Decode, State, search};
use crate::policy::common::Ctx;
use crate::policy::{Options, Policy, cpop, lookahead, peft, place_ctx};
use crate::schedule::Schedule;

pub use crate::policy::auto_search::Ingredients;

/// One row of Auto's comparison table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    /// The policy.
    pub policy: Policy,
    /// Its simulated makespan, or why it did not apply.
    pub makespan: std::result::Result<f64, String>,
    /// Time the policy took, µs.
    pub schedule_us: f64,
}

/// Auto's answer: the schedule and the table of every candidate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AutoReport {
    /// The best schedule found.
    pub schedule: Schedule,
    /// Its makespan.
    pub makespan: f64,
    /// The best policy of the table (before the other starts and the local search).
    pub best_policy: Policy,
    /// Every candidate.
    pub table: Vec<Candidate>,
    /// Simulator calls made by the starts and the local search.
    pub evals: usize,
    /// The start the local search began from: a policy's name, `cpop`, `peft` or `lookahead`.
    #[serde(default)]
    pub start: String,
    /// The lower bound the search stops at.
    #[serde(default)]
    pub lower_bound: f64,
}

/// Auto, in three steps.
///
/// 1. **The table**: every policy (the exponential ones — Ios, Milp, SortingHat — only on
///    graphs of at most `auto_exact_ops` operators, with the MILP time limit capped at
///    `auto_budget_ms`), each simulated as it placed itself.
/// 2. **Starts**: each table schedule, and (with [`Ingredients::starts`]) CPOP, PEFT and
///    lookahead HEFT ([`cpop::cpop`], [`peft::peft`], [`lookahead::lookahead`]), is read as a
///    device per operator plus a priority per operator (its launch order) and dispatched by
///    the simulator's work-conserving dispatcher ([`Ctx::dispatch_on_devices`], which picks each
///    operator's stream). The best dispatched start seeds the search.
/// 3. **Local search**: moves of the enabled [`Ingredients`] kinds, most aimed at the critical
///    path of the current schedule (reorder, move a critical operator to its producer's device,
///    move a whole chain, swap two operators' devices; and random single moves); a move is kept
///    when the simulated makespan does not get worse.
///
/// Stops at the [`lower_bound`] (nothing can beat it), after `auto_max_evals` dispatches, or
/// after `auto_budget_ms` (a safety cap: the default evaluation budget ends well before it on
/// 200-operator graphs, so for a given `seed` the answer does not depend on the machine's
/// speed unless the cap is reached). Returns the best of the table and the search.
pub fn auto(c: &Ctx, o: &Options) -> Result<AutoReport> {
    let t0 = Instant::now();
    let deadline = t0 + Duration::from_millis(o.auto_budget_ms);
    let ing = o.auto_ingredients;
    let mut table = Vec::new();
    let mut best: Option<(f64, Schedule, Policy)> = None;
    let mut starts: Vec<(String, Schedule)> = Vec::new();
    // The exact candidates get at most the local-search budget each.
    let o_cand = Options {
        milp_time_limit_s: o.milp_time_limit_s.min(o.auto_budget_ms as f64 / 1e3),
        ..o.clone()
    };
    for p in Policy::ALL {
        if p == Policy::Auto
            || (matches!(p, Policy::Ios | Policy::Milp | Policy::SortingHat)
                && c.n() > o.auto_exact_ops)
        {
            continue;
        }
        let t1 = Instant::now();
        let r = place_ctx(p, c, &o_cand).and_then(|s| c.makespan(&s).map(|m| (m, s)));
        let us = t1.elapsed().as_secs_f64() * 1e6;
        match r {
            Ok((m, s)) => {
                if best.as_ref().is_none_or(|b| m < b.0) {
                    best = Some((m, s.clone(), p));
                }
                starts.push((p.name().to_string(), s));
                table.push(Candidate {
                    policy: p,
                    makespan: Ok(m),
                    schedule_us: us,
                });
            }
            Err(e) => table.push(Candidate {
                policy: p,
                makespan: Err(e.to_string()),
                schedule_us: us,
            }),
        }
    }
    let (mut best_m, mut best_s, best_p) =
        best.ok_or_else(|| crate::PlacementError::NotApplicable {
            policy: "auto",
            reason: "no policy applies".into(),
        })?;
    if ing.starts {
        starts.push(("cpop".into(), cpop::cpop(c)));
        starts.push(("peft".into(), peft::peft(c)));
        starts.push(("lookahead".into(), lookahead::lookahead(c)));
    }
    let lb = lower_bound(c.g, &c.dag, c.t);
    let mut evals = 0;
    let mut seed_state: Option<(State, String)> = None;
    for (name, s) in &starts {
        // A start's own timing counts too: the dispatcher may do worse than its streams.
        let own = c.makespan(s)?;
        evals += 1;
        if own < best_m {
            best_m = own;
            best_s = s.clone();
        }
        for decode in [Decode::Dispatch, Decode::InOrder] {
            let st = State::of(c, s, decode)?;
            evals += 1;
            if seed_state
                .as_ref()
                .is_none_or(|(b, _)| st.makespan < b.makespan)
            {
                let label = match decode {
                    Decode::Dispatch => name.clone(),
                    Decode::InOrder => format!("{name}, in order"),
                };
                seed_state = Some((st, label));
            }
        }
    }
    let mut start_name = best_p.name().to_string();
    if let Some((st, name)) = seed_state {
        start_name = name;
        let budget = o.auto_max_evals.saturating_sub(evals);
        let (found, used) = search(c, &ing, st, lb, budget, deadline, o.seed)?;
        evals += used;
        if found.makespan < best_m {
            best_m = found.makespan;
            best_s = found.schedule;
        }
    }
    best_s.policy = "auto".into();
    Ok(AutoReport {
        schedule: best_s,
        makespan: best_m,
        best_policy: best_p,
        table,
        evals,
        start: start_name,
        lower_bound: lb,
    })
}
