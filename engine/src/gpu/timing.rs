//! Timing GPU work with CUDA events.

use spillway_kernels::cuda::Gpu;
use spillway_kernels::cuda::cudarc::driver::sys::CUevent_flags;

use super::step_error;
use crate::error::Result;

/// Median milliseconds of `launch` between two events on stream 0 over `runs` launches, after
/// 10 warm-up launches. `launch` enqueues work and returns without waiting for it.
pub fn median_ms(gpu: &Gpu, runs: usize, launch: &dyn Fn() -> Result<()>) -> Result<f64> {
    let timing = |e| step_error("timing", e);
    for _ in 0..10 {
        launch()?;
    }
    let main = gpu.stream(0);
    main.synchronize().map_err(timing)?;
    let event = || {
        gpu.context()
            .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(timing)
    };
    let (start, end) = (event()?, event()?);
    let mut samples = Vec::with_capacity(runs.max(1));
    for _ in 0..runs.max(1) {
        start.record(main).map_err(timing)?;
        launch()?;
        end.record(main).map_err(timing)?;
        end.synchronize().map_err(timing)?;
        samples.push(f64::from(start.elapsed_ms(&end).map_err(timing)?));
    }
    samples.sort_by(f64::total_cmp);
    Ok(samples[samples.len() / 2])
}
