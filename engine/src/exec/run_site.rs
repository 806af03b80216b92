//! Where a one-lane CPU session's run executes: on a worker of the kernel pool (the caller
//! waits; [`on_kernel_pool`]) or on the calling thread itself.
//!
//! On the pool, every kernel's parallel loops start inside it, which large models need. But
//! handing a run over wakes a pool worker and puts the caller to sleep until the worker wakes
//! it again: 14–16 µs back to back on the 2-vCPU build machine, where a one-node run computes
//! for well under a microsecond, and milliseconds when other processes hold the CPUs (the woken
//! worker waits for a time slice; `examples/run_overhead.rs` with a pause between runs). On the
//! calling thread a run pays none of that, but a kernel that splits its work hands each of its
//! loops to rayon's pool from outside, once per loop.
//!
//! Which is faster depends on the model, its inputs and the machine's load, so each session
//! measures both: its first run goes to the pool (one-time costs: buffers, packed weights) and
//! is not timed; then the pool is timed, then the calling thread, and from then on each run
//! goes where recent runs were faster. The slower site is timed again at once (a first timing
//! may have met a cold pool), then after [`RETRY_GAP`] runs, a gap that doubles up to
//! [`RETRY_GAP_MAX`] while it stays more than twice as slow, so that a change of load is
//! followed at little cost.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Instant;

use super::kernel_pool::{ThreadOptions, on_kernel_pool};

/// Runs between two timings of the slower site.
pub(crate) const RETRY_GAP: u64 = 64;
/// The longest gap, reached by a site that stays more than twice as slow.
pub(crate) const RETRY_GAP_MAX: u64 = 1024;

/// Where a run executes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Site {
    /// A worker of the kernel pool; the caller waits.
    Pool,
    /// The thread that called `run`.
    Caller,
}

/// One run's site and how its time is recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Choice {
    site: Site,
    timing: Timing,
}

/// What a run's time does to its site's mean.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Timing {
    /// Nothing (the first run, with its one-time costs).
    Ignored,
    /// Folded into the mean (the site the runs go to: it is timed every run).
    Folded,
    /// Replaces the mean (a site's first timing, or a retry of the slower site, timed rarely:
    /// an old mean would take many retries to follow a change; a wrong switch is undone by the
    /// next runs' times), and sets the gap to the next retry.
    Replaces,
}

/// A session's record of how long its runs take on each [`Site`], and the choice it implies.
/// Shared by the threads that run the session (relaxed atomics: a stale reading only delays a
/// switch by a run).
#[derive(Debug, Default)]
pub(crate) struct RunSite {
    runs: AtomicU64,
    /// Exponentially weighted mean run time in ns per site (0: not measured yet).
    pool_ns: AtomicU64,
    caller_ns: AtomicU64,
    /// The run at which the slower site is timed again.
    next_retry: AtomicU64,
    /// The gap after that (0: [`RETRY_GAP`]).
    retry_gap: AtomicU64,
}

impl RunSite {
    /// Runs `op` where this session's recent runs were faster (see the module documentation),
    /// timing it; returns its result and where it ran.
    pub(crate) fn run<R: Send>(
        &self,
        threads: ThreadOptions,
        op: impl FnOnce() -> R + Send,
    ) -> (R, Site) {
        let choice = self.choose();
        let start = Instant::now();
        let result = match choice.site {
            Site::Pool => on_kernel_pool(threads, op),
            Site::Caller => op(),
        };
        self.record(choice, start.elapsed().as_nanos() as u64);
        (result, choice.site)
    }

    fn choose(&self) -> Choice {
        let run = self.runs.fetch_add(1, Relaxed);
        let (pool, caller) = (self.pool_ns.load(Relaxed), self.caller_ns.load(Relaxed));
        let (site, timing) = match (run, pool, caller) {
            (0, _, _) => (Site::Pool, Timing::Ignored),
            (_, 0, _) => (Site::Pool, Timing::Replaces),
            (_, _, 0) => (Site::Caller, Timing::Replaces),
            _ => {
                let (faster, slower) = match caller <= pool {
                    true => (Site::Caller, Site::Pool),
                    false => (Site::Pool, Site::Caller),
                };
                if run >= self.next_retry.load(Relaxed) {
                    self.next_retry.store(run + self.gap(), Relaxed);
                    (slower, Timing::Replaces)
                } else {
                    (faster, Timing::Folded)
                }
            }
        };
        Choice { site, timing }
    }

    /// Records one run's time: folded in with weight 1/4, so that a few runs follow a change,
    /// and at most twice the mean, so that one run held up by the operating system (a
    /// pool worker waiting for a time slice) does not send the next runs to the slower site.
    fn record(&self, choice: Choice, ns: u64) {
        let mean = match choice.site {
            Site::Pool => &self.pool_ns,
            Site::Caller => &self.caller_ns,
        };
        let other = match choice.site {
            Site::Pool => &self.caller_ns,
            Site::Caller => &self.pool_ns,
        };
        let ns = ns.max(1);
        match choice.timing {
            Timing::Ignored => {}
            Timing::Replaces => {
                mean.store(ns, Relaxed);
                let other = other.load(Relaxed);
                if other > 0 {
                    let gap = match ns > 2 * other {
                        true => (2 * self.gap()).min(RETRY_GAP_MAX),
                        false => RETRY_GAP,
                    };
                    self.retry_gap.store(gap, Relaxed);
                }
            }
            Timing::Folded => {
                let old = mean.load(Relaxed);
                mean.store(((3 * old + ns.min(2 * old)) / 4).max(1), Relaxed);
            }
        }
    }

    /// Runs from one timing of the slower site to the next.
    fn gap(&self) -> u64 {
        match self.retry_gap.load(Relaxed) {
            0 => RETRY_GAP,
            gap => gap,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sites of `n` runs whose times are given per site.
    fn sites(site: &RunSite, n: usize, pool_ns: u64, caller_ns: u64) -> Vec<Site> {
        (0..n)
            .map(|_| {
                let choice = site.choose();
                let ns = match choice.site {
                    Site::Pool => pool_ns,
                    Site::Caller => caller_ns,
                };
                site.record(choice, ns);
                choice.site
            })
            .collect()
    }

    #[test]
    fn first_run_untimed_on_the_pool_then_both_sites_are_tried() {
        let site = RunSite::default();
        let first = site.choose();
        assert_eq!(
            first,
            Choice {
                site: Site::Pool,
                timing: Timing::Ignored
            }
        );
        assert_eq!(sites(&site, 2, 10_000, 2_000), [Site::Pool, Site::Caller]);
    }

    #[test]
    fn a_faster_calling_thread_takes_the_runs_and_the_pool_is_retried() {
        let site = RunSite::default();
        let runs = sites(&site, 3 + 4 * RETRY_GAP as usize, 15_000, 10_000);
        let pool_runs = runs[3..].iter().filter(|&&s| s == Site::Pool).count();
        // 1.5x slower: retried at once, then every RETRY_GAP runs, never chosen otherwise.
        assert_eq!(pool_runs, 4);
        assert_eq!(runs.last(), Some(&Site::Caller));
    }

    #[test]
    fn a_much_slower_calling_thread_is_retried_rarely() {
        let site = RunSite::default();
        let n = 3 + 2 * RETRY_GAP_MAX as usize;
        let runs = sites(&site, n, 1_000_000, 5_000_000);
        let caller: Vec<usize> = (0..n).filter(|&i| runs[i] == Site::Caller).collect();
        // The probe at run 2 and a retry at once; each timing more than twice as slow doubles
        // the gap: 128, 256, 512, then 1024 runs.
        assert_eq!(caller, [2, 3, 131, 387, 899, 1923]);
    }

    #[test]
    fn one_retry_that_shows_the_other_site_faster_switches() {
        let site = RunSite::default();
        // The first timed pool run was slow (a cold pool): the calling thread wins...
        sites(&site, 3, 900_000, 170_000);
        // ...until the pool's retry, at once, shows it faster: the runs go there.
        assert_eq!(
            sites(&site, 3, 96_000, 170_000),
            [Site::Pool, Site::Pool, Site::Pool]
        );
    }

    #[test]
    fn one_slow_run_does_not_switch_sites() {
        let site = RunSite::default();
        sites(&site, 10, 100_000, 200_000);
        // One pool run held up for 4 ms: the next run still goes to the pool.
        assert_eq!(sites(&site, 2, 4_000_000, 200_000)[1..], [Site::Pool]);
    }

    #[test]
    fn the_choice_follows_a_change_of_speed() {
        let site = RunSite::default();
        sites(&site, 200, 5_000, 20_000);
        assert_eq!(sites(&site, 1, 5_000, 20_000), [Site::Pool]);
        // The pool slows down (another process holds the CPUs): its own runs show it.
        let after = sites(&site, 20, 200_000, 20_000);
        assert_eq!(after.last(), Some(&Site::Caller));
    }
}
