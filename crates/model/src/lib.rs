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
