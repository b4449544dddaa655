//! Lexical path handling shared by every check.
//!
//! Paths from the recorder are [`Bytes`]: they may be non-UTF-8 and may contain `.`, `..` and
//! repeated slashes. Every check first turns a path into a [`NormPath`] (lexically normalized,
//! split into components) and then matches whole components against [patterns](matches()), never
//! substrings: `~/.sshfoo` is not under `~/.ssh`, and `~/.config/gh-tools` is not
//! `~/.config/gh`.
//!
//! Normalization is lexical: `a/b/../c` becomes `a/c` without looking at the file system, so a
//! symlink named `b` is not followed. The recorder reports the path the program passed
//! (resolved against its working directory), which is what these checks judge.

use glassbox_model::Bytes;

/// An absolute path, lexically normalized and split into components.
///
/// `.` and empty components are dropped and `..` removes the previous component (`..` at the
/// root stays at the root, as the kernel does).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NormPath {
    comps: Vec<Vec<u8>>,
}

impl NormPath {
    /// Normalizes `path`; a relative path is taken relative to `/`.
    pub fn new(path: &[u8]) -> NormPath {
        let mut p = NormPath::default();
        p.push_all(path);
        p
    }

    /// Normalizes `path`, resolving a relative path against `base` (itself normalized).
    ///
    /// The recorder reports absolute paths; this is the fallback for one that is not.
    pub fn resolve(path: &[u8], base: &[u8]) -> NormPath {
        if path.first() == Some(&b'/') {
            return NormPath::new(path);
        }
        let mut p = NormPath::new(base);
        p.push_all(path);
        p
    }

    fn push_all(&mut self, path: &[u8]) {
        for c in path.split(|&b| b == b'/') {
            match c {
                b"" | b"." => {}
                b".." => {
                    self.comps.pop();
                }
                _ => self.comps.push(c.to_vec()),
            }
        }
    }

    /// The components, root first (`/` itself has none).
    pub fn components(&self) -> &[Vec<u8>] {
        &self.comps
    }

    /// The last component (`None` for `/`).
    pub fn file_name(&self) -> Option<&[u8]> {
        self.comps.last().map(Vec::as_slice)
    }

    /// The parent directory (`None` for `/`).
    pub fn parent(&self) -> Option<NormPath> {
        let (_, rest) = self.comps.split_last()?;
        Some(NormPath {
            comps: rest.to_vec(),
        })
    }

    /// The components after `base`, when `self` is `base` or inside it (whole components).
    pub fn strip_prefix(&self, base: &NormPath) -> Option<&[Vec<u8>]> {
        if self.comps.len() >= base.comps.len() && self.comps[..base.comps.len()] == base.comps[..]
        {
            Some(&self.comps[base.comps.len()..])
        } else {
            None
        }
    }

    /// Whether `self` is `base` or inside it (whole components).
    pub fn starts_with(&self, base: &NormPath) -> bool {
        self.strip_prefix(base).is_some()
    }

    /// The normalized path as bytes (`/` for the root).
    pub fn to_bytes(&self) -> Bytes {
        if self.comps.is_empty() {
            return Bytes::from("/");
        }
        let mut out = Vec::new();
        for c in &self.comps {
            out.push(b'/');
            out.extend_from_slice(c);
        }
        Bytes(out)
    }
}

/// Whether `path` is plainly outside `dir` (both absolute, byte strings): `path` has no `.` or
/// `..` segment and no repeated slash (so normalizing would not change it), and is neither
/// `dir` nor under it. A cheap test that lets checks skip normalizing most paths; `false`
/// means "normalize and look".
pub fn plainly_outside(path: &[u8], dir: &[u8]) -> bool {
    if path.first() != Some(&b'/') || dir.is_empty() {
        return false;
    }
    let dir = dir.strip_suffix(b"/").unwrap_or(dir);
    let plain = !path.windows(2).any(|w| w == b"//")
        && !path
            .split(|&b| b == b'/')
            .any(|seg| seg == b"." || seg == b"..");
    if !plain {
        return false;
    }
    !(path.starts_with(dir) && matches!(path.get(dir.len()), None | Some(b'/')))
}

/// The components of `path` below the home directory `home`, once both are normalized.
///
/// `Some(&[])` for the home directory itself, `None` outside it or when `home` is empty (no home
/// directory known).
pub fn home_relative<'p>(path: &'p NormPath, home: &NormPath) -> Option<&'p [Vec<u8>]> {
    if home.components().is_empty() {
        // An empty home would make the whole file system "home"; no home-relative rule applies.
        return None;
    }
    path.strip_prefix(home)
}

/// Joins components with `/` (no leading slash).
pub fn join(comps: &[Vec<u8>]) -> Bytes {
    Bytes(comps.join(&b'/'))
}

/// How to show `path` to a person: `~/rel` under `home`, the absolute path otherwise; control
/// characters escaped (via [`Bytes`]'s `Display`).
pub fn display(path: &NormPath, home: &NormPath) -> String {
    match home_relative(path, home) {
        Some([]) => "~".to_string(),
        Some(rel) => format!("~/{}", join(rel)),
        None => path.to_bytes().to_string(),
    }
}

/// Whether `comps` matches `pattern`, component by component.
///
/// `pattern` is `/`-separated (a leading `/` is ignored); each segment is one of:
///
/// - a literal: the component must be equal, byte for byte;
/// - `*`: any one component;
/// - `prefix*`: one component starting with `prefix` (`cron*` matches `crontab`, `cron.d`);
/// - `**`, only as the last segment: zero or more components (`.ssh/**` matches `.ssh` itself and
///   everything inside it).
pub fn matches(comps: &[Vec<u8>], pattern: &str) -> bool {
    // Walks the pattern's segments without collecting them: this runs for every path and
    // pattern of a trace (an allocation here measured as a fifth of a recheck's time).
    let mut i = 0;
    for seg in pattern.split('/').filter(|s| !s.is_empty()) {
        if seg == "**" {
            return true;
        }
        let Some(comp) = comps.get(i) else {
            return false;
        };
        let ok = if seg == "*" {
            true
        } else if let Some(prefix) = seg.strip_suffix('*') {
            comp.starts_with(prefix.as_bytes())
        } else {
            comp.as_slice() == seg.as_bytes()
        };
        if !ok {
            return false;
        }
        i += 1;
    }
    i == comps.len()
}

/// The first pattern of `rules` that `comps` matches, with its label.
pub fn first_match<'r>(
    comps: &[Vec<u8>],
    rules: &'r [(&'static str, &'static str)],
) -> Option<&'r (&'static str, &'static str)> {
    rules.iter().find(|(pattern, _)| matches(comps, pattern))
}

/// The last component of a byte path (`/usr/bin/sh` → `sh`), without normalizing.
pub fn basename(path: &[u8]) -> &[u8] {
    let trimmed = match path.iter().rposition(|&b| b != b'/') {
        Some(end) => &path[..=end],
        None => return path,
    };
    match trimmed.iter().rposition(|&b| b == b'/') {
        Some(slash) => &trimmed[slash + 1..],
        None => trimmed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plainly_outside_is_sound() {
        let home = b"/home/user";
        assert!(plainly_outside(b"/usr/lib/x.so", home));
        assert!(plainly_outside(b"/home/username/x", home));
        for p in [
            &b"/home/user"[..],
            b"/home/user/.ssh/id_rsa",
            b"/usr/../home/user/.ssh/id_rsa",
            b"/home//user/.aws/credentials",
            b"/./home/user/.netrc",
            b"relative/path",
        ] {
            assert!(!plainly_outside(p, home), "{}", String::from_utf8_lossy(p));
        }
    }

    fn n(p: &str) -> NormPath {
        NormPath::new(p.as_bytes())
    }

    #[test]
    fn normalizes_dots_and_slashes() {
        assert_eq!(
            n("/home/u/./x//y/../.ssh/").to_bytes(),
            Bytes::from("/home/u/x/.ssh")
        );
        assert_eq!(
            n("/../../etc/passwd").to_bytes(),
            Bytes::from("/etc/passwd")
        );
        assert_eq!(n("/").to_bytes(), Bytes::from("/"));
        assert_eq!(n("//").components().len(), 0);
    }

    #[test]
    fn resolves_relative_paths_against_a_base() {
        let p = NormPath::resolve(b"../.aws/credentials", b"/home/u/project");
        assert_eq!(p.to_bytes(), Bytes::from("/home/u/.aws/credentials"));
        let p = NormPath::resolve(b"/etc/x", b"/home/u");
        assert_eq!(p.to_bytes(), Bytes::from("/etc/x"));
    }

    #[test]
    fn keeps_non_utf8_bytes() {
        let p = NormPath::new(b"/home/u/\xff\xfe/../.ssh/\x80");
        assert_eq!(p.to_bytes(), Bytes(b"/home/u/.ssh/\x80".to_vec()));
    }

    #[test]
    fn home_relative_matches_whole_components() {
        let home = n("/home/u");
        assert_eq!(home_relative(&n("/home/u"), &home), Some(&[][..]));
        assert_eq!(
            home_relative(&n("/home/u/.ssh/id_rsa"), &home).map(join),
            Some(Bytes::from(".ssh/id_rsa"))
        );
        assert_eq!(home_relative(&n("/home/user2/.ssh"), &home), None);
        assert_eq!(home_relative(&n("/home/u/../v/.ssh"), &home), None);
        assert_eq!(home_relative(&n("/home/u/.ssh"), &n("")), None);
    }

    #[test]
    fn patterns() {
        let c = |p: &str| n(p).components().to_vec();
        assert!(matches(&c("/.ssh"), ".ssh/**"));
        assert!(matches(&c("/.ssh/a/b"), ".ssh/**"));
        assert!(!matches(&c("/.sshfoo"), ".ssh/**"));
        assert!(!matches(&c("/.config/gh-tools/x"), ".config/gh/**"));
        assert!(matches(
            &c("/.config/fish/conf.d/x.fish"),
            ".config/fish/conf.d/*"
        ));
        assert!(!matches(
            &c("/.config/fish/conf.d"),
            ".config/fish/conf.d/*"
        ));
        assert!(!matches(
            &c("/.config/fish/conf.d/a/b"),
            ".config/fish/conf.d/*"
        ));
        assert!(matches(&c("/etc/crontab"), "/etc/cron*/**"));
        assert!(matches(&c("/etc/cron.d/job"), "/etc/cron*/**"));
        assert!(!matches(&c("/etc/xcron"), "/etc/cron*/**"));
        assert!(matches(&c("/.netrc"), ".netrc"));
        assert!(!matches(&c("/.netrc/x"), ".netrc"));
        assert!(!matches(&c("/"), ".netrc"));
    }

    #[test]
    fn basenames() {
        assert_eq!(basename(b"/usr/bin/sh"), b"sh");
        assert_eq!(basename(b"sh"), b"sh");
        assert_eq!(basename(b"/usr/bin/"), b"bin");
        assert_eq!(basename(b"/"), b"/");
        assert_eq!(basename(b""), b"");
    }

    #[test]
    fn display_is_home_relative_and_escaped() {
        let home = n("/home/u");
        assert_eq!(display(&n("/home/u/.ssh/id_rsa"), &home), "~/.ssh/id_rsa");
        assert_eq!(display(&n("/home/u"), &home), "~");
        assert_eq!(display(&n("/etc/x\x1b[2J"), &home), "/etc/x\\u{1b}[2J");
    }
}
