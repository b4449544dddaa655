//! Making strings from the server safe to print.

use glassbox_model::Bytes;

/// Bytes from the server, printable (see [`Bytes`]'s `Display`).
pub(crate) fn bytes(b: &Bytes) -> String {
    b.to_string()
}

/// A string from the server (a tool name, a reason), printable like [`bytes`].
pub(crate) fn text(s: &str) -> String {
    glassbox_model::printable(s)
}

pub(crate) use glassbox_model::truncate;

pub(crate) use glassbox_model::argv_line as argv;

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
