//! Fuzz target `npy`: see [`spillway_fuzz::check_npy`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| spillway_fuzz::check_npy(data));
