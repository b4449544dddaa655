//! `cargo fuzz run mcp_sse`: see [`glassbox_fuzz::mcp::sse`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| glassbox_fuzz::mcp::sse(data));
