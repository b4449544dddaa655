//! Arguments for `tools/call`, generated from a tool's `inputSchema`.
//!
//! [`generate_arguments`] returns an object that is valid against the schema wherever the schema
//! allows and this generator understands it. It is hand-written: no well-kept Rust crate
//! generates instances from a JSON Schema (validators exist, generators do not), and the
//! generator must be defensive in ways a general one would not be.
//!
//! # What it understands
//!
//! - `type` (also arrays of types and OpenAPI `nullable`; a non-null type is preferred), or the
//!   type implied by keywords (`properties` means object...); boolean schemas;
//! - `const`, `enum` (the first entry that is safe, see below), `default` and `examples` when
//!   they fit the schema and are safe;
//! - objects: every property in `properties`, required or not (optional ones only up to a
//!   nesting depth), `required` names missing from `properties` (from
//!   `additionalProperties`), one extra entry when only `additionalProperties` describes the
//!   object, `minProperties`, `maxProperties`;
//! - strings: `minLength`, `maxLength`, `pattern` (literals, escapes, classes, groups,
//!   alternation, quantifiers; lookaround and back-references fall back to a plain string),
//!   `format` (`uri` `https://example.test/`, `email` `user@example.test`, `date`,
//!   `date-time`, `time`, `uuid`, `ipv4` `192.0.2.1`, `ipv6` `2001:db8::1`, `hostname`
//!   `host.example.test`...);
//! - numbers and integers: `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum` (both
//!   the number and the draft-4 boolean forms), `multipleOf`;
//! - arrays: `items`, `prefixItems` (and the older array form of `items` with
//!   `additionalItems`), `minItems`, `maxItems`, `uniqueItems`;
//! - `anyOf` / `oneOf` (the first option that can be generated, non-null options first; for
//!   `oneOf`, the optional properties only another option requires are left out, so that
//!   exactly one option matches), `allOf` (merged), local `$ref` (`#`, `#/$defs/...`,
//!   `#/definitions/...`, any JSON pointer);
//! - `if`/`then`/`else` (the condition merged in with its `then`; else the `else`, kept clear
//!   of the condition), `not` (an object that matches it loses the optional properties that
//!   make it match; another value is made once more), `dependentRequired` and the array form
//!   of `dependencies` (a property present brings the ones it needs).
//!
//! [`plan_calls`] makes the other argument sets of a tool's plan with the same generator: the
//! required properties only, each boolean the other way, each `enum` entry, each
//! `anyOf`/`oneOf` option, each `else` ([`plan`]).
//!
//! # Safety of the values
//!
//! - Every URL, host, e-mail domain and IP address generated is under `.test` or `.example`, or
//!   a documentation address (192.0.2.0/24, 2001:db8::/32): never a real host. A `default`,
//!   example or pattern-generated string that names another host is not used. `const` and
//!   `enum` values are the server's own and are used as they are when no safe entry exists.
//! - A property whose name suggests a path (`path`, `file`, `filename`, `dir`, `directory`,
//!   `folder`...) gets a relative, harmless path: `glassbox-probe.txt` (or `glassbox-probe` for
//!   directories). Defaults that are absolute paths or climb with `..` are not used.
//!
//! # Bounds
//!
//! Broken schemas never panic and never allocate without bound: nesting and `$ref` chains are
//! cut at a fixed depth (cyclic references included), arrays hold at most 16 items whatever
//! `minItems` says, strings at most 10,000 characters, and the whole value at most 10,000
//! values and about 1 MiB of strings, counting what is copied from the schema (`const`,
//! `default`, examples, `enum` entries, property names) like what is made up (after that,
//! optional parts are left out). Where nothing
//! valid can be made the generator falls back to `{}` (the arguments) or `""` (a required
//! property).
//!
//! # Order of choice
//!
//! `const`; a path for a path-like name; `default`, then `examples` (when they fit); the first
//! safe `enum` entry; then a value built from the type and its constraints.

use serde_json::{Map, Number, Value};

mod correct;
mod files;
mod pattern;
pub mod plan;
mod reuse;

pub use correct::correct;
pub use plan::{plan_calls, plan_calls_with, PlannedCall, Probes};
pub use reuse::Returned;

/// Deepest nesting of schemas followed (objects, arrays, `$ref`, combinators).
const MAX_DEPTH: usize = 40;
/// Optional properties are generated only above this depth (recursive schemas stay small).
const OPTIONAL_DEPTH: usize = 12;
/// Most values generated in one call.
const MAX_NODES: usize = 10_000;
/// Most items in a generated array, and most extra object entries.
const MAX_ITEMS: usize = 16;
/// Longest generated string, in characters.
const MAX_STRING: usize = 10_000;
/// Most bytes of strings generated in one call.
const MAX_BYTES: usize = 1 << 20;
/// Most options of an `anyOf` / `oneOf` tried.
const MAX_OPTIONS: usize = 16;
/// Most `$ref` hops followed in a chain.
const MAX_REF_HOPS: usize = 32;

const PROBE_FILE: &str = "glassbox-probe.txt";
const PROBE_DIR: &str = "glassbox-probe";
const PROBE_URL: &str = "https://example.test/";
const PROBE_HOST: &str = "host.example.test";
const PROBE_EMAIL: &str = "user@example.test";
const PROBE_IPV4: &str = "192.0.2.1";
const PROBE_IPV6: &str = "2001:db8::1";
const PROBE_STRING: &str = "glassbox";

thread_local! {
    /// The marker of the current [`generate_arguments_marked`] call (empty: none). A
    /// thread-local rather than a parameter: every leaf of the generator would carry it,
    /// and it only changes the probe strings.
    static MARKER: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
    /// The folder the server was given ([`plan::Probes::workspace`]; empty: none), which
    /// path values go in.
    static WORKSPACE: std::cell::RefCell<String> =
        const { std::cell::RefCell::new(String::new()) };
    /// The files of the workspace ([`plan::Probes::files`]) and the tool the plan is for:
    /// what path values name by kind ([`files`]).
    static FILES: std::cell::RefCell<(Vec<String>, String)> =
        const { std::cell::RefCell::new((Vec::new(), String::new())) };
}

/// The current marker (empty when none).
fn marker() -> String {
    MARKER.with(|m| m.borrow().clone())
}

/// `name` inside the current workspace folder, when there is one.
fn in_workspace(name: String) -> String {
    WORKSPACE.with(|w| match w.borrow().as_str() {
        "" => name,
        dir => format!("{}/{name}", dir.trim_end_matches('/')),
    })
}

/// Whether `marker` can go into hosts, paths, URLs and e-mail addresses as is: 4 to 32
/// lowercase ASCII letters and digits, starting with a letter.
pub fn valid_marker(marker: &str) -> bool {
    (4..=32).contains(&marker.len())
        && marker.starts_with(|c: char| c.is_ascii_lowercase())
        && marker
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

/// [`generate_arguments`], with `marker` in every probe string the generator makes up (the
/// plain string `glassbox-<marker>`, the file `glassbox-probe-<marker>.txt`, the folder
/// `glassbox-probe-<marker>`, the URL `https://example.test/<marker>`, the host
/// `<marker>.example.test`, the address `<marker>@example.test`), so that where the user's
/// input goes can be followed: a marker seen leaving the sandbox, or in a file name written
/// outside the workspace, is the server passing on what it was given. Values the schema
/// fixes (`const`, `enum`, `default`, examples, patterns, other formats) are unmarked. An
/// invalid marker (see [`valid_marker`]) is ignored.
pub fn generate_arguments_marked(schema: &Value, marker: &str) -> Value {
    let marker = if valid_marker(marker) { marker } else { "" };
    MARKER.with(|m| *m.borrow_mut() = marker.to_string());
    let v = generate_arguments(schema);
    MARKER.with(|m| m.borrow_mut().clear());
    v
}

/// Why arguments generated from `schema` are `{}`, or may not be valid against it: `None`
/// when the schema is an object schema the generator can follow whole. Recorded with the
/// call, so that a tool called with `{}` says why.
pub fn schema_note(schema: &Value) -> Option<String> {
    let kind = |v: &Value| match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    };
    let obj = match schema {
        Value::Null => return Some("no inputSchema: called with {}".into()),
        Value::Bool(true) => return None,
        Value::Object(o) => o,
        other => {
            return Some(format!(
                "inputSchema is {}, not a JSON Schema object: called with {{}}",
                kind(other)
            ))
        }
    };
    if let Some(t) = obj.get("type") {
        let is_object = t == "object"
            || t.as_array()
                .is_some_and(|a| a.iter().any(|x| x == "object"));
        if !is_object {
            return Some(format!(
                "inputSchema's type is {}, not object: called with {{}}",
                t
            ));
        }
    }
    let size = serde_json::to_string(schema).map_or(0, |s| s.len());
    if size > MAX_BYTES {
        return Some(format!(
            "inputSchema of {size} bytes: generation bounded at {MAX_NODES} values and {MAX_BYTES} bytes of strings"
        ));
    }
    // Every local `$ref`, followed: unresolvable, outside the document, or cyclic.
    let mut refs = Vec::new();
    collect_refs(schema, 0, &mut refs);
    for r in refs {
        if !r.starts_with('#') {
            return Some(format!(
                "inputSchema refers outside itself ({r:?}): that part generated as a plain value"
            ));
        }
        let mut seen = vec![r.clone()];
        let mut target = resolve_pointer(schema, &r);
        let mut hops = 0;
        while let Some(Value::Object(o)) = target {
            let Some(Value::String(next)) = o.get("$ref") else {
                break;
            };
            if seen.contains(next) || hops >= MAX_REF_HOPS {
                return Some(format!("inputSchema's $ref {r:?} is cyclic: cut"));
            }
            seen.push(next.clone());
            target = resolve_pointer(schema, next);
            hops += 1;
        }
        if target.is_none() {
            return Some(format!(
                "inputSchema's $ref {r:?} resolves to nothing: that part generated as a plain value"
            ));
        }
    }
    if depth_of(schema, 0) > MAX_DEPTH {
        return Some(format!(
            "inputSchema nests deeper than {MAX_DEPTH}: cut there"
        ));
    }
    None
}

fn collect_refs(v: &Value, depth: usize, out: &mut Vec<String>) {
    if depth > MAX_DEPTH * 4 || out.len() > 1000 {
        return;
    }
    match v {
        Value::Object(o) => {
            if let Some(Value::String(r)) = o.get("$ref") {
                if !out.contains(r) {
                    out.push(r.clone());
                }
            }
            for x in o.values() {
                collect_refs(x, depth + 1, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|x| collect_refs(x, depth + 1, out)),
        _ => {}
    }
}

fn depth_of(v: &Value, depth: usize) -> usize {
    if depth > MAX_DEPTH {
        return depth;
    }
    match v {
        Value::Object(o) => o
            .values()
            .map(|x| depth_of(x, depth + 1))
            .max()
            .unwrap_or(depth),
        Value::Array(a) => a
            .iter()
            .map(|x| depth_of(x, depth + 1))
            .max()
            .unwrap_or(depth),
        _ => depth,
    }
}

/// A local reference (`#`, `#/$defs/x`) in `root`, as the generator resolves it.
fn resolve_pointer<'a>(root: &'a Value, r: &str) -> Option<&'a Value> {
    Gen::new(root, &NO_CHOICES).resolve(r)
}

/// The choices of the plain generator: the first of everything.
static NO_CHOICES: Choices = Choices {
    minimal: false,
    overrides: Vec::new(),
};

/// Generates the `arguments` of a `tools/call` from the tool's `inputSchema`.
///
/// Always returns a JSON object. See the [module documentation](self) for what is supported.
pub fn generate_arguments(schema: &Value) -> Value {
    generate_with(schema, &NO_CHOICES)
}

/// [`generate_arguments`] with other choices than the first of everything (the calls of a
/// plan, [`plan_calls`]); the marker is the caller's to set.
fn generate_with(schema: &Value, choices: &Choices) -> Value {
    let mut gen = Gen::new(schema, choices);
    let ctx = Ctx {
        hint: None,
        variant: 0,
        top: true,
    };
    match gen.value(schema, &ctx, 0) {
        Some(v @ Value::Object(_)) => v,
        _ => Value::Object(Map::new()),
    }
}

/// What the property name suggests the value is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Hint {
    File,
    Dir,
    Url,
    Host,
    Email,
    Ip,
    /// A database connection string (`dsn`, `connection_string`, `database_url`), in the
    /// URL form of the database the name says (PostgreSQL when it says none), to a host under
    /// `.example.test`: a driver given a bare word would take it for a host of its own.
    Dsn(&'static str),
    /// A value of a vocabulary the name says (a time zone, a language): ordinary values a
    /// real call would give, distinct per variant. They carry no marker: nothing a tool
    /// could pass on is in them, and a made-up zone fails the call before it does anything.
    Known(&'static [&'static str]),
}

/// Ordinary values by what a parameter's name says it is: IANA time zones, language tags,
/// currency and country codes, an arithmetic expression.
const KNOWN: &[(&[&str], &[&str])] = &[
    (
        &["timezone", "timezones", "tz"],
        &["UTC", "Europe/Paris", "America/New_York"],
    ),
    (&["language", "lang", "locale"], &["en", "fr", "de"]),
    (&["currency"], &["USD", "EUR", "JPY"]),
    (&["country"], &["US", "FR", "JP"]),
    (&["expression", "expr"], &["1 + 2", "3 * 4", "10 / 2"]),
    // A git revision or branch: ones every repository has (a made-up name resolves to
    // nothing, and the call fails before it does anything).
    (
        &[
            "revision", "rev", "ref", "commit", "sha", "treeish", "branch",
        ],
        &["HEAD", "HEAD~1", "main"],
    ),
];

impl Hint {
    fn from_name(name: &str) -> Option<Hint> {
        let has = name_has(name);
        if let Some((_, values)) = KNOWN.iter().find(|(names, _)| has(names)) {
            return Some(Hint::Known(values));
        }
        let database = has(&[
            "database",
            "db",
            "sql",
            "postgres",
            "postgresql",
            "pg",
            "mongo",
            "mongodb",
            "redis",
            "mysql",
            "mariadb",
        ]);
        if has(&["dsn", "connstr", "conninfo"])
            || (has(&["connection", "conn"]) && has(&["string", "str", "url", "uri"]))
            || (database && has(&["url", "uri"]))
        {
            let scheme = if has(&["mongo", "mongodb"]) {
                "mongodb"
            } else if has(&["redis"]) {
                "redis"
            } else if has(&["mysql", "mariadb"]) {
                "mysql"
            } else {
                "postgresql"
            };
            return Some(Hint::Dsn(scheme));
        }
        if has(&[
            "url", "urls", "uri", "uris", "endpoint", "href", "link", "website",
        ]) {
            Some(Hint::Url)
        } else if has(&["email", "mail"]) {
            Some(Hint::Email)
        } else if has(&["host", "hostname", "domain", "hosts", "domains"]) {
            Some(Hint::Host)
        } else if has(&["ip", "ipv4", "ipaddress", "ips"]) {
            Some(Hint::Ip)
        } else if has(&[
            "dir",
            "dirs",
            "directory",
            "directories",
            "folder",
            "folders",
            "dirname",
            "cwd",
        ]) {
            Some(Hint::Dir)
        } else if has(&[
            "path",
            "paths",
            "file",
            "files",
            "filename",
            "filenames",
            "filepath",
            "pathname",
        ]) {
            Some(Hint::File)
        } else {
            None
        }
    }

    /// What a string `format` says the value is, where a hint gives it.
    fn from_format(format: &str) -> Option<Hint> {
        match format {
            "uri" | "url" | "iri" | "uri-reference" | "iri-reference" => Some(Hint::Url),
            "email" | "idn-email" => Some(Hint::Email),
            "hostname" | "idn-hostname" => Some(Hint::Host),
            "ipv4" => Some(Hint::Ip),
            _ => None,
        }
    }

    /// The value for this hint; `variant` makes distinct values for unique array items.
    fn value(self, variant: usize) -> String {
        let m = marker();
        if !m.is_empty() {
            let v = if variant == 0 {
                String::new()
            } else {
                format!("-{variant}")
            };
            return match self {
                Hint::File => in_workspace(format!("{PROBE_DIR}-{m}{v}.txt")),
                Hint::Dir => in_workspace(format!("{PROBE_DIR}-{m}{v}")),
                Hint::Url => format!("{PROBE_URL}{m}{v}"),
                Hint::Host => format!("{m}{v}.example.test"),
                Hint::Email => format!("{m}{v}@example.test"),
                Hint::Dsn(scheme) => dsn(scheme, &format!("{m}{v}.example.test")),
                Hint::Ip | Hint::Known(_) => self.unmarked(variant),
            };
        }
        self.unmarked(variant)
    }

    fn unmarked(self, variant: usize) -> String {
        match (self, variant) {
            (Hint::File, 0) => in_workspace(PROBE_FILE.into()),
            (Hint::File, n) => in_workspace(format!("glassbox-probe-{n}.txt")),
            (Hint::Dir, 0) => in_workspace(PROBE_DIR.into()),
            (Hint::Dir, n) => in_workspace(format!("{PROBE_DIR}-{n}")),
            (Hint::Url, 0) => PROBE_URL.into(),
            (Hint::Url, n) => format!("{PROBE_URL}{n}"),
            (Hint::Host, 0) => PROBE_HOST.into(),
            (Hint::Host, n) => format!("host{n}.example.test"),
            (Hint::Email, 0) => PROBE_EMAIL.into(),
            (Hint::Email, n) => format!("user{n}@example.test"),
            (Hint::Ip, 0) => PROBE_IPV4.into(),
            (Hint::Ip, n) => format!("192.0.2.{}", 1 + n % 254),
            (Hint::Known(values), n) => values[n % values.len()].to_string(),
            (Hint::Dsn(scheme), 0) => dsn(scheme, "db.example.test"),
            (Hint::Dsn(scheme), n) => dsn(scheme, &format!("db{n}.example.test")),
        }
    }

    fn is_path(self) -> bool {
        matches!(self, Hint::File | Hint::Dir)
    }
}

/// Lowercase words of an identifier: `filePath`, `file_path`, `file-path` all give
/// `["file", "path"]`.
/// A test of whether `name` has one of a list's words (in any case: `includeSecrets` has
/// `secrets`).
/// A connection URL of `scheme` to `host`, at the database's usual port.
fn dsn(scheme: &str, host: &str) -> String {
    match scheme {
        "mongodb" => format!("mongodb://glassbox:glassbox@{host}:27017/glassbox"),
        "redis" => format!("redis://{host}:6379/0"),
        "mysql" => format!("mysql://glassbox:glassbox@{host}:3306/glassbox"),
        _ => format!("postgresql://glassbox:glassbox@{host}:5432/glassbox"),
    }
}

fn name_has(name: &str) -> impl Fn(&[&str]) -> bool {
    let words = words(name);
    move |list: &[&str]| words.iter().any(|w| list.contains(&w.as_str()))
}

fn words(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if !c.is_alphanumeric() {
            if !current.is_empty() {
                words.push(std::mem::take(&mut current));
            }
            prev_lower = false;
            continue;
        }
        if c.is_uppercase() && prev_lower && !current.is_empty() {
            words.push(std::mem::take(&mut current));
        }
        prev_lower = c.is_lowercase() || c.is_ascii_digit();
        current.extend(c.to_lowercase());
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
}

/// Where in the arguments a value is generated.
#[derive(Clone, Copy, Debug)]
struct Ctx {
    hint: Option<Hint>,
    /// Which of several values to produce (array item index), so unique items can differ.
    variant: usize,
    /// The arguments object itself.
    top: bool,
}

struct Gen<'a> {
    root: &'a Value,
    /// Values generated so far.
    nodes: usize,
    /// Bytes of strings generated so far.
    bytes: usize,
    /// What to choose where the schema leaves a choice.
    choices: &'a Choices,
    /// The property names from the arguments down to the value being made (`*` for an
    /// array's items): where a choice applies.
    path: Vec<String>,
    /// Optional properties the object at this path length leaves out: the ones another
    /// `oneOf` option requires, so that only the option being made matches ("exactly one of
    /// url or id": with both, none does).
    exclude: Option<(usize, Vec<String>)>,
}

/// What a call of a plan chooses where a schema leaves the choice to the caller.
#[derive(Clone, Debug, Default, PartialEq)]
struct Choices {
    /// Required properties only, at every level (and what they bring: `dependentRequired`).
    minimal: bool,
    /// The choice at a path (see [`Gen::path`]); elsewhere the first of everything.
    overrides: Vec<(Vec<String>, Choice)>,
}

/// One choice at one place of a schema.
#[derive(Clone, Debug, PartialEq)]
enum Choice {
    /// This boolean.
    Bool(bool),
    /// The `enum` entry at this index.
    Enum(usize),
    /// The `anyOf`/`oneOf` option at this index.
    Branch(usize),
    /// The `else` of an `if`, not its `then`.
    Else,
    /// This string, where the schema takes a free string (a value chosen by the parameter's
    /// role: a path outside the workspace, a command, a template; [`plan::Probes`]).
    Text(String),
}

/// Keys that say nothing about which values are valid.
const ANNOTATIONS: &[&str] = &[
    "$ref",
    "$id",
    "$schema",
    "$anchor",
    "$comment",
    "title",
    "description",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$defs",
    "definitions",
];

impl<'a> Gen<'a> {
    fn new(root: &'a Value, choices: &'a Choices) -> Gen<'a> {
        Gen {
            root,
            nodes: 0,
            bytes: 0,
            choices,
            path: Vec::new(),
            exclude: None,
        }
    }

    /// The choice made at the current path, if any.
    fn choice(&self) -> Option<&'a Choice> {
        let choices: &'a Choices = self.choices;
        choices
            .overrides
            .iter()
            .find(|(p, _)| *p == self.path)
            .map(|(_, c)| c)
    }

    fn exhausted(&self) -> bool {
        self.nodes >= MAX_NODES || self.bytes >= MAX_BYTES
    }

    /// A value taken from the schema as it is (`const`, `default`, an example, an `enum`
    /// entry), counted against the budget like generated ones: copies of one large value must
    /// not multiply past it.
    fn copy(&mut self, v: &Value) -> Value {
        let (nodes, bytes) = weight(v);
        // `value` counted the value itself already.
        self.nodes = self.nodes.saturating_add(nodes - 1);
        self.bytes = self.bytes.saturating_add(bytes);
        v.clone()
    }

    /// A property name from the schema, counted against the budget.
    fn key(&mut self, name: &str) -> String {
        self.bytes = self.bytes.saturating_add(name.len());
        name.to_string()
    }

    /// A value for `schema`, which also keeps clear of its `not` where it can: an object
    /// that matches it loses the optional properties that make it match, another value is
    /// made once more as the next variant.
    fn value(&mut self, schema: &Value, ctx: &Ctx, depth: usize) -> Option<Value> {
        let v = self.value_inner(schema, ctx, depth)?;
        let Some(not) = schema.get("not").map(|n| self.deref(n)) else {
            return Some(v);
        };
        if !matches_roughly(&v, not) {
            return Some(v);
        }
        if let (Value::Object(mut map), Some(Value::Array(names))) =
            (v.clone(), not.get("required"))
        {
            let required = required_names(schema.as_object());
            for name in names.iter().filter_map(Value::as_str) {
                if !required.contains(&name)
                    && map.remove(name).is_some()
                    && !matches_roughly(&Value::Object(map.clone()), not)
                {
                    return Some(Value::Object(map));
                }
            }
        }
        let next = Ctx {
            variant: ctx.variant + 1,
            ..*ctx
        };
        match self.value_inner(schema, &next, depth) {
            Some(other) if !matches_roughly(&other, not) => Some(other),
            _ => Some(v),
        }
    }

    fn value_inner(&mut self, schema: &Value, ctx: &Ctx, depth: usize) -> Option<Value> {
        if depth > MAX_DEPTH || self.exhausted() {
            return None;
        }
        self.nodes += 1;
        let obj = match schema {
            Value::Bool(false) => return None,
            Value::Object(obj) => obj,
            // `true`, and anything that is not a schema at all: no constraint.
            _ => return Some(self.untyped(ctx)),
        };

        if let Some(reference) = obj.get("$ref") {
            let target = reference.as_str().and_then(|r| self.resolve(r));
            let rest = without(obj, &["$ref"]);
            let only_annotations = rest.keys().all(|k| ANNOTATIONS.contains(&k.as_str()));
            return match target {
                Some(target) if only_annotations => self.value(target, ctx, depth + 1),
                Some(target) => {
                    let merged = merge(target, &Value::Object(rest));
                    self.value(&merged, ctx, depth + 1)
                }
                // A reference glassbox cannot follow (another document, an anchor): ignore it.
                None => self.value(&Value::Object(rest), ctx, depth + 1),
            };
        }
        if let Some(Value::Array(all)) = obj.get("allOf") {
            let mut merged = Value::Object(without(obj, &["allOf"]));
            for sub in all.iter().take(MAX_OPTIONS) {
                merged = merge(&merged, self.deref(sub));
            }
            return self.value(&merged, ctx, depth + 1);
        }
        if let Some(cond) = obj.get("if") {
            // The `then` (the condition made true, by merging it in), or the `else` when the
            // plan asks for it or the `then` cannot be made.
            let base = Value::Object(without(obj, &["if", "then", "else"]));
            if self.choice() != Some(&Choice::Else) {
                let then = obj.get("then").unwrap_or(&Value::Bool(true));
                let candidate = merge(&merge(&base, self.deref(cond)), self.deref(then));
                if let Some(v) = self.value(&candidate, ctx, depth + 1) {
                    return Some(v);
                }
            }
            let otherwise = obj.get("else").unwrap_or(&Value::Bool(true));
            let mut candidate = merge(&base, self.deref(otherwise));
            if let Value::Object(c) = &mut candidate {
                c.insert("not".into(), cond.clone());
            }
            return self.value(&candidate, ctx, depth + 1);
        }
        for key in ["anyOf", "oneOf"] {
            let Some(Value::Array(options)) = obj.get(key) else {
                continue;
            };
            let base = Value::Object(without(obj, &[key]));
            let base_required = required_names(Some(obj));
            let mut order: Vec<usize> = (0..options.len())
                .filter(|&i| !is_null_schema(&options[i]))
                .collect();
            order.extend((0..options.len()).filter(|&i| is_null_schema(&options[i])));
            if let Some(Choice::Branch(k)) = self.choice() {
                if let Some(at) = order.iter().position(|i| i == k) {
                    let k = order.remove(at);
                    order.insert(0, k);
                }
            }
            for i in order.into_iter().take(MAX_OPTIONS) {
                let option = self.deref(&options[i]);
                let candidate = merge(&base, option);
                if key == "oneOf" {
                    let own = required_names(option.as_object());
                    let others: Vec<String> = options
                        .iter()
                        .enumerate()
                        .filter(|(j, _)| *j != i)
                        .flat_map(|(_, o)| required_names(self.deref(o).as_object()))
                        .filter(|n| !own.contains(n) && !base_required.contains(n))
                        .map(str::to_string)
                        .collect();
                    self.exclude = Some((self.path.len(), others));
                }
                let made = self.value(&candidate, ctx, depth + 1);
                self.exclude = None;
                if let Some(v) = made {
                    return Some(v);
                }
            }
            // No option works: try without them.
            return self.value(&base, ctx, depth + 1);
        }

        if let Some(c) = obj.get("const") {
            return Some(self.copy(c));
        }
        let enumerated = match obj.get("enum") {
            Some(Value::Array(values)) if !values.is_empty() => Some(values),
            _ => None,
        };
        let types = types_of(obj, ctx);
        match (self.choice(), enumerated) {
            (Some(Choice::Enum(k)), Some(values)) if *k < values.len() => {
                return Some(self.copy(&values[*k]));
            }
            (Some(Choice::Bool(b)), None) if types.contains(&"boolean") => {
                return Some(Value::Bool(*b));
            }
            _ => {}
        }
        let string_ok = types.iter().any(|t| *t == "string" || *t == "any");
        if let Some(Choice::Text(text)) = self.choice() {
            if string_ok
                && enumerated.is_none()
                && !obj.contains_key("pattern")
                && length_ok(obj, text)
            {
                self.bytes += text.len();
                return Some(Value::String(text.clone()));
            }
        }
        if let Some(hint) = ctx.hint.filter(|h| h.is_path()) {
            if string_ok
                && enumerated.is_none()
                && !obj.contains_key("format")
                && !obj.contains_key("pattern")
            {
                let param = self.path.last().map_or("", String::as_str);
                let pick = WORKSPACE.with(|w| {
                    FILES.with(|f| {
                        let (files, tool) = &*f.borrow();
                        files::pick(
                            &w.borrow(),
                            files,
                            tool,
                            param,
                            obj,
                            hint == Hint::Dir,
                            ctx.variant,
                        )
                    })
                });
                let s = match pick {
                    files::Pick::Existing(s) => s,
                    files::Pick::NewDir => Hint::Dir.value(ctx.variant),
                    files::Pick::MadeUp => hint.value(ctx.variant),
                };
                if length_ok(obj, &s) {
                    return Some(Value::String(s));
                }
            }
        }
        // The schema's own suggestions, for the first of several values only (the others must
        // differ for `uniqueItems`).
        if ctx.variant == 0 {
            let examples = match obj.get("examples") {
                Some(Value::Array(list)) => list.iter().take(MAX_OPTIONS).collect(),
                _ => Vec::new(),
            };
            for candidate in obj.get("default").into_iter().chain(examples) {
                if fits(candidate, obj) && is_safe_value(candidate) {
                    return Some(self.copy(candidate));
                }
            }
        }
        if let Some(values) = enumerated {
            let safe: Vec<&Value> = values
                .iter()
                .filter(|v| !v.is_null() && is_safe_value(v))
                .collect();
            return Some(match safe.len() {
                0 => self.copy(&values[0]),
                n => self.copy(safe[ctx.variant % n]),
            });
        }
        types.iter().find_map(|t| self.typed(t, obj, ctx, depth))
    }

    /// A value for a schema that says nothing.
    fn untyped(&mut self, ctx: &Ctx) -> Value {
        if ctx.top {
            Value::Object(Map::new())
        } else if let Some(hint) = ctx.hint {
            Value::String(hint.value(ctx.variant))
        } else {
            Value::String(plain(ctx.variant))
        }
    }

    fn typed(
        &mut self,
        t: &str,
        obj: &Map<String, Value>,
        ctx: &Ctx,
        depth: usize,
    ) -> Option<Value> {
        match t {
            "string" => {
                let s = string(obj, ctx);
                self.bytes += s.len();
                Some(Value::String(s))
            }
            "integer" => Some(number(obj, true, ctx.variant)),
            "number" => Some(number(obj, false, ctx.variant)),
            "boolean" => Some(Value::Bool(ctx.variant % 2 == 1)),
            "null" => Some(Value::Null),
            "object" => Some(self.object(obj, ctx, depth)),
            "array" => Some(self.array(obj, ctx, depth)),
            "any" => Some(self.untyped(ctx)),
            // An unknown type name: nothing is known to be valid.
            _ => None,
        }
    }

    fn object(&mut self, obj: &Map<String, Value>, ctx: &Ctx, depth: usize) -> Value {
        let required = required_names(Some(obj));
        let excluded = match self.exclude.take() {
            Some((len, names)) if len == self.path.len() => names,
            other => {
                self.exclude = other;
                Vec::new()
            }
        };
        let additional = obj.get("additionalProperties");
        let extra_schema = match additional {
            Some(s @ Value::Object(_)) => Some(s),
            Some(Value::Bool(false)) => None,
            _ => Some(&Value::Bool(true)),
        };
        let mut out = Map::new();
        let properties = obj.get("properties").and_then(Value::as_object);
        if let Some(properties) = properties {
            for (name, sub) in properties {
                if self.exhausted() {
                    break;
                }
                let is_required = required.contains(&name.as_str());
                if !is_required
                    && (depth >= OPTIONAL_DEPTH || self.choices.minimal || excluded.contains(name))
                {
                    continue;
                }
                self.property(name, sub, is_required, ctx, depth, &mut out);
            }
        }
        for name in &required {
            if out.contains_key(*name) || self.exhausted() {
                continue;
            }
            let schema = extra_schema.unwrap_or(&Value::Bool(true));
            self.property(name, schema, true, ctx, depth, &mut out);
        }
        // What a property present brings with it (`dependentRequired`, and the array form of
        // draft 7's `dependencies`), a few rounds deep (a chain of them).
        for _ in 0..4 {
            let mut wanted: Vec<String> = Vec::new();
            for key in ["dependentRequired", "dependencies"] {
                let Some(Value::Object(deps)) = obj.get(key) else {
                    continue;
                };
                for (name, needs) in deps {
                    let Value::Array(needs) = needs else { continue };
                    if out.contains_key(name) {
                        wanted.extend(
                            needs
                                .iter()
                                .filter_map(Value::as_str)
                                .filter(|n| !out.contains_key(*n))
                                .map(str::to_string),
                        );
                    }
                }
            }
            if wanted.is_empty() || self.exhausted() {
                break;
            }
            for name in wanted {
                if out.contains_key(&name) {
                    continue;
                }
                let schema = properties
                    .and_then(|p| p.get(&name))
                    .or(extra_schema)
                    .unwrap_or(&Value::Bool(true));
                self.property(&name, schema, true, ctx, depth, &mut out);
            }
        }
        // An object described only by `additionalProperties` (a map): one entry shows it.
        let min = get_usize(obj, "minProperties").unwrap_or(0).min(MAX_ITEMS);
        let wants_example =
            none_or(properties, |p| p.is_empty()) && matches!(additional, Some(Value::Object(_)));
        if let Some(schema) = extra_schema {
            let mut n = 0;
            while (out.len() < min || (wants_example && n == 0)) && self.nodes < MAX_NODES {
                let key = if n == 0 {
                    PROBE_STRING.to_string()
                } else {
                    format!("{PROBE_STRING}{n}")
                };
                n += 1;
                if n > MAX_ITEMS {
                    break;
                }
                if out.contains_key(&key) {
                    continue;
                }
                let ictx = Ctx {
                    hint: None,
                    variant: ctx.variant,
                    top: false,
                };
                match self.value(schema, &ictx, depth + 1) {
                    Some(v) => {
                        out.insert(key, v);
                    }
                    None => break,
                }
            }
        }
        if let Some(max) = get_usize(obj, "maxProperties") {
            let optional: Vec<String> = out
                .keys()
                .filter(|k| !required.contains(&k.as_str()))
                .cloned()
                .collect();
            for key in optional.iter().rev() {
                if out.len() <= max {
                    break;
                }
                out.remove(key);
            }
        }
        Value::Object(out)
    }

    /// One property of an object, made at its path; a required one that cannot be made is
    /// `""`.
    fn property(
        &mut self,
        name: &str,
        schema: &Value,
        required: bool,
        ctx: &Ctx,
        depth: usize,
        out: &mut Map<String, Value>,
    ) {
        let pctx = Ctx {
            hint: Hint::from_name(name),
            variant: ctx.variant,
            top: false,
        };
        self.path.push(name.to_string());
        let v = self.value(schema, &pctx, depth + 1);
        self.path.pop();
        match v {
            Some(v) => {
                out.insert(self.key(name), v);
            }
            None if required => {
                out.insert(self.key(name), Value::String(String::new()));
            }
            None => {}
        }
    }

    fn array(&mut self, obj: &Map<String, Value>, ctx: &Ctx, depth: usize) -> Value {
        let min = get_usize(obj, "minItems").unwrap_or(0);
        let max = get_usize(obj, "maxItems").unwrap_or(usize::MAX);
        // 2020-12 `prefixItems` + `items`, or the older array `items` + `additionalItems`.
        let (prefix, rest): (&[Value], Option<&Value>) =
            match (obj.get("prefixItems"), obj.get("items")) {
                (Some(Value::Array(prefix)), items) => (prefix, items),
                (_, Some(Value::Array(prefix))) => (prefix, obj.get("additionalItems")),
                (_, items) => (&[], items),
            };
        let rest = rest.unwrap_or(&Value::Bool(true));
        let mut want = min
            .max(1)
            .max(prefix.len().min(MAX_ITEMS))
            .min(max)
            .min(MAX_ITEMS);
        if *rest == Value::Bool(false) {
            want = want.min(prefix.len());
        }
        let mut items: Vec<Value> = Vec::new();
        for i in 0..want {
            if self.exhausted() {
                break;
            }
            let schema = prefix.get(i).unwrap_or(rest);
            let ictx = Ctx {
                hint: ctx.hint,
                // Items described by one schema are made to differ, for `uniqueItems`.
                variant: i.saturating_sub(prefix.len()),
                top: false,
            };
            self.path.push("*".into());
            let made = self.value(schema, &ictx, depth + 1);
            self.path.pop();
            match made {
                Some(v) => items.push(v),
                None if i < min => items.push(Value::String(String::new())),
                None => break,
            }
        }
        if obj.get("uniqueItems") == Some(&Value::Bool(true)) {
            let mut unique: Vec<Value> = Vec::with_capacity(items.len());
            for item in items {
                if !unique.contains(&item) {
                    unique.push(item);
                }
            }
            items = unique;
        }
        Value::Array(items)
    }

    /// Resolves a local reference.
    fn resolve(&self, reference: &str) -> Option<&'a Value> {
        let fragment = reference.strip_prefix('#')?;
        if fragment.is_empty() {
            return Some(self.root);
        }
        if !fragment.starts_with('/') {
            return None;
        }
        self.root.pointer(&percent_decode(fragment))
    }

    /// Follows a chain of bare `$ref`s.
    fn deref<'s>(&self, mut schema: &'s Value) -> &'s Value
    where
        'a: 's,
    {
        for _ in 0..MAX_REF_HOPS {
            let Some(obj) = schema.as_object() else {
                break;
            };
            let bare = obj.keys().all(|k| ANNOTATIONS.contains(&k.as_str()));
            match obj
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| self.resolve(r))
            {
                Some(target) if bare => schema = target,
                _ => break,
            }
        }
        schema
    }
}

/// Values in `v` (itself included) and bytes of its strings and object keys.
fn weight(v: &Value) -> (usize, usize) {
    match v {
        Value::String(s) => (1, s.len()),
        Value::Array(a) => a.iter().fold((1, 0), |(n, b), x| {
            let (xn, xb) = weight(x);
            (n + xn, b + xb)
        }),
        Value::Object(o) => o.iter().fold((1, 0), |(n, b), (k, x)| {
            let (xn, xb) = weight(x);
            (n + xn, b + k.len() + xb)
        }),
        _ => (1, 0),
    }
}

/// A copy of `obj` without `keys`.
fn without(obj: &Map<String, Value>, keys: &[&str]) -> Map<String, Value> {
    obj.iter()
        .filter(|(k, _)| !keys.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The names an object schema requires.
fn required_names(obj: Option<&Map<String, Value>>) -> Vec<&str> {
    match obj.and_then(|o| o.get("required")) {
        Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// Whether `value` matches `schema` as far as [`fits`] sees, and, for an object, each of its
/// properties the schema describes: enough to keep clear of a `not` (`not: {required: [a,
/// b]}`, `not: {properties: {mode: {const: "x"}}}`), not a validator.
fn matches_roughly(value: &Value, schema: &Value) -> bool {
    let obj = match schema {
        Value::Bool(b) => return *b,
        Value::Object(o) => o,
        _ => return true,
    };
    // `fits` refuses strings it cannot check (patterns, formats): here that is a match.
    let shallow = match value {
        Value::String(_) => fits(value, &without(obj, &["pattern", "format"])),
        _ => fits(value, obj),
    };
    if !shallow {
        return false;
    }
    match (value, obj.get("properties")) {
        (Value::Object(map), Some(Value::Object(props))) => props
            .iter()
            .all(|(k, sub)| map.get(k).is_none_or(|v| matches_roughly(v, sub))),
        _ => true,
    }
}

fn is_null_schema(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("null")
        || schema.get("const") == Some(&Value::Null)
}

/// Merges two schemas into one that asks for both (approximately: what the generator reads).
fn merge(a: &Value, b: &Value) -> Value {
    let (a_obj, b_obj) = match (a, b) {
        (Value::Bool(false), _) | (_, Value::Bool(false)) => return Value::Bool(false),
        (Value::Object(a), Value::Object(b)) => (a, b),
        (Value::Object(_), _) => return a.clone(),
        _ => return b.clone(),
    };
    let mut out = a_obj.clone();
    for (key, bv) in b_obj {
        let Some(av) = out.get_mut(key) else {
            out.insert(key.clone(), bv.clone());
            continue;
        };
        match key.as_str() {
            "properties" => {
                if let (Value::Object(ap), Value::Object(bp)) = (&mut *av, bv) {
                    for (name, schema) in bp {
                        let merged = match ap.get(name) {
                            Some(existing) => merge(existing, schema),
                            None => schema.clone(),
                        };
                        ap.insert(name.clone(), merged);
                    }
                }
            }
            "required" => {
                if let (Value::Array(ar), Value::Array(br)) = (&mut *av, bv) {
                    for name in br {
                        if !ar.contains(name) {
                            ar.push(name.clone());
                        }
                    }
                }
            }
            "minimum" | "exclusiveMinimum" | "minLength" | "minItems" | "minProperties" => {
                if let (Some(x), Some(y)) = (av.as_f64(), bv.as_f64()) {
                    if y > x {
                        *av = bv.clone();
                    }
                }
            }
            "maximum" | "exclusiveMaximum" | "maxLength" | "maxItems" | "maxProperties" => {
                if let (Some(x), Some(y)) = (av.as_f64(), bv.as_f64()) {
                    if y < x {
                        *av = bv.clone();
                    }
                }
            }
            "type" => {
                let ta = type_names(av);
                let tb = type_names(bv);
                let mut both: Vec<Value> = Vec::new();
                for t in &ta {
                    let keep = if tb.contains(t) {
                        Some(*t)
                    } else if (*t == "integer" && tb.contains(&"number"))
                        || (*t == "number" && tb.contains(&"integer"))
                    {
                        Some("integer")
                    } else {
                        None
                    };
                    if let Some(keep) = keep {
                        if !both.iter().any(|v| v.as_str() == Some(keep)) {
                            both.push(Value::String(keep.to_string()));
                        }
                    }
                }
                if !both.is_empty() {
                    *av = Value::Array(both);
                }
            }
            "enum" => {
                if let (Value::Array(ae), Value::Array(be)) = (&mut *av, bv) {
                    ae.retain(|v| be.contains(v));
                }
            }
            "allOf" | "anyOf" | "oneOf" | "$ref" => {
                // Both sides constrain: keep both, as an `allOf` the generator merges later.
                let extra = Value::Object(Map::from_iter([(key.clone(), bv.clone())]));
                match out.get_mut("allOf") {
                    Some(Value::Array(all)) => all.push(extra),
                    _ => {
                        out.insert("allOf".into(), Value::Array(vec![extra]));
                    }
                }
            }
            _ => {}
        }
    }
    Value::Object(out)
}

fn type_names(v: &Value) -> Vec<&str> {
    match v {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// The types to try, in order: the declared ones (non-null first), or the one implied by the
/// keywords, or `any`.
fn types_of<'s>(obj: &'s Map<String, Value>, ctx: &Ctx) -> Vec<&'s str> {
    let mut types: Vec<&str> = match obj.get("type") {
        Some(t) => type_names(t),
        None => {
            let has = |keys: &[&str]| keys.iter().any(|k| obj.contains_key(*k));
            let implied = if has(&[
                "properties",
                "required",
                "additionalProperties",
                "patternProperties",
                "minProperties",
                "maxProperties",
            ]) {
                "object"
            } else if has(&[
                "items",
                "prefixItems",
                "minItems",
                "maxItems",
                "uniqueItems",
            ]) {
                "array"
            } else if has(&["minLength", "maxLength", "pattern", "format"]) {
                "string"
            } else if has(&[
                "minimum",
                "maximum",
                "exclusiveMinimum",
                "exclusiveMaximum",
                "multipleOf",
            ]) {
                "number"
            } else if ctx.top {
                "object"
            } else {
                "any"
            };
            vec![implied]
        }
    };
    if obj.get("nullable") == Some(&Value::Bool(true)) && !types.contains(&"null") {
        types.push("null");
    }
    // Prefer a real value over null.
    types.sort_by_key(|t| *t == "null");
    types
}

fn get_usize(obj: &Map<String, Value>, key: &str) -> Option<usize> {
    let v = obj.get(key)?;
    if let Some(n) = v.as_u64() {
        return Some(usize::try_from(n).unwrap_or(usize::MAX));
    }
    // `3.0` is an integer too; negative or fractional bounds are broken: ignore them.
    v.as_f64()
        .filter(|f| *f >= 0.0 && f.fract() == 0.0)
        .map(|f| {
            if f >= usize::MAX as f64 {
                usize::MAX
            } else {
                f as usize
            }
        })
}

fn plain(variant: usize) -> String {
    let m = marker();
    if !m.is_empty() {
        return match variant {
            0 => format!("{PROBE_STRING}-{m}"),
            n => format!("{PROBE_STRING}-{m}-{n}"),
        };
    }
    if variant == 0 {
        PROBE_STRING.into()
    } else {
        format!("{PROBE_STRING}{variant}")
    }
}

/// The value for a known `format`.
fn format_value(format: &str, variant: usize) -> Option<String> {
    if let Some(hint) = Hint::from_format(format) {
        return Some(hint.value(variant));
    }
    Some(match format {
        "uri-template" => "https://example.test/{id}".into(),
        "ipv6" => PROBE_IPV6.into(),
        "date" => format!("2024-01-{:02}", 1 + variant % 28),
        "date-time" => format!("2024-01-{:02}T00:00:00Z", 1 + variant % 28),
        "time" => "00:00:00Z".into(),
        "duration" => format!("P{}D", 1 + variant),
        "uuid" => format!(
            "00000000-0000-4000-8000-{:012}",
            variant % 1_000_000_000_000
        ),
        "json-pointer" => "/glassbox".into(),
        "relative-json-pointer" => "0".into(),
        "regex" => PROBE_STRING.into(),
        _ => return None,
    })
}

fn length_bounds(obj: &Map<String, Value>) -> (usize, Option<usize>) {
    let min = get_usize(obj, "minLength").unwrap_or(0).min(MAX_STRING);
    let max = get_usize(obj, "maxLength");
    (min, max)
}

fn length_ok(obj: &Map<String, Value>, s: &str) -> bool {
    let (min, max) = length_bounds(obj);
    let n = s.chars().count();
    n >= min && none_or(max, |m| n <= m)
}

fn string(obj: &Map<String, Value>, ctx: &Ctx) -> String {
    let (min, max) = length_bounds(obj);
    let pattern = obj.get("pattern").and_then(Value::as_str);
    if pattern.is_none() {
        if let Some(s) = obj
            .get("format")
            .and_then(Value::as_str)
            .and_then(|f| format_value(f, ctx.variant))
        {
            if length_ok(obj, &s) {
                return s;
            }
        }
    }
    if let Some(p) = pattern {
        if let Some(s) = pattern::generate(p, min, max, MAX_STRING) {
            if is_safe_string(&s) {
                return s;
            }
            // The pattern asks for a real host: be safe rather than valid.
            if s.contains("://") {
                return Hint::Url.value(ctx.variant);
            }
        }
    }
    if let Some(hint) = ctx.hint {
        let s = hint.value(ctx.variant);
        if pattern.is_none() && length_ok(obj, &s) {
            return s;
        }
    }
    let mut s = plain(ctx.variant);
    let n = s.chars().count();
    if n < min {
        for _ in n..min {
            s.push('x');
        }
    }
    if let Some(max) = max {
        if n > max {
            s = s.chars().take(max).collect();
        }
    }
    s
}

/// Lower and upper bounds of a number schema: `(value, exclusive)`.
type Bound = Option<(f64, bool)>;

fn bounds(obj: &Map<String, Value>) -> (Bound, Bound) {
    let num = |k: &str| obj.get(k).and_then(Value::as_f64);
    let flag = |k: &str| obj.get(k) == Some(&Value::Bool(true));
    let mut lo = num("minimum").map(|m| (m, flag("exclusiveMinimum")));
    let mut hi = num("maximum").map(|m| (m, flag("exclusiveMaximum")));
    if let Some(x) = num("exclusiveMinimum") {
        if none_or(lo, |(m, _)| x >= m) {
            lo = Some((x, true));
        }
    }
    if let Some(x) = num("exclusiveMaximum") {
        if none_or(hi, |(m, _)| x <= m) {
            hi = Some((x, true));
        }
    }
    (lo, hi)
}

fn number(obj: &Map<String, Value>, integer: bool, variant: usize) -> Value {
    let (lo, hi) = bounds(obj);
    let step = obj
        .get("multipleOf")
        .and_then(Value::as_f64)
        .filter(|m| *m > 0.0 && m.is_finite());
    let (lo, hi, step) = if integer {
        (
            lo.map(|(v, ex)| if ex { v.floor() + 1.0 } else { v.ceil() }),
            hi.map(|(v, ex)| if ex { v.ceil() - 1.0 } else { v.floor() }),
            Some(match step {
                Some(m) if m.fract() == 0.0 => m,
                _ => 1.0,
            }),
        )
    } else {
        // For numbers an exclusive bound is moved inwards by one (or to the middle).
        let lo_v = lo.map(|(v, ex)| {
            if !ex {
                v
            } else {
                match hi {
                    Some((h, _)) if v + 1.0 >= h => v + (h - v) / 2.0,
                    _ => v + 1.0,
                }
            }
        });
        let hi_v = hi.map(|(v, ex)| {
            if !ex {
                v
            } else {
                match lo {
                    Some((l, _)) if v - 1.0 <= l => v - (v - l) / 2.0,
                    _ => v - 1.0,
                }
            }
        });
        (lo_v, hi_v, step)
    };
    let in_range = |x: f64| none_or(lo, |l| x >= l) && none_or(hi, |h| x <= h);
    let mut x = match (lo, hi) {
        (Some(l), _) => l,
        (None, Some(h)) if h < 1.0 => h,
        _ => 1.0,
    };
    if let Some(m) = step {
        let up = (x / m).ceil() * m;
        let down = hi.map(|h| (h / m).floor() * m);
        x = if in_range(up) {
            up
        } else {
            match down {
                Some(d) if in_range(d) => d,
                _ => x,
            }
        };
        let varied = x + m * variant as f64;
        if variant > 0 && in_range(varied) {
            x = varied;
        }
    } else if variant > 0 && in_range(x + variant as f64) {
        x += variant as f64;
    }
    if !x.is_finite() {
        x = 0.0;
    }
    if x.fract() == 0.0 && x.abs() < 9.0e15 {
        Value::from(x as i64)
    } else {
        Number::from_f64(x).map_or(Value::from(0), Value::Number)
    }
}

/// Whether `value` is valid against the parts of `schema` that can be checked cheaply; used to
/// decide whether a `default` or an example can be used. Errs on the side of `false`.
fn fits(value: &Value, schema: &Map<String, Value>) -> bool {
    if let Some(t) = schema.get("type") {
        let mut types = type_names(t);
        if schema.get("nullable") == Some(&Value::Bool(true)) {
            types.push("null");
        }
        let ok = types.iter().any(|t| match *t {
            "string" => value.is_string(),
            "integer" => {
                value.is_i64() || value.is_u64() || value.as_f64().is_some_and(|f| f.fract() == 0.0)
            }
            "number" => value.is_number(),
            "boolean" => value.is_boolean(),
            "null" => value.is_null(),
            "object" => value.is_object(),
            "array" => value.is_array(),
            _ => false,
        });
        if !ok {
            return false;
        }
    }
    if let Some(Value::Array(values)) = schema.get("enum") {
        if !values.contains(value) {
            return false;
        }
    }
    if let Some(c) = schema.get("const") {
        if c != value {
            return false;
        }
    }
    match value {
        Value::String(s) => {
            // Patterns and formats cannot be checked here: generate instead.
            !schema.contains_key("pattern")
                && !schema.contains_key("format")
                && length_ok(schema, s)
        }
        Value::Number(n) => {
            let Some(x) = n.as_f64() else { return false };
            let (lo, hi) = bounds(schema);
            let lo_ok = none_or(lo, |(l, ex)| if ex { x > l } else { x >= l });
            let hi_ok = none_or(hi, |(h, ex)| if ex { x < h } else { x <= h });
            let step_ok = match schema.get("multipleOf").and_then(Value::as_f64) {
                Some(m) if m > 0.0 => (x / m).fract() == 0.0,
                _ => true,
            };
            lo_ok && hi_ok && step_ok
        }
        Value::Array(items) => {
            none_or(get_usize(schema, "minItems"), |m| items.len() >= m)
                && none_or(get_usize(schema, "maxItems"), |m| items.len() <= m)
        }
        Value::Object(map) => match schema.get("required") {
            Some(Value::Array(names)) => names
                .iter()
                .filter_map(Value::as_str)
                .all(|n| map.contains_key(n)),
            _ => true,
        },
        _ => true,
    }
}

/// Whether every string inside `value` is safe to send (see [`is_safe_string`]) and is not an
/// absolute or climbing path.
fn is_safe_value(value: &Value) -> bool {
    match value {
        Value::String(s) => {
            is_safe_string(s)
                && !s.starts_with('/')
                && !s.starts_with('~')
                && !s.starts_with('\\')
                && !s.contains("..")
                && !(s.len() >= 2
                    && s.as_bytes()[1] == b':'
                    && s.as_bytes()[0].is_ascii_alphabetic())
        }
        Value::Array(items) => items.iter().all(is_safe_value),
        Value::Object(map) => map.values().all(is_safe_value),
        _ => true,
    }
}

/// Whether a string names no host other than a test or documentation one: every URL's host,
/// every e-mail domain and a bare IPv4 address must be under `.test` / `.example` or in
/// 192.0.2.0/24 (2001:db8::/32 for IPv6).
pub(crate) fn is_safe_string(s: &str) -> bool {
    let lower = s.to_ascii_lowercase();
    let mut rest = lower.as_str();
    while let Some(i) = rest.find("://") {
        rest = &rest[i + 3..];
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        let host_port = authority.rsplit('@').next().unwrap_or("");
        let host = if let Some(v6) = host_port.strip_prefix('[') {
            v6.split(']').next().unwrap_or("")
        } else {
            host_port.split(':').next().unwrap_or("")
        };
        if !is_safe_host(host) {
            return false;
        }
    }
    if lower.starts_with("www.") {
        return false;
    }
    for (i, _) in lower.match_indices('@') {
        let domain: String = lower[i + 1..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '.' || *c == '-')
            .collect();
        if domain.contains('.') && !is_safe_host(&domain) {
            return false;
        }
    }
    if is_ipv4(&lower) && !is_safe_host(&lower) {
        return false;
    }
    true
}

fn is_safe_host(host: &str) -> bool {
    let host = host.trim_end_matches('.');
    host == "test"
        || host == "example"
        || host.ends_with(".test")
        || host.ends_with(".example")
        || (is_ipv4(host) && host.starts_with("192.0.2."))
        || host.starts_with("2001:db8:")
}

fn is_ipv4(s: &str) -> bool {
    let parts: Vec<&str> = s.split('.').collect();
    parts.len() == 4
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.len() <= 3 && p.bytes().all(|b| b.is_ascii_digit()))
}

/// Decodes `%XX` escapes in a URI fragment (JSON pointers in `$ref` may carry them).
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && bytes[i + 1].is_ascii_hexdigit()
            && bytes[i + 2].is_ascii_hexdigit()
        {
            let hex = |b: u8| (b as char).to_digit(16).unwrap_or(0) as u8;
            out.push(hex(bytes[i + 1]) * 16 + hex(bytes[i + 2]));
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `true` when `o` is `None` or `f` holds for its value.
fn none_or<T>(o: Option<T>, f: impl FnOnce(T) -> bool) -> bool {
    match o {
        Some(v) => f(v),
        None => true,
    }
}

#[cfg(test)]
mod tests;
