//! Spillway's float8 and float4 conversions against `ml_dtypes` (which writes the ONNX
//! reference outputs) on every float16 value, a stride over all float32 bit patterns, dense
//! samples around the float8 range and every rounding tie: the codes must match bit for bit
//! (any NaN code equal to any other), with and without `saturate`; decoding every code must
//! give the same float32. The table comes from `scripts/low_precision_table.py` in the venv.

use std::process::Command;

use spillway_kernels::low_precision::{F4E2M1, F8E4M3Fn, F8E4M3FnUz, F8E5M2, F8E5M2FnUz};
use spillway_tests::{venv, workspace_root};

/// Code to float32.
type Decoder = fn(u8) -> f32;

/// One float8 format: its name, encoder and decoder.
struct Format {
    name: &'static str,
    encode: fn(f32, bool) -> u8,
    decode: Decoder,
}

const FLOAT8: [Format; 4] = [
    Format {
        name: "E4M3FN",
        encode: |x, s| F8E4M3Fn::from_f32(x, s).to_bits(),
        decode: |b| F8E4M3Fn::from_bits(b).to_f32(),
    },
    Format {
        name: "E4M3FNUZ",
        encode: |x, s| F8E4M3FnUz::from_f32(x, s).to_bits(),
        decode: |b| F8E4M3FnUz::from_bits(b).to_f32(),
    },
    Format {
        name: "E5M2",
        encode: |x, s| F8E5M2::from_f32(x, s).to_bits(),
        decode: |b| F8E5M2::from_bits(b).to_f32(),
    },
    Format {
        name: "E5M2FNUZ",
        encode: |x, s| F8E5M2FnUz::from_f32(x, s).to_bits(),
        decode: |b| F8E5M2FnUz::from_bits(b).to_f32(),
    },
];

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> &'a [u8] {
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        head
    }
    fn u32s(&mut self, n: usize) -> Vec<u32> {
        self.take(4 * n)
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    }
}

fn table() -> Vec<u8> {
    let path = std::env::temp_dir().join(format!("spillway-lp-table-{}.bin", std::process::id()));
    let out = Command::new(venv().join("bin/python"))
        .arg(workspace_root().join("scripts/low_precision_table.py"))
        .arg(&path)
        .output()
        .expect("the venv's python runs");
    assert!(
        out.status.success(),
        "low_precision_table.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bytes = std::fs::read(&path).unwrap();
    std::fs::remove_file(&path).ok();
    bytes
}

/// Equal codes, or two NaN codes.
fn same(want: u8, got: u8, decode: Decoder) -> bool {
    want == got || (decode(want).is_nan() && decode(got).is_nan())
}

#[test]
fn conversions_match_ml_dtypes() {
    let bytes = table();
    let mut r = Reader(&bytes);
    let n = r.u32s(1)[0] as usize;
    let x: Vec<f32> = r.u32s(n).into_iter().map(f32::from_bits).collect();
    let mut failures = Vec::new();
    for f in &FLOAT8 {
        for saturate in [false, true] {
            let want = r.take(n);
            for (i, &v) in x.iter().enumerate() {
                let got = (f.encode)(v, saturate);
                if !same(want[i], got, f.decode) && failures.len() < 20 {
                    failures.push(format!(
                        "{} saturate={saturate}: {v:e} ({:#010x}) -> ml_dtypes {:#04x}, ours {got:#04x}",
                        f.name,
                        v.to_bits(),
                        want[i]
                    ));
                }
            }
        }
    }
    let want = r.take(n);
    for (i, &v) in x.iter().enumerate() {
        let got = F4E2M1::from_f32(v).to_bits();
        if want[i] != got && failures.len() < 20 {
            failures.push(format!(
                "E2M1: {v:e} -> ml_dtypes {:#03x}, ours {got:#03x}",
                want[i]
            ));
        }
    }
    let decoders: [(&str, Decoder, usize); 5] = [
        (FLOAT8[0].name, FLOAT8[0].decode, 256),
        (FLOAT8[1].name, FLOAT8[1].decode, 256),
        (FLOAT8[2].name, FLOAT8[2].decode, 256),
        (FLOAT8[3].name, FLOAT8[3].decode, 256),
        ("E2M1", |b| F4E2M1::from_bits(b).to_f32(), 16),
    ];
    for (name, decode, codes) in decoders {
        let want = r.u32s(256);
        for (code, &bits) in want.iter().enumerate().take(codes) {
            let (w, got) = (f32::from_bits(bits), decode(code as u8));
            if w.to_bits() != got.to_bits() && !(w.is_nan() && got.is_nan()) {
                failures.push(format!(
                    "{name} decode {code:#04x}: ml_dtypes {w:e}, ours {got:e}"
                ));
            }
        }
    }
    assert!(r.0.is_empty(), "table has {} trailing bytes", r.0.len());
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(n > 500_000, "only {n} inputs");
}
