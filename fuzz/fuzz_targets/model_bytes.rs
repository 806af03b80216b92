//! Fuzz target `model_bytes`: see [`spillway_fuzz::check_model_bytes`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| spillway_fuzz::check_model_bytes(data));
