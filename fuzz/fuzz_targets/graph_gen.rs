//! Fuzz target `graph_gen`: see [`spillway_fuzz::check_graph_bytes`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| spillway_fuzz::check_graph_bytes(data));
