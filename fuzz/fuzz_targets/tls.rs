//! `cargo fuzz run tls`: see [`glassbox_fuzz::tls::run`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| glassbox_fuzz::tls::run(data));
