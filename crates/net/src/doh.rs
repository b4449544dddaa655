//! DNS over HTTPS at the edge: a request in one of DoH's forms, read as an HTTP exchange (in
//! clear or inside TLS), is decoded and answered as a resolver would answer it, by the edge's
//! own DNS.
//!
//! A server that resolves names over HTTPS hides them from port 53: without this, the edge
//! would see one HTTPS exchange and answer it `{}`, the server would get no address and stop
//! there, and the name it looked up would stay a base64url blob in a request target. So:
//!
//! - **Recognised** ([`form`]): RFC 8484's two forms, a `POST` whose `Content-Type` is
//!   `application/dns-message` (the body is the DNS message) and a `GET` with a `dns`
//!   parameter (the message, base64url); and the JSON API of Google (`/resolve?name=N&type=T`)
//!   and Cloudflare (`/dns-query?name=N` with `Accept: application/dns-json`). Recognised by
//!   the request's content, never by the host it went to: a resolver of the server's own is
//!   read as well as a public one. A look-alike stays an ordinary request: a `GET ?dns=`
//!   whose value is not a DNS query, with nothing else saying DoH (`Accept` or `ct`
//!   naming `application/dns-message`, a `/dns-query` path); a `name` parameter of an
//!   ordinary API (a hosting API's `/v1/dns-records?name=...` with `Accept:
//!   application/json`): JSON counts only with `application/dns-json` asked for, a
//!   `/dns-query` path, or Google's `/resolve` with a host name and a DNS type.
//! - **Answered by the edge's DNS** ([`serve`]): the question goes to the same
//!   [`Resolver`] that answers port 53 (the JSON API's as the DNS message it stands for), so
//!   a name gets the same synthetic address whichever way it was asked, and a later connect
//!   to that address is named for it (`Flow::dns_name`): a server that resolves
//!   `beacon.h-c2.example` over DoH and connects to the answer is seen connecting to
//!   `beacon.h-c2.example`. There is no second DNS here: this module only unwraps the
//!   question and wraps the answer (`application/dns-message`, or the JSON API's JSON).
//! - **Recorded** on the exchange (`HttpExchange::dns`, with the addresses answered), or, for
//!   a request in DoH's form whose DNS message cannot be read, why (`HttpExchange::dns_error`,
//!   answered `400` as RFC 8484 servers do). A request that is not answered (the stream
//!   ended first) has its question recorded without an address being handed out.
//!
//! Bounds: what is read is what the HTTP reader kept (a target within the 64 KiB head, a
//! body within [`glassbox_model::BODY_LIMIT`]; a DNS message cut by that bound is not
//! read, and that is said); a name is at most 255 bytes (hickory-proto's bound), parameters
//! are looked at in one pass without copies beyond the one looked for.

use crate::dns::{self, Resolver};
use crate::http::{self, Answer};
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::DecodePaddingMode;
use base64::Engine;
use glassbox_model::HttpExchange;
use hickory_proto::op::{Message, MessageType, OpCode, Query};
use hickory_proto::rr::{Name, RecordType};
use serde_json::{json, Value};
use std::str::FromStr;

/// RFC 8484's media type: a DNS message in wire format.
const DNS_MESSAGE: &str = "application/dns-message";
/// The JSON API's media type (Cloudflare's; Google's takes it too, as `ct`).
const DNS_JSON: &str = "application/dns-json";

/// base64url, padded or not (RFC 8484 says without; clients differ).
const BASE64URL: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::URL_SAFE,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// The question of a DoH request, in the form it came in.
#[derive(Debug, PartialEq, Eq)]
enum Form {
    /// RFC 8484: a DNS message (a `POST`'s body, a `GET`'s `dns` parameter).
    Wire(Vec<u8>),
    /// The JSON API: the name, and the type (a mnemonic or a number; `A` when absent).
    Json { name: String, qtype: Option<String> },
}

/// What a DoH request was answered with.
#[derive(Debug)]
pub(crate) struct Served {
    /// The HTTP response (instead of [`http::response`]'s).
    pub response: Vec<u8>,
    /// Anything odd, for the flow's note.
    pub note: Option<String>,
}

/// Reads `ex` as a DoH request; when it is one, records its question (or why it cannot be
/// read) on it and, when `answer` says it is answered `200`, answers it from `dns`: the
/// response to send. `None`: not a DoH request, or not answered by the edge's DNS (the
/// stream ended first, its framing was bad); the caller sends the ordinary response.
pub(crate) fn serve(
    ex: &mut HttpExchange,
    answer: Option<Answer>,
    dns: &mut Resolver,
) -> Option<Served> {
    let wire = form(ex).map(|f| f.and_then(Form::into_wire));
    let wire = match (wire?, answer) {
        (Ok(wire), Some(a)) if a.status == 200 => (wire, a),
        (Ok(wire), _) => {
            // Not answered: the question, without handing out an address.
            match dns::question(&wire.0) {
                Ok(q) => ex.dns = Some(q),
                Err(why) => ex.dns_error = Some(why),
            }
            return None;
        }
        (Err(why), Some(a)) if a.status == 200 => {
            ex.dns_error = Some(why.clone());
            return Some(bad(ex, a, why));
        }
        (Err(why), _) => {
            ex.dns_error = Some(why);
            return None;
        }
    };
    let ((message, json), a) = wire;
    let handled = dns.handle(&message, true);
    let note = handled.note.map(|n| format!("DNS over HTTPS: {n}"));
    let (Some(query), Some(reply)) = (handled.query, handled.reply) else {
        // The message did not parse, or it was a response rather than a query.
        let why = note.unwrap_or_else(|| "DNS over HTTPS: no question to answer".into());
        ex.dns_error = Some(why.clone());
        return Some(bad(ex, a, why));
    };
    ex.dns = Some(query);
    let response = if json {
        let media = if accepts(ex, DNS_JSON) {
            DNS_JSON
        } else {
            "application/json"
        };
        http::response_with(a, Some(media), &json_answer(&reply))
    } else {
        http::response_with(a, Some(DNS_MESSAGE), &reply)
    };
    Some(Served { response, note })
}

/// A request in DoH's form that cannot be answered: `400`, as RFC 8484 servers answer a
/// message they cannot read.
fn bad(ex: &mut HttpExchange, mut a: Answer, why: String) -> Served {
    a.status = 400;
    ex.status = 400;
    Served {
        response: http::response_with(a, None, b""),
        note: Some(why),
    }
}

impl Form {
    /// The DNS message the request stands for, and whether it came as JSON.
    fn into_wire(self) -> Result<(Vec<u8>, bool), String> {
        match self {
            Form::Wire(w) => Ok((w, false)),
            Form::Json { name, qtype } => {
                let rtype = match qtype.as_deref() {
                    None => RecordType::A,
                    Some(t) => record_type(t)
                        .ok_or_else(|| format!("DNS JSON request of type {:?}", cut(t)))?,
                };
                let name = Name::from_ascii(&name)
                    .map_err(|e| format!("DNS JSON request for {:?}: {e}", cut(&name)))?;
                let mut m = Message::new(0, MessageType::Query, OpCode::Query);
                m.metadata.recursion_desired = true;
                m.add_query(Query::query(name, rtype));
                let wire = m.to_vec().map_err(|e| format!("DNS JSON request: {e}"))?;
                Ok((wire, true))
            }
        }
    }
}

/// At most 64 characters of a parameter, for a note.
fn cut(s: &str) -> String {
    s.chars().take(64).collect()
}

/// A DNS type as the JSON API takes it: a mnemonic (any case) or its number.
fn record_type(t: &str) -> Option<RecordType> {
    match t.parse::<u16>() {
        Ok(n) => Some(RecordType::from(n)),
        Err(_) => RecordType::from_str(&t.to_ascii_uppercase()).ok(),
    }
}

/// Which DoH form `ex` is in, if any (see the module docs); `Err` when it is in one but its
/// DNS message cannot be had.
fn form(ex: &HttpExchange) -> Option<Result<Form, String>> {
    let target = ex.target.as_slice();
    let (path, query) = match target.iter().position(|&b| b == b'?') {
        Some(i) => (&target[..i], &target[i + 1..]),
        None => (target, &[][..]),
    };
    let last = path.rsplit(|&b| b == b'/').next().unwrap_or(path);
    let dns_query_path = last.eq_ignore_ascii_case(b"dns-query");
    let ct = param(query, b"ct");
    let ct_is = |media: &str| ct.as_deref().is_some_and(|c| media_is(c, media));
    if ex.method.eq_ignore_ascii_case("POST") {
        let content_type = ex.header("content-type")?;
        if !media_is(content_type.as_slice(), DNS_MESSAGE) {
            return None;
        }
        if let Some(e) = &ex.body_error {
            return Some(Err(format!(
                "DNS over HTTPS: its body was not read whole ({e})"
            )));
        }
        if ex.body_len > ex.body.0.len() as u64 {
            return Some(Err(format!(
                "DNS over HTTPS: a DNS message of {} bytes, longer than the edge keeps",
                ex.body_len
            )));
        }
        return Some(Ok(Form::Wire(ex.body.0.clone())));
    }
    if !ex.method.eq_ignore_ascii_case("GET") {
        return None;
    }
    if let Some(value) = param(query, b"dns") {
        let says_doh = accepts(ex, DNS_MESSAGE) || ct_is(DNS_MESSAGE) || dns_query_path;
        return match BASE64URL.decode(&value) {
            Ok(wire) if says_doh || dns::question(&wire).is_ok() => Some(Ok(Form::Wire(wire))),
            Err(e) if says_doh => Some(Err(format!(
                "DNS over HTTPS: its dns parameter is not base64url ({e})"
            ))),
            _ => None,
        };
    }
    let name = param(query, b"name")?;
    let name = String::from_utf8_lossy(&name).into_owned();
    let qtype = param(query, b"type").map(|t| String::from_utf8_lossy(&t).into_owned());
    let says_json = accepts(ex, DNS_JSON) || ct_is(DNS_JSON) || dns_query_path;
    // Google's `/resolve`, without anything else saying DNS: a host name, and a DNS type
    // when there is a type.
    let google = last.eq_ignore_ascii_case(b"resolve")
        && host_like(&name)
        && qtype.as_deref().is_none_or(|t| record_type(t).is_some());
    (says_json || google).then_some(Ok(Form::Json { name, qtype }))
}

/// Whether `ex`'s `Accept` names `media`.
fn accepts(ex: &HttpExchange, media: &str) -> bool {
    ex.headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("accept"))
        .flat_map(|(_, v)| v.as_slice().split(|&b| b == b','))
        .any(|t| media_is(t, media))
}

/// Whether a `Content-Type` or `Accept` item is `media` (its parameters aside).
fn media_is(value: &[u8], media: &str) -> bool {
    let t = value.split(|&b| b == b';').next().unwrap_or(value);
    t.trim_ascii().eq_ignore_ascii_case(media.as_bytes())
}

/// A host name: dotted, of the characters names are made of, not too long.
fn host_like(name: &str) -> bool {
    let name = name.strip_suffix('.').unwrap_or(name);
    (3..=253).contains(&name.len())
        && name.contains('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// The first value of parameter `key` in a query string, percent-decoded.
fn param(query: &[u8], key: &[u8]) -> Option<Vec<u8>> {
    query.split(|&b| b == b'&' || b == b'#').find_map(|pair| {
        let (k, v) = match pair.iter().position(|&b| b == b'=') {
            Some(i) => (&pair[..i], &pair[i + 1..]),
            None => (pair, &[][..]),
        };
        (percent_decode(k) == key).then(|| percent_decode(v))
    })
}

/// `%XX` decoded (a `%` not followed by two hex digits is kept as is).
fn percent_decode(s: &[u8]) -> Vec<u8> {
    let hex = |b: u8| (b as char).to_digit(16);
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        match (
            s[i],
            s.get(i + 1).copied().and_then(hex),
            s.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

/// The JSON API's answer for a DNS reply (Google's and Cloudflare's shape: `Status`, the
/// flags, `Question`, `Answer` with `name`, `type`, `TTL`, `data`).
fn json_answer(reply: &[u8]) -> Vec<u8> {
    let Ok(m) = Message::from_vec(reply) else {
        return b"{\"Status\":2}".to_vec();
    };
    let fqdn = |n: &Name| {
        let mut s = n.to_ascii();
        if !s.ends_with('.') {
            s.push('.');
        }
        s
    };
    let question: Vec<Value> = m
        .queries
        .iter()
        .map(|q| json!({"name": fqdn(&q.name), "type": u16::from(q.query_type)}))
        .collect();
    let answer: Vec<Value> = m
        .answers
        .iter()
        .map(|r| {
            json!({
                "name": fqdn(&r.name),
                "type": u16::from(r.record_type()),
                "TTL": r.ttl,
                "data": r.data.to_string(),
            })
        })
        .collect();
    let md = &m.metadata;
    let mut v = json!({
        "Status": u16::from(md.response_code),
        "TC": md.truncation,
        "RD": md.recursion_desired,
        "RA": md.recursion_available,
        "AD": false,
        "CD": false,
        "Question": question,
    });
    if !answer.is_empty() {
        v["Answer"] = Value::Array(answer);
    }
    serde_json::to_vec(&v).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use glassbox_model::Bytes;

    fn exchange(method: &str, target: &str, headers: &[(&str, &str)], body: &[u8]) -> HttpExchange {
        HttpExchange {
            t_ns: 0,
            method: method.into(),
            target: Bytes::from(target),
            headers: headers
                .iter()
                .map(|(n, v)| (n.to_string(), Bytes::from(*v)))
                .collect(),
            body: Bytes(body.to_vec()),
            body_len: body.len() as u64,
            body_error: None,
            status: 200,
            dns: None,
            dns_error: None,
        }
    }

    fn ok() -> Option<Answer> {
        Some(Answer {
            status: 200,
            json: false,
            head: false,
            close: false,
            keep_alive_10: false,
        })
    }

    /// A DNS query for `name` of type `t`, id 0, as a DoH client sends it.
    fn query(name: &str, t: RecordType) -> Vec<u8> {
        let mut m = Message::new(0, MessageType::Query, OpCode::Query);
        m.metadata.recursion_desired = true;
        m.add_query(Query::query(Name::from_ascii(name).unwrap(), t));
        m.to_vec().unwrap()
    }

    fn body_of(response: &[u8]) -> (String, Vec<u8>) {
        let at = response.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
        (
            String::from_utf8_lossy(&response[..at]).into_owned(),
            response[at + 4..].to_vec(),
        )
    }

    #[test]
    fn the_three_forms_are_answered_with_the_addresses_port_53_gives() {
        let mut dns = Resolver::new(16);
        // Asked over port 53 first: DoH answers the same address, and vice versa.
        let udp = dns.handle(&query("beacon.h-c2.example", RecordType::A), true);
        let first = udp.query.unwrap().answers;

        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(query("Beacon.H-C2.example", RecordType::A));
        let mut get = exchange(
            "GET",
            &format!("/dns-query?dns={b64}"),
            &[("Accept", "application/dns-message")],
            b"",
        );
        let served = serve(&mut get, ok(), &mut dns).unwrap();
        let q = get.dns.as_ref().unwrap();
        assert_eq!(
            (q.name.as_slice(), q.qtype.as_str()),
            (&b"Beacon.H-C2.example"[..], "A")
        );
        assert_eq!(q.answers, first);
        let (head, body) = body_of(&served.response);
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
        assert!(
            head.contains("\r\nContent-Type: application/dns-message\r\n"),
            "{head}"
        );
        let reply = Message::from_vec(&body).unwrap();
        assert_eq!(reply.answers[0].data.to_string(), first[0]);
        assert_eq!(get.status, 200);

        let mut post = exchange(
            "POST",
            "/custom/path",
            &[("content-type", "application/dns-message")],
            &query("c2.exfil.example", RecordType::AAAA),
        );
        let served = serve(&mut post, ok(), &mut dns).unwrap();
        let q = post.dns.as_ref().unwrap();
        assert_eq!(q.qtype, "AAAA");
        // The address maps back to the name, as port 53's do.
        let v6: std::net::IpAddr = q.answers[0].parse().unwrap();
        assert_eq!(dns.name_of(v6), Some(Bytes::from("c2.exfil.example")));
        assert!(body_of(&served.response)
            .0
            .contains("application/dns-message"));

        for (target, accept) in [
            ("/resolve?name=beacon.h-c2.example&type=1", None),
            ("/resolve?name=beacon.h-c2.example", None),
            (
                "/dns-query?name=beacon.h-c2.example&type=a",
                Some("application/dns-json"),
            ),
            (
                "/q?name=beacon.h-c2.example&ct=application%2Fdns-json",
                None,
            ),
        ] {
            let headers: Vec<(&str, &str)> = accept.iter().map(|a| ("Accept", *a)).collect();
            let mut j = exchange("GET", target, &headers, b"");
            let served = serve(&mut j, ok(), &mut dns).expect(target);
            assert_eq!(j.dns.as_ref().unwrap().answers, first, "{target}");
            let (head, body) = body_of(&served.response);
            let media = accept.unwrap_or("application/json");
            assert!(
                head.contains(&format!("Content-Type: {media}\r\n")),
                "{head}"
            );
            let v: Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(v["Status"], 0);
            assert_eq!(v["Question"][0]["name"], "beacon.h-c2.example.");
            assert_eq!(v["Answer"][0]["type"], 1);
            assert_eq!(v["Answer"][0]["data"], first[0].as_str());
            assert_eq!(v["Answer"][0]["TTL"], dns::TTL);
        }
    }

    #[test]
    fn look_alikes_are_ordinary_requests() {
        let mut dns = Resolver::new(16);
        for (method, target, headers) in [
            // A hosting API's DNS records, asked for as JSON.
            (
                "GET",
                "/v1/dns-records?name=www.shop.example&type=A",
                &[("Accept", "application/json")][..],
            ),
            // A `dns` parameter that is not a DNS query, nothing else saying DoH.
            ("GET", "/v1/zones?dns=on", &[][..]),
            ("GET", "/settings?dns=cloudflare", &[("Accept", "*/*")][..]),
            // `/resolve` of something that is not a host name, or with a type that is not DNS's.
            ("GET", "/api/resolve?name=left-pad", &[][..]),
            ("GET", "/resolve?name=a.example&type=user", &[][..]),
            // A POST of JSON to a DoH path; a GET of the DoH path with no question.
            (
                "POST",
                "/dns-query",
                &[("Content-Type", "application/json")][..],
            ),
            (
                "GET",
                "/dns-query",
                &[("Accept", "application/dns-message")][..],
            ),
            ("PUT", "/dns-query?dns=AAAB", &[][..]),
        ] {
            let mut ex = exchange(method, target, headers, b"{}");
            assert!(serve(&mut ex, ok(), &mut dns).is_none(), "{target}");
            assert_eq!(
                (ex.dns.as_ref(), ex.dns_error.as_ref()),
                (None, None),
                "{target}"
            );
        }
        // None of them handed out an address.
        assert_eq!(dns.name_of("198.18.1.0".parse().unwrap()), None);
    }

    #[test]
    fn a_malformed_message_is_noted_and_answered_400() {
        let mut dns = Resolver::new(16);
        let cases: Vec<HttpExchange> = vec![
            exchange(
                "POST",
                "/dns-query",
                &[("Content-Type", "application/dns-message; charset=x")],
                b"\x00\x01garbage",
            ),
            exchange(
                "GET",
                "/dns-query?dns=!!notbase64!!",
                &[("Accept", "application/dns-message")],
                b"",
            ),
            exchange(
                "GET",
                "/dns-query?dns=AAABAAABAAAAAAAA",
                &[("Accept", "application/dns-message")],
                b"",
            ),
            exchange("GET", "/dns-query?name=a..b.example", &[], b""),
            exchange("GET", "/dns-query?name=a.example&type=NOPE", &[], b""),
            {
                let mut cut = exchange(
                    "POST",
                    "/",
                    &[("Content-Type", "application/dns-message")],
                    &query("a.example", RecordType::A),
                );
                cut.body_len += 100;
                cut
            },
        ];
        for mut ex in cases {
            let served = serve(&mut ex, ok(), &mut dns).expect("a DoH request");
            assert!(
                served.response.starts_with(b"HTTP/1.1 400 Bad Request\r\n"),
                "{ex:?}"
            );
            assert_eq!(ex.status, 400);
            assert!(ex.dns.is_none(), "{ex:?}");
            assert!(ex.dns_error.is_some(), "{ex:?}");
            assert_eq!(served.note, ex.dns_error);
        }
    }

    #[test]
    fn a_request_not_answered_keeps_its_question_and_hands_out_nothing() {
        let mut dns = Resolver::new(16);
        let mut ex = exchange(
            "POST",
            "/dns-query",
            &[("Content-Type", "application/dns-message")],
            &query("late.exfil.example", RecordType::A),
        );
        ex.status = 0;
        assert!(serve(&mut ex, None, &mut dns).is_none());
        let q = ex.dns.unwrap();
        assert_eq!(q.name, Bytes::from("late.exfil.example"));
        assert!(q.answers.is_empty());
        assert_eq!(dns.name_of("198.18.1.0".parse().unwrap()), None);
    }

    #[test]
    fn random_requests_never_panic() {
        // xorshift: the same bytes every run.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut dns = Resolver::new(64);
        let valid = query("a.example", RecordType::A);
        for i in 0..4000 {
            let mut bytes: Vec<u8> = match i % 3 {
                // A valid query with a few bytes changed.
                0 => {
                    let mut v = valid.clone();
                    for _ in 0..1 + next() % 4 {
                        let at = (next() as usize) % v.len();
                        v[at] = next() as u8;
                    }
                    v
                }
                _ => (0..next() % 80).map(|_| next() as u8).collect(),
            };
            if i % 7 == 0 {
                bytes.truncate((next() as usize) % (bytes.len() + 1));
            }
            let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&bytes);
            let text = String::from_utf8_lossy(&bytes).replace(['&', '?', '#'], "");
            for mut ex in [
                exchange(
                    "POST",
                    "/dns-query",
                    &[("Content-Type", DNS_MESSAGE)],
                    &bytes,
                ),
                exchange("GET", &format!("/dns-query?dns={b64}"), &[], b""),
                exchange("GET", &format!("/x?dns={b64}"), &[], b""),
                exchange(
                    "GET",
                    &format!("/dns-query?name={text}&type={}", next() % 300),
                    &[],
                    b"",
                ),
                exchange("GET", &format!("/resolve?name={text}.example"), &[], b""),
            ] {
                if let Some(served) = serve(&mut ex, ok(), &mut dns) {
                    assert!(served.response.starts_with(b"HTTP/1.1 "));
                    assert_eq!(ex.dns.is_some(), ex.dns_error.is_none(), "{ex:?}");
                }
            }
        }
    }

    #[test]
    fn parameters_are_percent_decoded_and_bounded_to_what_is_there() {
        assert_eq!(param(b"a=1&dns=x%3D%3d&b", b"dns"), Some(b"x==".to_vec()));
        assert_eq!(param(b"b&a=1", b"b"), Some(Vec::new()));
        assert_eq!(param(b"%6eame=z", b"name"), Some(b"z".to_vec()));
        assert_eq!(param(b"x=%zz%4", b"x"), Some(b"%zz%4".to_vec()));
        assert_eq!(param(b"", b"x"), None);
        assert!(host_like("beacon.h-c2.example."));
        assert!(!host_like("left-pad") && !host_like("a b.example"));
    }
}
