//! The multi-device executor (SIR+ §6): one worker thread per (device, lane); per-lane
//! lock-free ready queues; per-run atomic pending counts; the worker that finishes a task
//! releases its successors and runs a fused chain inline; work that completes asynchronously
//! (Virtual copies now, CUDA later) is observed through events from a pre-created pool. Idle
//! workers spin briefly, then park. Many runs may be in flight at once: all per-run state lives
//! in [`RunState`], the plan is shared and immutable.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, Instant};

use crossbeam_queue::SegQueue;
use smallvec::SmallVec;
use spillway_kernels::KernelError;
use spillway_kernels::buffer_pool::Pool;
use spillway_kernels::output_buffer::{self, Buffer};

use super::events::{Event, EventPool};
use super::kernel_pool::pinned_pool;
use super::queue::{QueueKind, ReadyQueue};
use super::trace::{TraceEvent, TraceLog};
use crate::error::{Error, Result};
use crate::plan::{ExecutionPlan, Source, TaskId, TaskKind};
use crate::value::Value;

/// How long an idle worker spins before it parks.
const SPIN_ITERATIONS: u32 = 2_000;

/// Per-run switches: `RunOptions::default().with_trace(true)`.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct RunOptions {
    /// Record what ran where and when (a Chrome trace).
    pub trace: bool,
    /// Testing hook: the node with this index fails with an injected error.
    pub inject_failure_at: Option<usize>,
}

impl RunOptions {
    /// Records what ran where and when (a Chrome trace in the run's report).
    pub fn with_trace(mut self, trace: bool) -> Self {
        self.trace = trace;
        self
    }

    /// Testing hook: the node with this index fails with an injected error.
    pub fn with_injected_failure_at(mut self, node: Option<usize>) -> Self {
        self.inject_failure_at = node;
        self
    }
}

struct Job {
    run: Arc<RunState>,
    task: TaskId,
}

/// Everything one run owns.
struct RunState {
    pending: Vec<AtomicU32>,
    readers: Vec<AtomicU32>,
    slots: Vec<Mutex<Option<Value>>>,
    /// The plan's shared buffers; `None` while a value holds the memory.
    buffers: Vec<Mutex<Option<Buffer>>>,
    /// Per device: the pool of values of unknown size.
    pools: Vec<Arc<Pool>>,
    remaining: AtomicUsize,
    failed: AtomicBool,
    error: Mutex<Option<Error>>,
    done: AtomicBool,
    waiter: Thread,
    options: RunOptions,
    /// The caller's run limits, put in force on each lane while it runs a task of this run.
    limits: Option<super::limits::Active>,
    trace: Option<TraceLog>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A finished run's memory: the shared buffers, and the pools by device.
type IdleMemory = (Vec<Option<Buffer>>, Vec<Arc<Pool>>);

struct Shared {
    plan: ExecutionPlan,
    queues: Vec<ReadyQueue<Job>>,
    idle: Vec<AtomicBool>,
    /// Per lane: the thread its worker loop runs on, set by the worker when it starts.
    threads: Vec<OnceLock<Thread>>,
    /// Per device.
    events: Vec<EventPool>,
    /// Per lane: asynchronous work waiting for its event.
    in_flight: Vec<SegQueue<(Event, Job)>>,
    /// Per lane: the intra-op thread pool its kernels run in.
    pools: Vec<Option<rayon::ThreadPool>>,
    /// Shared buffers and pools left by finished runs, taken by the next ones.
    idle_buffers: Mutex<Vec<IdleMemory>>,
    shutdown: AtomicBool,
}

/// Runs an [`ExecutionPlan`] on its own worker threads.
pub struct ParallelExecutor {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for ParallelExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParallelExecutor")
            .field("lanes", &self.shared.plan.lanes.len())
            .finish()
    }
}

impl ParallelExecutor {
    /// Starts one worker per lane. `intra_op_threads` sizes each compute lane's kernel pool,
    /// whose threads are pinned to the lane's own CPUs when `pin`.
    pub fn start(
        plan: ExecutionPlan,
        devices: usize,
        intra_op_threads: usize,
        queue: QueueKind,
        pin: bool,
    ) -> Result<Self> {
        let lanes = plan.lanes.len();
        let mut pools = Vec::with_capacity(lanes);
        let threads = intra_op_threads.max(1);
        // Compute lane `c`'s threads are pinned (when `pin`) to CPUs `c·threads..(c + 1)·threads`.
        let mut first_cpu = 0;
        for lane in &plan.lanes {
            pools.push(if lane.copy_engine {
                None
            } else {
                let pool =
                    pinned_pool(Some(threads), first_cpu, "spillway-intra", pin).map_err(|e| {
                        Error::Internal(format!("cannot start a kernel thread pool: {e}"))
                    })?;
                first_cpu += threads;
                Some(pool)
            });
        }
        let shared = Arc::new(Shared {
            queues: (0..lanes).map(|_| ReadyQueue::new(queue)).collect(),
            idle: (0..lanes).map(|_| AtomicBool::new(false)).collect(),
            threads: (0..lanes).map(|_| OnceLock::new()).collect(),
            events: (0..devices).map(|_| EventPool::new(256)).collect(),
            in_flight: (0..lanes).map(|_| SegQueue::new()).collect(),
            pools,
            idle_buffers: Mutex::new(Vec::new()),
            shutdown: AtomicBool::new(false),
            plan,
        });
        let mut workers = Vec::with_capacity(lanes);
        for lane in 0..lanes {
            let s = shared.clone();
            let l = shared.plan.lanes[lane];
            let name = format!(
                "spillway-{}-{}{}",
                l.device,
                if l.copy_engine { "copy" } else { "lane" },
                l.lane
            );
            // A compute lane's worker loop runs on one of its kernel pool's own threads, so
            // a kernel starts without a cross-thread hand-off and its parallel parts share the
            // pool with it.
            let handle = std::thread::Builder::new()
                .name(name)
                .spawn(move || match &s.pools[lane] {
                    Some(pool) => pool.install(|| worker(&s, lane)),
                    None => worker(&s, lane),
                })
                .map_err(|e| Error::Internal(format!("cannot start a worker thread: {e}")))?;
            workers.push(handle);
        }
        Ok(ParallelExecutor { shared, workers })
    }

    /// The plan this executor runs.
    pub fn plan(&self) -> &ExecutionPlan {
        &self.shared.plan
    }

    /// Runs the plan once. `inputs` are in the graph's input order. Returns the outputs in the
    /// graph's output order, and the trace when asked for.
    pub fn run(
        &self,
        inputs: Vec<Value>,
        options: RunOptions,
    ) -> Result<(Vec<Value>, Option<Vec<TraceEvent>>)> {
        let plan = &self.shared.plan;
        let (buffers, pools) = lock(&self.shared.idle_buffers).pop().unwrap_or_else(|| {
            let devices = plan.slots.iter().map(|s| s.device_index + 1).max();
            (
                (0..plan.buffer_count).map(|_| None).collect(),
                (0..devices.unwrap_or(0)).map(|_| Arc::default()).collect(),
            )
        });
        let run = Arc::new(RunState {
            pending: plan
                .tasks
                .iter()
                .map(|t| AtomicU32::new(t.predecessors))
                .collect(),
            readers: plan
                .slots
                .iter()
                .map(|s| AtomicU32::new(s.readers))
                .collect(),
            slots: plan.slots.iter().map(|_| Mutex::new(None)).collect(),
            buffers: buffers.into_iter().map(Mutex::new).collect(),
            pools,
            remaining: AtomicUsize::new(plan.tasks.len()),
            failed: AtomicBool::new(false),
            error: Mutex::new(None),
            done: AtomicBool::new(plan.tasks.is_empty()),
            waiter: std::thread::current(),
            trace: options.trace.then(TraceLog::new),
            options,
            limits: super::limits::current(),
        });
        for (&slot, t) in plan.input_slots.iter().zip(inputs) {
            *lock(&run.slots[slot]) = Some(t);
        }
        for &t in &plan.sources {
            self.shared.push(Job {
                run: run.clone(),
                task: t,
            });
        }
        while !run.done.load(Ordering::Acquire) {
            std::thread::park();
        }
        if run.failed.load(Ordering::Acquire) {
            return Err(lock(&run.error)
                .take()
                .unwrap_or_else(|| Error::Internal("a run failed without an error".into())));
        }
        let outputs = plan
            .output_sources
            .iter()
            .map(|s| match s {
                Source::Constant(c) => Ok(Value::Tensor(plan.constants[*c].clone())),
                Source::Slot(s) => lock(&run.slots[*s])
                    .clone()
                    .ok_or_else(|| Error::Internal("an output was not computed".into())),
            })
            .collect::<Result<Vec<_>>>()?;
        let trace = run.trace.as_ref().map(TraceLog::take);
        run.pools.iter().for_each(|p| {
            p.end_run(None);
        });
        let buffers = run.buffers.iter().map(|b| lock(b).take()).collect();
        lock(&self.shared.idle_buffers).push((buffers, run.pools.clone()));
        Ok((outputs, trace))
    }
}

impl Drop for ParallelExecutor {
    fn drop(&mut self) {
        self.shared.shutdown.store(true, Ordering::SeqCst);
        for t in self.shared.threads.iter().filter_map(OnceLock::get) {
            t.unpark();
        }
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

impl Shared {
    fn push(&self, job: Job) {
        let lane = self.plan.tasks[job.task].lane;
        self.queues[lane].push(job);
        if self.idle[lane].load(Ordering::SeqCst)
            && let Some(thread) = self.threads[lane].get()
        {
            thread.unpark();
        }
    }

    /// Runs a job and the chain that follows it inline.
    fn run_job(&self, job: Job) {
        let Job { run, task } = job;
        let mut next = Some(task);
        super::limits::scoped(run.limits, || {
            while let Some(t) = next {
                if run.failed.load(Ordering::Acquire) {
                    return;
                }
                next = self.execute(&run, t);
            }
        })
    }

    /// Executes one task; returns the chained successor to run inline, if it became ready.
    fn execute(&self, run: &Arc<RunState>, t: TaskId) -> Option<TaskId> {
        let task = &self.plan.tasks[t];
        let started = run.trace.as_ref().map(|_| Instant::now());
        match &task.kind {
            TaskKind::Node {
                node,
                work,
                inputs,
                declared_inputs,
                outputs,
            } => {
                // Cheap clones: tensors share their buffers.
                let held: SmallVec<[Option<Value>; 4]> = inputs
                    .iter()
                    .map(|s| match s {
                        Some(Source::Slot(s)) => lock(&run.slots[*s]).clone(),
                        Some(Source::Constant(c)) => {
                            Some(Value::Tensor(self.plan.constants[*c].clone()))
                        }
                        None => None,
                    })
                    .collect();
                let args: SmallVec<[Option<&Value>; 4]> = held.iter().map(Option::as_ref).collect();
                let fail = |cause: KernelError| Error::Kernel {
                    node: task.name.clone(),
                    op_type: task.op_type.clone(),
                    cause,
                };
                let result = if let Err(e) = super::limits::check_deadline() {
                    Err(e)
                } else if run.options.inject_failure_at == Some(*node) {
                    Err(fail(KernelError::InvalidValue(
                        "injected failure (testing hook)".into(),
                    )))
                } else if inputs
                    .iter()
                    .zip(&args)
                    .any(|(s, a)| s.is_some() && a.is_none())
                {
                    Err(Error::Internal(format!(
                        "node '{}' ran before its inputs were computed",
                        task.name
                    )))
                } else {
                    let buffer = |s: &Option<usize>| s.and_then(|s| self.plan.slots[s].buffer);
                    let mut offers: SmallVec<[Option<Buffer>; 2]> = outputs
                        .iter()
                        .map(|s| buffer(s).and_then(|b| lock(&run.buffers[b]).take()))
                        .collect();
                    // The worker already runs inside this lane's kernel pool.
                    let result = catch_unwind(AssertUnwindSafe(|| {
                        let pool = outputs
                            .iter()
                            .flatten()
                            .find(|&&s| self.plan.slots[s].pooled)
                            .map(|&s| &run.pools[self.plan.slots[s].device_index]);
                        output_buffer::offer(&mut offers, pool, || {
                            work.run(&args, *declared_inputs)
                        })
                    }));
                    for (s, left) in outputs.iter().zip(offers) {
                        if let (Some(b), Some(left)) = (buffer(s), left) {
                            *lock(&run.buffers[b]) = Some(left);
                        }
                    }
                    match result {
                        Ok(Ok(Ok(values))) => Ok(values),
                        Ok(Ok(Err(cause))) => Err(fail(cause)),
                        Ok(Err(e)) => Err(e),
                        Err(payload) => Err(Error::Panic {
                            context: format!("node '{}' ({})", task.name, task.op_type),
                            message: crate::error::panic_message(&*payload),
                        }),
                    }
                };
                drop(args);
                drop(held);
                let values = match result {
                    Ok(v)
                        if v.len() >= outputs.iter().filter(|o| o.is_some()).count()
                            && v.len() <= outputs.len() =>
                    {
                        v
                    }
                    Ok(v) => {
                        run.fail(Error::Internal(format!(
                            "node '{}' returned {} outputs, it lists {}",
                            task.name,
                            v.len(),
                            outputs.len()
                        )));
                        return None;
                    }
                    Err(e) => {
                        run.fail(e);
                        return None;
                    }
                };
                for (slot, value) in outputs.iter().zip(values) {
                    if let Some(s) = slot {
                        *lock(&run.slots[*s]) = Some(value);
                    }
                }
            }
            TaskKind::Copy { from, to, cost } => {
                let source = lock(&run.slots[*from]).clone();
                let Some(source) = source else {
                    run.fail(Error::Internal(format!(
                        "{}: the source was not computed",
                        task.name
                    )));
                    return None;
                };
                let begin = Instant::now();
                let bytes = source.byte_len();
                // The destination has its own memory: a real copy, never a shared buffer.
                *lock(&run.slots[*to]) = Some(source.deep_copy());
                let deadline = begin + cost.time(bytes);
                if deadline > Instant::now() {
                    let device = self.plan.lanes[task.lane].device_index;
                    if let Some(event) = self.events[device].record(deadline) {
                        if let (Some(log), Some(start)) = (&run.trace, started) {
                            log.push(&self.plan, t, start, deadline);
                        }
                        self.in_flight[task.lane].push((
                            event,
                            Job {
                                run: run.clone(),
                                task: t,
                            },
                        ));
                        return None;
                    }
                    // Every event is in use: complete synchronously.
                    std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
                }
            }
        }
        if let (Some(log), Some(start)) = (&run.trace, started) {
            log.push(&self.plan, t, start, Instant::now());
        }
        self.finish(run, t)
    }

    /// Marks `t` done: frees inputs read for the last time, releases successors.
    fn finish(&self, run: &Arc<RunState>, t: TaskId) -> Option<TaskId> {
        let task = &self.plan.tasks[t];
        for &s in &task.reads {
            if run.readers[s].fetch_sub(1, Ordering::AcqRel) == 1 && !self.plan.slots[s].is_output {
                let value = lock(&run.slots[s]).take();
                let slot = &self.plan.slots[s];
                let Some(Value::Tensor(t)) = value else {
                    continue;
                };
                if let Some(b) = slot.buffer {
                    if let Some(back) = Buffer::reclaim(t) {
                        back.keep_larger_in(&mut lock(&run.buffers[b]));
                    }
                } else if slot.pooled
                    && let Some(back) = Buffer::reclaim(t)
                {
                    run.pools[slot.device_index].give(back);
                }
            }
        }
        let mut inline = None;
        for &s in &task.successors {
            if run.pending[s].fetch_sub(1, Ordering::AcqRel) == 1 {
                if task.chain_next == Some(s) && inline.is_none() {
                    inline = Some(s);
                } else {
                    self.push(Job {
                        run: run.clone(),
                        task: s,
                    });
                }
            }
        }
        if run.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            run.done.store(true, Ordering::Release);
            run.waiter.unpark();
        }
        inline
    }

    /// Completes asynchronous work whose events fired; returns the time until the next one.
    fn poll_in_flight(&self, lane: usize) -> Option<Duration> {
        let device = self.plan.lanes[lane].device_index;
        let pool = &self.events[device];
        let mut soonest: Option<Duration> = None;
        for _ in 0..self.in_flight[lane].len() {
            let Some((event, job)) = self.in_flight[lane].pop() else {
                break;
            };
            if pool.query(event) {
                pool.release(event);
                if !job.run.failed.load(Ordering::Acquire)
                    && let Some(next) = self.finish(&job.run, job.task)
                {
                    self.run_job(Job {
                        run: job.run.clone(),
                        task: next,
                    });
                }
            } else {
                let left = pool.remaining(event);
                soonest = Some(soonest.map_or(left, |s| s.min(left)));
                self.in_flight[lane].push((event, job));
            }
        }
        soonest
    }
}

impl RunState {
    /// Records the first failure and wakes the caller; the run's other tasks are skipped.
    fn fail(&self, error: Error) {
        if !self.failed.swap(true, Ordering::AcqRel) {
            *lock(&self.error) = Some(error);
            self.done.store(true, Ordering::Release);
            self.waiter.unpark();
        }
    }
}

fn worker(shared: &Shared, lane: usize) {
    let _ = shared.threads[lane].set(std::thread::current());
    loop {
        if shared.shutdown.load(Ordering::Acquire) {
            return;
        }
        let next_event = shared.poll_in_flight(lane);
        if let Some(job) = shared.queues[lane].pop() {
            shared.run_job(job);
            continue;
        }
        let mut spins = 0;
        while spins < SPIN_ITERATIONS && shared.queues[lane].is_empty() {
            std::hint::spin_loop();
            spins += 1;
        }
        if !shared.queues[lane].is_empty() {
            continue;
        }
        shared.idle[lane].store(true, Ordering::SeqCst);
        if shared.queues[lane].is_empty() && !shared.shutdown.load(Ordering::SeqCst) {
            match next_event {
                Some(wait) => std::thread::park_timeout(wait),
                None => std::thread::park(),
            }
        }
        shared.idle[lane].store(false, Ordering::SeqCst);
    }
}
