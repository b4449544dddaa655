//! The MCP transcript as JSON: a small reader ([`parse`]) that builds a tree up to
//! [`MAX_JSON_DEPTH`] levels and flattens anything deeper into its strings, so nesting neither
//! overflows the stack nor hides a text (what the server sent is hostile: a reader that gave up
//! on deep nesting, as `serde_json` does past 128 levels, would let a server hide a text by
//! nesting it), and [`messages`]: the server's answers, each with the method of the request it
//! answers, and the server's own requests.

use glassbox_model::{Direction, TranscriptEntry};
use std::collections::HashMap;

/// How deep the JSON reader builds a tree; deeper values are flattened to their strings.
pub(crate) const MAX_JSON_DEPTH: usize = 64;

/// Schema keys whose strings are structure, not prose: the flattened reader drops the strings
/// of these keys (`"type": "object"`).
pub(crate) const STRUCTURAL: &[&str] = &[
    "type",
    "format",
    "$ref",
    "$schema",
    "$id",
    "$anchor",
    "pattern",
    "contentEncoding",
    "contentMediaType",
    "required",
];

/// What the server sent, as [`messages`] hands it on.
#[derive(Debug)]
pub(crate) enum Message<'a> {
    /// The server's answer to a request of the client: the request's method and the answer's
    /// `result` (an object; errors are not handed on).
    Answer {
        method: &'a str,
        /// The request's id ([`id_key`]).
        id: &'a str,
        result: &'a [(String, Value)],
    },
    /// A request of the server to the client (a `method` and an `id`): its method and
    /// `params`.
    Request {
        method: &'a str,
        params: Option<&'a Value>,
    },
}

/// Hands every message of the server in `transcript` to `f`, in order, with its entry: its
/// answers to the client's requests (matched by id, a number never answering a string) and its
/// own requests; notifications, errors and lines that are not JSON are skipped. Stops when `f`
/// returns `false`.
pub(crate) fn messages(
    transcript: &[TranscriptEntry],
    mut f: impl FnMut(&TranscriptEntry, Message<'_>) -> bool,
) {
    let mut methods: HashMap<String, String> = HashMap::new();
    for e in transcript {
        if !e.json || e.dir != Direction::ClientToServer {
            continue;
        }
        let Some(Value::Obj(msg)) = parse(&e.raw.to_lossy()) else {
            continue;
        };
        if let (Some(Value::Str(method)), Some(id)) =
            (get(&msg, "method"), get(&msg, "id").and_then(id_key))
        {
            methods.insert(id, method.clone());
        }
    }
    for e in transcript {
        if !e.json || e.dir != Direction::ServerToClient {
            continue;
        }
        let Some(Value::Obj(msg)) = parse(&e.raw.to_lossy()) else {
            continue;
        };
        let more = match get(&msg, "method") {
            // A request from the server; one without an id is a notification.
            Some(Value::Str(method)) if get(&msg, "id").is_some() => f(
                e,
                Message::Request {
                    method,
                    params: get(&msg, "params"),
                },
            ),
            Some(_) => true,
            None => {
                let id = get(&msg, "id").and_then(id_key);
                let method = id.as_ref().and_then(|id| methods.get(id));
                match (id.as_deref(), method, get(&msg, "result")) {
                    (Some(id), Some(method), Some(Value::Obj(result))) => {
                        f(e, Message::Answer { method, id, result })
                    }
                    _ => true,
                }
            }
        };
        if !more {
            return;
        }
    }
}

/// A JSON value.
#[derive(Debug, PartialEq)]
pub(crate) enum Value {
    Null,
    Bool(bool),
    /// A number, as written.
    Num(String),
    Str(String),
    Arr(Vec<Value>),
    Obj(Vec<(String, Value)>),
    /// An array or object nested too deep: its strings (values, not keys), in order.
    Deep(Vec<String>),
}

pub(crate) fn get<'a>(obj: &'a [(String, Value)], key: &str) -> Option<&'a Value> {
    obj.iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

/// A JSON-RPC id as a map key (numbers and strings never collide).
pub(crate) fn id_key(v: &Value) -> Option<String> {
    match v {
        Value::Num(n) => Some(format!("n:{n}")),
        Value::Str(s) => Some(format!("s:{s}")),
        _ => None,
    }
}

/// Every string value inside `v`, in order.
pub(crate) fn strings<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
    match v {
        Value::Str(s) => out.push(s),
        Value::Arr(items) => items.iter().for_each(|i| strings(i, out)),
        Value::Obj(fields) => fields.iter().for_each(|(_, i)| strings(i, out)),
        Value::Deep(all) => out.extend(all.iter().map(String::as_str)),
        Value::Null | Value::Bool(_) | Value::Num(_) => {}
    }
}

pub(crate) fn parse(s: &str) -> Option<Value> {
    let mut p = Parser { s, i: 0 };
    let v = p.value(0)?;
    p.ws();
    (p.i == s.len()).then_some(v)
}

struct Parser<'a> {
    s: &'a str,
    i: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.as_bytes().get(self.i).copied()
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    fn lit(&mut self, word: &str, v: Value) -> Option<Value> {
        self.s[self.i..].starts_with(word).then(|| {
            self.i += word.len();
            v
        })
    }

    fn value(&mut self, depth: usize) -> Option<Value> {
        self.ws();
        match self.peek()? {
            b'{' | b'[' if depth >= MAX_JSON_DEPTH => self.flat(),
            b'{' => {
                self.i += 1;
                let mut fields = Vec::new();
                self.ws();
                if self.peek() == Some(b'}') {
                    self.i += 1;
                    return Some(Value::Obj(fields));
                }
                loop {
                    self.ws();
                    let key = self.string()?;
                    self.ws();
                    (self.peek()? == b':').then_some(())?;
                    self.i += 1;
                    let v = self.value(depth + 1)?;
                    fields.push((key, v));
                    self.ws();
                    match self.peek()? {
                        b',' => self.i += 1,
                        b'}' => {
                            self.i += 1;
                            return Some(Value::Obj(fields));
                        }
                        _ => return None,
                    }
                }
            }
            b'[' => {
                self.i += 1;
                let mut items = Vec::new();
                self.ws();
                if self.peek() == Some(b']') {
                    self.i += 1;
                    return Some(Value::Arr(items));
                }
                loop {
                    items.push(self.value(depth + 1)?);
                    self.ws();
                    match self.peek()? {
                        b',' => self.i += 1,
                        b']' => {
                            self.i += 1;
                            return Some(Value::Arr(items));
                        }
                        _ => return None,
                    }
                }
            }
            b'"' => self.string().map(Value::Str),
            b't' => self.lit("true", Value::Bool(true)),
            b'f' => self.lit("false", Value::Bool(false)),
            b'n' => self.lit("null", Value::Null),
            _ => {
                let start = self.i;
                while matches!(
                    self.peek(),
                    Some(b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')
                ) {
                    self.i += 1;
                }
                (self.i > start).then(|| Value::Num(self.s[start..self.i].to_string()))
            }
        }
    }

    /// An array or object read without recursion: brackets counted, strings kept.
    fn flat(&mut self) -> Option<Value> {
        let mut stack: Vec<u8> = Vec::new();
        let mut strings = Vec::new();
        // The last key seen: the strings of structural keys ("type": "object") are not text.
        let mut key = String::new();
        loop {
            self.ws();
            match self.peek()? {
                b'{' | b'[' => {
                    stack.push(self.peek()?);
                    self.i += 1;
                }
                c @ (b'}' | b']') => {
                    let open = stack.pop()?;
                    if (open, c) != (b'{', b'}') && (open, c) != (b'[', b']') {
                        return None;
                    }
                    self.i += 1;
                    if stack.is_empty() {
                        return Some(Value::Deep(strings));
                    }
                }
                b'"' => {
                    let s = self.string()?;
                    self.ws();
                    // a key is followed by ':'; keep values only
                    if self.peek() == Some(b':') {
                        key = s;
                    } else if !STRUCTURAL.contains(&key.as_str()) {
                        strings.push(s);
                    }
                }
                b',' | b':' => self.i += 1,
                _ => {
                    let before = self.i;
                    self.value(0)
                        .filter(|v| !matches!(v, Value::Obj(_) | Value::Arr(_)))?;
                    (self.i > before).then_some(())?;
                }
            }
        }
    }

    fn hex4(&mut self) -> Option<u32> {
        let h = self.s.get(self.i..self.i + 4)?;
        let v = u32::from_str_radix(h, 16).ok()?;
        h.bytes().all(|b| b.is_ascii_hexdigit()).then_some(())?;
        self.i += 4;
        Some(v)
    }

    fn string(&mut self) -> Option<String> {
        (self.peek()? == b'"').then_some(())?;
        self.i += 1;
        let mut out = String::new();
        loop {
            let rest = &self.s[self.i..];
            let stop = rest.find(['"', '\\'])?;
            out.push_str(&rest[..stop]);
            self.i += stop;
            if self.peek()? == b'"' {
                self.i += 1;
                return Some(out);
            }
            self.i += 1; // the backslash
            let e = self.peek()?;
            self.i += 1;
            match e {
                b'"' => out.push('"'),
                b'\\' => out.push('\\'),
                b'/' => out.push('/'),
                b'b' => out.push('\u{8}'),
                b'f' => out.push('\u{c}'),
                b'n' => out.push('\n'),
                b'r' => out.push('\r'),
                b't' => out.push('\t'),
                b'u' => {
                    let hi = self.hex4()?;
                    let c = if (0xd800..0xdc00).contains(&hi) && self.s[self.i..].starts_with("\\u")
                    {
                        let save = self.i;
                        self.i += 2;
                        match self.hex4() {
                            Some(lo) if (0xdc00..0xe000).contains(&lo) => {
                                char::from_u32(0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00))
                            }
                            _ => {
                                self.i = save;
                                None
                            }
                        }
                    } else {
                        char::from_u32(hi)
                    };
                    out.push(c.unwrap_or('\u{fffd}'));
                }
                _ => return None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_reader_rejects_garbage_and_reads_values() {
        for bad in [
            "",
            "{",
            "[1,]",
            r#"{"a"}"#,
            r#""\x""#,
            "tru",
            "{}x",
            "[}",
            r#""\ud8""#,
        ] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
        assert_eq!(
            parse(r#" {"a":[1,-2.5e3,true,false,null,"\"\\\/\n\u0041"]} "#),
            Some(Value::Obj(vec![(
                "a".into(),
                Value::Arr(vec![
                    Value::Num("1".into()),
                    Value::Num("-2.5e3".into()),
                    Value::Bool(true),
                    Value::Bool(false),
                    Value::Null,
                    Value::Str("\"\\/\nA".into()),
                ])
            )]))
        );
        let deep = format!("{}\"k\"{}", "[".repeat(100), "]".repeat(100));
        let mut v = parse(&deep).unwrap();
        for _ in 0..MAX_JSON_DEPTH {
            let Value::Arr(mut items) = v else { panic!() };
            v = items.pop().unwrap();
        }
        assert_eq!(v, Value::Deep(vec!["k".into()]));
        assert_eq!(parse(&format!("{}]", "[".repeat(100))), None);
    }
}
