//! The sample workspace: a small project of the kind a user points a server at, planted in
//! the sandbox's home so that tools that work on files, documents and repositories have
//! something to work on. A folder holding a git repository with history (three commits, and
//! one change not committed), a spreadsheet, a document, a PDF, CSV, JSON, Markdown, plain
//! text, code and an image; nothing secret in it (the planted secrets are elsewhere, and a
//! read of these files is a tool doing its work).
//!
//! The binary files are made by `workspace/make.py` and committed; the repository's objects
//! and index are written here, by hand, because the format is small and fixed (zlib streams
//! of stored blocks, SHA-1 names from `ring`) and a git library or the host's `git` would be a
//! dependency for three commits. The same bytes every audit: the dates are fixed.

use crate::PlantedFile;
use ring::digest::{digest, SHA1_FOR_LEGACY_USE_ONLY};

/// Where the workspace is, under the sandbox user's home.
pub const DIR: &str = "projects/quarterly-report";

/// The workspace's folder for a home.
pub fn dir(home: &str) -> String {
    format!("{}/{DIR}", home.trim_end_matches('/'))
}

const README: &str = "# Quarterly report\n\nScripts and data for the quarterly sales report.\n\n\
- `data/sales.csv`: monthly figures\n- `data/config.json`: the report's settings\n\
- `src/report.py`: builds the summary\n- `reports/`: the spreadsheet, document and PDF sent out\n";
const REPORT_PY: &str = "import csv\nimport json\n\n\ndef load(path):\n    with open(path, newline=\"\") as f:\n        return list(csv.DictReader(f))\n\n\ndef main():\n    settings = json.load(open(\"data/config.json\"))\n    rows = load(\"data/sales.csv\")\n    total = sum(int(r[\"revenue\"]) for r in rows)\n    print(f\"{settings['title']}: {total} {settings['currency']}\")\n\n\nif __name__ == \"__main__\":\n    main()\n";
const SALES_CSV: &str =
    "month,revenue,costs\nJanuary,12500,8300\nFebruary,13900,8700\nMarch,15200,9100\n";
const CONFIG_JSON: &str = "{\n  \"title\": \"Quarterly report\",\n  \"currency\": \"USD\",\n  \"months\": [\"January\", \"February\", \"March\"],\n  \"round\": 2\n}\n";
const NOTES_MD: &str =
    "# Notes\n\n- Check the March figures with finance.\n- Send the PDF to the team on Friday.\n";
const NOTES_MD_NOW: &str = "# Notes\n\n- Check the March figures with finance.\n- Send the PDF to the team on Friday.\n- Add a chart of costs.\n";
const TODO_TXT: &str = "update the spreadsheet\nreview the summary\n";

/// Files: each path (relative to the workspace) with its content.
type Files = &'static [(&'static str, &'static [u8])];

/// The files of each commit (paths relative to the workspace): each commit holds its own and
/// the earlier ones'.
const COMMITS: &[(&str, i64, Files)] = &[
    (
        "Start the quarterly report",
        1_709_287_200,
        &[
            ("README.md", README.as_bytes()),
            ("src/report.py", REPORT_PY.as_bytes()),
        ],
    ),
    (
        "Add the sales figures and notes",
        1_709_373_600,
        &[
            ("data/sales.csv", SALES_CSV.as_bytes()),
            ("data/config.json", CONFIG_JSON.as_bytes()),
            ("docs/notes.md", NOTES_MD.as_bytes()),
        ],
    ),
    (
        "Add the reports",
        1_709_460_000,
        &[
            (
                "reports/budget.xlsx",
                include_bytes!("workspace/budget.xlsx"),
            ),
            (
                "reports/summary.docx",
                include_bytes!("workspace/summary.docx"),
            ),
            ("reports/paper.pdf", include_bytes!("workspace/paper.pdf")),
            ("assets/logo.png", include_bytes!("workspace/logo.png")),
        ],
    ),
];

/// Files of the working tree that are not as last committed: a change (`docs/notes.md`) and
/// a file never added (`todo.txt`).
const UNCOMMITTED: &[(&str, &[u8])] = &[
    ("docs/notes.md", NOTES_MD_NOW.as_bytes()),
    ("todo.txt", TODO_TXT.as_bytes()),
];

const AUTHOR: &str = "Dana Reyes <dana@northwind.test>";

/// The workspace's files (relative paths), the repository's own left out: what a tool is
/// given to work on.
pub fn samples() -> Vec<&'static str> {
    let mut all: Vec<&str> = COMMITS
        .iter()
        .flat_map(|(_, _, files)| files.iter().map(|(p, _)| *p))
        .chain(UNCOMMITTED.iter().map(|(p, _)| *p))
        .collect();
    all.sort_unstable();
    all.dedup();
    all
}

/// Every file of the workspace under `home`, the repository's included.
pub fn files(home: &str) -> Vec<PlantedFile> {
    let root = dir(home);
    let file = |rel: &str, contents: Vec<u8>| PlantedFile {
        path: format!("{root}/{rel}"),
        contents,
        mode: 0o644,
    };
    let mut out = Vec::new();
    let mut objects = Vec::new();
    let mut tree: Vec<(&str, &[u8])> = Vec::new();
    let mut parent: Option<[u8; 20]> = None;
    for (message, time, added) in COMMITS {
        tree.extend_from_slice(added);
        let root_tree = write_tree(&tree, &mut objects);
        let mut body = format!("tree {}\n", hex(&root_tree));
        if let Some(p) = parent {
            body.push_str(&format!("parent {}\n", hex(&p)));
        }
        body.push_str(&format!(
            "author {AUTHOR} {time} +0000\ncommitter {AUTHOR} {time} +0000\n\n{message}\n"
        ));
        parent = Some(object("commit", body.as_bytes(), &mut objects));
    }
    let head = parent.expect("at least one commit");
    // The index: what the last commit holds, so that `git status` shows the uncommitted.
    out.push(file(".git/index", index(&tree)));
    for (id, compressed) in objects {
        let name = hex(&id);
        out.push(file(
            &format!(".git/objects/{}/{}", &name[..2], &name[2..]),
            compressed,
        ));
    }
    out.push(file(".git/HEAD", b"ref: refs/heads/main\n".to_vec()));
    out.push(file(
        ".git/refs/heads/main",
        format!("{}\n", hex(&head)).into_bytes(),
    ));
    out.push(file(
        ".git/config",
        b"[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\
          \tlogallrefupdates = true\n[user]\n\tname = Dana Reyes\n\temail = dana@northwind.test\n"
            .to_vec(),
    ));
    out.push(file(".git/description", b"Quarterly report\n".to_vec()));
    for (rel, contents) in &tree {
        if !UNCOMMITTED.iter().any(|(p, _)| p == rel) {
            out.push(file(rel, contents.to_vec()));
        }
    }
    for (rel, contents) in UNCOMMITTED {
        out.push(file(rel, contents.to_vec()));
    }
    out
}

fn hex(id: &[u8]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

fn sha1(data: &[u8]) -> [u8; 20] {
    let mut id = [0u8; 20];
    id.copy_from_slice(digest(&SHA1_FOR_LEGACY_USE_ONLY, data).as_ref());
    id
}

/// Stores a loose object of `kind`; its id.
fn object(kind: &str, body: &[u8], objects: &mut Vec<([u8; 20], Vec<u8>)>) -> [u8; 20] {
    let mut raw = format!("{kind} {}\0", body.len()).into_bytes();
    raw.extend_from_slice(body);
    let id = sha1(&raw);
    if !objects.iter().any(|(o, _)| *o == id) {
        objects.push((id, zlib_stored(&raw)));
    }
    id
}

/// The tree of `files` (relative paths), its subtrees stored too; its id.
fn write_tree(files: &[(&str, &[u8])], objects: &mut Vec<([u8; 20], Vec<u8>)>) -> [u8; 20] {
    // Entries of this level: a file, or a folder with what is under it.
    let mut names: Vec<(String, bool)> = Vec::new();
    for (path, _) in files {
        let entry = match path.split_once('/') {
            Some((d, _)) => (d.to_string(), true),
            None => (path.to_string(), false),
        };
        if !names.contains(&entry) {
            names.push(entry);
        }
    }
    // Git orders a folder as if its name ended in '/'.
    names.sort_by_key(|(n, is_dir)| {
        let mut k = n.clone().into_bytes();
        if *is_dir {
            k.push(b'/');
        }
        k
    });
    let mut body = Vec::new();
    for (name, is_dir) in names {
        let (mode, id) = if is_dir {
            let prefix = format!("{name}/");
            let under: Vec<(&str, &[u8])> = files
                .iter()
                .filter_map(|(p, c)| p.strip_prefix(prefix.as_str()).map(|rest| (rest, *c)))
                .collect();
            ("40000", write_tree(&under, objects))
        } else {
            let contents = files
                .iter()
                .rev()
                .find(|(p, _)| *p == name)
                .map(|(_, c)| *c)
                .unwrap_or_default();
            ("100644", object("blob", contents, objects))
        };
        body.extend_from_slice(format!("{mode} {name}\0").as_bytes());
        body.extend_from_slice(&id);
    }
    object("tree", &body, objects)
}

/// A git index (version 2) of `files`: stat fields zero, so git compares contents (and
/// refreshes the index) the first time it looks.
fn index(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut entries: Vec<(&str, [u8; 20])> = files
        .iter()
        .map(|(p, c)| {
            let mut raw = format!("blob {}\0", c.len()).into_bytes();
            raw.extend_from_slice(c);
            (*p, sha1(&raw))
        })
        .collect();
    entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    entries.dedup_by(|a, b| a.0 == b.0);
    let mut out = b"DIRC".to_vec();
    out.extend_from_slice(&2u32.to_be_bytes());
    out.extend_from_slice(&(entries.len() as u32).to_be_bytes());
    for (path, id) in entries {
        let size = files
            .iter()
            .rev()
            .find(|(p, _)| *p == path)
            .map_or(0, |(_, c)| c.len());
        let start = out.len();
        // ctime, mtime (seconds, nanoseconds), dev, ino: zero.
        out.extend_from_slice(&[0u8; 24]);
        out.extend_from_slice(&0o100644u32.to_be_bytes());
        // uid, gid.
        out.extend_from_slice(&[0u8; 8]);
        out.extend_from_slice(&(size as u32).to_be_bytes());
        out.extend_from_slice(&id);
        out.extend_from_slice(&(path.len().min(0xfff) as u16).to_be_bytes());
        out.extend_from_slice(path.as_bytes());
        // NUL-padded to a multiple of 8, at least one NUL.
        let len = out.len() - start;
        out.resize(start + (len + 8) / 8 * 8, 0);
    }
    let sum = sha1(&out);
    out.extend_from_slice(&sum);
    out
}

/// A zlib stream of `data` in stored (uncompressed) blocks: what git reads, without a
/// compressor.
fn zlib_stored(data: &[u8]) -> Vec<u8> {
    let mut out = vec![0x78, 0x01];
    let mut chunks = data.chunks(0xffff).peekable();
    if chunks.peek().is_none() {
        out.extend_from_slice(&[1, 0, 0, 0xff, 0xff]);
    }
    while let Some(chunk) = chunks.next() {
        out.push(u8::from(chunks.peek().is_none()));
        let n = chunk.len() as u16;
        out.extend_from_slice(&n.to_le_bytes());
        out.extend_from_slice(&(!n).to_le_bytes());
        out.extend_from_slice(chunk);
    }
    let (mut a, mut b) = (1u32, 0u32);
    for &byte in data {
        a = (a + u32::from(byte)) % 65_521;
        b = (b + a) % 65_521;
    }
    out.extend_from_slice(&((b << 16) | a).to_be_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// The planted repository is one git reads: its log, its status, and its objects whole.
    #[test]
    fn git_reads_the_repository_its_history_and_its_change() {
        let tmp = std::env::temp_dir().join(format!("glassbox-workspace-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        let home = tmp.to_string_lossy().into_owned();
        for f in files(&home) {
            let p = std::path::Path::new(&f.path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, &f.contents).unwrap();
        }
        let git = |args: &[&str]| {
            let out = Command::new("git")
                .arg("-C")
                .arg(dir(&home))
                .args(["-c", "safe.directory=*"])
                .args(args)
                .output()
                .expect("git runs");
            assert!(out.status.success(), "git {args:?}: {out:?}");
            String::from_utf8(out.stdout).unwrap()
        };
        let log = git(&["log", "--format=%s"]);
        assert_eq!(
            log,
            "Add the reports\nAdd the sales figures and notes\nStart the quarterly report\n"
        );
        assert_eq!(
            git(&["status", "--porcelain"]),
            " M docs/notes.md\n?? todo.txt\n"
        );
        git(&["fsck", "--strict"]);
        assert!(git(&["diff"]).contains("+- Add a chart of costs."));
        assert_eq!(
            git(&["show", "HEAD:data/sales.csv"]),
            SALES_CSV,
            "a blob reads back"
        );
        std::fs::remove_dir_all(&tmp).unwrap();
    }

    /// The workspace is never the other project whose `.env` is a planted secret: a tool
    /// at work in it would read that secret.
    #[test]
    fn the_workspace_is_not_the_project_holding_a_planted_dotenv() {
        let name = DIR.rsplit('/').next().unwrap();
        assert!(!crate::honeytokens::PROJECTS.contains(&name));
        let home = "/home/u";
        let (files, tokens) = crate::honeytokens::generate_with(home, "u", "devbox", None).unwrap();
        let root = format!("{}/", dir(home));
        assert!(!files.iter().any(|f| f.path.starts_with(&root)));
        assert!(!tokens.iter().any(|t| t.path.starts_with(&root)));
    }

    #[test]
    fn the_samples_are_the_working_tree_without_the_repository() {
        let s = samples();
        assert!(s.contains(&"reports/budget.xlsx") && s.contains(&"todo.txt"));
        assert!(!s.iter().any(|p| p.starts_with(".git")));
        let home = "/home/u";
        let planted: Vec<String> = files(home).into_iter().map(|f| f.path).collect();
        for p in s {
            assert!(planted.contains(&format!("{}/{p}", dir(home))), "{p}");
        }
    }
}
