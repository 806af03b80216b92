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

/// How many of the best starts get a short search of their own when
/// [`Ingredients::multi_start`] is on.
pub const SEARCH_STARTS: usize = 3;

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
    let mut states: Vec<(State, String)> = Vec::new();
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
            let label = match decode {
                Decode::Dispatch => name.clone(),
                Decode::InOrder => format!("{name}, in order"),
            };
            states.push((st, label));
        }
    }
    // Best first (ties: the earlier start), one state per makespan.
    states.sort_by(|a, b| a.0.makespan.total_cmp(&b.0.makespan));
    states.dedup_by(|a, b| a.0.makespan == b.0.makespan);
    let k = if ing.multi_start {
        SEARCH_STARTS.min(states.len())
    } else {
        states.len().min(1)
    };
    states.truncate(k);
    let mut start_name = best_p.name().to_string();
    // First a short search from each of the best `k` starts, then the rest of the budget
    // from the best state found.
    let mut found: Vec<(State, String)> = Vec::new();
    let total = o.auto_max_evals.saturating_sub(evals);
    let first = if k > 1 { total / (2 * k) } else { total };
    for (i, (st, name)) in states.into_iter().enumerate() {
        let (f, used) = search(
            c,
            &ing,
            st,
            lb,
            first,
            deadline,
            o.seed.wrapping_add(i as u64),
        )?;
        evals += used;
        found.push((f, name));
    }
    found.sort_by(|a, b| a.0.makespan.total_cmp(&b.0.makespan));
    if let Some((st, name)) = found.into_iter().next() {
        start_name = name;
        let rest = o.auto_max_evals.saturating_sub(evals);
        let (f, used) = if k > 1 {
            search(
                c,
                &ing,
                st,
                lb,
                rest,
                deadline,
                o.seed.wrapping_add(k as u64),
            )?
        } else {
            (st, 0)
        };
        evals += used;
        if f.makespan < best_m {
            best_m = f.makespan;
            best_s = f.schedule;
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
