//! Every graph family × every policy: ratio to the lower bound and scheduling time, 4 GPUs with
//! 1 and 2 streams per GPU (`placement_study -- --families`).

use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;

use spillway_placement::generate::Family;
use spillway_placement::{Options, Policy, place, simulate};

use crate::{mean_sd, plot};

/// What the families run measures and writes.
pub struct FamilyCfg<'a> {
    /// Seeds per (family, streams) point for the fast policies.
    pub seeds: u64,
    /// Seeds for the policies listed in `slow`.
    pub slow_seeds: u64,
    /// Policies run on `slow_seeds` seeds only.
    pub slow: Vec<Policy>,
    /// Policies.
    pub policies: Vec<Policy>,
    /// Policy options (Auto's budget among them).
    pub opts: Options,
    /// GPUs.
    pub gpus: usize,
    /// Output folder.
    pub out: &'a Path,
    /// Date stamp of the output files.
    pub date: &'a str,
    /// The machine, in words.
    pub machine: &'a str,
}

/// One outcome: (makespan / LB, scheduling ms).
type Outcome = Option<(f64, f64)>;

/// One table cell: (mean ratio, sd, instances, mean scheduling ms).
type Cell = (f64, f64, usize, f64);

fn instance(f: Family, streams: usize, seed: u64, c: &FamilyCfg) -> Vec<Outcome> {
    let g = f.graph(seed);
    let t = f.topology(c.gpus, streams);
    c.policies
        .iter()
        .map(|&p| {
            if c.slow.contains(&p) && seed >= c.slow_seeds {
                return None;
            }
            let t0 = Instant::now();
            let s = place(p, &g, &t, &c.opts).ok()?;
            let ms = t0.elapsed().as_secs_f64() * 1e3;
            let r = simulate(&g, &t, &s).ok()?;
            Some((r.makespan / r.lower_bound, ms))
        })
        .collect()
}

/// Per policy, the outcomes over every seed (seeds spread over the machine's cores).
fn point(f: Family, streams: usize, c: &FamilyCfg) -> Vec<Vec<(f64, f64)>> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(c.seeds as usize)
        .max(1);
    let results: Vec<Vec<Vec<Outcome>>> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..threads)
            .map(|k| {
                sc.spawn(move || {
                    (0..c.seeds)
                        .filter(|s| *s as usize % threads == k)
                        .map(|s| instance(f, streams, s, c))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect()
    });
    let mut per = vec![Vec::new(); c.policies.len()];
    for runs in results.into_iter().flatten() {
        for (i, r) in runs.into_iter().enumerate() {
            if let Some(r) = r {
                per[i].push(r);
            }
        }
    }
    per
}

/// Runs the study and writes `families-<date>.csv`, `.md` and one `.svg` per stream count.
/// Returns the markdown.
pub fn run(c: &FamilyCfg) -> anyhow::Result<String> {
    let started = Instant::now();
    let names: Vec<&str> = c.policies.iter().map(|p| p.name()).collect();
    let mut csv = String::from(
        "family,ops,edges,gpus,streams,policy,instances,ratio_to_lb_mean,ratio_to_lb_sd,ratio_to_lb_max,sched_ms_mean\n",
    );
    // rows[streams][family][policy] = (mean, sd, n, ms)
    let mut table: Vec<Vec<Vec<Cell>>> = Vec::new();
    let stream_counts = [1usize, 2];
    for &streams in &stream_counts {
        let mut per_family = Vec::new();
        for f in Family::ALL {
            let g0 = f.graph(0);
            let per = point(f, streams, c);
            let mut row = Vec::new();
            for (i, runs) in per.iter().enumerate() {
                let ratios: Vec<f64> = runs.iter().map(|r| r.0).collect();
                let (m, sd) = mean_sd(&ratios);
                let mx = ratios.iter().copied().fold(0.0, f64::max);
                let ms = mean_sd(&runs.iter().map(|r| r.1).collect::<Vec<_>>()).0;
                let _ = writeln!(
                    csv,
                    "{},{},{},{},{streams},{},{},{m:.4},{sd:.4},{mx:.4},{ms:.3}",
                    f.name(),
                    g0.ops.len(),
                    g0.edges.len(),
                    c.gpus,
                    names[i],
                    runs.len()
                );
                row.push((m, sd, runs.len(), ms));
            }
            eprintln!(
                "{} streams={streams} done ({:.0} s)",
                f.name(),
                started.elapsed().as_secs_f64()
            );
            per_family.push(row);
        }
        table.push(per_family);
    }
    let stem = format!("families-{}", c.date);
    std::fs::write(c.out.join(format!("{stem}.csv")), &csv)?;
    for (si, &streams) in stream_counts.iter().enumerate() {
        let series: Vec<Vec<(f64, f64, f64)>> = (0..names.len())
            .map(|pi| {
                (0..Family::ALL.len())
                    .map(|fi| {
                        let (m, sd, _, _) = table[si][fi][pi];
                        (fi as f64, m, sd)
                    })
                    .collect()
            })
            .collect();
        let labels: Vec<String> = Family::ALL
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let n = match f {
                    Family::SeriesParallel => "sp",
                    Family::ForkJoin => "fj",
                    _ => f.name(),
                };
                format!("{i} {n}")
            })
            .collect();
        let svg = plot::lines(
            &format!(
                "Makespan / lower bound by graph family, {} GPUs × {streams} stream(s)",
                c.gpus
            ),
            &format!("family: {}", labels.join("  ")),
            "makespan / LB",
            &names,
            &series,
        );
        std::fs::write(c.out.join(format!("{stem}-s{streams}.svg")), svg)?;
    }
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# Every graph family × every policy, against the lower bound — {}\n",
        c.date
    );
    let _ = writeln!(md, "Machine: {}.\n", c.machine);
    let _ = writeln!(
        md,
        "{} GPUs with 1 and 2 streams per GPU; {} seeds per family (0..{}){}. Auto's search: \
         at most {} simulator calls, capped at {} ms wall-clock (the crate's `Options::default()` \
         otherwise; no policy tuned for this run). Makespans from the crate's simulator; LB = \
         `lower_bound` (critical path, work / capacity, resource-weighted work, head–body–tail \
         windows, heads and tails per device that count copies and ancestors' work). \
         Qd/Sd/CommSd need a CPU and Ios/Milp refuse graphs this big, so they are not run.\n",
        c.gpus,
        c.seeds,
        c.seeds,
        if c.slow.is_empty() {
            String::new()
        } else {
            format!(
                ", except {} on seeds 0..{} only (their scheduling time on the big graphs)",
                c.slow
                    .iter()
                    .map(|p| p.name())
                    .collect::<Vec<_>>()
                    .join(", "),
                c.slow_seeds
            )
        },
        c.opts.auto_max_evals,
        c.opts.auto_budget_ms
    );
    let _ = writeln!(
        md,
        "Reproduce: `cargo run --release -p spillway-benches --bin placement_study -- --families \
         --seeds {} --date {} --machine '{}'`{}.\n",
        c.seeds,
        c.date,
        c.machine,
        if c.slow.is_empty() {
            String::new()
        } else {
            format!(
                " --slow {} --slow-seeds {}",
                c.slow
                    .iter()
                    .map(|p| p.name())
                    .collect::<Vec<_>>()
                    .join(","),
                c.slow_seeds
            )
        }
    );
    let _ = writeln!(
        md,
        "How to read it: the ratio is to a lower bound, not to the optimum, so part of every \
         ratio is the bound's own gap, and that gap differs by family (the bound counts copies \
         only along paths, not the parallelism they cost, so it is likely larger on the \
         byte-weighted DNN-like families); compare policies within a row, and families only \
         with that in mind. Sequential, Greedy, Lios, \
         Opara and Nimble use one GPU, so with one stream they all give the sequential makespan. \
         Scheduling times are wall-clock with two seeds scheduled at once on the two cores; \
         Auto stops at its simulator-call budget (deterministic per seed) unless the wall-clock \
         cap comes first. `hios_code` approximates the HIOS script's \
         concurrent-stage latency by the crate's `Resource` model (resource = the script's \
         utilization, 0.6–1.0). The DNN-like families' costs are drawn per operator kind, not \
         profiled.\n"
    );
    let _ = writeln!(md, "| family | ops / edges (seed 0) | machine model |");
    let _ = writeln!(md, "| --- | --- | --- |");
    for f in Family::ALL {
        let g = f.graph(0);
        let model = match f {
            Family::Layered | Family::HiosCode => "1 byte/µs mesh (edge bytes are µs)",
            _ => "25 GB/s, 5 µs mesh (`nvlink_topology`)",
        };
        let _ = writeln!(
            md,
            "| {} | {} / {} | {model} |",
            f.name(),
            g.ops.len(),
            g.edges.len()
        );
    }
    md.push('\n');
    for (si, &streams) in stream_counts.iter().enumerate() {
        let _ = writeln!(
            md,
            "## {} GPUs × {streams} stream{} per GPU: makespan / LB, mean ± sd\n",
            c.gpus,
            if streams > 1 { "s" } else { "" }
        );
        table_header(&mut md, &names);
        for (fi, f) in Family::ALL.iter().enumerate() {
            let _ = write!(md, "| {} |", f.name());
            for &(m, sd, n, _) in &table[si][fi] {
                if n == 0 {
                    let _ = write!(md, " — |");
                } else {
                    let _ = write!(md, " {m:.3} ± {sd:.3} |");
                }
            }
            md.push('\n');
        }
        let _ = writeln!(
            md,
            "\nScheduling time per graph (ms, mean), {streams} stream(s):\n"
        );
        table_header(&mut md, &names);
        for (fi, f) in Family::ALL.iter().enumerate() {
            let _ = write!(md, "| {} |", f.name());
            for &(_, _, n, ms) in &table[si][fi] {
                if n == 0 {
                    let _ = write!(md, " — |");
                } else {
                    let _ = write!(md, " {ms:.2} |");
                }
            }
            md.push('\n');
        }
        md.push('\n');
    }
    let _ = writeln!(
        md,
        "Files: `{stem}.csv` (also instances per cell and the worst ratio), `{stem}-s1.svg`, \
         `{stem}-s2.svg`. Total study time {:.0} s.",
        started.elapsed().as_secs_f64()
    );
    std::fs::write(c.out.join(format!("{stem}.md")), &md)?;
    Ok(md)
}

/// A markdown table's header: a `family` column, then one per policy.
fn table_header(md: &mut String, names: &[&str]) {
    let _ = write!(md, "| family |");
    for n in names {
        let _ = write!(md, " {n} |");
    }
    let _ = write!(md, "\n| --- |");
    for _ in names {
        let _ = write!(md, " --- |");
    }
    md.push('\n');
}
