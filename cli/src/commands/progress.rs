//! Progress bars on standard error for the commands that can take more than a second. They
//! draw only when standard error is a terminal (indicatif's `ProgressDrawTarget::stderr` hides
//! itself otherwise), so pipes, files and tests see nothing of them.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressFinish, ProgressStyle};

/// A bar of `len` steps of `unit` (`nodes`, `runs`, `images`), with `message` before it.
pub fn bar(len: u64, message: &'static str, unit: &str) -> ProgressBar {
    // A bar dropped early (an error returned with `?`) clears itself before the message.
    let bar = ProgressBar::new(len).with_finish(ProgressFinish::AndClear);
    // The template is a constant; should it ever fail to parse, the default style remains.
    if let Ok(style) = ProgressStyle::with_template(&format!(
        "{{msg}} [{{bar:40}}] {{pos}}/{{len}} {unit} ({{elapsed}})"
    )) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(message);
    bar
}

/// A spinner with `message` for a step of unknown length (loading a model, profiling and
/// placing it inside a session). Clear it with `finish_and_clear` before printing results.
pub fn spinner(message: impl Into<String>) -> ProgressBar {
    let spinner = ProgressBar::new_spinner().with_finish(ProgressFinish::AndClear);
    if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} ({elapsed})") {
        spinner.set_style(style);
    }
    spinner.set_message(message.into());
    if !spinner.is_hidden() {
        spinner.enable_steady_tick(Duration::from_millis(100));
    }
    spinner
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_count_and_finish_without_a_terminal() {
        // Under `cargo test` standard error is captured or a pipe: nothing is drawn, but the
        // bar still counts.
        let b = bar(3, "running", "runs");
        b.inc(2);
        assert_eq!(b.position(), 2);
        assert_eq!(b.length(), Some(3));
        b.finish_and_clear();
        assert!(b.is_finished());
        let s = spinner("loading");
        s.finish_and_clear();
        assert!(s.is_finished());
    }
}
