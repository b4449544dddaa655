//! The codec's tests: the scanner against `serde_json` on every kind of event and every cut of
//! each line, the word scans, and whole files read back across chunks.

use super::read::CHUNK;
use super::words::{find_byte, plain_prefix};
use super::*;
use crate::{Bytes, Event, EventKind, Phase, SockAddr};
use std::path::PathBuf;

/// Events of every kind, with the strings a hostile program may pass: quotes, backslashes,
/// control characters, non-ASCII, bytes that are not UTF-8, empty ones; and the extreme
/// numbers.
fn samples() -> Vec<Event> {
    let odd = [
        Bytes::from("/home/u/.ssh/id_rsa"),
        Bytes::from("relative/./x/../y"),
        Bytes::from("/tmp/é ü 中 \u{2028} \u{7f}"),
        Bytes::from("/tmp/quote\"x"),
        Bytes::from("/tmp/back\\slash"),
        Bytes::from("/tmp/new\nline\ttab\u{1b}[31m"),
        Bytes(b"/tmp/\xff\xfe".to_vec()),
        Bytes::from(""),
        Bytes::from("/"),
    ];
    let mut kinds = Vec::new();
    for (n, p) in odd.iter().enumerate() {
        kinds.push(EventKind::Open {
            syscall: "openat".into(),
            path: p.clone(),
            flags: [0, 0o2101, u64::MAX][n % 3],
            flags_text: "O_WRONLY|O_CREAT".into(),
            result: [Some(3), None, Some(-2), Some(i64::MIN), Some(i64::MAX)][n % 5],
        });
        kinds.push(EventKind::Stat {
            syscall: "newfstatat".into(),
            path: p.clone(),
        });
        kinds.push(EventKind::Exec {
            syscall: "execve".into(),
            path: p.clone(),
            argv: odd[..n % 5].to_vec(),
        });
        kinds.push(EventKind::Image {
            path: p.clone(),
            shown: odd[(n + 1) % odd.len()].clone(),
        });
        kinds.push(EventKind::Honeytoken {
            path: p.clone(),
            access: "close-nowrite".into(),
            dir: n % 2 == 0,
        });
    }
    for addr in [
        SockAddr::Inet {
            ip: "192.0.2.1".into(),
            port: 443,
        },
        SockAddr::Inet6 {
            ip: "2001:db8::1".into(),
            port: u16::MAX,
        },
        SockAddr::Unix {
            path: Bytes::from("/run/user/1000/bus"),
            is_abstract: false,
        },
        SockAddr::Unix {
            path: Bytes(vec![0xff, b'x']),
            is_abstract: true,
        },
        SockAddr::Other { family_id: 16 },
    ] {
        kinds.push(EventKind::Connect {
            syscall: "sendto".into(),
            fd: -1,
            addr: addr.clone(),
            sock_type: None,
        });
        kinds.push(EventKind::Connect {
            syscall: "connect".into(),
            fd: 7,
            addr: addr.clone(),
            sock_type: Some(2),
        });
        kinds.push(EventKind::Bind { fd: i32::MAX, addr });
    }
    kinds.push(EventKind::Socket {
        domain: 2,
        sock_type: i32::MIN,
        protocol: 0,
    });
    kinds.push(EventKind::Refused {
        syscall: "i386:5".into(),
        errno: 38,
        reason: "a foreign \"ABI\"".into(),
    });
    kinds.push(EventKind::Refused {
        syscall: "io_uring_setup".into(),
        errno: 1,
        reason: String::new(),
    });
    let phases = [
        Phase::Call("read_file".into()),
        Phase::Call("read_file".into()),
        Phase::Startup,
        Phase::Call("".into()),
        Phase::Initialize,
        Phase::Call("a \"b\"".into()),
        Phase::List,
        Phase::Call("call:x".into()),
        Phase::Shutdown,
    ];
    kinds
        .into_iter()
        .enumerate()
        .map(|(n, kind)| Event {
            id: [1, u64::MAX, 0][n % 3] - (n % 3 == 1 && n % 2 == 1) as u64,
            t_ns: [0, 1_750, u64::MAX][n % 3],
            pid: [1, i32::MAX, i32::MIN, 0][n % 4],
            ppid: [0, -3, 7][n % 3],
            phase: phases[n % phases.len()].clone(),
            kind,
        })
        .collect()
}

fn lines() -> Vec<Vec<u8>> {
    samples()
        .iter()
        .map(|e| serde_json::to_vec(e).unwrap())
        .collect()
}

/// `reader` reads `line` exactly as `serde_json` and the `Deserialize` impl do.
fn agrees(reader: &mut EventReader, line: &[u8]) {
    let want: Option<Event> = serde_json::from_slice(line).ok();
    let got = reader.parse(line).ok().cloned();
    assert_eq!(got, want, "{}", String::from_utf8_lossy(line));
}

#[test]
fn plain_lines_are_scanned_and_read_as_serde_reads_them() {
    let mut r = EventReader::default();
    let mut plain = 0;
    for line in lines() {
        // Escapes and `{"bytes": …}` are left to serde_json; everything else is scanned.
        if !line.contains(&b'\\') && !line.windows(8).any(|w| w == b"{\"bytes\"") {
            plain += 1;
        }
        agrees(&mut r, &line);
    }
    assert!(plain > 20, "{plain}");
    assert_eq!(r.scanned(), plain);
    // What the recorder writes most, read twice in a row (the second into the same slot).
    let line = br#"{"id":7,"t_ns":12,"pid":3,"ppid":1,"phase":"call:fetch","kind":"open","syscall":"openat","path":"/usr/lib/x.so","flags":524288,"flags_text":"O_RDONLY|O_CLOEXEC","result":3}"#;
    for _ in 0..2 {
        let before = r.scanned();
        agrees(&mut r, line);
        assert_eq!(r.scanned(), before + 1);
    }
}

#[test]
fn every_cut_deletion_and_insertion_reads_as_serde_does() {
    let mut r = EventReader::default();
    for line in lines() {
        for at in 0..=line.len() {
            agrees(&mut r, &line[..at]);
            if at < line.len() {
                let mut v = line.clone();
                v.remove(at);
                agrees(&mut r, &v);
                let mut v = line.clone();
                v[at] = 0xff;
                agrees(&mut r, &v);
            }
            for b in [
                b' ', b'"', b',', b'0', b'-', b'.', b'e', b'}', b'\\', 0x01, 0xc3,
            ] {
                let mut v = line.clone();
                v.insert(at, b);
                agrees(&mut r, &v);
            }
        }
    }
}

#[test]
fn keys_in_another_order_duplicates_and_odd_values_read_as_serde_does() {
    let mut r = EventReader::default();
    let base = r#""id":1,"t_ns":2,"pid":3,"ppid":1,"phase":"list""#;
    for line in [
        format!(r#"{{{base},"kind":"stat","syscall":"stat","path":"/x"}}"#),
        format!(r#"{{"kind":"stat","syscall":"stat","path":"/x",{base}}}"#),
        format!(r#"{{"path":"/x","syscall":"stat","kind":"stat",{base}}}"#),
        format!(r#"{{{base},"kind":"stat","syscall":"stat","path":"/x","extra":1}}"#),
        format!(r#"{{{base},"kind":"stat","syscall":"stat","path":"/x","fd":"no"}}"#),
        format!(r#"{{{base},"kind":"stat","syscall":"stat","path":"/x","path":"/y"}}"#),
        format!(r#"{{{base},"kind":"stat","kind":"stat","syscall":"stat","path":"/x"}}"#),
        format!(r#"{{{base},"id":1,"kind":"stat","syscall":"stat","path":"/x"}}"#),
        format!(r#"{{{base},"kind":"stat","syscall":"stat","path":{{"bytes":"/w=="}}}}"#),
        format!(r#"{{{base},"kind":"stat","syscall":"stat"}}"#),
        format!(r#"{{{base},"kind":2,"syscall":"stat","path":"/x"}}"#),
        format!(r#"{{{base},"kind":"frob","path":"/x"}}"#),
        format!(r#"{{{base},"kind":"open","syscall":"o","path":"/x","flags":0,"flags_text":"","result":null}}"#),
        format!(r#"{{{base},"kind":"open","syscall":"o","path":"/x","flags":1.0,"flags_text":""}}"#),
        format!(r#"{{{base},"kind":"open","syscall":"o","path":"/x","flags":1e3,"flags_text":""}}"#),
        format!(r#"{{{base},"kind":"open","syscall":"o","path":"/x","flags":-0,"flags_text":""}}"#),
        format!(r#"{{{base},"kind":"open","syscall":"o","path":"/x","flags":18446744073709551616,"flags_text":""}}"#),
        format!(r#"{{{base},"kind":"open","syscall":"o","path":"/x","flags":01,"flags_text":""}}"#),
        format!(r#"{{{base},"kind":"open","syscall":"o","path":"/x","flags":0,"flags_text":"","result":-9223372036854775808}}"#),
        format!(r#"{{{base},"kind":"open","syscall":"o","path":"/x","flags":0,"flags_text":"","result":-9223372036854775809}}"#),
        format!(r#"{{{base},"kind":"socket","domain":1,"sock_type":1,"protocol":4294967296}}"#),
        format!(r#"{{{base},"kind":"connect","syscall":"c","fd":3,"addr":{{"ip":"192.0.2.1","family":"inet","port":1}}}}"#),
        format!(r#"{{{base},"kind":"connect","syscall":"c","fd":3,"addr":{{"family":"inet","ip":"192.0.2.1","port":65536}}}}"#),
        format!(r#"{{{base},"kind":"connect","syscall":"c","fd":3,"addr":{{"family":"inet","ip":"192.0.2.1","port":1,"x":0}}}}"#),
        format!(r#"{{{base},"kind":"connect","syscall":"c","fd":3,"addr":{{"family":"inet","port":1,"ip":"192.0.2.1"}}}}"#),
        format!(r#"{{{base},"kind":"connect","syscall":"c","fd":3,"addr":{{"family":"inet","ip":"192.0.2.1"}}}}"#),
        format!(r#"{{{base},"kind":"connect","syscall":"c","fd":3,"addr":{{"family":"unix","abstract":true,"path":"p"}}}}"#),
        format!(r#"{{{base},"kind":"connect","syscall":"c","fd":3,"addr":{{"family":"other","family_id":7}}}}"#),
        format!(r#"{{{base},"kind":"connect","syscall":"c","fd":3,"addr":{{"family":"carrier pigeon"}}}}"#),
        format!(r#"{{{base},"kind":"exec","syscall":"execve","path":"/bin/sh","argv":[]}}"#),
        format!(r#"{{{base},"kind":"exec","syscall":"execve","path":"/bin/sh","argv":["sh",1]}}"#),
        format!(r#"{{{base},"kind":"exec","syscall":"execve","path":"/bin/sh","argv":["sh",]}}"#),
        format!(r#"{{{base},"kind":"honeytoken","path":"/x","access":"open","dir":tru}}"#),
        format!(r#"{{{base},"kind":"stat","syscall":"stat","path":"/x"}}x"#),
        r#"{"id":1,"t_ns":2,"pid":3,"ppid":1,"phase":"call","kind":"stat","syscall":"s","path":"/x"}"#.to_string(),
        r#"{"id":1,"t_ns":2,"pid":2147483648,"ppid":1,"phase":"list","kind":"stat","syscall":"s","path":"/x"}"#.to_string(),
        "{}".to_string(),
        "null".to_string(),
        "[]".to_string(),
    ] {
        agrees(&mut r, line.as_bytes());
    }
}

/// The slot of a kind is read into again and again: nothing of an earlier event may show
/// through a later one (a result that is gone, a shorter argv, another address family, a
/// phase that changed).
#[test]
fn a_reused_slot_keeps_nothing_of_the_previous_event() {
    let mut r = EventReader::default();
    let all = samples();
    for order in [
        all.clone(),
        all.iter().rev().cloned().collect::<Vec<_>>(),
        all.iter()
            .step_by(3)
            .chain(all.iter().skip(1))
            .cloned()
            .collect(),
    ] {
        for e in order {
            let line = serde_json::to_vec(&e).unwrap();
            assert_eq!(r.parse(&line).unwrap(), &e);
        }
    }
}

#[test]
fn word_scans_find_the_first_byte() {
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let alphabet = [
        b'a', b'"', b'\\', b'\n', 0x00, 0x1f, 0x20, 0x7f, 0x80, 0xff, b'/',
    ];
    for _ in 0..20_000 {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let len = (rng % 40) as usize;
        let mut s = vec![b'x'; len];
        for (i, b) in s.iter_mut().enumerate() {
            let r = rng.rotate_left(i as u32 * 5);
            if r.is_multiple_of(7) {
                *b = alphabet[(r >> 8) as usize % alphabet.len()];
            }
        }
        let naive_plain = s
            .iter()
            .position(|&c| c == b'"' || c == b'\\' || c < 0x20)
            .unwrap_or(s.len());
        assert_eq!(
            plain_prefix(&s),
            (naive_plain, s[..naive_plain].is_ascii()),
            "{s:?}"
        );
        assert_eq!(
            find_byte(&s, b'\n'),
            s.iter().position(|&c| c == b'\n'),
            "{s:?}"
        );
    }
}

/// A directory under the system temp dir, removed on drop.
struct Tmp(PathBuf);

impl Tmp {
    fn new(what: &str) -> Tmp {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let d =
            std::env::temp_dir().join(format!("glassbox-bundle-{what}-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        Tmp(d)
    }
}

impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn events_are_read_line_by_line_across_chunks_and_a_truncated_last_line_is_skipped() {
    for ending in [&b"\n"[..], b"\r\n", b" \n"] {
        read_back(ending);
    }
}

fn read_back(ending: &[u8]) {
    let dir = Tmp::new("read");
    let path = dir.0.join("events.jsonl");
    let all = samples();
    let mut text = Vec::new();
    // Enough lines to cross several chunks, one longer than a chunk, and blank lines.
    let mut want = Vec::new();
    while text.len() < 3 * CHUNK {
        for e in &all {
            serde_json::to_writer(&mut text, e).unwrap();
            text.extend_from_slice(ending);
            want.push(e.clone());
        }
        text.extend_from_slice(b"\n  \n");
    }
    let long = Event {
        kind: EventKind::Stat {
            syscall: "stat".into(),
            path: Bytes(vec![b'a'; CHUNK + 17]),
        },
        ..all[0].clone()
    };
    serde_json::to_writer(&mut text, &long).unwrap();
    text.push(b'\n');
    want.push(long);
    // A glassbox killed mid-write.
    text.extend_from_slice(br#"{"id":9,"t_ns":1,"pid"#);
    std::fs::write(&path, &text).unwrap();
    let mut got = Vec::new();
    let n = read_events(&path, |e| got.push(e.clone())).unwrap();
    assert_eq!(n as usize, want.len());
    assert!(got == want, "the events read back differ");
    // The owned reader agrees.
    let mut owned: Vec<Event> = Vec::new();
    assert_eq!(read_lines(&path, |e| owned.push(e)).unwrap(), n);
    assert!(owned == want);
    // The pre-pass hands out exactly the calls with a destination, in order.
    let mut calls = Vec::new();
    read_calls(&path, &mut |e| calls.push(e.clone())).unwrap();
    let connects: Vec<Event> = want
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Connect { .. }))
        .cloned()
        .collect();
    assert!(!connects.is_empty());
    assert!(calls == connects, "the pre-pass read other calls");
}

#[test]
fn a_bad_line_is_an_error_naming_the_file_and_line() {
    let dir = Tmp::new("bad");
    let path = dir.0.join("events.jsonl");
    let good = serde_json::to_string(&samples()[0]).unwrap();
    std::fs::write(&path, format!("{good}\n\n{{\"id\":1}}\n{good}\n")).unwrap();
    let err = read_events(&path, |_| {}).unwrap_err().to_string();
    assert!(
        err.starts_with(&format!("{}:3: missing field", path.display())),
        "{err}"
    );
    // The last line, complete but bad, is an error too (only a cut one is skipped).
    std::fs::write(&path, format!("{good}\n{{\"id\":1}}\n")).unwrap();
    assert!(read_events(&path, |_| {}).is_err());
    std::fs::write(&path, format!("{good}\n{{\"id\":1}}")).unwrap();
    assert_eq!(read_events(&path, |_| {}).unwrap(), 1);
    // A missing file names itself.
    let err = read_events(&dir.0.join("nope.jsonl"), |_| {}).unwrap_err();
    assert!(err.to_string().contains("nope.jsonl"), "{err}");
}
