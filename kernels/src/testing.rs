//! For tests only: a test whose hardware is missing (AVX-512, AVX2, a GPU, TensorRT) says so
//! by name instead of passing silently.

/// Reports that the calling test skipped its checks because `reason` (the test is named by
/// its thread, as the test harness names it). Prints `SKIPPED <test>: <reason>`, and appends
/// the same line to the file `SPILLWAY_SKIPPED_LOG` names, if set, where `scripts/test.sh`
/// counts them.
pub fn skipped(reason: &str) {
    let thread = std::thread::current();
    let line = format!(
        "SKIPPED {}: {reason}",
        thread.name().unwrap_or("(unnamed test)")
    );
    println!("{line}");
    if let Some(path) = crate::knobs::skipped_log() {
        use std::io::Write;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path);
        if let Ok(mut file) = file {
            let _ = writeln!(file, "{line}");
        }
    }
}
