//! TLS terminated at the edge: the server side of one connection, with rustls, sans I/O
//! (the stack hands it the stream's bytes and sends what it writes).
//!
//! - The ClientHello is read first ([`rustls::server::Acceptor`]), so the certificate can
//!   be chosen for it: a leaf of the audit's [`Authority`] for the SNI, or, without SNI (a
//!   client connecting to an address), for the connection's destination address.
//! - ALPN: the edge speaks HTTP/1.1 only and offers `http/1.1`. A client that offers `h2`
//!   but not `http/1.1` is refused with `no_application_protocol`: HTTP/2 is declined on
//!   purpose, because reading it well (HPACK, streams, flow control, answering each stream)
//!   is a second protocol stack the edge does not have, and a half-read h2 stream would be
//!   named read when it was not. Every h2 client glassbox has met also offers
//!   `http/1.1`. A client offering only other protocols gets no ALPN at all (RFC 7301
//!   lets a server ignore the extension), so that what it sends is still read.
//! - TLS 1.3 and 1.2 (rustls's safe defaults), no session resumption (no tickets, no
//!   session cache: every connection is a full handshake, and nothing outlives it), no early
//!   data.
//! - How a handshake ends is reported as the client behaved: an alert it sent (`UnknownCA`,
//!   `BadCertificate`, `CertificateUnknown`...: it refused glassbox's certificate), or
//!   another failure, so that the flow can say it was not read and why.
//!
//! Bounds: rustls buffers at most a record or so of input per call and its output is
//! handed on at once; the plaintext is what the client sent, and the stack stops reading a
//! connection whose output is not being taken.

use crate::authority::Authority;
use rustls::server::{Acceptor, ClientHello, ResolvesServerCert, ServerConfig, ServerConnection};
use rustls::sign::CertifiedKey;
use rustls::{AlertDescription, Error};
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::Arc;

/// The one protocol the edge agrees to.
const HTTP11: &[u8] = b"http/1.1";

/// What happened in a call.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum TlsEvent {
    /// The ClientHello was read: what the client offered, and whom the certificate
    /// presented is for.
    Hello {
        alpn_offered: Vec<Vec<u8>>,
        certificate_for: String,
    },
    /// The handshake finished: the client accepted glassbox's certificate.
    Established {
        version: String,
        alpn: Option<String>,
    },
    /// The handshake did not finish (why, for the report).
    Refused(String),
    /// The edge could not go on with this ClientHello (why): not terminated.
    NotTerminated(String),
    /// The client ended the session (`close_notify`).
    Closed,
    /// TLS failed after the handshake.
    Failed(String),
}

/// Chooses the one certificate picked for the connection.
#[derive(Debug)]
struct Fixed(Arc<CertifiedKey>);

impl ResolvesServerCert for Fixed {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }
}

enum State {
    /// Before the whole ClientHello was read.
    Accepting(Box<Acceptor>),
    Open(Box<ServerConnection>),
    /// Failed or ended: nothing more is read.
    Over,
}

/// The server side of one terminated connection.
pub(crate) struct Terminated {
    state: State,
    authority: Authority,
    /// The connection's destination (the certificate's address without SNI).
    dst: SocketAddr,
}

impl std::fmt::Debug for Terminated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match &self.state {
            State::Accepting(_) => "accepting",
            State::Open(c) if c.is_handshaking() => "handshaking",
            State::Open(_) => "open",
            State::Over => "over",
        };
        f.debug_struct("Terminated")
            .field("state", &state)
            .field("dst", &self.dst)
            .finish_non_exhaustive()
    }
}

impl Terminated {
    /// A connection to `dst` about to send its ClientHello.
    pub fn new(authority: Authority, dst: SocketAddr) -> Terminated {
        Terminated {
            state: State::Accepting(Box::default()),
            authority,
            dst,
        }
    }

    /// Whether the handshake is still going (or has not begun).
    pub fn handshaking(&self) -> bool {
        match &self.state {
            State::Accepting(_) => true,
            State::Open(c) => c.is_handshaking(),
            State::Over => false,
        }
    }

    /// TLS bytes from the client: the cleartext they carry is appended to `plain`, what to
    /// send back to `out`, and what happened to `events`.
    pub fn feed(
        &mut self,
        mut data: &[u8],
        plain: &mut Vec<u8>,
        out: &mut Vec<u8>,
        events: &mut Vec<TlsEvent>,
    ) {
        while !data.is_empty() {
            let read = match &mut self.state {
                State::Accepting(a) => a.read_tls(&mut data),
                State::Open(c) => c.read_tls(&mut data),
                State::Over => return,
            };
            if !matches!(read, Ok(n) if n > 0) {
                let why = read.err().map_or("no progress".into(), |e| e.to_string());
                self.fail(
                    format!("the edge could not take the client's TLS bytes: {why}"),
                    out,
                    events,
                );
                return;
            }
            if let State::Accepting(_) = self.state {
                self.accept(out, events);
            }
            if let State::Open(_) = self.state {
                self.process(plain, out, events);
            }
        }
    }

    /// Cleartext to send to the client (a response).
    pub fn send(&mut self, data: &[u8], out: &mut Vec<u8>) {
        if let State::Open(c) = &mut self.state {
            // rustls buffers what it cannot encrypt yet (none once the handshake is done).
            let _ = c.writer().write_all(data);
            flush(c, out);
        }
    }

    /// Ends the session: `close_notify`.
    pub fn close(&mut self, out: &mut Vec<u8>) {
        if let State::Open(c) = &mut self.state {
            c.send_close_notify();
            flush(c, out);
        }
        self.state = State::Over;
    }

    /// Reads the ClientHello, once whole, and answers it.
    fn accept(&mut self, out: &mut Vec<u8>, events: &mut Vec<TlsEvent>) {
        let State::Accepting(acceptor) = &mut self.state else {
            return;
        };
        let accepted = match acceptor.accept() {
            Ok(None) => return,
            Ok(Some(a)) => a,
            Err((e, mut alert)) => {
                let _ = alert.write_all(out);
                self.state = State::Over;
                events.push(TlsEvent::NotTerminated(format!(
                    "a ClientHello the edge cannot read ({e})"
                )));
                return;
            }
        };
        let hello = accepted.client_hello();
        let name = hello
            .server_name()
            .map_or_else(|| self.dst.ip().to_string(), str::to_string);
        let offered: Vec<Vec<u8>> = hello
            .alpn()
            .map(|protocols| protocols.map(<[u8]>::to_vec).collect())
            .unwrap_or_default();
        events.push(TlsEvent::Hello {
            alpn_offered: offered.clone(),
            certificate_for: name.clone(),
        });
        let h1 = offered.iter().any(|p| p == HTTP11);
        let h2_only = !h1 && offered.iter().any(|p| p == b"h2");
        let leaf = match self.authority.leaf(&name) {
            Ok(leaf) => leaf,
            Err(e) => {
                self.state = State::Over;
                events.push(TlsEvent::NotTerminated(e.to_string()));
                return;
            }
        };
        let config = match server_config(&self.authority, leaf, h1 || h2_only) {
            Ok(c) => c,
            Err(e) => {
                self.state = State::Over;
                events.push(TlsEvent::NotTerminated(format!(
                    "the edge's TLS configuration failed ({e})"
                )));
                return;
            }
        };
        match accepted.into_connection(config) {
            Ok(mut c) => {
                flush(&mut c, out);
                self.state = State::Open(Box::new(c));
            }
            Err((e, mut alert)) => {
                let _ = alert.write_all(out);
                self.state = State::Over;
                events.push(TlsEvent::Refused(if h2_only {
                    "the client wants h2 only, which the edge does not speak".into()
                } else {
                    format!("the TLS handshake failed ({e})")
                }));
            }
        }
    }

    /// Processes what rustls read: the handshake's progress, the cleartext.
    fn process(&mut self, plain: &mut Vec<u8>, out: &mut Vec<u8>, events: &mut Vec<TlsEvent>) {
        let State::Open(c) = &mut self.state else {
            return;
        };
        let was_handshaking = c.is_handshaking();
        let state = match c.process_new_packets() {
            Ok(s) => s,
            Err(e) => {
                // An alert of ours, if rustls queued one.
                flush(c, out);
                self.state = State::Over;
                events.push(if was_handshaking {
                    TlsEvent::Refused(refusal(&e))
                } else {
                    TlsEvent::Failed(format!("TLS failed after the handshake ({e})"))
                });
                return;
            }
        };
        if was_handshaking && !c.is_handshaking() {
            events.push(TlsEvent::Established {
                version: c
                    .protocol_version()
                    .map_or_else(|| "unknown".into(), |v| format!("{v:?}")),
                alpn: c
                    .alpn_protocol()
                    .map(|p| String::from_utf8_lossy(p).into_owned()),
            });
        }
        if state.plaintext_bytes_to_read() > 0 {
            let mut buf = vec![0; state.plaintext_bytes_to_read().min(16 * 1024)];
            // Until it would block (all read) or says the client closed (0).
            while let Ok(n @ 1..) = c.reader().read(&mut buf) {
                plain.extend_from_slice(&buf[..n]);
            }
        }
        flush(c, out);
        if state.peer_has_closed() {
            events.push(TlsEvent::Closed);
            self.close(out);
        }
    }

    fn fail(&mut self, why: String, out: &mut Vec<u8>, events: &mut Vec<TlsEvent>) {
        let handshaking = self.handshaking();
        if let State::Open(c) = &mut self.state {
            flush(c, out);
        }
        self.state = State::Over;
        events.push(if handshaking {
            TlsEvent::Refused(why)
        } else {
            TlsEvent::Failed(why)
        });
    }
}

/// What rustls queued for the client, into `out`.
fn flush(c: &mut ServerConnection, out: &mut Vec<u8>) {
    while c.wants_write() {
        if !matches!(c.write_tls(out), Ok(n) if n > 0) {
            break;
        }
    }
}

/// The configuration of one connection: `leaf` only, ALPN `http/1.1` when `alpn`.
fn server_config(
    authority: &Authority,
    leaf: Arc<CertifiedKey>,
    alpn: bool,
) -> Result<Arc<ServerConfig>, Error> {
    let mut config = ServerConfig::builder_with_provider(authority.provider())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(Fixed(leaf)));
    config.alpn_protocols = if alpn {
        vec![HTTP11.to_vec()]
    } else {
        Vec::new()
    };
    config.send_tls13_tickets = 0;
    config.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
    Ok(Arc::new(config))
}

/// Why a handshake failed with `e`, in the report's words.
fn refusal(e: &Error) -> String {
    match e {
        Error::AlertReceived(
            a @ (AlertDescription::BadCertificate
            | AlertDescription::UnsupportedCertificate
            | AlertDescription::CertificateRevoked
            | AlertDescription::CertificateExpired
            | AlertDescription::CertificateUnknown
            | AlertDescription::UnknownCA
            | AlertDescription::AccessDenied
            | AlertDescription::BadCertificateStatusResponse
            | AlertDescription::CertificateRequired),
        ) => format!("the client refused glassbox's certificate (alert {a:?})"),
        Error::AlertReceived(a) => format!("the client ended the handshake (alert {a:?})"),
        e => format!("the TLS handshake failed ({e})"),
    }
}
