//! `cargo fuzz run dns`: see [`glassbox_fuzz::dns::run`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| glassbox_fuzz::dns::run(data));
