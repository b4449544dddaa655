//! `cargo fuzz run config`: see [`glassbox_fuzz::config::parse`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| glassbox_fuzz::config::parse(data));
