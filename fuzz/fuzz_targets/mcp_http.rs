//! `cargo fuzz run mcp_http`: see [`glassbox_fuzz::mcp::http`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| glassbox_fuzz::mcp::http(data));
