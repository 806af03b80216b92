//! The thread pools that run a one-lane CPU session's kernels: one per process with its
//! workers unpinned, and one with a worker pinned to each CPU the process may use, for the
//! sessions that ask for pinning ([`ThreadOptions::pin`], off by default: a library does not
//! pin its host application's threads unasked).
//!
//! Unpinned, the kernel threads wander between CPUs whenever they sleep, which on a virtual
//! machine means each node of a run waits for a cold CPU to wake: in a probe loop, googlenet
//! with 2 threads took 36 ms per run with a 100 ms pause between runs unpinned and 21–24 ms
//! pinned (20 ms back to back either way). ONNX Runtime keeps its intra-op threads busy
//! between nodes instead.
//! The pools' size is rayon's default (`RAYON_NUM_THREADS`, else one thread per CPU). The
//! parallel executor's per-lane pools are pinned the same way when asked ([`pinned_pool`]),
//! each lane on its own CPUs.
//!
//! While a run is on the pool ([`on_kernel_pool`]), its other workers wait for work spinning
//! instead of sleeping ([`with_workers_awake`]). A rayon worker with nothing to do sleeps after
//! a few microseconds, and waking it again took 20–80 µs on these virtual machines
//! (`examples/wake_latency.rs`), paid by every kernel that starts after a serial stretch (a
//! `Concat`, a padded-image copy). ONNX Runtime's intra-op threads spin the same way. A
//! worker that finds nothing for a millisecond stops spinning ([`IDLE_SPIN`]: without that
//! bound, runs from several threads at once could deadlock).
//! [`ThreadOptions::spin`] off lets them sleep.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How a session's kernel threads behave.
///
/// ```
/// use spillway::ThreadOptions;
///
/// let options = ThreadOptions::default();
/// assert!(options.spin && !options.pin);
/// let pinned = options.with_pin(true);
/// assert!(pinned.pin);
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadOptions {
    /// While a run is on the kernel pool, its idle workers wait for work spinning instead of
    /// sleeping (default on): a kernel after a serial stretch
    /// starts without waking them, at the cost of CPU time burnt between kernels.
    pub spin: bool,
    /// Each kernel thread is pinned to its own CPU (default off). Faster on virtual machines
    /// that wake cold CPUs slowly, but it ties the host application's CPUs up: ask for it.
    pub pin: bool,
}

impl Default for ThreadOptions {
    fn default() -> Self {
        ThreadOptions {
            spin: true,
            pin: false,
        }
    }
}

impl ThreadOptions {
    /// Sets [`ThreadOptions::spin`].
    pub fn with_spin(mut self, spin: bool) -> Self {
        self.spin = spin;
        self
    }

    /// Sets [`ThreadOptions::pin`].
    pub fn with_pin(mut self, pin: bool) -> Self {
        self.pin = pin;
        self
    }
}

/// The process-wide kernel pool, its workers pinned or not, built on first use; `None` when it
/// cannot be built (the caller then runs on rayon's global pool).
pub fn kernel_pool(pin: bool) -> Option<&'static rayon::ThreadPool> {
    static PINNED: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();
    static UNPINNED: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();
    let pool = match pin {
        true => &PINNED,
        false => &UNPINNED,
    };
    pool.get_or_init(|| pinned_pool(None, 0, "spillway-kernel", pin).ok())
        .as_ref()
}

/// A pool of `threads` workers (rayon's default count when `None`), named `name-i`, worker
/// `i` pinned to the `(first + i)`-th CPU this process may use (cycling through them) when
/// `pin`. The parallel executor gives each lane its own CPUs this way.
pub fn pinned_pool(
    threads: Option<usize>,
    first: usize,
    name: &'static str,
    pin: bool,
) -> Result<rayon::ThreadPool, rayon::ThreadPoolBuildError> {
    let cpus = if pin { allowed_cpus() } else { Vec::new() };
    let mut builder = rayon::ThreadPoolBuilder::new()
        .thread_name(move |i| format!("{name}-{i}"))
        .start_handler(move |i| {
            if !cpus.is_empty() {
                pin_current_thread(cpus[(first + i) % cpus.len()]);
            }
        });
    if let Some(n) = threads {
        builder = builder.num_threads(n);
    }
    builder.build()
}

/// Runs `op` on a worker of the kernel pool `threads` ask for (pinned or not; the caller
/// waits), so that every kernel's parallel loops start inside the pool instead of handing work
/// over from outside it; with [`ThreadOptions::spin`], the pool's other workers stay awake
/// meanwhile ([`with_workers_awake`]).
pub fn on_kernel_pool<R: Send>(threads: ThreadOptions, op: impl FnOnce() -> R + Send) -> R {
    match (kernel_pool(threads.pin), threads.spin) {
        (Some(pool), true) => pool.install(|| with_workers_awake(op)),
        (Some(pool), false) => pool.install(op),
        (None, _) => rayon::scope(|_| op()),
    }
}

/// Runs `op` on this rayon worker while the other workers of its pool look for work without
/// pause (taking any the run offers, as rayon's idle loop does) instead of going to sleep,
/// until `op` returns or unwinds. Outside a pool or with one thread, just runs `op`.
pub fn with_workers_awake<R>(op: impl FnOnce() -> R) -> R {
    let owner = rayon::current_thread_index();
    let Some(owner) = owner.filter(|_| rayon::current_num_threads() > 1) else {
        return op();
    };
    /// Ends the spinning when `op` returns and when it unwinds.
    struct Stop<'a>(&'a AtomicBool);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Release);
        }
    }
    let done = AtomicBool::new(false);
    rayon::in_place_scope(|scope| {
        scope.spawn_broadcast(|_, worker| {
            // The owner's copy runs whenever it next looks for work: it has none to wait for.
            if worker.index() != owner {
                take_work_until(&done);
            }
        });
        let _stop = Stop(&done);
        op()
    })
}

/// How long a spinning worker goes without finding work before it gives up and returns to
/// rayon's idle loop (where it sleeps). Gaps between a run's parallel kernels are shorter.
///
/// The bound is what keeps concurrent runs from deadlocking, not only a saving: a spinner
/// executes whatever the pool offers, so it can end up on top of a job that its own run waits
/// for (a piece of the run's loop, stolen before the spinner started; another run taken while
/// spinning, whose spinners nest the same way), and then only its return lets that job finish.
const IDLE_SPIN: Duration = Duration::from_millis(1);

/// Executes the pool's pending jobs as they appear until `done` is set or nothing has
/// appeared for [`IDLE_SPIN`], yielding the CPU to other processes now and then.
fn take_work_until(done: &AtomicBool) {
    let mut idle = 0u32;
    let mut idle_since = None;
    while !done.load(Ordering::Acquire) {
        if let Some(rayon::Yield::Executed) = rayon::yield_now() {
            idle = 0;
            idle_since = None;
            continue;
        }
        idle = idle.wrapping_add(1);
        if idle.is_multiple_of(64) {
            if idle_since.get_or_insert_with(Instant::now).elapsed() >= IDLE_SPIN {
                return;
            }
            if idle.is_multiple_of(4096) {
                std::thread::yield_now();
            }
        }
        std::hint::spin_loop();
    }
}

#[cfg(target_os = "linux")]
mod affinity {
    /// `cpu_set_t`: 1024 CPUs.
    pub type CpuSet = [u64; 16];

    unsafe extern "C" {
        pub fn sched_getaffinity(pid: i32, size: usize, mask: *mut CpuSet) -> i32;
        pub fn sched_setaffinity(pid: i32, size: usize, mask: *const CpuSet) -> i32;
    }
}

/// The CPUs this process may run on (empty when unknown).
#[cfg(target_os = "linux")]
fn allowed_cpus() -> Vec<usize> {
    let mut set: affinity::CpuSet = [0; 16];
    // SAFETY: `set` is a writable cpu_set_t of the size passed.
    let ok = unsafe { affinity::sched_getaffinity(0, size_of_val(&set), &mut set) } == 0;
    if !ok {
        return Vec::new();
    }
    (0..set.len() * 64)
        .filter(|&c| set[c / 64] & (1 << (c % 64)) != 0)
        .collect()
}

/// Pins the calling thread to `cpu`; a failure leaves it unpinned (pinning only helps speed).
#[cfg(target_os = "linux")]
fn pin_current_thread(cpu: usize) {
    let mut set: affinity::CpuSet = [0; 16];
    if cpu < set.len() * 64 {
        set[cpu / 64] |= 1 << (cpu % 64);
        // SAFETY: `set` is a valid cpu_set_t of the size passed; pid 0 is this thread.
        let _ = unsafe { affinity::sched_setaffinity(0, size_of_val(&set), &set) };
    }
}

#[cfg(not(target_os = "linux"))]
fn allowed_cpus() -> Vec<usize> {
    Vec::new()
}

#[cfg(not(target_os = "linux"))]
fn pin_current_thread(_cpu: usize) {}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use rayon::prelude::*;

    use super::with_workers_awake;

    fn pool(threads: usize) -> rayon::ThreadPool {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("a pool")
    }

    #[test]
    fn the_run_gets_the_other_workers_and_its_result_back() {
        let workers = std::sync::Mutex::new(std::collections::HashSet::new());
        let sum: usize = pool(3).install(|| {
            with_workers_awake(|| {
                (0..10_000usize)
                    .into_par_iter()
                    .with_max_len(1)
                    .map(|i| {
                        workers
                            .lock()
                            .unwrap()
                            .insert(rayon::current_thread_index());
                        std::thread::sleep(std::time::Duration::from_micros(i as u64 % 3));
                        i
                    })
                    .sum()
            })
        });
        assert_eq!(sum, 10_000 * 9_999 / 2);
        // The spinning workers took part of the loop.
        assert!(workers.lock().unwrap().len() > 1, "{workers:?}");
    }

    #[test]
    fn a_panicking_run_stops_the_spinning_workers() {
        let pool = pool(2);
        let caught = pool.install(|| {
            std::panic::catch_unwind(|| with_workers_awake(|| panic!("kernel failed")))
        });
        assert!(caught.is_err());
        // The pool is free again: the spinner returned when the run unwound.
        let ran = AtomicUsize::new(0);
        pool.install(|| {
            rayon::join(
                || ran.fetch_add(1, Ordering::Relaxed),
                || ran.fetch_add(1, Ordering::Relaxed),
            )
        });
        assert_eq!(ran.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn runs_nest_and_run_concurrently() {
        let pool = pool(2);
        let total: usize = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..4)
                .map(|t| {
                    let pool = &pool;
                    scope.spawn(move || {
                        pool.install(|| {
                            with_workers_awake(|| {
                                with_workers_awake(|| {
                                    (0..1000usize).into_par_iter().map(|i| i * t).sum::<usize>()
                                })
                            })
                        })
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap())
                .sum::<usize>()
        });
        assert_eq!(total, (0..4).sum::<usize>() * 999 * 1000 / 2);
    }

    /// Runs from several threads at once on a pool wider than the CPUs, each a chain of
    /// parallel loops with nested joins: spinners of one run pick up other runs and pieces of
    /// their own run's loops, nested on their stacks. Before spinners returned when idle, this
    /// deadlocked within a few dozen runs (found on a 16-core GPU machine, then here with 4
    /// workers); a watchdog turns a hang into a failure.
    #[test]
    fn concurrent_runs_with_nested_loops_never_hang() {
        let (sender, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let pool = pool(6);
            let total: usize = std::thread::scope(|scope| {
                let handles: Vec<_> = (0..4)
                    .map(|t| {
                        let pool = &pool;
                        scope.spawn(move || {
                            (0..150)
                                .map(|r| {
                                    pool.install(|| {
                                        with_workers_awake(|| {
                                            (0..4)
                                                .map(|_| {
                                                    (0..24usize)
                                                        .into_par_iter()
                                                        .with_max_len(1)
                                                        .map(|i| {
                                                            let (a, b) = rayon::join(
                                                                || i * t,
                                                                || {
                                                                    (0..50usize)
                                                                        .into_par_iter()
                                                                        .sum::<usize>()
                                                                },
                                                            );
                                                            a + b + r
                                                        })
                                                        .sum::<usize>()
                                                })
                                                .sum::<usize>()
                                        })
                                    })
                                })
                                .sum::<usize>()
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).sum()
            });
            let _ = sender.send(total);
        });
        let total = finished
            .recv_timeout(std::time::Duration::from_secs(120))
            .expect("concurrent runs hung");
        // Per run: 4 loops of 24 × (i·t + 1225 + r).
        let per = |t: usize, r: usize| 4 * (276 * t + 24 * (1225 + r));
        let want: usize = (0..4).flat_map(|t| (0..150).map(move |r| per(t, r))).sum();
        assert_eq!(total, want);
    }

    #[test]
    fn outside_a_pool_the_run_is_just_run() {
        assert_eq!(
            std::thread::spawn(|| with_workers_awake(|| 7))
                .join()
                .unwrap(),
            7
        );
    }
}

#[cfg(all(test, target_os = "linux"))]
mod pinning_tests {
    use super::{ThreadOptions, allowed_cpus, on_kernel_pool};

    /// A kernel thread runs on every CPU the process may use unless pinning is asked for.
    #[test]
    fn kernel_threads_are_pinned_only_when_asked() {
        assert!(!ThreadOptions::default().pin);
        let all = allowed_cpus();
        let unpinned = on_kernel_pool(ThreadOptions::default(), allowed_cpus);
        assert_eq!(unpinned, all, "a default kernel thread's CPUs");
        if all.len() > 1 {
            let pinned = ThreadOptions::default().with_pin(true);
            assert_eq!(
                on_kernel_pool(pinned, allowed_cpus).len(),
                1,
                "a pinned thread's CPUs"
            );
        }
    }
}
