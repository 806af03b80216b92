//! Differential fuzzing for wrong answers, for long runs: random small graphs of supported ops
//! run by Spillway at every optimization level and by ONNX Runtime (see
//! `spillway_tests::differential`). Prints each disagreement and saves its model as
//! `<out>/seed-<seed>.onnx`; exits non-zero when it found any.
//!
//!     cargo run -p spillway-tests --bin diff_fuzz -- [FIRST_SEED] [COUNT] [OUT_DIR]
//!
//! `scripts/diff_fuzz.sh` runs it past the seeds that crash ONNX Runtime itself.

use spillway_tests::differential::{ORT_CRASHES, Outcome, check_seed};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let first: u64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(0);
    let count: u64 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let out = std::path::PathBuf::from(args.get(3).map_or("diff_fuzz_findings", |s| s.as_str()));
    let (mut graphs, mut rejected, mut agreed, mut unjudged, mut findings) = (0, 0, 0, 0, 0);
    for seed in first..first + count {
        if ORT_CRASHES.contains(&seed) {
            continue;
        }
        // Where a crash of ORT itself ended the run (`scripts/diff_fuzz.sh` resumes after it).
        let _ = std::fs::create_dir_all(&out)
            .and_then(|()| std::fs::write(out.join("current-seed"), seed.to_string()));
        match check_seed(seed, 1024) {
            Outcome::NoGraph => {}
            Outcome::BothRejected => {
                graphs += 1;
                rejected += 1;
            }
            Outcome::Agreed => {
                graphs += 1;
                agreed += 1;
            }
            Outcome::Unjudged(_) => {
                graphs += 1;
                unjudged += 1;
            }
            Outcome::Finding(f) => {
                graphs += 1;
                findings += 1;
                println!("seed {}: {:?}: {}", f.seed, f.ops, f.what);
                std::fs::create_dir_all(&out).expect("output folder");
                std::fs::write(out.join(format!("seed-{}.onnx", f.seed)), &f.model)
                    .expect("writing the model");
            }
        }
        if (seed - first + 1).is_multiple_of(1000) {
            eprintln!(
                "{} seeds: {graphs} graphs, {agreed} agreed, {rejected} rejected by both, {unjudged} ORT cannot judge, {findings} findings",
                seed - first + 1
            );
        }
    }
    println!(
        "{count} seeds: {graphs} graphs, {agreed} agreed, {rejected} rejected by both, {unjudged} ORT cannot judge, {findings} findings"
    );
    if findings > 0 {
        std::process::exit(1);
    }
}
