//! The MILP solvers `Milp` can hand its model to, behind one call: microlp (pure Rust, always
//! built) and HiGHS (feature `highs`, built from source; needs `cmake` and `libclang-dev`).
//! Each gets the same rows, the same warm start and the same time limit, and reports its
//! incumbent, whether it proved it optimal, and the relative gap to its best bound.
//!
//! Measured choice (`benches/results/placement/milp.md`): on 20-operator HIOS graphs, 4 GPUs,
//! 10 s, HiGHS proves most instances in about 2 s where microlp proves none; COIN-OR CBC
//! (through good_lp's `coin_cbc`) was measured too, proved fewer than HiGHS, and was dropped.

use std::collections::HashMap;

use good_lp::solvers::{SolutionStatus, WithInitialSolution, WithTimeLimit};
use good_lp::{Constraint, ProblemVariables, Solution, SolverModel, Variable, VariableDefinition};
use serde::{Deserialize, Serialize};

use crate::error::{PlacementError, Result};

/// Which MILP solver `Milp` (and SortingHat's exact submodels) use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MilpSolver {
    /// microlp: pure Rust, always available, weak on big-M models.
    Microlp,
    /// HiGHS branch-and-cut (feature `highs`).
    Highs,
}

impl MilpSolver {
    /// The strongest solver this build has: HiGHS, else microlp.
    pub fn best_available() -> Self {
        if MilpSolver::Highs.available() {
            MilpSolver::Highs
        } else {
            MilpSolver::Microlp
        }
    }

    /// Whether this build of the crate includes the solver.
    pub fn available(self) -> bool {
        match self {
            MilpSolver::Microlp => true,
            MilpSolver::Highs => cfg!(feature = "highs"),
        }
    }

    /// The solver's name, as in options files and reports.
    pub fn name(self) -> &'static str {
        match self {
            MilpSolver::Microlp => "microlp",
            MilpSolver::Highs => "highs",
        }
    }
}

impl Default for MilpSolver {
    fn default() -> Self {
        MilpSolver::best_available()
    }
}

/// A minimisation model under construction: variables are kept in creation order, which is
/// also the column order a solver working on column indices (HiGHS) sees.
#[derive(Default)]
pub(crate) struct Model {
    vars: ProblemVariables,
    order: Vec<Variable>,
    /// The rows.
    pub rows: Vec<Constraint>,
}

impl Model {
    /// Adds a variable.
    pub fn add(&mut self, def: VariableDefinition) -> Variable {
        let v = self.vars.add(def);
        self.order.push(v);
        v
    }

    /// Adds a row.
    pub fn row(&mut self, c: Constraint) {
        self.rows.push(c);
    }
}

/// What a solve returned.
pub(crate) struct Outcome {
    values: Vec<f64>,
    index: HashMap<Variable, usize>,
    /// Optimality was proven.
    pub optimal: bool,
    /// Relative gap between the incumbent and the solver's best bound, when the solver says.
    pub gap: Option<f64>,
}

impl Outcome {
    /// The incumbent's value of `v`.
    pub fn value(&self, v: Variable) -> f64 {
        self.values[self.index[&v]]
    }
}

/// Minimises `objective` over `model` with `solver`, from the feasible point `warm` when given,
/// stopping after `seconds`.
pub(crate) fn minimise(
    solver: MilpSolver,
    model: Model,
    objective: Variable,
    seconds: f64,
    warm: Option<Vec<(Variable, f64)>>,
) -> Result<Outcome> {
    if !solver.available() {
        return Err(PlacementError::Solver(format!(
            "this build of spillway-placement has no `{0}` solver (enable the `{0}` feature)",
            solver.name()
        )));
    }
    let seconds = seconds.max(0.0);
    let Model { vars, order, rows } = model;
    let index: HashMap<Variable, usize> = order.iter().enumerate().map(|(i, &v)| (v, i)).collect();
    let problem = vars.minimise(objective);
    let (values, optimal, gap) = match solver {
        MilpSolver::Microlp => through_good_lp(
            problem.using(good_lp::microlp),
            rows,
            seconds,
            warm,
            &order,
            |s| s.into_inner().gap(),
        )?,
        #[cfg(feature = "highs")]
        MilpSolver::Highs => {
            solve_highs(problem.using(good_lp::highs), rows, seconds, warm, &index)?
        }
        #[allow(unreachable_patterns)]
        _ => unreachable!("availability checked above"),
    };
    Ok(Outcome {
        values,
        index,
        optimal,
        gap,
    })
}

type Solved = (Vec<f64>, bool, Option<f64>);

/// Solves through good_lp's own wrapper of a solver; `gap` reads the gap off its solution.
fn through_good_lp<M>(
    mut p: M,
    rows: Vec<Constraint>,
    seconds: f64,
    warm: Option<Vec<(Variable, f64)>>,
    order: &[Variable],
    gap: impl FnOnce(M::Solution) -> Option<f64>,
) -> Result<Solved>
where
    M: SolverModel + WithTimeLimit + WithInitialSolution,
    M::Error: std::fmt::Display,
{
    for r in rows {
        p.add_constraint(r);
    }
    let mut p = p.with_time_limit(seconds);
    if let Some(w) = warm {
        p = p.with_initial_solution(w);
    }
    let sol = p
        .solve()
        .map_err(|e| PlacementError::Solver(e.to_string()))?;
    let values = order.iter().map(|&v| sol.value(v)).collect();
    let optimal = matches!(sol.status(), SolutionStatus::Optimal);
    let g = gap(sol);
    Ok((values, optimal, if optimal { Some(0.0) } else { g }))
}

/// HiGHS, driven directly so that its gap can be read: good_lp builds the model; the columns
/// are the variables in creation order.
#[cfg(feature = "highs")]
fn solve_highs(
    mut p: good_lp::solvers::highs::HighsProblem,
    rows: Vec<Constraint>,
    seconds: f64,
    warm: Option<Vec<(Variable, f64)>>,
    index: &HashMap<Variable, usize>,
) -> Result<Solved> {
    use ::highs::HighsModelStatus as S;
    for r in rows {
        p.add_constraint(r);
    }
    let mut m = p
        .try_into_inner()
        .map_err(|e| PlacementError::Solver(e.to_string()))?;
    m.set_option(&b"output_flag"[..], false);
    m.set_option(&b"threads"[..], 1);
    m.set_option(&b"time_limit"[..], seconds);
    m.set_option(&b"mip_rel_gap"[..], 1e-6);
    if let Some(w) = warm {
        let mut col = vec![0.0; index.len()];
        for (v, x) in w {
            col[index[&v]] = x;
        }
        m.set_solution(Some(&col), None, None, None);
    }
    let solved = m
        .try_solve()
        .map_err(|e| PlacementError::Solver(format!("HiGHS: {e:?}")))?;
    let status = solved.status();
    let optimal = match status {
        S::Optimal => true,
        S::ReachedTimeLimit
        | S::ReachedSolutionLimit
        | S::ReachedInterrupt
        | S::ReachedIterationLimit
        | S::ReachedMemoryLimit
        | S::ObjectiveBound
        | S::ObjectiveTarget => false,
        other => return Err(PlacementError::Solver(format!("HiGHS: {other:?}"))),
    };
    if solved.primal_solution_status() != ::highs::HighsSolutionStatus::Feasible {
        return Err(PlacementError::Solver(
            "HiGHS found no feasible point".into(),
        ));
    }
    let gap = solved.mip_gap();
    let values = solved.get_solution().columns().to_vec();
    Ok((
        values,
        optimal,
        Some(if optimal { 0.0 } else { gap }).filter(|g| g.is_finite()),
    ))
}
