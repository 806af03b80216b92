//! One model's bounded admission queue and the worker threads that run it.
//!
//! A request is admitted only while fewer than `capacity` requests wait (otherwise it is
//! refused at once); each of the model's `instances` worker threads — plain OS threads, never
//! the async runtime's — takes the oldest waiting request and runs it. Every admitted request
//! is in exactly one state at a time, changed by compare-and-swap, so it is either run once or
//! dropped once, never both:
//!
//! ```text
//! QUEUED ──worker──▶ RUNNING ──▶ answered with the run's result
//!    │ deadline passed (waiter's timer or the worker's check) ─▶ EXPIRED, answered 504
//!    └ waiter went away (client disconnected) ──────────────────▶ CANCELLED, never runs
//! ```
//!
//! Closing the queue (shutdown) refuses new requests; the workers finish every request
//! already admitted, then exit.

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use spillway::Tensor;
use tokio::sync::oneshot;

use crate::error::ServeError;
use crate::metrics::ModelMetrics;
use crate::model::{Model, RunError};

const QUEUED: u8 = 0;
const RUNNING: u8 = 1;
const EXPIRED: u8 = 2;
const CANCELLED: u8 = 3;

/// What a worker answers an admitted request with.
#[derive(Debug)]
pub(crate) enum JobResult {
    /// The run's outputs or error.
    Ran(Result<Vec<(String, Tensor)>, RunError>),
    /// The deadline passed before the run could start.
    Expired,
}

struct Job {
    inputs: Vec<(String, Tensor)>,
    deadline: Option<Instant>,
    admitted: Instant,
    state: Arc<AtomicU8>,
    reply: oneshot::Sender<JobResult>,
    span: tracing::Span,
}

#[derive(Default)]
struct Inner {
    jobs: VecDeque<Job>,
    closed: bool,
}

/// A model's admission queue.
pub(crate) struct ModelQueue {
    model: String,
    capacity: usize,
    inner: Mutex<Inner>,
    ready: Condvar,
    metrics: Arc<ModelMetrics>,
}

impl ModelQueue {
    /// An open queue holding at most `capacity` waiting requests.
    pub(crate) fn new(model: String, capacity: usize, metrics: Arc<ModelMetrics>) -> Self {
        ModelQueue {
            model,
            capacity,
            inner: Mutex::new(Inner::default()),
            ready: Condvar::new(),
            metrics,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn set_depth(&self, inner: &Inner) {
        self.metrics
            .queue_depth
            .store(inner.jobs.len() as u64, Ordering::Relaxed);
    }

    /// Admits a request, or refuses it at once: [`ServeError::QueueFull`] when `capacity`
    /// requests wait, [`ServeError::ShuttingDown`] once the queue is closed.
    pub(crate) fn submit(
        self: &Arc<Self>,
        inputs: Vec<(String, Tensor)>,
        deadline: Option<Instant>,
    ) -> Result<Pending, ServeError> {
        let (reply, rx) = oneshot::channel();
        let state = Arc::new(AtomicU8::new(QUEUED));
        let admitted = Instant::now();
        {
            let mut inner = self.lock();
            if inner.closed {
                return Err(ServeError::ShuttingDown);
            }
            if inner.jobs.len() >= self.capacity {
                return Err(ServeError::QueueFull {
                    model: self.model.clone(),
                    capacity: self.capacity,
                });
            }
            inner.jobs.push_back(Job {
                inputs,
                deadline,
                admitted,
                state: state.clone(),
                reply,
                span: tracing::Span::current(),
            });
            self.set_depth(&inner);
        }
        self.ready.notify_one();
        Ok(Pending {
            queue: self.clone(),
            state,
            rx,
            deadline,
            admitted,
        })
    }

    /// Refuses every later request; the workers drain what was admitted, then exit.
    pub(crate) fn close(&self) {
        self.lock().closed = true;
        self.ready.notify_all();
    }

    /// Takes a request out of the queue without running it (it expired or its client left).
    fn remove(&self, state: &Arc<AtomicU8>) {
        let mut inner = self.lock();
        inner.jobs.retain(|j| !Arc::ptr_eq(&j.state, state));
        self.set_depth(&inner);
    }

    /// The next request, or `None` once the queue is closed and empty.
    fn next(&self) -> Option<Job> {
        let mut inner = self.lock();
        loop {
            if let Some(job) = inner.jobs.pop_front() {
                self.set_depth(&inner);
                return Some(job);
            }
            if inner.closed {
                return None;
            }
            inner = self
                .ready
                .wait(inner)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// A worker: runs requests until the queue is closed and empty.
    pub(crate) fn work(&self, model: &dyn Model) {
        while let Some(job) = self.next() {
            if job
                .state
                .compare_exchange(QUEUED, RUNNING, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                continue; // expired or cancelled by its waiter, which answered for it
            }
            self.metrics.queue_time.observe(job.admitted.elapsed());
            if job.deadline.is_some_and(|d| Instant::now() >= d) {
                job.state.store(EXPIRED, Ordering::Release);
                let _ = job.reply.send(JobResult::Expired);
                continue;
            }
            self.metrics.running.fetch_add(1, Ordering::Relaxed);
            let started = Instant::now();
            let result = job.span.in_scope(|| {
                let _run = tracing::debug_span!("compute").entered();
                catch_unwind(AssertUnwindSafe(|| model.run(job.inputs))).unwrap_or_else(|panic| {
                    let message = panic
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "a panic".into());
                    Err(RunError::Failed(format!("the run panicked: {message}")))
                })
            });
            let took = started.elapsed();
            self.metrics.compute_time.observe(took);
            self.metrics.running.fetch_sub(1, Ordering::Relaxed);
            // The waiter may have gone (client disconnected): nothing to answer then.
            let _ = job.reply.send(JobResult::Ran(result));
        }
    }
}

/// An admitted request, waiting for its answer. Dropping it before the run starts takes the
/// request out of the queue: it never runs.
pub(crate) struct Pending {
    queue: Arc<ModelQueue>,
    state: Arc<AtomicU8>,
    rx: oneshot::Receiver<JobResult>,
    deadline: Option<Instant>,
    admitted: Instant,
}

impl Pending {
    /// Waits for the answer. When the deadline passes while the request still waits in the
    /// queue, it is taken out and answered [`JobResult::Expired`] at once; a request already
    /// running is waited for.
    pub(crate) async fn wait(mut self) -> Result<JobResult, ServeError> {
        if let Some(deadline) = self.deadline {
            let timer = tokio::time::sleep_until(tokio::time::Instant::from_std(deadline));
            tokio::select! {
                r = &mut self.rx => return Self::received(r),
                () = timer => {}
            }
            if self
                .state
                .compare_exchange(QUEUED, EXPIRED, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                self.queue.remove(&self.state);
                self.queue
                    .metrics
                    .queue_time
                    .observe(self.admitted.elapsed());
                return Ok(JobResult::Expired);
            }
        }
        Self::received((&mut self.rx).await)
    }

    fn received(r: Result<JobResult, oneshot::error::RecvError>) -> Result<JobResult, ServeError> {
        r.map_err(|_| ServeError::Internal("a worker went away without answering".into()))
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if self
            .state
            .compare_exchange(QUEUED, CANCELLED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            self.queue.remove(&self.state);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::TensorSpec;

    struct Echo;
    impl Model for Echo {
        fn inputs(&self) -> Vec<TensorSpec> {
            Vec::new()
        }
        fn outputs(&self) -> Vec<TensorSpec> {
            Vec::new()
        }
        fn run(&self, inputs: Vec<(String, Tensor)>) -> Result<Vec<(String, Tensor)>, RunError> {
            if inputs.is_empty() {
                panic!("no inputs");
            }
            Ok(inputs)
        }
    }

    fn queue(capacity: usize) -> Arc<ModelQueue> {
        Arc::new(ModelQueue::new("m".into(), capacity, Arc::default()))
    }

    fn one() -> Vec<(String, Tensor)> {
        vec![("x".into(), Tensor::scalar(1.0f32))]
    }

    #[tokio::test]
    async fn a_full_queue_refuses_and_a_closed_one_drains() {
        let q = queue(2);
        let a = q.submit(one(), None).expect("admitted");
        let b = q.submit(Vec::new(), None).expect("admitted");
        assert!(matches!(
            q.submit(one(), None),
            Err(ServeError::QueueFull { capacity: 2, .. })
        ));
        q.close();
        assert!(matches!(
            q.submit(one(), None),
            Err(ServeError::ShuttingDown)
        ));
        // The worker drains both admitted requests after the close, then returns.
        let worker = {
            let q = q.clone();
            std::thread::spawn(move || q.work(&Echo))
        };
        assert!(matches!(a.wait().await, Ok(JobResult::Ran(Ok(out))) if out.len() == 1));
        match b.wait().await {
            Ok(JobResult::Ran(Err(RunError::Failed(m)))) => assert!(m.contains("no inputs")),
            other => panic!("a panicking run is a failed run, got {other:?}"),
        }
        worker.join().expect("worker exits");
    }

    #[tokio::test]
    async fn an_expired_or_abandoned_request_never_runs() {
        let q = queue(4);
        let past = Instant::now();
        let expired = q.submit(one(), Some(past)).expect("admitted");
        let abandoned = q.submit(one(), None).expect("admitted");
        drop(abandoned);
        assert!(matches!(expired.wait().await, Ok(JobResult::Expired)));
        assert_eq!(q.lock().jobs.len(), 0, "both left the queue");
        assert_eq!(q.metrics.queue_depth.load(Ordering::Relaxed), 0);
        q.close();
        q.work(&Echo);
        assert_eq!(q.metrics.compute_time.count(), 0, "nothing ran");
    }

    #[tokio::test]
    async fn a_worker_drops_a_request_whose_deadline_passed_before_it_starts() {
        let q = queue(4);
        // The waiter is not polled yet: the worker is the first to see the expired request.
        let pending = q.submit(one(), Some(Instant::now())).expect("admitted");
        q.close();
        q.work(&Echo);
        assert!(matches!(pending.wait().await, Ok(JobResult::Expired)));
        assert_eq!(q.metrics.compute_time.count(), 0, "it never ran");
        assert_eq!(q.metrics.queue_time.count(), 1);
    }
}
