//! The HTTP request at the start of a TCP stream (request line and `Host`, read with
//! httparse), how much body to wait for, and the answer the edge gives every request.

use glassbox_model::{Bytes, HttpRequest};

/// Headers read per request (more: not read as HTTP).
const MAX_HEADERS: usize = 96;
/// Body bytes waited for at most before answering.
pub(crate) const MAX_BODY_WAIT: u64 = 1 << 20;

/// The answer to every HTTP request in capture mode.
pub(crate) const RESPONSE_503: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\n\
Content-Type: text/plain\r\n\
Content-Length: 41\r\n\
Connection: close\r\n\
\r\n\
glassbox: network captured, no upstream.\n";

/// What the first bytes of a stream say about an HTTP request.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Request {
    /// The head has not all arrived yet.
    Incomplete,
    /// Not an HTTP/1 request.
    NotHttp,
    /// A whole request head.
    Head {
        /// Method, target and Host.
        request: HttpRequest,
        /// Bytes of the head (request line and headers).
        head_len: usize,
        /// Body bytes to wait for before answering (bounded by [`MAX_BODY_WAIT`]).
        body_wait: u64,
    },
}

/// Reads the request head at the start of `stream`.
pub(crate) fn request(stream: &[u8]) -> Request {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let head_len = match req.parse(stream) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Request::Incomplete,
        Err(_) => return Request::NotHttp,
    };
    let (Some(method), Some(target)) = (req.method, req.path) else {
        return Request::NotHttp;
    };
    let header = |name: &str| {
        req.headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| h.value)
    };
    let host = header("host").map(Bytes::from);
    let chunked = header("transfer-encoding").is_some_and(|v| {
        String::from_utf8_lossy(v)
            .to_ascii_lowercase()
            .contains("chunked")
    });
    let expects_continue =
        header("expect").is_some_and(|v| v.eq_ignore_ascii_case(b"100-continue"));
    let content_length = header("content-length")
        .and_then(|v| std::str::from_utf8(v).ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(0);
    // A chunked body has no length up front, and a client expecting 100-continue waits for
    // an answer before sending its body: answer after the head.
    let body_wait = if chunked || expects_continue {
        0
    } else {
        content_length.min(MAX_BODY_WAIT)
    };
    Request::Head {
        request: HttpRequest {
            method: method.to_string(),
            target: Bytes::from(target),
            host,
        },
        head_len,
        body_wait,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_method_target_host_and_body_length() {
        let r =
            request(b"POST /v1/x HTTP/1.1\r\nHost: api.example\r\nContent-Length: 5\r\n\r\nhel");
        let Request::Head {
            request,
            head_len,
            body_wait,
        } = r
        else {
            panic!("{r:?}");
        };
        assert_eq!(request.method, "POST");
        assert_eq!(request.target, Bytes::from("/v1/x"));
        assert_eq!(request.host, Some(Bytes::from("api.example")));
        assert_eq!(head_len, 61);
        assert_eq!(body_wait, 5);
    }

    #[test]
    fn partial_and_foreign_streams() {
        assert_eq!(request(b"GET / HT"), Request::Incomplete);
        assert_eq!(request(b"SSH-2.0-OpenSSH_9.6\r\n"), Request::NotHttp);
        assert_eq!(request(&[0x16, 3, 1, 0, 5]), Request::NotHttp);
        let Request::Head { body_wait, .. } =
            request(b"PUT / HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n")
        else {
            panic!()
        };
        assert_eq!(body_wait, MAX_BODY_WAIT);
    }

    #[test]
    fn the_response_announces_its_length() {
        let text = std::str::from_utf8(RESPONSE_503).unwrap();
        let (_, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(text.contains(&format!("Content-Length: {}\r\n", body.len())));
    }
}
