//! `Qd`, `Sd`, `CommSd`: overflow from the GPU to the CPU (SIR+, SYSTOR '22, seed 003, §4).

use crate::error::{PlacementError, Result};
use crate::graph::DeviceKind;
use crate::policy::common::Ctx;
use crate::schedule::Schedule;

fn fastest(c: &Ctx) -> Vec<usize> {
    (0..c.n())
        .map(|v| {
            (0..c.d())
                .min_by(|&a, &b| c.time[v][a].total_cmp(&c.time[v][b]).then(a.cmp(&b)))
                .unwrap_or(0)
        })
        .collect()
}

fn cpu(c: &Ctx, policy: &'static str) -> Result<usize> {
    (0..c.d())
        .filter(|&d| c.t.devices[d].kind == DeviceKind::Cpu)
        .max_by(|&a, &b| {
            c.t.devices[a]
                .speed
                .total_cmp(&c.t.devices[b].speed)
                .then(b.cmp(&a))
        })
        .ok_or(PlacementError::NotApplicable {
            policy,
            reason: "the topology has no CPU to overflow to".into(),
        })
}

fn finish(c: &Ctx, policy: &str, device: &[usize]) -> Schedule {
    let rank = c.upward_rank();
    c.list_on_devices(policy, device, &c.priority_order(&rank))
}

/// §4.1 QD: simulate the baseline (every task on its fastest device `F_i`), then move a task to
/// the CPU when its CPU service time is below its GPU queueing + service time. One pass, from
/// the baseline's queueing times (the paper's definition).
pub fn qd(c: &Ctx) -> Result<Schedule> {
    let cpu = cpu(c, "qd")?;
    let mut device = fastest(c);
    let base = c.simulate(&finish(c, "qd", &device))?;
    for (v, dv) in device.iter_mut().enumerate() {
        let x = base.ops[v];
        let on_fast = x.finish - x.ready;
        if *dv != cpu && c.time[v][cpu] < on_fast {
            *dv = cpu;
        }
    }
    Ok(finish(c, "qd", &device))
}

/// §4.2 SD: a task goes to the CPU when its slowdown there (CPU − fastest service time) is below
/// the threshold `alpha_us`.
pub fn sd(c: &Ctx, alpha_us: f64) -> Result<Schedule> {
    Ok(finish(c, "sd", &sd_devices(c, alpha_us)?))
}

fn sd_devices(c: &Ctx, alpha_us: f64) -> Result<Vec<usize>> {
    let cpu = cpu(c, "sd")?;
    let f = fastest(c);
    Ok((0..c.n())
        .map(|v| {
            if c.time[v][cpu] - c.time[v][f[v]] < alpha_us {
                cpu
            } else {
                f[v]
            }
        })
        .collect())
}

/// §4.3 Comm+SD (Alg. 1): start from SD; in topological order, a task whose current service time
/// plus the copies to and from neighbours on other devices exceeds its fastest service time plus
/// `alpha_us` returns to its fastest device; repeat until nothing changes or `max_iter` passes.
/// Returns the schedule and the number of passes made.
pub fn comm_sd(c: &Ctx, alpha_us: f64, max_iter: usize) -> Result<(Schedule, usize)> {
    let f = fastest(c);
    let mut t = sd_devices(c, alpha_us)?;
    let mut iters = 0;
    loop {
        let mut changed = false;
        for &i in &c.dag.topo {
            let mut comm = 0.0;
            for &(j, e) in &c.dag.preds[i] {
                if t[j] != t[i] {
                    comm += c.comm(e, t[j], t[i]);
                }
            }
            for &(j, e) in &c.dag.succs[i] {
                if t[j] != t[i] {
                    comm += c.comm(e, t[i], t[j]);
                }
            }
            if c.time[i][t[i]] + comm > c.time[i][f[i]] + alpha_us && t[i] != f[i] {
                t[i] = f[i];
                changed = true;
            }
        }
        iters += 1;
        if !changed || iters >= max_iter.max(1) {
            break;
        }
    }
    Ok((finish(c, "comm_sd", &t), iters))
}
