//! An incremental parser of Server-Sent Events (the WHATWG `text/event-stream` format), bounded.
//!
//! Bytes are fed as they arrive; complete events come out. Lines end with CRLF, LF or CR (a CR
//! at the end of one chunk followed by an LF at the start of the next is one line end). A line
//! starting with `:` is a comment. `data` lines are joined with `\n`; `event`, `id` and `retry`
//! are kept; other fields are ignored. A blank line dispatches the event; an event whose data is
//! empty (a priming event that only carries an `id`, or a bare `retry`) is not dispatched, but
//! its `id` and `retry` still count. An event cut by the end of the stream is dropped.
//!
//! Memory is bounded: the data of one event is kept up to `max_data` bytes (the rest is
//! discarded and the event marked truncated), any other line up to [`MAX_FIELD`] bytes (longer
//! `event`, `id` or `retry` lines are ignored).

/// Longest non-`data` line kept (an `event`, `id` or `retry` field, or a comment).
pub(crate) const MAX_FIELD: usize = 4096;

/// The UTF-8 byte order mark a stream may start with.
const BOM: &[u8] = b"\xef\xbb\xbf";

/// One dispatched event.
#[derive(Debug, PartialEq)]
pub(crate) struct Event {
    /// The event type (`message` when the stream named none).
    pub(crate) kind: String,
    /// The data lines joined with `\n`, at most `max_data` bytes.
    pub(crate) data: Vec<u8>,
    /// Whether the data was longer than `max_data`.
    pub(crate) truncated: bool,
}

/// The parser's state between chunks.
#[derive(Debug)]
pub(crate) struct Parser {
    max_data: usize,
    /// The current line, up to its bound.
    line: Vec<u8>,
    /// The current line went past its bound.
    line_over: bool,
    /// The previous byte was a CR (an LF right after it ends nothing).
    after_cr: bool,
    /// Whether the first bytes (and a possible BOM) were looked at.
    started: bool,
    /// Bytes of a BOM seen at the start so far (held back while `!started`).
    bom: usize,
    data: Vec<u8>,
    /// At least one `data` field in the current event.
    has_data: bool,
    truncated: bool,
    kind: Vec<u8>,
    /// The last event id seen (the `Last-Event-ID` to resume with).
    pub(crate) last_id: Option<String>,
    /// The last `retry` field, in milliseconds.
    pub(crate) retry_ms: Option<u64>,
}

impl Parser {
    pub(crate) fn new(max_data: usize) -> Self {
        Parser {
            max_data,
            line: Vec::new(),
            line_over: false,
            after_cr: false,
            started: false,
            bom: 0,
            data: Vec::new(),
            has_data: false,
            truncated: false,
            kind: Vec::new(),
            last_id: None,
            retry_ms: None,
        }
    }

    /// Parses `chunk`; appends every event it completes to `out`.
    pub(crate) fn feed(&mut self, mut chunk: &[u8], out: &mut Vec<Event>) {
        // A BOM may arrive split over several chunks: its first bytes are held back until
        // it is whole (skipped) or proves not to be one (parsed).
        while !self.started {
            let Some((&b, rest)) = chunk.split_first() else {
                return;
            };
            if b == BOM[self.bom] {
                self.bom += 1;
                chunk = rest;
                self.started = self.bom == BOM.len();
            } else {
                self.started = true;
                self.parse(&BOM[..self.bom], out);
            }
        }
        self.parse(chunk, out);
    }

    fn parse(&mut self, chunk: &[u8], out: &mut Vec<Event>) {
        for &b in chunk {
            match b {
                b'\n' if self.after_cr => self.after_cr = false,
                b'\n' | b'\r' => {
                    self.after_cr = b == b'\r';
                    self.end_line(out);
                }
                _ => {
                    self.after_cr = false;
                    if self.line.len() < self.line_bound() {
                        self.line.push(b);
                    } else {
                        self.line_over = true;
                    }
                }
            }
        }
    }

    /// How long the current line may grow: a `data` line up to the room left in the event.
    fn line_bound(&self) -> usize {
        if self.line.starts_with(b"data") {
            // "data: " plus the room left, plus one byte to notice the cut.
            self.max_data
                .saturating_sub(self.data.len())
                .saturating_add(7)
        } else {
            MAX_FIELD
        }
    }

    fn end_line(&mut self, out: &mut Vec<Event>) {
        let line = std::mem::take(&mut self.line);
        let over = std::mem::replace(&mut self.line_over, false);
        if line.is_empty() && !over {
            self.dispatch(out);
            return;
        }
        if line.first() == Some(&b':') {
            return;
        }
        let (field, value) = match line.iter().position(|&c| c == b':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (&line[..], &b""[..]),
        };
        match field {
            b"data" => {
                if self.has_data {
                    self.push_data(b"\n");
                }
                self.has_data = true;
                self.push_data(value);
                if over {
                    self.truncated = true;
                }
            }
            _ if over => {}
            b"event" => self.kind = value.to_vec(),
            b"id" if !value.contains(&0) => {
                self.last_id = Some(String::from_utf8_lossy(value).into_owned());
            }
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                self.retry_ms = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok());
            }
            _ => {}
        }
    }

    fn push_data(&mut self, bytes: &[u8]) {
        let room = self.max_data.saturating_sub(self.data.len());
        if bytes.len() > room {
            self.data.extend_from_slice(&bytes[..room]);
            self.truncated = true;
        } else {
            self.data.extend_from_slice(bytes);
        }
    }

    fn dispatch(&mut self, out: &mut Vec<Event>) {
        let data = std::mem::take(&mut self.data);
        let kind = std::mem::take(&mut self.kind);
        let truncated = std::mem::replace(&mut self.truncated, false);
        let has_data = std::mem::replace(&mut self.has_data, false);
        if !has_data || (data.is_empty() && !truncated) {
            return;
        }
        let kind = if kind.is_empty() {
            "message".to_string()
        } else {
            String::from_utf8_lossy(&kind).into_owned()
        };
        out.push(Event {
            kind,
            data,
            truncated,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_in(chunks: &[&[u8]], max: usize) -> (Vec<Event>, Parser) {
        let mut p = Parser::new(max);
        let mut out = Vec::new();
        for c in chunks {
            p.feed(c, &mut out);
        }
        (out, p)
    }

    fn ev(kind: &str, data: &str) -> Event {
        Event {
            kind: kind.into(),
            data: data.as_bytes().to_vec(),
            truncated: false,
        }
    }

    #[test]
    fn events_fields_and_line_ends() {
        let (out, p) = parse_in(
            &[
                b"\xef\xbb\xbf: comment\r\nid: 7\r\ndata: {\"a\":\r",
                b"\ndata:1}\r\n\r\n",
                b"event: endpoint\ndata: /messages?s=1\n\nretry: 1500\rdata:x\r\r",
            ],
            1024,
        );
        assert_eq!(
            out,
            [
                ev("message", "{\"a\":\n1}"),
                ev("endpoint", "/messages?s=1"),
                ev("message", "x")
            ]
        );
        assert_eq!(p.last_id.as_deref(), Some("7"));
        assert_eq!(p.retry_ms, Some(1500));
    }

    /// Found by the `mcp_sse` fuzz target: a BOM split over two reads was parsed as part of
    /// the first field name, and the first event was lost.
    #[test]
    fn a_bom_split_over_chunks_is_skipped_like_a_whole_one() {
        let stream = b"\xef\xbb\xbfdata: x\n\n";
        let (whole, _) = parse_in(&[stream], 1024);
        assert_eq!(whole, [ev("message", "x")]);
        for cut in 1..4 {
            let (a, b) = stream.split_at(cut);
            assert_eq!(parse_in(&[a, b], 1024).0, whole, "cut at {cut}");
        }
        let bytewise: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(parse_in(&bytewise, 1024).0, whole);
        // The start of a BOM that is not one is the stream's first bytes, however it arrives.
        let almost = b"\xef\xbbdata: y\n\ndata: z\n\n";
        let (whole, _) = parse_in(&[almost], 1024);
        assert_eq!(whole, [ev("message", "z")]);
        assert_eq!(parse_in(&[&almost[..1], &almost[1..]], 1024).0, whole);
        assert_eq!(
            parse_in(&[b"", b"data: w\n\n"], 1024).0,
            [ev("message", "w")]
        );
    }

    #[test]
    fn priming_events_and_cut_events_are_not_dispatched() {
        let (out, p) = parse_in(
            &[b"id: prime-1\ndata: \n\nid: 2\n\ndata: never ended"],
            1024,
        );
        assert_eq!(out, []);
        assert_eq!(p.last_id.as_deref(), Some("2"));
    }

    #[test]
    fn oversized_data_is_cut_and_the_stream_goes_on() {
        let big = vec![b'x'; 10_000];
        let mut stream = b"data: ".to_vec();
        stream.extend_from_slice(&big);
        stream.extend_from_slice(b"\ndata: more\n\ndata: next\n\n");
        // Byte by byte: the cut must not depend on chunking.
        let chunks: Vec<&[u8]> = stream.chunks(1).collect();
        let (out, _) = parse_in(&chunks, 100);
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].data, vec![b'x'; 100]);
        assert!(out[0].truncated);
        assert_eq!(out[1], ev("message", "next"));
        // Long non-data lines are ignored, not kept.
        let long_id = format!("id: {}\ndata: y\n\n", "i".repeat(MAX_FIELD * 2));
        let (out, p) = parse_in(&[long_id.as_bytes()], 100);
        assert_eq!(out, [ev("message", "y")]);
        assert_eq!(p.last_id, None);
    }
}
