//! Insertion-based earliest-finish-time placement, the step HEFT, CPOP, PEFT and lookahead HEFT
//! share: each device is one processor with a sorted list of busy intervals, and an operator may
//! go into an idle gap between operators already placed.

use crate::policy::common::Ctx;
use crate::policy::heft::earliest_gap;
use crate::schedule::Schedule;

/// A partial insertion-based list schedule.
#[derive(Clone)]
pub struct Eft<'c, 'a> {
    c: &'c Ctx<'a>,
    busy: Vec<Vec<(f64, f64)>>,
    /// Device of each placed operator.
    pub device: Vec<usize>,
    /// Estimated start of each placed operator.
    pub start: Vec<f64>,
    /// Estimated finish of each placed operator.
    pub finish: Vec<f64>,
    /// Operators in the order they were placed.
    pub placed: Vec<usize>,
}

impl<'c, 'a> Eft<'c, 'a> {
    /// Nothing placed yet.
    pub fn new(c: &'c Ctx<'a>) -> Self {
        let n = c.n();
        Eft {
            c,
            busy: vec![Vec::new(); c.d()],
            device: vec![0; n],
            start: vec![0.0; n],
            finish: vec![0.0; n],
            placed: Vec::with_capacity(n),
        }
    }

    /// When every input of `v` can be on device `d` (its placed producers only).
    pub fn ready(&self, v: usize, d: usize, placed: &[bool]) -> f64 {
        self.c.dag.preds[v]
            .iter()
            .filter(|&&(u, _)| placed[u])
            .map(|&(u, e)| {
                self.finish[u]
                    + if self.device[u] == d {
                        0.0
                    } else {
                        self.c.comm(e, self.device[u], d)
                    }
            })
            .fold(0.0, f64::max)
    }

    /// `(start, finish)` of `v` on `d` in the earliest gap (`INFINITY` where it cannot run).
    pub fn slot(&self, v: usize, d: usize, placed: &[bool]) -> (f64, f64) {
        let w = self.c.time[v][d];
        if !w.is_finite() {
            return (f64::INFINITY, f64::INFINITY);
        }
        let s = earliest_gap(&self.busy[d], self.ready(v, d, placed), w);
        (s, s + w)
    }

    /// The device of earliest finish for `v` (ties: lowest id) and its slot.
    pub fn best(&self, v: usize, placed: &[bool]) -> (usize, f64, f64) {
        let mut best = (0, f64::INFINITY, f64::INFINITY);
        for d in 0..self.c.d() {
            let (s, f) = self.slot(v, d, placed);
            if f < best.2 {
                best = (d, s, f);
            }
        }
        best
    }

    /// Places `v` on `d` at `start`..`finish`.
    pub fn place(&mut self, v: usize, d: usize, start: f64, finish: f64) {
        self.device[v] = d;
        self.start[v] = start;
        self.finish[v] = finish;
        let pos = self.busy[d].partition_point(|x| x.0 <= start);
        self.busy[d].insert(pos, (start, finish));
        self.placed.push(v);
    }

    /// The schedule: placed devices, launched in order of estimated start (ties: placement
    /// order), which is topological when every operator was placed after its producers.
    pub fn schedule(&self, policy: &str) -> Schedule {
        let n = self.c.n();
        let mut pos = vec![0; n];
        for (i, &v) in self.placed.iter().enumerate() {
            pos[v] = i;
        }
        let mut seq = self.placed.clone();
        seq.sort_by(|&a, &b| {
            self.start[a]
                .total_cmp(&self.start[b])
                .then(pos[a].cmp(&pos[b]))
        });
        Schedule::from_sequence(policy, &self.device, &vec![0; n], &seq)
    }
}

/// Takes operators in a topological order that always picks the ready operator of highest
/// `prio`, and lets `choose` place each one.
pub fn list_schedule<'c, 'a>(
    c: &'c Ctx<'a>,
    prio: &[f64],
    mut choose: impl FnMut(&mut Eft<'c, 'a>, usize, &[bool]),
) -> Eft<'c, 'a> {
    let mut e = Eft::new(c);
    let mut placed = vec![false; c.n()];
    for v in c.priority_order(prio) {
        choose(&mut e, v, &placed);
        placed[v] = true;
    }
    e
}
