//! `HiosMr`: mapping-recording DP (HIOS, seed 000, Alg. 3) followed by Alg. 2.

use crate::error::Result;
use crate::policy::common::Ctx;
use crate::policy::hios_lp::{hios_priority, hios_weights};
use crate::policy::hios_window::parallelize;
use crate::schedule::Schedule;

/// Alg. 3 lines 1–26: the device of every operator.
///
/// Operators are taken in decreasing priority; `t[i][j]` is the earliest finish of `v_i` on
/// device `j` over the recorded schedules of `v_1..v_{i−1}` (one per device of `v_{i−1}`), and
/// `g[i][j]` the device of `v_{i−1}` in that record. Choices the paper leaves open: `v_1` may go
/// on any device (the paper fixes GPU 1, which is the same for identical GPUs), devices that
/// cannot run an operator are skipped, and `min(M, i)` is replaced by all devices when they
/// differ (the restriction only breaks symmetry between identical GPUs).
#[allow(clippy::needless_range_loop)]
pub fn mr_mapping(c: &Ctx) -> Vec<usize> {
    let n = c.n();
    let m = c.d();
    if n == 0 {
        return Vec::new();
    }
    let (vw, ew) = hios_weights(c);
    let prio = hios_priority(c, &vw, &ew);
    let order = c.priority_order(&prio);
    let mut pos = vec![0usize; n];
    for (i, &v) in order.iter().enumerate() {
        pos[v] = i;
    }
    let homogeneous = (0..n).all(|v| c.time[v].iter().all(|&x| x == c.time[v][0]));
    let mut t = vec![vec![f64::INFINITY; m]; n];
    let mut g = vec![vec![usize::MAX; m]; n];
    for j in 0..m {
        if c.time[order[0]][j].is_finite() && (!homogeneous || j == 0) {
            t[0][j] = c.time[order[0]][j];
        }
    }
    let mut fin = vec![0.0f64; n];
    let mut dev = vec![0usize; n];
    for i in 1..n {
        let v = order[i];
        let jmax = if homogeneous { m.min(i + 1) } else { m };
        let kmax = if homogeneous { m.min(i) } else { m };
        for j in 0..jmax {
            if !c.time[v][j].is_finite() {
                continue;
            }
            for k in 0..kmax {
                if !t[i - 1][k].is_finite() {
                    continue;
                }
                let mut mm = k;
                let mut tk = 0.0f64;
                for l in (0..i).rev() {
                    fin[l] = t[l][mm];
                    dev[l] = mm;
                    if mm == j {
                        tk = tk.max(fin[l]);
                    }
                    mm = g[l][mm];
                    if mm == usize::MAX {
                        break;
                    }
                }
                for &(u, e) in &c.dag.preds[v] {
                    let l = pos[u];
                    let arr = if dev[l] == j {
                        fin[l]
                    } else {
                        fin[l] + c.comm(e, dev[l], j)
                    };
                    tk = tk.max(arr);
                }
                let f = tk + c.time[v][j];
                if f < t[i][j] {
                    t[i][j] = f;
                    g[i][j] = k;
                }
            }
        }
    }
    let mut mm = (0..m)
        .min_by(|&a, &b| t[n - 1][a].total_cmp(&t[n - 1][b]).then(a.cmp(&b)))
        .unwrap_or(0);
    let mut device = vec![0usize; n];
    for i in (0..n).rev() {
        device[order[i]] = mm;
        if i > 0 {
            mm = g[i][mm];
        }
    }
    device
}

/// HIOS-MR: Alg. 3 then Alg. 2 with window `w`.
pub fn hios_mr(c: &Ctx, w: usize) -> Result<Schedule> {
    let device = mr_mapping(c);
    parallelize(c, "hios_mr", &device, w)
}
