//! A small multiplexed TCP relay over one byte stream: how the host reaches a port on the
//! loopback of the sandbox inside the guest (an `--http` or `--sse` server under
//! `--isolation microvm`), over the virtio-serial port [`agent::ports::TCP`](crate::agent::ports::TCP).
//!
//! The host end ([`Mux`]) opens connections by port number only; the guest end ([`serve`])
//! makes each one with the dial function it was given (glassbox dials 127.0.0.1 inside the
//! guest's sandbox, from the sandbox's own network namespace) and relays bytes both ways.
//! Several connections are live at once: the legacy SSE transport keeps its GET stream open
//! while it POSTs.
//!
//! # Wire
//!
//! A frame is a connection id (`u32`, little-endian), a kind (`u8`), a payload length (`u32`,
//! little-endian) and the payload. Ids are chosen by the host, increasing from 1, never reused.
//!
//! | kind | from | payload |
//! |---|---|---|
//! | [`OPEN`] | host | the port (`u16`, little-endian) |
//! | [`OPENED`] | guest | none |
//! | [`REFUSED`] | guest | an error kind byte, then the error's text (at most [`MAX_TEXT`]) |
//! | [`DATA`] | both | 1 to [`MAX_DATA`] bytes |
//! | [`EOF`] | both | none: the sender writes no more on this connection (a half-close) |
//! | [`CLOSE`] | both | why, as text (at most [`MAX_TEXT`]): the connection is gone |
//!
//! A frame of an unknown kind, with a payload of the wrong size for its kind, or about a
//! connection that was never opened ends the relay with an error naming it; neither end
//! trusts the other to be well-formed.
//!
//! # Bounds
//!
//! Memory stays bounded whatever the other side sends. On the host, each connection has a
//! queue of at most [`QUEUE_FRAMES`] data frames; when it is full, the host stops reading the
//! port until the reader of that connection catches up (or drops it: data for a connection the
//! host dropped is discarded), so a server that writes endlessly is held back by the port and
//! then by TCP in the guest, never buffered. The host's frames to the guest wait in a queue of
//! at most [`OUTBOX_BYTES`] (writes block, up to their write timeout, while it is full). The
//! guest queues at most [`QUEUE_FRAMES`] data frames per connection towards its TCP socket.
//!
//! There is no per-connection window: a connection whose queue is full holds back the others
//! on the same port until it is read or dropped. The host's HTTP client reads every
//! connection it keeps open and drops it at its deadline, so a stall lasts at most that long.

use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Host → guest: open a connection to this port.
pub const OPEN: u8 = 1;
/// Guest → host: the connection is open.
pub const OPENED: u8 = 2;
/// Guest → host: the connection could not be made (the server does not listen yet ...).
pub const REFUSED: u8 = 3;
/// Both ways: bytes of the connection.
pub const DATA: u8 = 4;
/// Both ways: the sender's end of the stream (a half-close).
pub const EOF: u8 = 5;
/// Both ways: the connection is gone (dropped by the host, failed or reset in the guest).
pub const CLOSE: u8 = 6;

/// Most bytes of data in one frame.
pub const MAX_DATA: usize = 32 * 1024;
/// Most bytes of an error text (in [`REFUSED`] and [`CLOSE`]).
pub const MAX_TEXT: usize = 1024;
/// Data frames queued per connection, at each end (so at most `QUEUE_FRAMES * MAX_DATA`
/// bytes).
pub const QUEUE_FRAMES: usize = 8;
/// Bytes of frames the host queues for the port.
pub const OUTBOX_BYTES: usize = 4 * MAX_DATA;

/// How often the guest's writer to a TCP socket that does not drain looks at whether the host
/// closed the connection.
const TICK: Duration = Duration::from_millis(200);

const HEADER: usize = 9;

fn kind_name(kind: u8) -> &'static str {
    match kind {
        OPEN => "OPEN",
        OPENED => "OPENED",
        REFUSED => "REFUSED",
        DATA => "DATA",
        EOF => "EOF",
        CLOSE => "CLOSE",
        _ => "unknown",
    }
}

/// One frame.
#[derive(Debug)]
struct Frame {
    id: u32,
    kind: u8,
    payload: Vec<u8>,
}

fn encode(id: u32, kind: u8, payload: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(HEADER + payload.len());
    b.extend_from_slice(&id.to_le_bytes());
    b.push(kind);
    b.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    b.extend_from_slice(payload);
    b
}

fn malformed(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

/// Reads one frame; `Ok(None)` at a clean end of the stream (before a frame starts). The
/// payload's size is checked against its kind before anything is allocated.
fn read_frame(r: &mut impl Read) -> io::Result<Option<Frame>> {
    let mut head = [0u8; HEADER];
    let mut got = 0;
    while got < HEADER {
        match r.read(&mut head[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the stream ended inside a frame",
                ))
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let id = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
    let kind = head[4];
    let len = u32::from_le_bytes([head[5], head[6], head[7], head[8]]) as usize;
    let fits = match kind {
        OPEN => len == 2,
        OPENED | EOF => len == 0,
        REFUSED => (1..=1 + MAX_TEXT).contains(&len),
        DATA => (1..=MAX_DATA).contains(&len),
        CLOSE => len <= MAX_TEXT,
        _ => {
            return Err(malformed(format!(
                "a frame of unknown kind {kind} (connection {id})"
            )))
        }
    };
    if !fits {
        return Err(malformed(format!(
            "a {} frame with a payload of {len} bytes (connection {id})",
            kind_name(kind)
        )));
    }
    let mut payload = vec![0u8; len];
    r.read_exact(&mut payload).map_err(|e| {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            io::Error::new(e.kind(), "the stream ended inside a frame")
        } else {
            e
        }
    })?;
    Ok(Some(Frame { id, kind, payload }))
}

/// At most [`MAX_TEXT`] bytes of `s`, cut at a character boundary.
fn text(s: &str) -> &[u8] {
    glassbox_model::cut(s, MAX_TEXT).as_bytes()
}

/// The error kinds that cross in a [`REFUSED`] frame; any other is sent as `Other`.
const KINDS: [io::ErrorKind; 5] = [
    io::ErrorKind::Other,
    io::ErrorKind::ConnectionRefused,
    io::ErrorKind::TimedOut,
    io::ErrorKind::PermissionDenied,
    io::ErrorKind::NotFound,
];

fn refused_payload(e: &io::Error) -> Vec<u8> {
    let code = KINDS.iter().position(|k| *k == e.kind()).unwrap_or(0) as u8;
    let mut p = vec![code];
    p.extend_from_slice(text(&e.to_string()));
    p
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

// ---------------------------------------------------------------------------------------
// The host end.

/// The host's end of the relay: opens connections to ports on the guest's side. Cloning it
/// gives another handle on the same relay; it is used from several threads at once.
///
/// Two threads serve it, one reading the port and one writing it; both end when the byte
/// stream ends (the guest powers off, QEMU is killed) or breaks, and every connection then
/// fails with the reason.
#[derive(Clone, Debug)]
pub struct Mux {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    table: Mutex<Table>,
    outbox: Outbox,
}

#[derive(Debug)]
struct Table {
    conns: HashMap<u32, Slot>,
    /// The next connection id; every id below it was handed out.
    next_id: u32,
    /// Why the relay ended, once it did.
    dead: Option<String>,
}

/// What [`Mux::connect`] waits for.
type Answer = io::Result<(Receiver<Vec<u8>>, Arc<ConnState>)>;

#[derive(Debug)]
enum Slot {
    /// OPEN sent; the answer goes here.
    Pending(mpsc::Sender<Answer>),
    /// Open; `tx` is `None` once the guest's EOF came.
    Open {
        tx: Option<SyncSender<Vec<u8>>>,
        state: Arc<ConnState>,
    },
}

/// What the reading side learns of a connection besides its data.
#[derive(Debug, Default)]
struct ConnState {
    /// The guest's stream ended cleanly.
    eof: AtomicBool,
    /// The guest closed the connection (reset, failed): why.
    reset: Mutex<Option<String>>,
}

/// The host's frames for the port, bounded in bytes, written by one thread in order.
#[derive(Debug)]
struct Outbox {
    state: Mutex<OutState>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct OutState {
    frames: VecDeque<Vec<u8>>,
    bytes: usize,
    dead: Option<String>,
}

impl Outbox {
    /// Queues `frame`; waits while the queue is full, up to `deadline`. A `control` frame
    /// (OPEN, EOF, CLOSE: a few per connection) never waits, so that dropping a connection
    /// never blocks.
    fn push(&self, frame: Vec<u8>, control: bool, deadline: Option<Instant>) -> io::Result<()> {
        let mut st = lock(&self.state);
        loop {
            if let Some(why) = &st.dead {
                return Err(ended(why));
            }
            if control || st.frames.is_empty() || st.bytes + frame.len() <= OUTBOX_BYTES {
                break;
            }
            st = match deadline {
                None => self.changed.wait(st).unwrap_or_else(|e| e.into_inner()),
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(io::Error::new(
                            io::ErrorKind::WouldBlock,
                            "the relay to the guest is full",
                        ));
                    }
                    self.changed
                        .wait_timeout(st, left)
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
            };
        }
        st.bytes += frame.len();
        st.frames.push_back(frame);
        self.changed.notify_all();
        Ok(())
    }

    fn kill(&self, why: &str) {
        let mut st = lock(&self.state);
        st.dead.get_or_insert_with(|| why.to_string());
        st.frames.clear();
        st.bytes = 0;
        self.changed.notify_all();
    }
}

fn ended(why: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionAborted,
        format!("the TCP relay with the guest ended: {why}"),
    )
}

impl Inner {
    /// The relay is over: every pending and open connection learns why.
    fn end(&self, why: &str) {
        self.outbox.kill(why);
        let mut t = lock(&self.table);
        t.dead.get_or_insert_with(|| why.to_string());
        for (_, slot) in t.conns.drain() {
            if let Slot::Pending(tx) = slot {
                let _ = tx.send(Err(ended(why)));
            }
        }
    }

    fn write_loop(&self, mut w: impl Write) {
        loop {
            let frame = {
                let mut st = lock(&self.outbox.state);
                loop {
                    if st.dead.is_some() {
                        return;
                    }
                    if let Some(f) = st.frames.pop_front() {
                        st.bytes -= f.len();
                        self.outbox.changed.notify_all();
                        break f;
                    }
                    st = self
                        .outbox
                        .changed
                        .wait(st)
                        .unwrap_or_else(|e| e.into_inner());
                }
            };
            if let Err(e) = w.write_all(&frame).and_then(|()| w.flush()) {
                self.end(&format!("cannot write to the guest: {e}"));
                return;
            }
        }
    }

    fn read_loop(&self, mut r: impl Read) {
        let why = loop {
            match read_frame(&mut r) {
                Ok(Some(f)) => {
                    if let Err(e) = self.dispatch(f) {
                        break format!("the guest broke the protocol: {e}");
                    }
                }
                Ok(None) => break "the guest's end closed".to_string(),
                Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                    break format!("the guest broke the protocol: {e}")
                }
                Err(e) => break format!("cannot read from the guest: {e}"),
            }
        };
        self.end(&why);
    }

    /// Handles one frame from the guest; an error ends the relay.
    fn dispatch(&self, f: Frame) -> io::Result<()> {
        let mut t = lock(&self.table);
        let known = f.id < t.next_id && f.id != 0;
        match f.kind {
            OPENED | REFUSED => match t.conns.remove(&f.id) {
                Some(Slot::Pending(answer)) => {
                    if f.kind == REFUSED {
                        let kind = KINDS
                            .get(f.payload[0] as usize)
                            .copied()
                            .unwrap_or(io::ErrorKind::Other);
                        let msg = String::from_utf8_lossy(&f.payload[1..]).into_owned();
                        let _ = answer.send(Err(io::Error::new(kind, msg)));
                        return Ok(());
                    }
                    let (tx, rx) = mpsc::sync_channel(QUEUE_FRAMES);
                    let state = Arc::new(ConnState::default());
                    t.conns.insert(
                        f.id,
                        Slot::Open {
                            tx: Some(tx),
                            state: state.clone(),
                        },
                    );
                    // Sent with the table locked: a connect that timed out looks at the table
                    // under the same lock to know whether an answer is on its way.
                    if answer.send(Ok((rx, state))).is_err() {
                        t.conns.remove(&f.id);
                        drop(t);
                        self.close(f.id);
                    }
                    Ok(())
                }
                Some(open) => {
                    t.conns.insert(f.id, open);
                    Err(malformed(format!(
                        "{} for connection {}, which is already open",
                        kind_name(f.kind),
                        f.id
                    )))
                }
                // A connect that gave up waiting: the guest's connection is not wanted.
                None if known => {
                    drop(t);
                    if f.kind == OPENED {
                        self.close(f.id);
                    }
                    Ok(())
                }
                None => Err(malformed(format!(
                    "{} for connection {}, which was never opened",
                    kind_name(f.kind),
                    f.id
                ))),
            },
            DATA => match t.conns.get(&f.id) {
                Some(Slot::Open { tx: Some(tx), .. }) => {
                    let tx = tx.clone();
                    drop(t);
                    // Blocks while the connection's queue is full: the port is not read until
                    // its reader catches up or drops it (then the data is discarded).
                    let _ = tx.send(f.payload);
                    Ok(())
                }
                Some(Slot::Open { tx: None, .. }) => Err(malformed(format!(
                    "DATA after the end of stream on connection {}",
                    f.id
                ))),
                Some(Slot::Pending(_)) => Err(malformed(format!(
                    "DATA for connection {} before it was opened",
                    f.id
                ))),
                None if known => Ok(()),
                None => Err(malformed(format!(
                    "DATA for connection {}, which was never opened",
                    f.id
                ))),
            },
            EOF => match t.conns.get_mut(&f.id) {
                Some(Slot::Open { tx, state }) => {
                    state.eof.store(true, Ordering::SeqCst);
                    // The reader sees the end once it has read what was queued before it.
                    tx.take();
                    Ok(())
                }
                Some(Slot::Pending(_)) => Err(malformed(format!(
                    "EOF for connection {} before it was opened",
                    f.id
                ))),
                None if known => Ok(()),
                None => Err(malformed(format!(
                    "EOF for connection {}, which was never opened",
                    f.id
                ))),
            },
            CLOSE => match t.conns.remove(&f.id) {
                Some(Slot::Open { state, .. }) => {
                    let why = String::from_utf8_lossy(&f.payload).into_owned();
                    *lock(&state.reset) = Some(if why.is_empty() {
                        "closed in the guest".into()
                    } else {
                        why
                    });
                    Ok(())
                }
                Some(pending @ Slot::Pending(_)) => {
                    t.conns.insert(f.id, pending);
                    Err(malformed(format!(
                        "CLOSE for connection {} before it was opened",
                        f.id
                    )))
                }
                None if known => Ok(()),
                None => Err(malformed(format!(
                    "CLOSE for connection {}, which was never opened",
                    f.id
                ))),
            },
            _ => Err(malformed(format!(
                "the guest sent {} (connection {}), which only the host sends",
                kind_name(f.kind),
                f.id
            ))),
        }
    }

    /// Tells the guest that the host is done with connection `id`.
    fn close(&self, id: u32) {
        let _ = self.outbox.push(encode(id, CLOSE, b""), true, None);
    }
}

impl Mux {
    /// Starts the host's end over a byte stream: `reader` and `writer` are its two halves
    /// (for a socket, the socket and its `try_clone`).
    pub fn start(
        reader: impl Read + Send + 'static,
        writer: impl Write + Send + 'static,
    ) -> io::Result<Mux> {
        let inner = Arc::new(Inner {
            table: Mutex::new(Table {
                conns: HashMap::new(),
                next_id: 1,
                dead: None,
            }),
            outbox: Outbox {
                state: Mutex::new(OutState::default()),
                changed: Condvar::new(),
            },
        });
        let w = inner.clone();
        std::thread::Builder::new()
            .name("glassbox-mux-write".into())
            .spawn(move || w.write_loop(writer))?;
        let r = inner.clone();
        let started = std::thread::Builder::new()
            .name("glassbox-mux-read".into())
            .spawn(move || r.read_loop(reader));
        if let Err(e) = started {
            inner.end("could not start the reading thread");
            return Err(e);
        }
        Ok(Mux { inner })
    }

    /// Opens a connection to `port` on the guest's side, waiting at most `timeout` for the
    /// guest's answer. The guest's refusal comes back as its error, with its kind
    /// (`ConnectionRefused` while nothing listens there).
    pub fn connect(&self, port: u16, timeout: Duration) -> io::Result<MuxStream> {
        let deadline = Instant::now() + timeout;
        let (tx, rx) = mpsc::channel();
        // The id is handed out and its OPEN queued under one lock: the guest requires ids in
        // increasing order, and two connects racing between the two steps would queue OPEN 2
        // before OPEN 1, which ends the relay. OPEN is a control frame, so it never waits
        // for room while the table is held.
        let id = {
            let mut t = lock(&self.inner.table);
            if let Some(why) = &t.dead {
                return Err(ended(why));
            }
            let id = t.next_id;
            t.next_id = id
                .checked_add(1)
                .ok_or_else(|| io::Error::other("the relay ran out of connection ids"))?;
            self.inner
                .outbox
                .push(encode(id, OPEN, &port.to_le_bytes()), true, Some(deadline))?;
            t.conns.insert(id, Slot::Pending(tx));
            id
        };
        let answer = match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(a) => a,
            Err(RecvTimeoutError::Timeout) => {
                let mut t = lock(&self.inner.table);
                if matches!(t.conns.get(&id), Some(Slot::Pending(_))) {
                    t.conns.remove(&id);
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("the guest did not answer within {} ms", timeout.as_millis()),
                    ));
                }
                drop(t);
                // The answer was sent while the table was locked: it is there.
                rx.try_recv().unwrap_or_else(|_| Err(self.dead_error()))
            }
            Err(RecvTimeoutError::Disconnected) => Err(self.dead_error()),
        };
        let (rx, state) = answer?;
        Ok(MuxStream {
            id,
            inner: self.inner.clone(),
            rx,
            state,
            buf: Vec::new(),
            pos: 0,
            read_timeout: Mutex::new(None),
            write_timeout: Mutex::new(None),
            write_shut: AtomicBool::new(false),
        })
    }

    /// Why the relay ended, once it did.
    pub fn ended(&self) -> Option<String> {
        lock(&self.inner.table).dead.clone()
    }

    fn dead_error(&self) -> io::Error {
        ended(
            self.ended()
                .as_deref()
                .unwrap_or("the connection was dropped"),
        )
    }
}

/// One connection through the relay, from the host: `Read` and `Write` like a `TcpStream`,
/// with read and write timeouts (an expired timeout is `WouldBlock`, as for a socket).
/// Dropping it closes the connection in the guest; [`MuxStream::shutdown_write`] half-closes
/// it (the server reads the end of the stream).
#[derive(Debug)]
pub struct MuxStream {
    id: u32,
    inner: Arc<Inner>,
    rx: Receiver<Vec<u8>>,
    state: Arc<ConnState>,
    /// The frame being read, and how far.
    buf: Vec<u8>,
    pos: usize,
    read_timeout: Mutex<Option<Duration>>,
    write_timeout: Mutex<Option<Duration>>,
    write_shut: AtomicBool,
}

fn check_timeout(t: Option<Duration>) -> io::Result<Option<Duration>> {
    if t == Some(Duration::ZERO) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "cannot set a 0 duration timeout",
        ));
    }
    Ok(t)
}

impl MuxStream {
    /// Sets the read timeout (`None`: reads block); zero is refused, as for a socket.
    pub fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        *lock(&self.read_timeout) = check_timeout(t)?;
        Ok(())
    }

    /// Sets the write timeout (`None`: writes block while the relay is full).
    pub fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        *lock(&self.write_timeout) = check_timeout(t)?;
        Ok(())
    }

    /// Ends the host's side of the stream: the server reads the end once it has read what
    /// was written before. Reading goes on.
    pub fn shutdown_write(&self) -> io::Result<()> {
        if self.write_shut.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        self.inner
            .outbox
            .push(encode(self.id, EOF, b""), true, None)
    }

    fn reset(&self) -> Option<String> {
        lock(&self.state.reset).clone()
    }
}

impl Read for MuxStream {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if out.is_empty() {
            return Ok(0);
        }
        if self.pos == self.buf.len() {
            let timeout = *lock(&self.read_timeout);
            let next = match timeout {
                None => self.rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
                Some(t) => self.rx.recv_timeout(t),
            };
            match next {
                Ok(data) => {
                    self.buf = data;
                    self.pos = 0;
                }
                Err(RecvTimeoutError::Timeout) => {
                    return Err(io::Error::new(io::ErrorKind::WouldBlock, "read timed out"))
                }
                Err(RecvTimeoutError::Disconnected) => {
                    if self.state.eof.load(Ordering::SeqCst) {
                        return Ok(0);
                    }
                    if let Some(why) = self.reset() {
                        return Err(io::Error::new(io::ErrorKind::ConnectionReset, why));
                    }
                    return Err(ended(
                        lock(&self.inner.table)
                            .dead
                            .as_deref()
                            .unwrap_or("unknown reason"),
                    ));
                }
            }
        }
        let n = out.len().min(self.buf.len() - self.pos);
        out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

impl Write for MuxStream {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if data.is_empty() {
            return Ok(0);
        }
        if self.write_shut.load(Ordering::SeqCst) {
            return Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the connection's writing side was shut down",
            ));
        }
        if let Some(why) = self.reset() {
            return Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                format!("the connection was closed in the guest: {why}"),
            ));
        }
        let n = data.len().min(MAX_DATA);
        let deadline = lock(&self.write_timeout).map(|t| Instant::now() + t);
        self.inner
            .outbox
            .push(encode(self.id, DATA, &data[..n]), false, deadline)?;
        Ok(n)
    }

    /// Data is queued for the port in order; there is nothing to flush to.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for MuxStream {
    fn drop(&mut self) {
        // Forgotten first: what the guest still sends for it is discarded.
        lock(&self.inner.table).conns.remove(&self.id);
        if self.reset().is_none() {
            self.inner.close(self.id);
        }
    }
}

// ---------------------------------------------------------------------------------------
// The guest end.

/// What the guest's end queues for one connection's TCP socket.
enum Chunk {
    Data(Vec<u8>),
    Eof,
}

struct GuestConn {
    tx: SyncSender<Chunk>,
    /// Set once the connection is gone (closed by the host, failed here): the one that sets
    /// it says so to the host, if anyone does.
    closed: Arc<AtomicBool>,
    /// The socket, once dialled.
    tcp: Option<TcpStream>,
}

struct Guest<W> {
    conns: Mutex<HashMap<u32, GuestConn>>,
    port: Mutex<W>,
}

impl<W: Write> Guest<W> {
    /// Writes one whole frame to the port (frames of different connections never interleave).
    fn send(&self, id: u32, kind: u8, payload: &[u8]) -> io::Result<()> {
        let mut w = lock(&self.port);
        w.write_all(&encode(id, kind, payload))?;
        w.flush()
    }

    /// The connection failed here: forget it and tell the host, once.
    fn fail(&self, id: u32, closed: &AtomicBool, tcp: &TcpStream, why: &str) {
        lock(&self.conns).remove(&id);
        let _ = tcp.shutdown(Shutdown::Both);
        if !closed.swap(true, Ordering::SeqCst) {
            let _ = self.send(id, CLOSE, text(why));
        }
    }
}

/// Serves the guest's end of the relay over a byte stream (`reader` and `writer`: the port's
/// two halves) until the host's end closes it: each OPEN is made with `dial` (on a thread of
/// its own, answered OPENED or REFUSED with the error), then relayed both ways by one thread
/// per direction. Returns `Ok` when the stream ends, an error when the host broke the
/// protocol or the stream failed; every connection is closed either way.
///
/// `dial` decides what a port means: glassbox connects to 127.0.0.1 in its sandbox's network
/// namespace, and to nothing else.
pub fn serve<R, W, D>(mut reader: R, writer: W, dial: D) -> crate::Result<()>
where
    R: Read,
    W: Write + Send + 'static,
    D: Fn(u16) -> io::Result<TcpStream> + Send + Sync + 'static,
{
    let guest = Arc::new(Guest {
        conns: Mutex::new(HashMap::new()),
        port: Mutex::new(writer),
    });
    let dial = Arc::new(dial);
    let mut last_id = 0u32;
    let result = loop {
        let f = match read_frame(&mut reader) {
            Ok(Some(f)) => f,
            Ok(None) => break Ok(()),
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                break Err(crate::Error::Relay(format!(
                    "the host broke the protocol: {e}"
                )))
            }
            Err(e) => {
                break Err(crate::Error::Io {
                    what: "cannot read the TCP relay's port".into(),
                    source: e,
                })
            }
        };
        let known = f.id != 0 && f.id <= last_id;
        let unknown = |what: &str| {
            crate::Error::Relay(format!(
                "the host broke the protocol: {what} for connection {}, which was never opened",
                f.id
            ))
        };
        match f.kind {
            OPEN => {
                if f.id <= last_id {
                    break Err(crate::Error::Relay(format!(
                        "the host broke the protocol: OPEN of connection {} after {last_id} (ids increase)",
                        f.id
                    )));
                }
                last_id = f.id;
                let port = u16::from_le_bytes([f.payload[0], f.payload[1]]);
                let (tx, rx) = mpsc::sync_channel(QUEUE_FRAMES);
                let closed = Arc::new(AtomicBool::new(false));
                lock(&guest.conns).insert(
                    f.id,
                    GuestConn {
                        tx,
                        closed: closed.clone(),
                        tcp: None,
                    },
                );
                let (g, d, id) = (guest.clone(), dial.clone(), f.id);
                let spawned = std::thread::Builder::new()
                    .name("glassbox-mux-conn".into())
                    .spawn(move || connection(&g, id, port, &*d, rx, closed));
                if let Err(e) = spawned {
                    lock(&guest.conns).remove(&f.id);
                    let _ = guest.send(f.id, REFUSED, &refused_payload(&e));
                }
            }
            DATA | EOF => {
                let tx = lock(&guest.conns).get(&f.id).map(|c| c.tx.clone());
                match tx {
                    // Blocks while the connection's queue is full: TCP's own backpressure,
                    // then the port's, hold the host back.
                    Some(tx) => {
                        let chunk = if f.kind == DATA {
                            Chunk::Data(f.payload)
                        } else {
                            Chunk::Eof
                        };
                        let _ = tx.send(chunk);
                    }
                    None if known => {}
                    None => break Err(unknown(kind_name(f.kind))),
                }
            }
            CLOSE => match lock(&guest.conns).remove(&f.id) {
                Some(c) => {
                    c.closed.store(true, Ordering::SeqCst);
                    // What is queued is still written (the writer then finds the queue
                    // disconnected and closes the socket); the server's reply is not wanted.
                    if let Some(tcp) = &c.tcp {
                        let _ = tcp.shutdown(Shutdown::Read);
                    }
                }
                None if known => {}
                None => break Err(unknown("CLOSE")),
            },
            _ => {
                break Err(crate::Error::Relay(format!(
                    "the host broke the protocol: it sent {} (connection {}), which only the guest sends",
                    kind_name(f.kind),
                    f.id
                )))
            }
        }
    };
    for (_, c) in lock(&guest.conns).drain() {
        c.closed.store(true, Ordering::SeqCst);
        if let Some(tcp) = &c.tcp {
            let _ = tcp.shutdown(Shutdown::Both);
        }
    }
    result
}

/// One connection in the guest: dial, answer, then relay the host's bytes to the socket on
/// this thread and the socket's bytes to the host on another.
fn connection<W: Write + Send + 'static>(
    guest: &Arc<Guest<W>>,
    id: u32,
    port: u16,
    dial: &(dyn Fn(u16) -> io::Result<TcpStream> + Send + Sync),
    rx: Receiver<Chunk>,
    closed: Arc<AtomicBool>,
) {
    let tcp = match dial(port) {
        Ok(t) => t,
        Err(e) => {
            lock(&guest.conns).remove(&id);
            let _ = guest.send(id, REFUSED, &refused_payload(&e));
            return;
        }
    };
    let reading = match tcp.try_clone() {
        Ok(r) => r,
        Err(e) => {
            lock(&guest.conns).remove(&id);
            let _ = guest.send(id, REFUSED, &refused_payload(&e));
            return;
        }
    };
    {
        let mut conns = lock(&guest.conns);
        match conns.get_mut(&id) {
            Some(c) => c.tcp = tcp.try_clone().ok(),
            // The relay ended while dialling.
            None => return,
        }
    }
    // OPENED before any data: the reader starts after it.
    if guest.send(id, OPENED, b"").is_err() {
        return;
    }
    let (g, c) = (guest.clone(), closed.clone());
    let read_side = std::thread::Builder::new()
        .name("glassbox-mux-tcp-read".into())
        .spawn(move || socket_to_host(&g, id, reading, &c));
    if let Err(e) = read_side {
        guest.fail(id, &closed, &tcp, &format!("cannot start a thread: {e}"));
        return;
    }
    host_to_socket(guest, id, tcp, rx, &closed);
}

fn socket_to_host<W: Write>(guest: &Guest<W>, id: u32, mut tcp: TcpStream, closed: &AtomicBool) {
    let mut buf = vec![0u8; MAX_DATA];
    loop {
        match tcp.read(&mut buf) {
            Ok(0) => {
                if !closed.load(Ordering::SeqCst) {
                    let _ = guest.send(id, EOF, b"");
                }
                return;
            }
            Ok(n) => {
                if closed.load(Ordering::SeqCst) {
                    return;
                }
                if guest.send(id, DATA, &buf[..n]).is_err() {
                    return;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                guest.fail(id, closed, &tcp, &format!("reading from the server: {e}"));
                return;
            }
        }
    }
}

fn host_to_socket<W: Write>(
    guest: &Guest<W>,
    id: u32,
    mut tcp: TcpStream,
    rx: Receiver<Chunk>,
    closed: &AtomicBool,
) {
    // Writes wake up every tick: a server that stopped reading must not keep the connection
    // after the host closed it.
    let _ = tcp.set_write_timeout(Some(TICK));
    for chunk in rx {
        match chunk {
            Chunk::Data(data) => {
                let mut rest = &data[..];
                while !rest.is_empty() {
                    match tcp.write(rest) {
                        Ok(0) => {
                            guest.fail(id, closed, &tcp, "the server's socket accepts no more");
                            return;
                        }
                        Ok(n) => rest = &rest[n..],
                        Err(e)
                            if matches!(
                                e.kind(),
                                io::ErrorKind::WouldBlock
                                    | io::ErrorKind::TimedOut
                                    | io::ErrorKind::Interrupted
                            ) =>
                        {
                            if closed.load(Ordering::SeqCst) {
                                let _ = tcp.shutdown(Shutdown::Both);
                                return;
                            }
                        }
                        Err(e) => {
                            guest.fail(id, closed, &tcp, &format!("writing to the server: {e}"));
                            return;
                        }
                    }
                }
            }
            Chunk::Eof => {
                let _ = tcp.shutdown(Shutdown::Write);
            }
        }
    }
    // The host closed the connection (or the relay ended): the server sees its end.
    let _ = tcp.shutdown(Shutdown::Both);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, SocketAddr, TcpListener};
    use std::os::unix::net::UnixStream;

    /// A host end and a guest end over a socket pair, the guest dialling 127.0.0.1.
    fn pair() -> (Mux, std::thread::JoinHandle<crate::Result<()>>) {
        let (h, g) = UnixStream::pair().unwrap();
        let mux = Mux::start(h.try_clone().unwrap(), h).unwrap();
        let guest = std::thread::spawn(move || {
            serve(g.try_clone().unwrap(), g, |port| {
                TcpStream::connect(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
            })
        });
        (mux, guest)
    }

    const T: Duration = Duration::from_secs(10);

    /// An echo server: each connection's bytes come back until its end, then it closes.
    fn echo() -> u16 {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { return };
                std::thread::spawn(move || {
                    let mut r = s.try_clone().unwrap();
                    let _ = io::copy(&mut r, &mut s);
                });
            }
        });
        port
    }

    fn pattern(n: usize, seed: u8) -> Vec<u8> {
        (0..n)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect()
    }

    #[test]
    fn concurrent_connections_carry_large_transfers_both_ways() {
        let (mux, _guest) = pair();
        let port = echo();
        let workers: Vec<_> = (0..4u8)
            .map(|k| {
                let mux = mux.clone();
                std::thread::spawn(move || {
                    let mut s = mux.connect(port, T).unwrap();
                    s.set_read_timeout(Some(T)).unwrap();
                    s.set_write_timeout(Some(T)).unwrap();
                    let data = pattern(3 * 1024 * 1024 + k as usize, k);
                    let mut w = s.try_clone_for_test();
                    let sent = data.clone();
                    let writer = std::thread::spawn(move || {
                        w.write_all(&sent).unwrap();
                        w.shutdown_write().unwrap();
                    });
                    let mut back = Vec::new();
                    s.read_to_end(&mut back).unwrap();
                    writer.join().unwrap();
                    assert!(back == data, "connection {k}: {} bytes back", back.len());
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
    }

    /// Connects racing each other: the guest takes OPENs only in increasing id order, so
    /// the host must queue them in the order it hands ids out.
    #[test]
    fn racing_connects_all_open() {
        let (mux, _guest) = pair();
        let port = echo();
        let start = Arc::new(std::sync::Barrier::new(32));
        let workers: Vec<_> = (0..32u8)
            .map(|k| {
                let (mux, start) = (mux.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    let mut s = mux.connect(port, T).unwrap();
                    s.set_read_timeout(Some(T)).unwrap();
                    s.write_all(&[k; 3]).unwrap();
                    let mut b = [0u8; 3];
                    s.read_exact(&mut b).unwrap();
                    assert_eq!(b, [k; 3]);
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        assert_eq!(mux.ended(), None);
    }

    #[test]
    fn a_port_nobody_listens_on_is_refused_with_the_reason() {
        let (mux, _guest) = pair();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        drop(l);
        let e = mux.connect(port, T).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused, "{e}");
        assert!(e.to_string().to_lowercase().contains("refused"), "{e}");
        // The relay goes on.
        let mut s = mux.connect(echo(), T).unwrap();
        s.write_all(b"still here").unwrap();
        let mut b = [0u8; 10];
        s.read_exact(&mut b).unwrap();
        assert_eq!(&b, b"still here");
    }

    #[test]
    fn the_end_of_stream_crosses_both_ways() {
        let (mux, _guest) = pair();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            // The host's half-close: read to the end, then answer and close.
            let mut got = Vec::new();
            s.read_to_end(&mut got).unwrap();
            s.write_all(b"got ").unwrap();
            s.write_all(&got).unwrap();
            drop(s);
            // A second connection the server ends first; then it sees the host's drop.
            let (mut s, _) = l.accept().unwrap();
            s.write_all(b"bye").unwrap();
            s.shutdown(Shutdown::Write).unwrap();
            let mut rest = Vec::new();
            s.read_to_end(&mut rest).unwrap();
            rest
        });
        let mut s = mux.connect(port, T).unwrap();
        s.set_read_timeout(Some(T)).unwrap();
        s.write_all(b"request").unwrap();
        s.shutdown_write().unwrap();
        assert!(s.write(b"x").is_err());
        let mut back = String::new();
        s.read_to_string(&mut back).unwrap();
        assert_eq!(back, "got request");
        assert_eq!(s.read(&mut [0u8; 4]).unwrap(), 0, "EOF stays EOF");

        let mut s = mux.connect(port, T).unwrap();
        s.set_read_timeout(Some(T)).unwrap();
        let mut back = String::new();
        s.read_to_string(&mut back).unwrap();
        assert_eq!(back, "bye");
        // Writing after the server's half-close still reaches it; dropping ends its read.
        s.write_all(b"last words").unwrap();
        drop(s);
        assert_eq!(server.join().unwrap(), b"last words");
    }

    #[test]
    fn read_timeouts_are_would_block_and_a_dropped_connection_ends_in_the_guest() {
        let (mux, _guest) = pair();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let mut s = mux.connect(port, T).unwrap();
        let (mut server, _) = l.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        let e = s.read(&mut [0u8; 8]).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        assert!(s.set_read_timeout(Some(Duration::ZERO)).is_err());
        drop(s);
        server.set_read_timeout(Some(T)).unwrap();
        assert_eq!(server.read(&mut [0u8; 8]).unwrap(), 0);
    }

    /// The guest's server floods a connection the host never reads: the host's memory stays
    /// within the connection's queue (the reading thread blocks, then the port, then TCP in
    /// the guest), other frames wait, and dropping the connection lets the relay go on.
    #[test]
    fn a_flood_nobody_reads_is_held_back_not_buffered() {
        let (mux, _guest) = pair();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let sent = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = sent.clone();
        std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let chunk = vec![b'x'; 64 * 1024];
            while s.write_all(&chunk).is_ok() {
                counter.fetch_add(chunk.len(), Ordering::SeqCst);
            }
        });
        let s = mux.connect(port, T).unwrap();
        let settled = || {
            let mut last = usize::MAX;
            loop {
                std::thread::sleep(Duration::from_millis(300));
                let now = sent.load(Ordering::SeqCst);
                if now == last {
                    return now;
                }
                last = now;
            }
        };
        let held = settled();
        // What is held: the host's queue, the socket pair, the guest's pending frame and its
        // TCP buffers on loopback; a few megabytes at most, not the flood.
        assert!(held < 32 << 20, "{held} bytes left the server");
        std::thread::sleep(Duration::from_millis(500));
        assert_eq!(sent.load(Ordering::SeqCst), held, "the server is held back");
        // Dropped: the rest is discarded, and the relay serves new connections.
        drop(s);
        let mut e = mux.connect(echo(), T).unwrap();
        e.set_read_timeout(Some(T)).unwrap();
        e.write_all(b"ping").unwrap();
        let mut b = [0u8; 4];
        e.read_exact(&mut b).unwrap();
        assert_eq!(&b, b"ping");
    }

    /// Raw frames to the host's end: each malformed one ends the relay with its reason, and
    /// every connection fails with it; no panic.
    #[test]
    fn malformed_frames_from_the_guest_end_the_relay_with_the_reason() {
        let cases: [(&[u8], &str); 6] = [
            (&encode(1, 99, b""), "unknown kind 99"),
            (
                &encode(1, DATA, &[]),
                "DATA frame with a payload of 0 bytes",
            ),
            (
                &{
                    let mut f = encode(1, DATA, b"");
                    f[5..9].copy_from_slice(&(MAX_DATA as u32 + 1).to_le_bytes());
                    f
                },
                "payload of 32769 bytes",
            ),
            (&encode(7, DATA, b"x"), "never opened"),
            (&encode(1, OPEN, &[1, 0]), "only the host sends"),
            (&encode(1, OPENED, b"")[..6], "inside a frame"),
        ];
        for (bytes, want) in cases {
            let (h, mut g) = UnixStream::pair().unwrap();
            let mux = Mux::start(h.try_clone().unwrap(), h).unwrap();
            g.write_all(bytes).unwrap();
            if want == "inside a frame" {
                g.shutdown(Shutdown::Write).unwrap();
            }
            let until = Instant::now() + T;
            while mux.ended().is_none() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(10));
            }
            let why = mux.ended().unwrap_or_default();
            assert!(why.contains(want), "{want}: {why}");
            let e = mux.connect(1, T).unwrap_err();
            assert!(e.to_string().contains(want), "{e}");
        }
    }

    #[test]
    fn malformed_frames_from_the_host_end_the_guest_with_the_reason() {
        let cases: [(&[u8], &str); 4] = [
            (
                &encode(1, OPEN, &[1]),
                "OPEN frame with a payload of 1 bytes",
            ),
            (&encode(3, DATA, b"x"), "never opened"),
            (&encode(1, REFUSED, &[0]), "only the guest sends"),
            (
                &[encode(2, OPEN, &[1, 0]), encode(1, OPEN, &[1, 0])].concat(),
                "ids increase",
            ),
        ];
        for (bytes, want) in cases {
            let (mut h, g) = UnixStream::pair().unwrap();
            h.write_all(bytes).unwrap();
            let e = serve(g.try_clone().unwrap(), g, |_| {
                Err(io::Error::from(io::ErrorKind::ConnectionRefused))
            })
            .unwrap_err();
            assert!(e.to_string().contains(want), "{want}: {e}");
        }
        // A clean end of the host's stream is a clean end.
        let (h, g) = UnixStream::pair().unwrap();
        drop(h);
        assert!(serve(g.try_clone().unwrap(), g, |_| Err(
            io::ErrorKind::Other.into()
        ))
        .is_ok());
    }

    #[test]
    fn the_end_of_the_relay_fails_every_connection_with_the_reason() {
        let (h, g) = UnixStream::pair().unwrap();
        let mux = Mux::start(h.try_clone().unwrap(), h).unwrap();
        let port = echo();
        let guest = std::thread::spawn(move || {
            let mut r = g.try_clone().unwrap();
            // Serves one connection's OPEN by hand, then goes away.
            let f = read_frame(&mut r).unwrap().unwrap();
            assert_eq!(
                (f.kind, u16::from_le_bytes([f.payload[0], f.payload[1]])),
                (OPEN, port)
            );
            (&g).write_all(&encode(f.id, OPENED, b"")).unwrap();
            (&g).write_all(&encode(f.id, DATA, b"partial")).unwrap();
        });
        let mut s = mux.connect(port, T).unwrap();
        guest.join().unwrap();
        let mut b = [0u8; 7];
        s.read_exact(&mut b).unwrap();
        assert_eq!(&b, b"partial");
        let e = s.read(&mut b).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::ConnectionAborted, "{e}");
        assert!(e.to_string().contains("the guest's end closed"), "{e}");
        assert!(mux.connect(port, T).is_err());
    }

    impl MuxStream {
        /// A second handle on the same connection for a test that writes and reads at once
        /// (the host's HTTP client never needs one).
        fn try_clone_for_test(&self) -> TestWriter {
            TestWriter {
                id: self.id,
                inner: self.inner.clone(),
            }
        }
    }

    struct TestWriter {
        id: u32,
        inner: Arc<Inner>,
    }

    impl TestWriter {
        fn write_all(&mut self, mut data: &[u8]) -> io::Result<()> {
            while !data.is_empty() {
                let n = data.len().min(MAX_DATA);
                self.inner
                    .outbox
                    .push(encode(self.id, DATA, &data[..n]), false, None)?;
                data = &data[n..];
            }
            Ok(())
        }

        fn shutdown_write(&mut self) -> io::Result<()> {
            self.inner
                .outbox
                .push(encode(self.id, EOF, b""), true, None)
        }
    }
}
