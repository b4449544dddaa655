//! The bodies of glassbox's fuzz targets. Each file of `fuzz_targets/` calls one function
//! here with libFuzzer's bytes; keeping the bodies in a library lets the committed corpora be
//! replayed through the same code without libFuzzer too.
//!
//! Every body drives the real code (a whole MCP session over stdio or HTTP, the SSE parser,
//! the argument generator, the configuration parsers, the network edge, and the edge's DNS,
//! ClientHello and IP packet readers on their own) and checks what the code promises about
//! its output, beyond "does not panic": a panic in glassbox and a broken promise are both
//! findings.
//!
//! | target | function | input |
//! |---|---|---|
//! | `mcp_stdio` | [`mcp::stdio`] | a flags byte, then the server's stdout |
//! | `mcp_http` | [`mcp::http`] | a flags byte, then HTTP responses separated by [`mcp::SEPARATOR`] |
//! | `mcp_sse` | [`mcp::sse`] | a bound and a cut, then an event stream |
//! | `args` | [`args::generate`] | a JSON Schema (any JSON) |
//! | `config` | [`config::parse`] | a selector byte, then a client config, a `server.json` or a package spec |
//! | `net_edge` | [`edge::run`] | a flags byte, then operations (packets, UDP datagrams, TCP streams, timers) |
//! | `dns` | [`dns::run`] | a flags byte, then DNS messages, each after its 2-byte length |
//! | `tls` | [`tls::run`] | a cut, then the first bytes of a TCP stream (TLS records) |
//! | `packet` | [`packet::run`] | one IP packet |
#![deny(missing_docs)]

pub mod args;
pub mod config;
pub mod dns;
pub mod edge;
pub mod mcp;
pub mod packet;
pub mod tls;

/// Reads the fuzzer's bytes front to back; every read past the end gives zeros / nothing.
#[derive(Debug)]
pub struct Cursor<'a> {
    rest: &'a [u8],
}

impl<'a> Cursor<'a> {
    /// A cursor over `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Cursor { rest: data }
    }

    /// Whether everything was read.
    pub fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    /// One byte (0 at the end).
    pub fn u8(&mut self) -> u8 {
        let (&b, rest) = self.rest.split_first().unwrap_or((&0, &[]));
        self.rest = rest;
        b
    }

    /// A big-endian `u16` (missing bytes are 0).
    pub fn u16(&mut self) -> u16 {
        u16::from_be_bytes([self.u8(), self.u8()])
    }

    /// A big-endian `u32` (missing bytes are 0).
    pub fn u32(&mut self) -> u32 {
        u32::from_be_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }

    /// Up to `n` bytes.
    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        let (head, rest) = self.rest.split_at(n.min(self.rest.len()));
        self.rest = rest;
        head
    }

    /// The rest.
    pub fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.rest)
    }
}
