//! `cargo fuzz run args`: see [`glassbox_fuzz::args::generate`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| glassbox_fuzz::args::generate(data));
