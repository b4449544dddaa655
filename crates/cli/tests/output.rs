//! Standard output that cannot be written: a reader that went away stops the output, not the
//! command (no panic, the command's own status); a full disk is an error (status 2), said on
//! standard error.

use std::process::{Command, Stdio};

fn coverage() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_glassbox"));
    c.arg("coverage")
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .stderr(Stdio::piped());
    c
}

#[test]
fn a_reader_that_went_away_stops_the_output_not_the_command() {
    let mut child = coverage().stdout(Stdio::piped()).spawn().unwrap();
    // The read end closed before glassbox writes: its first write gets EPIPE.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");
}

#[test]
fn a_full_disk_behind_standard_output_is_an_error() {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let out = coverage().stdout(full).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("cannot write to standard output"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(2), "{stderr}");
}
