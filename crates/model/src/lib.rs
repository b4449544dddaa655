//! The evidence types of glassbox and their documented JSON wire format.
//!
//! Every other crate speaks these types: the recorder emits [`Event`]s, the MCP client writes
//! [`TranscriptEntry`]s, checks turn an [`Evidence`] into [`Finding`]s, and reports render an
//! [`AuditReport`]. Its one module that touches the disk is [`bundle`]: the only writer and
//! reader of an evidence bundle's files.
//!
//! # Wire format
//!
//! An evidence bundle is a directory, written and read only by [`bundle`]:
//!
//! | file | content |
//! |---|---|
//! | `manifest.json` | one [`Manifest`]: versions, kernel, target, sandbox settings, timings |
//! | `events.jsonl` | one [`Event`] per line, in the order the recorder saw them |
//! | `transcript.jsonl` | one [`TranscriptEntry`] per line: every line in both directions, raw |
//! | `network.jsonl` | one [`Flow`] per line: every flow at the network edge and the canary sockets |
//! | `stderr.log` | the server's standard error, as written |
//! | `report.json` | the [`AuditReport`] (written last) |
//!
//! Byte strings that come from the traced program (paths, argv, raw protocol lines) are
//! [`Bytes`]: a JSON string when they are valid UTF-8, otherwise `{"bytes": "<base64>"}`, so no
//! byte is ever lost or replaced.
//!
//! Times are nanoseconds since the start of the run (`t_ns`), from a monotonic clock; the
//! manifest carries the wall-clock start.
#![deny(missing_docs)]
// One `unsafe` in the crate, allowed where it is (`bundle/scan.rs`: the event scanner's ASCII
// strings); everything else is refused.
#![deny(unsafe_code)]

pub mod bundle;
mod bytes;
mod evidence;
pub mod exec_probe;
pub mod hosts;
mod network;
mod report;

pub use bytes::{argv_line, cut, printable, truncate, Bytes};
pub use evidence::*;
pub use network::*;
pub use report::*;

/// The version of glassbox that produced a bundle or a report.
pub const GLASSBOX_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Why the sandbox refused a netlink socket of the kernel's device events
/// (`NETLINK_KOBJECT_UEVENT`, what libudev's monitor opens): the filter lets netlink-route
/// alone through, and this one carries no traffic anywhere. `sandbox-evasion` keys the refusal
/// on this reason, which the filter gives it.
pub const UEVENT_REFUSAL: &str = "a netlink socket of the kernel's device events (a udev monitor: \
     no traffic leaves through it); the filter lets netlink-route alone through";

/// The host's system directories (under `/`) that every isolation backend shows the server
/// read-only at their own paths, when present; the manifest's read-only paths start from them.
pub const SYSTEM_DIRS: &[&str] = &[
    "usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "opt",
];

/// An error and its causes as one line, `what: why: why...`, each cause said once: a message
/// that already ends with its cause's text (`cannot read X: No such file`) is not followed by
/// that cause again. What a user is shown of an error, wherever it came from.
pub fn error_chain<T: std::fmt::Display>(
    top: impl std::fmt::Display,
    causes: impl IntoIterator<Item = T>,
) -> String {
    let mut line = top.to_string();
    for cause in causes {
        let text = cause.to_string();
        if !text.is_empty() && !line.ends_with(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
    }
    line
}

/// [`error_chain`] of `e` and its [`source`](std::error::Error::source)s.
pub fn error_line(e: &(dyn std::error::Error + 'static)) -> String {
    let mut causes = Vec::new();
    let mut next = e.source();
    while let Some(c) = next {
        causes.push(c);
        next = c.source();
    }
    error_chain(e, causes)
}

#[cfg(test)]
mod error_tests {
    use super::*;

    #[derive(Debug)]
    struct E(&'static str, Option<Box<E>>);
    impl std::fmt::Display for E {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }
    impl std::error::Error for E {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|e| e as _)
        }
    }

    #[test]
    fn each_cause_is_said_once() {
        let io = || Some(Box::new(E("No such file", None)));
        // A message that says its cause already, and one that does not.
        let said = E("cannot write X: No such file", io());
        assert_eq!(error_line(&said), "cannot write X: No such file");
        let unsaid = E("cannot write X", io());
        assert_eq!(error_line(&unsaid), "cannot write X: No such file");
        let deep = E(
            "the audit failed",
            Some(Box::new(E("cannot write X", io()))),
        );
        assert_eq!(
            error_line(&deep),
            "the audit failed: cannot write X: No such file"
        );
    }
}
