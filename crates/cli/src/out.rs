//! Standard output, for people and for pipes.
//!
//! `println!` panics when the reader of a pipe has gone (`glassbox report 1 | head`, `glassbox
//! review list | grep -m1 ...`). Here such a reader stops what is printed, not the command: an
//! audit still finishes, is stored and exits with its verdict's status, which `glassbox`'s
//! callers read. Any other error writing standard output (a full disk behind a redirection) is
//! said once on standard error, printing stops there too, and the command exits with status 2
//! ([`failed`]): what it was to print is lost.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

/// Standard output can no longer be written.
static GONE: AtomicBool = AtomicBool::new(false);

/// Writing standard output failed for another reason than a reader that went away.
static FAILED: AtomicBool = AtomicBool::new(false);

/// Whether writing standard output failed (not counting a reader that went away).
pub(crate) fn failed() -> bool {
    FAILED.load(Ordering::Relaxed)
}

/// Writes `args` to standard output and flushes it, unless standard output has gone.
pub(crate) fn write(args: std::fmt::Arguments) {
    if GONE.load(Ordering::Relaxed) {
        return;
    }
    let mut o = std::io::stdout().lock();
    if let Err(e) = o.write_fmt(args).and_then(|()| o.flush()) {
        GONE.store(true, Ordering::Relaxed);
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            FAILED.store(true, Ordering::Relaxed);
            eprintln!("glassbox: cannot write to standard output: {e}");
        }
    }
}

/// `print!`, through [`write`].
macro_rules! out {
    ($($t:tt)*) => {
        $crate::out::write(format_args!($($t)*))
    };
}

/// `println!`, through [`write`].
macro_rules! outln {
    ($($t:tt)*) => {
        $crate::out::write(format_args!("{}\n", format_args!($($t)*)))
    };
}
