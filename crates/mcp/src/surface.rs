//! glassbox as a client with capabilities: what it declares, how it answers the requests a
//! server sends it, and the values it gives resource templates and prompts.
//!
//! A real client (Claude Desktop, Claude Code, VS Code, Cursor) exposes roots, answers sampling
//! and elicitation, reads the resources the user attaches and gets the prompts the user picks.
//! glassbox does the same, as a cautious user and model would:
//!
//! - `roots/list`: the sandbox's workspace, the one root;
//! - `sampling/createMessage`: a short, fixed, harmless assistant message ([`SAMPLING_TEXT`]);
//! - `elicitation/create`: `decline` first; in a second exercise of the same tool, resource or
//!   prompt, `accept` with values from the requested schema by role, a field that asks for a
//!   secret getting a fresh canary ([`elicited_values`]) that the audit then follows like a
//!   planted secret;
//! - anything else: JSON-RPC -32601.
//!
//! Every answer is bounded: at most [`MAX_REQUESTS_PER_PHASE`] requests of one phase are
//! answered; past that the server gets an error, and the session goes on.

use glassbox_model::ElicitedSecret;
use glassbox_model::Phase;
use serde_json::{json, Map, Value};
use std::hash::{BuildHasher, Hasher};

/// The assistant's message to every sampling request.
pub const SAMPLING_TEXT: &str = "I can't help with that.";

/// Most requests of one phase that get a real answer; more get an error.
pub const MAX_REQUESTS_PER_PHASE: u32 = 32;

/// Most template variables or prompt arguments given values.
const MAX_VARIABLES: usize = 32;

/// The capabilities glassbox declares in `initialize` (and in a 2026-07-28 request's `_meta`)
/// when the protocol `version` is negotiated: roots, sampling, and elicitation with its form
/// and URL modes from 2025-11-25 on (before, elicitation had no modes).
pub fn client_capabilities(version: &str) -> Value {
    let elicitation = if version >= "2025-11-25" {
        json!({"form": {}, "url": {}})
    } else {
        json!({})
    };
    json!({
        "roots": {"listChanged": false},
        "sampling": {},
        "elicitation": elicitation,
    })
}

/// How glassbox answers elicitations at the moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Elicit {
    /// `decline`: the first exercise of a tool, resource or prompt.
    Decline,
    /// `accept`, with values by role: the repeat of an exercise whose elicitation was declined.
    Accept,
}

/// The answer to a server's request `method` with `params`, or `None` when glassbox does not
/// provide it (the caller answers -32601). Canaries given for secret fields are pushed to
/// `elicited`.
pub(crate) fn answer(
    method: &str,
    params: Option<&Value>,
    roots: &[String],
    elicit: Elicit,
    marker: &str,
    phase: &Phase,
    elicited: &mut Vec<ElicitedSecret>,
) -> Option<Value> {
    match method {
        "ping" => Some(json!({})),
        "roots/list" => Some(json!({
            "roots": roots
                .iter()
                .map(|r| json!({"uri": file_uri(r), "name": "workspace"}))
                .collect::<Vec<_>>()
        })),
        "sampling/createMessage" => Some(json!({
            "role": "assistant",
            "content": {"type": "text", "text": SAMPLING_TEXT},
            "model": "glassbox",
            "stopReason": "endTurn",
        })),
        "elicitation/create" => Some(match elicit {
            Elicit::Decline => json!({"action": "decline"}),
            Elicit::Accept => {
                let url_mode = params
                    .and_then(|p| p.get("mode"))
                    .and_then(Value::as_str)
                    .is_some_and(|m| m == "url");
                if url_mode {
                    // Nothing is filled in a URL-mode elicitation: the user would go to the
                    // page; glassbox does not, and says it declined.
                    json!({"action": "decline"})
                } else {
                    let schema = params.and_then(|p| p.get("requestedSchema"));
                    let content = elicited_values(schema, marker, phase, elicited);
                    json!({"action": "accept", "content": content})
                }
            }
        }),
        _ => None,
    }
}

/// `file://` URI of an absolute path, its bytes outside the unreserved set and `/`
/// percent-encoded.
fn file_uri(path: &str) -> String {
    let mut out = String::from("file://");
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Words of a field's name, title or description that ask for a secret.
const SECRET_WORDS: &[&str] = &[
    "token",
    "password",
    "passwd",
    "passphrase",
    "secret",
    "apikey",
    "credential",
    "credentials",
    "pat",
    "pin",
    "otp",
    "privatekey",
];

/// Whether a requested field asks for a secret: its `format` is `password`, or its name, title
/// or description holds a word of [`SECRET_WORDS`] (words split at case changes, `_`, `-`
/// and spaces; `api key`/`access key`/`private key` as two words too). A `token_count` or
/// `max_tokens` is a number, not a secret: only string fields count.
pub fn asks_for_secret(name: &str, field: &Value) -> bool {
    if field
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("string")
        != "string"
    {
        return false;
    }
    if field.get("enum").is_some() || field.get("oneOf").is_some() {
        return false;
    }
    if field.get("format").and_then(Value::as_str) == Some("password") {
        return true;
    }
    let texts = [
        Some(name),
        field.get("title").and_then(Value::as_str),
        field.get("description").and_then(Value::as_str),
    ];
    texts.into_iter().flatten().any(|t| {
        let words = words(t);
        let pair = |a: &str, b: &str| words.windows(2).any(|w| w[0] == a && w[1] == b);
        let counted = |i: usize| {
            // "token count", "tokens used": a number of tokens, not one.
            words
                .get(i + 1)
                .is_some_and(|w| matches!(w.as_str(), "count" | "limit" | "used" | "budget"))
                || (i > 0 && matches!(words[i - 1].as_str(), "max" | "min" | "number"))
        };
        words.iter().enumerate().any(|(i, w)| {
            let w = w.trim_end_matches('s');
            SECRET_WORDS.contains(&w) && !(w == "token" && counted(i))
        }) || ["api", "access", "private", "secret", "signing", "ssh"]
            .iter()
            .any(|a| pair(a, "key"))
    })
}

/// Lower-case words of `text`, split at non-alphanumerics and at lower-to-upper case changes
/// (`githubToken` is `github token`).
fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
    for c in text.chars() {
        if !c.is_alphanumeric() {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            prev_lower = false;
            continue;
        }
        if c.is_uppercase() && prev_lower && !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
        }
        prev_lower = c.is_lowercase() || c.is_ascii_digit();
        cur.extend(c.to_lowercase());
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// The values an accepting user gives the fields of `schema` (an elicitation's
/// `requestedSchema`: a flat object of primitive properties): a field that asks for a secret
/// ([`asks_for_secret`]) a fresh canary, recorded in `elicited`; the others their `default`,
/// their first `enum` (or `oneOf` `const`) value, or a plain value of their type and format.
/// The canary is made from `marker`, the phase and the field, so that every run of one audit
/// gives the same value (as the plans' arguments are the same in every run).
pub(crate) fn elicited_values(
    schema: Option<&Value>,
    marker: &str,
    phase: &Phase,
    elicited: &mut Vec<ElicitedSecret>,
) -> Value {
    let mut out = Map::new();
    let Some(Value::Object(props)) = schema.and_then(|s| s.get("properties")) else {
        return Value::Object(out);
    };
    for (name, field) in props.iter().take(MAX_VARIABLES) {
        let value = if asks_for_secret(name, field) {
            let value = canary(marker, phase, name, field);
            if !elicited.iter().any(|e| e.value == value) {
                elicited.push(ElicitedSecret {
                    phase: phase.clone(),
                    field: name.clone(),
                    value: value.clone(),
                });
            }
            Value::String(value)
        } else {
            plain_value(field)
        };
        out.insert(name.clone(), value);
    }
    Value::Object(out)
}

/// A value of `field`'s type that asks nothing of anyone.
fn plain_value(field: &Value) -> Value {
    if let Some(d) = field.get("default") {
        return d.clone();
    }
    if let Some(first) = field
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    if let Some(first) = field
        .get("oneOf")
        .and_then(Value::as_array)
        .and_then(|o| o.first())
        .and_then(|o| o.get("const"))
    {
        return first.clone();
    }
    match field.get("type").and_then(Value::as_str) {
        Some("boolean") => json!(false),
        Some("number") | Some("integer") => field.get("minimum").cloned().unwrap_or(json!(1)),
        Some("array") => {
            let item = field
                .get("items")
                .and_then(|i| i.get("enum").or_else(|| i.get("anyOf")))
                .and_then(Value::as_array)
                .and_then(|e| e.first())
                .map(|v| v.get("const").cloned().unwrap_or_else(|| v.clone()));
            Value::Array(item.into_iter().collect())
        }
        _ => Value::String(
            match field.get("format").and_then(Value::as_str) {
                Some("email") => "user@example.test",
                Some("uri") => "https://example.test/",
                Some("date") => "2026-01-01",
                Some("date-time") => "2026-01-01T00:00:00Z",
                _ => "glassbox",
            }
            .to_string(),
        ),
    }
}

/// A secret-looking value for `field`, unique to the audit (`marker`), the phase and the field:
/// a GitHub-token shape where the field names GitHub, 40 characters where it names an AWS
/// secret, 32 alphanumerics otherwise.
fn canary(marker: &str, phase: &Phase, name: &str, field: &Value) -> String {
    const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let about = format!(
        "{name} {} {}",
        field.get("title").and_then(Value::as_str).unwrap_or(""),
        field
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or("")
    )
    .to_lowercase();
    let (prefix, len) = if about.contains("github") {
        ("ghp_", 36)
    } else if about.contains("aws") {
        ("", 40)
    } else {
        ("", 32)
    };
    // SipHash with fixed keys: deterministic for one (marker, phase, field); the marker is
    // random per audit, so the value is not guessable from outside it.
    let keys =
        std::hash::BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default();
    let mut out = String::from(prefix);
    let mut i = 0u64;
    while out.len() < prefix.len() + len {
        let mut h = keys.build_hasher();
        h.write(marker.as_bytes());
        h.write(phase.to_string().as_bytes());
        h.write(name.as_bytes());
        h.write_u64(i);
        let mut x = h.finish();
        for _ in 0..8 {
            if out.len() == prefix.len() + len {
                break;
            }
            out.push(ALNUM[(x % ALNUM.len() as u64) as usize] as char);
            x /= ALNUM.len() as u64;
        }
        i += 1;
    }
    out
}

/// The variables of a URI template, in order, once each (`None`: not a valid template).
pub fn template_variables(template: &str) -> Option<Vec<String>> {
    let t = iri_string::template::UriTemplateStr::new(template).ok()?;
    let mut out: Vec<String> = Vec::new();
    for v in t.variables() {
        let name = v.as_str().to_string();
        if !out.contains(&name) && out.len() < MAX_VARIABLES {
            out.push(name);
        }
    }
    Some(out)
}

/// `template` expanded with `values` (RFC 6570: `{x}` percent-encodes reserved characters,
/// `{+x}` keeps them); `None` when it is not a valid template.
pub fn expand_template(template: &str, values: &Map<String, Value>) -> Option<String> {
    use iri_string::spec::UriSpec;
    use iri_string::template::simple_context::SimpleContext;
    let t = iri_string::template::UriTemplateStr::new(template).ok()?;
    let mut context = SimpleContext::new();
    for (k, v) in values {
        let s = match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        context.insert(k.as_str(), s);
    }
    Some(t.expand::<UriSpec, _>(&context).ok()?.to_string())
}

/// A JSON schema of string parameters named `names`, each described by its entry in
/// `descriptions`, all required: what the plans of calls give values by role (a path-like name
/// gets the workspace file, then the planted credential and traversal probes).
pub(crate) fn string_schema(params: &[(String, Option<String>, bool)]) -> Value {
    let mut props = Map::new();
    let mut required = Vec::new();
    for (name, description, req) in params.iter().take(MAX_VARIABLES) {
        let mut p = json!({"type": "string"});
        if let Some(d) = description {
            p["description"] = json!(d);
        }
        props.insert(name.clone(), p);
        if *req {
            required.push(json!(name));
        }
    }
    json!({"type": "object", "properties": props, "required": required})
}

/// A prompt's arguments as `prompts/list` gave them: name, description, required.
pub(crate) fn prompt_arguments(prompt: &Value) -> Vec<(String, Option<String>, bool)> {
    prompt
        .get("arguments")
        .and_then(Value::as_array)
        .map(|args| {
            args.iter()
                .filter_map(|a| {
                    let name = a.get("name")?.as_str()?.to_string();
                    let description = a
                        .get("description")
                        .and_then(Value::as_str)
                        .map(str::to_string);
                    let required = a.get("required").and_then(Value::as_bool).unwrap_or(false);
                    Some((name, description, required))
                })
                .take(MAX_VARIABLES)
                .collect()
        })
        .unwrap_or_default()
}

/// A prompt's arguments as `prompts/get` takes them: every value a string.
pub(crate) fn stringified(arguments: &Value) -> Value {
    let Value::Object(map) = arguments else {
        return json!({});
    };
    Value::Object(
        map.iter()
            .map(|(k, v)| {
                let s = match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                (k.clone(), Value::String(s))
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_fields_by_name_title_description_and_format() {
        let s = json!({"type": "string"});
        for name in [
            "github_token",
            "githubToken",
            "password",
            "aws_secret_access_key",
            "apiKey",
            "api_key",
            "private_key",
            "passphrase",
            "credentials",
        ] {
            assert!(asks_for_secret(name, &s), "{name}");
        }
        assert!(asks_for_secret(
            "value",
            &json!({"type": "string", "format": "password"})
        ));
        assert!(asks_for_secret(
            "value",
            &json!({"type": "string", "title": "Your GitHub personal access token"})
        ));
        for name in [
            "max_tokens",
            "token_count",
            "keyword",
            "sort_key",
            "keyboard_layout",
            "format",
            "repository",
            "name",
            "date",
        ] {
            assert!(!asks_for_secret(name, &s), "{name}");
        }
        assert!(!asks_for_secret("token", &json!({"type": "integer"})));
        assert!(!asks_for_secret(
            "token",
            &json!({"type": "string", "enum": ["a", "b"]})
        ));
    }

    #[test]
    fn accepting_gives_canaries_to_secret_fields_and_plain_values_to_the_rest() {
        let schema = json!({"type": "object", "properties": {
            "github_token": {"type": "string", "title": "GitHub token"},
            "aws_secret_access_key": {"type": "string", "format": "password"},
            "format": {"type": "string", "enum": ["markdown", "html"]},
            "count": {"type": "integer", "minimum": 2},
            "ok": {"type": "boolean"},
            "email": {"type": "string", "format": "email"},
        }});
        let phase = Phase::call("sync", 2);
        let mut given = Vec::new();
        let v = elicited_values(Some(&schema), "m4rk3r", &phase, &mut given);
        assert_eq!(v["format"], "markdown");
        assert_eq!(v["count"], 2);
        assert_eq!(v["ok"], false);
        assert_eq!(v["email"], "user@example.test");
        let gh = v["github_token"].as_str().unwrap();
        assert!(gh.starts_with("ghp_") && gh.len() == 40, "{gh}");
        assert_eq!(v["aws_secret_access_key"].as_str().unwrap().len(), 40);
        assert_eq!(given.len(), 2);
        assert!(given.iter().all(|g| g.phase == phase));
        // The same in another run of the audit; another marker, another value.
        let mut again = Vec::new();
        assert_eq!(
            elicited_values(Some(&schema), "m4rk3r", &phase, &mut again),
            v
        );
        let other = elicited_values(Some(&schema), "other", &phase, &mut Vec::new());
        assert_ne!(other["github_token"], v["github_token"]);
    }

    #[test]
    fn answers_by_method() {
        let p = Phase::call("t", 1);
        let mut e = Vec::new();
        let roots = ["/work/my project".to_string()];
        let r = answer("roots/list", None, &roots, Elicit::Decline, "", &p, &mut e).unwrap();
        assert_eq!(r["roots"][0]["uri"], "file:///work/my%20project");
        let s = answer(
            "sampling/createMessage",
            None,
            &[],
            Elicit::Decline,
            "",
            &p,
            &mut e,
        );
        assert_eq!(s.unwrap()["content"]["text"], SAMPLING_TEXT);
        let d = answer(
            "elicitation/create",
            None,
            &[],
            Elicit::Decline,
            "",
            &p,
            &mut e,
        );
        assert_eq!(d.unwrap()["action"], "decline");
        let url = json!({"mode": "url", "url": "https://login.example/", "message": "m"});
        let u = answer(
            "elicitation/create",
            Some(&url),
            &[],
            Elicit::Accept,
            "",
            &p,
            &mut e,
        );
        assert_eq!(u.unwrap()["action"], "decline");
        assert!(answer("tools/call", None, &[], Elicit::Accept, "", &p, &mut e).is_none());
        assert!(e.is_empty());
    }

    #[test]
    fn templates_expand_by_rfc_6570() {
        assert_eq!(
            template_variables("file:///{path}{?q,q}").unwrap(),
            ["path", "q"]
        );
        let mut v = Map::new();
        v.insert("path".into(), json!("/home/u/.aws/credentials"));
        assert_eq!(
            expand_template("file:///{path}", &v).unwrap(),
            "file:///%2Fhome%2Fu%2F.aws%2Fcredentials"
        );
        assert_eq!(
            expand_template("file://{+path}", &v).unwrap(),
            "file:///home/u/.aws/credentials"
        );
        assert!(template_variables("bad{").is_none());
    }
}
