//! [`ShapeKeyedSegment`]: a device segment compiled once per set of input shapes. After a
//! data-dependent op (the boxes `NonMaxSuppression` keeps, the detections a mask head paints)
//! a segment's shapes change with the data, while a device plan is compiled for fixed shapes.
//! The segment keeps a few compiled plans, keyed by the shapes of its inputs, and runs shapes
//! it has no plan for on the host: a shape met for the first time runs there alone; when it
//! comes back, the host run also gives every value's shape, the plan is compiled from them and
//! later runs of that shape take it. Shapes that occur once (a different number of detections
//! on every photo) thus never pay for a compilation.
//!
//! Inputs that are shape arithmetic (see [`super::FixedValues::shape_arithmetic`]: the
//! `[N, 256, 7, 7]` a `ConstantOfShape` fills) are keyed by their content as well, and a plan
//! is compiled with that content as constants.

use std::sync::{Arc, Mutex};

use super::kept::{SegmentValue, all_on_host, hosted};
use super::plan::{HostSegment, SegmentWork};
use super::with_constants;
use crate::error::{Error, Result};
use crate::graph::{Graph, ValueId};
use crate::value::Value;
use spillway_kernels::Tensor;

/// Compiled plans a segment keeps; the least recently used goes first.
const COMPILED_SHAPES: usize = 8;

/// Shapes run once on the host that a segment remembers, to compile them if they come back.
const SEEN_SHAPES: usize = 64;

/// Compiles a device segment for the shapes of one set of inputs.
pub trait SegmentCompiler: Send + Sync + std::fmt::Debug {
    /// Compiles `graph` (a segment's graph, see [`super::segment_graph`]) for `inputs`;
    /// `values` holds every value of a run on them, indexed by value id (constants may be
    /// missing), from which each value's type and shape is taken. `measure` allows time for
    /// measuring alternatives (at session build); during a run it is false.
    fn compile(
        &self,
        graph: &Graph,
        inputs: &[Value],
        values: &[Option<Value>],
        measure: bool,
    ) -> Result<Box<dyn SegmentWork>>;
}

/// How a [`ShapeKeyedSegment`]'s runs went.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShapeStats {
    /// Runs on a compiled device plan.
    pub device_runs: usize,
    /// Runs on the host: shapes seen for the first time, and shapes the device refused.
    pub host_runs: usize,
    /// Plans compiled during runs (the one compiled at build not counted).
    pub compiled: usize,
    /// Compilations that failed: those shapes run on the host.
    pub refused: usize,
}

impl std::ops::AddAssign for ShapeStats {
    fn add_assign(&mut self, other: ShapeStats) {
        self.device_runs += other.device_runs;
        self.host_runs += other.host_runs;
        self.compiled += other.compiled;
        self.refused += other.refused;
    }
}

/// The shapes of a segment's inputs (`None` for a value that is not a tensor), then the
/// contents of its shape-arithmetic inputs ([`content_key`]).
type Key = (Vec<Option<Vec<usize>>>, Vec<Vec<u64>>);

/// What a segment knows about one key.
#[derive(Debug, Clone)]
enum Known {
    /// Compiled: runs on the device.
    Compiled(Arc<dyn SegmentWork>),
    /// The device refused these shapes: runs on the host.
    Refused,
}

#[derive(Debug, Default)]
struct ShapeCache {
    /// Keys with a decision, the most recently used last.
    known: Vec<(Key, Known)>,
    /// Keys run once on the host, the most recent last.
    seen: Vec<Key>,
    stats: ShapeStats,
}

/// What a run does with its key.
enum Route {
    Device(Arc<dyn SegmentWork>),
    Host,
    Compile,
}

impl ShapeCache {
    fn route(&mut self, key: &Key) -> Route {
        if let Some(i) = self.known.iter().position(|(k, _)| k == key) {
            let entry = self.known.remove(i);
            let route = match &entry.1 {
                Known::Compiled(work) => Route::Device(work.clone()),
                Known::Refused => Route::Host,
            };
            self.known.push(entry);
            return route;
        }
        if let Some(i) = self.seen.iter().position(|k| k == key) {
            self.seen.remove(i);
            return Route::Compile;
        }
        if self.seen.len() == SEEN_SHAPES {
            self.seen.remove(0);
        }
        self.seen.push(key.clone());
        Route::Host
    }

    fn insert(&mut self, key: Key, known: Known) {
        if self.known.iter().any(|(k, _)| *k == key) {
            return;
        }
        let compiled = |k: &Known| matches!(k, Known::Compiled(_));
        if compiled(&known)
            && self.known.iter().filter(|(_, k)| compiled(k)).count() >= COMPILED_SHAPES
        {
            let oldest = self.known.iter().position(|(_, k)| compiled(k));
            if let Some(i) = oldest {
                self.known.remove(i);
            }
        }
        self.known.push((key, known));
    }
}

/// A device segment whose input shapes may change between runs (see the module docs).
#[derive(Debug)]
pub struct ShapeKeyedSegment {
    graph: Graph,
    /// Per input: shape arithmetic, keyed and compiled by content.
    by_content: Vec<bool>,
    host: HostSegment,
    compiler: Box<dyn SegmentCompiler>,
    cache: Mutex<ShapeCache>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The elements of `t` as bit patterns that are equal exactly when the elements are: integers
/// and booleans as themselves, floats widened to `f64` (a shape's arithmetic may pass through floats, as a
/// detector's image scale does). `None` for other types.
fn content_key(t: &Tensor) -> Option<Vec<u64>> {
    if t.dtype().is_float() {
        let floats = t.to_f64_vec().ok()?;
        return Some(floats.into_iter().map(f64::to_bits).collect());
    }
    if let Tensor::Bool(b) = t {
        return Some(b.iter().map(|&v| u64::from(v)).collect());
    }
    let ints = t.to_i64_vec().ok()?;
    Some(ints.into_iter().map(|v| v as u64).collect())
}

/// The key of `inputs`; `None` when a shape-arithmetic input is not a tensor of numbers.
fn key_of(inputs: &[SegmentValue], by_content: &[bool]) -> Option<Key> {
    let shapes = inputs.iter().map(SegmentValue::shape).collect();
    let contents = inputs
        .iter()
        .zip(by_content)
        .filter(|(_, keyed)| **keyed)
        .map(|(v, _)| match v {
            SegmentValue::Host(v) => content_key(v.as_tensor()?),
            SegmentValue::Kept(_) => None,
        })
        .collect::<Option<_>>()?;
    Some((shapes, contents))
}

/// The inputs of `graph` that `by_content` marks.
fn keyed_inputs(graph: &Graph, by_content: &[bool]) -> Vec<ValueId> {
    graph
        .inputs
        .iter()
        .zip(by_content)
        .filter(|(_, keyed)| **keyed)
        .map(|(v, _)| *v)
        .collect()
}

impl ShapeKeyedSegment {
    /// The segment of `graph` (see [`super::segment_graph`]), compiled by `compiler` for the
    /// shapes of `inputs` (and the contents of those `by_content` marks, one flag per input),
    /// whose run gave `values` (indexed by value id).
    pub fn new(
        graph: Graph,
        by_content: Vec<bool>,
        compiler: Box<dyn SegmentCompiler>,
        inputs: &[Value],
        values: &[Option<Value>],
    ) -> Result<ShapeKeyedSegment> {
        let key = key_of(&hosted(inputs.to_vec()), &by_content).ok_or_else(|| {
            Error::Internal("a shape-arithmetic segment input is not a tensor of numbers".into())
        })?;
        let first = compiler.compile(
            &with_constants(&graph, keyed_inputs(&graph, &by_content), values),
            inputs,
            values,
            true,
        )?;
        let mut cache = ShapeCache::default();
        cache.insert(key, Known::Compiled(Arc::from(first)));
        Ok(ShapeKeyedSegment {
            host: HostSegment::compile(&graph)?,
            graph,
            by_content,
            compiler,
            cache: Mutex::new(cache),
        })
    }

    /// How its runs went so far.
    #[cfg(feature = "internals")]
    pub fn stats(&self) -> ShapeStats {
        lock(&self.cache).stats
    }

    /// Runs on the host keeping every value, compiles the device plan from them, and returns
    /// the host run's outputs.
    fn run_and_compile(&self, key: Key, inputs: Vec<Value>) -> Result<Vec<Value>> {
        let bound = inputs.clone();
        let values = self.host.run_keeping_values(bound)?;
        let outputs = self
            .graph
            .outputs
            .iter()
            .map(|v| {
                values.get(v.index()).cloned().flatten().ok_or_else(|| {
                    Error::Internal(format!(
                        "segment output '{}' was not computed",
                        self.graph.name(*v)
                    ))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let keyed = keyed_inputs(&self.graph, &self.by_content);
        let graph = with_constants(&self.graph, keyed, &values);
        let known = match self.compiler.compile(&graph, &inputs, &values, false) {
            Ok(work) => Known::Compiled(Arc::from(work)),
            Err(e) => {
                tracing::warn!(shapes = ?key, error = %e,
                    "the device cannot run these shapes of a segment: they run on the CPU");
                Known::Refused
            }
        };
        let mut cache = lock(&self.cache);
        cache.stats.host_runs += 1;
        match known {
            Known::Compiled(_) => cache.stats.compiled += 1,
            Known::Refused => cache.stats.refused += 1,
        }
        cache.insert(key, known);
        Ok(outputs)
    }
}

impl SegmentWork for ShapeKeyedSegment {
    fn run(&self, inputs: Vec<Value>) -> Result<Vec<Value>> {
        all_on_host(self.run_with(hosted(inputs), &[])?)
    }

    /// Inputs kept on the device stay there when the shapes have a device plan; the outputs
    /// of a run on the host are host values whatever `keep` asks.
    fn run_with(&self, inputs: Vec<SegmentValue>, keep: &[bool]) -> Result<Vec<SegmentValue>> {
        // Shape arithmetic is keyed by its content, which the host reads.
        let inputs = (inputs.into_iter().zip(&self.by_content))
            .map(|(v, &by_content)| match v {
                SegmentValue::Kept(k) if by_content => k.fetch().map(SegmentValue::Host),
                v => Ok(v),
            })
            .collect::<Result<Vec<_>>>()?;
        let on_host = |inputs| -> Result<Vec<SegmentValue>> {
            lock(&self.cache).stats.host_runs += 1;
            Ok(hosted(self.host.run(all_on_host(inputs)?)?))
        };
        let Some(key) = key_of(&inputs, &self.by_content) else {
            return on_host(inputs);
        };
        let route = lock(&self.cache).route(&key);
        match route {
            Route::Device(work) => {
                lock(&self.cache).stats.device_runs += 1;
                work.run_with(inputs, keep)
            }
            Route::Host => on_host(inputs),
            Route::Compile => Ok(hosted(self.run_and_compile(key, all_on_host(inputs)?)?)),
        }
    }

    fn keeps_outputs(&self) -> bool {
        true
    }

    fn device_bytes(&self) -> usize {
        lock(&self.cache)
            .known
            .iter()
            .map(|(_, k)| match k {
                Known::Compiled(work) => work.device_bytes(),
                Known::Refused => 0,
            })
            .sum()
    }

    /// The most recently used plan's node times.
    fn device_node_us(&self) -> Result<Option<Vec<f64>>> {
        let last = lock(&self.cache)
            .known
            .iter()
            .rev()
            .find_map(|(_, k)| match k {
                Known::Compiled(work) => Some(work.clone()),
                Known::Refused => None,
            });
        match last {
            Some(work) => work.device_node_us(),
            None => Ok(None),
        }
    }

    #[cfg(feature = "internals")]
    fn shape_stats(&self) -> ShapeStats {
        self.stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Nothing;

    impl SegmentWork for Nothing {
        fn run(&self, inputs: Vec<Value>) -> Result<Vec<Value>> {
            Ok(inputs)
        }
    }

    fn key(n: usize) -> Key {
        (vec![Some(vec![n, 4])], Vec::new())
    }

    #[test]
    fn a_shape_compiles_on_its_return_and_the_least_recently_used_plan_goes_first() {
        let mut cache = ShapeCache::default();
        for n in 0..COMPILED_SHAPES {
            assert!(matches!(cache.route(&key(n)), Route::Host));
            assert!(matches!(cache.route(&key(n)), Route::Compile));
            cache.insert(key(n), Known::Compiled(Arc::new(Nothing)));
        }
        cache.insert(key(100), Known::Refused);
        // Using shape 0 makes shape 1 the least recently used plan.
        assert!(matches!(cache.route(&key(0)), Route::Device(_)));
        cache.insert(key(50), Known::Compiled(Arc::new(Nothing)));
        assert!(matches!(cache.route(&key(0)), Route::Device(_)));
        assert!(matches!(cache.route(&key(100)), Route::Host));
        assert!(matches!(cache.route(&key(1)), Route::Host));
        assert!(matches!(cache.route(&key(1)), Route::Compile));
        let compiled = |c: &ShapeCache| {
            c.known
                .iter()
                .filter(|(_, k)| matches!(k, Known::Compiled(_)))
                .count()
        };
        assert_eq!(compiled(&cache), COMPILED_SHAPES);
    }

    #[test]
    fn shape_arithmetic_is_keyed_by_exact_content_whatever_its_type() {
        let tensor = |t: Tensor| Value::Tensor(t);
        let ints = tensor(Tensor::from_shape_vec(&[2], vec![3i64, 4]).unwrap());
        let half = tensor(Tensor::from_shape_vec(&[1], vec![0.5f32]).unwrap());
        let quarter = tensor(Tensor::from_shape_vec(&[1], vec![0.25f32]).unwrap());
        let yes = tensor(Tensor::from_shape_vec(&[1], vec![true]).unwrap());
        let data = tensor(Tensor::from_shape_vec(&[1], vec![7.0f32]).unwrap());
        let keyed = [true, true, true, false];
        let key = key_of(&hosted(vec![ints.clone(), half, yes.clone(), data]), &keyed).unwrap();
        assert_eq!(key.1, [vec![3, 4], vec![0.5f64.to_bits()], vec![1]]);
        // Data is keyed by its shape only; shape arithmetic by its content.
        let other_data = tensor(Tensor::from_shape_vec(&[1], vec![9.0f32]).unwrap());
        let same = key_of(
            &hosted(vec![ints.clone(), key_input(0.5), yes.clone(), other_data]),
            &keyed,
        );
        assert_eq!(same, Some(key.clone()));
        let other = key_of(&hosted(vec![ints, quarter, yes, key_input(1.0)]), &keyed).unwrap();
        assert_ne!(other, key);
    }

    fn key_input(v: f32) -> Value {
        Value::Tensor(Tensor::from_shape_vec(&[1], vec![v]).unwrap())
    }

    #[test]
    fn shapes_seen_once_are_forgotten_oldest_first() {
        let mut cache = ShapeCache::default();
        for n in 0..=SEEN_SHAPES {
            assert!(matches!(cache.route(&key(n)), Route::Host));
        }
        assert!(matches!(cache.route(&key(0)), Route::Host));
        assert!(matches!(cache.route(&key(SEEN_SHAPES)), Route::Compile));
    }
}
