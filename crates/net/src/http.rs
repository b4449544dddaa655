//! HTTP/1.x at the edge, read with httparse.
//!
//! - [`request`]: the request head at the start of a stream (method, target, `Host`, how
//!   much body to wait for): how a stream is recognised as HTTP, and all that is read of it
//!   with the responder `refuse`, which answers every request [`RESPONSE_503`].
//! - [`Reader`]: with the responder `ok`, a stream (in clear, or the cleartext inside TLS)
//!   read in full: requests in sequence (keep-alive, pipelining), each head with its headers,
//!   each body framed by `Content-Length` or chunked transfer coding and decoded
//!   ([`crate::decode`]), and each given the [`Answer`] that lets the client go on. The
//!   reader says how to answer, not with what bytes: the stack builds the response, with
//!   [`response`], or, for a DNS-over-HTTPS request, with what the edge's DNS answers
//!   ([`crate::doh`], through [`response_with`]), which this module knows nothing of.
//!
//! Bounds: a head is read up to [`HEAD_LIMIT`] bytes and [`PARSE_HEADERS`] headers (beyond,
//! the rest of the stream is not read as HTTP, and that is said), [`HEADERS_KEPT`] headers
//! are kept per exchange, chunk-size lines and trailers are bounded, bodies as
//! [`crate::decode`] says; what is buffered per connection is at most a head.

use crate::decode::{Body, Coding};
use glassbox_model::{Bytes, HttpExchange, HttpRequest};

/// Header slots httparse is given (a head with more is not read).
pub(crate) const PARSE_HEADERS: usize = 512;
/// Headers kept per exchange.
pub(crate) const HEADERS_KEPT: usize = 100;
/// Longest request head read.
pub(crate) const HEAD_LIMIT: usize = 64 * 1024;
/// Longest chunk-size line (with its extensions).
const CHUNK_LINE_LIMIT: usize = 4096;
/// Longest trailer section of a chunked body.
const TRAILER_LIMIT: usize = 16 * 1024;
/// Body bytes waited for at most before answering (responder `refuse`).
pub(crate) const MAX_BODY_WAIT: u64 = 1 << 20;
/// The methods the edge says it allows (`OPTIONS`).
const ALLOW: &str = "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS";

/// The answer to every HTTP request with the responder `refuse`.
pub(crate) const RESPONSE_503: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\n\
Content-Type: text/plain\r\n\
Content-Length: 41\r\n\
Connection: close\r\n\
\r\n\
glassbox: network captured, no upstream.\n";

/// What `Expect: 100-continue` is answered with, before the body.
pub(crate) const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// What the first bytes of a stream say about an HTTP request.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Request {
    /// The head has not all arrived yet.
    Incomplete,
    /// Not an HTTP/1 request.
    NotHttp,
    /// A whole request head.
    Head {
        /// Method, target and Host.
        request: HttpRequest,
        /// Bytes of the head (request line and headers).
        head_len: usize,
        /// Body bytes to wait for before answering (bounded by [`MAX_BODY_WAIT`]).
        body_wait: u64,
    },
}

/// The first value of header `name` (ASCII case-insensitive).
fn header<'a>(headers: &[httparse::Header<'a>], name: &str) -> Option<&'a [u8]> {
    headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case(name))
        .map(|h| h.value)
}

/// Every value of header `name`, joined with commas (how HTTP combines repeated fields).
fn joined(headers: &[httparse::Header<'_>], name: &str) -> Option<String> {
    let values: Vec<String> = headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case(name))
        .map(|h| String::from_utf8_lossy(h.value).trim().to_ascii_lowercase())
        .collect();
    (!values.is_empty()).then(|| values.join(","))
}

/// Whether `b` may be part of a token (RFC 9110 §5.6.2), a method's characters.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Whether a comma-separated, lower-cased field value holds `token`.
fn has_token(value: &str, token: &str) -> bool {
    value.split(',').any(|t| t.trim() == token)
}

/// Reads the request head at the start of `stream`.
pub(crate) fn request(stream: &[u8]) -> Request {
    let mut headers = vec![httparse::EMPTY_HEADER; PARSE_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let head_len = match req.parse(stream) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Request::Incomplete,
        Err(_) => return Request::NotHttp,
    };
    let (Some(method), Some(target)) = (req.method, req.path) else {
        return Request::NotHttp;
    };
    let host = header(req.headers, "host").map(Bytes::from);
    let chunked = header(req.headers, "transfer-encoding").is_some_and(|v| {
        String::from_utf8_lossy(v)
            .to_ascii_lowercase()
            .contains("chunked")
    });
    let expects_continue =
        header(req.headers, "expect").is_some_and(|v| v.eq_ignore_ascii_case(b"100-continue"));
    let content_length = header(req.headers, "content-length")
        .and_then(|v| std::str::from_utf8(v).ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(0);
    // A chunked body has no length up front, and a client expecting 100-continue waits for
    // an answer before sending its body: answer after the head.
    let body_wait = if chunked || expects_continue {
        0
    } else {
        content_length.min(MAX_BODY_WAIT)
    };
    Request::Head {
        request: HttpRequest {
            method: method.to_string(),
            target: Bytes::from(target),
            host,
        },
        head_len,
        body_wait,
    }
}

/// How glassbox answers one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Answer {
    /// 200, 204 (`OPTIONS`) or 400 (a request whose framing cannot be read).
    pub status: u16,
    /// `{}` as `application/json` rather than an empty body.
    pub json: bool,
    /// A `HEAD` request: no body, whatever the status.
    pub head: bool,
    /// `Connection: close`, then close.
    pub close: bool,
    /// An HTTP/1.0 client that asked for keep-alive (it is told it got it).
    pub keep_alive_10: bool,
}

/// Whether a request gets `{}` (JSON) rather than an empty body: it names JSON (its `Accept`
/// or `Content-Type`), or it takes anything (`Accept: */*`, or none: the default of curl,
/// Python's requests and undici's fetch, which API clients then parse as JSON) for a target
/// that is not a file of another kind (`/download/x.zip`, `/index.html`). `{}` is two bytes
/// that a client that wanted no JSON ignores, where an empty body fails every JSON parser.
pub(crate) fn wants_json(accept: Option<&str>, content_type: Option<&str>, target: &[u8]) -> bool {
    let names_json = |v: Option<&str>| v.is_some_and(|v| v.to_ascii_lowercase().contains("json"));
    if names_json(accept) || names_json(content_type) {
        return true;
    }
    let anything = accept.is_none_or(|a| {
        a.split(',')
            .map(|t| t.split(';').next().unwrap_or("").trim())
            .all(|t| t.is_empty() || t == "*/*")
    });
    let path = target
        .split(|&b| b == b'?' || b == b'#')
        .next()
        .unwrap_or(target);
    let last = path.rsplit(|&b| b == b'/').next().unwrap_or(path);
    let file_of_another_kind = last
        .iter()
        .rposition(|&b| b == b'.')
        .is_some_and(|dot| !last[dot + 1..].eq_ignore_ascii_case(b"json"));
    anything && !file_of_another_kind
}

/// The synthetic response for `a`: glassbox's own bytes (`Server: glassbox-edge`).
///
/// `200` carries `{}` when the request wants JSON ([`wants_json`]), else nothing; `HEAD` gets `200` with `Content-Length: 0`; `OPTIONS` `204` with
/// `Allow` and, as RFC 9110 §8.6 requires of a 204, no `Content-Length`; every other
/// response has one. `Connection: close` when the client asked for it (or spoke HTTP/1.0
/// without keep-alive, or the request could not be framed).
pub(crate) fn response(a: Answer) -> Vec<u8> {
    let json = a.status == 200 && a.json;
    let body: &[u8] = if json && !a.head { b"{}" } else { b"" };
    response_with(a, json.then_some("application/json"), body)
}

/// The response for `a` carrying `body` as `content_type` (the status, `Connection` and
/// the rest as [`response`] says; a `204` carries neither).
pub(crate) fn response_with(a: Answer, content_type: Option<&str>, body: &[u8]) -> Vec<u8> {
    let reason = match a.status {
        200 => "OK",
        204 => "No Content",
        _ => "Bad Request",
    };
    let body = if a.status == 204 { &[][..] } else { body };
    let mut out = format!(
        "HTTP/1.1 {} {reason}\r\nServer: glassbox-edge\r\n",
        a.status
    );
    if a.status == 204 {
        out.push_str(&format!("Allow: {ALLOW}\r\n"));
    } else {
        if let Some(t) = content_type {
            out.push_str(&format!("Content-Type: {t}\r\n"));
        }
        out.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    if a.close {
        out.push_str("Connection: close\r\n");
    } else if a.keep_alive_10 {
        out.push_str("Connection: keep-alive\r\n");
    }
    out.push_str("\r\n");
    let mut out = out.into_bytes();
    out.extend_from_slice(body);
    out
}

/// What reading a stream produced.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Event {
    /// The client waits for `100 Continue` before its body: send [`CONTINUE`].
    Continue,
    /// A request read in full (or as far as it went), and how to answer it (`None`: it is
    /// not answered, the stream ended first; the connection is then closed).
    Exchange {
        exchange: Box<HttpExchange>,
        answer: Option<Answer>,
    },
    /// The rest of the stream is not read as HTTP (why).
    Stopped(String),
    /// What follows is a TLS record (TLS begun inside the stream): encrypted, not read.
    Encrypted,
}

impl Event {
    /// Whether the connection is closed after this event: an exchange answered with
    /// `Connection: close`, or not answered at all.
    pub fn closes(&self) -> bool {
        matches!(self, Event::Exchange { answer, .. } if answer.is_none_or(|a| a.close))
    }
}

/// How a body is delimited.
#[derive(Debug)]
enum Framing {
    /// This many bytes still to come.
    Length(u64),
    Chunked(Chunk),
}

/// Where a chunked body is.
#[derive(Debug)]
enum Chunk {
    /// Before a chunk-size line.
    Size,
    /// Inside a chunk, this many bytes still to come.
    Data(u64),
    /// After a chunk's data, before its CRLF.
    DataEnd,
    /// After the last chunk: trailer lines until an empty one (bytes read so far).
    Trailers(usize),
}

/// A request whose body is being read.
#[derive(Debug)]
struct InBody {
    exchange: HttpExchange,
    framing: Framing,
    body: Body,
    answer: Answer,
    /// Announced length, for a body cut short.
    announced: Option<u64>,
    received: u64,
}

#[derive(Debug)]
enum State {
    /// Waiting for a request head.
    Head,
    Body(Box<InBody>),
    /// A response said `Connection: close`: what follows is not read.
    Closed,
    /// Not HTTP (any more): what follows is not read.
    Stopped,
}

/// An HTTP/1.x stream read in full (see the module docs).
#[derive(Debug)]
pub(crate) struct Reader {
    /// Bytes not yet consumed: a head being completed, a chunk-size line, trailers.
    buf: Vec<u8>,
    state: State,
    /// Requests read so far.
    requests: u64,
    /// Bytes of the head being completed already looked at: a head can only end at a line
    /// feed, so it is parsed again only when one arrives (a head dripped in byte by byte
    /// costs no more than one sent whole, times its lines).
    seen: usize,
}

impl Reader {
    /// A reader at the start of a stream.
    pub fn new() -> Reader {
        Reader {
            buf: Vec::new(),
            state: State::Head,
            requests: 0,
            seen: 0,
        }
    }

    /// Whether more bytes are read (not closed or stopped).
    pub fn reading(&self) -> bool {
        matches!(self.state, State::Head | State::Body(_))
    }

    /// The stream's next bytes; appends what they complete to `events`.
    pub fn feed(&mut self, data: &[u8], events: &mut Vec<Event>) {
        if !self.reading() {
            return;
        }
        self.buf.extend_from_slice(data);
        let mut pos = 0;
        loop {
            let progressed = match &mut self.state {
                State::Closed | State::Stopped => {
                    pos = self.buf.len();
                    false
                }
                State::Head => self.head(&mut pos, events),
                State::Body(_) => self.body(&mut pos, events),
            };
            if !progressed {
                break;
            }
        }
        self.buf.drain(..pos);
    }

    /// The stream ended (`how`: "the client closed the connection"...): the request being
    /// read, if any, as it went (unanswered), or a note on a head cut short.
    pub fn end(&mut self, how: &str, events: &mut Vec<Event>) {
        match std::mem::replace(&mut self.state, State::Closed) {
            State::Body(b) => {
                let mut ex = finish(*b, None);
                let cut = match ex.body_error.take() {
                    Some(e) => format!("{how} before the body's end ({e})"),
                    None => format!("{how} before the body's end"),
                };
                ex.body_error = Some(cut);
                ex.status = 0;
                events.push(Event::Exchange {
                    exchange: Box::new(ex),
                    answer: None,
                });
            }
            State::Head if self.buf.iter().any(|b| !b.is_ascii_whitespace()) => {
                events.push(Event::Stopped(format!(
                    "{how} inside a request head ({} bytes)",
                    self.buf.len()
                )));
            }
            _ => {}
        }
        self.buf = Vec::new();
    }

    /// Reads a head at `pos`; `true` when it moved on.
    fn head(&mut self, pos: &mut usize, events: &mut Vec<Event>) -> bool {
        let rest = &self.buf[*pos..];
        // A TLS record where a request head should be: TLS begun inside the stream (after a
        // CONNECT, a STARTTLS), which this reader cannot read.
        if matches!(rest, [0x16, 0x03, ..]) {
            let why = match self.requests {
                0 => "not HTTP/1 (a TLS record)".to_string(),
                n => format!("not HTTP/1 after {n} requests (a TLS record)"),
            };
            self.stop(why, events);
            events.push(Event::Encrypted);
            return false;
        }
        // A byte no request line begins with (a method is a token; empty lines may come
        // first): not HTTP, said at once rather than held as a head until a line end that
        // may never come (DNS over TLS's length-prefixed messages, a binary protocol).
        if let Some(&b) = rest.first() {
            if !(is_tchar(b) || b == b'\r' || b == b'\n') {
                let why = match self.requests {
                    0 => "not HTTP/1 (no method at its start)".to_string(),
                    n => format!("not HTTP/1 after {n} requests (no method where one begins)"),
                };
                return self.stop(why, events);
            }
        }
        if !rest[self.seen.min(rest.len())..].contains(&b'\n') {
            self.seen = rest.len();
            if rest.len() > HEAD_LIMIT {
                return self.stop(
                    format!("a request head longer than {} KiB", HEAD_LIMIT >> 10),
                    events,
                );
            }
            return false;
        }
        self.seen = rest.len();
        let mut headers = vec![httparse::EMPTY_HEADER; PARSE_HEADERS];
        let mut req = httparse::Request::new(&mut headers);
        let len = match req.parse(rest) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) if rest.len() > HEAD_LIMIT => {
                return self.stop(
                    format!("a request head longer than {} KiB", HEAD_LIMIT >> 10),
                    events,
                );
            }
            Ok(httparse::Status::Partial) => return false,
            Err(httparse::Error::TooManyHeaders) => {
                return self.stop(
                    format!("a request head with more than {PARSE_HEADERS} headers"),
                    events,
                );
            }
            Err(e) => {
                let why = match self.requests {
                    0 => format!("not HTTP/1 ({e})"),
                    n => format!("not HTTP/1 after {n} requests ({e})"),
                };
                return self.stop(why, events);
            }
        };
        let (Some(method), Some(target)) = (req.method, req.path) else {
            return self.stop("not HTTP/1".into(), events);
        };
        self.requests += 1;
        let h = req.headers;
        let exchange = HttpExchange {
            t_ns: 0,
            method: method.to_string(),
            target: Bytes::from(target),
            headers: h
                .iter()
                .take(HEADERS_KEPT)
                .map(|h| (h.name.to_string(), Bytes::from(h.value)))
                .collect(),
            body: Bytes::default(),
            body_len: 0,
            body_error: None,
            status: 0,
            dns: None,
            dns_error: None,
        };
        let connection = joined(h, "connection").unwrap_or_default();
        let http10 = req.version == Some(0);
        let json = wants_json(
            joined(h, "accept").as_deref(),
            joined(h, "content-type").as_deref(),
            target.as_bytes(),
        );
        let mut answer = Answer {
            status: if method.eq_ignore_ascii_case("OPTIONS") {
                204
            } else {
                200
            },
            json,
            head: method.eq_ignore_ascii_case("HEAD"),
            close: has_token(&connection, "close")
                || (http10 && !has_token(&connection, "keep-alive")),
            keep_alive_10: http10 && has_token(&connection, "keep-alive"),
        };
        let expects_continue = joined(h, "expect").is_some_and(|v| has_token(&v, "100-continue"));
        let coding = Coding::of(joined(h, "content-encoding").as_deref().map(str::as_bytes));
        // RFC 9112 §6.3: chunked (last) wins over Content-Length; any other transfer coding,
        // or lengths that disagree or do not parse, and the body cannot be delimited.
        let framing = match (joined(h, "transfer-encoding"), joined(h, "content-length")) {
            (Some(te), _) => match te.rsplit(',').next().map(str::trim) {
                Some("chunked") if te.split(',').all(|c| c.trim() == "chunked") => {
                    Ok(Some(Framing::Chunked(Chunk::Size)))
                }
                _ => Err(format!("Transfer-Encoding {te} is not read by the edge")),
            },
            (None, Some(cl)) => {
                let lengths: Vec<Option<u64>> =
                    cl.split(',').map(|v| v.trim().parse().ok()).collect();
                match lengths.first() {
                    Some(Some(n)) if lengths.iter().all(|l| *l == Some(*n)) => {
                        Ok((*n > 0).then_some(Framing::Length(*n)))
                    }
                    _ => Err(format!("Content-Length {cl:?} does not parse")),
                }
            }
            (None, None) => Ok(None),
        };
        *pos += len;
        self.seen = 0;
        match framing {
            Err(why) => {
                // Nothing after this head can be delimited: answer 400 and close.
                answer.status = 400;
                answer.close = true;
                let mut ex = exchange;
                ex.body_error = Some(why);
                self.answer(ex, answer, events);
                true
            }
            Ok(None) => {
                self.answer(exchange, answer, events);
                true
            }
            Ok(Some(framing)) => {
                if expects_continue {
                    events.push(Event::Continue);
                }
                let announced = match framing {
                    Framing::Length(n) => Some(n),
                    Framing::Chunked(_) => None,
                };
                self.state = State::Body(Box::new(InBody {
                    exchange,
                    framing,
                    body: Body::new(coding),
                    answer,
                    announced,
                    received: 0,
                }));
                true
            }
        }
    }

    /// Reads body bytes at `pos`; `true` when it moved on.
    fn body(&mut self, pos: &mut usize, events: &mut Vec<Event>) -> bool {
        let State::Body(b) = &mut self.state else {
            return false;
        };
        let rest = &self.buf[*pos..];
        let malformed = |why: &str| Some(format!("malformed chunked body: {why}"));
        // (bytes consumed, the body is whole, why it cannot be read further)
        let (used, whole, bad): (usize, bool, Option<String>) = match &mut b.framing {
            Framing::Length(left) => {
                let n = rest.len().min(usize::try_from(*left).unwrap_or(usize::MAX));
                b.body.feed(&rest[..n]);
                b.received += n as u64;
                *left -= n as u64;
                (n, *left == 0, None)
            }
            Framing::Chunked(Chunk::Size) => match rest.iter().position(|&c| c == b'\n') {
                None if rest.len() > CHUNK_LINE_LIMIT => {
                    (0, false, malformed("chunk-size line too long"))
                }
                None => return false,
                Some(end) => {
                    let line = String::from_utf8_lossy(&rest[..end]);
                    let size = line.split(';').next().unwrap_or("").trim();
                    match u64::from_str_radix(size, 16) {
                        Ok(0) => {
                            b.framing = Framing::Chunked(Chunk::Trailers(0));
                            (end + 1, false, None)
                        }
                        Ok(n) => {
                            b.framing = Framing::Chunked(Chunk::Data(n));
                            (end + 1, false, None)
                        }
                        Err(_) => (0, false, malformed(&format!("chunk size {size:?}"))),
                    }
                }
            },
            Framing::Chunked(Chunk::Data(left)) => {
                let n = rest.len().min(usize::try_from(*left).unwrap_or(usize::MAX));
                b.body.feed(&rest[..n]);
                b.received += n as u64;
                *left -= n as u64;
                if *left == 0 {
                    b.framing = Framing::Chunked(Chunk::DataEnd);
                }
                if n == 0 {
                    return false;
                }
                (n, false, None)
            }
            Framing::Chunked(Chunk::DataEnd) => match rest {
                [b'\r', b'\n', ..] | [b'\n', ..] => {
                    b.framing = Framing::Chunked(Chunk::Size);
                    (if rest[0] == b'\r' { 2 } else { 1 }, false, None)
                }
                [] | [b'\r'] => return false,
                _ => (0, false, malformed("no line end after a chunk")),
            },
            Framing::Chunked(Chunk::Trailers(seen)) => {
                match rest.iter().position(|&c| c == b'\n') {
                    None if *seen + rest.len() > TRAILER_LIMIT => {
                        (0, false, malformed("trailers too long"))
                    }
                    None => return false,
                    Some(end) => {
                        let empty = rest[..end].iter().all(|&c| c == b'\r');
                        *seen += end + 1;
                        (end + 1, empty, None)
                    }
                }
            }
        };
        *pos += used;
        if let Some(why) = bad {
            let State::Body(b) = std::mem::replace(&mut self.state, State::Head) else {
                return false;
            };
            let mut answer = b.answer;
            answer.status = 400;
            answer.close = true;
            let ex = finish(*b, Some(why));
            self.answer(ex, answer, events);
            return true;
        }
        if whole {
            let State::Body(b) = std::mem::replace(&mut self.state, State::Head) else {
                return false;
            };
            let answer = b.answer;
            let ex = finish(*b, None);
            self.answer(ex, answer, events);
            return true;
        }
        used > 0
    }

    /// Answers `ex` and moves on to the next request (or closes).
    fn answer(&mut self, mut ex: HttpExchange, answer: Answer, events: &mut Vec<Event>) {
        ex.status = answer.status;
        self.state = if answer.close {
            State::Closed
        } else {
            State::Head
        };
        events.push(Event::Exchange {
            exchange: Box::new(ex),
            answer: Some(answer),
        });
    }

    fn stop(&mut self, why: String, events: &mut Vec<Event>) -> bool {
        self.state = State::Stopped;
        events.push(Event::Stopped(why));
        false
    }
}

/// The exchange of a body read as far as it went (`framing_error`: why it could not go
/// further).
fn finish(b: InBody, framing_error: Option<String>) -> HttpExchange {
    let decoded = b.body.finish();
    let mut ex = b.exchange;
    ex.body = Bytes(decoded.body);
    ex.body_len = decoded.len;
    ex.body_error = match (framing_error, decoded.error) {
        (Some(f), Some(d)) => Some(format!("{f}; {d}")),
        (f, d) => f.or(d),
    };
    if let (Some(n), None) = (b.announced, &ex.body_error) {
        if b.received < n {
            ex.body_error = Some(format!("{} of {n} announced bytes received", b.received));
        }
    }
    ex
}

#[cfg(test)]
mod wants_json_tests {
    use super::wants_json;

    #[test]
    fn json_unless_the_request_wants_something_else() {
        assert!(wants_json(Some("application/json"), None, b"/a"));
        assert!(wants_json(
            Some("text/html"),
            Some("application/json; charset=utf-8"),
            b"/a"
        ));
        // requests, curl and undici's defaults: an API call.
        assert!(wants_json(Some("*/*"), None, b"/v1/items?page=2"));
        assert!(wants_json(None, None, b"/v1/items"));
        assert!(wants_json(Some("*/*"), None, b"/data/items.json"));
        // A file, or a page, asked for: no JSON.
        assert!(!wants_json(Some("*/*"), None, b"/releases/tool-1.2.tar.gz"));
        assert!(!wants_json(None, None, b"/index.html?x=1"));
        assert!(!wants_json(
            Some("text/html,application/xhtml+xml"),
            None,
            b"/"
        ));
        assert!(!wants_json(
            Some("application/octet-stream"),
            None,
            b"/blob"
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::tests::gzip;

    #[test]
    fn reads_method_target_host_and_body_length() {
        let r =
            request(b"POST /v1/x HTTP/1.1\r\nHost: api.example\r\nContent-Length: 5\r\n\r\nhel");
        let Request::Head {
            request,
            head_len,
            body_wait,
        } = r
        else {
            panic!("{r:?}");
        };
        assert_eq!(request.method, "POST");
        assert_eq!(request.target, Bytes::from("/v1/x"));
        assert_eq!(request.host, Some(Bytes::from("api.example")));
        assert_eq!(head_len, 61);
        assert_eq!(body_wait, 5);
    }

    #[test]
    fn partial_and_foreign_streams() {
        assert_eq!(request(b"GET / HT"), Request::Incomplete);
        assert_eq!(request(b"SSH-2.0-OpenSSH_9.6\r\n"), Request::NotHttp);
        assert_eq!(request(&[0x16, 3, 1, 0, 5]), Request::NotHttp);
        let Request::Head { body_wait, .. } =
            request(b"PUT / HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n")
        else {
            panic!()
        };
        assert_eq!(body_wait, MAX_BODY_WAIT);
    }

    #[test]
    fn the_responses_announce_their_length() {
        for r in [
            RESPONSE_503.to_vec(),
            response(Answer {
                status: 200,
                json: true,
                head: false,
                close: false,
                keep_alive_10: false,
            }),
        ] {
            let text = std::str::from_utf8(&r).unwrap();
            let (_, body) = text.split_once("\r\n\r\n").unwrap();
            assert!(text.contains(&format!("Content-Length: {}\r\n", body.len())));
        }
    }

    /// Feeds `stream` in pieces of `step` bytes.
    fn read(stream: &[u8], step: usize) -> Vec<Event> {
        let mut r = Reader::new();
        let mut events = Vec::new();
        for piece in stream.chunks(step) {
            r.feed(piece, &mut events);
        }
        events
    }

    fn exchanges(events: &[Event]) -> Vec<&HttpExchange> {
        events
            .iter()
            .filter_map(|e| match e {
                Event::Exchange { exchange, .. } => Some(&**exchange),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn requests_in_sequence_with_every_framing() {
        let body = b"{\"token\":\"s3cret\"}";
        let gz = gzip(body);
        let mut stream = b"GET /a HTTP/1.1\r\nHost: x\r\nAccept: application/json\r\n\r\n".to_vec();
        stream.extend_from_slice(
            format!(
                "POST /b HTTP/1.1\r\nContent-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n{:x};ext=1\r\n",
                5
            )
            .as_bytes(),
        );
        stream.extend_from_slice(&gz[..5]);
        stream.extend_from_slice(format!("\r\n{:x}\r\n", gz.len() - 5).as_bytes());
        stream.extend_from_slice(&gz[5..]);
        stream.extend_from_slice(b"\r\n0\r\nX-Trailer: 1\r\n\r\n");
        stream.extend_from_slice(
            b"PUT /c HTTP/1.1\r\nAccept: text/plain\r\nContent-Length: 3\r\n\r\nabc",
        );
        stream.extend_from_slice(b"HEAD /d HTTP/1.1\r\n\r\nOPTIONS * HTTP/1.1\r\n\r\n");
        stream.extend_from_slice(
            b"DELETE /e HTTP/1.1\r\nConnection: close\r\n\r\nGET /never HTTP/1.1\r\n\r\n",
        );
        for step in [1, 3, 64, stream.len()] {
            let events = read(&stream, step);
            let ex = exchanges(&events);
            let got: Vec<(&str, &[u8], u16)> = ex
                .iter()
                .map(|e| (e.method.as_str(), e.target.as_slice(), e.status))
                .collect();
            assert_eq!(
                got,
                vec![
                    ("GET", &b"/a"[..], 200),
                    ("POST", b"/b", 200),
                    ("PUT", b"/c", 200),
                    ("HEAD", b"/d", 200),
                    ("OPTIONS", b"*", 204),
                    ("DELETE", b"/e", 200),
                ],
                "step {step}"
            );
            assert_eq!(ex[1].body, Bytes::from(&body[..]));
            assert_eq!(ex[1].body_len, body.len() as u64);
            assert_eq!(ex[1].body_error, None);
            assert_eq!(ex[2].body, Bytes::from("abc"));
            assert_eq!(ex[0].header("HOST"), Some(&Bytes::from("x")));
            let responses: Vec<Vec<u8>> = events
                .iter()
                .filter_map(|e| match e {
                    Event::Exchange {
                        answer: Some(a), ..
                    } => Some(response(*a)),
                    _ => None,
                })
                .collect();
            assert!(responses[0]
                .ends_with(b"Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"));
            // No Accept: an API call, answered `{}`; `Accept: text/plain`: an empty body.
            assert!(responses[1].ends_with(b"Content-Length: 2\r\n\r\n{}"));
            assert!(responses[2].ends_with(b"Content-Length: 0\r\n\r\n"));
            assert!(responses[3].ends_with(b"Content-Length: 0\r\n\r\n"));
            let options = String::from_utf8_lossy(&responses[4]);
            assert!(options.starts_with("HTTP/1.1 204 No Content\r\n"));
            assert!(options.contains("\r\nAllow: ") && !options.contains("Content-Length"));
            assert!(String::from_utf8_lossy(&responses[5]).contains("\r\nConnection: close\r\n"));
            assert!(events.last().is_some_and(Event::closes));
        }
    }

    #[test]
    fn tls_begun_inside_the_stream_is_named_encrypted() {
        let mut stream =
            b"CONNECT api.example.test:443 HTTP/1.1\r\nHost: api.example.test\r\n\r\n".to_vec();
        stream.extend_from_slice(&[0x16, 0x03, 0x01, 0x00, 0x05, 1, 2, 3, 4, 5]);
        let events = read(&stream, 7);
        assert_eq!(exchanges(&events).len(), 1);
        assert!(
            matches!(events.last(), Some(Event::Encrypted)),
            "{events:?}"
        );
        // Other bytes that are not HTTP are not TLS.
        let events = read(b"GET / HTTP/1.1\r\n\r\n\x00\x01garbage", 100);
        assert!(!events.iter().any(|e| matches!(e, Event::Encrypted)));
    }

    #[test]
    fn continue_is_asked_for_and_http10_closes() {
        let events = read(
            b"POST /u HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhi",
            5,
        );
        assert_eq!(events[0], Event::Continue);
        assert_eq!(exchanges(&events)[0].body, Bytes::from("hi"));
        let events = read(b"GET / HTTP/1.0\r\n\r\n", 100);
        assert!(events[0].closes());
        let events = read(
            b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\nGET /2 HTTP/1.0\r\n\r\n",
            100,
        );
        let Event::Exchange {
            answer: Some(a), ..
        } = &events[0]
        else {
            panic!()
        };
        let text = String::from_utf8_lossy(&response(*a)).into_owned();
        assert!(
            !events[0].closes() && text.contains("\r\nConnection: keep-alive\r\n"),
            "{text}"
        );
        assert_eq!(exchanges(&events).len(), 2);
    }

    #[test]
    fn bad_framing_is_answered_400_and_closed() {
        for stream in [
            &b"POST / HTTP/1.1\r\nContent-Length: 5, 6\r\n\r\nhello"[..],
            b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabX",
        ] {
            let events = read(stream, 2);
            let ex = exchanges(&events);
            assert_eq!(ex.len(), 1, "{events:?}");
            assert_eq!(ex[0].status, 400);
            assert!(ex[0].body_error.is_some());
            assert!(events.last().is_some_and(Event::closes));
        }
    }

    #[test]
    fn what_is_not_http_stops_the_reading_and_says_why() {
        let events = read(b"SSH-2.0-x\r\n", 4);
        assert!(matches!(&events[..], [Event::Stopped(why)] if why.contains("not HTTP")));
        // DNS over TLS: a length, then a DNS message, no line end anywhere.
        let events = read(b"\x00\x26\x12\x34\x01\x00\x00\x01", 3);
        assert!(
            matches!(&events[..], [Event::Stopped(why)] if why.contains("no method")),
            "{events:?}"
        );
        let events = read(b"GET / HTTP/1.1\r\n\r\n\x16\x03\x01garbage\r\n\r\n", 4);
        assert!(matches!(&events[1], Event::Stopped(why) if why.contains("after 1 requests")));
        assert!(matches!(&events[2], Event::Encrypted));
        let mut many = b"GET / HTTP/1.1\r\n".to_vec();
        for i in 0..600 {
            many.extend_from_slice(format!("x-{i}: y\r\n").as_bytes());
        }
        many.extend_from_slice(b"\r\n");
        let events = read(&many, 1000);
        assert!(matches!(&events[..], [Event::Stopped(why)] if why.contains("512")));
        let mut long = b"GET / HTTP/1.1\r\nx: ".to_vec();
        long.extend(std::iter::repeat_n(b'a', HEAD_LIMIT + 10));
        let events = read(&long, 4096);
        assert!(matches!(&events[..], [Event::Stopped(why)] if why.contains("longer")));
    }

    #[test]
    fn headers_kept_are_bounded() {
        let mut head = b"GET / HTTP/1.1\r\n".to_vec();
        for i in 0..150 {
            head.extend_from_slice(format!("x-{i}: {i}\r\n").as_bytes());
        }
        head.extend_from_slice(b"\r\n");
        let events = read(&head, 512);
        let ex = exchanges(&events);
        assert_eq!(ex[0].headers.len(), HEADERS_KEPT);
        assert_eq!(ex[0].headers[99], ("x-99".to_string(), Bytes::from("99")));
    }

    #[test]
    fn a_stream_cut_short_keeps_what_came() {
        let mut r = Reader::new();
        let mut events = Vec::new();
        r.feed(
            b"POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc",
            &mut events,
        );
        assert!(events.is_empty());
        r.end("the client closed the connection", &mut events);
        let ex = exchanges(&events);
        assert_eq!((ex[0].status, ex[0].body.as_slice()), (0, &b"abc"[..]));
        assert!(ex[0].body_error.as_deref().unwrap().contains("closed"));
        let mut r = Reader::new();
        let mut events = Vec::new();
        r.feed(b"GET / HT", &mut events);
        r.end("the client closed the connection", &mut events);
        assert!(matches!(&events[..], [Event::Stopped(_)]));
    }
}
