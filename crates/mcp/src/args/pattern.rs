//! Strings matching a JSON Schema `pattern` (ECMA-262 syntax), for the simple patterns tool
//! schemas use: literals, escapes (`\d \w \s` and their negations, `\n`, `\x41`, `\u0041`),
//! `.`, character classes with ranges and negation, groups (capturing, `(?:`, named) with
//! alternation, anchors, and the quantifiers `* + ? {n} {n,} {n,m}` (lazy or not).
//! Lookaround, back-references and Unicode properties other than `\p{L}` / `\p{N}` are not
//! supported: [`generate`] returns `None` and the caller falls back to a plain string.

/// Longest pattern parsed.
const MAX_PATTERN: usize = 4096;
/// Deepest group nesting parsed.
const MAX_NESTING: usize = 32;
/// Largest repetition count accepted.
const MAX_REPEAT: usize = 1000;

#[derive(Debug)]
enum Node {
    Char(char),
    Any,
    Class(Class),
    Group(Vec<Vec<Node>>),
    Repeat(Box<Node>, usize, Option<usize>),
    /// Anchors and word boundaries: match without consuming.
    Empty,
}

#[derive(Debug)]
struct Class {
    negated: bool,
    ranges: Vec<(char, char)>,
}

impl Class {
    fn contains(&self, c: char) -> bool {
        self.ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi) != self.negated
    }

    /// A readable character of the class.
    fn pick(&self) -> Option<char> {
        const PREFERRED: &[char] = &['a', 'b', 'x', 'A', '0', '1', '_', '-', '.', ' '];
        if let Some(&c) = PREFERRED.iter().find(|&&c| self.contains(c)) {
            return Some(c);
        }
        if self.negated {
            return ('!'..='~').find(|&c| self.contains(c));
        }
        self.ranges
            .iter()
            .find(|(lo, hi)| lo <= hi)
            .map(|&(lo, _)| lo)
    }
}

const DIGITS: &[(char, char)] = &[('0', '9')];
const WORD: &[(char, char)] = &[('a', 'z'), ('A', 'Z'), ('0', '9'), ('_', '_')];
const SPACE: &[(char, char)] = &[(' ', ' '), ('\t', '\r')];

/// A string matching `pattern` with between `min` and `max` characters where the pattern
/// allows it (the pattern wins over the lengths otherwise), at most `limit` characters; `None`
/// when the pattern is not supported.
pub(super) fn generate(
    pattern: &str,
    min: usize,
    max: Option<usize>,
    limit: usize,
) -> Option<String> {
    if pattern.len() > MAX_PATTERN {
        return None;
    }
    let chars: Vec<char> = pattern.chars().collect();
    let mut parser = Parser { chars, pos: 0 };
    let alternatives = parser.alternatives(0)?;
    if parser.pos != parser.chars.len() {
        return None; // an unbalanced `)`
    }
    let tree = Node::Group(alternatives);
    let mut first: Option<String> = None;
    for extra in [0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64, 128, 256, 512, 1024] {
        let mut out = String::new();
        emit(&tree, extra, &mut out, limit)?;
        let n = out.chars().count();
        if n > limit {
            return first;
        }
        if n >= min && max.is_none_or_le(n) {
            return Some(out);
        }
        if first.is_none() {
            first = Some(out);
        }
        if max.is_some_and(|m| n > m) {
            break; // longer repetitions only get longer
        }
    }
    first
}

/// `max` is absent or at least `n`.
trait MaxExt {
    fn is_none_or_le(&self, n: usize) -> bool;
}

impl MaxExt for Option<usize> {
    fn is_none_or_le(&self, n: usize) -> bool {
        match self {
            Some(m) => n <= *m,
            None => true,
        }
    }
}

/// Writes one match of `node`; unbounded and wide quantifiers repeat `extra` more times than
/// their minimum. `None` when the output would pass `limit` or a class is empty.
fn emit(node: &Node, extra: usize, out: &mut String, limit: usize) -> Option<()> {
    match node {
        Node::Char(c) => out.push(*c),
        Node::Any => out.push('a'),
        Node::Class(class) => out.push(class.pick()?),
        Node::Empty => {}
        Node::Group(alternatives) => {
            let mut done = false;
            for alternative in alternatives {
                let mark = out.len();
                if alternative
                    .iter()
                    .try_for_each(|n| emit(n, extra, out, limit))
                    .is_some()
                {
                    done = true;
                    break;
                }
                out.truncate(mark);
            }
            if !done {
                return None;
            }
        }
        Node::Repeat(inner, lo, hi) => {
            let count = lo.saturating_add(extra);
            let count = hi.map_or(count, |hi| count.min(hi)).max(*lo);
            for _ in 0..count {
                emit(inner, extra, out, limit)?;
                if out.len() > limit.saturating_mul(4) {
                    return None; // more than `limit` characters for sure
                }
            }
        }
    }
    Some(())
}

struct Parser {
    chars: Vec<char>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn alternatives(&mut self, depth: usize) -> Option<Vec<Vec<Node>>> {
        if depth > MAX_NESTING {
            return None;
        }
        let mut alternatives = vec![self.sequence(depth)?];
        while self.eat('|') {
            alternatives.push(self.sequence(depth)?);
        }
        Some(alternatives)
    }

    fn sequence(&mut self, depth: usize) -> Option<Vec<Node>> {
        let mut nodes = Vec::new();
        while let Some(c) = self.peek() {
            if c == '|' || c == ')' {
                break;
            }
            let atom = self.atom(depth)?;
            let atom = self.quantifier(atom)?;
            nodes.push(atom);
        }
        Some(nodes)
    }

    fn atom(&mut self, depth: usize) -> Option<Node> {
        let c = self.peek()?;
        self.pos += 1;
        Some(match c {
            '(' => {
                if self.eat('?') && !self.eat(':') {
                    // A named group, `(?<name>` or `(?P<name>`; anything else is lookaround or
                    // flags, not supported.
                    self.eat('P');
                    let named = self.peek() == Some('<')
                        && !matches!(self.chars.get(self.pos + 1), Some('=' | '!'));
                    if !named {
                        return None;
                    }
                    self.skip_name()?;
                }
                let alternatives = self.alternatives(depth + 1)?;
                if !self.eat(')') {
                    return None;
                }
                Node::Group(alternatives)
            }
            '[' => Node::Class(self.class()?),
            '.' => Node::Any,
            '^' | '$' => Node::Empty,
            '\\' => self.escape()?,
            '*' | '+' | '?' => return None, // nothing to repeat
            other => Node::Char(other),
        })
    }

    fn skip_name(&mut self) -> Option<()> {
        // At `<`: skip to the closing `>`.
        self.pos += 1;
        while let Some(c) = self.peek() {
            self.pos += 1;
            if c == '>' {
                return Some(());
            }
        }
        None
    }

    fn quantifier(&mut self, atom: Node) -> Option<Node> {
        let (lo, hi) = match self.peek() {
            Some('*') => {
                self.pos += 1;
                (0, None)
            }
            Some('+') => {
                self.pos += 1;
                (1, None)
            }
            Some('?') => {
                self.pos += 1;
                (0, Some(1))
            }
            Some('{') => match self.braces() {
                Some(bounds) => bounds,
                None => return Some(atom), // a literal `{`, read as the next atom
            },
            _ => return Some(atom),
        };
        // Lazy or possessive suffix.
        if !self.eat('?') {
            self.eat('+');
        }
        if lo > MAX_REPEAT {
            return None;
        }
        if matches!(atom, Node::Empty) {
            return Some(atom);
        }
        Some(Node::Repeat(Box::new(atom), lo, hi))
    }

    /// `{n}`, `{n,}`, `{n,m}` at the current position; consumes it when it is one.
    fn braces(&mut self) -> Option<(usize, Option<usize>)> {
        let start = self.pos;
        let rest: String = self.chars[start + 1..].iter().take(24).collect();
        let end = rest.find('}')?;
        let body = &rest[..end];
        let number = |s: &str| -> Option<usize> {
            if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            Some(s.parse::<usize>().unwrap_or(usize::MAX))
        };
        let bounds = match body.split_once(',') {
            None => {
                let n = number(body)?;
                (n, Some(n))
            }
            Some((lo, "")) => (number(lo)?, None),
            Some((lo, hi)) => (number(lo)?, Some(number(hi)?)),
        };
        self.pos = start + 1 + body.chars().count() + 1;
        Some(bounds)
    }

    fn escape(&mut self) -> Option<Node> {
        let c = self.peek()?;
        self.pos += 1;
        let class = |ranges: &[(char, char)], negated| {
            Node::Class(Class {
                negated,
                ranges: ranges.to_vec(),
            })
        };
        Some(match c {
            'd' => class(DIGITS, false),
            'D' => class(DIGITS, true),
            'w' => class(WORD, false),
            'W' => class(WORD, true),
            's' => class(SPACE, false),
            'S' => class(SPACE, true),
            'b' | 'B' => Node::Empty,
            'p' | 'P' => {
                let negated = c == 'P';
                let name = self.property()?;
                match name.as_str() {
                    "L" | "Letter" | "Alphabetic" => class(&[('a', 'z'), ('A', 'Z')], negated),
                    "N" | "Nd" | "Number" => class(DIGITS, negated),
                    _ => return None,
                }
            }
            '1'..='9' => return None, // a back-reference
            'c' => return None,
            other => Node::Char(self.simple_escape(other)?),
        })
    }

    /// `{Name}` after `\p`.
    fn property(&mut self) -> Option<String> {
        if !self.eat('{') {
            return None;
        }
        let mut name = String::new();
        loop {
            let c = self.peek()?;
            self.pos += 1;
            if c == '}' {
                return Some(name);
            }
            name.push(c);
        }
    }

    /// The character of a one-character escape (`n`, `x41`, `u0041`, `u{41}`, `.`...).
    fn simple_escape(&mut self, c: char) -> Option<char> {
        Some(match c {
            'n' => '\n',
            't' => '\t',
            'r' => '\r',
            'f' => '\u{c}',
            'v' => '\u{b}',
            '0' => '\0',
            'x' => self.hex(2)?,
            'u' => {
                if self.eat('{') {
                    let mut value = 0u32;
                    loop {
                        let d = self.peek()?;
                        self.pos += 1;
                        if d == '}' {
                            break;
                        }
                        value = value.checked_mul(16)?.checked_add(d.to_digit(16)?)?;
                    }
                    char::from_u32(value)?
                } else {
                    self.hex(4)?
                }
            }
            other => other,
        })
    }

    fn hex(&mut self, digits: usize) -> Option<char> {
        let mut value = 0u32;
        for _ in 0..digits {
            let d = self.peek()?.to_digit(16)?;
            self.pos += 1;
            value = value * 16 + d;
        }
        char::from_u32(value)
    }

    /// A character class, after its `[`.
    fn class(&mut self) -> Option<Class> {
        let negated = self.eat('^');
        let mut ranges = Vec::new();
        loop {
            let c = self.peek()?;
            self.pos += 1;
            let lo = match c {
                ']' => break,
                '\\' => {
                    let e = self.peek()?;
                    self.pos += 1;
                    match e {
                        'd' => {
                            ranges.extend_from_slice(DIGITS);
                            continue;
                        }
                        'w' => {
                            ranges.extend_from_slice(WORD);
                            continue;
                        }
                        's' => {
                            ranges.extend_from_slice(SPACE);
                            continue;
                        }
                        'D' | 'W' | 'S' | 'p' | 'P' => return None,
                        'b' => '\u{8}',
                        other => self.simple_escape(other)?,
                    }
                }
                other => other,
            };
            // A range `a-z`, unless the `-` is last.
            if self.peek() == Some('-') && !matches!(self.chars.get(self.pos + 1), Some(']') | None)
            {
                self.pos += 1;
                let hi = match self.peek()? {
                    '\\' => {
                        self.pos += 1;
                        let e = self.peek()?;
                        self.pos += 1;
                        self.simple_escape(e)?
                    }
                    other => {
                        self.pos += 1;
                        other
                    }
                };
                ranges.push((lo, hi));
            } else {
                ranges.push((lo, lo));
            }
        }
        Some(Class { negated, ranges })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gen(p: &str) -> Option<String> {
        generate(p, 0, None, 10_000)
    }

    #[test]
    fn simple_patterns() {
        assert_eq!(gen("^[A-Z]{3}-\\d{2}$").as_deref(), Some("AAA-00"));
        assert_eq!(gen("^(foo|bar)+_[a-z0-9]{2,4}$").as_deref(), Some("foo_aa"));
        assert_eq!(gen("^v\\d+\\.\\d+\\.\\d+$").as_deref(), Some("v0.0.0"));
        assert_eq!(gen("^[^a-z]+$").as_deref(), Some("A"));
        assert_eq!(gen("abc").as_deref(), Some("abc"));
        assert_eq!(gen("^(?:x|y)?z*$").as_deref(), Some(""));
        assert_eq!(gen("^(?<year>\\d{4})-\\d\\d$").as_deref(), Some("0000-00"));
        assert_eq!(gen("^[\\w.-]+$").as_deref(), Some("a"));
        assert_eq!(gen("^\\x41\\u0042\\u{43}$").as_deref(), Some("ABC"));
        assert_eq!(gen("a{,2}").as_deref(), Some("a{,2}"));
        assert_eq!(gen("[-+]?[0-9]+").as_deref(), Some("0"));
        assert_eq!(gen("[-+][0-9]+").as_deref(), Some("-0"));
    }

    #[test]
    fn length_bounds_stretch_repetitions() {
        assert_eq!(
            generate("^[a-z]+$", 5, Some(8), 100).as_deref(),
            Some("aaaaa")
        );
        assert_eq!(
            generate("^[a-z]{2,3}$", 10, None, 100).as_deref(),
            Some("aa")
        );
    }

    #[test]
    fn unsupported_patterns_fail() {
        for p in [
            "(?=a)b",
            "(?<!a)b",
            "(a)\\1",
            "\\p{Greek}",
            "(",
            "a)",
            "*a",
            "[a-",
            "a{99999}",
        ] {
            assert_eq!(gen(p), None, "{p}");
        }
    }

    #[test]
    fn huge_repetitions_are_bounded() {
        assert_eq!(generate("(a{1000}){1000}", 0, None, 10_000), None);
        assert_eq!(gen(&"(".repeat(100)), None);
    }
}
