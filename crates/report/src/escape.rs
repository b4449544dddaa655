//! Making strings from the server safe to print.

use glassbox_model::Bytes;

/// Characters that are not control characters but reorder or hide text on a terminal
/// (bidirectional overrides and isolates, zero-width marks): escaped like control characters.
fn is_invisible_format(c: char) -> bool {
    matches!(
        c,
        '\u{061c}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
            | '\u{feff}'
    )
}

fn escape_format_chars(s: String) -> String {
    if !s.chars().any(is_invisible_format) {
        return s;
    }
    s.chars()
        .map(|c| {
            if is_invisible_format(c) {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// Bytes from the server, printable: control characters escaped by [`Bytes`]'s `Display`,
/// invalid UTF-8 replaced, and bidi/zero-width format characters escaped too.
pub(crate) fn bytes(b: &Bytes) -> String {
    escape_format_chars(b.to_string())
}

/// A string from the server (a tool name, a reason), printable like [`bytes`].
pub(crate) fn text(s: &str) -> String {
    escape_format_chars(Bytes::from(s).to_string())
}

/// `s` cut to at most `max` characters, with `…` when cut.
pub(crate) fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// An argv as one printable line, arguments with spaces quoted, cut at `max` characters.
pub(crate) fn argv(argv: &[Bytes], max: usize) -> String {
    let parts: Vec<String> = argv
        .iter()
        .map(|a| {
            let s = bytes(a);
            if s.is_empty() || s.contains([' ', '\'', '"']) {
                format!("'{}'", s.replace('\'', "\\'"))
            } else {
                s
            }
        })
        .collect();
    truncate(&parts.join(" "), max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_and_format_characters_are_escaped() {
        assert_eq!(text("a\x1b[31mb\n"), "a\\u{1b}[31mb\\n");
        assert_eq!(text("evil\u{202e}txt.exe"), "evil\\u{202e}txt.exe");
        assert_eq!(text("x\u{9b}31m"), "x\\u{9b}31m"); // C1 CSI
        assert_eq!(bytes(&Bytes(b"\xff\x07".to_vec())), "\u{fffd}\\u{7}");
        assert_eq!(text("plain ünïcode"), "plain ünïcode");
    }

    #[test]
    fn argv_quotes_and_truncates() {
        let a = vec![Bytes::from("sh"), Bytes::from("-c"), Bytes::from("a b")];
        assert_eq!(argv(&a, 100), "sh -c 'a b'");
        assert_eq!(argv(&a, 5), "sh -…");
    }
}
