//! The documentation holds together: every relative link of the README and the pages beside it
//! leads somewhere, the README stays short, its map of the tree is true, and it names every
//! command the binary has.
//!
//! The pages: `README.md`, every `docs/*.md`, `bench/README.md`, `fuzz/README.md`,
//! `fixtures/README.md`, `regressions/README.md` and `deploy/README.md`. In each, outside fenced
//! blocks and code spans, every inline link `[text](target)` (and image) and every reference
//! definition `[label]: target` whose target is not `http:`, `https:` or `mailto:` must name a
//! file or folder that exists, relative to the page; a `#fragment` (also `(#fragment)` alone,
//! into the page itself) must name a heading of a Markdown target by GitHub's rule: the
//! heading's text lowercased, every character but letters, digits, spaces, `-` and `_` dropped,
//! each space made `-`, and a repeated slug given `-1`, `-2`... in order (ATX headings only;
//! none of the pages uses the underlined form), or an `<a id=...>`/`<a name=...>` anchor.
//!
//! std only: a small reader of just the Markdown these pages use, not a Markdown parser.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The README's limit: what a new user reads first, in one sitting (issue 36).
const README_MAX_BYTES: usize = 12_288;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The pages whose links are checked, relative to the root.
fn pages() -> Vec<PathBuf> {
    let root = root();
    let mut pages: Vec<PathBuf> = vec!["README.md".into()];
    let mut docs: Vec<PathBuf> = fs::read_dir(root.join("docs"))
        .expect("docs/")
        .map(|e| e.expect("docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .map(|p| Path::new("docs").join(p.file_name().expect("a file name")))
        .collect();
    docs.sort();
    pages.extend(docs);
    for p in [
        "bench/README.md",
        "fuzz/README.md",
        "fixtures/README.md",
        "regressions/README.md",
        "deploy/README.md",
    ] {
        pages.push(p.into());
    }
    pages
}

fn read(rel: &Path) -> String {
    let path = root().join(rel);
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", rel.display()))
}

/// The page's lines with fenced blocks blanked (so line numbers stay) and code spans replaced
/// by spaces of the same length, so that neither is read as a link or a heading.
fn prose_lines(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fence: Option<(char, usize)> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        let marker = trimmed.chars().next().filter(|c| *c == '`' || *c == '~');
        let run = marker.map_or(0, |m| trimmed.chars().take_while(|c| *c == m).count());
        match (fence, marker) {
            (None, Some(m)) if run >= 3 => {
                fence = Some((m, run));
                out.push(String::new());
                continue;
            }
            (Some((m, n)), Some(c)) if c == m && run >= n && trimmed[run..].trim().is_empty() => {
                fence = None;
                out.push(String::new());
                continue;
            }
            _ => {}
        }
        if fence.is_some() {
            out.push(String::new());
        } else {
            out.push(blank_code_spans(line));
        }
    }
    out
}

/// `line` with every code span (a run of backticks to the next run of the same length)
/// replaced by spaces; an unclosed run stays as it is.
fn blank_code_spans(line: &str) -> String {
    let chars: Vec<char> = line.chars().collect();
    let mut out = String::with_capacity(line.len());
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let n = chars[i..].iter().take_while(|c| **c == '`').count();
        let mut j = i + n;
        let mut close = None;
        while j < chars.len() {
            if chars[j] == '`' {
                let m = chars[j..].iter().take_while(|c| **c == '`').count();
                if m == n {
                    close = Some(j + m);
                    break;
                }
                j += m;
            } else {
                j += 1;
            }
        }
        match close {
            Some(end) => {
                out.extend(std::iter::repeat_n(' ', end - i));
                i = end;
            }
            None => {
                out.extend(&chars[i..i + n]);
                i += n;
            }
        }
    }
    out
}

/// The contents of the code spans of `line`, trimmed (for the README's map of the tree).
fn code_spans(line: &str) -> Vec<String> {
    let mut spans = Vec::new();
    let mut rest = line;
    while let Some(start) = rest.find('`') {
        let after = &rest[start..];
        let n = after.chars().take_while(|c| *c == '`').count();
        let ticks = &after[..n];
        let body = &after[n..];
        match body.find(ticks) {
            Some(end) => {
                spans.push(body[..end].trim().to_string());
                rest = &body[end + n..];
            }
            None => break,
        }
    }
    spans
}

/// The link targets of one prose line: inline links and images `[text](target "title")`, and a
/// reference definition `[label]: target`.
fn link_targets(line: &str) -> Vec<String> {
    let mut targets = Vec::new();
    let trimmed = line.trim_start();
    if let Some(rest) = trimmed.strip_prefix('[') {
        if let Some(close) = rest.find("]:") {
            if !rest[..close].contains(']') {
                if let Some(t) = rest[close + 2..].split_whitespace().next() {
                    targets.push(strip_angles(t).to_string());
                }
                return targets;
            }
        }
    }
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '[' || (i > 0 && chars[i - 1] == '\\') {
            i += 1;
            continue;
        }
        // The text, brackets nested.
        let mut depth = 0usize;
        let mut j = i;
        let mut end = None;
        while j < chars.len() {
            match chars[j] {
                '\\' => j += 1,
                '[' => depth += 1,
                ']' => {
                    depth -= 1;
                    if depth == 0 {
                        end = Some(j);
                        break;
                    }
                }
                _ => {}
            }
            j += 1;
        }
        let Some(close) = end else {
            i += 1;
            continue;
        };
        if chars.get(close + 1) != Some(&'(') {
            i += 1;
            continue;
        }
        // The destination, parentheses nested.
        let mut depth = 0usize;
        let mut k = close + 1;
        let mut dest_end = None;
        while k < chars.len() {
            match chars[k] {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        dest_end = Some(k);
                        break;
                    }
                }
                _ => {}
            }
            k += 1;
        }
        let Some(dest_end) = dest_end else {
            i += 1;
            continue;
        };
        let inside: String = chars[close + 2..dest_end].iter().collect();
        let inside = inside.trim();
        let target = if let Some(rest) = inside.strip_prefix('<') {
            rest.split('>').next().unwrap_or("")
        } else {
            inside.split_whitespace().next().unwrap_or("")
        };
        targets.push(target.to_string());
        // Links inside the text (an image in a link) are read too.
        i += 1;
    }
    targets
}

fn strip_angles(t: &str) -> &str {
    t.strip_prefix('<')
        .and_then(|t| t.strip_suffix('>'))
        .unwrap_or(t)
}

/// A heading's text as GitHub renders it for its slug: link syntax reduced to the link's text,
/// emphasis stars, backticks and a closing run of `#` dropped.
fn heading_text(raw: &str) -> String {
    let raw = raw.trim().trim_end_matches('#').trim_end();
    let mut out = String::new();
    let chars: Vec<char> = raw.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        // `](target)` after a link's text: drop the target.
        if chars[i] == ']' && chars.get(i + 1) == Some(&'(') {
            let mut k = i + 1;
            while k < chars.len() && chars[k] != ')' {
                k += 1;
            }
            i = k + 1;
            continue;
        }
        if chars[i] != '[' && chars[i] != '*' && chars[i] != '`' {
            out.push(chars[i]);
        }
        i += 1;
    }
    out
}

/// GitHub's slug of a heading's text (before duplicates are numbered).
fn slug(text: &str) -> String {
    text.to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Every fragment a page answers to: its headings' slugs, repeats numbered as GitHub numbers
/// them, and its HTML anchors.
fn anchors(text: &str) -> HashSet<String> {
    let mut occurrences: HashMap<String, usize> = HashMap::new();
    let mut found = HashSet::new();
    let raw_lines: Vec<&str> = text.lines().collect();
    for (n, line) in prose_lines(text).iter().enumerate() {
        let trimmed = line.trim_start();
        let level = trimmed.chars().take_while(|c| *c == '#').count();
        let is_heading = (1..=6).contains(&level)
            && line.len() - trimmed.len() <= 3
            && trimmed[level..].chars().next().is_none_or(|c| c == ' ');
        if is_heading {
            // The raw line, code spans and all: their text is part of the slug.
            let raw = raw_lines[n].trim_start();
            let base = slug(&heading_text(&raw[level..]));
            let mut result = base.clone();
            while occurrences.contains_key(&result) {
                let count = occurrences.get_mut(&base).expect("the base was seen first");
                *count += 1;
                result = format!("{base}-{count}");
            }
            occurrences.insert(result.clone(), 0);
            found.insert(result);
        }
        for attr in ["id=\"", "name=\""] {
            let mut rest = line.as_str();
            while let Some(at) = rest.find("<a ") {
                let tag = &rest[at..];
                let tag = &tag[..tag.find('>').unwrap_or(tag.len())];
                if let Some(v) = tag.find(attr) {
                    let value = &tag[v + attr.len()..];
                    found.insert(value[..value.find('"').unwrap_or(value.len())].to_string());
                }
                rest = &rest[at + 3..];
            }
        }
    }
    found
}

fn is_external(target: &str) -> bool {
    let lower = target.to_ascii_lowercase();
    lower.starts_with("http://") || lower.starts_with("https://") || lower.starts_with("mailto:")
}

/// `%20` and the like, as a browser reads a link's path.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Why `target`, linked from `page`, leads nowhere; `None` when it leads somewhere.
fn broken(
    page: &Path,
    target: &str,
    cache: &mut HashMap<PathBuf, HashSet<String>>,
) -> Option<String> {
    if target.is_empty() {
        return Some("the link has no target".into());
    }
    let (path, fragment) = match target.split_once('#') {
        Some((p, f)) => (p, Some(f)),
        None => (target, None),
    };
    let root = root();
    let file = if path.is_empty() {
        page.to_path_buf()
    } else {
        let dir = page.parent().unwrap_or(Path::new(""));
        normalize(&dir.join(percent_decode(path)))
    };
    let full = root.join(&file);
    if !full.exists() {
        return Some(format!("{} does not exist", file.display()));
    }
    let fragment = fragment?;
    if fragment.is_empty() {
        return Some("an empty #fragment".into());
    }
    if full.is_dir() || full.extension().is_none_or(|x| x != "md") {
        return Some(format!(
            "#{fragment} points into {}, which is not a Markdown page",
            file.display()
        ));
    }
    let names = cache
        .entry(file.clone())
        .or_insert_with(|| anchors(&read(&file)));
    if names.contains(&percent_decode(fragment)) {
        return None;
    }
    let mut near: Vec<&String> = names
        .iter()
        .filter(|n| {
            let f = fragment.to_lowercase();
            n.contains(f.as_str()) || f.contains(n.as_str())
        })
        .collect();
    near.sort();
    Some(format!(
        "{} has no heading whose slug is {fragment:?}{}",
        file.display(),
        if near.is_empty() {
            String::new()
        } else {
            format!(" (near: {near:?})")
        }
    ))
}

/// `a/../b/./c` as `b/c`, without touching the file system; a path that climbs above the root
/// keeps its leading `..`.
fn normalize(p: &Path) -> PathBuf {
    let mut out: Vec<std::ffi::OsString> = Vec::new();
    for c in p.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                if out.last().is_some_and(|l| l != "..") {
                    out.pop();
                } else {
                    out.push("..".into());
                }
            }
            other => out.push(other.as_os_str().to_owned()),
        }
    }
    out.iter().collect()
}

#[test]
fn every_relative_link_leads_to_a_file_and_heading_that_exist() {
    let mut cache = HashMap::new();
    let mut failures = Vec::new();
    let mut checked = 0;
    for page in pages() {
        let text = read(&page);
        for (n, line) in prose_lines(&text).iter().enumerate() {
            for target in link_targets(line) {
                if is_external(&target) {
                    continue;
                }
                checked += 1;
                if let Some(why) = broken(&page, &target, &mut cache) {
                    failures.push(format!("{}:{}: ({target}): {why}", page.display(), n + 1));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} broken link(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
    // The reader must have found the links there are (the README alone has over ten).
    assert!(
        checked > 30,
        "only {checked} relative links found: is the reader broken?"
    );
}

#[test]
fn the_readme_is_at_most_12_kib() {
    let size = read(Path::new("README.md")).len();
    assert!(
        size <= README_MAX_BYTES,
        "README.md is {size} bytes, more than {README_MAX_BYTES}: it holds what a new user needs \
         first; move the rest to docs/ (docs/guide.md, docs/report.md, docs/faq.md...) and link it"
    );
}

/// A code span in the README's "Where things are" that names a path: only the characters of a
/// path, and at least one `/` (`server.json` alone is a kind of file, not a place).
fn looks_like_path(span: &str) -> bool {
    span.contains('/')
        && span
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/'))
}

#[test]
fn every_path_the_readme_map_names_exists() {
    let text = read(Path::new("README.md"));
    let prose = prose_lines(&text);
    let raw: Vec<&str> = text.lines().collect();
    let start = prose
        .iter()
        .position(|l| l.trim() == "## Where things are")
        .expect("README.md has no section \"## Where things are\"");
    let mut paths = Vec::new();
    for (n, line) in prose.iter().enumerate().skip(start + 1) {
        let t = line.trim_start();
        if t.starts_with("# ") || t.starts_with("## ") {
            break;
        }
        for span in code_spans(raw[n]) {
            if looks_like_path(&span) {
                paths.push((n + 1, span));
            }
        }
    }
    assert!(
        paths.len() >= 10,
        "README.md's \"Where things are\" names only {} paths in code spans: {paths:?}",
        paths.len()
    );
    let missing: Vec<String> = paths
        .iter()
        .filter(|(_, p)| !root().join(p).exists())
        .map(|(n, p)| format!("README.md:{n}: `{p}` does not exist"))
        .collect();
    assert!(
        missing.is_empty(),
        "README.md's \"Where things are\" names paths that are not in the tree:\n{}",
        missing.join("\n")
    );
}

/// The subcommands of the binary, read from `enum Command` in crates/cli/src (its variants,
/// kebab-cased as clap names them, or their `#[command(name = ...)]`), hidden ones left out.
fn subcommands() -> Vec<String> {
    let src = root().join("crates/cli/src");
    let mut files: Vec<PathBuf> = fs::read_dir(&src)
        .expect("crates/cli/src")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .collect();
    files.sort();
    for file in files {
        let text = fs::read_to_string(&file).expect("a source file");
        let Some(at) = text.find("enum Command {") else {
            continue;
        };
        let mut names = Vec::new();
        let (mut name, mut hidden) = (None::<String>, false);
        for line in text[at..].lines().skip(1) {
            if line.starts_with('}') {
                break;
            }
            // Variants and their attributes sit at one indent; their fields deeper.
            let Some(item) = line.strip_prefix("    ").filter(|l| !l.starts_with(' ')) else {
                continue;
            };
            if item.starts_with("#[command(") {
                hidden |= item.contains("hide = true");
                if let Some(v) = item.split("name = \"").nth(1) {
                    name = v.split('"').next().map(str::to_string);
                }
                continue;
            }
            if !item.starts_with(|c: char| c.is_ascii_uppercase()) {
                continue;
            }
            let ident: String = item
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !hidden {
                names.push(name.take().unwrap_or_else(|| kebab(&ident)));
            }
            (name, hidden) = (None, false);
        }
        return names;
    }
    panic!("no `enum Command {{` in {}", src.display());
}

fn kebab(ident: &str) -> String {
    let mut out = String::new();
    for (i, c) in ident.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('-');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

#[test]
fn the_readme_names_every_command() {
    let commands = subcommands();
    assert!(
        commands.len() >= 10,
        "only {} subcommands read from crates/cli/src's `enum Command`: {commands:?}",
        commands.len()
    );
    let readme = read(Path::new("README.md"));
    let missing: Vec<&String> = commands
        .iter()
        .filter(|c| {
            let needle = format!("glassbox {c}");
            !readme.match_indices(&needle).any(|(at, _)| {
                readme[at + needle.len()..]
                    .chars()
                    .next()
                    .is_none_or(|n| !(n.is_alphanumeric() || n == '-' || n == '_'))
            })
        })
        .collect();
    assert!(
        missing.is_empty(),
        "README.md does not name these commands of the binary (as `glassbox NAME`, a line each \
         under \"Commands\"): {missing:?}"
    );
}

#[test]
fn the_reader_follows_githubs_rules() {
    // Slugs: punctuation dropped, each space a dash, repeats numbered.
    let page = "# The microVM backend (`--isolation microvm`)\n## Exit status of `audit`\n\
                ## A\n## A\n## A-1\n```\n# not a heading\n```\n### What's `cargo_fuzz`?\n";
    let names = anchors(page);
    for want in [
        "the-microvm-backend---isolation-microvm",
        "exit-status-of-audit",
        "a",
        "a-1",
        "a-1-1",
        "whats-cargo_fuzz",
    ] {
        assert!(names.contains(want), "{want:?} not in {names:?}");
    }
    assert!(!names.contains("not-a-heading"), "{names:?}");
    // Links: code spans are not links, nested brackets are, titles are dropped.
    assert_eq!(
        link_targets(&blank_code_spans(
            "see `[x](no.md)` and [the [guide]](docs/guide.md#usage \"title\") ![i](a.png)"
        )),
        ["docs/guide.md#usage", "a.png"]
    );
    assert_eq!(link_targets("[label]: <docs/x.md>"), ["docs/x.md"]);
    assert_eq!(
        normalize(Path::new("docs/../bench/./README.md")),
        Path::new("bench/README.md")
    );
    assert_eq!(kebab("VmAgent"), "vm-agent");
}

/// `docs/glassbox.1` is what `glassbox man` prints from the argument definitions: an option
/// added or reworded shows in the man page too (regenerate with
/// `cargo run -q -p glassbox-cli -- man > docs/glassbox.1`).
#[test]
fn the_man_page_is_the_one_the_arguments_make() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_glassbox"))
        .arg("man")
        .output()
        .expect("glassbox man runs");
    assert!(out.status.success(), "glassbox man failed: {out:?}");
    let made = String::from_utf8(out.stdout).expect("the man page is UTF-8");
    assert!(
        made.contains(".SH \"GLASSBOX AUDIT\""),
        "no audit section:\n{made}"
    );
    let kept = read(Path::new("docs/glassbox.1"));
    assert!(
        kept == made,
        "docs/glassbox.1 is not what `glassbox man` prints now: run \
         cargo run -q -p glassbox-cli -- man > docs/glassbox.1"
    );
}
