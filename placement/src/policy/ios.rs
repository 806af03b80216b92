//! `Ios`: the exact stage DP of IOS (Ding et al., MLSys 2021), the baseline of HIOS and LIOS.

use std::collections::HashMap;

use crate::error::{PlacementError, Result};
use crate::graph::reaches;
use crate::policy::common::Ctx;
use crate::policy::hios_window::build;
use crate::schedule::Schedule;

/// Largest graph accepted: the DP is exponential in the graph's width.
pub const IOS_MAX_OPS: usize = 64;

/// IOS on the single best device. `cost(R)` for the set `R` of operators still to run is the
/// minimum over last stages `S` of `cost(R − S) + t(S)`, where `S` is a non-empty subset of the
/// operators of `R` with no successor in `R` (so `S` is independent), with pruning: at most `r`
/// operators per stage (and no more than the device's streams), and only the `s` longest such "ending" operators considered per state.
/// t(S) is the graph's stage time (table, else model). Choice: IOS's groups (chains inside a
/// stage) are not modelled; each stage member is one operator.
///
/// Refuses graphs over `max_ops` (≤ [`IOS_MAX_OPS`]) with [`PlacementError::TooLarge`].
pub fn ios(c: &Ctx, max_ops: usize, r: usize, s: usize) -> Result<Schedule> {
    let n = c.n();
    let limit = max_ops.min(IOS_MAX_OPS);
    if n > limit {
        return Err(PlacementError::TooLarge {
            policy: "ios",
            n,
            limit,
        });
    }
    let d = c.best_single_device(true)?;
    let reach = c.dag.reachability();
    let succ_mask: Vec<u64> = (0..n)
        .map(|u| {
            (0..n)
                .filter(|&v| reaches(&reach[u], v))
                .fold(0u64, |m, v| m | 1 << v)
        })
        .collect();
    let model = crate::concurrency::GraphConcurrency::new(c.g, &c.dag);
    let dev = &c.t.devices[d];
    let mut memo: HashMap<u64, (f64, u64)> = HashMap::new();
    let full = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
    let r = r.min(c.t.devices[d].streams);
    let mut dp = Dp {
        c,
        succ_mask: &succ_mask,
        memo: &mut memo,
        r: r.max(1),
        s: s.max(1),
        d,
        dev,
        model: &model,
    };
    dp.cost(full);
    let mut stages: Vec<Vec<usize>> = Vec::new();
    let mut rem = full;
    while rem != 0 {
        let (_, last) = memo.get(&rem).copied().unwrap_or((0.0, rem));
        stages.push((0..n).filter(|&v| last >> v & 1 == 1).collect());
        rem &= !last;
    }
    stages.reverse();
    let mut per_dev = vec![Vec::new(); c.d()];
    per_dev[d] = stages;
    build(c, "ios", &vec![d; n], &per_dev)
}

struct Dp<'a, 'b> {
    c: &'a Ctx<'a>,
    succ_mask: &'a [u64],
    memo: &'b mut HashMap<u64, (f64, u64)>,
    r: usize,
    s: usize,
    d: usize,
    dev: &'a crate::topology::Device,
    model: &'a crate::concurrency::GraphConcurrency<'a>,
}

impl Dp<'_, '_> {
    fn cost(&mut self, rem: u64) -> f64 {
        if rem == 0 {
            return 0.0;
        }
        if let Some(&(v, _)) = self.memo.get(&rem) {
            return v;
        }
        let mut ending: Vec<usize> = (0..64)
            .filter(|&v| rem >> v & 1 == 1 && self.succ_mask[v] & rem == 0)
            .collect();
        ending.sort_by(|&a, &b| {
            self.c.time[b][self.d]
                .total_cmp(&self.c.time[a][self.d])
                .then(a.cmp(&b))
        });
        ending.truncate(self.s);
        let k = ending.len();
        let mut best = (f64::INFINITY, 0u64);
        for sub in 1u64..(1u64 << k) {
            if sub.count_ones() as usize > self.r {
                continue;
            }
            let ops: Vec<usize> = (0..k)
                .filter(|&i| sub >> i & 1 == 1)
                .map(|i| ending[i])
                .collect();
            let alone: Vec<f64> = ops.iter().map(|&v| self.c.time[v][self.d]).collect();
            let ts = self.model.stage_time(self.dev, &ops, &alone);
            let mask = ops.iter().fold(0u64, |m, &v| m | 1 << v);
            let total = self.cost(rem & !mask) + ts;
            if total < best.0 {
                best = (total, mask);
            }
        }
        self.memo.insert(rem, best);
        best.0
    }
}
