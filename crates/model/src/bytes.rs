use base64::Engine as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// Bytes that came from the traced program: a path, an argument, a raw protocol line.
///
/// Serialized as a JSON string when valid UTF-8, otherwise as `{"bytes": "<base64>"}`.
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Bytes(pub Vec<u8>);

impl Bytes {
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

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Escape control characters: these strings come from a hostile program and may reach a
        // terminal.
        for c in String::from_utf8_lossy(&self.0).chars() {
            if c.is_control() {
                write!(f, "{}", c.escape_default())?;
            } else {
                write!(f, "{c}")?;
            }
        }
        Ok(())
    }
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
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Repr {
            Text(String),
            Raw { bytes: String },
        }
        match Repr::deserialize(d)? {
            Repr::Text(t) => Ok(Bytes(t.into_bytes())),
            Repr::Raw { bytes } => base64::engine::general_purpose::STANDARD
                .decode(bytes)
                .map(Bytes)
                .map_err(serde::de::Error::custom),
        }
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
    fn display_escapes_control_characters() {
        assert_eq!(Bytes::from("a\x1b[31mb\n").to_string(), "a\\u{1b}[31mb\\n");
    }
}
