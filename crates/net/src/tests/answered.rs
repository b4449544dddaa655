//! The edge with the responder `ok`: real TLS clients (rustls) and real HTTP bytes through
//! the engine, over the pretend sandbox of `tests.rs` (a second smoltcp interface).

use super::*;
use crate::decode::tests::{brotli_stored, gzip};
use glassbox_model::{HttpExchange, TlsOutcome, BODY_LIMIT, EXCHANGE_LIMIT};
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore};
use std::io::{Read, Write};
use std::sync::Arc;

fn answering(authority: &Authority) -> Edge {
    capture().with_responder(Responder::Answer(authority.clone()))
}

/// A rustls client configuration trusting only `roots`, offering `alpn`, speaking `versions`.
fn client_config(
    roots: &[&Authority],
    alpn: &[&[u8]],
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> Arc<ClientConfig> {
    let mut store = RootCertStore::empty();
    for a in roots {
        store
            .add(CertificateDer::from(a.certificate_der()))
            .unwrap();
    }
    let mut c =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_protocol_versions(versions)
            .unwrap()
            .with_root_certificates(store)
            .with_no_client_auth();
    c.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(c)
}

/// A TLS client on one connection of the pretend sandbox.
struct TlsClient {
    conn: ClientConnection,
    h: SocketHandle,
    /// TLS bytes rustls wrote that the socket did not take yet.
    out: Vec<u8>,
    /// The cleartext the edge sent.
    got: Vec<u8>,
    error: Option<rustls::Error>,
    /// The edge closed the TCP connection.
    eof: bool,
}

impl TlsClient {
    fn open(
        client: &mut Client,
        edge: &mut Edge,
        to: SocketAddr,
        port: u16,
        config: Arc<ClientConfig>,
        name: ServerName<'static>,
    ) -> TlsClient {
        let h = client.connect(to, port);
        client.pump(edge, 100, |c| c.sock(h).may_send());
        assert_eq!(client.sock(h).state(), tcp::State::Established);
        let mut conn = ClientConnection::new(config, name).unwrap();
        // A request of any size is taken at once (and sent as the window allows).
        conn.set_buffer_limit(None);
        TlsClient {
            conn,
            h,
            out: Vec::new(),
            got: Vec::new(),
            error: None,
            eof: false,
        }
    }

    /// Moves bytes between rustls and the socket, both ways.
    fn shuttle(&mut self, client: &mut Client) {
        while self.conn.wants_write() {
            self.conn.write_tls(&mut self.out).unwrap();
        }
        let sock = client.sock(self.h);
        if !self.out.is_empty() && sock.may_send() {
            let n = sock.send_slice(&self.out).unwrap_or(0);
            self.out.drain(..n);
        }
        let mut tls = Vec::new();
        while sock.can_recv() {
            sock.recv(|d| {
                tls.extend_from_slice(d);
                (d.len(), ())
            })
            .unwrap();
        }
        if !sock.may_recv() {
            self.eof = true;
        }
        let mut rest = &tls[..];
        while !rest.is_empty() && self.error.is_none() {
            if self.conn.read_tls(&mut rest).is_err() {
                break;
            }
            match self.conn.process_new_packets() {
                Ok(_) => {
                    let mut buf = [0u8; 4096];
                    while let Ok(n @ 1..) = self.conn.reader().read(&mut buf) {
                        self.got.extend_from_slice(&buf[..n]);
                    }
                }
                Err(e) => self.error = Some(e),
            }
        }
        // An alert rustls queued for the edge.
        while self.conn.wants_write() {
            self.conn.write_tls(&mut self.out).unwrap();
        }
        if !self.out.is_empty() && sock.may_send() {
            let n = sock.send_slice(&self.out).unwrap_or(0);
            self.out.drain(..n);
        }
    }

    /// Runs both ends, 1 ms per round, until `done` holds (at most `rounds`).
    fn run(
        &mut self,
        client: &mut Client,
        edge: &mut Edge,
        rounds: usize,
        done: impl Fn(&TlsClient) -> bool,
    ) {
        for _ in 0..rounds {
            self.shuttle(client);
            client.pump(edge, 1, |_| true);
            self.shuttle(client);
            if done(self) {
                return;
            }
            client.now_ns += MS;
        }
    }

    fn handshake(&mut self, client: &mut Client, edge: &mut Edge) {
        self.run(client, edge, 200, |t| {
            !t.conn.is_handshaking() || t.error.is_some() || t.eof
        });
    }

    /// Sends `request` and waits for `responses` whole responses (their count of
    /// `HTTP/1.1 ` status lines) or the end.
    fn exchange(
        &mut self,
        client: &mut Client,
        edge: &mut Edge,
        request: &[u8],
        responses: usize,
    ) -> Vec<u8> {
        self.got.clear();
        self.conn.writer().write_all(request).unwrap();
        self.run(client, edge, 2000, |t| {
            t.eof || t.error.is_some() || complete_responses(&t.got) >= responses
        });
        std::mem::take(&mut self.got)
    }
}

/// Whole responses in `bytes` (heads with the bodies their Content-Length announces; 1xx
/// and 204 have none).
fn complete_responses(bytes: &[u8]) -> usize {
    let mut n = 0;
    let mut rest = bytes;
    loop {
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut r = httparse::Response::new(&mut headers);
        let Ok(httparse::Status::Complete(len)) = r.parse(rest) else {
            return n;
        };
        let body = r
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case("content-length"))
            .map_or(0, |h| {
                std::str::from_utf8(h.value).unwrap().parse().unwrap()
            });
        if rest.len() < len + body {
            return n;
        }
        if r.code != Some(100) {
            n += 1;
        }
        rest = &rest[len + body..];
    }
}

fn statuses(bytes: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(bytes)
        .split("\r\n")
        .filter(|l| l.starts_with("HTTP/1.1 "))
        .map(str::to_string)
        .collect()
}

fn name(n: &str) -> ServerName<'static> {
    ServerName::try_from(n.to_string()).unwrap()
}

const BOTH: &[&rustls::SupportedProtocolVersion] =
    &[&rustls::version::TLS13, &rustls::version::TLS12];

fn chunked(body: &[u8], size: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for c in body.chunks(size) {
        out.extend_from_slice(format!("{:x}\r\n", c.len()).as_bytes());
        out.extend_from_slice(c);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}

#[test]
fn https_is_terminated_read_in_full_and_answered() {
    let ca = Authority::fresh().unwrap();
    let mut edge = answering(&ca);
    let mut client = Client::new();
    let server = at(v4(192, 0, 2, 43), 443);
    let config = client_config(&[&ca], &[b"h2", b"http/1.1"], BOTH);
    let mut tls = TlsClient::open(
        &mut client,
        &mut edge,
        server,
        49_300,
        config,
        name("api.example"),
    );
    tls.handshake(&mut client, &mut edge);
    assert!(tls.error.is_none(), "{:?}", tls.error);
    assert!(!tls.conn.is_handshaking());
    assert_eq!(tls.conn.alpn_protocol(), Some(&b"http/1.1"[..]));
    // The certificate is the authority's leaf for the name (rustls checked the name).
    let certs = tls.conn.peer_certificates().unwrap();
    assert_eq!(certs[0], ca.leaf("api.example").unwrap().cert[0]);
    assert_eq!(certs[1].as_ref(), ca.certificate_der());

    // A POST with a chunked gzip body, asking for JSON.
    let secret = br#"{"token":"AKIAIOSFODNN7EXAMPLE","note":"hello"}"#;
    let mut post =
        b"POST /v1/upload?x=1 HTTP/1.1\r\nHost: api.example\r\nAccept: application/json\r\n\
Content-Encoding: gzip\r\nTransfer-Encoding: chunked\r\nX-Api-Key: k-123\r\n\r\n"
            .to_vec();
    post.extend_from_slice(&chunked(&gzip(secret), 7));
    let answer = tls.exchange(&mut client, &mut edge, &post, 1);
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    assert!(text.contains("Content-Type: application/json\r\n"));
    assert!(text.ends_with("Content-Length: 2\r\n\r\n{}"), "{text}");

    // Keep-alive: more requests on the same connection (one asking for no JSON: no body).
    let get = b"GET /v1/config HTTP/1.1\r\nHost: api.example\r\nAccept: text/plain\r\n\r\n";
    let answer = tls.exchange(&mut client, &mut edge, get, 1);
    assert!(
        answer.ends_with(b"Content-Length: 0\r\n\r\n"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    let both = b"HEAD /h HTTP/1.1\r\nHost: api.example\r\n\r\nOPTIONS /o HTTP/1.1\r\nHost: api.example\r\nConnection: close\r\n\r\n";
    let answer = tls.exchange(&mut client, &mut edge, both, 2);
    assert_eq!(
        statuses(&answer),
        vec!["HTTP/1.1 200 OK", "HTTP/1.1 204 No Content"]
    );
    let text = String::from_utf8_lossy(&answer);
    assert!(text.contains("Allow: GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS\r\n"));
    assert!(text.ends_with("Connection: close\r\n\r\n"), "{text}");
    // The edge ends the session after `Connection: close`.
    tls.run(&mut client, &mut edge, 200, |t| t.eof);
    assert!(tls.eof && tls.error.is_none(), "{:?}", tls.error);

    let (flows, c) = edge.finish(client.now_ns);
    assert_all_counted(&flows, &c);
    let f = flow_to(&flows, &sock(server));
    assert_eq!(f.sni, Some(Bytes::from("api.example")));
    let t = f.tls.as_ref().unwrap();
    assert_eq!(t.outcome, TlsOutcome::Read);
    assert_eq!(t.alpn.as_deref(), Some("http/1.1"));
    assert_eq!(t.version.as_deref(), Some("TLSv1_3"));
    assert_eq!(t.certificate_for.as_deref(), Some("api.example"));
    assert_eq!(
        t.alpn_offered,
        vec![Bytes::from("h2"), Bytes::from("http/1.1")]
    );
    assert!(f.unread.is_none(), "{:?}", f.unread);
    // What was sent, decrypted, in order; the sample holds the encrypted stream.
    let mut sent = post.clone();
    sent.extend_from_slice(get);
    sent.extend_from_slice(both);
    assert_eq!(f.cleartext.0, sent);
    assert_eq!(f.cleartext_cut, 0);
    assert!(!f.sample.0.windows(5).any(|w| w == b"POST "));
    let http = f.http.as_ref().unwrap();
    assert_eq!(
        (http.method.as_str(), http.host.clone()),
        ("POST", Some(Bytes::from("api.example")))
    );

    let ex: Vec<(&str, &[u8], u16)> = f
        .exchanges
        .iter()
        .map(|e| (e.method.as_str(), e.target.as_slice(), e.status))
        .collect();
    assert_eq!(
        ex,
        vec![
            ("POST", &b"/v1/upload?x=1"[..], 200),
            ("GET", b"/v1/config", 200),
            ("HEAD", b"/h", 200),
            ("OPTIONS", b"/o", 204),
        ]
    );
    let p: &HttpExchange = &f.exchanges[0];
    assert_eq!(p.body, Bytes::from(&secret[..]));
    assert_eq!(p.body_len, secret.len() as u64);
    assert_eq!(p.body_error, None);
    assert_eq!(p.header("x-api-key"), Some(&Bytes::from("k-123")));
    assert_eq!(p.header("Content-Encoding"), Some(&Bytes::from("gzip")));
    assert_eq!(p.headers.len(), 5);
    assert!(f.bytes_in > 0);
}

#[test]
fn an_address_without_sni_gets_a_certificate_for_it_over_tls12() {
    let ca = Authority::fresh().unwrap();
    let mut edge = answering(&ca);
    let mut client = Client::new();
    let ip = v4(192, 0, 2, 9);
    let config = client_config(&[&ca], &[b"http/1.1"], &[&rustls::version::TLS12]);
    let mut tls = TlsClient::open(
        &mut client,
        &mut edge,
        at(ip, 8443),
        49_301,
        config,
        ServerName::IpAddress(ip.into()),
    );
    tls.handshake(&mut client, &mut edge);
    assert!(tls.error.is_none(), "{:?}", tls.error);
    let body = br#"{"q":1}"#;
    let mut req = format!(
        "PUT /x HTTP/1.1\r\nHost: 192.0.2.9:8443\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(body);
    let answer = tls.exchange(&mut client, &mut edge, &req, 1);
    assert!(answer.ends_with(b"\r\n\r\n{}"));
    let (flows, _) = edge.finish(client.now_ns);
    let f = &flows[0];
    assert!(f.sni.is_none());
    let t = f.tls.as_ref().unwrap();
    assert_eq!(t.certificate_for.as_deref(), Some("192.0.2.9"));
    assert_eq!(t.version.as_deref(), Some("TLSv1_2"));
    assert_eq!(t.outcome, TlsOutcome::Read);
    assert_eq!(f.exchanges[0].body, Bytes::from(&body[..]));
    assert!(f.note.as_deref().unwrap_or_default().contains("still open"));
}

#[test]
fn a_client_trusting_another_ca_refuses_and_nothing_is_read() {
    let ca = Authority::fresh().unwrap();
    let other = Authority::fresh().unwrap();
    let mut edge = answering(&ca);
    let mut client = Client::new();
    let server = at(v4(192, 0, 2, 44), 443);
    let config = client_config(&[&other], &[b"http/1.1"], BOTH);
    let mut tls = TlsClient::open(
        &mut client,
        &mut edge,
        server,
        49_302,
        config,
        name("pinned.example"),
    );
    tls.handshake(&mut client, &mut edge);
    assert!(
        matches!(tls.error, Some(rustls::Error::InvalidCertificate(_))),
        "{:?}",
        tls.error
    );
    // It would have sent this had it gone on.
    let _ = tls.conn.writer().write_all(b"GET /secret HTTP/1.1\r\n\r\n");
    tls.run(&mut client, &mut edge, 100, |t| t.eof);
    assert!(tls.eof, "the edge closes a refused connection");
    let (flows, _) = edge.finish(client.now_ns);
    let f = &flows[0];
    let t = f.tls.as_ref().unwrap();
    let TlsOutcome::Refused { why } = &t.outcome else {
        panic!("{t:?}");
    };
    assert!(
        why.contains("refused glassbox's certificate") && why.contains("UnknownCA"),
        "{why}"
    );
    assert_eq!(t.certificate_for.as_deref(), Some("pinned.example"));
    let unread = f.unread.as_deref().unwrap();
    assert!(
        unread.starts_with("TLS to pinned.example:443: the client refused"),
        "{unread}"
    );
    assert!(unread.ends_with("encrypted, not read"));
    assert!(f.cleartext.is_empty() && f.exchanges.is_empty() && f.http.is_none());
}

#[test]
fn an_h2_only_client_is_refused_and_told_why() {
    let ca = Authority::fresh().unwrap();
    let mut edge = answering(&ca);
    let mut client = Client::new();
    let config = client_config(&[&ca], &[b"h2"], BOTH);
    let mut tls = TlsClient::open(
        &mut client,
        &mut edge,
        at(v4(192, 0, 2, 45), 443),
        49_303,
        config,
        name("grpc.example"),
    );
    tls.handshake(&mut client, &mut edge);
    assert!(
        matches!(
            tls.error,
            Some(rustls::Error::AlertReceived(
                rustls::AlertDescription::NoApplicationProtocol
            ))
        ),
        "{:?}",
        tls.error
    );
    let (flows, _) = edge.finish(client.now_ns);
    let t = flows[0].tls.as_ref().unwrap();
    assert_eq!(
        t.outcome,
        TlsOutcome::Refused {
            why: "the client wants h2 only, which the edge does not speak".into()
        }
    );
    assert_eq!(t.alpn_offered, vec![Bytes::from("h2")]);
    assert!(flows[0].unread.as_deref().unwrap().contains("h2 only"));
}

#[test]
fn a_client_closing_during_the_handshake_is_unread() {
    let ca = Authority::fresh().unwrap();
    let mut edge = answering(&ca);
    let mut client = Client::new();
    let config = client_config(&[&ca], &[], BOTH);
    let mut tls = TlsClient::open(
        &mut client,
        &mut edge,
        at(v4(192, 0, 2, 46), 993),
        49_304,
        config,
        name("mail.example"),
    );
    // The ClientHello, then the client goes away once the edge answered it, before it
    // finished its side of the handshake.
    let mut hello = Vec::new();
    tls.conn.write_tls(&mut hello).unwrap();
    client.sock(tls.h).send_slice(&hello).unwrap();
    client.pump(&mut edge, 20, |_| false);
    assert!(
        client.sock(tls.h).recv_queue() > 0,
        "the edge answered the ClientHello"
    );
    client.sock(tls.h).close();
    client.pump(&mut edge, 100, |c| {
        c.sock(tls.h).state() == tcp::State::TimeWait
    });
    let (flows, _) = edge.finish(client.now_ns);
    let f = &flows[0];
    let TlsOutcome::Refused { why } = &f.tls.as_ref().unwrap().outcome else {
        panic!("{f:?}");
    };
    assert_eq!(why, "the client closed the connection during the handshake");
    assert!(f.unread.as_deref().unwrap().contains("mail.example:993"));
}

#[test]
fn refuse_mode_does_not_terminate_and_names_the_flow_unread() {
    let ca = Authority::fresh().unwrap();
    let mut edge = capture();
    let mut client = Client::new();
    let config = client_config(&[&ca], &[b"http/1.1"], BOTH);
    let mut tls = TlsClient::open(
        &mut client,
        &mut edge,
        at(v4(192, 0, 2, 47), 443),
        49_305,
        config,
        name("api.example"),
    );
    tls.handshake(&mut client, &mut edge);
    assert!(tls.eof && tls.conn.is_handshaking());
    let (flows, _) = edge.finish(client.now_ns);
    let f = &flows[0];
    let t = f.tls.as_ref().unwrap();
    assert!(matches!(&t.outcome, TlsOutcome::NotTerminated { why } if why.contains("refuse")));
    assert_eq!(t.alpn_offered, vec![Bytes::from("http/1.1")]);
    assert_eq!(
        f.unread.as_deref(),
        Some("TLS to api.example:443: not terminated (the edge's responder is refuse): encrypted, not read")
    );
    assert!(f.cleartext.is_empty() && f.exchanges.is_empty());
    assert_eq!(f.bytes_in, 0);
}

/// A plain-HTTP client on one connection: sends, and collects what comes back.
fn http_client(client: &mut Client, edge: &mut Edge, to: SocketAddr, port: u16) -> SocketHandle {
    let h = client.connect(to, port);
    client.pump(edge, 100, |c| c.sock(h).may_send());
    h
}

/// Sends `data` (as fast as the window allows) and collects the answer until `responses`
/// are whole or the edge closed.
fn http_send(
    client: &mut Client,
    edge: &mut Edge,
    h: SocketHandle,
    data: &[u8],
    responses: usize,
) -> Vec<u8> {
    http_send_for(client, edge, h, data, responses, 2000)
}

/// [`http_send`], for at most `rounds` rounds of 1 ms.
fn http_send_for(
    client: &mut Client,
    edge: &mut Edge,
    h: SocketHandle,
    data: &[u8],
    responses: usize,
    rounds: usize,
) -> Vec<u8> {
    let mut got = Vec::new();
    let mut sent = 0;
    for _ in 0..rounds {
        if sent < data.len() {
            sent += client.sock(h).send_slice(&data[sent..]).unwrap_or(0);
        }
        client.pump(edge, 1, |_| true);
        got.extend(client.received(h));
        if sent == data.len()
            && (complete_responses(&got) >= responses || !client.sock(h).may_recv())
        {
            break;
        }
        client.now_ns += MS;
    }
    got
}

#[test]
fn plain_http_is_read_in_full_and_answered_until_close() {
    let ca = Authority::fresh().unwrap();
    let mut edge = answering(&ca);
    let mut client = Client::new();
    let server = at(v4(192, 0, 2, 80), 80);
    let h = http_client(&mut client, &mut edge, server, 49_310);
    let first =
        b"POST /collect HTTP/1.1\r\nHost: collect.example\r\nContent-Length: 11\r\n\r\nhello";
    let got = http_send_for(&mut client, &mut edge, h, first, 1, 50);
    assert!(got.is_empty(), "no answer before the body is whole");
    let got = http_send(&mut client, &mut edge, h, b" world", 1);
    assert_eq!(
        String::from_utf8_lossy(&got),
        "HTTP/1.1 200 OK\r\nServer: glassbox-edge\r\nContent-Type: application/json\r\n\
         Content-Length: 2\r\n\r\n{}"
    );
    let br = brotli_stored(b"compressed secret");
    let mut second = format!(
        "POST /b HTTP/1.1\r\nHost: collect.example\r\nContent-Encoding: br\r\nExpect: 100-continue\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        br.len()
    )
    .into_bytes();
    second.extend_from_slice(&br);
    let got = http_send(&mut client, &mut edge, h, &second, 1);
    assert!(got.starts_with(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n"));
    assert!(got.ends_with(b"Connection: close\r\n\r\n{}"));
    client.pump(&mut edge, 100, |c| !c.sock(h).may_recv());
    assert_eq!(client.sock(h).state(), tcp::State::CloseWait);
    client.sock(h).close();
    client.pump(&mut edge, 100, |_| false);
    assert_eq!(edge.tcp_sockets(), 0);

    let (flows, c) = edge.finish(client.now_ns);
    assert_all_counted(&flows, &c);
    let f = &flows[0];
    assert!(f.tls.is_none() && f.cleartext.is_empty() && f.unread.is_none());
    assert_eq!(f.http.as_ref().unwrap().target, Bytes::from("/collect"));
    assert_eq!(f.exchanges.len(), 2);
    assert_eq!(f.exchanges[0].body, Bytes::from("hello world"));
    assert_eq!(f.exchanges[1].body, Bytes::from("compressed secret"));
    assert!(f.exchanges.iter().all(|e| e.status == 200));
    // Each exchange has the time its request was whole (the first's body waited 50 ms for
    // its last bytes), in order, within the flow's.
    let (a, b) = (f.exchanges[0].t_ns, f.exchanges[1].t_ns);
    assert!(
        f.t_ns + 50 * MS <= a && a <= b && b <= f.end_ns,
        "{a} {b} {f:?}"
    );
    assert_eq!(f.note, None);
}

#[test]
fn a_gzip_bomb_is_cut_in_bounded_time() {
    // 1 GiB of zeros as one gzip member, about 1 MiB: one deflate block for 1 MiB of
    // zeros, ended by a full flush (byte-aligned, no reference before it), repeated.
    let mut c = flate2::Compress::new(flate2::Compression::best(), false);
    let zeros = vec![0u8; 1 << 20];
    let mut block = Vec::with_capacity(1 << 20);
    c.compress_vec(&zeros, &mut block, flate2::FlushCompress::Full)
        .unwrap();
    assert_eq!(c.total_in(), 1 << 20);
    let mut last = Vec::with_capacity(64);
    c.compress_vec(&[], &mut last, flate2::FlushCompress::Finish)
        .unwrap();
    let mut crc = flate2::Crc::new();
    let mut bomb = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
    for _ in 0..1024 {
        bomb.extend_from_slice(&block);
        crc.update(&zeros);
    }
    bomb.extend_from_slice(&last);
    bomb.extend_from_slice(&crc.sum().to_le_bytes());
    bomb.extend_from_slice(&crc.amount().to_le_bytes());
    assert!(bomb.len() < 2 << 20, "{}", bomb.len());

    let ca = Authority::fresh().unwrap();
    let mut edge = answering(&ca);
    let mut client = Client::new();
    let config = client_config(&[&ca], &[b"http/1.1"], BOTH);
    let mut tls = TlsClient::open(
        &mut client,
        &mut edge,
        at(v4(192, 0, 2, 48), 443),
        49_306,
        config,
        name("bomb.example"),
    );
    tls.handshake(&mut client, &mut edge);
    let mut req = format!(
        "POST /z HTTP/1.1\r\nHost: bomb.example\r\nContent-Encoding: gzip\r\nContent-Length: {}\r\n\r\n",
        bomb.len()
    )
    .into_bytes();
    req.extend_from_slice(&bomb);
    let answer = tls.exchange(&mut client, &mut edge, &req, 1);
    assert!(answer.starts_with(b"HTTP/1.1 200 OK\r\n"));
    let (flows, _) = edge.finish(client.now_ns);
    let ex = &flows[0].exchanges[0];
    assert_eq!(ex.body_len, crate::decode::DECODE_LIMIT);
    assert_eq!(ex.body.0.len(), BODY_LIMIT);
    assert!(ex.body.0.iter().all(|&b| b == 0));
    assert!(ex
        .body_error
        .as_deref()
        .unwrap()
        .contains("decoding stopped"));
    // The cleartext keeps its first bytes and counts the rest.
    let f = &flows[0];
    assert_eq!(f.cleartext.0.len(), glassbox_model::FLOW_SAMPLE_LIMIT);
    assert_eq!(
        f.cleartext.0.len() as u64 + f.cleartext_cut,
        req.len() as u64
    );
}

#[test]
fn exchanges_beyond_the_limit_are_counted_and_still_answered() {
    let ca = Authority::fresh().unwrap();
    let mut edge = answering(&ca);
    let mut client = Client::new();
    let h = http_client(&mut client, &mut edge, at(v4(192, 0, 2, 81), 8080), 49_311);
    let n = EXCHANGE_LIMIT + 6;
    let requests: Vec<u8> = (0..n)
        .flat_map(|i| format!("GET /{i} HTTP/1.1\r\nHost: x\r\n\r\n").into_bytes())
        .collect();
    let got = http_send(&mut client, &mut edge, h, &requests, n);
    assert_eq!(complete_responses(&got), n);
    let (flows, _) = edge.finish(client.now_ns);
    assert_eq!(flows[0].exchanges.len(), EXCHANGE_LIMIT);
    assert_eq!(flows[0].exchanges_cut, 6);
    assert_eq!(flows[0].exchanges[63].target, Bytes::from("/63"));
}

#[test]
fn what_the_run_budget_cannot_keep_is_named_unread() {
    let ca = Authority::fresh().unwrap();
    let limits = Limits {
        sample_total: 100,
        ..Limits::default()
    };
    assert_eq!(limits.read_total(), 200);
    let mut edge = Edge::new(NetworkMode::Capture, 0, limits).with_responder(Responder::Answer(ca));
    let mut client = Client::new();
    let h = http_client(&mut client, &mut edge, at(v4(192, 0, 2, 82), 80), 49_312);
    let body = vec![b'a'; 300];
    let mut req = format!(
        "POST /big HTTP/1.1\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(&body);
    let got = http_send(&mut client, &mut edge, h, &req, 1);
    assert_eq!(complete_responses(&got), 1);
    let (flows, _) = edge.finish(client.now_ns);
    let ex = &flows[0].exchanges[0];
    assert_eq!(
        (ex.method.as_str(), ex.body_len, ex.status),
        ("POST", 300, 200)
    );
    assert!(ex.body.is_empty() && ex.headers.is_empty());
    assert!(flows[0]
        .unread
        .as_deref()
        .unwrap()
        .contains("read but not kept"));
}

#[test]
fn a_relayed_connection_stays_byte_for_byte_with_the_responder_on() {
    use std::net::{TcpListener, TcpStream};
    let registry = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = registry.local_addr().unwrap().port();
    let host = std::thread::spawn(move || {
        let (mut s, _) = registry.accept().unwrap();
        let mut got = vec![0u8; 5];
        s.read_exact(&mut got).unwrap();
        let len = usize::from(u16::from_be_bytes([got[3], got[4]]));
        got.resize(5 + len, 0);
        s.read_exact(&mut got[5..]).unwrap();
        s.write_all(b"not a server hello").unwrap();
        got
    });
    let relay = Relay {
        hosts: vec![("registry.test".into(), 443)],
        connect: Arc::new(move |_, _| TcpStream::connect(("127.0.0.1", port))),
    };
    let ca = Authority::fresh().unwrap();
    let mut edge = answering(&ca).with_relay(relay);
    let ip = resolve(&mut edge, 1, "registry.test.", RecordType::A);
    let mut client = Client::new();
    client.now_ns = 10 * MS;
    let config = client_config(&[&ca], &[b"http/1.1"], BOTH);
    let mut tls = TlsClient::open(
        &mut client,
        &mut edge,
        at(ip, 443),
        49_307,
        config,
        name("registry.test"),
    );
    for _ in 0..5000 {
        tls.shuttle(&mut client);
        client.pump(&mut edge, 1, |_| true);
        if tls.error.is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
        client.now_ns += MS;
    }
    // The real host got the ClientHello as the client sent it, and its bytes came back.
    let hello = host.join().unwrap();
    assert!(
        tls.error.is_some(),
        "the client read the host's bytes, not the edge's"
    );
    let (flows, _) = edge.finish(client.now_ns);
    let f = flows
        .iter()
        .find(|f| f.protocol == FlowProtocol::Tcp)
        .unwrap();
    // What the client sent: the ClientHello the host read, then its alert on the host's
    // answer.
    assert!(f.sample.0.starts_with(&hello) && f.sample.0[hello.len()] == 21);
    assert_eq!(f.bytes_in, b"not a server hello".len() as u64);
    let t = f.tls.as_ref().unwrap();
    assert!(matches!(&t.outcome, TlsOutcome::NotTerminated { why } if why.contains("relayed")));
    assert!(f
        .unread
        .as_deref()
        .unwrap()
        .starts_with("TLS to registry.test:443: relayed"));
    assert!(f.cleartext.is_empty() && f.exchanges.is_empty());
}

#[test]
fn a_quic_initial_to_443_is_named_unread() {
    for mode in [NetworkMode::Capture, NetworkMode::Denied] {
        let mut edge = Edge::new(mode, 0, Limits::default());
        let quic = at(v4(192, 0, 2, 90), 443);
        let mut initial = vec![0xc3, 0, 0, 0, 1, 8];
        initial.extend_from_slice(&[0xab; 1200]);
        edge.input(&udp(sandbox(5000), quic, &initial), MS);
        edge.input(&udp(sandbox(5000), quic, &[0x41, 1, 2, 3, 4, 5]), 2 * MS);
        // A short header first, and long headers elsewhere: not named.
        edge.input(&udp(sandbox(5001), quic, &[0x41, 0, 0, 0, 1, 5]), 3 * MS);
        edge.input(
            &udp(sandbox(5002), at(v4(192, 0, 2, 90), 4433), &initial),
            4 * MS,
        );
        edge.input(&udp(sandbox(5003), quic, &[0xc0, 0, 0, 0, 0, 1]), 5 * MS);
        let (flows, _) = edge.finish(6 * MS);
        assert_eq!(
            flows[0].unread.as_deref(),
            Some("QUIC to 192.0.2.90:443: encrypted, not read")
        );
        assert!(flows[1..].iter().all(|f| f.unread.is_none()), "{flows:?}");
    }
}

/// The body of the one whole response in `bytes`.
fn response_body(bytes: &[u8]) -> &[u8] {
    let at = bytes.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    &bytes[at + 4..]
}

#[test]
fn doh_is_read_and_answered_by_the_edges_dns_and_the_answer_maps_back() {
    use base64::Engine;
    let ca = Authority::fresh().unwrap();
    let mut edge = answering(&ca);
    let mut client = Client::new();
    // An address the resolver's name was looked up for, as the sandbox's resolver gives it.
    let resolver = resolve(&mut edge, 1, "doh.resolver.example", RecordType::A);
    let config = client_config(&[&ca], &[b"http/1.1"], BOTH);
    let mut tls = TlsClient::open(
        &mut client,
        &mut edge,
        at(resolver, 443),
        49_400,
        config,
        name("doh.resolver.example"),
    );
    tls.handshake(&mut client, &mut edge);
    assert!(tls.error.is_none(), "{:?}", tls.error);

    // RFC 8484 GET, then POST, on the same connection.
    let q = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(dns_query(
        0,
        "beacon.h-c2.example",
        RecordType::A,
    ));
    let get = format!(
        "GET /dns-query?dns={q} HTTP/1.1\r\nHost: doh.resolver.example\r\n\
         Accept: application/dns-message\r\n\r\n"
    );
    let answer = tls.exchange(&mut client, &mut edge, get.as_bytes(), 1);
    let text = String::from_utf8_lossy(&answer).into_owned();
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    assert!(
        text.contains("Content-Type: application/dns-message\r\n"),
        "{text}"
    );
    let reply = Message::from_vec(response_body(&answer)).unwrap();
    let RData::A(beacon) = reply.answers[0].data else {
        panic!("{reply:?}")
    };
    let body = dns_query(0, "c2.exfil.example", RecordType::AAAA);
    let mut post = format!(
        "POST /q HTTP/1.1\r\nHost: doh.resolver.example\r\nContent-Type: application/dns-message\r\n\
         Content-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    post.extend_from_slice(&body);
    let answer = tls.exchange(&mut client, &mut edge, &post, 1);
    let reply = Message::from_vec(response_body(&answer)).unwrap();
    assert!(matches!(reply.answers[0].data, RData::AAAA(_)), "{reply:?}");

    // The JSON API in clear, to an address: the same address for the same name.
    let h = http_client(&mut client, &mut edge, at(v4(192, 0, 2, 53), 80), 49_401);
    let got = http_send(
        &mut client,
        &mut edge,
        h,
        b"GET /resolve?name=beacon.h-c2.example&type=A HTTP/1.1\r\nHost: 192.0.2.53\r\n\r\n",
        1,
    );
    let json: serde_json::Value = serde_json::from_slice(response_body(&got)).unwrap();
    assert_eq!(json["Answer"][0]["data"], beacon.0.to_string());

    // The server connects to the answer: the flow is named for what it asked over DoH.
    let c2 = http_client(
        &mut client,
        &mut edge,
        at(IpAddr::V4(beacon.0), 8443),
        49_402,
    );
    client.sock(c2).send_slice(b"hello\n").unwrap();
    client.pump(&mut edge, 20, |_| false);

    let (flows, c) = edge.finish(client.now_ns);
    assert_all_counted(&flows, &c);
    let doh = flow_to(&flows, &sock(at(resolver, 443)));
    assert_eq!(doh.dns_name, Some(Bytes::from("doh.resolver.example")));
    let asked: Vec<(&[u8], &str, usize)> = doh
        .exchanges
        .iter()
        .map(|e| {
            let q = e.dns.as_ref().unwrap();
            (q.name.as_slice(), q.qtype.as_str(), q.answers.len())
        })
        .collect();
    assert_eq!(
        asked,
        vec![
            (&b"beacon.h-c2.example"[..], "A", 1),
            (b"c2.exfil.example", "AAAA", 1)
        ]
    );
    let json_flow = flow_to(&flows, &sock(at(v4(192, 0, 2, 53), 80)));
    assert_eq!(
        json_flow.exchanges[0].dns.as_ref().unwrap().answers,
        vec![beacon.0.to_string()]
    );
    let to_c2 = flow_to(&flows, &sock(at(IpAddr::V4(beacon.0), 8443)));
    assert_eq!(to_c2.dns_name, Some(Bytes::from("beacon.h-c2.example")));
    assert_eq!(to_c2.sample, Bytes::from("hello\n"));
}

#[test]
fn an_ordinary_api_is_not_read_as_doh() {
    let ca = Authority::fresh().unwrap();
    let mut edge = answering(&ca);
    let mut client = Client::new();
    let h = http_client(&mut client, &mut edge, at(v4(192, 0, 2, 54), 80), 49_410);
    let got = http_send(
        &mut client,
        &mut edge,
        h,
        b"GET /v1/dns-records?name=www.shop.example&type=A HTTP/1.1\r\nHost: api.hosting.example\r\n\
          Accept: application/json\r\n\r\n",
        1,
    );
    assert!(
        got.ends_with(b"\r\n\r\n{}"),
        "{}",
        String::from_utf8_lossy(&got)
    );
    let (flows, _) = edge.finish(client.now_ns);
    let ex = &flows[0].exchanges[0];
    assert_eq!((ex.dns.as_ref(), ex.dns_error.as_ref()), (None, None));
}
