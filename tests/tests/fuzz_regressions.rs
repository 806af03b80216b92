//! Replays every input the fuzzers found a bug with (`fuzz/regressions/<target>/*`) through the
//! same checks as the fuzz targets (the harness, `fuzz/src/lib.rs`, is `spillway_tests::fuzz_harness`):
//! no panic, no `Error::Internal`, no allocation abort. A file listed in [`PENDING`] is a bug
//! not fixed yet and is not replayed (a huge allocation aborts the process, which no test can
//! catch): remove it from the list with the fix.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;

use spillway_tests::fuzz_harness as harness;

/// Reproducers of bugs not fixed yet: `(target/file, the bug)`.
const PENDING: &[(&str, &str)] = &[];

type Check = fn(&[u8]);

/// Each target's folder and its check.
const TARGETS: &[(&str, Check)] = &[
    ("model_bytes", harness::check_model_bytes),
    ("graph_gen", |d| harness::check_graph_bytes_with(d, false)),
    // Found with `SPILLWAY_FUZZ_AVOID_KNOWN=1`, which changes what the bytes generate.
    ("graph_gen_avoid_known", |d| {
        harness::check_graph_bytes_with(d, true)
    }),
    ("npy", harness::check_npy),
    ("tensor_proto", harness::check_tensor_proto),
];

fn regressions() -> PathBuf {
    spillway_tests::workspace_root().join("fuzz/regressions")
}

#[test]
fn every_fuzz_regression_passes() {
    let mut failures = Vec::new();
    let mut count = 0;
    for (target, check) in TARGETS {
        let dir = regressions().join(target);
        // A target without a crash so far has no folder (git keeps no empty ones).
        if !dir.exists() {
            continue;
        }
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_file())
            .collect();
        files.sort();
        for file in files {
            let key = format!("{target}/{}", file.file_name().unwrap().to_string_lossy());
            count += 1;
            if PENDING.iter().any(|(k, _)| *k == key) {
                continue;
            }
            let bytes = std::fs::read(&file).unwrap();
            if catch_unwind(AssertUnwindSafe(|| check(&bytes))).is_err() {
                failures.push(key);
            }
        }
    }
    assert!(
        count > 0,
        "no regression inputs under {}",
        regressions().display()
    );
    assert!(
        failures.is_empty(),
        "fuzz regressions fail again: {failures:?}"
    );
}

/// The generator makes models that load and run: a fixed seed of bytes gives a graph whose
/// checks pass, and most byte strings give a graph at all (the harness is exercised, not
/// skipped).
#[test]
fn the_graph_generator_makes_graphs() {
    let mut made = 0;
    let mut loaded = 0;
    for seed in 0..200u64 {
        let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let bytes: Vec<u8> = (0..512)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 24) as u8
            })
            .collect();
        // Clear of the pending bugs (a huge allocation would abort the test process).
        let Ok(g) =
            harness::generate::generate_with(&mut arbitrary::Unstructured::new(&bytes), true)
        else {
            continue;
        };
        made += 1;
        if spillway::Session::builder()
            .commit_from_memory(&g.model)
            .is_ok()
        {
            loaded += 1;
        }
    }
    assert!(made >= 150, "only {made} of 200 byte strings made a graph");
    assert!(
        loaded >= 20,
        "only {loaded} of {made} generated graphs loaded"
    );
}

/// A `.npy` file (version 1) with `header` (padded to 64 bytes with its newline) and `data`.
fn npy(header: &str, data: &[u8]) -> Vec<u8> {
    let mut h = header.as_bytes().to_vec();
    while !(10 + h.len() + 1).is_multiple_of(64) {
        h.push(b' ');
    }
    h.push(b'\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend((h.len() as u16).to_le_bytes());
    out.extend(h);
    out.extend(data);
    out
}

/// `tensor_from_npy` reads what numpy writes and refuses, before allocating anything, what
/// claims more than the bytes hold.
#[test]
fn npy_reader_reads_arrays_and_refuses_bad_headers() {
    let data: Vec<u8> = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let t = spillway::tensor_from_npy(&npy(
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
        &data,
    ))
    .unwrap();
    assert_eq!(t.shape(), &[2, 3]);
    assert_eq!(
        t.view::<f32>().unwrap().iter().copied().collect::<Vec<_>>(),
        vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    );
    // Fortran order: the same bytes are the transpose.
    let t = spillway::tensor_from_npy(&npy(
        "{'descr': '<f4', 'fortran_order': True, 'shape': (3, 2), }",
        &data,
    ))
    .unwrap();
    assert_eq!(t.view::<f32>().unwrap()[[0, 1]], 4.0);

    let refused = |bytes: &[u8]| match spillway::tensor_from_npy(bytes) {
        Err(spillway::Error::Npy(_)) => {}
        other => panic!("expected a .npy error, got {other:?}"),
    };
    // A shape of 2^40 elements over 24 bytes of data.
    refused(&npy(
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1048576, 1048576), }",
        &data,
    ));
    // A header length past the end of the bytes.
    let mut long = npy(
        "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }",
        &data,
    );
    long[8..10].copy_from_slice(&u16::MAX.to_le_bytes());
    refused(&long);
    let mut v2 = b"\x93NUMPY\x02\x00".to_vec();
    v2.extend(u32::MAX.to_le_bytes());
    refused(&v2);
    // Nesting deeper than a dict holding a tuple.
    refused(&npy("{{{{'descr': '<f4'}}}}", &data));
    refused(b"not a numpy file");
}
