//! The committed corpora (`corpus/<target>/`) replayed through the fuzz targets' bodies,
//! without libFuzzer: `cargo test --manifest-path fuzz/Cargo.toml --no-default-features`.
//! Each input runs the real code and the target's checks; a broken one fails with its file.

use std::fs;
use std::path::Path;

fn replay(target: &str, body: fn(&[u8])) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target);
    let mut files: Vec<_> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a corpus entry").path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no corpus for {target}");
    for file in files {
        let data = fs::read(&file).expect("a corpus file");
        let outcome = std::panic::catch_unwind(|| body(&data));
        assert!(outcome.is_ok(), "{target}: {} fails", file.display());
    }
}

#[test]
fn mcp_stdio() {
    replay("mcp_stdio", glassbox_fuzz::mcp::stdio);
}

#[test]
fn mcp_http() {
    replay("mcp_http", glassbox_fuzz::mcp::http);
}

#[test]
fn mcp_sse() {
    replay("mcp_sse", glassbox_fuzz::mcp::sse);
}

#[test]
fn args() {
    replay("args", glassbox_fuzz::args::generate);
}

#[test]
fn config() {
    replay("config", glassbox_fuzz::config::parse);
}

#[test]
fn net_edge() {
    replay("net_edge", glassbox_fuzz::edge::run);
}

#[test]
fn dns() {
    replay("dns", glassbox_fuzz::dns::run);
}

#[test]
fn tls() {
    replay("tls", glassbox_fuzz::tls::run);
}

#[test]
fn packet() {
    replay("packet", glassbox_fuzz::packet::run);
}
