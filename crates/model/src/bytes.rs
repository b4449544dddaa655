use base64::Engine as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// Bytes that came from the traced program: a path, an argument, a raw protocol line.
///
/// Serialized as a JSON string when valid UTF-8, otherwise as `{"bytes": "<base64>"}`.
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Bytes(pub Vec<u8>);

impl Bytes {
    /// Whether it holds no byte.
    pub fn is_empty(&self) -> bool {
        self.as_slice().is_empty()
    }

    /// The raw bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.0
    }

    /// A lossy text form for display and matching (invalid sequences become U+FFFD).
    pub fn to_lossy(&self) -> String {
        String::from_utf8_lossy(&self.0).into_owned()
    }

    /// The text, when the bytes are valid UTF-8.
    pub fn as_str(&self) -> Option<&str> {
        std::str::from_utf8(&self.0).ok()
    }
}

impl fmt::Debug for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(&self.0))
    }
}

/// Characters that are not control characters but reorder or hide text on a terminal
/// (bidirectional overrides and isolates, zero-width marks).
fn is_invisible_format(c: char) -> bool {
    matches!(
        c,
        '\u{061c}'
            | '\u{200b}'..='\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{2069}'
            | '\u{feff}'
            | '\u{e0000}'..='\u{e007f}'
    )
}

impl fmt::Display for Bytes {
    /// Printable: invalid UTF-8 replaced, and control characters and invisible format
    /// characters escaped (these strings come from a hostile program and reach terminals).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in String::from_utf8_lossy(&self.0).chars() {
            if c.is_control() {
                write!(f, "{}", c.escape_default())?;
            } else if is_invisible_format(c) {
                write!(f, "{}", c.escape_unicode())?;
            } else {
                write!(f, "{c}")?;
            }
        }
        Ok(())
    }
}

/// A string from the server (a tool name, a reason) made printable as [`Bytes`] displays.
pub fn printable(s: &str) -> String {
    Bytes::from(s).to_string()
}

/// `s` cut to at most `max` bytes, at a character boundary (for bounding what is read; see
/// [`truncate`] for what is shown).
pub fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// `s` cut to at most `max` characters, with `…` when cut.
pub fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// An argv as one printable line, arguments that are empty or hold spaces or quotes quoted,
/// cut at `max` characters.
pub fn argv_line(argv: &[Bytes], max: usize) -> String {
    let parts: Vec<String> = argv
        .iter()
        .map(|a| {
            let s = a.to_string();
            if s.is_empty() || s.contains([' ', '\'', '"']) {
                format!("'{}'", s.replace('\'', "\\'"))
            } else {
                s
            }
        })
        .collect();
    truncate(&parts.join(" "), max)
}

impl From<&str> for Bytes {
    fn from(s: &str) -> Self {
        Bytes(s.as_bytes().to_vec())
    }
}

impl From<String> for Bytes {
    fn from(s: String) -> Self {
        Bytes(s.into_bytes())
    }
}

impl From<Vec<u8>> for Bytes {
    fn from(v: Vec<u8>) -> Self {
        Bytes(v)
    }
}

impl From<&[u8]> for Bytes {
    fn from(v: &[u8]) -> Self {
        Bytes(v.to_vec())
    }
}

impl Serialize for Bytes {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match std::str::from_utf8(&self.0) {
            Ok(text) => s.serialize_str(text),
            Err(_) => {
                use serde::ser::SerializeMap;
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_entry(
                    "bytes",
                    &base64::engine::general_purpose::STANDARD.encode(&self.0),
                )?;
                m.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for Bytes {
    /// A string, or `{"bytes": "<base64>"}`. A visitor rather than an untagged enum: serde
    /// buffers every value of an untagged enum before trying its variants, which measured as
    /// the largest cost of reading an event stream.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Bytes;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(r#"a string or {"bytes": "<base64>"}"#)
            }

            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Bytes, E> {
                Ok(Bytes(v.as_bytes().to_vec()))
            }

            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Bytes, E> {
                Ok(Bytes(v.into_bytes()))
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<Bytes, A::Error> {
                let mut out = None;
                while let Some(k) = m.next_key::<std::borrow::Cow<'de, str>>()? {
                    if k == "bytes" {
                        let text: std::borrow::Cow<'de, str> = m.next_value()?;
                        out = Some(
                            base64::engine::general_purpose::STANDARD
                                .decode(text.as_bytes())
                                .map_err(serde::de::Error::custom)?,
                        );
                    } else {
                        m.next_value::<serde::de::IgnoredAny>()?;
                    }
                }
                out.map(Bytes)
                    .ok_or_else(|| serde::de::Error::missing_field("bytes"))
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_is_a_string_and_other_bytes_are_base64() {
        assert_eq!(
            serde_json::to_string(&Bytes::from("a/b")).unwrap(),
            "\"a/b\""
        );
        let raw = Bytes(vec![0xff, b'x']);
        let json = serde_json::to_string(&raw).unwrap();
        assert_eq!(json, r#"{"bytes":"/3g="}"#);
        assert_eq!(serde_json::from_str::<Bytes>(&json).unwrap(), raw);
        assert_eq!(
            serde_json::from_str::<Bytes>("\"a/b\"").unwrap(),
            Bytes::from("a/b")
        );
    }

    #[test]
    fn display_escapes_control_and_invisible_characters() {
        assert_eq!(Bytes::from("a\x1b[31mb\n").to_string(), "a\\u{1b}[31mb\\n");
        assert_eq!(printable("x\u{202e}y"), "x\\u{202e}y");
        assert_eq!(truncate("abcdef", 4), "abc…");
        assert_eq!(truncate("abc", 4), "abc");
    }
}
