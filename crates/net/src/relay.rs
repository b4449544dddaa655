//! The relay: the one way a capture run's traffic can reach a real host.
//!
//! The install phase needs the package registry. A TCP connection from the sandbox to a
//! synthetic address the edge's DNS handed out for one of [`Relay`]'s names, on one of its
//! ports, is spliced to a connection glassbox itself opens to that name (resolved by the host),
//! byte for byte: TLS goes through untouched, so the installer checks the registry's own
//! certificate. Every other destination stays captured as in any capture run. The relayed
//! flow is recorded like any other (its first bytes, SNI, byte counts) and noted as relayed.
//!
//! Each relayed connection has two threads on the host side (blocking sockets, no async
//! runtime): one connects and writes what the sandbox sends, one reads what the host answers
//! into a bounded channel, which the edge's loop drains into the smoltcp socket as its send
//! window allows (back-pressure up to the registry).

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender, TryRecvError};
use std::sync::Arc;

/// Opens the host-side connection to `(name, port)`.
pub type Connect = dyn Fn(&str, u16) -> std::io::Result<TcpStream> + Send + Sync;

/// The destinations the edge relays to the real network, and how it connects to them.
#[derive(Clone)]
pub struct Relay {
    /// `(name, port)` pairs; a name matches exactly, case-insensitively.
    pub hosts: Vec<(String, u16)>,
    /// How a connection to the real host is made (default: [`Relay::direct`]).
    pub connect: Arc<Connect>,
}

impl std::fmt::Debug for Relay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relay")
            .field("hosts", &self.hosts)
            .finish_non_exhaustive()
    }
}

/// How long the host side may take to connect.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);
/// Bytes read from the host at once.
const CHUNK: usize = 16 * 1024;
/// Chunks from the host queued before its reader waits for the sandbox to take them.
const QUEUED_CHUNKS: usize = 64;

impl Relay {
    /// Relays `hosts` with [`Relay::direct`] connections.
    pub fn to(hosts: Vec<(String, u16)>) -> Relay {
        Relay {
            hosts,
            connect: Arc::new(Relay::direct),
        }
    }

    /// A plain TCP connection to `name:port`, resolved by the host, trying each address.
    pub fn direct(name: &str, port: u16) -> std::io::Result<TcpStream> {
        use std::net::ToSocketAddrs;
        let mut last = None;
        for addr in (name, port).to_socket_addrs()? {
            match TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
                Ok(s) => return Ok(s),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "no address")))
    }

    /// The `(name, port)` to relay a connection to `name` (as the edge's DNS handed it out)
    /// on `port`, if it is one of ours.
    pub(crate) fn target(&self, name: Option<&[u8]>, port: u16) -> Option<(String, u16)> {
        let name = std::str::from_utf8(name?).ok()?;
        let name = name.trim_end_matches('.');
        self.hosts
            .iter()
            .find(|(h, p)| *p == port && h.eq_ignore_ascii_case(name))
            .map(|(h, p)| (h.clone(), *p))
    }
}

/// What the host side sends the edge.
enum FromHost {
    Data(Vec<u8>),
    /// The host closed its end.
    End,
    /// Connecting or reading failed.
    Failed(String),
}

/// The edge's end of one relayed connection.
pub(crate) struct Link {
    /// What the sandbox sent, towards the host (`None` once the sandbox closed its end).
    to_host: Option<Sender<Vec<u8>>>,
    from_host: Receiver<FromHost>,
    /// Bytes from the host the sandbox's socket has not taken yet.
    pending: Vec<u8>,
    /// The host's end is closed (or failed) and everything it sent was handed over.
    pub host_done: bool,
    /// Why the host side failed, once, for the flow's note.
    pub failure: Option<String>,
    /// `name:port`, for the note.
    pub to: String,
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link")
            .field("to", &self.to)
            .field("pending", &self.pending.len())
            .field("host_done", &self.host_done)
            .finish_non_exhaustive()
    }
}

impl Link {
    /// Starts connecting to `(name, port)`; what the sandbox sends meanwhile is queued.
    pub(crate) fn open(relay: &Relay, name: String, port: u16) -> Link {
        let (to_host, outbound) = mpsc::channel::<Vec<u8>>();
        let (inbound, from_host) = mpsc::sync_channel::<FromHost>(QUEUED_CHUNKS);
        let connect = relay.connect.clone();
        let to = format!("{name}:{port}");
        let spawned = std::thread::Builder::new()
            .name("edge-relay".into())
            .spawn(move || writer(&*connect, &name, port, outbound, inbound));
        let mut link = Link {
            to_host: Some(to_host),
            from_host,
            pending: Vec::new(),
            host_done: false,
            failure: None,
            to,
        };
        if let Err(e) = spawned {
            link.fail(format!("cannot start a relay thread: {e}"));
        }
        link
    }

    fn fail(&mut self, why: String) {
        self.failure.get_or_insert(why);
        self.host_done = true;
        self.to_host = None;
    }

    /// Bytes from the sandbox, towards the host.
    pub(crate) fn send(&mut self, data: &[u8]) {
        if let Some(tx) = &self.to_host {
            if tx.send(data.to_vec()).is_err() {
                self.to_host = None;
            }
        }
    }

    /// The sandbox closed its end: the host's write side is shut down once the queue is
    /// written.
    pub(crate) fn sandbox_closed(&mut self) {
        self.to_host = None;
    }

    /// Hands the host's bytes to `take` (which returns how many it took) as long as it takes
    /// them; returns whether anything was taken.
    pub(crate) fn deliver(&mut self, mut take: impl FnMut(&[u8]) -> usize) -> bool {
        let mut any = false;
        loop {
            if self.pending.is_empty() {
                match self.from_host.try_recv() {
                    Ok(FromHost::Data(d)) => self.pending = d,
                    Ok(FromHost::End) | Err(TryRecvError::Disconnected) => {
                        self.host_done = true;
                        return any;
                    }
                    Ok(FromHost::Failed(why)) => {
                        self.fail(why);
                        return any;
                    }
                    Err(TryRecvError::Empty) => return any,
                }
            }
            let n = take(&self.pending);
            if n == 0 {
                return any;
            }
            any = true;
            self.pending.drain(..n);
        }
    }

    /// Whether the host side may still have something to deliver.
    pub(crate) fn active(&self) -> bool {
        !self.host_done || !self.pending.is_empty()
    }
}

/// The host side's first thread: connects, starts the reader, writes the sandbox's bytes.
fn writer(
    connect: &Connect,
    name: &str,
    port: u16,
    outbound: Receiver<Vec<u8>>,
    inbound: SyncSender<FromHost>,
) {
    let mut stream = match connect(name, port) {
        Ok(s) => s,
        Err(e) => {
            let _ = inbound.send(FromHost::Failed(format!(
                "relay could not connect to {name}:{port}: {e}"
            )));
            return;
        }
    };
    let reading = stream.try_clone().map(|mut r| {
        std::thread::Builder::new()
            .name("edge-relay-read".into())
            .spawn(move || {
                let mut buf = vec![0u8; CHUNK];
                loop {
                    match r.read(&mut buf) {
                        Ok(0) => {
                            let _ = inbound.send(FromHost::End);
                            return;
                        }
                        Ok(n) => {
                            if inbound.send(FromHost::Data(buf[..n].to_vec())).is_err() {
                                return;
                            }
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(e) => {
                            let _ = inbound.send(FromHost::Failed(format!(
                                "relay read from {name_port} failed: {e}",
                                name_port =
                                    r.peer_addr().map(|a| a.to_string()).unwrap_or_default()
                            )));
                            return;
                        }
                    }
                }
            })
    });
    if !matches!(reading, Ok(Ok(_))) {
        let _ = stream.shutdown(Shutdown::Both);
        return;
    }
    // Until the sandbox closes its end (the sender is dropped).
    for data in outbound {
        if stream.write_all(&data).is_err() {
            break;
        }
    }
    let _ = stream.shutdown(Shutdown::Write);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn names_match_exactly_on_their_port() {
        let r = Relay::to(vec![("registry.npmjs.org".into(), 443)]);
        assert!(r.target(Some(b"registry.npmjs.org"), 443).is_some());
        assert!(r.target(Some(b"Registry.NPMJS.org."), 443).is_some());
        assert!(r.target(Some(b"registry.npmjs.org"), 80).is_none());
        assert!(r.target(Some(b"evil.registry.npmjs.org"), 443).is_none());
        assert!(r
            .target(Some(b"registry.npmjs.org.evil.example"), 443)
            .is_none());
        assert!(r.target(None, 443).is_none());
    }

    #[test]
    fn bytes_go_both_ways_and_the_end_is_seen() {
        let server = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = server.local_addr().unwrap().port();
        let echo = std::thread::spawn(move || {
            let (mut s, _) = server.accept().unwrap();
            let mut got = Vec::new();
            s.read_to_end(&mut got).unwrap();
            s.write_all(&got).unwrap();
            s.write_all(b"!").unwrap();
        });
        let relay = Relay {
            hosts: vec![("registry.test".into(), 443)],
            connect: Arc::new(move |_, _| TcpStream::connect(("127.0.0.1", port))),
        };
        let mut link = Link::open(&relay, "registry.test".into(), 443);
        link.send(b"hello ");
        link.send(b"registry");
        link.sandbox_closed();
        let mut out = Vec::new();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while link.active() && std::time::Instant::now() < deadline {
            link.deliver(|d| {
                // A small window: the rest stays pending.
                let n = d.len().min(3);
                out.extend_from_slice(&d[..n]);
                n
            });
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        echo.join().unwrap();
        assert_eq!(out, b"hello registry!");
        assert!(link.host_done && link.failure.is_none());
    }

    #[test]
    fn a_failed_connect_is_reported() {
        let relay = Relay {
            hosts: vec![],
            connect: Arc::new(|_, _| {
                Err(std::io::Error::new(
                    std::io::ErrorKind::ConnectionRefused,
                    "refused",
                ))
            }),
        };
        let mut link = Link::open(&relay, "registry.test".into(), 443);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while link.active() && std::time::Instant::now() < deadline {
            link.deliver(|d| d.len());
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let why = link.failure.expect("failure");
        assert!(
            why.contains("registry.test:443") && why.contains("refused"),
            "{why}"
        );
    }
}
