//! The edge's ClientHello reader on its own: the first bytes of a TCP stream.

use crate::Cursor;
use glassbox_net::fuzz::{client_hello, MAX_HELLO};

/// Prefixes of the stream checked one by one (the header bytes, where most decisions are).
const SHORT_PREFIXES: usize = 16;

/// `tls`: `data[0..2]` is where the stream is cut, the rest is the stream. The edge reads a
/// stream as its bytes arrive and acts on the first decision, so: a decision (a whole
/// ClientHello and its server name, or why it cannot be read) made on a prefix of the stream
/// is the decision on the whole stream, and a server name is one the stream carries.
pub fn run(data: &[u8]) {
    let mut c = Cursor::new(data);
    let cut = usize::from(c.u16());
    let stream = c.rest();
    let whole = client_hello(stream);
    let cuts = (0..SHORT_PREFIXES.min(stream.len())).chain([cut % (stream.len() + 1)]);
    for n in cuts {
        if let Some(decided) = client_hello(&stream[..n]) {
            assert_eq!(
                Some(decided),
                whole,
                "decided after {n} bytes, otherwise on the whole stream"
            );
        }
    }
    if let Some(Ok(Some(sni))) = &whole {
        assert!(
            sni.len() <= MAX_HELLO,
            "a server name of {} bytes",
            sni.len()
        );
        let handshake = handshake_bytes(stream);
        assert!(
            sni.is_empty() || handshake.windows(sni.len()).any(|w| w == &sni[..]),
            "server name {sni:?} not in the handshake records"
        );
    }
}

/// The bytes the leading handshake records carry, put together (read here independently of
/// the edge: a record header is a type, a version and a length).
fn handshake_bytes(stream: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut rest = stream;
    while let [0x16, _, _, hi, lo, tail @ ..] = rest {
        let len = usize::from(u16::from_be_bytes([*hi, *lo])).min(tail.len());
        out.extend_from_slice(&tail[..len]);
        rest = &tail[len..];
    }
    out
}
