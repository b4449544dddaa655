//! The two threads that touch the server's pipes, and what every transport tells the session.
//!
//! The reader owns the server's stdout: it cuts the byte stream into lines (bounded by the
//! configured line limit) and hands them to the session in batches. The writer owns the server's
//! stdin: it writes the lines the session queues and reports a failed write. Both are detached,
//! so a server that blocks its pipes can never block the session: the session waits on a channel
//! with a deadline, never on the pipes themselves.

use glassbox_model::Direction;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::sync::mpsc::{self, SyncSender};
use std::thread;

/// Size of the reader's buffer.
const READ_BUFFER: usize = 64 * 1024;
/// A batch is sent once it holds this many bytes...
const BATCH_BYTES: usize = 1 << 20;
/// ...or this many lines, or when no more input is buffered.
const BATCH_LINES: usize = 4096;
/// Batches in flight between the reader and the session. With the default line limit of
/// 16 MiB, at most about `(EVENT_QUEUE + 2) * (1 MiB + 16 MiB)` sits in memory at once.
pub(crate) const EVENT_QUEUE: usize = 2;
/// Lines queued for the writer. A server that stops reading its stdin fills this queue; the
/// session then refuses to queue more instead of growing without bound.
const WRITE_QUEUE: usize = 64;

/// One line of the server's stdout, without its newline; over HTTP, one message (a JSON body,
/// an SSE event's data) or one meta line (see [`Meta`]).
#[derive(Debug)]
pub(crate) struct Line {
    /// The bytes, at most the line limit.
    pub(crate) bytes: Vec<u8>,
    /// Whether the line was longer than the limit (the rest was read and discarded).
    pub(crate) truncated: bool,
    /// Set for what is recorded but is not a message: HTTP heads, bodies that carry no
    /// messages, SSE events of other types than `message`.
    pub(crate) meta: Option<Meta>,
}

/// How a meta line is recorded.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Meta {
    /// Who sent it (request heads the transport builds itself are client-to-server).
    pub(crate) dir: Direction,
    /// Whether it belongs to an exchange that carried one of glassbox's requests: always
    /// stored, like answers.
    pub(crate) solicited: bool,
}

/// What the threads tell the session.
#[derive(Debug)]
pub(crate) enum Incoming {
    /// Lines read from stdout, in order.
    Lines(Vec<Line>),
    /// The server closed its stdout.
    Eof,
    /// Reading stdout failed.
    ReadFailed(String),
    /// Writing to stdin failed (the writer has stopped and closed stdin).
    WriteFailed(String),
    /// The HTTP exchange that carried request `id` ended without its answer.
    Exchange {
        /// The request.
        id: u64,
        /// Why, in one line.
        error: String,
        /// Whether the server could not be reached at all.
        fatal: bool,
    },
    /// The legacy SSE stream named the endpoint to POST to (or an unusable one).
    Endpoint(Result<String, String>),
}

/// Starts the reader thread on `stdout`.
pub(crate) fn spawn_reader<R: Read + Send + 'static>(
    stdout: R,
    max_line: usize,
    events: SyncSender<Incoming>,
) -> io::Result<()> {
    thread::Builder::new()
        .name("glassbox-mcp-reader".into())
        .spawn(move || read_lines(stdout, max_line, &events))?;
    Ok(())
}

/// Starts the writer thread on `stdin`; returns the queue to it. Dropping every sender closes
/// the server's stdin once the queued lines are written.
pub(crate) fn spawn_writer<W: Write + Send + 'static>(
    stdin: W,
    events: SyncSender<Incoming>,
) -> io::Result<SyncSender<Vec<u8>>> {
    let (tx, rx) = mpsc::sync_channel::<Vec<u8>>(WRITE_QUEUE);
    thread::Builder::new()
        .name("glassbox-mcp-writer".into())
        .spawn(move || {
            let mut stdin = stdin;
            for line in rx {
                if let Err(e) = stdin.write_all(&line).and_then(|()| stdin.flush()) {
                    // EPIPE from a dead server ends up here: Rust ignores SIGPIPE by default.
                    let _ = events.send(Incoming::WriteFailed(e.to_string()));
                    return;
                }
            }
            // The queue is closed: dropping `stdin` closes the server's stdin.
        })?;
    Ok(tx)
}

fn read_lines<R: Read>(stdout: R, max_line: usize, events: &SyncSender<Incoming>) {
    let max_line = max_line.max(1);
    let mut reader = BufReader::with_capacity(READ_BUFFER, stdout);
    let mut line = Vec::new();
    let mut truncated = false;
    let mut batch = Vec::new();
    let mut batch_bytes = 0usize;
    loop {
        let buf = match reader.fill_buf() {
            Ok(buf) => buf,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                if !batch.is_empty() && events.send(Incoming::Lines(batch)).is_err() {
                    return;
                }
                let _ = events.send(Incoming::ReadFailed(e.to_string()));
                return;
            }
        };
        if buf.is_empty() {
            // End of stream: a last line without a newline is still a line.
            if !line.is_empty() || truncated {
                batch.push(Line {
                    bytes: line,
                    truncated,
                    meta: None,
                });
            }
            if !batch.is_empty() && events.send(Incoming::Lines(batch)).is_err() {
                return;
            }
            let _ = events.send(Incoming::Eof);
            return;
        }
        let newline = buf.iter().position(|&b| b == b'\n');
        let chunk = &buf[..newline.unwrap_or(buf.len())];
        let room = max_line.saturating_sub(line.len());
        if chunk.len() > room {
            line.extend_from_slice(&chunk[..room]);
            truncated = true;
        } else {
            line.extend_from_slice(chunk);
        }
        let used = chunk.len() + usize::from(newline.is_some());
        reader.consume(used);
        if newline.is_some() {
            batch_bytes += line.len();
            batch.push(Line {
                bytes: std::mem::take(&mut line),
                truncated,
                meta: None,
            });
            truncated = false;
            if batch_bytes >= BATCH_BYTES
                || batch.len() >= BATCH_LINES
                || reader.buffer().is_empty()
            {
                batch_bytes = 0;
                if events
                    .send(Incoming::Lines(std::mem::take(&mut batch)))
                    .is_err()
                {
                    // The session is over: stop reading (dropping stdout).
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(input: &[u8], max_line: usize) -> (Vec<(Vec<u8>, bool)>, bool) {
        let (tx, rx) = mpsc::sync_channel(EVENT_QUEUE);
        spawn_reader(io::Cursor::new(input.to_vec()), max_line, tx).unwrap();
        let mut lines = Vec::new();
        let mut eof = false;
        for ev in rx {
            match ev {
                Incoming::Lines(v) => lines.extend(v.into_iter().map(|l| (l.bytes, l.truncated))),
                Incoming::Eof => eof = true,
                other => panic!("unexpected {other:?}"),
            }
        }
        (lines, eof)
    }

    #[test]
    fn splits_lines_and_keeps_a_last_partial_line() {
        let (lines, eof) = collect(b"a\n\nbc\r\nlast", 100);
        assert!(eof);
        let got: Vec<_> = lines.iter().map(|(b, t)| (b.as_slice(), *t)).collect();
        assert_eq!(
            got,
            vec![
                (&b"a"[..], false),
                (&b""[..], false),
                (&b"bc\r"[..], false),
                (&b"last"[..], false)
            ]
        );
    }

    #[test]
    fn cuts_long_lines_and_discards_the_rest() {
        let mut input = vec![b'x'; 200_000];
        input.extend_from_slice(b"\nok\n");
        input.extend(vec![b'y'; 150_000]);
        let (lines, _) = collect(&input, 1000);
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0].0.len(), 1000);
        assert!(lines[0].1);
        assert_eq!(lines[1], (b"ok".to_vec(), false));
        assert_eq!(lines[2].0.len(), 1000);
        assert!(lines[2].1);
    }

    #[test]
    fn a_failed_write_is_reported_not_a_panic() {
        struct Broken;
        impl Write for Broken {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::Error::from(io::ErrorKind::BrokenPipe))
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let (tx, rx) = mpsc::sync_channel(EVENT_QUEUE);
        let queue = spawn_writer(Broken, tx).unwrap();
        queue.send(b"x\n".to_vec()).unwrap();
        match rx.recv().unwrap() {
            Incoming::WriteFailed(e) => assert!(e.contains("roken pipe"), "{e}"),
            other => panic!("unexpected {other:?}"),
        }
    }
}
