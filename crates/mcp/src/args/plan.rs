//! A plan of calls for one tool: the argument sets that reach what a caller's choices decide.
//!
//! One call per tool reaches one path through it. What sits behind a boolean, an `enum` value,
//! a `oneOf` option or an `if` is reached only by a call that makes that choice, so the plan
//! holds, in this order:
//!
//! 1. the full set ([`super::generate_arguments`]: every property, the first of every choice);
//! 2. the minimal set (required properties only, and what `dependentRequired` brings);
//! 3. one set per choice the schema leaves: each boolean the other way, each other `enum`
//!    entry, each other `anyOf`/`oneOf` option, the `else` of each `if`. The choices are
//!    visited a round at a time (every place's first alternative, then every place's second...),
//!    so a small budget still reaches every place once before any `enum` is walked through;
//! 4. at a free string whose parameter's name says what it is (its role), a value a caller
//!    could give that tool, which stays inside the sandbox and the edge: for a path, files
//!    outside the workspace ([`Probes::outside`]: a planted credential, another project's
//!    `.env`, and the same by `../` traversal); for a socket path, the canary Docker socket;
//!    for a command, a harmless `echo` carrying the marker; for a template, `{{7*7}}`-style
//!    expressions after the marker; for SQL, the marker and a quote. These come after the
//!    choices of the same round.
//!
//! Every set is made by the same generator with one choice changed (the rest as in the full
//! set), and is as valid against the schema as the generator can make it. A set equal to an
//! earlier one is left out. The plan is bounded by `max` calls, and the places looked at by
//! their depth in the schema and their number.

use super::{generate_with, merge, name_has, Choice, Choices, Gen, Hint, MARKER};
use glassbox_model::exec_probe::{self, Kind};
use serde_json::{Map, Value};

/// Most places of choice looked at in one schema.
const MAX_PLACES: usize = 64;
/// Most alternatives tried at one place (`enum` entries, `oneOf` options).
const MAX_ALTERNATIVES: usize = 8;
/// Deepest object nesting looked into for places of choice.
const MAX_PLACE_DEPTH: usize = 4;

/// One call of a plan: its arguments and what they choose.
#[derive(Clone, Debug, PartialEq)]
pub struct PlannedCall {
    /// What this set chooses, for the report: `all properties`, `required only`,
    /// `dryRun=true`, `mode="delete"`, `options: oneOf option 2 of 3`, `else of the if`.
    pub label: String,
    /// The `arguments` of the `tools/call`.
    pub arguments: Value,
}

/// What the audit gives the values chosen by role (see the [module documentation](self)).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Probes {
    /// Files outside the workspace that a path-like parameter names, each with what it is
    /// (`a planted credential`): absolute, and by `../` traversal.
    pub outside: Vec<(String, String)>,
    /// The canary Docker socket, for a socket path.
    pub socket: Option<String>,
    /// The address a URL parameter is given as the cloud metadata service's
    /// (`169.254.169.254`; in tests and the selftest a documentation address stands in for
    /// it): an IP literal, IPv6 without brackets.
    pub metadata: Option<String>,
    /// The folder the server was given to work in (an absolute directory its arguments name:
    /// `server-filesystem /home/ana/notes`): path values go inside it, as a user's would, so
    /// that a tool confined to it does its work rather than refuse every call.
    pub workspace: Option<String>,
    /// Files in the workspace (paths relative to it), which path values name by the kind a
    /// parameter wants (the spreadsheet for a spreadsheet, the folder for a repository); a
    /// value to be made new stays made up ([`super::files`]).
    pub files: Vec<String>,
    /// What the plan is for (a tool's, resource template's or prompt's name): the execution
    /// canaries' ids are made from it and the parameter's name, so that the effect of one
    /// names the call that sent it ([`glassbox_model::exec_probe`]).
    pub tool: String,
}

/// The path asked of the metadata address: where a cloud's instance credentials are.
pub const METADATA_PATH: &str = "/latest/meta-data/iam/security-credentials/";

impl Probes {
    /// These probes for the plan of `tool` (see [`Probes::tool`]).
    pub fn for_tool(&self, tool: &str) -> Probes {
        Probes {
            tool: tool.to_string(),
            ..self.clone()
        }
    }

    /// The URL a URL parameter gets for the metadata address, if there is one.
    pub fn metadata_url(&self) -> Option<String> {
        let ip = self.metadata.as_deref()?;
        let host = if ip.contains(':') {
            format!("[{ip}]")
        } else {
            ip.to_string()
        };
        Some(format!("http://{host}{METADATA_PATH}"))
    }
}

/// The calls of a tool's plan (see the [module documentation](self)), at most `max` (at least
/// one: the full set), with `marker` in the probe strings as in
/// [`super::generate_arguments_marked`], without values chosen by role for paths and sockets.
pub fn plan_calls(schema: &Value, marker: &str, max: usize) -> Vec<PlannedCall> {
    plan_calls_with(schema, marker, &Probes::default(), max)
}

/// [`plan_calls`] with `probes` for the values chosen by role.
pub fn plan_calls_with(
    schema: &Value,
    marker: &str,
    probes: &Probes,
    max: usize,
) -> Vec<PlannedCall> {
    let marker = if super::valid_marker(marker) {
        marker
    } else {
        ""
    };
    MARKER.with(|m| *m.borrow_mut() = marker.to_string());
    super::WORKSPACE.with(|w| *w.borrow_mut() = probes.workspace.clone().unwrap_or_default());
    super::FILES.with(|f| *f.borrow_mut() = (probes.files.clone(), probes.tool.clone()));
    let plan = plan_unmarked(schema, probes, max.max(1));
    MARKER.with(|m| m.borrow_mut().clear());
    super::WORKSPACE.with(|w| w.borrow_mut().clear());
    super::FILES.with(|f| *f.borrow_mut() = Default::default());
    plan
}

/// What a parameter's name says it is, where the plan gives it a value of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Path,
    Socket,
    Command,
    /// Code or an expression an interpreter may run (`code`, `expression`, `formula`).
    Code,
    Template,
    Sql,
    Url,
    /// YAML or configuration text (`yaml`, `config`).
    Yaml,
    /// Serialized data (`pickle`, `serialized`, `blob`).
    Serialized,
    /// A module or plugin to load by name.
    Module,
}

impl Role {
    /// The role of the parameter `name` whose schema is `obj`: by its name, else its format,
    /// else its description.
    fn of(name: &str, obj: &Map<String, Value>) -> Option<Role> {
        if let Some(role) = Role::of_name(name) {
            return Some(role);
        }
        let format = obj.get("format").and_then(Value::as_str);
        if format.and_then(Hint::from_format) == Some(Hint::Url) {
            return Some(Role::Url);
        }
        obj.get("description")
            .and_then(Value::as_str)
            .and_then(Role::of_description)
    }

    /// The role a description gives: a few words of it, in the order of [`Role::of_name`],
    /// taken only where they say what the value is ("the URL to fetch", "shell command to
    /// run", "path to the file"), not where they mention it ("returns the file's URL" has
    /// both; the first phrase found decides). Bounded: the first 300 characters.
    fn of_description(description: &str) -> Option<Role> {
        let d: String = description
            .chars()
            .take(300)
            .collect::<String>()
            .to_lowercase();
        const PHRASES: &[(&str, Role)] = &[
            ("socket path", Role::Socket),
            ("path to the socket", Role::Socket),
            ("unix socket", Role::Socket),
            ("shell command", Role::Command),
            ("command to run", Role::Command),
            ("command to execute", Role::Command),
            ("command line to", Role::Command),
            ("code to run", Role::Code),
            ("code to execute", Role::Code),
            ("code to evaluate", Role::Code),
            ("python code", Role::Code),
            ("javascript code", Role::Code),
            ("expression to evaluate", Role::Code),
            ("math expression", Role::Code),
            ("mathematical expression", Role::Code),
            ("template to render", Role::Template),
            ("template string", Role::Template),
            ("jinja", Role::Template),
            ("yaml", Role::Yaml),
            ("pickle", Role::Serialized),
            ("serialized", Role::Serialized),
            ("module to import", Role::Module),
            ("module to load", Role::Module),
            ("plugin to load", Role::Module),
            ("sql query", Role::Sql),
            ("sql statement", Role::Sql),
            ("url to ", Role::Url),
            ("url of ", Role::Url),
            ("uri of ", Role::Url),
            ("web address", Role::Url),
            ("path to the file", Role::Path),
            ("path to a file", Role::Path),
            ("path of the file", Role::Path),
            ("file path", Role::Path),
            ("absolute path", Role::Path),
            ("relative path", Role::Path),
            ("path to the directory", Role::Path),
            ("directory path", Role::Path),
        ];
        PHRASES
            .iter()
            .filter_map(|(p, role)| d.find(p).map(|at| (at, *role)))
            .min_by_key(|(at, _)| *at)
            .map(|(_, role)| role)
    }

    fn of_name(name: &str) -> Option<Role> {
        let has = name_has(name);
        if has(&["socket", "sock", "sockets"]) {
            Some(Role::Socket)
        } else if has(&[
            "command",
            "commands",
            "cmd",
            "cmdline",
            "shell",
            "exec",
            "executable",
            "program",
        ]) {
            Some(Role::Command)
        } else if has(&["template", "templates", "tmpl", "jinja", "jinja2", "mako"]) {
            Some(Role::Template)
        } else if has(&["sql", "query", "statement", "where"]) {
            Some(Role::Sql)
        } else {
            // A path or a URL by its name first: `script_path`, `code_url` name where a thing
            // is, not the thing; then the roles of what a value is.
            match Hint::from_name(name) {
                Some(h) if h.is_path() => Some(Role::Path),
                Some(Hint::Url) => Some(Role::Url),
                _ if has(&[
                    "code",
                    "snippet",
                    "script",
                    "eval",
                    "python",
                    "javascript",
                    "js",
                    "expression",
                    "expr",
                    "formula",
                    "equation",
                    "calculation",
                    "lambda",
                ]) =>
                {
                    Some(Role::Code)
                }
                _ if has(&[
                    "pickle",
                    "pickled",
                    "serialized",
                    "serialised",
                    "serialization",
                    "marshal",
                    "blob",
                ]) =>
                {
                    Some(Role::Serialized)
                }
                _ if has(&[
                    "module", "modules", "plugin", "plugins", "import", "require",
                ]) =>
                {
                    Some(Role::Module)
                }
                _ if has(&["yaml", "yml", "config", "configuration", "manifest"]) => {
                    Some(Role::Yaml)
                }
                _ => None,
            }
        }
    }

    /// The execution canaries this role gives first ([`glassbox_model::exec_probe`]).
    fn canaries(self) -> &'static [Kind] {
        match self {
            Role::Command => &[Kind::Shell],
            Role::Code => &[Kind::PythonCode, Kind::JavaScriptCode, Kind::Shell],
            Role::Template => &[Kind::Jinja, Kind::PythonTemplate, Kind::JavaScriptTemplate],
            Role::Sql => &[Kind::Sqlite],
            Role::Yaml => &[Kind::Yaml],
            Role::Serialized => &[Kind::Pickle],
            Role::Module => &[Kind::Require],
            Role::Path | Role::Socket | Role::Url => &[],
        }
    }

    /// The values for this role, each with its label (after `name=`): its execution
    /// canaries first (made for the parameter `param`), then its other probes; for a
    /// template, its `{{7*7}}`-style probe first, which any engine that returns what it
    /// rendered shows evaluated, even one that runs no code.
    fn values(self, probes: &Probes, param: &str) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        if self == Role::Template {
            out.extend(self.probes(probes));
        }
        let marker = super::marker();
        if !marker.is_empty() {
            for &kind in self.canaries() {
                let id = exec_probe::id(kind, &canary_seed(probes, param));
                for (what, text) in exec_probe::payloads(kind, &marker, &id) {
                    out.push((format!("{what} (execution canary {id})"), text));
                }
            }
        }
        if self != Role::Template {
            out.extend(self.probes(probes));
        }
        out
    }

    /// The values for this role that are not execution canaries.
    fn probes(self, probes: &Probes) -> Vec<(String, String)> {
        let m = super::marker();
        let m = if m.is_empty() {
            "glassbox".to_string()
        } else {
            format!("glassbox-{m}")
        };
        match self {
            Role::Path => {
                let mut out = Vec::new();
                for (what, path) in &probes.outside {
                    out.push((format!("{what} outside the workspace"), path.clone()));
                }
                let first = probes
                    .outside
                    .first()
                    .map_or("/etc/hostname", |(_, p)| p.as_str());
                let climb = "../".repeat(12);
                out.push((
                    "the same by ../ traversal".into(),
                    format!("{climb}{}", first.trim_start_matches('/')),
                ));
                out
            }
            Role::Socket => probes
                .socket
                .iter()
                .map(|s| ("the Docker socket".to_string(), s.clone()))
                .collect(),
            Role::Command => vec![("a harmless shell command".into(), format!("echo {m}"))],
            Role::Template => vec![(
                "template expressions".into(),
                format!("{m}-{{{{7*7}}}}-${{7*7}}-<%= 7*7 %>-#{{7*7}}"),
            )],
            Role::Sql => vec![("a quote".into(), format!("{m}' OR '1'='1"))],
            Role::Url => probes
                .metadata_url()
                .map(|u| ("the cloud metadata address".to_string(), u))
                .into_iter()
                .collect(),
            Role::Code | Role::Yaml | Role::Serialized | Role::Module => Vec::new(),
        }
    }
}

/// What an execution canary's id is made from: the plan's tool and the parameter.
fn canary_seed(probes: &Probes, param: &str) -> String {
    format!("{}\0{param}", probes.tool)
}

fn plan_unmarked(schema: &Value, probes: &Probes, max: usize) -> Vec<PlannedCall> {
    let full = generate_with(schema, &Choices::default());
    let mut plan = vec![PlannedCall {
        label: "all properties".into(),
        arguments: full.clone(),
    }];
    let push = |plan: &mut Vec<PlannedCall>, label: String, choices: Choices| {
        if plan.len() >= max {
            return;
        }
        let arguments = generate_with(schema, &choices);
        if plan.iter().all(|c| c.arguments != arguments) {
            plan.push(PlannedCall { label, arguments });
        }
    };
    push(
        &mut plan,
        "required only".into(),
        Choices {
            minimal: true,
            overrides: Vec::new(),
        },
    );
    let mut places = Vec::new();
    let mut unknown = Vec::new();
    let gen = Gen::new(schema, &super::NO_CHOICES);
    find_places(
        &gen,
        schema,
        probes,
        &mut Vec::new(),
        0,
        &full,
        &mut places,
        &mut unknown,
    );
    let most = places
        .iter()
        .map(|p| p.alternatives.len())
        .max()
        .unwrap_or(0);
    for round in 0..most {
        // After every place's first alternative: the free strings of no known role, each
        // given the shell polyglot, in one set.
        if round == 1 {
            push_unknown(&mut plan, &push, &unknown);
        }
        for place in &places {
            if let Some((label, choice)) = place.alternatives.get(round) {
                push(
                    &mut plan,
                    label.clone(),
                    Choices {
                        minimal: false,
                        overrides: vec![(place.path.clone(), choice.clone())],
                    },
                );
            }
        }
    }
    if most <= 1 {
        push_unknown(&mut plan, &push, &unknown);
    }
    plan
}

/// The set that gives every free string of no known role the shell polyglot.
fn push_unknown(
    plan: &mut Vec<PlannedCall>,
    push: &impl Fn(&mut Vec<PlannedCall>, String, Choices),
    unknown: &[(Vec<String>, String)],
) {
    if unknown.is_empty() {
        return;
    }
    let names: Vec<String> = unknown.iter().map(|(p, _)| p.join(".")).collect();
    let overrides = unknown
        .iter()
        .map(|(p, text)| (p.clone(), Choice::Text(text.clone())))
        .collect();
    push(
        plan,
        format!("{}=shell metacharacters", names.join(",")),
        Choices {
            minimal: false,
            overrides,
        },
    );
}

/// Whether `text` is within the string schema `obj`'s `maxLength`.
fn fits(obj: &Map<String, Value>, text: &str) -> bool {
    obj.get("maxLength")
        .and_then(Value::as_u64)
        .is_none_or(|max| text.chars().count() as u64 <= max)
}

/// A place in the arguments where the schema leaves a choice, and the alternatives to the
/// full set's.
struct Place {
    path: Vec<String>,
    alternatives: Vec<(String, Choice)>,
}

/// The places of choice in `schema` (at `path`, whose full-set value is `full`'s there).
#[allow(clippy::too_many_arguments)]
fn find_places(
    gen: &Gen<'_>,
    schema: &Value,
    probes: &Probes,
    path: &mut Vec<String>,
    depth: usize,
    full: &Value,
    out: &mut Vec<Place>,
    unknown: &mut Vec<(Vec<String>, String)>,
) {
    if depth > MAX_PLACE_DEPTH || out.len() >= MAX_PLACES {
        return;
    }
    let schema = flatten(gen, schema);
    let Value::Object(obj) = &schema else {
        return;
    };
    let here = value_at(full, path);
    let dotted = path.join(".");
    // `options: oneOf option 2 of 3`; at the arguments themselves, no prefix.
    let at = |what: String| {
        if dotted.is_empty() {
            what
        } else {
            format!("{dotted}: {what}")
        }
    };
    let name = if dotted.is_empty() {
        "value"
    } else {
        dotted.as_str()
    };
    let mut alternatives = Vec::new();
    for key in ["oneOf", "anyOf"] {
        if let Some(Value::Array(options)) = obj.get(key) {
            let n = options.len();
            // Every option: the one the full set took (the first that could be made, non-null
            // ones first) comes out as the full set again and is left out. The generator
            // puts the chosen option first and falls back to the rest.
            for i in 0..n.min(MAX_ALTERNATIVES) {
                alternatives.push((
                    at(format!("{key} option {} of {n}", i + 1)),
                    Choice::Branch(i),
                ));
            }
            break;
        }
    }
    if obj.contains_key("if") {
        alternatives.push((at("the else of its if".into()), Choice::Else));
    }
    if let Some(Value::Array(values)) = obj.get("enum") {
        for (i, v) in values.iter().enumerate().take(MAX_ALTERNATIVES + 1) {
            if Some(v) != here {
                alternatives.push((format!("{name}={v}"), Choice::Enum(i)));
            }
        }
    } else if is_boolean(obj) && !obj.contains_key("const") {
        let flipped = !here.and_then(Value::as_bool).unwrap_or(false);
        alternatives.push((format!("{name}={flipped}"), Choice::Bool(flipped)));
    }
    // A free string whose parameter's name gives it a role: the role's values.
    let free_string = !obj.contains_key("enum")
        && !obj.contains_key("const")
        && !obj.contains_key("pattern")
        && here.is_some_and(Value::is_string);
    if let Some(role) = path
        .last()
        .filter(|_| free_string)
        .and_then(|n| Role::of(n, obj))
    {
        for (what, text) in role.values(probes, name) {
            if Some(&Value::String(text.clone())) != here && fits(obj, &text) {
                alternatives.push((format!("{name}={what}"), Choice::Text(text)));
            }
        }
    } else if free_string && !path.is_empty() && !obj.contains_key("format") {
        // A free string of no known role: the shell polyglot, all such strings in one set.
        let marker = super::marker();
        if !marker.is_empty() {
            let text =
                exec_probe::polyglot(&marker, |k| exec_probe::id(k, &canary_seed(probes, name)));
            if fits(obj, &text) {
                unknown.push((path.clone(), text));
            }
        }
    }
    alternatives.truncate(MAX_ALTERNATIVES);
    if !alternatives.is_empty() {
        out.push(Place {
            path: path.clone(),
            alternatives,
        });
    }
    if let Some(Value::Object(props)) = obj.get("properties") {
        for (name, sub) in props {
            if out.len() >= MAX_PLACES {
                break;
            }
            path.push(name.clone());
            find_places(gen, sub, probes, path, depth + 1, full, out, unknown);
            path.pop();
        }
    }
}

/// A schema with its bare `$ref`s followed and its `allOf` merged in (what the generator
/// would merge), so that the places under them are found.
fn flatten(gen: &Gen<'_>, schema: &Value) -> Value {
    let mut schema = gen.deref(schema).clone();
    for _ in 0..8 {
        let Value::Object(obj) = &schema else {
            break;
        };
        if let Some(Value::Array(all)) = obj.get("allOf") {
            let mut merged = Value::Object(super::without(obj, &["allOf"]));
            for sub in all.iter().take(super::MAX_OPTIONS) {
                merged = merge(&merged, gen.deref(sub));
            }
            schema = merged;
        } else if let Some(target) = obj
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| gen.resolve(r))
        {
            schema = merge(target, &Value::Object(super::without(obj, &["$ref"])));
        } else {
            break;
        }
    }
    schema
}

fn is_boolean(obj: &Map<String, Value>) -> bool {
    match obj.get("type") {
        Some(Value::String(t)) => t == "boolean",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "boolean"),
        _ => false,
    }
}

/// The value at `path` (property names; `*` for array items, not followed) in `v`.
fn value_at<'v>(v: &'v Value, path: &[String]) -> Option<&'v Value> {
    let mut v = v;
    for p in path {
        v = v.as_object()?.get(p)?;
    }
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The plan, each set checked against the schema by a real validator.
    fn valid_plan(schema: &Value, max: usize) -> Vec<PlannedCall> {
        let v = jsonschema::validator_for(schema).expect("a valid schema");
        let plan = plan_calls(schema, "", max);
        for call in &plan {
            let errors: Vec<String> = v
                .iter_errors(&call.arguments)
                .map(|e| e.to_string())
                .collect();
            assert!(
                errors.is_empty(),
                "{}: {} invalid: {errors:?}",
                call.label,
                call.arguments
            );
        }
        plan
    }

    fn labels(plan: &[PlannedCall]) -> Vec<&str> {
        plan.iter().map(|c| c.label.as_str()).collect()
    }

    #[test]
    fn a_boolean_is_called_both_ways() {
        // A file-copy tool whose credential branch runs only when a flag is true.
        let schema = json!({
            "type": "object",
            "properties": {
                "source": {"type": "string"},
                "includeSecrets": {"type": "boolean", "default": false}
            },
            "required": ["source"]
        });
        let plan = valid_plan(&schema, 16);
        assert_eq!(plan[0].arguments["includeSecrets"], json!(false));
        let flipped = plan
            .iter()
            .find(|c| c.label == "includeSecrets=true")
            .expect("flipped");
        assert_eq!(flipped.arguments["includeSecrets"], json!(true));
        assert_eq!(flipped.arguments["source"], plan[0].arguments["source"]);
        assert!(labels(&plan).contains(&"required only"));
    }

    #[test]
    fn every_enum_value_is_called() {
        let schema = json!({
            "type": "object",
            "properties": {"action": {"enum": ["status", "list", "dump_environment"]}},
            "required": ["action"]
        });
        let plan = valid_plan(&schema, 16);
        let actions: Vec<&Value> = plan.iter().map(|c| &c.arguments["action"]).collect();
        for a in ["status", "list", "dump_environment"] {
            assert!(actions.contains(&&json!(a)), "{a} not called: {plan:?}");
        }
        assert!(
            labels(&plan).contains(&"action=\"dump_environment\""),
            "{plan:?}"
        );
    }

    #[test]
    fn each_one_of_option_is_called_and_only_it_matches() {
        // "Provide exactly one of url or alexandria": a set with both matches no option.
        let schema = json!({
            "type": "object",
            "properties": {
                "url": {"type": "string", "format": "uri"},
                "alexandria": {"type": "string"}
            },
            "oneOf": [{"required": ["url"]}, {"required": ["alexandria"]}]
        });
        let plan = valid_plan(&schema, 16);
        assert_eq!(plan[0].arguments.as_object().unwrap().len(), 1, "{plan:?}");
        assert!(plan.iter().any(|c| c.arguments.get("url").is_some()));
        assert!(plan.iter().any(|c| c.arguments.get("alexandria").is_some()));
    }

    #[test]
    fn a_branch_of_a_nested_one_of_is_called() {
        // A socket tool: a path on disk, or a socket (where its Docker branch is).
        let schema = json!({
            "type": "object",
            "properties": {
                "target": {
                    "oneOf": [
                        {"type": "object", "properties": {"file": {"type": "string"}}, "required": ["file"], "additionalProperties": false},
                        {"type": "object", "properties": {"socket": {"type": "string"}}, "required": ["socket"], "additionalProperties": false}
                    ]
                }
            },
            "required": ["target"]
        });
        let plan = valid_plan(&schema, 16);
        assert!(
            plan.iter()
                .any(|c| c.arguments["target"].get("socket").is_some()),
            "{plan:?}"
        );
        assert!(
            labels(&plan).contains(&"target: oneOf option 2 of 2"),
            "{plan:?}"
        );
    }

    #[test]
    fn if_then_else_both_ways_and_dependent_required() {
        let schema = json!({
            "type": "object",
            "properties": {
                "mode": {"enum": ["file", "socket"]},
                "path": {"type": "string"},
                "socket": {"type": "string"},
                "user": {"type": "string"},
                "password": {"type": "string"}
            },
            "required": ["mode"],
            "if": {"properties": {"mode": {"const": "socket"}}, "required": ["mode"]},
            "then": {"required": ["socket"]},
            "else": {"required": ["path"]},
            "dependentRequired": {"user": ["password"]}
        });
        let plan = valid_plan(&schema, 32);
        assert!(plan.iter().any(|c| c.arguments["mode"] == json!("socket")));
        assert!(plan.iter().any(|c| c.arguments["mode"] == json!("file")));
        let minimal = plan.iter().find(|c| c.label == "required only").unwrap();
        assert!(minimal.arguments.get("user").is_none(), "{minimal:?}");
    }

    #[test]
    fn a_required_property_brings_its_dependents_and_not_is_kept_clear_of() {
        let schema = json!({
            "type": "object",
            "properties": {"token": {"type": "string"}, "scope": {"type": "string"}, "a": {"type": "string"}, "b": {"type": "string"}},
            "required": ["token"],
            "dependentRequired": {"token": ["scope"]},
            "not": {"required": ["a", "b"]}
        });
        let plan = valid_plan(&schema, 8);
        let minimal = plan.iter().find(|c| c.label == "required only").unwrap();
        assert!(minimal.arguments.get("scope").is_some(), "{minimal:?}");
        assert!(!(plan[0].arguments.get("a").is_some() && plan[0].arguments.get("b").is_some()));
    }

    #[test]
    fn places_under_refs_and_all_of_are_found() {
        let schema = json!({
            "$defs": {"opts": {"type": "object", "properties": {"force": {"type": "boolean"}}}},
            "type": "object",
            "allOf": [{"properties": {"level": {"type": "string", "enum": ["info", "debug"]}}}],
            "properties": {"options": {"$ref": "#/$defs/opts"}}
        });
        let plan = valid_plan(&schema, 16);
        assert!(labels(&plan).contains(&"options.force=true"), "{plan:?}");
        assert!(
            plan.iter().any(|c| c.arguments["level"] == json!("debug")),
            "{plan:?}"
        );
    }

    #[test]
    fn a_small_budget_reaches_every_place_once_first() {
        let schema = json!({
            "type": "object",
            "properties": {
                "a": {"enum": [1, 2, 3, 4, 5]},
                "b": {"enum": ["x", "y", "z"]},
                "c": {"type": "boolean"}
            },
            "required": ["a", "b", "c"]
        });
        let plan = valid_plan(&schema, 4);
        assert_eq!(
            labels(&plan),
            ["all properties", "a=2", "b=\"y\"", "c=true"]
        );
        assert_eq!(plan_calls(&schema, "", 1).len(), 1);
        assert_eq!(plan_calls(&schema, "", 0).len(), 1);
        // Unbounded: every alternative once, no set twice.
        let all = valid_plan(&schema, 100);
        assert_eq!(all.len(), 1 + 4 + 2 + 1, "{all:?}");
    }

    #[test]
    fn the_marker_is_in_every_set_and_broken_schemas_still_plan_one_call() {
        let schema = json!({"type": "object", "properties": {"url": {"type": "string"}, "verbose": {"type": "boolean"}}});
        let plan = plan_calls(&schema, "mk1234", 8);
        assert!(plan.len() >= 3, "{plan:?}");
        for call in plan.iter().filter(|c| c.label != "required only") {
            assert_eq!(
                call.arguments["url"],
                json!("https://example.test/mk1234"),
                "{call:?}"
            );
        }
        for schema in [
            Value::Null,
            json!(42),
            json!({"oneOf": 3, "if": 1}),
            json!({"$ref": "#"}),
            json!({"enum": []}),
            json!({"not": true}),
        ] {
            let plan = plan_calls(&schema, "", 8);
            assert!(
                !plan.is_empty() && plan.iter().all(|c| c.arguments.is_object()),
                "{schema}: {plan:?}"
            );
        }
        // A schema that refers to itself, with choices on every level: bounded.
        let cyclic = json!({"type": "object", "properties": {"on": {"type": "boolean"}, "next": {"$ref": "#"}}});
        assert!(plan_calls(&cyclic, "", 1000).len() <= MAX_PLACES * MAX_ALTERNATIVES + 2);
    }

    fn probes() -> Probes {
        Probes {
            outside: vec![
                (
                    "a planted credential".into(),
                    "/home/ana/.aws/credentials".into(),
                ),
                (
                    "another project's .env".into(),
                    "/home/ana/projects/api/.env".into(),
                ),
            ],
            socket: Some("/var/run/docker.sock".into()),
            metadata: Some("192.0.2.254".into()),
            workspace: None,
            files: Vec::new(),
            tool: "t".into(),
        }
    }

    #[test]
    fn paths_go_inside_the_folder_the_server_was_given() {
        let schema = json!({
            "type": "object",
            "properties": {"path": {"type": "string"}, "dir": {"type": "string"}},
            "required": ["path"]
        });
        let given = Probes {
            workspace: Some("/home/ana/notes/".into()),
            ..probes()
        };
        let plan = plan_calls_with(&schema, "m1234567", &given, 16);
        let full = &plan[0].arguments;
        assert_eq!(full["path"], "/home/ana/notes/glassbox-probe-m1234567.txt");
        // A folder is the one given (it exists; a made-up one under it would not).
        assert_eq!(full["dir"], "/home/ana/notes");
        // The role probes still name what is outside it.
        assert!(texts(&plan, "path").contains(&"/home/ana/.aws/credentials"));
        // And the next plan, without a folder, is as before.
        let plan = plan_calls_with(&schema, "m1234567", &probes(), 16);
        assert_eq!(plan[0].arguments["path"], "glassbox-probe-m1234567.txt");
    }

    #[test]
    fn paths_name_the_workspaces_files_by_kind_unless_the_tool_makes_them() {
        let schema = json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "The spreadsheet to read"},
                "repo_path": {"type": "string"}
            },
            "required": ["path"]
        });
        let given = Probes {
            workspace: Some("/home/ana/report".into()),
            files: vec!["README.md".into(), "q1/budget.xlsx".into()],
            ..probes()
        };
        let plan = plan_calls_with(&schema, "m1234567", &given.for_tool("read_sheet"), 16);
        assert_eq!(plan[0].arguments["path"], "/home/ana/report/q1/budget.xlsx");
        assert_eq!(plan[0].arguments["repo_path"], "/home/ana/report");
        // The role probes still name what is outside it, and a tool that writes its path gets
        // a new one, which carries the marker.
        assert!(texts(&plan, "path").contains(&"/home/ana/.aws/credentials"));
        let plan = plan_calls_with(&schema, "m1234567", &given.for_tool("write_sheet"), 16);
        assert_eq!(
            plan[0].arguments["path"],
            "/home/ana/report/glassbox-probe-m1234567.txt"
        );
    }

    /// [`valid_plan`] with the role probes and a marker.
    fn valid_role_plan(schema: &Value) -> Vec<PlannedCall> {
        valid_role_plan_of(schema, 16)
    }

    fn valid_role_plan_of(schema: &Value, max: usize) -> Vec<PlannedCall> {
        let v = jsonschema::validator_for(schema).expect("a valid schema");
        let plan = plan_calls_with(schema, "m1234567", &probes(), max);
        for call in &plan {
            assert!(
                v.is_valid(&call.arguments),
                "{}: {}",
                call.label,
                call.arguments
            );
        }
        plan
    }

    fn texts<'p>(plan: &'p [PlannedCall], key: &str) -> Vec<&'p str> {
        plan.iter()
            .filter_map(|c| c.arguments.get(key).and_then(Value::as_str))
            .collect()
    }

    #[test]
    fn a_path_names_files_outside_the_workspace_absolute_and_by_traversal() {
        let schema = json!({
            "type": "object",
            "properties": {"path": {"type": "string", "maxLength": 200}},
            "required": ["path"]
        });
        let plan = valid_role_plan(&schema);
        let paths = texts(&plan, "path");
        assert!(
            paths[0].contains("m1234567"),
            "the full set as before: {paths:?}"
        );
        assert!(paths.contains(&"/home/ana/.aws/credentials"), "{paths:?}");
        assert!(paths.contains(&"/home/ana/projects/api/.env"), "{paths:?}");
        assert!(
            paths
                .iter()
                .any(|p| p.starts_with("../../") && p.ends_with("home/ana/.aws/credentials")),
            "{paths:?}"
        );
        assert!(labels(&plan).contains(&"path=a planted credential outside the workspace"));
    }

    #[test]
    fn commands_templates_sql_and_sockets_get_their_probes() {
        let schema = json!({
            "type": "object",
            "properties": {
                "command": {"type": "string"},
                "template": {"type": "string"},
                "sql": {"type": "string"},
                "socketPath": {"type": "string"},
                "note": {"type": "string"}
            },
            "required": ["command", "template", "sql", "socketPath", "note"]
        });
        let plan = valid_role_plan(&schema);
        assert!(texts(&plan, "command").contains(&"echo glassbox-m1234567"));
        assert!(texts(&plan, "template")
            .iter()
            .any(|t| t.starts_with("glassbox-m1234567-{{7*7}}-${7*7}")));
        assert!(texts(&plan, "sql").contains(&"glassbox-m1234567' OR '1'='1"));
        assert!(texts(&plan, "socketPath").contains(&"/var/run/docker.sock"));
        // A free string without a role keeps its probe string in every set.
        assert!(texts(&plan, "note").iter().all(|n| n.contains("m1234567")));
    }

    /// The ids of the execution canaries in a plan's values of `key`.
    fn canaries(plan: &[PlannedCall], key: &str) -> Vec<Kind> {
        let mut kinds = Vec::new();
        for text in texts(plan, key) {
            for kind in Kind::ALL {
                let id = exec_probe::id(kind, &format!("t\0{key}"));
                let mine = exec_probe::payloads(kind, "m1234567", &id)
                    .iter()
                    .any(|(_, p)| p == text)
                    || text
                        == exec_probe::polyglot("m1234567", |k| {
                            exec_probe::id(k, &format!("t\0{key}"))
                        })
                        && kind == Kind::Shell;
                if mine && !kinds.contains(&kind) {
                    kinds.push(kind);
                }
            }
        }
        kinds
    }

    #[test]
    fn each_role_gets_its_execution_canaries_first() {
        let schema = json!({
            "type": "object",
            "properties": {
                "expression": {"type": "string", "default": "1+1"},
                "template": {"type": "string"},
                "yaml_text": {"type": "string"},
                "state": {"type": "string", "description": "A pickled session object, base64."},
                "plugin": {"type": "string"},
                "sql": {"type": "string"},
                "command": {"type": "string"}
            },
            "required": ["expression"]
        });
        let plan = valid_role_plan_of(&schema, 32);
        assert_eq!(
            canaries(&plan, "expression"),
            [Kind::PythonCode, Kind::JavaScriptCode, Kind::Shell]
        );
        assert_eq!(
            canaries(&plan, "template"),
            [Kind::Jinja, Kind::PythonTemplate, Kind::JavaScriptTemplate]
        );
        assert_eq!(canaries(&plan, "yaml_text"), [Kind::Yaml]);
        assert_eq!(canaries(&plan, "state"), [Kind::Pickle]);
        assert_eq!(canaries(&plan, "plugin"), [Kind::Require]);
        assert_eq!(canaries(&plan, "sql"), [Kind::Sqlite]);
        assert_eq!(canaries(&plan, "command"), [Kind::Shell]);
        // By role first: the first round gives each place its first canary (a template its
        // `{{7*7}}` probe, which shows any engine's evaluation in the answer).
        let first = &plan[2..9];
        assert!(
            first.iter().all(|c| c.label.contains("execution canary")
                || c.label == "template=template expressions"),
            "{:?}",
            labels(&plan)
        );
        // The schema's default is replaced (the full set keeps it).
        assert_eq!(plan[0].arguments["expression"], "1+1");
        // No marker, no canary.
        let plain = plan_calls_with(&schema, "", &probes(), 16);
        assert!(plain.iter().all(|c| !c.label.contains("canary")));
    }

    /// A name that says where a thing is gets the probes of a path or a URL, not the thing's
    /// (the canaries of code); `source` alone says nothing (`source_timezone`).
    #[test]
    fn where_a_thing_is_comes_before_what_it_is() {
        let schema = json!({
            "type": "object",
            "properties": {
                "script_path": {"type": "string"},
                "code_url": {"type": "string"},
                "source_timezone": {"type": "string"}
            },
            "required": ["script_path", "code_url", "source_timezone"]
        });
        assert_eq!(Role::of_name("script_path"), Some(Role::Path));
        assert_eq!(Role::of_name("code_url"), Some(Role::Url));
        assert_eq!(Role::of_name("source_timezone"), None);
        assert_eq!(Role::of_name("python_code"), Some(Role::Code));
        let plan = valid_role_plan_of(&schema, 32);
        assert!(canaries(&plan, "script_path").is_empty());
        assert!(texts(&plan, "script_path").contains(&"/home/ana/.aws/credentials"));
    }

    #[test]
    fn free_strings_of_no_role_get_the_polyglot_in_one_set_after_the_first_round() {
        // An injectable ping whose host has a default: the default alone never reaches it.
        let schema = json!({
            "type": "object",
            "properties": {
                "host": {"type": "string", "default": "localhost"},
                "label": {"type": "string"},
                "verbose": {"type": "boolean"},
                "short": {"type": "string", "maxLength": 8},
                "when": {"type": "string", "format": "date"}
            },
            "required": ["host"]
        });
        let plan = plan_calls_with(&schema, "m1234567", &probes(), 4);
        // Full, required only, the boolean's flip (a choice, first round), then the polyglot.
        assert_eq!(
            labels(&plan),
            [
                "all properties",
                "required only",
                "verbose=true",
                "host,label=shell metacharacters"
            ]
        );
        let poly = &plan[3].arguments;
        assert_eq!(canaries(&plan[3..], "host"), [Kind::Shell]);
        assert_eq!(canaries(&plan[3..], "label"), [Kind::Shell]);
        // Each string its own id; a string too short for it, or with a format, keeps its value.
        assert_ne!(poly["host"], poly["label"]);
        assert_eq!(poly["short"], plan[0].arguments["short"]);
        assert_eq!(poly["when"], plan[0].arguments["when"]);
    }

    #[test]
    fn a_url_gets_the_metadata_address_by_name_format_or_description() {
        let schema = json!({
            "type": "object",
            "properties": {
                "url": {"type": "string"},
                "target": {"type": "string", "format": "uri"},
                "page": {"type": "string", "description": "The URL of the page to fetch."},
                "title": {"type": "string", "description": "Its title, shown beside the URL."}
            },
            "required": ["url", "target", "page", "title"]
        });
        let plan = valid_role_plan(&schema);
        let metadata = "http://192.0.2.254/latest/meta-data/iam/security-credentials/";
        for key in ["url", "target", "page"] {
            assert!(texts(&plan, key).contains(&metadata), "{key}: {plan:?}");
        }
        // A description that only mentions a URL gives no role.
        assert!(!texts(&plan, "title").contains(&metadata), "{plan:?}");
        assert!(labels(&plan).contains(&"url=the cloud metadata address"));
        // IPv6 in brackets; no address, no call.
        let v6 = Probes {
            metadata: Some("fd00:ec2::254".into()),
            ..Probes::default()
        };
        assert_eq!(
            v6.metadata_url().as_deref(),
            Some("http://[fd00:ec2::254]/latest/meta-data/iam/security-credentials/")
        );
        let none = plan_calls(&schema, "m1234567", 16);
        assert!(!none
            .iter()
            .any(|c| c.arguments.to_string().contains("meta-data")));
    }

    #[test]
    fn descriptions_give_roles_by_what_the_value_is() {
        for (d, role) in [
            ("The shell command to run.", Some(Role::Command)),
            ("Path to the file to read", Some(Role::Path)),
            ("A SQL query against the warehouse", Some(Role::Sql)),
            ("Jinja template for the message", Some(Role::Template)),
            ("Unix socket of the daemon", Some(Role::Socket)),
            ("The URL to fetch", Some(Role::Url)),
            ("A short note", None),
            ("Search users by display name, username, or email", None),
        ] {
            assert_eq!(Role::of_description(d), role, "{d}");
        }
    }

    #[test]
    fn a_role_never_breaks_the_schema() {
        // An enum, a pattern, a format or a short maxLength: the role's value does not fit,
        // and no set is made for it.
        let schema = json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "maxLength": 10},
                "command": {"enum": ["status", "stop"]},
                "file": {"type": "string", "pattern": "^[a-z]+\\.txt$"}
            },
            "required": ["path", "command", "file"]
        });
        let plan = valid_role_plan(&schema);
        assert!(
            texts(&plan, "path").iter().all(|p| p.len() <= 10),
            "{plan:?}"
        );
        assert!(
            texts(&plan, "file").iter().all(|p| p.ends_with(".txt")),
            "{plan:?}"
        );
    }
}
