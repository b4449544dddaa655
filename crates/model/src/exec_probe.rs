//! Execution canaries: tool arguments that do one harmless, observable thing only when an
//! interpreter runs them.
//!
//! The plan (`glassbox-mcp`) gives a free string parameter, by its role, a payload of one
//! [`Kind`]; the payload, once *executed*, opens a path that carries the audit's marker and
//! the payload's id ([`canary_name`]: `/tmp/glassbox-<marker>-<id>`), which the recorder
//! sees; `input-exposure` (`glassbox-checks`) reads the id back from the recorded path
//! ([`parse`]) and names the interpreter the input reached ([`Kind::proves`]).
//!
//! The payload text never holds that path whole: it is joined only by evaluation (`'A'+'B'`
//! in Python and JavaScript, `~` in Jinja, `""` between words in a shell, `||` in SQL, an
//! `eval` inside a pickle or a YAML tag). A tool that only stores, echoes or opens its input
//! as a file name therefore never opens the canary path; only running the input does. The one
//! exception is [`Kind::Require`], a module name, which a loader looks up by its name as given:
//! it counts only under a module folder (`node_modules`) or with a module's file extension.
//!
//! The id is the kind's two letters and six letters of a hash of what the payload was made for
//! (the tool and parameter), never a digit, so that a payload echoed back never holds the `49`
//! that an evaluated `{{7*7}}` gives (`input-exposure` looks for that too).

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;

/// What a payload is written for, and what its effect proves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A Python expression or statement (`eval`, `exec`, `compile`).
    PythonCode,
    /// A JavaScript expression (`eval`, `new Function`, `vm`), in a CommonJS or ES module,
    /// or a `vm` context (escaping it through its global's constructor).
    JavaScriptCode,
    /// A Jinja2 template (an unsandboxed environment).
    Jinja,
    /// A Python template engine whose expressions are Python: Tornado's `{{ }}`, Mako's and
    /// Cheetah's `${ }`.
    PythonTemplate,
    /// A JavaScript template engine whose tags run JavaScript: EJS, lodash's and underscore's
    /// `<%= %>`.
    JavaScriptTemplate,
    /// A shell: the input in a command line, unquoted, in single or in double quotes.
    Shell,
    /// PyYAML's unsafe loader (`yaml.load` with `Loader`, `yaml.unsafe_load`).
    Yaml,
    /// Python's unpickler, given the pickle as text (protocol 0) or base64.
    Pickle,
    /// Node's module loader (`require` of a name the input gives).
    Require,
    /// SQLite running the input as SQL (`ATTACH` opens a file), whole or after a quote.
    Sqlite,
}

impl Kind {
    /// Every kind, in the order of their ids.
    pub const ALL: [Kind; 10] = [
        Kind::PythonCode,
        Kind::JavaScriptCode,
        Kind::Jinja,
        Kind::PythonTemplate,
        Kind::JavaScriptTemplate,
        Kind::Shell,
        Kind::Yaml,
        Kind::Pickle,
        Kind::Require,
        Kind::Sqlite,
    ];

    /// The two letters that start its ids.
    pub fn code(self) -> &'static str {
        match self {
            Kind::PythonCode => "py",
            Kind::JavaScriptCode => "js",
            Kind::Jinja => "jj",
            Kind::PythonTemplate => "pt",
            Kind::JavaScriptTemplate => "jt",
            Kind::Shell => "sh",
            Kind::Yaml => "ym",
            Kind::Pickle => "pk",
            Kind::Require => "rq",
            Kind::Sqlite => "sq",
        }
    }

    /// What its effect proves the input reached, for a finding: "the input reached {proves}".
    pub fn proves(self) -> &'static str {
        match self {
            Kind::PythonCode => "a Python eval/exec",
            Kind::JavaScriptCode => "a JavaScript eval",
            Kind::Jinja => "a Jinja2 template rendered unsandboxed",
            Kind::PythonTemplate => "a Python template engine (Tornado, Mako or Cheetah)",
            Kind::JavaScriptTemplate => "a JavaScript template engine (EJS, lodash/underscore)",
            Kind::Shell => "a shell's command line",
            Kind::Yaml => "PyYAML's unsafe loader",
            Kind::Pickle => "Python's unpickler",
            Kind::Require => "Node's module loader (require of a name it gives)",
            Kind::Sqlite => "SQLite as SQL (ATTACH opened a file it named)",
        }
    }

    /// The kind of an id ([`id`]).
    pub fn of_id(id: &str) -> Option<Kind> {
        let code = id.get(..2)?;
        Kind::ALL.into_iter().find(|k| k.code() == code)
    }
}

/// The folder the canary paths are in: scratch space every sandbox gives, outside any tool's
/// workspace, so that no other rule reads the open as the tool's reach.
pub const DIR: &str = "/tmp";

/// The id of a payload of `kind` made for `seed` (the tool and parameter): the kind's code and
/// six lower-case letters of a hash of `seed` (FNV-1a: stable across builds and platforms,
/// which `std`'s hasher is not; written here because six letters need no crate).
pub fn id(kind: Kind, seed: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in seed.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    let mut id = kind.code().to_string();
    for _ in 0..6 {
        id.push(char::from(b'a' + (h % 26) as u8));
        h /= 26;
    }
    id
}

/// The file name a payload with `id` opens under [`DIR`]: `glassbox-<marker>-<id>`.
pub fn canary_name(marker: &str, id: &str) -> String {
    format!("glassbox-{marker}-{id}")
}

/// The payloads of `kind` with `id` for `marker` (a valid input marker: lower-case letters and
/// digits), each with what it is written for. Most kinds have one; a pickle comes as base64
/// and as text, SQL whole and after a quote.
pub fn payloads(kind: Kind, marker: &str, id: &str) -> Vec<(&'static str, String)> {
    // The path in two pieces, joined only when the payload runs.
    let head = format!("{DIR}/glassbox-{marker}-");
    let py = format!("__import__('os').open('{head}'+'{id}',0)");
    let js = format!(
        "(()=>{{let p;try{{p=process}}catch(e){{p=this.constructor.constructor('return process')()}}\
         const g=p.getBuiltinModule,m=p.mainModule,r=g?g.bind(p):typeof require=='function'?require:\
         m?m.require.bind(m):0;const f='{head}'+'{id}';\
         return r?r('fs').openSync(f):import('fs').then(x=>x.openSync(f))}})()"
    );
    match kind {
        Kind::PythonCode => vec![("Python code", py)],
        Kind::JavaScriptCode => vec![("JavaScript code", js)],
        Kind::Jinja => vec![(
            "a Jinja2 expression",
            format!("{{{{cycler.__init__.__globals__.os.open('{head}'~'{id}',0)}}}}"),
        )],
        // Tornado reads `{{ }}` and leaves `${ }` as text; Mako and Cheetah the other way.
        Kind::PythonTemplate => vec![(
            "Python template expressions",
            format!("{{{{{py}}}}}${{{py}}}"),
        )],
        Kind::JavaScriptTemplate => vec![("a JavaScript template tag", format!("<%= {js} %>"))],
        Kind::Shell => vec![("shell metacharacters", shell(marker, &head, id))],
        Kind::Yaml => vec![(
            "a YAML Python tag",
            format!("!!python/object/apply:builtins.eval [\"{py}\"]"),
        )],
        Kind::Pickle => {
            let text = format!("c__builtin__\neval\n(V{py}\ntR.");
            vec![
                ("a pickle, base64", STANDARD.encode(text.as_bytes())),
                ("a pickle", text),
            ]
        }
        Kind::Require => vec![("a module name", canary_name(marker, id))],
        Kind::Sqlite => {
            let attach = format!("ATTACH DATABASE '{head}'||'{id}' AS glassbox_probe");
            vec![
                ("an SQL ATTACH", attach.clone()),
                ("an SQL ATTACH after a quote", format!("x'; {attach}; --")),
            ]
        }
    }
}

/// The shell payload: it runs `cat` of the canary path where the input lands unquoted or in
/// double quotes (`$(...)`), and in single quotes (the quote closed, `;cat ...`, the rest a
/// comment); its quotes are balanced, so no context is a syntax error. It starts with the
/// marker and ends with `{{7*7}}`, so that a template engine rendering it shows `49` after the
/// marker (`input-exposure`'s evaluated-template rule), and holds nothing a template engine
/// runs.
fn shell(marker: &str, head: &str, id: &str) -> String {
    format!("glassbox-{marker}-$(cat {head}\"\"{id})';cat {head}\"\"{id} #'{{{{7*7}}}}")
}

/// A parameter of no known role gets this one: [`Kind::Shell`]'s payload (see [`shell`]).
pub fn polyglot(marker: &str, id_of: impl Fn(Kind) -> String) -> String {
    let head = format!("{DIR}/glassbox-{marker}-");
    shell(marker, &head, &id_of(Kind::Shell))
}

/// The kind and id of a canary that the recorded `path` (absolute, as recorded) shows was
/// executed, for `marker`: its last component is [`canary_name`] exactly (a module name: under
/// a `node_modules` folder, or with a module file's extension).
pub fn parse(marker: &str, path: &[u8]) -> Option<(Kind, String)> {
    let mut parts = path.rsplit(|&b| b == b'/').filter(|p| !p.is_empty());
    let last = std::str::from_utf8(parts.next()?).ok()?;
    let parent = parts.next().unwrap_or_default();
    let prefix = format!("glassbox-{marker}-");
    let rest = last.strip_prefix(&prefix)?;
    let (id, ext) = match rest.split_once('.') {
        Some((id, ext)) => (id, Some(ext)),
        None => (rest, None),
    };
    if id.len() != 8 || !id.bytes().all(|b| b.is_ascii_lowercase()) {
        return None;
    }
    let kind = Kind::of_id(id)?;
    let module_folder = matches!(
        parent,
        b"node_modules" | b".node_modules" | b".node_libraries"
    );
    let ok = match (kind, ext) {
        (Kind::Require, None) => module_folder,
        (Kind::Require, Some(ext)) => {
            matches!(ext, "js" | "json" | "node" | "cjs" | "mjs") || module_folder
        }
        (_, None) => true,
        // Not a canary: another name that starts like one (SQLite's `-journal` has no dot).
        (_, Some(_)) => false,
    };
    ok.then(|| (kind, id.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_letters_and_stable() {
        let a = id(Kind::Shell, "ping\0host");
        assert_eq!(a, id(Kind::Shell, "ping\0host"));
        assert_ne!(a, id(Kind::Shell, "ping\0count"));
        assert!(a.starts_with("sh") && a.len() == 8);
        assert!(a.bytes().all(|b| b.is_ascii_lowercase()), "{a}");
    }

    #[test]
    fn no_payload_holds_its_canary_path_whole() {
        for kind in Kind::ALL {
            let pid = id(kind, "t\0p");
            let path = format!("{DIR}/{}", canary_name("abcd", &pid));
            for (what, p) in payloads(kind, "abcd", &pid) {
                if kind != Kind::Require {
                    assert!(!p.contains(&path), "{what}: {p}");
                }
                assert!(p.contains(&pid) || what.ends_with("base64"), "{what}: {p}");
            }
        }
    }

    #[test]
    fn the_recorded_path_gives_back_kind_and_id() {
        let pid = id(Kind::PythonCode, "calc\0expression");
        let path = format!("{DIR}/{}", canary_name("abcd", &pid));
        assert_eq!(
            parse("abcd", path.as_bytes()),
            Some((Kind::PythonCode, pid))
        );
        // Another marker, a longer name, a journal: no.
        assert_eq!(parse("abce", path.as_bytes()), None);
        assert_eq!(parse("abcd", format!("{path}x").as_bytes()), None);
        assert_eq!(parse("abcd", format!("{path}-journal").as_bytes()), None);
        // A file tool opening the shell payload as a file name: its last component is not
        // the canary's.
        let sid = id_of_shell();
        let payload = &payloads(Kind::Shell, "abcd", &sid)[0].1;
        assert_eq!(parse("abcd", format!("/work/{payload}").as_bytes()), None);
        // A module name counts only where a loader looks.
        let rid = id(Kind::Require, "load\0module");
        let name = canary_name("abcd", &rid);
        assert_eq!(parse("abcd", format!("/work/{name}").as_bytes()), None);
        assert_eq!(
            parse("abcd", format!("/home/u/.node_modules/{name}").as_bytes()),
            Some((Kind::Require, rid.clone()))
        );
        assert_eq!(
            parse("abcd", format!("/srv/{name}.js").as_bytes()),
            Some((Kind::Require, rid))
        );
    }

    fn id_of_shell() -> String {
        id(Kind::Shell, "x")
    }
}
