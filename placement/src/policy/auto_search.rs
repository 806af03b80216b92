//! Auto's local search: a device per operator plus a priority per operator, turned into a
//! schedule by the work-conserving dispatcher ([`Ctx::dispatch_on_devices`]), improved by moves
//! aimed at the critical path of the current schedule.

use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::policy::common::Ctx;
use crate::rng::Rng;
use crate::schedule::Schedule;
use crate::sim::OpTiming;

/// Which parts of Auto's search run. `Ingredients::default()` runs all of them but late acceptance; the others
/// exist to measure what each adds (see [`Ingredients::named`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ingredients {
    /// Constructive starts beside the policy table: CPOP, PEFT and lookahead HEFT.
    pub starts: bool,
    /// Move: one random operator to a random device, or one random priority scaled by
    /// 0.8–1.25 (the search Auto had before the critical-path moves).
    pub random: bool,
    /// Move: on the critical path, an operator that waited for a lane while its inputs were
    /// there is given a priority just above the operator that took the lane.
    pub reorder: bool,
    /// Move: a critical operator that waited for a copy goes to its producer's device (or the
    /// producer to its device); other critical operators to another device.
    pub critical: bool,
    /// Move: a whole chain to another device (a maximal chain of the graph through operators
    /// with one producer and one consumer, or a run of the critical path on one device).
    pub chains: bool,
    /// Move: a critical operator and an operator on another device swap devices.
    pub swaps: bool,
    /// Acceptance: late acceptance hill climbing (Burke, Bykov 2017): a move is also kept when
    /// it is no worse than the makespan of 50 moves ago, so the search can
    /// cross plateaus and small ridges; the best state seen is what is returned. Without it a
    /// move is kept only when it is no worse than the current state.
    pub late_acceptance: bool,
    /// Search from several starts: a short search from each of the best
    /// [`SEARCH_STARTS`](crate::policy::auto::SEARCH_STARTS) starts, then the rest of the
    /// budget from the best state they reached (else the whole budget from the best start).
    pub multi_start: bool,
}

/// The history length of [`Ingredients::late_acceptance`].
const LATE_ACCEPTANCE: usize = 50;

impl Default for Ingredients {
    fn default() -> Self {
        Ingredients {
            starts: true,
            random: true,
            reorder: true,
            critical: true,
            chains: true,
            swaps: true,
            late_acceptance: false,
            multi_start: true,
        }
    }
}

impl Ingredients {
    /// No constructive start beyond the policy table and no move: the best policy.
    pub const NONE: Ingredients = Ingredients {
        starts: false,
        random: false,
        reorder: false,
        critical: false,
        chains: false,
        swaps: false,
        late_acceptance: false,
        multi_start: false,
    };

    /// Named sets for ablations: `policies` (no start, no move), `starts` (starts, no move),
    /// `random`, `reorder`, `critical`, `chains`, `swaps` (starts and that one move, plain
    /// hill climbing), `full` (all), `no-<ingredient>` (all but one: `no-starts`, `no-random`,
    /// `no-reorder`, `no-critical`, `no-chains`, `no-swaps`, `no-multi-start`), `late-acceptance` (all and late
    /// acceptance, which is off by default).
    pub fn named(name: &str) -> Option<Ingredients> {
        let starts = Ingredients {
            starts: true,
            ..Ingredients::NONE
        };
        let all = Ingredients::default();
        Some(match name {
            "policies" => Ingredients::NONE,
            "starts" => starts,
            "random" => Ingredients {
                random: true,
                ..starts
            },
            "reorder" => Ingredients {
                reorder: true,
                ..starts
            },
            "critical" => Ingredients {
                critical: true,
                ..starts
            },
            "chains" => Ingredients {
                chains: true,
                ..starts
            },
            "swaps" => Ingredients {
                swaps: true,
                ..starts
            },
            "full" => all,
            "no-multi-start" => Ingredients {
                multi_start: false,
                ..all
            },
            "late-acceptance" => Ingredients {
                late_acceptance: true,
                ..all
            },
            "no-starts" => Ingredients {
                starts: false,
                ..all
            },
            "no-random" => Ingredients {
                random: false,
                ..all
            },
            "no-reorder" => Ingredients {
                reorder: false,
                ..all
            },
            "no-critical" => Ingredients {
                critical: false,
                ..all
            },
            "no-chains" => Ingredients {
                chains: false,
                ..all
            },
            "no-swaps" => Ingredients {
                swaps: false,
                ..all
            },

            _ => return None,
        })
    }

    fn moves(&self) -> Vec<Move> {
        let mut m = Vec::new();
        for (on, mv) in [
            (self.random, Move::Random),
            (self.reorder, Move::Reorder),
            (self.critical, Move::Critical),
            (self.chains, Move::Chain),
            (self.swaps, Move::Swap),
        ] {
            if on {
                m.push(mv);
            }
        }
        m
    }
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Move {
    Random,
    Reorder,
    Critical,
    Chain,
    Swap,
}

/// Why a critical operator started when it did.
#[derive(Clone, Copy)]
enum Cause {
    /// At time 0.
    Start,
    /// When the input from this producer arrived (`true`: copied from another device).
    Data(usize, bool),
    /// When this operator freed a lane of the same device.
    Lane(usize),
}

/// One point of the search: a device and a priority per operator, and what the dispatcher made
/// of them.
#[derive(Clone)]
pub(crate) struct State {
    pub decode: Decode,
    pub device: Vec<usize>,
    pub prio: Vec<f64>,
    pub makespan: f64,
    pub schedule: Schedule,
    timing: Vec<OpTiming>,
}

/// How a device and priority per operator become a schedule.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Decode {
    /// The simulator's work-conserving dispatcher: a free lane takes the arrived operator of
    /// highest priority (never idles while one waits).
    Dispatch,
    /// Each device runs its operators in priority order, each on the lane that frees first by
    /// estimate ([`Ctx::list_on_devices`]); a lane waits for the next operator of its order
    /// even when another has arrived, so schedules with deliberate idle time are reachable.
    InOrder,
}

impl State {
    /// Decodes `device` with priorities `prio`.
    pub fn new(c: &Ctx, device: Vec<usize>, prio: Vec<f64>, decode: Decode) -> Result<State> {
        let seq = c.priority_order(&prio);
        let (makespan, schedule, timing) = match decode {
            Decode::Dispatch => c.dispatch_timed("auto", &device, &seq)?,
            Decode::InOrder => {
                let s = c.list_on_devices("auto", &device, &seq);
                let (m, timing) = c.timed(&s)?;
                (m, s, timing)
            }
        };
        Ok(State {
            decode,
            device,
            prio,
            makespan,
            schedule,
            timing,
        })
    }

    /// The state of a schedule: its devices, priorities by its launch order.
    pub fn of(c: &Ctx, s: &Schedule, decode: Decode) -> Result<State> {
        let n = c.n();
        let mut prio = vec![0.0; n];
        for (i, v) in s.sequence().into_iter().enumerate() {
            prio[v] = (n - i) as f64;
        }
        State::new(c, s.ops.iter().map(|p| p.device).collect(), prio, decode)
    }
}

/// The critical path of a dispatched schedule, last operator first.
fn critical_path(c: &Ctx, st: &State) -> Vec<(usize, Cause)> {
    let tm = &st.timing;
    let n = c.n();
    let eps = 1e-9 * st.makespan.max(1.0);
    let mut out = Vec::new();
    let Some(mut v) = (0..n).max_by(|&a, &b| tm[a].finish.total_cmp(&tm[b].finish)) else {
        return out;
    };
    for _ in 0..n {
        let (start, ready) = (tm[v].start, tm[v].ready);
        if start <= eps {
            out.push((v, Cause::Start));
            break;
        }
        let d = st.device[v];
        let cause = if start > ready + eps {
            (0..n)
                .filter(|&b| b != v && st.device[b] == d && (tm[b].finish - start).abs() <= eps)
                .max_by(|&a, &b| tm[a].start.total_cmp(&tm[b].start))
                .map(Cause::Lane)
        } else {
            c.dag.preds[v]
                .iter()
                .map(|&(u, e)| {
                    let remote = st.device[u] != d;
                    let arr = tm[u].finish
                        + if remote {
                            c.comm(e, st.device[u], d)
                        } else {
                            0.0
                        };
                    (u, remote, arr)
                })
                .max_by(|a, b| a.2.total_cmp(&b.2))
                .map(|(u, r, _)| Cause::Data(u, r))
        };
        let Some(cause) = cause else {
            out.push((v, Cause::Start));
            break;
        };
        out.push((v, cause));
        v = match cause {
            Cause::Lane(b) => b,
            Cause::Data(u, _) => u,
            Cause::Start => break,
        };
    }
    out
}

/// The local search from `start`: each step applies one move of an enabled kind, dispatches,
/// and keeps the result when the makespan does not get worse. Stops after `max_evals`
/// dispatches, at `deadline`, or when the makespan reaches `lb`. Returns the best state and the
/// dispatches made.
pub(crate) fn search(
    c: &Ctx,
    ing: &Ingredients,
    start: State,
    lb: f64,
    max_evals: usize,
    deadline: Instant,
    seed: u64,
) -> Result<(State, usize)> {
    let moves = ing.moves();
    let n = c.n();
    if moves.is_empty() || n == 0 {
        return Ok((start, 0));
    }
    let mut rng = Rng::new(seed);
    let capable: Vec<Vec<usize>> = (0..n)
        .map(|v| (0..c.d()).filter(|&d| c.time[v][d].is_finite()).collect())
        .collect();
    let chain_of = graph_chains(c);
    let mut cur = start;
    let mut best = cur.clone();
    let mut history = vec![
        cur.makespan;
        if ing.late_acceptance {
            LATE_ACCEPTANCE
        } else {
            1
        }
    ];
    let mut path = critical_path(c, &cur);
    let mut evals = 0;
    let done = |m: f64| m <= lb * (1.0 + 1e-9);
    while evals < max_evals && !done(best.makespan) && Instant::now() < deadline {
        let mv = moves[rng.below(moves.len())];
        let mut device = cur.device.clone();
        let mut prio = cur.prio.clone();
        let changed = match mv {
            Move::Random => {
                let v = rng.below(n);
                if rng.below(3) > 0 && capable[v].len() > 1 {
                    device[v] = capable[v][rng.below(capable[v].len())];
                    device[v] != cur.device[v]
                } else {
                    prio[v] *= rng.range_f64(0.8, 1.25);
                    true
                }
            }
            Move::Reorder => {
                let cands: Vec<(usize, usize)> = path
                    .iter()
                    .filter_map(|&(v, cause)| match cause {
                        Cause::Lane(b)
                            if cur.decode == Decode::InOrder
                                || cur.timing[v].ready <= cur.timing[b].start =>
                        {
                            Some((v, b))
                        }
                        _ => None,
                    })
                    .collect();
                if cands.is_empty() {
                    false
                } else {
                    let (v, b) = cands[rng.below(cands.len())];
                    prio[v] = prio[b] + rng.range_f64(0.01, 1.0);
                    true
                }
            }
            Move::Critical => {
                let (v, cause) = path[rng.below(path.len())];
                match cause {
                    Cause::Data(u, true) => {
                        if rng.below(2) == 0 {
                            {
                                let to = device[u];
                                move_to(&mut device, &capable, &[v], to)
                            }
                        } else {
                            {
                                let to = device[v];
                                move_to(&mut device, &capable, &[u], to)
                            }
                        }
                    }
                    _ => {
                        let to = target(c, &mut rng, &[v], &device);
                        move_to(&mut device, &capable, &[v], to)
                    }
                }
            }
            Move::Chain => {
                let i = rng.below(path.len());
                let v = path[i].0;
                let set: Vec<usize> = if rng.below(2) == 0 {
                    chain_of[v].clone()
                } else {
                    run_on_device(&path, i, &cur.device)
                };
                let to = target(c, &mut rng, &set, &device);
                move_to(&mut device, &capable, &set, to)
            }
            Move::Swap => {
                let v = path[rng.below(path.len())].0;
                let u = rng.below(n);
                let (dv, du) = (device[v], device[u]);
                dv != du && capable[v].contains(&du) && capable[u].contains(&dv) && {
                    device[v] = du;
                    device[u] = dv;
                    true
                }
            }
        };
        if !changed {
            evals += 1;
            continue;
        }
        let next = State::new(c, device, prio, cur.decode)?;
        let slot = evals % history.len();
        evals += 1;
        let late = ing.late_acceptance && next.makespan <= history[slot];
        if next.makespan <= cur.makespan || late {
            cur = next;
            path = critical_path(c, &cur);
            if cur.makespan < best.makespan {
                best = cur.clone();
            }
        }
        history[slot] = cur.makespan;
    }
    Ok((best, evals))
}

/// A device other than `d` (uniform; `d` itself when there is one device).
fn other_device(rng: &mut Rng, nd: usize, d: usize) -> usize {
    if nd <= 1 {
        return d;
    }
    let x = rng.below(nd - 1);
    if x >= d { x + 1 } else { x }
}

/// Where to move `set` (whose first operator is on `device[set[0]]`): half the time the device
/// of one of its producers or consumers outside it, on another device (copies saved), else
/// (or when there is none) a uniform other device.
fn target(c: &Ctx, rng: &mut Rng, set: &[usize], device: &[usize]) -> usize {
    let from = device[set[0]];
    if rng.below(2) == 0 {
        let near: Vec<usize> = set
            .iter()
            .flat_map(|&v| c.dag.preds[v].iter().chain(&c.dag.succs[v]))
            .map(|&(u, _)| u)
            .filter(|u| !set.contains(u) && device[*u] != from)
            .map(|u| device[u])
            .collect();
        if !near.is_empty() {
            return near[rng.below(near.len())];
        }
    }
    other_device(rng, c.d(), from)
}

/// Moves every operator of `set` to `to` if all can run there; whether anything changed.
fn move_to(device: &mut [usize], capable: &[Vec<usize>], set: &[usize], to: usize) -> bool {
    if set.is_empty() || set.iter().any(|&v| !capable[v].contains(&to)) {
        return false;
    }
    let mut changed = false;
    for &v in set {
        changed |= device[v] != to;
        device[v] = to;
    }
    changed
}

/// The run of critical-path entries around position `i` on the same device, linked by data.
fn run_on_device(path: &[(usize, Cause)], i: usize, device: &[usize]) -> Vec<usize> {
    let d = device[path[i].0];
    let same = |k: usize| device[path[k].0] == d;
    let (mut lo, mut hi) = (i, i);
    while lo > 0 && same(lo - 1) {
        lo -= 1;
    }
    while hi + 1 < path.len() && same(hi + 1) {
        hi += 1;
    }
    path[lo..=hi].iter().map(|x| x.0).collect()
}

/// For each operator, the maximal chain of the graph through it: operators linked by edges
/// where the producer has one consumer and the consumer one producer.
fn graph_chains(c: &Ctx) -> Vec<Vec<usize>> {
    let n = c.n();
    let single_succ = |v: usize| c.dag.succs[v].len() == 1;
    let single_pred = |v: usize| c.dag.preds[v].len() == 1;
    let mut of = vec![Vec::new(); n];
    let mut seen = vec![false; n];
    for &v in &c.dag.topo {
        if seen[v] {
            continue;
        }
        // v is the head of its chain (topological order visits heads first).
        let mut chain = vec![v];
        let mut x = v;
        while single_succ(x) {
            let y = c.dag.succs[x][0].0;
            if !single_pred(y) || seen[y] {
                break;
            }
            chain.push(y);
            x = y;
        }
        for &y in &chain {
            seen[y] = true;
        }
        for &y in &chain {
            of[y] = chain.clone();
        }
    }
    of
}
