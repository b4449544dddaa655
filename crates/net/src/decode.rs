//! Request bodies decoded as they arrive: `Content-Encoding` gzip (one member or several),
//! deflate (zlib-wrapped, or raw as some clients send it), br, or none.
//!
//! Bounds, whatever the client sends:
//! - the first [`BODY_LIMIT`] decoded bytes are kept and every decoded byte is counted, up to
//!   [`DECODE_LIMIT`]: beyond, decoding stops and says so (a decompression bomb costs at most
//!   that much work; the raw bytes after it are only counted);
//! - gzip and deflate are decoded while they stream in ([`FEED`] raw bytes at a time, so a
//!   decoder runs at most about a megabyte past the limit before it is stopped), with a few
//!   tens of KiB of state per body;
//! - br is decoded once the body is whole, from its first [`BR_RAW_LIMIT`] raw bytes: a brotli
//!   decoder may need a 16 MiB window, so at most one is alive at a time (the edge is one
//!   thread), never one per open connection;
//! - a body that does not decode is kept raw (its first [`BODY_LIMIT`] bytes) with the reason.

use flate2::write::{DeflateDecoder, MultiGzDecoder, ZlibDecoder};
use glassbox_model::BODY_LIMIT;
use std::io::{Read, Write};

/// Decoded bytes produced per body at most; decoding stops there.
pub(crate) const DECODE_LIMIT: u64 = 8 << 20;
/// Raw bytes of a br body decoded at most.
pub(crate) const BR_RAW_LIMIT: usize = 256 * 1024;
/// Raw bytes handed to a streaming decoder at once (deflate expands at most about 1032:1).
const FEED: usize = 1024;

/// What a `Content-Encoding` header asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Coding {
    Identity,
    Gzip,
    Deflate,
    Brotli,
    /// Something the edge does not decode (its name as sent).
    Other(String),
}

impl Coding {
    /// The coding of a `Content-Encoding` value (`None`: no header).
    pub fn of(header: Option<&[u8]>) -> Coding {
        let Some(value) = header else {
            return Coding::Identity;
        };
        let text = String::from_utf8_lossy(value).to_ascii_lowercase();
        let codings: Vec<&str> = text
            .split(',')
            .map(str::trim)
            .filter(|c| !c.is_empty() && *c != "identity")
            .collect();
        match codings.as_slice() {
            [] => Coding::Identity,
            ["gzip" | "x-gzip"] => Coding::Gzip,
            ["deflate"] => Coding::Deflate,
            ["br"] => Coding::Brotli,
            _ => Coding::Other(text.trim().to_string()),
        }
    }
}

/// Decoded bytes: the first [`BODY_LIMIT`] kept, all counted; `full` once [`DECODE_LIMIT`]
/// is passed (what comes after is dropped).
#[derive(Debug, Default)]
struct Sink {
    kept: Vec<u8>,
    len: u64,
    full: bool,
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if !self.full {
            let room = BODY_LIMIT.saturating_sub(self.kept.len()).min(buf.len());
            self.kept.extend_from_slice(&buf[..room]);
            let left = DECODE_LIMIT - self.len;
            self.len += (buf.len() as u64).min(left);
            self.full = buf.len() as u64 > left;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The decoder at work.
enum Decoder {
    /// No coding: the body is its raw bytes.
    Identity,
    /// Deflate before its first two bytes say whether it is zlib-wrapped.
    Deflate,
    Gzip(Box<MultiGzDecoder<Sink>>),
    Zlib(Box<ZlibDecoder<Sink>>),
    RawDeflate(Box<DeflateDecoder<Sink>>),
    /// br: decoded from `raw` at the end.
    Brotli,
    /// Decoding stopped at [`DECODE_LIMIT`].
    Stopped(Sink),
    /// The stream did not decode.
    Failed(String),
    /// A coding the edge does not decode.
    Other(String),
}

/// One request body being read.
pub(crate) struct Body {
    decoder: Decoder,
    /// The first raw bytes: [`BODY_LIMIT`] of them ([`BR_RAW_LIMIT`] for br).
    raw: Vec<u8>,
    raw_len: u64,
}

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Body")
            .field("raw_len", &self.raw_len)
            .finish_non_exhaustive()
    }
}

/// A body as the exchange records it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Decoded {
    /// The first [`BODY_LIMIT`] bytes: decoded, or raw when decoding failed.
    pub body: Vec<u8>,
    /// Its length (decoded; raw when decoding failed).
    pub len: u64,
    /// Why it is not all decoded, if it is not.
    pub error: Option<String>,
}

impl Body {
    /// A body sent with `coding`.
    pub fn new(coding: Coding) -> Body {
        let decoder = match coding {
            Coding::Identity => Decoder::Identity,
            Coding::Gzip => Decoder::Gzip(Box::new(MultiGzDecoder::new(Sink::default()))),
            Coding::Deflate => Decoder::Deflate,
            Coding::Brotli => Decoder::Brotli,
            Coding::Other(name) => Decoder::Other(name),
        };
        Body {
            decoder,
            raw: Vec::new(),
            raw_len: 0,
        }
    }

    /// The next raw bytes of the body.
    pub fn feed(&mut self, mut data: &[u8]) {
        let keep = match self.decoder {
            Decoder::Brotli => BR_RAW_LIMIT,
            _ => BODY_LIMIT,
        };
        let room = keep.saturating_sub(self.raw.len()).min(data.len());
        self.raw.extend_from_slice(&data[..room]);
        let before = self.raw_len;
        self.raw_len += data.len() as u64;
        if let Decoder::Deflate = self.decoder {
            // The first two bytes, possibly from the stream's first two writes.
            let Some(first) = self.raw.get(..2) else {
                return;
            };
            let zlib = first[0] & 0x0f == 8 && u16::from_be_bytes([first[0], first[1]]) % 31 == 0;
            self.decoder = if zlib {
                Decoder::Zlib(Box::new(ZlibDecoder::new(Sink::default())))
            } else {
                Decoder::RawDeflate(Box::new(DeflateDecoder::new(Sink::default())))
            };
            // What came before this write is in `raw` (two bytes at most: fewer than FEED).
            let earlier = &self.raw[..before as usize];
            let earlier = earlier.to_vec();
            self.write(&earlier);
        }
        while !data.is_empty() {
            let (now, rest) = data.split_at(data.len().min(FEED));
            if !self.write(now) {
                return;
            }
            data = rest;
        }
    }

    /// Raw bytes into a streaming decoder; `false` once it takes no more.
    fn write(&mut self, data: &[u8]) -> bool {
        let (written, sink, coding) = match &mut self.decoder {
            Decoder::Gzip(d) => (d.write_all(data), d.get_mut(), "gzip"),
            Decoder::Zlib(d) => (d.write_all(data), d.get_mut(), "deflate"),
            Decoder::RawDeflate(d) => (d.write_all(data), d.get_mut(), "deflate"),
            _ => return false,
        };
        if sink.full {
            self.decoder = Decoder::Stopped(std::mem::take(sink));
            return false;
        }
        if let Err(e) = written {
            self.decoder = Decoder::Failed(format!("({coding}): {e}"));
            return false;
        }
        true
    }

    /// The body once all of it arrived.
    pub fn finish(self) -> Decoded {
        let raw_len = self.raw_len;
        let raw = |mut raw: Vec<u8>, error: Option<String>| {
            raw.truncate(BODY_LIMIT);
            Decoded {
                body: raw,
                len: raw_len,
                error,
            }
        };
        let decoded = |sink: Sink, error: Option<String>| Decoded {
            body: sink.kept,
            len: sink.len,
            error,
        };
        if raw_len == 0 {
            return raw(Vec::new(), None);
        }
        let stopped = || {
            Some(format!(
                "decoded body longer than {} MiB: decoding stopped there ({raw_len} bytes \
                 received as sent); the length is a lower bound",
                DECODE_LIMIT >> 20
            ))
        };
        let flate = |r: std::io::Result<Sink>, raw_bytes: Vec<u8>, coding: &str| match r {
            Ok(sink) => decoded(sink, None),
            Err(e) => raw(
                raw_bytes,
                Some(format!("body did not decode ({coding}): {e}")),
            ),
        };
        match self.decoder {
            Decoder::Identity => raw(self.raw, None),
            Decoder::Other(name) => raw(
                self.raw,
                Some(format!(
                    "Content-Encoding {name} is not decoded by the edge"
                )),
            ),
            Decoder::Failed(why) => raw(self.raw, Some(format!("body did not decode {why}"))),
            Decoder::Stopped(sink) => decoded(sink, stopped()),
            Decoder::Deflate => raw(
                self.raw,
                Some("body did not decode: deflate stream too short".into()),
            ),
            Decoder::Gzip(d) => flate(d.finish(), self.raw, "gzip"),
            Decoder::Zlib(d) => flate(d.finish(), self.raw, "deflate"),
            Decoder::RawDeflate(d) => flate(d.finish(), self.raw, "deflate"),
            Decoder::Brotli => {
                let mut sink = Sink::default();
                let mut reader = brotli_decompressor::Decompressor::new(&self.raw[..], 16 * 1024);
                let mut buf = vec![0u8; 16 * 1024];
                let failed = loop {
                    match reader.read(&mut buf) {
                        Ok(0) => break None,
                        Ok(n) => {
                            let _ = sink.write(&buf[..n]);
                            if sink.full {
                                break None;
                            }
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(e) => break Some(e.to_string()),
                    }
                };
                let cut = raw_len > BR_RAW_LIMIT as u64;
                match failed {
                    _ if sink.full => decoded(sink, stopped()),
                    // A stream cut at the raw limit ends early: that is the cut, not an error.
                    _ if cut => decoded(
                        sink,
                        Some(format!(
                            "br body longer than {} KiB raw: only its first {} KiB decoded \
                             ({raw_len} bytes received as sent); the length is a lower bound",
                            BR_RAW_LIMIT >> 10,
                            BR_RAW_LIMIT >> 10
                        )),
                    ),
                    Some(why) => raw(self.raw, Some(format!("body did not decode (br): {why}"))),
                    None => decoded(sink, None),
                }
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use flate2::write::{DeflateEncoder, GzEncoder, ZlibEncoder};
    use flate2::Compression;

    pub(crate) fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = GzEncoder::new(Vec::new(), Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    /// `data` as a brotli stream of uncompressed meta-blocks (RFC 7932 §9.2), which any
    /// decoder reads: a 16-bit window, then per block ISLAST=0, MNIBBLES=4, MLEN-1,
    /// ISUNCOMPRESSED=1 and the bytes, then an empty last block.
    pub(crate) fn brotli_stored(data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        for block in data.chunks(65_536) {
            // Bits, least significant first: WBITS '0' (first block only), ISLAST 0,
            // MNIBBLES 00, 16 bits of MLEN-1, ISUNCOMPRESSED 1, then padding to a byte.
            let first = out.is_empty();
            let mut bits: u32 = 0;
            let mut n: usize = 0;
            if first {
                n += 1; // WBITS = 16: a single 0 bit.
            }
            n += 3; // ISLAST 0, MNIBBLES 00 (four nibbles).
            bits |= ((block.len() as u32) - 1) << n;
            n += 16;
            bits |= 1 << n;
            n += 1;
            let bytes = n.div_ceil(8);
            out.extend_from_slice(&bits.to_le_bytes()[..bytes]);
            out.extend_from_slice(block);
        }
        if out.is_empty() {
            // WBITS 0, ISLAST 1, ISLASTEMPTY 1.
            out.push(0b110);
        } else {
            out.push(0b11);
        }
        out
    }

    fn decode(coding: Coding, raw: &[u8], step: usize) -> Decoded {
        let mut b = Body::new(coding);
        for chunk in raw.chunks(step.max(1)) {
            b.feed(chunk);
        }
        b.finish()
    }

    #[test]
    fn codings_are_read_from_the_header() {
        assert_eq!(Coding::of(None), Coding::Identity);
        assert_eq!(Coding::of(Some(b"GZIP")), Coding::Gzip);
        assert_eq!(Coding::of(Some(b"identity, gzip")), Coding::Gzip);
        assert_eq!(Coding::of(Some(b" br ")), Coding::Brotli);
        assert_eq!(Coding::of(Some(b"deflate")), Coding::Deflate);
        assert_eq!(Coding::of(Some(b"zstd")), Coding::Other("zstd".into()));
        assert_eq!(
            Coding::of(Some(b"gzip, br")),
            Coding::Other("gzip, br".into())
        );
    }

    #[test]
    fn every_coding_decodes_in_any_pieces() {
        let text: Vec<u8> = (0..50_000u32).flat_map(|i| i.to_le_bytes()).collect();
        let mut z = ZlibEncoder::new(Vec::new(), Compression::default());
        z.write_all(&text).unwrap();
        let zlib = z.finish().unwrap();
        let mut d = DeflateEncoder::new(Vec::new(), Compression::default());
        d.write_all(&text).unwrap();
        let deflate = d.finish().unwrap();
        let mut two = gzip(&text[..1000]);
        two.extend_from_slice(&gzip(&text[1000..]));
        for (coding, raw) in [
            (Coding::Gzip, gzip(&text)),
            (Coding::Gzip, two),
            (Coding::Deflate, zlib),
            (Coding::Deflate, deflate),
            (Coding::Brotli, brotli_stored(&text)),
            (Coding::Identity, text.clone()),
        ] {
            for step in [1, 2, 7, 4096, raw.len()] {
                let d = decode(coding.clone(), &raw, step);
                assert_eq!(d.error, None, "{coding:?} {step}");
                assert_eq!(d.len, text.len() as u64);
                assert_eq!(d.body, &text[..BODY_LIMIT]);
            }
        }
        assert_eq!(decode(Coding::Brotli, &brotli_stored(b""), 1).len, 0);
        assert_eq!(
            decode(Coding::Gzip, b"", 1),
            decode(Coding::Identity, b"", 1)
        );
    }

    #[test]
    fn what_does_not_decode_is_kept_raw_with_the_reason() {
        let bad = b"this is not gzip at all".to_vec();
        let d = decode(Coding::Gzip, &bad, 5);
        assert_eq!((d.body.as_slice(), d.len), (&bad[..], bad.len() as u64));
        assert!(d.error.unwrap().contains("did not decode"));
        let truncated = gzip(b"hello hello hello");
        let d = decode(Coding::Gzip, &truncated[..truncated.len() - 4], 3);
        assert!(d.error.is_some(), "{d:?}");
        let d = decode(Coding::Brotli, b"\xff\xff\xff\xff not brotli", 3);
        assert!(d.error.unwrap().contains("br"));
        let d = decode(Coding::Other("zstd".into()), b"(\xb5/\xfd", 1);
        assert!(d.error.unwrap().contains("zstd"));
        assert_eq!(d.body, b"(\xb5/\xfd");
    }

    #[test]
    fn a_bomb_stops_at_the_limit() {
        // 64 MiB of zeros, gzip, fed as it would stream in.
        let mut e = GzEncoder::new(Vec::new(), Compression::fast());
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..64 {
            e.write_all(&zeros).unwrap();
        }
        let bomb = e.finish().unwrap();
        let d = decode(Coding::Gzip, &bomb, 4096);
        assert_eq!(d.len, DECODE_LIMIT);
        assert_eq!(d.body.len(), BODY_LIMIT);
        assert!(d.error.unwrap().contains("stopped"));
        // br: zeros in stored blocks beyond the raw limit.
        let d = decode(Coding::Brotli, &brotli_stored(&vec![0; 300_000]), 4096);
        assert!(d.error.unwrap().contains("first 256 KiB"), "");
        assert!(d.len < 300_000 && d.len > 200_000);
    }
}
