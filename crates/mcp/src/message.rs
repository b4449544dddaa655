//! What a message from the server is (a request, a notification, a response), told from its
//! JSON-RPC members alone, and a server-chosen string made fit for a one-line reason: what the
//! session and both transports' readers share.

use serde_json::Value;

/// What a message from the server is.
pub(crate) enum Kind {
    Request { id: Value, method: String },
    Notification,
    Response { id: Value },
    Malformed,
}

pub(crate) fn classify(msg: &Value) -> Kind {
    let Some(obj) = msg.as_object() else {
        return Kind::Malformed;
    };
    match (obj.get("method"), obj.get("id")) {
        (Some(Value::String(method)), Some(id @ (Value::String(_) | Value::Number(_)))) => {
            Kind::Request {
                id: id.clone(),
                method: method.clone(),
            }
        }
        (Some(Value::String(_)), None) => Kind::Notification,
        (None, Some(id)) if obj.contains_key("result") || obj.contains_key("error") => {
            Kind::Response { id: id.clone() }
        }
        _ => Kind::Malformed,
    }
}

/// The id of a response, when it is one and its id is an integer like the ones glassbox sends.
pub(crate) fn response_id(msg: &Value) -> Option<u64> {
    match classify(msg) {
        Kind::Response { id } => id.as_u64(),
        _ => None,
    }
}

/// A server-chosen string made fit for a one-line reason: control characters escaped, cut
/// at `max` characters.
pub(crate) fn sanitize(s: &str, max: usize) -> String {
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i == max {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}
