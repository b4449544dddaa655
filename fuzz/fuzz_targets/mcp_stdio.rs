//! `cargo fuzz run mcp_stdio`: see [`glassbox_fuzz::mcp::stdio`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| glassbox_fuzz::mcp::stdio(data));
