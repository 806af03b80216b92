//! Fuzz target `tensor_proto`: see [`spillway_fuzz::check_tensor_proto`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| spillway_fuzz::check_tensor_proto(data));
