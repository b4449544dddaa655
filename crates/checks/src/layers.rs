//! What an encoder may have wrapped a secret in, unwrapped: the views of a field that the
//! secret search reads besides the field itself.
//!
//! A needle set already holds each secret raw, hex, base64 and base64url, so a secret encoded
//! once is found in the field as it is. What it cannot hold is a secret *compressed* first
//! (zlib, gzip or raw deflate: the bytes depend on the whole stream), or encoded twice. So a
//! field is unwrapped, layer by layer:
//!
//! - **compressed streams**: a zlib stream (a valid CMF/FLG header: method 8, check bits), a
//!   gzip member (`1f 8b 08`), where one starts in the field (at its start, or at one of the
//!   first [`MAX_STREAMS`] places such a header occurs: a multipart part, a binary body
//!   holding a compressed file); and, in a view that was itself decoded from text, a raw
//!   deflate stream at its start (raw deflate has no header to look for; text decoded from
//!   base64 is the one place a client puts one);
//! - **text encodings**: every maximal run of the base64 alphabet (with `-` and `_` of
//!   base64url, and up to two `=` after it) of at least [`MIN_TOKEN`] characters, where it
//!   stands (a JSON string, a form field, a multipart part, a query parameter, a header value
//!   all hold their value as such a run): all hex digits and of even length, decoded as hex;
//!   otherwise as base64 or base64url (by the characters it holds; a run with characters of
//!   both is no encoding). A field percent-encoded as a whole is read percent-decoded by the
//!   caller, whose views are unwrapped too.
//!
//! Each view carries the layers unwrapped to reach it, outermost first, so a finding says
//! "zlib-compressed, base64-encoded, in HTTP body". Views of views are made up to
//! [`MAX_DEPTH`] layers deep.
//!
//! Bounds, whatever the server sends: a stream inflates to at most [`INFLATE_LIMIT`] bytes (a
//! bomb costs that, and says nothing more); a field gives at most [`VIEW_BYTES`] bytes of views
//! in all, and at most [`MAX_VIEWS`] views; a decoded view shorter than [`MIN_VIEW`] bytes is
//! dropped (it cannot hold a needle's worth of a secret). The raw field is always searched
//! whole by the caller; views only add.
//!
//! Hand-written where a crate would not serve: the decoders are `base64` and `flate2`'s; what is
//! here is where to look for their input, which no crate decides.

use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::DecodePaddingMode;
use base64::Engine as _;

/// Layers unwrapped at most to reach a view (`base64 → zlib → hex` is three).
pub(crate) const MAX_DEPTH: usize = 3;
/// Bytes one compressed stream inflates to at most.
pub(crate) const INFLATE_LIMIT: usize = 1 << 20;
/// Bytes of views one field gives at most, all layers together.
pub(crate) const VIEW_BYTES: usize = 4 << 20;
/// Views one field gives at most.
pub(crate) const MAX_VIEWS: usize = 4096;
/// Shortest run of the base64 alphabet decoded (16 characters: 12 bytes, a needle's worth).
pub(crate) const MIN_TOKEN: usize = 16;
/// Shortest decoded view kept, in bytes (the shortest needle: a piece of 12 bytes, or 12
/// characters of an encoded one).
pub(crate) const MIN_VIEW: usize = 12;
/// Places in one view where a compression header is tried, at most.
pub(crate) const MAX_STREAMS: usize = 64;

/// One layer an encoder wrapped a value in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Layer {
    Base64,
    Base64Url,
    Hex,
    Zlib,
    Gzip,
    Deflate,
}

impl Layer {
    /// The layer's words in a finding.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Layer::Base64 => "base64-encoded",
            Layer::Base64Url => "base64url-encoded",
            Layer::Hex => "hex-encoded",
            Layer::Zlib => "zlib-compressed",
            Layer::Gzip => "gzip-compressed",
            Layer::Deflate => "deflate-compressed",
        }
    }
}

/// A field's bytes with some layers unwrapped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct View {
    /// What the layers held.
    pub(crate) bytes: Vec<u8>,
    /// The layers unwrapped to reach it, outermost first (never empty).
    pub(crate) layers: Vec<Layer>,
}

#[cfg(test)]
impl View {
    /// `zlib-compressed, base64-encoded`: the innermost layer first, as a reader says it.
    pub(crate) fn describe(&self) -> String {
        self.layers
            .iter()
            .rev()
            .map(|l| l.name())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// A form of a field the secret search reads: the field itself, percent-decoded, or a view of
/// either.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Form {
    /// Its bytes.
    pub(crate) bytes: Vec<u8>,
    /// Percent-decoded first.
    pub(crate) url: bool,
    /// The layers unwrapped after that, outermost first (empty: none).
    pub(crate) layers: Vec<Layer>,
}

impl Form {
    /// How a needle of `encoding` (`None`: the value as is) was found in this form of `field`:
    /// `base64 in HTTP body`, `URL-encoded in HTTP target`, `hex, zlib-compressed,
    /// base64-encoded, in HTTP body`.
    pub(crate) fn how(&self, encoding: Option<&str>, field: &str) -> String {
        let mut words: Vec<String> = encoding.map(String::from).into_iter().collect();
        words.extend(self.layers.iter().rev().map(|l| l.name().to_string()));
        if self.url {
            words.push("URL-encoded".into());
        }
        match words.len() {
            0 => format!("as is in {field}"),
            1 => format!("{} in {field}", words[0]),
            _ => format!("{}, in {field}", words.join(", ")),
        }
    }
}

/// Every form of `field` searched, the plainest first: the field, its percent-decoded bytes
/// (when it holds a `%XX`), then the views of each.
pub(crate) fn forms(field: &[u8]) -> Vec<Form> {
    let mut out = vec![Form {
        bytes: field.to_vec(),
        url: false,
        layers: Vec::new(),
    }];
    if let Some(d) = percent_decoded(field) {
        out.push(Form {
            bytes: d,
            url: true,
            layers: Vec::new(),
        });
    }
    for i in 0..out.len() {
        let url = out[i].url;
        let vs: Vec<Form> = views(&out[i].bytes)
            .into_iter()
            .map(|v| Form {
                bytes: v.bytes,
                url,
                layers: v.layers,
            })
            .collect();
        out.extend(vs);
    }
    out
}

/// `hay` with every `%XX` decoded, when it has one.
pub(crate) fn percent_decoded(hay: &[u8]) -> Option<Vec<u8>> {
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(hay.len());
    let mut any = false;
    let mut i = 0;
    while i < hay.len() {
        if hay[i] == b'%' && i + 2 < hay.len() {
            if let (Some(h), Some(l)) = (hex(hay[i + 1]), hex(hay[i + 2])) {
                out.push(h << 4 | l);
                any = true;
                i += 3;
                continue;
            }
        }
        out.push(hay[i]);
        i += 1;
    }
    any.then_some(out)
}

/// Every view of `field` (not the field itself), within the bounds of the module doc.
pub(crate) fn views(field: &[u8]) -> Vec<View> {
    let mut out: Vec<View> = Vec::new();
    let mut budget = Budget {
        bytes: VIEW_BYTES,
        views: MAX_VIEWS,
    };
    let mut inflaters = Inflaters::new();
    // Breadth first: the shallow views are kept when a budget runs out.
    let mut level: Vec<(Vec<u8>, Vec<Layer>)> = vec![(field.to_vec(), Vec::new())];
    for _ in 0..MAX_DEPTH {
        let mut next = Vec::new();
        for (bytes, layers) in &level {
            for (inner, layer) in
                unwrap_once(bytes, !layers.is_empty(), &mut budget, &mut inflaters)
            {
                let mut l = layers.clone();
                l.push(layer);
                next.push((inner, l));
            }
        }
        if next.is_empty() {
            break;
        }
        out.extend(next.iter().map(|(b, l)| View {
            bytes: b.clone(),
            layers: l.clone(),
        }));
        level = next;
    }
    out
}

/// What may still be produced for one field.
struct Budget {
    bytes: usize,
    views: usize,
}

impl Budget {
    /// Takes `v` when it is long enough and fits.
    fn take(&mut self, v: Vec<u8>, layer: Layer, to: &mut Vec<(Vec<u8>, Layer)>) {
        if v.len() < MIN_VIEW || self.views == 0 || v.len() > self.bytes {
            return;
        }
        self.views -= 1;
        self.bytes -= v.len();
        to.push((v, layer));
    }
}

/// One layer off `bytes`: the compressed streams that start in it, and its decoded runs.
/// `decoded`: `bytes` came out of a text encoding (a raw deflate stream is tried at its start).
fn unwrap_once(
    bytes: &[u8],
    decoded: bool,
    budget: &mut Budget,
    inflaters: &mut Inflaters,
) -> Vec<(Vec<u8>, Layer)> {
    let mut out = Vec::new();
    let mut tried = 0;
    for at in 0..bytes.len().saturating_sub(2) {
        if tried == MAX_STREAMS || budget.views == 0 {
            break;
        }
        let Some(layer) = stream_header(&bytes[at..]) else {
            continue;
        };
        tried += 1;
        if let Some(v) = inflate(&bytes[at..], layer, inflaters) {
            budget.take(v, layer, &mut out);
        }
    }
    if decoded && out.is_empty() {
        if let Some(v) = inflate(bytes, Layer::Deflate, inflaters) {
            budget.take(v, Layer::Deflate, &mut out);
        }
    }
    for (start, end) in runs(bytes) {
        if budget.views == 0 {
            break;
        }
        if let Some((v, layer)) = decode_run(&bytes[start..end]) {
            budget.take(v, layer, &mut out);
        }
    }
    out
}

/// The compression whose header starts `b`, if one does.
fn stream_header(b: &[u8]) -> Option<Layer> {
    match b {
        [0x1f, 0x8b, 0x08, ..] => Some(Layer::Gzip),
        // zlib (RFC 1950): method 8 (deflate), a window of at most 32 KiB, no preset
        // dictionary, and CMF·256 + FLG a multiple of 31.
        [cmf, flg, ..]
            if cmf & 0x0f == 8
                && cmf >> 4 <= 7
                && flg & 0x20 == 0
                && (u16::from(*cmf) << 8 | u16::from(*flg)) % 31 == 0 =>
        {
            Some(Layer::Zlib)
        }
        _ => None,
    }
}

/// The inflaters of one field's unwrapping, reused from stream to stream: a decoder's state
/// (its tables and 32 KiB window) is made once, not for every place a header is tried (random
/// bytes hold a zlib-like header about every two kilobytes).
/// Each is made when first needed: most fields hold no stream at all.
#[derive(Default)]
pub(crate) struct Inflaters {
    zlib: Option<flate2::Decompress>,
    raw: Option<flate2::Decompress>,
}

impl Inflaters {
    pub(crate) fn new() -> Inflaters {
        Inflaters::default()
    }
}

/// What the stream at the start of `b` inflates to (at most [`INFLATE_LIMIT`] bytes; a
/// truncated or corrupt stream gives what came out before the error), when that is anything.
fn inflate(b: &[u8], layer: Layer, with: &mut Inflaters) -> Option<Vec<u8>> {
    let (d, input) = match layer {
        Layer::Zlib => (&mut with.zlib, b),
        Layer::Deflate => (&mut with.raw, b),
        // One member: its header (RFC 1952) skipped, then raw deflate.
        Layer::Gzip => (&mut with.raw, &b[gzip_header(b)?..]),
        _ => return None,
    };
    let zlib = layer == Layer::Zlib;
    let d = d.get_or_insert_with(|| flate2::Decompress::new(zlib));
    d.reset(zlib);
    let mut out: Vec<u8> = Vec::with_capacity(input.len().clamp(64, INFLATE_LIMIT / 4));
    loop {
        if out.len() == out.capacity() {
            if out.len() >= INFLATE_LIMIT {
                break;
            }
            out.reserve_exact(out.len().min(INFLATE_LIMIT - out.len()));
        }
        let (before_in, before_out) = (d.total_in(), d.total_out());
        let fed = (before_in as usize).min(input.len());
        let status = d.decompress_vec(&input[fed..], &mut out, flate2::FlushDecompress::None);
        let progress = d.total_in() != before_in || d.total_out() != before_out;
        // An error after some output keeps the output: a stream cut short still says what
        // it held up to there.
        match status {
            Ok(flate2::Status::StreamEnd) | Err(_) => break,
            Ok(_) if !progress => break,
            Ok(_) => {}
        }
    }
    (!out.is_empty()).then_some(out)
}

/// The length of the gzip member header at the start of `b` (RFC 1952: ten bytes, then the
/// optional extra field, name, comment and header CRC its flags announce).
fn gzip_header(b: &[u8]) -> Option<usize> {
    let [0x1f, 0x8b, 0x08, flags, ..] = *b else {
        return None;
    };
    let mut at = 10;
    if flags & 0x04 != 0 {
        let len = usize::from(*b.get(at)?) | usize::from(*b.get(at + 1)?) << 8;
        at += 2 + len;
    }
    for flag in [0x08, 0x10] {
        if flags & flag != 0 {
            at += b.get(at..)?.iter().position(|&c| c == 0)? + 1;
        }
    }
    if flags & 0x02 != 0 {
        at += 2;
    }
    (at <= b.len()).then_some(at)
}

/// The base64 alphabet, with base64url's `-` and `_`.
fn alphabet(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'-' | b'_')
}

/// The maximal runs of the alphabet in `b`, at least [`MIN_TOKEN`] long, each with up to two
/// `=` after it, as `(start, end)`.
fn runs(b: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if !alphabet(b[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && alphabet(b[i]) {
            i += 1;
        }
        let mut end = i;
        while end < b.len() && end - i < 2 && b[end] == b'=' {
            end += 1;
        }
        if i - start >= MIN_TOKEN {
            out.push((start, end));
        }
        i = end.max(i);
    }
    out
}

/// Base64 that takes what a client sends: padded or not, trailing bits set or not.
const LENIENT: GeneralPurposeConfig = GeneralPurposeConfig::new()
    .with_decode_padding_mode(DecodePaddingMode::Indifferent)
    .with_decode_allow_trailing_bits(true);
const STANDARD: GeneralPurpose = GeneralPurpose::new(&base64::alphabet::STANDARD, LENIENT);
const URL_SAFE: GeneralPurpose = GeneralPurpose::new(&base64::alphabet::URL_SAFE, LENIENT);

/// A run decoded: hex when it is all hex digits of even length, else base64 or base64url by
/// the characters it holds (`None` when it holds both alphabets' own, or does not decode).
fn decode_run(run: &[u8]) -> Option<(Vec<u8>, Layer)> {
    let body_len = run.iter().take_while(|&&b| b != b'=').count();
    let body = &run[..body_len];
    if body.len().is_multiple_of(2) && body.iter().all(u8::is_ascii_hexdigit) {
        let v = body
            .chunks(2)
            .map(|p| {
                let d = |c: u8| (c as char).to_digit(16).unwrap_or(0) as u8;
                d(p[0]) << 4 | d(p[1])
            })
            .collect();
        return Some((v, Layer::Hex));
    }
    let url = body.iter().any(|b| matches!(b, b'-' | b'_'));
    let std = body.iter().any(|b| matches!(b, b'+' | b'/'));
    let (engine, layer) = match (std, url) {
        (true, true) => return None,
        (_, false) => (&STANDARD, Layer::Base64),
        (false, true) => (&URL_SAFE, Layer::Base64Url),
    };
    // A length of 4k+1 characters is no base64: the last one is cut off (a run may end in
    // a letter that follows the encoded value, such as a quote's neighbour).
    let usable = if body.len() % 4 == 1 {
        &body[..body.len() - 1]
    } else {
        body
    };
    engine.decode(usable).ok().map(|v| (v, layer))
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::engine::general_purpose::{STANDARD as B64, URL_SAFE_NO_PAD as B64URL};
    use flate2::write::{DeflateEncoder, GzEncoder, ZlibEncoder};
    use flate2::Compression;
    use std::io::Write;

    /// A credentials file, as a server would read it and compress it: compressible, so the
    /// compressor codes it (a stored block would carry it verbatim).
    const SECRET: &[u8] = b"[default]\naws_access_key_id = AKIAZ7QK2M4XW9B3RT6P\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYzq9Xk2b7Qp\n[backup]\naws_access_key_id = AKIAZ7QK2M4XW9B3RT6Q\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYzq9Xk2b7Qq\n";

    #[test]
    fn the_compressed_secret_is_not_there_in_clear() {
        for c in [zlib(SECRET), gzip(SECRET), deflate(SECRET)] {
            assert!(c.len() < SECRET.len());
            assert!(!c.windows(12).any(|w| SECRET.windows(12).any(|s| s == w)));
        }
    }

    fn zlib(b: &[u8]) -> Vec<u8> {
        let mut e = ZlibEncoder::new(Vec::new(), Compression::default());
        e.write_all(b).unwrap();
        e.finish().unwrap()
    }

    fn gzip(b: &[u8]) -> Vec<u8> {
        let mut e = GzEncoder::new(Vec::new(), Compression::default());
        e.write_all(b).unwrap();
        e.finish().unwrap()
    }

    fn deflate(b: &[u8]) -> Vec<u8> {
        let mut e = DeflateEncoder::new(Vec::new(), Compression::default());
        e.write_all(b).unwrap();
        e.finish().unwrap()
    }

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    /// The layers of the first view holding the secret, as the finding words them.
    fn found(field: &[u8]) -> Option<String> {
        views(field)
            .into_iter()
            .find(|v| v.bytes.windows(SECRET.len()).any(|w| w == SECRET))
            .map(|v| v.describe())
    }

    #[test]
    fn zlib_inside_base64_inside_a_json_string() {
        let body = format!(
            r#"{{"id":7,"data":"{}","ok":true}}"#,
            B64.encode(zlib(SECRET))
        );
        assert_eq!(
            found(body.as_bytes()).as_deref(),
            Some("zlib-compressed, base64-encoded")
        );
    }

    #[test]
    fn gzip_inside_base64url_inside_a_query_string() {
        let target = format!("/c?v=1&blob={}&t=2", B64URL.encode(gzip(SECRET)));
        assert_eq!(
            found(target.as_bytes()).as_deref(),
            Some("gzip-compressed, base64url-encoded")
        );
    }

    #[test]
    fn raw_deflate_inside_hex_inside_a_header_value() {
        let header = format!("X-Trace: {}", hex(&deflate(SECRET)));
        assert_eq!(
            found(header.as_bytes()).as_deref(),
            Some("deflate-compressed, hex-encoded")
        );
    }

    #[test]
    fn zlib_inside_a_form_field_once_percent_decoded() {
        // The caller reads a percent-encoded field decoded too; its views are these.
        let b64 = B64.encode(zlib(SECRET));
        assert!(b64.contains('+') || b64.contains('/') || b64.ends_with('='));
        let form = format!("user=x&payload={b64}&n=1");
        assert_eq!(
            found(form.as_bytes()).as_deref(),
            Some("zlib-compressed, base64-encoded")
        );
    }

    #[test]
    fn a_gzip_file_in_a_multipart_part_in_binary() {
        let mut body = b"--XyZ\r\nContent-Disposition: form-data; name=\"f\"; filename=\"c.gz\"\r\nContent-Type: application/gzip\r\n\r\n".to_vec();
        body.extend(gzip(SECRET));
        body.extend(b"\r\n--XyZ--\r\n");
        assert_eq!(found(&body).as_deref(), Some("gzip-compressed"));
    }

    #[test]
    fn a_bare_zlib_stream_in_a_binary_body() {
        let mut body = b"\x00\x01head".to_vec();
        body.extend(zlib(SECRET));
        assert_eq!(found(&body).as_deref(), Some("zlib-compressed"));
    }

    #[test]
    fn base64_twice() {
        let twice = B64.encode(B64.encode(SECRET));
        // Once decoded, the secret's base64 is there for the base64 needles; twice, the secret.
        let vs = views(twice.as_bytes());
        assert!(vs.iter().any(|v| v.layers == [Layer::Base64, Layer::Base64]
            && v.bytes.windows(SECRET.len()).any(|w| w == SECRET)));
    }

    #[test]
    fn hex_and_base64_runs_are_told_apart() {
        let h = hex(SECRET);
        assert_eq!(
            decode_run(h.as_bytes()).unwrap(),
            (SECRET.to_vec(), Layer::Hex)
        );
        let b = B64.encode(SECRET);
        assert_eq!(
            decode_run(b.as_bytes()).unwrap(),
            (SECRET.to_vec(), Layer::Base64)
        );
        let u = B64URL.encode([
            0xfb, 0xff, 0xfe, 0x01, 0x02, 0x03, 0xfb, 0xff, 0xfe, 0x01, 0x02, 0x03,
        ]);
        assert!(u.contains('-') || u.contains('_'));
        assert_eq!(decode_run(u.as_bytes()).unwrap().1, Layer::Base64Url);
        assert_eq!(decode_run(b"abc+def-ghijklmnop"), None);
    }

    #[test]
    fn a_bomb_inflates_to_the_limit_and_no_further() {
        let bomb = zlib(&vec![0u8; 64 << 20]);
        let v = inflate(&bomb, Layer::Zlib, &mut Inflaters::new()).unwrap();
        assert_eq!(v.len(), INFLATE_LIMIT);
    }

    #[test]
    fn the_views_of_a_field_are_bounded() {
        // Many streams and runs: at most MAX_STREAMS streams a view, VIEW_BYTES in all.
        let one = zlib(&vec![b'a'; 512 << 10]);
        let mut field = Vec::new();
        for _ in 0..64 {
            field.extend(&one);
            field.push(b' ');
            field.extend(B64.encode(&one).as_bytes());
            field.push(b' ');
        }
        let vs = views(&field);
        let total: usize = vs.iter().map(|v| v.bytes.len()).sum();
        assert!(total <= VIEW_BYTES, "{total}");
        assert!(vs.len() <= MAX_VIEWS);
        assert!(!vs.is_empty());
    }

    #[test]
    fn depth_is_bounded() {
        let mut v = SECRET.to_vec();
        for _ in 0..MAX_DEPTH + 1 {
            v = B64.encode(zlib(&v)).into_bytes();
        }
        // Four rounds of two layers each: beyond MAX_DEPTH layers, not reached.
        assert_eq!(found(&v), None);
        assert!(views(&v).iter().all(|x| x.layers.len() <= MAX_DEPTH));
    }

    #[test]
    fn plain_text_gives_no_view() {
        let text = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"the weather in Paris is mild\"}]}}";
        assert!(views(text).is_empty(), "{:?}", views(text));
    }
}
