//! The TLS ClientHello at the start of a TCP stream, its server name (SNI) and the
//! application protocols it offers (ALPN), read with tls-parser: how a stream is recognised as
//! TLS, and all that is read of it when the edge does not terminate it. The ClientHello may be split over several records and arrive over several
//! segments; a stream that is cut short is reported, never trusted.

use tls_parser::{
    parse_tls_extensions, parse_tls_message_handshake, SNIType, TlsExtension, TlsMessage,
    TlsMessageHandshake,
};

/// TLS record type of handshake records.
const HANDSHAKE_RECORD: u8 = 0x16;
/// Handshake message type of a ClientHello.
const CLIENT_HELLO: u8 = 1;
/// Longest record payload allowed (TLS 1.2 allows 2^14 + 2048 for compressed records).
const MAX_RECORD: usize = (1 << 14) + 2048;
/// Longest ClientHello the edge waits for.
pub(crate) const MAX_HELLO: usize = 32 * 1024;

/// What the first bytes of a stream say about a ClientHello.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Hello {
    /// Not all of it has arrived yet.
    Incomplete,
    /// A whole ClientHello, with the server name it asked for and the protocols it offered.
    Complete {
        sni: Option<Vec<u8>>,
        alpn: Vec<Vec<u8>>,
    },
    /// Not a ClientHello the edge can read (why).
    Invalid(&'static str),
}

/// Whether a stream starting with `first` looks like TLS.
pub(crate) fn looks_like_tls(first: u8) -> bool {
    first == HANDSHAKE_RECORD
}

/// Reads the ClientHello at the start of `stream` (the stream's first bytes, as far as they
/// arrived).
pub(crate) fn client_hello(stream: &[u8]) -> Hello {
    // The handshake bytes of the leading handshake records, in order.
    let mut handshake = Vec::new();
    let mut rest = stream;
    loop {
        if let Some(h) = handshake.get(..4) {
            if h[0] != CLIENT_HELLO {
                return Hello::Invalid("first TLS handshake message is not a ClientHello");
            }
            let len = usize::from(h[1]) << 16 | usize::from(h[2]) << 8 | usize::from(h[3]);
            if len > MAX_HELLO {
                return Hello::Invalid("TLS ClientHello too long");
            }
            if let Some(message) = handshake.get(..4 + len) {
                return parse(message);
            }
        }
        let Some(header) = rest.get(..5) else {
            return Hello::Incomplete;
        };
        if header[0] != HANDSHAKE_RECORD {
            return Hello::Invalid("TLS record is not a handshake record");
        }
        let len = usize::from(u16::from_be_bytes([header[3], header[4]]));
        if len == 0 || len > MAX_RECORD {
            return Hello::Invalid("TLS record length out of range");
        }
        let Some(fragment) = rest.get(5..5 + len) else {
            return Hello::Incomplete;
        };
        handshake.extend_from_slice(fragment);
        rest = &rest[5 + len..];
    }
}

/// Parses one whole ClientHello handshake message.
fn parse(message: &[u8]) -> Hello {
    let hello = match parse_tls_message_handshake(message) {
        Ok((_, TlsMessage::Handshake(TlsMessageHandshake::ClientHello(hello)))) => hello,
        _ => return Hello::Invalid("malformed TLS ClientHello"),
    };
    let Some(ext) = hello.ext else {
        return Hello::Complete {
            sni: None,
            alpn: Vec::new(),
        };
    };
    let Ok((_, extensions)) = parse_tls_extensions(ext) else {
        return Hello::Invalid("malformed TLS ClientHello extensions");
    };
    let sni = extensions.iter().find_map(|e| match e {
        TlsExtension::SNI(names) => names
            .iter()
            .find(|(kind, _)| *kind == SNIType::HostName)
            .map(|(_, name)| name.to_vec()),
        _ => None,
    });
    let alpn = extensions
        .iter()
        .find_map(|e| match e {
            TlsExtension::ALPN(protocols) => Some(protocols.iter().map(|p| p.to_vec()).collect()),
            _ => None,
        })
        .unwrap_or_default();
    Hello::Complete { sni, alpn }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A minimal TLS 1.2 ClientHello record asking for `sni`.
    pub(crate) fn client_hello_record(sni: &str) -> Vec<u8> {
        let name = sni.as_bytes();
        let mut sni_ext = Vec::new();
        let list_len = 3 + name.len();
        sni_ext.extend_from_slice(&[0, 0]); // server_name
        sni_ext.extend_from_slice(&((list_len + 2) as u16).to_be_bytes());
        sni_ext.extend_from_slice(&(list_len as u16).to_be_bytes());
        sni_ext.push(0); // host_name
        sni_ext.extend_from_slice(&(name.len() as u16).to_be_bytes());
        sni_ext.extend_from_slice(name);

        let mut body = vec![3, 3];
        body.extend_from_slice(&[7; 32]); // random
        body.push(0); // session id
        body.extend_from_slice(&[0, 2, 0x13, 0x01]); // one cipher suite
        body.extend_from_slice(&[1, 0]); // null compression
        body.extend_from_slice(&(sni_ext.len() as u16).to_be_bytes());
        body.extend_from_slice(&sni_ext);

        let mut hs = vec![CLIENT_HELLO];
        hs.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
        hs.extend_from_slice(&body);
        records(&hs, hs.len())
    }

    /// `handshake` in TLS records of at most `size` bytes each.
    pub(crate) fn records(handshake: &[u8], size: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for chunk in handshake.chunks(size) {
            out.extend_from_slice(&[HANDSHAKE_RECORD, 3, 1]);
            out.extend_from_slice(&(chunk.len() as u16).to_be_bytes());
            out.extend_from_slice(chunk);
        }
        out
    }

    fn sni(name: &str) -> Hello {
        Hello::Complete {
            sni: Some(name.as_bytes().to_vec()),
            alpn: Vec::new(),
        }
    }

    #[test]
    fn reads_the_server_name() {
        assert_eq!(
            client_hello(&client_hello_record("dns.google")),
            sni("dns.google")
        );
    }

    #[test]
    fn every_prefix_is_incomplete_and_the_whole_is_read() {
        let rec = client_hello_record("api.example");
        for n in 0..rec.len() {
            assert_eq!(client_hello(&rec[..n]), Hello::Incomplete, "prefix {n}");
        }
        assert_eq!(client_hello(&rec), sni("api.example"));
    }

    #[test]
    fn a_hello_split_over_records_is_read() {
        let rec = client_hello_record("split.example");
        let handshake = &rec[5..];
        let split = records(handshake, 7);
        assert_eq!(client_hello(&split), sni("split.example"));
        for n in 0..split.len() {
            assert_eq!(client_hello(&split[..n]), Hello::Incomplete);
        }
    }

    #[test]
    fn bad_input_is_reported_not_trusted() {
        assert!(matches!(
            client_hello(b"GET / HTTP/1.1\r\n"),
            Hello::Invalid(_)
        ));
        // A record announcing more than TLS allows.
        assert!(matches!(
            client_hello(&[0x16, 3, 1, 0xff, 0xff, 1]),
            Hello::Invalid(_)
        ));
        // A handshake that is not a ClientHello.
        assert!(matches!(
            client_hello(&[0x16, 3, 1, 0, 4, 2, 0, 0, 0]),
            Hello::Invalid(_)
        ));
        // A ClientHello whose body is garbage of the announced length.
        let mut garbage = vec![0x16, 3, 1, 0, 12, CLIENT_HELLO, 0, 0, 8];
        garbage.extend_from_slice(&[0xff; 8]);
        assert!(matches!(client_hello(&garbage), Hello::Invalid(_)));
        // A ClientHello announcing 16 MiB.
        assert!(matches!(
            client_hello(&[0x16, 3, 1, 0, 4, CLIENT_HELLO, 0xff, 0xff, 0xff]),
            Hello::Invalid(_)
        ));
    }
}
