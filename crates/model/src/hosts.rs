//! Host names as the audited entry writes them: the hosts of URLs in a text and a value that
//! is a host itself. Syntax only: which of them explain a destination is the checks' rule.

/// The scheme and host of every `scheme://[user@]host` URL in `text`, hosts lower-cased
/// (IPv6 without brackets).
pub fn urls_in(text: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for (i, _) in text.match_indices("://") {
        let scheme: String = text[..i]
            .chars()
            .rev()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        // `git+https`, `mongodb+srv`: the scheme is what comes after the last `+` that
        // starts a known one, or the whole.
        let scheme = scheme.to_ascii_lowercase();
        if scheme.is_empty() || !scheme.starts_with(|c: char| c.is_ascii_alphabetic()) {
            continue;
        }
        let rest = &text[i + 3..];
        let end = rest
            .find(|c: char| matches!(c, '/' | '?' | '#') || c.is_whitespace())
            .unwrap_or(rest.len());
        let authority = &rest[..end];
        let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        if let Some(host) = host_of(host_port) {
            let item = (scheme, host);
            if !out.contains(&item) {
                out.push(item);
            }
        }
    }
    out
}

/// The host of `host[:port]` (or `[v6]:port`, a bare IP address) when it is one: a name of
/// at least two labels whose last is a word, or an IP address.
pub fn host_of(s: &str) -> Option<String> {
    let s = s.trim().trim_end_matches(['.', ',', ';', ')', '"', '\'']);
    if let Some(rest) = s.strip_prefix('[') {
        let (h, _) = rest.split_once(']')?;
        return h
            .parse::<std::net::Ipv6Addr>()
            .ok()
            .map(|ip| ip.to_string());
    }
    if let Ok(ip) = s.parse::<std::net::IpAddr>() {
        return Some(ip.to_string());
    }
    let host = match s.rsplit_once(':') {
        Some((h, p)) if p.parse::<u16>().is_ok() => h,
        Some(_) => return None,
        None => s,
    };
    if let Ok(ip) = host.parse::<std::net::Ipv4Addr>() {
        return Some(ip.to_string());
    }
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    let labels: Vec<&str> = host.split('.').collect();
    let label_ok = |l: &&str| {
        !l.is_empty()
            && l.len() <= 63
            && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            && !l.starts_with('-')
    };
    let last = labels.last()?;
    let word = last.len() >= 2 && last.chars().all(|c| c.is_ascii_alphabetic());
    (labels.len() >= 2 && host.len() <= 253 && labels.iter().all(label_ok) && word).then_some(host)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_hosts_are_read_from_text() {
        assert_eq!(
            urls_in("https://gitlab.com/api/v4"),
            [("https".into(), "gitlab.com".into())]
        );
        assert_eq!(
            urls_in("postgresql://user:pw@db.example:5432/app and mongodb+srv://m.example"),
            [
                ("postgresql".into(), "db.example".into()),
                ("mongodb+srv".into(), "m.example".into())
            ]
        );
        assert_eq!(urls_in("http://[2001:db8::1]:8080/x")[0].1, "2001:db8::1");
        assert_eq!(host_of("db.example:5432").as_deref(), Some("db.example"));
        assert_eq!(host_of("203.0.113.5").as_deref(), Some("203.0.113.5"));
        for v in ["true", "3.11", "./data", "/tmp/x.db", "info", "a.b_c"] {
            assert_eq!(host_of(v), None, "{v}");
        }
    }
}
