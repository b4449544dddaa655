//! `cargo fuzz run net_edge`: see [`glassbox_fuzz::edge::run`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| glassbox_fuzz::edge::run(data));
