//! `Milp`'s solvers against each other: on HIOS random graphs small enough for microlp to
//! prove, every solver this build has proves the same optimum; a solver the build lacks is a
//! clear error, not a silent fallback.

use spillway_placement::generate::{LayeredParams, TransferRule, hios_layered, hios_topology};
use spillway_placement::policy::common::Ctx;
use spillway_placement::policy::milp;
use spillway_placement::policy::milp_solver::MilpSolver;
use spillway_placement::*;

const SOLVERS: [MilpSolver; 2] = [MilpSolver::Microlp, MilpSolver::Highs];

fn graph(n: usize, seed: u64) -> CostGraph {
    hios_layered(
        &LayeredParams {
            ops: n,
            layers: (n / 4).max(2),
            edges: 2 * n,
            p: 0.8,
            rule: TransferRule::Max,
        },
        seed,
    )
}

#[test]
fn every_available_solver_proves_the_same_optimum() {
    let t = hios_topology(4, 1);
    for seed in 1..=3 {
        let g = graph(8, seed);
        let c = Ctx::new(&g, &t).unwrap();
        let mut objectives = Vec::new();
        for solver in SOLVERS.into_iter().filter(|s| s.available()) {
            let o = Options {
                milp_solver: solver,
                ..Options::default()
            };
            let r = milp::milp(&c, &o).unwrap();
            assert!(r.optimal, "{} seed {seed}: not proven", solver.name());
            assert_eq!(r.gap, Some(0.0));
            // The schedule is valid and simulates no faster than the model's optimum (the
            // model does not serialize copies on a link; the simulator does).
            let sim = simulate(&g, &t, &r.schedule).unwrap().makespan;
            assert!(sim >= r.objective * (1.0 - 1e-9), "{sim} < {}", r.objective);
            objectives.push((solver.name(), r.objective));
        }
        let (first, best) = objectives[0];
        for &(name, obj) in &objectives[1..] {
            assert!(
                (obj - best).abs() <= 1e-6 * best,
                "seed {seed}: {name} {obj} vs {first} {best}"
            );
        }
    }
}

#[test]
fn highs_is_the_default_when_built_in() {
    let want = if MilpSolver::Highs.available() {
        MilpSolver::Highs
    } else {
        MilpSolver::Microlp
    };
    assert_eq!(Options::default().milp_solver, want);
}

#[test]
fn a_solver_missing_from_the_build_is_a_clear_error() {
    let Some(missing) = SOLVERS.into_iter().find(|s| !s.available()) else {
        // Every solver is compiled in: check the name round-trips instead.
        for s in SOLVERS {
            let json = serde_json::to_string(&s).unwrap();
            assert_eq!(json, format!("\"{}\"", s.name()));
        }
        return;
    };
    let g = graph(6, 1);
    let t = hios_topology(2, 1);
    let c = Ctx::new(&g, &t).unwrap();
    let o = Options {
        milp_solver: missing,
        ..Options::default()
    };
    let err = milp::milp(&c, &o).unwrap_err().to_string();
    assert!(
        err.contains(missing.name()) && err.contains("feature"),
        "{err}"
    );
}
