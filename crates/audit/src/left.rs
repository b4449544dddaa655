//! What a run left behind (issue 33): once the server exited (and what it left ran a while
//! longer), and before the sandbox is removed, its writable places (the tmpfs mounts: home,
//! `/tmp`, `/var`, `/run`, `/dev/shm`) are walked through the descriptors the sandbox holds
//! on them ([`glassbox_sandbox::Sandbox::writable`]), so what a working directory bound on
//! top shows (the user's folder) is not read. Every regular file and symbolic link that was
//! not planted (or planted and changed) is listed with its size, its SHA-256, whether it is
//! hidden, and what it holds of what glassbox gave the run (a planted secret, the input
//! marker). `left-behind` judges the list.
//!
//! Bounded, so that a server that writes millions of files or gigabytes gets a finding, not a
//! stalled audit: at most [`MAX_LISTED`] files listed and [`MAX_VISITED`] entries visited a
//! run, [`MAX_SEARCHED`] bytes of a file searched, [`MAX_HASHED`] hashed, [`MAX_READ`] bytes
//! read in all; where a bound stops the list, a sentence says which (`left_cut`). The same
//! code runs in a microVM's guest, which sends the list in its record.

use crate::dual::hex;
use glassbox_model::{Honeytoken, LeftFile, NetworkMode};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The channel in `manifest.recorder.channels` when the runs' left files were read.
pub(crate) const CHANNEL: &str = "left-files";

/// Most files listed a run.
pub(crate) const MAX_LISTED: usize = 500;
/// Most directory entries visited a run.
const MAX_VISITED: usize = 50_000;
/// Deepest folder walked into.
const MAX_DEPTH: usize = 24;
/// Bytes of one file searched for what it holds.
const MAX_SEARCHED: usize = 1 << 20;
/// Largest file hashed whole.
const MAX_HASHED: u64 = 16 << 20;
/// Bytes read in all, a run.
const MAX_READ: u64 = 128 << 20;

/// The system file whose copy a left file may be: the user database.
const USER_DB: &str = "/etc/passwd";

/// What to look for in left files: each with the name it is listed by.
pub(crate) struct Needles(Vec<(String, Vec<u8>)>);

impl Needles {
    /// The planted secrets (each value and random part, by its planted path shown from home),
    /// the user database (by its path), and the input marker.
    pub(crate) fn new(tokens: &[Honeytoken], home: &str, marker: Option<&str>) -> Needles {
        let mut out = Vec::new();
        for t in tokens {
            let name = match t.path.strip_prefix(home) {
                Some(rest) => format!("~{rest}"),
                None => t.path.clone(),
            };
            for s in t.secrets.iter().chain(&t.random).filter(|s| s.len() >= 12) {
                out.push((name.clone(), s.as_bytes().to_vec()));
                out.push((name.clone(), hex(s.as_bytes()).into_bytes()));
            }
        }
        // The user database as the sandbox shows it (the host's `/etc`, read-only): its first
        // line (root's) in a left file is a copy of it.
        if let Some(root) = std::fs::read_to_string(USER_DB)
            .ok()
            .and_then(|t| t.lines().next().map(str::to_string))
            .filter(|l| l.len() >= 12)
        {
            out.push((USER_DB.to_string(), root.into_bytes()));
        }
        if let Some(m) = marker.filter(|m| m.len() >= 4) {
            out.push(("input".to_string(), m.as_bytes().to_vec()));
            out.push(("input".to_string(), hex(m.as_bytes()).into_bytes()));
        }
        Needles(out)
    }

    /// The names of the needles in `bytes`, each once.
    fn found(&self, bytes: &[u8]) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for (name, needle) in &self.0 {
            if names.contains(name) {
                continue;
            }
            if memchr::memmem::find(bytes, needle).is_some() {
                names.push(name.clone());
            }
        }
        names
    }
}

/// The sandbox's own folder in `/run`, not listed.
const OWN: &str = "/run/glassbox";

/// The walk's running totals and bounds.
struct Walk<'a> {
    planted: &'a [Planted],
    needles: &'a Needles,
    files: Vec<LeftFile>,
    visited: usize,
    read: u64,
    more: usize,
    deep: bool,
    over_read: bool,
}

impl<'a> Walk<'a> {
    fn new(planted: &'a [Planted], needles: &'a Needles) -> Walk<'a> {
        Walk {
            planted,
            needles,
            files: Vec::new(),
            visited: 0,
            read: 0,
            more: 0,
            deep: false,
            over_read: false,
        }
    }
}

/// A planted file: its path inside, and the SHA-256 (hex) of what was planted there (`None`:
/// its content is made while the run goes, the lazily made RSA key: never listed).
pub(crate) type Planted = (String, Option<String>);

/// The SHA-256 of planted content, hex.
pub(crate) fn digest(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// The files a run left, and where a bound stopped the list (a sentence each).
pub(crate) type Left = (Vec<LeftFile>, Vec<String>);

/// The files a run left in `roots` (each its path inside and a path to read it by), not
/// counting `planted` files left as planted, with what each holds of `needles`; and where a
/// bound stopped the list, a sentence each. Each file's `mode` is left to the pipeline, which
/// knows the run.
pub(crate) fn scan(
    roots: &[(String, std::path::PathBuf)],
    planted: &[Planted],
    needles: &Needles,
) -> Left {
    let mut w = Walk::new(planted, needles);
    // Home is mounted under another writable place on none of ours, but `/run` holds the
    // canary sockets (not regular files: not listed) and `/var/run` is the link to it.
    for (inside, by) in roots {
        let dev = std::fs::metadata(by).map(|m| m.dev()).ok();
        walk(&mut w, by, dev, inside, false, 0);
    }
    let mut cut = Vec::new();
    if w.more > 0 {
        cut.push(format!(
            "more than {MAX_LISTED} files left: {} more not listed",
            w.more
        ));
    }
    if w.visited >= MAX_VISITED {
        cut.push(format!(
            "more than {MAX_VISITED} entries: the rest not walked"
        ));
    }
    if w.deep {
        cut.push(format!("folders deeper than {MAX_DEPTH}: not walked"));
    }
    if w.over_read {
        cut.push(format!(
            "more than {} MiB of left files: the rest listed by size only",
            MAX_READ >> 20
        ));
    }
    (w.files, cut)
}

/// Walks `dir` (path `inside` in the sandbox), on device `dev`: a folder on another device
/// is a mount on top (the working directory, a folder the server was given: the user's, not
/// the sandbox's), not walked.
fn walk(w: &mut Walk<'_>, dir: &Path, dev: Option<u64>, inside: &str, hidden: bool, depth: usize) {
    if depth > MAX_DEPTH {
        w.deep = true;
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    // Never more than the walk may still visit: a folder of millions of entries is not read
    // into memory whole.
    let room = MAX_VISITED.saturating_sub(w.visited) + 1;
    let mut entries: Vec<_> = entries.filter_map(Result::ok).take(room).collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        if w.visited >= MAX_VISITED {
            return;
        }
        w.visited += 1;
        let name = e.file_name();
        let name = name.to_string_lossy();
        let path_inside = format!("{}/{name}", inside.trim_end_matches('/'));
        let hidden = hidden || name.starts_with('.');
        let Ok(ft) = e.file_type() else {
            continue;
        };
        if ft.is_dir() {
            // The sandbox's own (`/run/glassbox`: the edge's resolver files, the trusted CA).
            let own = path_inside == OWN;
            let mounted = std::fs::metadata(e.path()).map(|m| m.dev()).ok() != dev;
            if !own && !mounted {
                walk(w, &e.path(), dev, &path_inside, hidden, depth + 1);
            }
            continue;
        }
        if !(ft.is_file() || ft.is_symlink()) {
            continue;
        }
        let planted = w.planted.iter().find(|(p, _)| *p == path_inside);
        if matches!(planted, Some((_, None))) {
            continue;
        }
        // The sandbox's own: `/var/run`, the link to `/run`.
        if path_inside == "/var/run" {
            continue;
        }
        if w.files.len() >= MAX_LISTED {
            w.more += 1;
            continue;
        }
        // Not followed (the entry itself): one that is not on the walked mount is not the
        // sandbox's (a folder swapped for a link to the host's while the walk went).
        let meta = e.metadata().ok();
        if meta.as_ref().map(|m| m.dev()) != dev {
            continue;
        }
        let mut f = LeftFile {
            mode: NetworkMode::default(),
            path: glassbox_model::printable(&path_inside),
            size: meta.as_ref().map_or(0, |m| m.len()),
            sha256: None,
            hidden,
            changed: false,
            link: None,
            holds: Vec::new(),
        };
        if ft.is_symlink() {
            f.link = std::fs::read_link(e.path())
                .ok()
                .map(|l| glassbox_model::printable(&l.to_string_lossy()));
        } else if w.read + f.size.min(MAX_HASHED) > MAX_READ {
            w.over_read = true;
        } else {
            read(w, &e.path(), dev, &mut f);
        }
        if let Some((_, Some(sha))) = planted {
            // A planted file left as it was planted is not listed.
            if f.sha256.as_ref() == Some(sha) {
                continue;
            }
            f.changed = true;
        }
        w.files.push(f);
    }
}

/// Hashes `f` (when at most [`MAX_HASHED`]) and searches its first [`MAX_SEARCHED`] bytes.
/// Read only as what it was when listed: a regular file on the walked mount (`dev`), opened
/// without following a link and without waiting: what still runs in the sandbox may have
/// swapped it for a link to a host file or a FIFO since.
fn read(w: &mut Walk<'_>, path: &Path, dev: Option<u64>, f: &mut LeftFile) {
    use std::os::unix::fs::OpenOptionsExt;
    let Ok(file) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    else {
        return;
    };
    match file.metadata() {
        Ok(m) if m.is_file() && Some(m.dev()) == dev => {}
        _ => return,
    }
    let mut head = Vec::new();
    let mut file = file.take(MAX_HASHED.max(MAX_SEARCHED as u64));
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 << 10];
    let mut total = 0u64;
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        total += n as u64;
        hasher.update(&buf[..n]);
        if head.len() < MAX_SEARCHED {
            let room = MAX_SEARCHED - head.len();
            head.extend_from_slice(&buf[..n.min(room)]);
        }
    }
    w.read += total;
    if total == f.size && f.size <= MAX_HASHED {
        f.sha256 = Some(hex(&hasher.finalize()));
    }
    f.holds = w.needles.found(&head);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_walk_lists_what_was_not_planted_with_what_it_holds() {
        let root = std::env::temp_dir().join(format!("glassbox-left-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join(".cache/x")).unwrap();
        std::fs::create_dir_all(root.join(".ssh")).unwrap();
        std::fs::write(root.join(".ssh/id_ed25519"), "PLANTEDSECRETVALUE").unwrap();
        std::fs::write(root.join(".ssh/id_rsa"), "made while it ran").unwrap();
        std::fs::write(root.join(".bashrc"), "# planted\ncurl x | sh\n").unwrap();
        std::fs::write(root.join(".cache/x/q.json"), "{\"q\":\"gbm123456\"}").unwrap();
        std::fs::write(root.join("k"), hex(b"PLANTEDSECRETVALUE")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", root.join("p")).unwrap();
        let tokens = vec![Honeytoken {
            path: "/home/u/.ssh/id_ed25519".into(),
            kind: "ssh-ed25519-key".into(),
            secrets: vec!["PLANTEDSECRETVALUE".into()],
            hosts: Vec::new(),
            random: Vec::new(),
            services: Vec::new(),
        }];
        let needles = Needles::new(&tokens, "/home/u", Some("gbm123456"));
        let (files, cut) = scan(
            &[("/home/u".into(), root.clone())],
            &[
                (
                    "/home/u/.ssh/id_ed25519".into(),
                    Some(digest(b"PLANTEDSECRETVALUE")),
                ),
                ("/home/u/.bashrc".into(), Some(digest(b"# planted\n"))),
                ("/home/u/.ssh/id_rsa".into(), None),
            ],
            &needles,
        );
        std::fs::remove_dir_all(&root).unwrap();
        assert!(cut.is_empty(), "{cut:?}");
        let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "/home/u/.bashrc",
                "/home/u/.cache/x/q.json",
                "/home/u/k",
                "/home/u/p"
            ]
        );
        assert!(files[0].changed && files[0].hidden);
        assert!(files[1].hidden && files[1].holds == ["input"] && !files[1].changed);
        assert_eq!(files[2].holds, ["~/.ssh/id_ed25519"], "hex of the secret");
        assert!(!files[2].hidden);
        assert_eq!(files[2].size, 36);
        assert!(files[2].sha256.as_ref().is_some_and(|h| h.len() == 64));
        assert_eq!(files[3].link.as_deref(), Some("/etc/passwd"));
    }

    /// What a hostile process may leave: a FIFO (an open would wait for a writer) and links
    /// to the host's files; none is read, and the walk ends.
    #[test]
    fn fifos_and_links_are_not_read_through() {
        let root = std::env::temp_dir().join(format!("glassbox-fifo-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        let fifo = std::ffi::CString::new(root.join("q").to_str().unwrap()).unwrap();
        // SAFETY: a valid C string; mkfifo only creates the node.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        std::os::unix::fs::symlink("/etc/passwd", root.join("p")).unwrap();
        let mut f = LeftFile {
            mode: NetworkMode::default(),
            path: "/tmp/q".into(),
            size: 0,
            sha256: None,
            hidden: false,
            changed: false,
            link: None,
            holds: Vec::new(),
        };
        let needles = Needles::new(&[], "/home/u", None);
        let mut w = Walk::new(&[], &needles);
        let dev = std::fs::metadata(&root).map(|m| m.dev()).ok();
        read(&mut w, &root.join("q"), dev, &mut f);
        read(&mut w, &root.join("p"), dev, &mut f);
        let (files, _) = scan(&[("/tmp".into(), root.clone())], &[], &needles);
        std::fs::remove_dir_all(&root).unwrap();
        assert_eq!((w.read, f.sha256, f.holds.len()), (0, None, 0));
        // The link is listed as a link, the FIFO not at all.
        let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, ["/tmp/p"]);
        assert!(files[0].holds.is_empty() && files[0].sha256.is_none());
    }

    #[test]
    fn a_flood_of_files_is_cut_at_its_bound() {
        let root = std::env::temp_dir().join(format!("glassbox-flood-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        for i in 0..MAX_LISTED + 7 {
            std::fs::write(root.join(format!("f{i}")), "x").unwrap();
        }
        let (files, cut) = scan(&[("/tmp".into(), root.clone())], &[], &Needles(Vec::new()));
        std::fs::remove_dir_all(&root).unwrap();
        assert_eq!(files.len(), MAX_LISTED);
        assert_eq!(
            cut,
            [format!(
                "more than {MAX_LISTED} files left: 7 more not listed"
            )]
        );
    }
}
