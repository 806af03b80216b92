//! Measures candidate matrix cores on conv-shaped GEMMs and on GEMV, interleaved in one run, and
//! writes `benches/results/matmul-cores-<date>.{md,json}`.
//!
//! Candidates: `matrixmultiply` (raw `sgemm`), `ndarray` (`general_mat_mul`), the `gemm` crate
//! (rayon parallelism), Spillway's own core (`cpu::nn::matrix::gemm`: matrixmultiply plus a
//! dedicated GEMV) and, with `--features openblas`, the system OpenBLAS through `cblas_sgemm`.
//!
//! Run: `cargo run --release -p spillway-benches --bin matmul_cores [--features openblas]`.

use std::time::Instant;

use anyhow::{Context, Result};
use spillway_kernels::cpu::nn::matrix::{self, Layout};

#[cfg(feature = "openblas")]
mod openblas {
    #[link(name = "openblas")]
    unsafe extern "C" {
        pub fn cblas_sgemm(
            layout: i32,
            transa: i32,
            transb: i32,
            m: i32,
            n: i32,
            k: i32,
            alpha: f32,
            a: *const f32,
            lda: i32,
            b: *const f32,
            ldb: i32,
            beta: f32,
            c: *mut f32,
            ldc: i32,
        );
    }
    pub const ROW_MAJOR: i32 = 101;
    pub const NO_TRANS: i32 = 111;
}

/// One GEMM problem: `C (m x n) = A (m x k) * B (k x n)`, all row-major.
#[derive(Clone, Copy)]
struct Shape {
    m: usize,
    k: usize,
    n: usize,
    what: &'static str,
}

const SHAPES: &[Shape] = &[
    Shape {
        m: 64,
        k: 576,
        n: 3136,
        what: "ResNet conv2_x 3x3 (56x56)",
    },
    Shape {
        m: 128,
        k: 1152,
        n: 784,
        what: "ResNet conv3_x 3x3 (28x28)",
    },
    Shape {
        m: 256,
        k: 2304,
        n: 196,
        what: "ResNet conv4_x 3x3 (14x14)",
    },
    Shape {
        m: 512,
        k: 4608,
        n: 49,
        what: "ResNet conv5_x 3x3 (7x7)",
    },
    Shape {
        m: 256,
        k: 64,
        n: 3136,
        what: "1x1 expand (56x56)",
    },
    Shape {
        m: 512,
        k: 4608,
        n: 196,
        what: "large K, N=196",
    },
    Shape {
        m: 1000,
        k: 2048,
        n: 1,
        what: "GEMV: classifier (N=1)",
    },
    Shape {
        m: 4096,
        k: 4096,
        n: 1,
        what: "GEMV: large (N=1)",
    },
];

const ROUNDS: usize = 11;

/// Pause before each timed call, in milliseconds.
const SETTLE_MS: u64 = 200;

type Runner = fn(&Shape, &[f32], &[f32], &mut [f32]);

fn run_matrixmultiply(s: &Shape, a: &[f32], b: &[f32], c: &mut [f32]) {
    // SAFETY: buffers are exactly m*k, k*n, m*n row-major.
    unsafe {
        matrixmultiply::sgemm(
            s.m,
            s.k,
            s.n,
            1.0,
            a.as_ptr(),
            s.k as isize,
            1,
            b.as_ptr(),
            s.n as isize,
            1,
            0.0,
            c.as_mut_ptr(),
            s.n as isize,
            1,
        )
    }
}

fn run_ndarray(s: &Shape, a: &[f32], b: &[f32], c: &mut [f32]) {
    let av = ndarray::ArrayView2::from_shape((s.m, s.k), a).expect("sized");
    let bv = ndarray::ArrayView2::from_shape((s.k, s.n), b).expect("sized");
    let mut cv = ndarray::ArrayViewMut2::from_shape((s.m, s.n), c).expect("sized");
    ndarray::linalg::general_mat_mul(1.0, &av, &bv, 0.0, &mut cv);
}

fn run_gemm_crate(s: &Shape, a: &[f32], b: &[f32], c: &mut [f32]) {
    // SAFETY: buffers are exactly m*k, k*n, m*n row-major (column stride 1, row stride cols).
    unsafe {
        gemm::gemm(
            s.m,
            s.n,
            s.k,
            c.as_mut_ptr(),
            1,
            s.n as isize,
            false,
            a.as_ptr(),
            1,
            s.k as isize,
            b.as_ptr(),
            1,
            s.n as isize,
            0.0,
            1.0,
            false,
            false,
            false,
            gemm::Parallelism::Rayon(0),
        )
    }
}

fn run_spillway(s: &Shape, a: &[f32], b: &[f32], c: &mut [f32]) {
    matrix::gemm(
        1.0,
        a,
        Layout::row_major(s.m, s.k),
        b,
        Layout::row_major(s.k, s.n),
        0.0,
        c,
        Layout::row_major(s.m, s.n),
    )
    .expect("sized");
}

/// Spillway's packed GEMM as `Conv` uses it: `A` (the weights) packed once, outside the timing
/// (a `Conv` packs its weights on first use and keeps them for the session).
fn run_spillway_packed(s: &Shape, a: &[f32], b: &[f32], c: &mut [f32]) {
    use spillway_kernels::cpu::nn::packed_gemm::{BSource, PackedA};
    thread_local! {
        static PACKED: std::cell::RefCell<std::collections::HashMap<(usize, usize, usize), PackedA>> =
            std::cell::RefCell::new(std::collections::HashMap::new());
    }
    PACKED.with_borrow_mut(|cache| {
        let key = (a.as_ptr() as usize, s.m, s.k);
        match cache.get(&key) {
            Some(packed) => {
                packed.multiply(BSource::Dense { data: b, ld: s.n }, s.n, c, s.n, None, None)
            }
            None => {
                let packed = PackedA::new(a, s.m, s.k);
                match &packed {
                    Some(p) => {
                        p.multiply(BSource::Dense { data: b, ld: s.n }, s.n, c, s.n, None, None)
                    }
                    None => run_spillway(s, a, b, c),
                }
                if let Some(p) = packed {
                    cache.insert(key, p);
                }
            }
        }
    });
}

#[cfg(feature = "openblas")]
fn run_openblas(s: &Shape, a: &[f32], b: &[f32], c: &mut [f32]) {
    use openblas::*;
    // SAFETY: buffers are exactly m*k, k*n, m*n row-major.
    unsafe {
        cblas_sgemm(
            ROW_MAJOR,
            NO_TRANS,
            NO_TRANS,
            s.m as i32,
            s.n as i32,
            s.k as i32,
            1.0,
            a.as_ptr(),
            s.k as i32,
            b.as_ptr(),
            s.n as i32,
            0.0,
            c.as_mut_ptr(),
            s.n as i32,
        )
    }
}

fn candidates() -> Vec<(&'static str, Runner)> {
    #[allow(unused_mut)]
    let mut v: Vec<(&'static str, Runner)> = vec![
        ("matrixmultiply", run_matrixmultiply),
        ("ndarray", run_ndarray),
        ("gemm-crate", run_gemm_crate),
        ("spillway-core", run_spillway),
        ("spillway-packed", run_spillway_packed),
    ];
    #[cfg(feature = "openblas")]
    v.push(("openblas", run_openblas));
    v
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() -> Result<()> {
    let cands = candidates();
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let cpu = spillway_benches::cpu_name();
    // times[shape][candidate] = seconds per round.
    let mut times = vec![vec![Vec::new(); cands.len()]; SHAPES.len()];
    let inputs: Vec<(Vec<f32>, Vec<f32>)> = SHAPES
        .iter()
        .map(|s| {
            let a = (0..s.m * s.k)
                .map(|i| ((i * 7919) % 1013) as f32 / 1013.0 - 0.5)
                .collect();
            let b = (0..s.k * s.n)
                .map(|i| ((i * 104729) % 997) as f32 / 997.0 - 0.5)
                .collect();
            (a, b)
        })
        .collect();
    let mut reference: Vec<Vec<f32>> = Vec::new();
    for (s, (a, b)) in SHAPES.iter().zip(&inputs) {
        let mut c = vec![0.0; s.m * s.n];
        run_matrixmultiply(s, a, b, &mut c);
        reference.push(c);
    }
    // Round 0 is a warm-up (and a correctness check); rounds interleave every candidate.
    for round in 0..=ROUNDS {
        for (si, s) in SHAPES.iter().enumerate() {
            let (a, b) = &inputs[si];
            for (ci, (name, run)) in cands.iter().enumerate() {
                let mut c = vec![0.0f32; s.m * s.n];
                // Let the previous candidate's worker threads (OpenBLAS, rayon) stop spinning so
                // they do not steal cores from this one.
                std::thread::sleep(std::time::Duration::from_millis(SETTLE_MS));
                let t = Instant::now();
                run(s, a, b, &mut c);
                let dt = t.elapsed().as_secs_f64();
                if round == 0 {
                    let max_err = c
                        .iter()
                        .zip(&reference[si])
                        .map(|(x, y)| (x - y).abs())
                        .fold(0.0f32, f32::max);
                    anyhow::ensure!(max_err < 1e-2, "{name} disagrees on {}: {max_err}", s.what);
                } else {
                    times[si][ci].push(dt);
                }
            }
        }
    }
    let date = std::process::Command::new("date")
        .arg("+%Y-%m-%d")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "undated".into());
    let mut md = format!(
        "# Matrix cores on conv-shaped GEMMs ({date})\n\nCPU: {cpu}, {threads} hardware threads \
         visible. f32, row-major, `C = A * B`. Median of {ROUNDS} interleaved rounds after one \
         warm-up round, {SETTLE_MS} ms pause before each call; GFLOP/s = 2*m*k*n / time.\n\n| shape (m x k x n) | what |"
    );
    for (name, _) in &cands {
        md.push_str(&format!(" {name} |"));
    }
    md.push_str("\n| --- | --- |");
    for _ in &cands {
        md.push_str(" ---: |");
    }
    md.push('\n');
    let mut json_rows = Vec::new();
    for (si, s) in SHAPES.iter().enumerate() {
        md.push_str(&format!("| {}x{}x{} | {} |", s.m, s.k, s.n, s.what));
        let flops = 2.0 * (s.m * s.k * s.n) as f64;
        let mut row = serde_json::Map::new();
        row.insert("m".into(), s.m.into());
        row.insert("k".into(), s.k.into());
        row.insert("n".into(), s.n.into());
        row.insert("what".into(), s.what.into());
        let mut g = serde_json::Map::new();
        for (ci, (name, _)) in cands.iter().enumerate() {
            let gf = flops / median(times[si][ci].clone()) / 1e9;
            md.push_str(&format!(" {gf:.1} |"));
            g.insert(
                (*name).into(),
                serde_json::json!((gf * 10.0).round() / 10.0),
            );
        }
        row.insert("gflops".into(), g.into());
        json_rows.push(serde_json::Value::Object(row));
        md.push('\n');
    }
    let json = serde_json::json!({
        "date": date, "cpu": cpu, "threads": threads, "rounds": ROUNDS, "dtype": "f32",
        "candidates": cands.iter().map(|(n, _)| *n).collect::<Vec<_>>(), "results": json_rows,
    });
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("results");
    std::fs::create_dir_all(&dir)?;
    let stem = dir.join(format!("matmul-cores-{date}"));
    std::fs::write(stem.with_extension("md"), &md).context("writing the markdown report")?;
    std::fs::write(
        stem.with_extension("json"),
        serde_json::to_string_pretty(&json)?,
    )
    .context("writing the JSON report")?;
    print!("{md}");
    Ok(())
}
