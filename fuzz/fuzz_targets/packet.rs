//! `cargo fuzz run packet`: see [`glassbox_fuzz::packet::run`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| glassbox_fuzz::packet::run(data));
