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
    plainly_outside_all(path, std::slice::from_ref(&dir))
}

/// [`plainly_outside`] of every one of `dirs` (`true` for none), looking at `path` once.
pub fn plainly_outside_all<D: AsRef<[u8]>>(path: &[u8], dirs: &[D]) -> bool {
    if dirs.is_empty() {
        return true;
    }
    // The prefixes first: a path under one of them is looked at whatever its shape.
    path.first() == Some(&b'/')
        && dirs.iter().all(|d| {
            let d = d.as_ref();
            let d = d.strip_suffix(b"/").unwrap_or(d);
            let under = path.starts_with(d) && matches!(path.get(d.len()), None | Some(b'/'));
            // An empty directory (none given) says nothing: the path must be looked at.
            !(d.is_empty() || under)
        })
        && is_plain(path)
}

/// `dirs` without those [`plainly_outside_all`] need not look at: a directory inside another
/// one of them (as bytes, the way that test sees it), or given twice. `plainly_outside_all`
/// of the result is `plainly_outside_all` of `dirs`.
pub fn outermost(dirs: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let strip = |d: &[u8]| d.strip_suffix(b"/").unwrap_or(d).to_vec();
    let mut out: Vec<Vec<u8>> = Vec::new();
    for (i, d) in dirs.iter().enumerate() {
        let inner = strip(d);
        let covered = dirs.iter().enumerate().any(|(j, o)| {
            let outer = strip(o);
            j != i
                && !outer.is_empty()
                && ((inner.starts_with(&outer) && inner.get(outer.len()) == Some(&b'/'))
                    || (inner == outer && j < i))
        });
        if !covered {
            out.push(d.clone());
        }
    }
    out
}

/// Whether normalizing the absolute `path` would leave it as it is: no `.` or `..` segment,
/// no repeated slash (a trailing slash is dropped by normalizing, but does not change which
/// directory a path is under).
pub fn is_plain(path: &[u8]) -> bool {
    let mut i = 0;
    while let Some(at) = path[i..].iter().position(|&b| b == b'/') {
        let rest = &path[i + at + 1..];
        let segment_end = |n: usize| matches!(rest.get(n), None | Some(b'/'));
        match rest.first() {
            Some(b'/') => return false,
            Some(b'.') if segment_end(1) || (rest.get(1) == Some(&b'.') && segment_end(2)) => {
                return false
            }
            _ => {}
        }
        i += at + 1;
    }
    true
}

/// Most components a [`View`] holds; deeper paths are left to [`NormPath`].
const VIEW_MAX: usize = 24;

/// A path lexically normalized as [`NormPath`] does, without copying anything: its components
/// are slices of the bytes given (normalizing only ever drops components). For the checks'
/// look at every path of a trace; a path worth keeping becomes a [`NormPath`].
#[derive(Clone, Copy, Debug)]
pub struct View<'a> {
    comps: [&'a [u8]; VIEW_MAX],
    len: usize,
}

impl<'a> View<'a> {
    /// As [`NormPath::resolve`]; `None` when the path has, at some point of its
    /// normalization, more than a few dozen components.
    pub fn resolve(path: &'a [u8], base: &'a [u8]) -> Option<View<'a>> {
        let mut v = View {
            comps: [&[]; VIEW_MAX],
            len: 0,
        };
        if path.first() != Some(&b'/') {
            v.push_all(base)?;
        }
        v.push_all(path)?;
        Some(v)
    }

    fn push_all(&mut self, path: &'a [u8]) -> Option<()> {
        for c in path.split(|&b| b == b'/') {
            match c {
                b"" | b"." => {}
                b".." => self.len = self.len.saturating_sub(1),
                _ => {
                    *self.comps.get_mut(self.len)? = c;
                    self.len += 1;
                }
            }
        }
        Some(())
    }

    /// The components, root first.
    pub fn components(&self) -> &[&'a [u8]] {
        &self.comps[..self.len]
    }

    /// The same path, owned.
    pub fn to_norm(&self) -> NormPath {
        NormPath {
            comps: self.components().iter().map(|c| c.to_vec()).collect(),
        }
    }
}

/// The components of `path` after those of `base`, when `path` is `base` or inside it.
pub fn strip_components<'p, A: AsRef<[u8]>, B: AsRef<[u8]>>(
    path: &'p [A],
    base: &[B],
) -> Option<&'p [A]> {
    if path.len() < base.len() {
        return None;
    }
    let (head, rest) = path.split_at(base.len());
    head.iter()
        .zip(base)
        .all(|(a, b)| a.as_ref() == b.as_ref())
        .then_some(rest)
}

/// Whether two lists of components are the same path.
pub fn same_components<A: AsRef<[u8]>, B: AsRef<[u8]>>(a: &[A], b: &[B]) -> bool {
    a.len() == b.len() && strip_components(a, b).is_some()
}

/// [`home_relative`] over components: `None` when `home` is empty.
pub fn home_relative_components<'p, A: AsRef<[u8]>, B: AsRef<[u8]>>(
    path: &'p [A],
    home: &[B],
) -> Option<&'p [A]> {
    if home.is_empty() {
        return None;
    }
    strip_components(path, home)
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
pub fn matches<C: AsRef<[u8]>>(comps: &[C], pattern: &str) -> bool {
    // Walks the pattern's segments without collecting them (an allocation per path and
    // pattern measured as a fifth of a recheck's time); see [`Rules`] for many paths.
    match_segments(segments(pattern), comps)
}

/// The first pattern of `rules` that `comps` matches, with its label.
pub fn first_match<'r, C: AsRef<[u8]>>(
    comps: &[C],
    rules: &'r [(&'static str, &'static str)],
) -> Option<&'r (&'static str, &'static str)> {
    rules.iter().find(|(pattern, _)| matches(comps, pattern))
}

/// One segment of a pattern.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Segment<'p> {
    /// The component, byte for byte.
    Literal(&'p [u8]),
    /// A component starting with these bytes (`*` alone: any component).
    Prefix(&'p [u8]),
    /// Zero or more components: the rest of the path.
    Rest,
}

/// The segments of `pattern`.
fn segments(pattern: &str) -> impl Iterator<Item = Segment<'_>> {
    pattern.split('/').filter(|s| !s.is_empty()).map(|seg| {
        if seg == "**" {
            Segment::Rest
        } else if let Some(prefix) = seg.strip_suffix('*') {
            Segment::Prefix(prefix.as_bytes())
        } else {
            Segment::Literal(seg.as_bytes())
        }
    })
}

/// Whether `comps` matches the pattern made of `segs`.
fn match_segments<'s, C: AsRef<[u8]>>(
    segs: impl IntoIterator<Item = Segment<'s>>,
    comps: &[C],
) -> bool {
    let mut i = 0;
    for seg in segs {
        let Some(comp) = comps.get(i) else {
            return seg == Segment::Rest;
        };
        let comp = comp.as_ref();
        let ok = match seg {
            Segment::Rest => return true,
            Segment::Prefix(p) => comp.starts_with(p),
            Segment::Literal(l) => comp == l,
        };
        if !ok {
            return false;
        }
        i += 1;
    }
    i == comps.len()
}

/// A pattern of [`matches()`], split into its segments once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pattern<'p>(Vec<Segment<'p>>);

impl<'p> Pattern<'p> {
    /// Splits `pattern` (see [`matches()`]).
    pub fn new(pattern: &'p str) -> Pattern<'p> {
        Pattern(segments(pattern).collect())
    }

    /// Whether `comps` matches the pattern.
    pub fn matches<C: AsRef<[u8]>>(&self, comps: &[C]) -> bool {
        match_segments(self.0.iter().copied(), comps)
    }
}

/// Labelled patterns split once, for matching every path of a trace: [`Rules::first`] is
/// [`first_match`] without splitting a pattern per path, and trying only the patterns whose
/// first segment can match the path's first component.
#[derive(Clone, Debug)]
pub struct Rules<'p, L> {
    rules: Vec<(Pattern<'p>, L)>,
    /// The rules (their indices, in order) by the literal their pattern starts with, sorted
    /// by that literal.
    by_first: Vec<(&'p [u8], Vec<usize>)>,
    /// The rules whose pattern starts otherwise (a prefix, `*`, `**`, or nothing).
    others: Vec<usize>,
}

impl<'p, L: Copy> Rules<'p, L> {
    /// The patterns of `rules`, in order.
    pub fn new(rules: impl IntoIterator<Item = (&'p str, L)>) -> Self {
        let rules: Vec<(Pattern<'p>, L)> = rules
            .into_iter()
            .map(|(p, l)| (Pattern::new(p), l))
            .collect();
        let mut by_first: Vec<(&'p [u8], Vec<usize>)> = Vec::new();
        let mut others = Vec::new();
        for (i, (p, _)) in rules.iter().enumerate() {
            match p.0.first() {
                Some(Segment::Literal(l)) => match by_first.iter_mut().find(|(k, _)| k == l) {
                    Some((_, ids)) => ids.push(i),
                    None => by_first.push((l, vec![i])),
                },
                _ => others.push(i),
            }
        }
        by_first.sort_by(|a, b| a.0.cmp(b.0));
        Rules {
            rules,
            by_first,
            others,
        }
    }

    /// Whether some pattern may match a path whose first component is `first` (`None`: a
    /// path of no components): `false` means none does.
    pub fn may_start(&self, first: Option<&[u8]>) -> bool {
        !self.others.is_empty()
            || first.is_some_and(|c| self.by_first.binary_search_by(|(k, _)| (*k).cmp(c)).is_ok())
    }

    /// The label of the first pattern `comps` matches.
    pub fn first<C: AsRef<[u8]>>(&self, comps: &[C]) -> Option<L> {
        let literal: &[usize] = comps
            .first()
            .and_then(|c| {
                self.by_first
                    .binary_search_by(|(k, _)| (*k).cmp(c.as_ref()))
                    .ok()
            })
            .map_or(&[], |at| &self.by_first[at].1);
        // Both lists are in rule order: walk them merged, so the first match is the first rule.
        let (mut a, mut b) = (literal.iter().peekable(), self.others.iter().peekable());
        loop {
            let next = match (a.peek(), b.peek()) {
                (Some(&&x), Some(&&y)) if x < y => a.next(),
                (Some(_), Some(_)) | (None, Some(_)) => b.next(),
                (Some(_), None) => a.next(),
                (None, None) => return None,
            };
            let (pattern, label) = self.rules.get(*next?)?;
            if pattern.matches(comps) {
                return Some(*label);
            }
        }
    }
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

    /// Paths with every shape normalizing deals with.
    fn odd_paths() -> Vec<Vec<u8>> {
        let mut out: Vec<Vec<u8>> = [
            "/",
            "//",
            "/.",
            "/..",
            "",
            ".",
            "..",
            "a",
            "a/",
            "./a",
            "../a",
            "/home/u",
            "/home/u/",
            "/home/u/.ssh/id_rsa",
            "/home/u//.ssh/./id_rsa",
            "/home/u/x/../.aws",
            "/home/u/.",
            "/home/u/..",
            "/home/u/...",
            "/home/u/..a",
            "/home/u/.a.",
            "/home/u/a..",
            "/home/user2/.ssh",
            "/home/u/.env",
            "/home/u/p/.env.local",
            "/home/u/.config/gh/x",
            "/home/u/.config/gh-tools",
            "/etc/cron.d/job",
            "/etc/crontab",
            "/.git/hooks/pre-commit",
            "/home/u/.config/fish/conf.d/a.fish",
            "/home/u/.config/fish/conf.d",
            "/home/u/.local/share/systemd/user/x.service",
            "/../../etc/profile",
            ".ssh/../.ssh/id_rsa",
            "/home/u/\u{ff}/../.netrc",
        ]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect();
        out.push(b"/home/u/\xff\xfe/../.ssh/\x80".to_vec());
        out.push(b"/a".repeat(30));
        out.push([b"/a".repeat(30), b"/..".repeat(28), b"/.ssh".to_vec()].concat());
        out
    }

    #[test]
    fn a_view_normalizes_as_norm_path_does() {
        let mut deep = 0;
        for p in odd_paths() {
            for base in [
                &b"/home/u/project"[..],
                b"",
                b"/",
                b"rel/../x",
                &b"/b".repeat(30),
            ] {
                let norm = NormPath::resolve(&p, base);
                match View::resolve(&p, base) {
                    Some(v) => {
                        assert_eq!(v.to_norm(), norm, "{:?} in {:?}", p, base);
                        assert!(same_components(v.components(), norm.components()));
                    }
                    None => deep += 1,
                }
            }
        }
        // Paths too deep for a view (and relative ones in a deep base) are left to NormPath;
        // the rest are views.
        assert!(deep > 0 && deep < odd_paths().len(), "{deep}");
    }

    #[test]
    fn split_patterns_match_as_matches_does() {
        let rules: Vec<(&str, &str)> = [
            ".ssh/**",
            ".netrc",
            "*",
            "**",
            "/etc/cron*/**",
            ".config/fish/conf.d/*",
            "/",
            "a/**/b",
            "cron*",
            "/etc/*/x",
            ".config/gh/**",
            "",
            ".ssh",
            "home/u/.ssh/*",
            "home/*",
            "etc/crontab",
            ".config/**",
            "home",
        ]
        .iter()
        .map(|p| (*p, *p))
        .collect();
        let compiled = Rules::new(rules.iter().copied());
        let home = NormPath::new(b"/home/u");
        for p in odd_paths() {
            let norm = NormPath::new(&p);
            for comps in [
                norm.components(),
                home_relative(&norm, &home).unwrap_or(&[]),
            ] {
                for (pattern, _) in &rules {
                    let views: Vec<&[u8]> = comps.iter().map(Vec::as_slice).collect();
                    assert_eq!(
                        Pattern::new(pattern).matches(comps),
                        matches(comps, pattern),
                        "{pattern} {:?}",
                        p
                    );
                    assert_eq!(matches(&views, pattern), matches(comps, pattern));
                }
                assert_eq!(
                    compiled.first(comps),
                    first_match(comps, &rules).map(|(_, l)| *l)
                );
                if !compiled.may_start(comps.first().map(Vec::as_slice)) {
                    assert_eq!(compiled.first(comps), None);
                }
            }
        }
    }

    #[test]
    fn plainly_outside_all_is_plainly_outside_of_each() {
        let dirs: Vec<Vec<u8>> = ["/home/u", "/home/u/", "/", "/srv/planted", ""]
            .iter()
            .map(|d| d.as_bytes().to_vec())
            .collect();
        for p in odd_paths() {
            for n in 0..=dirs.len() {
                for set in [&dirs[..n], &dirs[n..]] {
                    assert_eq!(
                        plainly_outside_all(&p, set),
                        set.iter().all(|d| plainly_outside(&p, d)),
                        "{:?} {:?}",
                        p,
                        set
                    );
                }
            }
            // Plain means normalizing leaves the path as it is (a trailing slash aside).
            if p.first() == Some(&b'/') && is_plain(&p) {
                let trimmed = match p.strip_suffix(b"/") {
                    Some(t) if !t.is_empty() => t.to_vec(),
                    _ => p.clone(),
                };
                assert_eq!(NormPath::new(&p).to_bytes().0, trimmed, "{:?}", p);
            }
        }
        assert!(!is_plain(b"/a/./b") && !is_plain(b"/a/..") && !is_plain(b"//a"));
        assert!(is_plain(b"/a/.b/..c/...") && is_plain(b"/"));
    }

    #[test]
    fn outermost_directories_decide_as_all_of_them() {
        let sets: Vec<Vec<&str>> = vec![
            vec!["/home/u", "/home/u/.ssh", "/home/u/.aws/", "/srv/p"],
            vec!["/home/u/.ssh", "/home/u"],
            vec!["/home/u", "/home/u/"],
            vec!["/home/u", "/home/user2", "/home/u2/x"],
            vec!["/", "/home/u"],
            vec!["", "/home/u/.ssh"],
            vec!["/home//u", "/home//u/.ssh"],
        ];
        for set in sets {
            let dirs: Vec<Vec<u8>> = set.iter().map(|d| d.as_bytes().to_vec()).collect();
            let kept = outermost(&dirs);
            assert!(kept.len() <= dirs.len());
            for p in odd_paths() {
                assert_eq!(
                    plainly_outside_all(&p, &kept),
                    plainly_outside_all(&p, &dirs),
                    "{:?} {set:?}",
                    p
                );
            }
        }
        let dirs: Vec<Vec<u8>> = vec![b"/home/u".to_vec(), b"/home/u/.ssh".to_vec()];
        assert_eq!(outermost(&dirs), vec![b"/home/u".to_vec()]);
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
