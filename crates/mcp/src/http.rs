//! The HTTP transports: streamable HTTP (protocol versions 2025-03-26 and later) and the
//! deprecated HTTP+SSE transport of 2024-11-05, over connections a caller-supplied
//! [`Connector`] makes.
//!
//! The session builds each request (it knows the era and the headers it needs) and records it;
//! the exchange itself runs on a thread of its own, so a server that stalls a response never
//! blocks the session. One dispatcher thread takes the queued requests and starts one thread per
//! exchange, at most [`MAX_IN_FLIGHT`] at once (a reply to a server request is POSTed while the
//! stream that carried the request is still open). Every request says `Connection: close`: one
//! exchange, one connection, no pooling.
//!
//! What a response brings back reaches the session as [`Incoming`] events, in order: the
//! response head as a meta line, each message (a JSON body, each SSE event's data) as a line,
//! and, when an exchange that carried a request ends without its answer, an
//! [`Incoming::Exchange`] failure naming why.
//!
//! Every read and write has the exchange's deadline; threads stop at it, or when the session
//! ends (the shared cancel flag), checking both at least every [`TICK`] (with connections that
//! honour [`Connection::set_timeouts`]).

use crate::message::response_id;
use crate::sse;
use crate::transport::{Incoming, Line, Meta};
use glassbox_model::{Direction, GLASSBOX_VERSION};
use serde_json::Value;
use std::fmt;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// Exchanges running at once; more wait in the queue.
pub(crate) const MAX_IN_FLIGHT: usize = 4;
/// Requests queued for the dispatcher; a server that never finishes its responses fills it.
const JOB_QUEUE: usize = 64;
/// How often a blocked read or write looks at its deadline and the cancel flag.
const TICK: Duration = Duration::from_millis(200);
/// Longest response head.
const MAX_HEAD: usize = 64 * 1024;
/// Most header fields in one response head.
const MAX_HEADERS: usize = 64;
/// Longest chunk-size line, and most trailer bytes, of a chunked body.
const MAX_CHUNK_LINE: usize = 4096;
/// How many times a stream that the server closed before the answer is resumed (2025-11-25).
const MAX_RESUMES: usize = 16;
/// Wait before resuming when the server gave no `retry` field.
const DEFAULT_RETRY: Duration = Duration::from_secs(1);
/// Longest `retry` honoured.
const MAX_RETRY: Duration = Duration::from_secs(10);
/// Most characters kept of a session id.
const MAX_SESSION_ID: usize = 1024;
/// Bytes read at once.
const READ_CHUNK: usize = 64 * 1024;

/// A connection to the server: a byte stream in both directions.
///
/// [`TcpStream`] and [`UnixStream`] implement it; a TLS stream can too.
pub trait Connection: Read + Write + Send {
    /// Sets the read and write timeouts. A connection that cannot honour them may do nothing:
    /// its exchanges then only look at their deadline when bytes arrive.
    fn set_timeouts(&self, timeout: Option<Duration>) -> io::Result<()>;
}

impl Connection for TcpStream {
    fn set_timeouts(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.set_read_timeout(timeout)?;
        self.set_write_timeout(timeout)
    }
}

impl Connection for UnixStream {
    fn set_timeouts(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.set_read_timeout(timeout)?;
        self.set_write_timeout(timeout)
    }
}

/// Makes a new connection to the server; called once per HTTP exchange, from several threads.
pub type Connector = Arc<dyn Fn() -> io::Result<Box<dyn Connection>> + Send + Sync>;

/// A [`Connector`] that opens a TCP connection to `addr` (waiting at most `timeout`).
pub fn tcp_connector(addr: SocketAddr, timeout: Duration) -> Connector {
    Arc::new(move || {
        let stream = TcpStream::connect_timeout(&addr, timeout)?;
        Ok(Box::new(stream) as Box<dyn Connection>)
    })
}

/// Which HTTP transport the server speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HttpKind {
    /// Streamable HTTP: every message is a POST to one MCP endpoint (2025-03-26 and later).
    Streamable,
    /// The HTTP+SSE transport of 2024-11-05 (`"type": "sse"` in client configs): a GET opens an
    /// event stream whose first event names the endpoint to POST to; every server message
    /// comes on that stream.
    LegacySse,
}

/// Where and how to reach an HTTP MCP server.
#[derive(Clone)]
pub struct HttpTarget {
    /// Opens the connections.
    pub connector: Connector,
    /// The `Host` header (`127.0.0.1:8080`, `example.com`).
    pub host: String,
    /// The MCP endpoint's path and query (`/mcp`), or the SSE endpoint's for
    /// [`HttpKind::LegacySse`].
    pub path: String,
    /// The transport.
    pub kind: HttpKind,
    /// Headers sent with every request (an `Authorization` a client config names, say).
    pub headers: Vec<(String, String)>,
    /// Whether to open the optional GET stream of streamable HTTP for server-initiated
    /// messages (sessions of 2025-03-26 to 2025-11-25 only; default true).
    pub listen: bool,
}

impl fmt::Debug for HttpTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpTarget")
            .field("host", &self.host)
            .field("path", &self.path)
            .field("kind", &self.kind)
            .field(
                "headers",
                &self.headers.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            )
            .field("listen", &self.listen)
            .finish_non_exhaustive()
    }
}

/// Why an [`HttpTarget`] cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum HttpTargetError {
    /// The URL does not start with `http://` or `https://`.
    #[error("unsupported URL {0:?}: only http:// and https:// (TLS is the connector's job)")]
    Scheme(String),
    /// The URL names no host.
    #[error("URL {0:?} has no host")]
    NoHost(String),
    /// Credentials in the URL.
    #[error("URL {0:?} has credentials in it: pass them as a header")]
    UserInfo(String),
    /// A host, path or header that cannot go into an HTTP/1.1 request head as is.
    #[error("invalid {what} {value:?}: {why}")]
    Invalid {
        /// What is invalid (`host`, `path`, `header`).
        what: &'static str,
        /// The offending value.
        value: String,
        /// Why.
        why: &'static str,
    },
}

impl HttpTarget {
    /// A streamable HTTP target at `host` and `path`.
    pub fn new(connector: Connector, host: impl Into<String>, path: impl Into<String>) -> Self {
        HttpTarget {
            connector,
            host: host.into(),
            path: path.into(),
            kind: HttpKind::Streamable,
            headers: Vec::new(),
            listen: true,
        }
    }

    /// A streamable HTTP target from a URL: its authority becomes the `Host` header, its path
    /// and query the request target. The connector decides where the bytes actually go (and
    /// does TLS for an `https` URL).
    pub fn from_url(url: &str, connector: Connector) -> Result<Self, HttpTargetError> {
        let rest = url
            .strip_prefix("http://")
            .or_else(|| url.strip_prefix("https://"))
            .ok_or_else(|| HttpTargetError::Scheme(url.to_string()))?;
        let rest = rest.split('#').next().unwrap_or_default();
        let cut = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, path) = rest.split_at(cut);
        if authority.contains('@') {
            return Err(HttpTargetError::UserInfo(url.to_string()));
        }
        if authority.is_empty() {
            return Err(HttpTargetError::NoHost(url.to_string()));
        }
        let path = match path {
            "" => "/".to_string(),
            p if p.starts_with('?') => format!("/{p}"),
            p => p.to_string(),
        };
        let target = HttpTarget::new(connector, authority, path);
        target.validate()?;
        Ok(target)
    }

    /// Checks that the host, path and headers fit in a request head.
    pub fn validate(&self) -> Result<(), HttpTargetError> {
        let bad = |what, value: &str, why| HttpTargetError::Invalid {
            what,
            value: value.to_string(),
            why,
        };
        if self.host.is_empty() || !self.host.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(bad("host", &self.host, "empty, or not visible ASCII"));
        }
        if !self.path.starts_with('/') || !self.path.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(bad(
                "path",
                &self.path,
                "must start with / and be visible ASCII",
            ));
        }
        for (name, value) in &self.headers {
            if !is_token(name) {
                return Err(bad("header", name, "not an HTTP field name"));
            }
            if !is_header_value(value) {
                return Err(bad("header", name, "value has control characters"));
            }
        }
        Ok(())
    }
}

/// An HTTP field name (RFC 9110 `token`).
pub(crate) fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// A header value that can be sent as is: visible ASCII, spaces and tabs inside.
pub(crate) fn is_header_value(s: &str) -> bool {
    s.bytes()
        .all(|b| b == b' ' || b == b'\t' || b.is_ascii_graphic())
        && s.trim_matches([' ', '\t']) == s
}

/// State shared by the session and the exchange threads.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    /// The `Mcp-Session-Id` the server assigned.
    session_id: Mutex<Option<String>>,
    /// Set when the session ends: every thread stops at its next tick.
    cancel: AtomicBool,
    /// Exchanges queued or running (not the GET streams).
    busy: AtomicUsize,
}

/// Bounds on what one exchange reads.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// Longest body or SSE event data kept.
    pub(crate) max_body: usize,
    /// Most SSE events read from one response.
    pub(crate) max_events: usize,
}

/// What the exchange threads need.
struct Ctx {
    target: Arc<HttpTarget>,
    shared: Arc<Shared>,
    events: SyncSender<Incoming>,
    limits: Limits,
}

/// One queued exchange.
struct Job {
    request: Vec<u8>,
    purpose: Purpose,
    deadline: Instant,
}

#[derive(Clone, Debug)]
enum Purpose {
    /// A POST carrying request `id`, whose answer is in the response (streamable HTTP) or on
    /// the event stream (legacy SSE).
    Request {
        id: u64,
        /// Keep the `Mcp-Session-Id` of the response (`initialize`).
        keep_session_id: bool,
        /// Headers to resume a broken stream with (GET + `Last-Event-ID`), when the era has
        /// resumable streams.
        resume: Option<Vec<(String, String)>>,
    },
    /// A notification, a reply to a server request, or the final DELETE.
    Other,
}

/// A message for the server, built by the session.
#[derive(Debug)]
pub(crate) struct Outgoing<'a> {
    /// The JSON-RPC message.
    pub(crate) body: &'a [u8],
    /// The id when it is a request.
    pub(crate) carries: Option<u64>,
    /// Keep the `Mcp-Session-Id` of the response.
    pub(crate) keep_session_id: bool,
    /// Whether a broken response stream may be resumed with GET + `Last-Event-ID`.
    pub(crate) resumable: bool,
    /// Headers of the era and the message (`MCP-Protocol-Version`, `Mcp-Method`...).
    pub(crate) headers: Vec<(String, String)>,
    /// When to give up on the exchange.
    pub(crate) deadline: Instant,
}

/// The session's side of an HTTP transport.
pub(crate) struct Client {
    ctx: Arc<Ctx>,
    jobs: Option<SyncSender<Job>>,
    /// Where POSTs go: the MCP endpoint, or the endpoint the legacy SSE stream named.
    post_path: Option<String>,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("target", &self.ctx.target)
            .field("post_path", &self.post_path)
            .finish_non_exhaustive()
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.ctx.shared.cancel.store(true, Ordering::SeqCst);
    }
}

impl Client {
    /// Starts the dispatcher (and, for the legacy transport, the event stream, whose first
    /// event names the POST endpoint; it runs until `until`).
    pub(crate) fn start(
        target: HttpTarget,
        limits: Limits,
        events: SyncSender<Incoming>,
        until: Instant,
    ) -> io::Result<Client> {
        let kind = target.kind;
        let post_path = match kind {
            HttpKind::Streamable => Some(target.path.clone()),
            HttpKind::LegacySse => None,
        };
        let ctx = Arc::new(Ctx {
            target: Arc::new(target),
            shared: Arc::new(Shared::default()),
            events,
            limits,
        });
        let (tx, rx) = mpsc::sync_channel::<Job>(JOB_QUEUE);
        let dispatcher = ctx.clone();
        thread::Builder::new()
            .name("glassbox-mcp-http".into())
            .spawn(move || dispatch(rx, dispatcher))?;
        if kind == HttpKind::LegacySse {
            let sse = ctx.clone();
            thread::Builder::new()
                .name("glassbox-mcp-sse".into())
                .spawn(move || legacy_stream(&sse, until))?;
        }
        Ok(Client {
            ctx,
            jobs: Some(tx),
            post_path,
        })
    }

    /// The transport.
    pub(crate) fn kind(&self) -> HttpKind {
        self.ctx.target.kind
    }

    /// Whether to open the optional GET stream.
    pub(crate) fn listens(&self) -> bool {
        self.ctx.target.listen
    }

    /// Whether POSTs have somewhere to go (the legacy endpoint is known).
    pub(crate) fn has_endpoint(&self) -> bool {
        self.post_path.is_some()
    }

    /// Sets the legacy transport's POST endpoint.
    pub(crate) fn set_endpoint(&mut self, path: String) {
        self.post_path = Some(path);
    }

    /// The session id the server assigned, if any.
    pub(crate) fn session_id(&self) -> Option<String> {
        lock(&self.ctx.shared.session_id).clone()
    }

    /// Whether exchanges are queued or running.
    pub(crate) fn busy(&self) -> bool {
        self.ctx.shared.busy.load(Ordering::SeqCst) > 0
    }

    /// Queues a POST of `out`; returns the request head to record.
    pub(crate) fn post(&mut self, out: Outgoing<'_>) -> Result<Vec<u8>, String> {
        let Some(path) = self.post_path.clone() else {
            return Err("the server named no endpoint to POST to".into());
        };
        let (request, head) = build_request(
            "POST",
            &path,
            &self.ctx.target,
            self.session_id().as_deref(),
            &out.headers,
            Some(out.body),
            "application/json, text/event-stream",
        );
        let purpose = match out.carries {
            Some(id) => Purpose::Request {
                id,
                keep_session_id: out.keep_session_id,
                resume: out.resumable.then_some(out.headers),
            },
            None => Purpose::Other,
        };
        self.queue(Job {
            request,
            purpose,
            deadline: out.deadline,
        })?;
        Ok(head)
    }

    /// Queues the DELETE that ends the server's session; returns the request head to record,
    /// or `None` when there is no session to end.
    pub(crate) fn delete(
        &mut self,
        headers: &[(String, String)],
        deadline: Instant,
    ) -> Option<Result<Vec<u8>, String>> {
        let session_id = self.session_id()?;
        let (request, head) = build_request(
            "DELETE",
            &self.ctx.target.path,
            &self.ctx.target,
            Some(&session_id),
            headers,
            None,
            "application/json, text/event-stream",
        );
        Some(
            self.queue(Job {
                request,
                purpose: Purpose::Other,
                deadline,
            })
            .map(|()| head),
        )
    }

    /// Opens the optional GET stream of streamable HTTP, read until `until`.
    pub(crate) fn listen(&self, headers: Vec<(String, String)>, until: Instant) {
        let ctx = self.ctx.clone();
        // No thread, no stream: it is optional.
        let _ = thread::Builder::new()
            .name("glassbox-mcp-get".into())
            .spawn(move || listen_stream(&ctx, &headers, until));
    }

    /// Closes the queue: no more requests.
    pub(crate) fn close(&mut self) {
        self.jobs = None;
    }

    fn queue(&mut self, job: Job) -> Result<(), String> {
        let Some(jobs) = &self.jobs else {
            return Err("the HTTP client is closed".into());
        };
        self.ctx.shared.busy.fetch_add(1, Ordering::SeqCst);
        match jobs.try_send(job) {
            Ok(()) => Ok(()),
            Err(e) => {
                self.ctx.shared.busy.fetch_sub(1, Ordering::SeqCst);
                Err(match e {
                    TrySendError::Full(_) => {
                        "too many HTTP requests waiting (the server is not finishing its responses)"
                            .into()
                    }
                    TrySendError::Disconnected(_) => "the HTTP client stopped".into(),
                })
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Builds a whole request; returns it and its head (without the blank line) for the
/// transcript.
fn build_request(
    method: &str,
    path: &str,
    target: &HttpTarget,
    session_id: Option<&str>,
    headers: &[(String, String)],
    body: Option<&[u8]>,
    accept: &str,
) -> (Vec<u8>, Vec<u8>) {
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {}\r\nUser-Agent: glassbox/{GLASSBOX_VERSION}\r\n\
         Accept: {accept}\r\n",
        target.host
    );
    if let Some(body) = body {
        head.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    head.push_str("Connection: close\r\n");
    if let Some(id) = session_id {
        head.push_str(&format!("Mcp-Session-Id: {id}\r\n"));
    }
    for (name, value) in headers.iter().chain(&target.headers) {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    let recorded = head.trim_end_matches("\r\n").as_bytes().to_vec();
    let mut request = head.into_bytes();
    request.extend_from_slice(b"\r\n");
    if let Some(body) = body {
        request.extend_from_slice(body);
    }
    (request, recorded)
}

/// Starts one thread per job, at most [`MAX_IN_FLIGHT`] at once.
fn dispatch(jobs: Receiver<Job>, ctx: Arc<Ctx>) {
    let slots = Arc::new((Mutex::new(0usize), Condvar::new()));
    for job in jobs {
        {
            let (count, freed) = &*slots;
            let mut n = lock(count);
            while *n >= MAX_IN_FLIGHT {
                n = freed.wait(n).unwrap_or_else(|e| e.into_inner());
            }
            *n += 1;
        }
        let (worker, held) = (ctx.clone(), slots.clone());
        let purpose = job.purpose.clone();
        let spawned = thread::Builder::new()
            .name("glassbox-mcp-post".into())
            .spawn(move || {
                exchange(&worker, job);
                release(&held, &worker.shared);
            });
        if let Err(e) = spawned {
            release(&slots, &ctx.shared);
            if let Purpose::Request { id, .. } = purpose {
                let _ = ctx.events.send(Incoming::Exchange {
                    id,
                    error: format!("could not start a thread: {e}"),
                    fatal: true,
                });
            }
        }
    }
}

fn release(slots: &(Mutex<usize>, Condvar), shared: &Shared) {
    *lock(&slots.0) -= 1;
    slots.1.notify_one();
    shared.busy.fetch_sub(1, Ordering::SeqCst);
}

/// Why an exchange stopped early.
#[derive(Debug)]
enum Stop {
    /// The deadline passed or the session ended: stop quietly.
    Quiet,
    /// The connection failed.
    Io(String),
    /// The server's bytes are not what HTTP (or the body's framing) says.
    Proto(String),
}

/// A connection with its read buffer and deadline.
struct Conn {
    stream: Box<dyn Connection>,
    buf: Vec<u8>,
    pos: usize,
    deadline: Instant,
    shared: Arc<Shared>,
}

impl Conn {
    fn open(ctx: &Ctx, deadline: Instant) -> io::Result<Conn> {
        let stream = (ctx.target.connector)()?;
        Ok(Conn {
            stream,
            buf: Vec::new(),
            pos: 0,
            deadline,
            shared: ctx.shared.clone(),
        })
    }

    fn stopped(&self) -> bool {
        self.shared.cancel.load(Ordering::SeqCst) || Instant::now() >= self.deadline
    }

    fn tick(&self) {
        let left = self.deadline.saturating_duration_since(Instant::now());
        let _ = self
            .stream
            .set_timeouts(Some(left.clamp(Duration::from_millis(1), TICK)));
    }

    fn write_all(&mut self, mut bytes: &[u8]) -> Result<(), Stop> {
        while !bytes.is_empty() {
            if self.stopped() {
                return Err(Stop::Quiet);
            }
            self.tick();
            match self.stream.write(bytes) {
                Ok(0) => return Err(Stop::Io("the connection closed".into())),
                Ok(n) => bytes = &bytes[n..],
                Err(e) if retryable(&e) => {}
                Err(e) => return Err(Stop::Io(e.to_string())),
            }
        }
        loop {
            match self.stream.flush() {
                Ok(()) => return Ok(()),
                Err(e) if retryable(&e) && !self.stopped() => {}
                Err(e) => return Err(Stop::Io(e.to_string())),
            }
        }
    }

    /// Bytes read but not used yet.
    fn available(&self) -> &[u8] {
        &self.buf[self.pos..]
    }

    fn consume(&mut self, n: usize) {
        self.pos += n;
        if self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        }
    }

    /// Reads more bytes into the buffer; `Ok(0)` at the end of the stream.
    fn fill(&mut self) -> Result<usize, Stop> {
        if self.pos > 0 {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        let mut chunk = [0u8; 8192];
        loop {
            if self.stopped() {
                return Err(Stop::Quiet);
            }
            self.tick();
            match self.stream.read(&mut chunk) {
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    return Ok(n);
                }
                Err(e) if retryable(&e) => {}
                Err(e) => return Err(Stop::Io(e.to_string())),
            }
        }
    }

    /// Reads a response head, skipping `1xx` interim responses.
    fn read_head(&mut self) -> Result<Head, (Stop, Vec<u8>)> {
        for _ in 0..5 {
            let head = self.read_one_head()?;
            if !(100..200).contains(&head.status) {
                return Ok(head);
            }
        }
        Err((
            Stop::Proto("too many interim (1xx) responses".into()),
            Vec::new(),
        ))
    }

    /// On failure, also returns the bytes received, for the transcript.
    fn read_one_head(&mut self) -> Result<Head, (Stop, Vec<u8>)> {
        loop {
            let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let mut response = httparse::Response::new(&mut headers);
            let data = self.available();
            match response.parse(data) {
                Ok(httparse::Status::Complete(len)) => {
                    let head = Head {
                        raw: trim_head(&data[..len]).to_vec(),
                        status: response.code.unwrap_or(0),
                        reason: response.reason.unwrap_or("").to_string(),
                        headers: response
                            .headers
                            .iter()
                            .map(|h| (h.name.to_ascii_lowercase(), h.value.to_vec()))
                            .collect(),
                    };
                    self.consume(len);
                    return Ok(head);
                }
                Ok(httparse::Status::Partial) if data.len() > MAX_HEAD => {
                    return Err((
                        Stop::Proto(format!(
                            "HTTP response head larger than {} KiB",
                            MAX_HEAD / 1024
                        )),
                        data[..MAX_HEAD].to_vec(),
                    ));
                }
                Ok(httparse::Status::Partial) => {}
                Err(e) => {
                    let what = match e {
                        httparse::Error::TooManyHeaders => {
                            format!("more than {MAX_HEADERS} header fields")
                        }
                        e => e.to_string(),
                    };
                    let raw = data[..data.len().min(MAX_HEAD)].to_vec();
                    return Err((Stop::Proto(format!("malformed HTTP response: {what}")), raw));
                }
            }
            match self.fill() {
                Ok(0) => {
                    let raw = self.available().to_vec();
                    let why = if raw.is_empty() {
                        "the server closed the connection without a response".to_string()
                    } else {
                        format!(
                            "the server closed the connection inside the response head ({} bytes)",
                            raw.len()
                        )
                    };
                    return Err((Stop::Proto(why), raw));
                }
                Ok(_) => {}
                Err(stop) => return Err((stop, self.available().to_vec())),
            }
        }
    }
}

fn retryable(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

fn trim_head(head: &[u8]) -> &[u8] {
    let mut end = head.len();
    while end > 0 && matches!(head[end - 1], b'\r' | b'\n') {
        end -= 1;
    }
    &head[..end]
}

/// A parsed response head.
#[derive(Debug)]
struct Head {
    /// As received, without the blank line.
    raw: Vec<u8>,
    status: u16,
    reason: String,
    /// Names lower-cased.
    headers: Vec<(String, Vec<u8>)>,
}

impl Head {
    fn get(&self, name: &str) -> Option<String> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| String::from_utf8_lossy(v).trim().to_string())
    }

    fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The media type, lower-cased, without parameters.
    fn content_type(&self) -> String {
        self.get("content-type")
            .map(|v| {
                v.split(';')
                    .next()
                    .unwrap_or_default()
                    .trim()
                    .to_ascii_lowercase()
            })
            .unwrap_or_default()
    }

    fn status_text(&self) -> String {
        let reason = crate::message::sanitize(&self.reason, 60);
        if reason.is_empty() {
            format!("HTTP {}", self.status)
        } else {
            format!("HTTP {} {reason}", self.status)
        }
    }

    fn framing(&self) -> Result<Framing, Stop> {
        if self.status == 204 || self.status == 304 {
            return Ok(Framing::Length(0));
        }
        if let Some(te) = self.get("transfer-encoding") {
            if te.to_ascii_lowercase().ends_with("chunked") {
                return Ok(Framing::Chunked(Chunk::Size));
            }
        }
        match self.get("content-length") {
            Some(len) => len
                .parse::<u64>()
                .map(Framing::Length)
                .map_err(|_| Stop::Proto(format!("invalid Content-Length {len:?}"))),
            None => Ok(Framing::Eof),
        }
    }
}

/// How the body of a response ends.
#[derive(Debug)]
enum Framing {
    Length(u64),
    Chunked(Chunk),
    Eof,
}

#[derive(Debug)]
enum Chunk {
    Size,
    Data(u64),
    DataEnd,
    Trailers(usize),
    Done,
}

/// Reads a body through its framing.
struct Body {
    framing: Framing,
}

impl Body {
    /// Appends up to `max` bytes of body to `out`; `Ok(0)` at its end.
    fn read(&mut self, conn: &mut Conn, out: &mut Vec<u8>, max: usize) -> Result<usize, Stop> {
        loop {
            match &mut self.framing {
                Framing::Length(0) | Framing::Chunked(Chunk::Done) => return Ok(0),
                Framing::Length(left) => {
                    if conn.available().is_empty() && conn.fill()? == 0 {
                        return Err(Stop::Proto(format!(
                            "the server closed the connection {left} bytes before the end of \
                             the body"
                        )));
                    }
                    let n = take(conn, out, (*left).min(max as u64) as usize);
                    *left -= n as u64;
                    return Ok(n);
                }
                Framing::Eof => {
                    if conn.available().is_empty() && conn.fill()? == 0 {
                        return Ok(0);
                    }
                    return Ok(take(conn, out, max));
                }
                Framing::Chunked(state) => {
                    if let Some(n) = read_chunked(state, conn, out, max)? {
                        return Ok(n);
                    }
                }
            }
        }
    }
}

fn take(conn: &mut Conn, out: &mut Vec<u8>, max: usize) -> usize {
    let n = conn.available().len().min(max);
    out.extend_from_slice(&conn.available()[..n]);
    conn.consume(n);
    n
}

/// One step of chunked decoding; `Some(n)` when `n` data bytes were appended (0: the end).
fn read_chunked(
    state: &mut Chunk,
    conn: &mut Conn,
    out: &mut Vec<u8>,
    max: usize,
) -> Result<Option<usize>, Stop> {
    let closed = || Stop::Proto("the server closed the connection inside a chunked body".into());
    match state {
        Chunk::Done => Ok(Some(0)),
        Chunk::Size => match httparse::parse_chunk_size(conn.available()) {
            Ok(httparse::Status::Complete((used, size))) => {
                conn.consume(used);
                *state = if size == 0 {
                    Chunk::Trailers(0)
                } else {
                    Chunk::Data(size)
                };
                Ok(None)
            }
            Ok(httparse::Status::Partial) => {
                if conn.available().len() > MAX_CHUNK_LINE {
                    return Err(Stop::Proto(
                        "malformed chunked body: chunk-size line too long".into(),
                    ));
                }
                if conn.fill()? == 0 {
                    return Err(closed());
                }
                Ok(None)
            }
            Err(_) => Err(Stop::Proto(
                "malformed chunked body: invalid chunk size".into(),
            )),
        },
        Chunk::Data(left) => {
            if conn.available().is_empty() && conn.fill()? == 0 {
                return Err(closed());
            }
            let n = take(conn, out, (*left).min(max as u64) as usize);
            *left -= n as u64;
            if *left == 0 {
                *state = Chunk::DataEnd;
            }
            Ok(Some(n))
        }
        Chunk::DataEnd => {
            while conn.available().len() < 2 {
                if conn.fill()? == 0 {
                    return Err(closed());
                }
            }
            if !conn.available().starts_with(b"\r\n") {
                return Err(Stop::Proto(
                    "malformed chunked body: no CRLF after a chunk".into(),
                ));
            }
            conn.consume(2);
            *state = Chunk::Size;
            Ok(None)
        }
        Chunk::Trailers(seen) => match conn.available().windows(2).position(|w| w == b"\r\n") {
            Some(0) => {
                conn.consume(2);
                *state = Chunk::Done;
                Ok(Some(0))
            }
            Some(i) => {
                *seen += i + 2;
                conn.consume(i + 2);
                if *seen > MAX_CHUNK_LINE * 16 {
                    return Err(Stop::Proto(
                        "malformed chunked body: trailers too long".into(),
                    ));
                }
                Ok(None)
            }
            None => {
                if conn.available().len() > MAX_CHUNK_LINE || conn.fill()? == 0 {
                    return Err(closed());
                }
                Ok(None)
            }
        },
    }
}

/// Reads a whole body, keeping at most `max` bytes; returns it and whether it was longer.
fn read_bounded(body: &mut Body, conn: &mut Conn, max: usize) -> Result<(Vec<u8>, bool), Stop> {
    let mut out = Vec::new();
    loop {
        let room = max - out.len();
        if room == 0 {
            // One more byte tells whether there was more.
            let mut probe = Vec::new();
            let more = body.read(conn, &mut probe, 1)? > 0;
            return Ok((out, more));
        }
        if body.read(conn, &mut out, room.min(READ_CHUNK))? == 0 {
            return Ok((out, false));
        }
    }
}

impl Ctx {
    /// Hands an event to the session; false once the session is gone.
    fn send(&self, event: Incoming) -> bool {
        self.events.send(event).is_ok()
    }

    fn meta(&self, dir: Direction, bytes: Vec<u8>, solicited: bool, truncated: bool) -> bool {
        self.send(Incoming::Lines(vec![Line {
            bytes,
            truncated,
            meta: Some(Meta { dir, solicited }),
        }]))
    }

    fn message(&self, bytes: Vec<u8>, truncated: bool) -> bool {
        self.send(Incoming::Lines(vec![Line {
            bytes,
            truncated,
            meta: None,
        }]))
    }

    fn fail(&self, purpose: &Purpose, error: String, fatal: bool) {
        if let Purpose::Request { id, .. } = purpose {
            let _ = self.send(Incoming::Exchange {
                id: *id,
                error,
                fatal,
            });
        }
    }
}

/// Whether `bytes` (one message or a batch) holds the answer to request `id`.
fn answers(bytes: &[u8], id: u64) -> bool {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Array(batch)) => batch.iter().any(|m| response_id(m) == Some(id)),
        Ok(msg) => response_id(&msg) == Some(id),
        Err(_) => false,
    }
}

/// One POST (or DELETE): send, read the head, then the body by its kind.
fn exchange(ctx: &Ctx, job: Job) {
    let Job {
        request,
        purpose,
        deadline,
    } = job;
    let solicited = matches!(purpose, Purpose::Request { .. });
    let mut conn = match Conn::open(ctx, deadline) {
        Ok(conn) => conn,
        Err(e) => {
            ctx.fail(&purpose, format!("could not connect: {e}"), true);
            return;
        }
    };
    match conn.write_all(&request) {
        Ok(()) => {}
        Err(Stop::Quiet) => return,
        Err(Stop::Io(e) | Stop::Proto(e)) => {
            ctx.fail(&purpose, format!("could not send the request: {e}"), false);
            return;
        }
    }
    let head = match conn.read_head() {
        Ok(head) => head,
        Err((stop, raw)) => {
            if !raw.is_empty() {
                ctx.meta(Direction::ServerToClient, raw, solicited, false);
            }
            match stop {
                Stop::Quiet => {}
                Stop::Io(e) => ctx.fail(&purpose, format!("reading the response: {e}"), false),
                Stop::Proto(e) => ctx.fail(&purpose, e, false),
            }
            return;
        }
    };
    if !ctx.meta(
        Direction::ServerToClient,
        head.raw.clone(),
        solicited,
        false,
    ) {
        return;
    }
    if let Purpose::Request {
        keep_session_id: true,
        ..
    } = purpose
    {
        if head.ok() {
            keep_session_id(ctx, &head);
        }
    }
    if let Err(stop) = response_body(ctx, &mut conn, &head, &purpose) {
        match stop {
            Stop::Quiet => {}
            Stop::Io(e) => ctx.fail(&purpose, format!("reading the response: {e}"), false),
            Stop::Proto(e) => ctx.fail(&purpose, e, false),
        }
    }
}

fn keep_session_id(ctx: &Ctx, head: &Head) {
    let Some(id) = head.get("mcp-session-id") else {
        return;
    };
    if !id.is_empty() && id.len() <= MAX_SESSION_ID && id.bytes().all(|b| b.is_ascii_graphic()) {
        *lock(&ctx.shared.session_id) = Some(id);
    }
}

/// Reads the body of a POST's response by its status and content type; reports a request
/// that got no answer.
fn response_body(ctx: &Ctx, conn: &mut Conn, head: &Head, purpose: &Purpose) -> Result<(), Stop> {
    let mut body = Body {
        framing: head.framing()?,
    };
    let max = ctx.limits.max_body;
    let content_type = head.content_type();
    let request = match purpose {
        Purpose::Request { id, .. } => Some(*id),
        Purpose::Other => None,
    };
    let legacy = ctx.target.kind == HttpKind::LegacySse;
    if head.ok() && !legacy && content_type == "text/event-stream" {
        return post_stream(ctx, conn, body, purpose);
    }
    let (bytes, truncated) = read_bounded(&mut body, conn, max)?;
    let is_json = serde_json::from_slice::<Value>(&bytes).is_ok();
    // On a success of streamable HTTP, a body labelled JSON is a message (even if it is not
    // valid JSON), and nothing else is; on an error status, a body that parses as JSON is (a
    // JSON-RPC error). Anything else is kept as a meta line.
    let message = !legacy
        && if head.ok() {
            content_type == "application/json"
        } else {
            is_json && !truncated
        };
    if !bytes.is_empty() {
        let sent = if message {
            ctx.message(bytes.clone(), truncated)
        } else {
            ctx.meta(Direction::ServerToClient, bytes.clone(), false, truncated)
        };
        if !sent {
            return Err(Stop::Quiet);
        }
    }
    let Some(id) = request else {
        return Ok(());
    };
    if legacy {
        // The answer comes on the event stream.
        if !head.ok() {
            return Err(Stop::Proto(head.status_text()));
        }
        return Ok(());
    }
    if message && !truncated && answers(&bytes, id) {
        return Ok(());
    }
    let why = if truncated {
        format!("response body larger than {max} bytes")
    } else if !head.ok() {
        let mut why = head.status_text();
        if head.status == 404 && lock(&ctx.shared.session_id).is_some() {
            why.push_str(" (the server ended the session)");
        } else if (300..400).contains(&head.status) {
            if let Some(location) = head.get("location") {
                why.push_str(&format!(
                    " to {:?} (not followed)",
                    crate::message::sanitize(&location, 100)
                ));
            }
        }
        why
    } else if content_type == "application/json" {
        format!(
            "{} with no answer to request {id} in its body",
            head.status_text()
        )
    } else if bytes.is_empty() && content_type.is_empty() {
        format!("{} without a body", head.status_text())
    } else {
        format!(
            "{} with content-type {:?} (expected application/json or text/event-stream)",
            head.status_text(),
            crate::message::sanitize(&content_type, 60)
        )
    };
    Err(Stop::Proto(why))
}

/// How reading one event stream ended.
enum StreamEnd {
    /// The answer came (the stream is left).
    Answered,
    /// The stream ended; with the last event id and `retry` it carried.
    Ended(sse::Parser),
}

/// Reads an event stream: every event's data to the session, as messages (or, for event types
/// other than `message`, through `other`), until the answer to `answer_to` arrives or the
/// stream ends.
fn read_stream(
    ctx: &Ctx,
    conn: &mut Conn,
    mut body: Body,
    mut parser: sse::Parser,
    answer_to: Option<u64>,
    other: &mut dyn FnMut(&Ctx, sse::Event) -> bool,
    count: &mut usize,
) -> Result<StreamEnd, Stop> {
    let mut bytes = Vec::with_capacity(READ_CHUNK);
    let mut events = Vec::new();
    loop {
        bytes.clear();
        if body.read(conn, &mut bytes, READ_CHUNK)? == 0 {
            return Ok(StreamEnd::Ended(parser));
        }
        parser.feed(&bytes, &mut events);
        for event in events.drain(..) {
            *count += 1;
            if *count > ctx.limits.max_events {
                return Err(Stop::Proto(format!(
                    "more than {} SSE events in one response",
                    ctx.limits.max_events
                )));
            }
            if event.kind != "message" {
                if !other(ctx, event) {
                    return Err(Stop::Quiet);
                }
                continue;
            }
            let answered = !event.truncated && answer_to.is_some_and(|id| answers(&event.data, id));
            let truncated = event.truncated;
            if !ctx.message(event.data, truncated) {
                return Err(Stop::Quiet);
            }
            if truncated && answer_to.is_some() {
                return Err(Stop::Proto(format!(
                    "SSE event larger than {} bytes",
                    ctx.limits.max_body
                )));
            }
            if answered {
                return Ok(StreamEnd::Answered);
            }
        }
    }
}

/// Records an event of a type other than `message` as a meta line.
fn keep_other(ctx: &Ctx, event: sse::Event) -> bool {
    let mut raw = format!("event: {}\n", event.kind).into_bytes();
    raw.extend_from_slice(&event.data);
    ctx.meta(Direction::ServerToClient, raw, false, event.truncated)
}

/// The event stream of a POST's response, resumed with GET + `Last-Event-ID` when the server
/// closes it before the answer and the era allows.
fn post_stream(ctx: &Ctx, conn: &mut Conn, body: Body, purpose: &Purpose) -> Result<(), Stop> {
    let (answer_to, resume) = match purpose {
        Purpose::Request { id, resume, .. } => (Some(*id), resume.as_ref()),
        Purpose::Other => (None, None),
    };
    let mut count = 0;
    let parser = sse::Parser::new(ctx.limits.max_body);
    let mut end = read_stream(
        ctx,
        conn,
        body,
        parser,
        answer_to,
        &mut keep_other,
        &mut count,
    )?;
    let mut resumes = 0;
    loop {
        let StreamEnd::Ended(parser) = end else {
            return Ok(());
        };
        let Some(id) = answer_to else {
            return Ok(());
        };
        let (Some(headers), Some(last_id)) = (resume, parser.last_id.clone()) else {
            return Err(Stop::Proto(format!(
                "the SSE stream ended without the answer to request {id}"
            )));
        };
        if resumes == MAX_RESUMES {
            return Err(Stop::Proto(format!(
                "the SSE stream ended without the answer to request {id} after {MAX_RESUMES} \
                 resumptions"
            )));
        }
        resumes += 1;
        let retry_ms = parser.retry_ms;
        let wait = retry_ms
            .map_or(DEFAULT_RETRY, Duration::from_millis)
            .min(MAX_RETRY);
        sleep_until(conn, Instant::now() + wait)?;
        let mut headers = headers.clone();
        headers.push(("Last-Event-ID".into(), last_id.clone()));
        let (mut next, body) = open_get(ctx, conn.deadline, &headers, true)
            .map_err(|e| Stop::Proto(format!("resuming the SSE stream: {e}")))?;
        // A resumption that brings no event keeps the id it resumed from.
        let mut parser = sse::Parser::new(ctx.limits.max_body);
        parser.last_id = Some(last_id);
        parser.retry_ms = retry_ms;
        end = read_stream(
            ctx,
            &mut next,
            body,
            parser,
            answer_to,
            &mut keep_other,
            &mut count,
        )?;
    }
}

fn sleep_until(conn: &Conn, until: Instant) -> Result<(), Stop> {
    loop {
        if conn.stopped() {
            return Err(Stop::Quiet);
        }
        let now = Instant::now();
        if now >= until {
            return Ok(());
        }
        thread::sleep((until - now).min(TICK));
    }
}

/// Opens a GET event stream at the MCP endpoint: records both heads, checks the answer is an
/// event stream. Errors are one-line reasons (the session id is sent when there is one).
fn open_get(
    ctx: &Ctx,
    deadline: Instant,
    headers: &[(String, String)],
    solicited: bool,
) -> Result<(Conn, Body), String> {
    let session_id = lock(&ctx.shared.session_id).clone();
    let (request, recorded) = build_request(
        "GET",
        &ctx.target.path,
        &ctx.target,
        session_id.as_deref(),
        headers,
        None,
        "text/event-stream",
    );
    let mut conn = Conn::open(ctx, deadline).map_err(|e| format!("could not connect: {e}"))?;
    if !ctx.meta(Direction::ClientToServer, recorded, solicited, false) {
        return Err("the session ended".into());
    }
    let describe = |stop: Stop| match stop {
        Stop::Quiet => "stopped".to_string(),
        Stop::Io(e) | Stop::Proto(e) => e,
    };
    conn.write_all(&request).map_err(describe)?;
    let head = match conn.read_head() {
        Ok(head) => head,
        Err((stop, raw)) => {
            if !raw.is_empty() {
                ctx.meta(Direction::ServerToClient, raw, solicited, false);
            }
            return Err(describe(stop));
        }
    };
    ctx.meta(
        Direction::ServerToClient,
        head.raw.clone(),
        solicited,
        false,
    );
    let mut body = Body {
        framing: head.framing().map_err(describe)?,
    };
    if head.ok() && head.content_type() == "text/event-stream" {
        return Ok((conn, body));
    }
    // Keep what the server said instead.
    if let Ok((bytes, truncated)) = read_bounded(&mut body, &mut conn, ctx.limits.max_body) {
        if !bytes.is_empty() {
            ctx.meta(Direction::ServerToClient, bytes, solicited, truncated);
        }
    }
    if head.ok() {
        Err(format!(
            "{} with content-type {:?} (expected text/event-stream)",
            head.status_text(),
            crate::message::sanitize(&head.content_type(), 60)
        ))
    } else {
        Err(head.status_text())
    }
}

/// The optional GET stream of streamable HTTP: server-initiated messages until `until`.
fn listen_stream(ctx: &Ctx, headers: &[(String, String)], until: Instant) {
    let Ok((mut conn, body)) = open_get(ctx, until, headers, false) else {
        return;
    };
    let mut count = 0;
    let parser = sse::Parser::new(ctx.limits.max_body);
    let _ = read_stream(
        ctx,
        &mut conn,
        body,
        parser,
        None,
        &mut keep_other,
        &mut count,
    );
}

/// The event stream of the legacy HTTP+SSE transport: the `endpoint` event, then every server
/// message, until `until`. Its end ends the session.
fn legacy_stream(ctx: &Ctx, until: Instant) {
    let (mut conn, body) = match open_get(ctx, until, &[], true) {
        Ok(opened) => opened,
        Err(e) => {
            let _ = ctx.send(Incoming::ReadFailed(e));
            return;
        }
    };
    let base = ctx.target.path.clone();
    let host = ctx.target.host.clone();
    let mut endpoint_seen = false;
    let mut on_other = |ctx: &Ctx, event: sse::Event| -> bool {
        if event.kind != "endpoint" || endpoint_seen {
            return keep_other(ctx, event);
        }
        endpoint_seen = true;
        let resolved = resolve_endpoint(&event.data, &host, &base);
        if !keep_other(ctx, event) {
            return false;
        }
        ctx.send(Incoming::Endpoint(resolved))
    };
    let mut count = 0;
    // No event limit on this stream: it carries the whole session; it ends with the session.
    let parser = sse::Parser::new(ctx.limits.max_body);
    let unlimited = Ctx {
        target: ctx.target.clone(),
        shared: ctx.shared.clone(),
        events: ctx.events.clone(),
        limits: Limits {
            max_events: usize::MAX,
            ..ctx.limits
        },
    };
    match read_stream(
        &unlimited,
        &mut conn,
        body,
        parser,
        None,
        &mut on_other,
        &mut count,
    ) {
        Ok(_) => {
            let _ = ctx.send(Incoming::Eof);
        }
        Err(Stop::Quiet) => {}
        Err(Stop::Io(e) | Stop::Proto(e)) => {
            let _ = ctx.send(Incoming::ReadFailed(e));
        }
    }
}

/// The path to POST to from the data of an `endpoint` event: a path, a relative reference, or
/// an absolute URL of the same origin.
pub(crate) fn resolve_endpoint(data: &[u8], host: &str, base: &str) -> Result<String, String> {
    let text = std::str::from_utf8(data)
        .map_err(|_| "the endpoint event is not UTF-8".to_string())?
        .trim();
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(format!(
            "the endpoint event is not a URI: {:?}",
            crate::message::sanitize(text, 100)
        ));
    }
    for scheme in ["http://", "https://"] {
        if let Some(rest) = text.strip_prefix(scheme) {
            let cut = rest.find(['/', '?']).unwrap_or(rest.len());
            let (authority, path) = rest.split_at(cut);
            if !authority.eq_ignore_ascii_case(host) {
                return Err(format!(
                    "the endpoint event points to another origin: {:?}",
                    crate::message::sanitize(text, 100)
                ));
            }
            return Ok(if path.starts_with('/') {
                path.to_string()
            } else {
                format!("/{path}")
            });
        }
    }
    if text.contains("://") || text.starts_with("//") {
        return Err(format!(
            "the endpoint event points to another origin: {:?}",
            crate::message::sanitize(text, 100)
        ));
    }
    if text.starts_with('/') {
        return Ok(text.to_string());
    }
    // Relative to the SSE endpoint's directory.
    let dir = base.split('?').next().unwrap_or("/");
    let dir = &dir[..dir.rfind('/').map_or(0, |i| i + 1)];
    Ok(format!("{dir}{text}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connector() -> Connector {
        Arc::new(|| Err(io::Error::other("unused")))
    }

    #[test]
    fn urls_become_host_and_path() {
        let t = HttpTarget::from_url("http://127.0.0.1:8080/mcp?x=1#frag", connector()).unwrap();
        assert_eq!(
            (t.host.as_str(), t.path.as_str()),
            ("127.0.0.1:8080", "/mcp?x=1")
        );
        let t = HttpTarget::from_url("https://example.com", connector()).unwrap();
        assert_eq!((t.host.as_str(), t.path.as_str()), ("example.com", "/"));
        let t = HttpTarget::from_url("http://[::1]:9?q", connector()).unwrap();
        assert_eq!((t.host.as_str(), t.path.as_str()), ("[::1]:9", "/?q"));
        assert!(matches!(
            HttpTarget::from_url("ftp://x/", connector()),
            Err(HttpTargetError::Scheme(_))
        ));
        assert!(matches!(
            HttpTarget::from_url("http://u:p@x/", connector()),
            Err(HttpTargetError::UserInfo(_))
        ));
        assert!(matches!(
            HttpTarget::from_url("http:///mcp", connector()),
            Err(HttpTargetError::NoHost(_))
        ));
        assert!(HttpTarget::from_url("http://x/a b", connector()).is_err());
        let mut t = HttpTarget::new(connector(), "x", "/");
        t.headers
            .push(("Authorization".into(), "Bearer a\r\nX: y".into()));
        assert!(t.validate().is_err());
        t.headers[0] = ("Bad Name".into(), "v".into());
        assert!(t.validate().is_err());
    }

    #[test]
    fn endpoints_resolve_within_the_origin() {
        let r = |d: &str| resolve_endpoint(d.as_bytes(), "h:1", "/sse/stream?x=1");
        assert_eq!(
            r("/messages/?session_id=ab").unwrap(),
            "/messages/?session_id=ab"
        );
        assert_eq!(r("messages?s=1").unwrap(), "/sse/messages?s=1");
        assert_eq!(r("http://H:1/post").unwrap(), "/post");
        assert!(r("http://evil:1/post")
            .unwrap_err()
            .contains("another origin"));
        assert!(r("//evil/post").is_err());
        assert!(r("a b").is_err());
        assert!(r("").is_err());
    }

    #[test]
    fn request_heads() {
        let mut t = HttpTarget::new(connector(), "h:1", "/mcp");
        t.headers.push(("Authorization".into(), "Bearer t".into()));
        let (req, head) = build_request(
            "POST",
            "/mcp",
            &t,
            Some("s-1"),
            &[("MCP-Protocol-Version".into(), "2025-06-18".into())],
            Some(b"{}"),
            "application/json, text/event-stream",
        );
        let head = String::from_utf8(head).unwrap();
        assert!(
            head.starts_with("POST /mcp HTTP/1.1\r\nHost: h:1\r\n"),
            "{head}"
        );
        assert!(head.contains("\r\nContent-Length: 2\r\n"));
        assert!(head.contains("\r\nMcp-Session-Id: s-1\r\n"));
        assert!(head.ends_with("MCP-Protocol-Version: 2025-06-18\r\nAuthorization: Bearer t"));
        assert!(req.ends_with(b"Bearer t\r\n\r\n{}"));
    }
}
