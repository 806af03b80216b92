//! What the examples share: their numeric arguments, their `NAME=1` switches, and timing a
//! closure. (Each example uses some of these.)

#![allow(dead_code)]

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

/// The command line's arguments after the program name, each a number.
pub fn number_args() -> Vec<usize> {
    std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("each argument a number"))
        .collect()
}

/// Whether the environment variable `name` is set to `1`.
pub fn switch(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| v == "1")
}
