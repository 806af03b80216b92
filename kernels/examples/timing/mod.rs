//! What the examples share: timing a closure.

use std::time::Instant;

/// Median seconds of `reps` calls of `f`, after one untimed call.
pub fn median_secs(mut f: impl FnMut(), reps: usize) -> f64 {
    f();
    let mut times: Vec<f64> = (0..reps)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[reps / 2]
}
