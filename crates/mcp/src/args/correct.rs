//! A call's arguments corrected once from the message that rejected them. Servers say what
//! they wanted in their validator's words: zod's issues (`"code":"invalid_type",...,
//! "path":["query"]`, `"invalid_enum_value"` with its `options`), pydantic's (`query Field
//! required`, `mode Input should be 'fast' or 'slow'`, `limit Input should be a valid
//! integer`), JSON Schema's (`'query' is a required property`, `'x' is not one of ['a',
//! 'b']`). Each fix names a top-level property; a message glassbox cannot read gives no
//! correction (the plan's next set is tried instead). The text read is the call's error as
//! kept (300 characters): the first issues.

use super::{generate_arguments, PlannedCall};
use serde_json::{Map, Value};

/// Most fixes made from one message.
const MAX_FIXES: usize = 8;

/// What one issue of the message asks of a property.
#[derive(Clone, Debug, PartialEq)]
enum Want {
    /// It is required and was not given.
    Present,
    /// One of these values.
    OneOf(Vec<String>),
    /// A value of this JSON type (`string`, `number`, `integer`, `boolean`, `array`,
    /// `object`).
    Type(String),
}

/// `arguments` corrected by what `error` says of them, with a label that says what changed;
/// `None` when the message says nothing glassbox can act on, or nothing would change.
pub fn correct(schema: &Value, arguments: &Value, error: &str) -> Option<PlannedCall> {
    let mut args = match arguments {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    let mut said = Vec::new();
    for (name, want) in issues(error).into_iter().take(MAX_FIXES) {
        let value = match &want {
            Want::Present => property_value(schema, &name),
            Want::OneOf(options) => option_value(&options[0]),
            Want::Type(t) => match type_value(t, schema, &name) {
                Some(v) => v,
                None => continue,
            },
        };
        if args.get(&name) == Some(&value) {
            continue;
        }
        said.push(format!("{name}={}", short(&value)));
        args.insert(name, value);
    }
    if said.is_empty() {
        return None;
    }
    Some(PlannedCall {
        label: format!("corrected from the server's message: {}", said.join(", ")),
        arguments: Value::Object(args),
    })
}

/// The property and what is wanted of it, for each issue `error` states, in order.
fn issues(error: &str) -> Vec<(String, Want)> {
    // The kept text escapes newlines (`\n`); pretty-printed JSON has spaces everywhere.
    let text = error.replace("\\n", " ");
    let mut out = zod(&text);
    out.extend(pydantic(&text));
    out.extend(json_schema(&text));
    let mut seen = std::collections::HashSet::new();
    out.retain(|(name, _)| valid_name(name) && seen.insert(name.clone()));
    out
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
}

/// zod's issues, read without whitespace: each from its `"code":` to the next (its `path`
/// comes after its code; an enum issue's `received` before it).
fn zod(text: &str) -> Vec<(String, Want)> {
    let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    let mut out = Vec::new();
    for issue in compact.split("\"code\":").skip(1) {
        let code = quoted(issue).unwrap_or_default();
        let Some(path) = after(issue, "\"path\":[").and_then(quoted) else {
            continue;
        };
        let want = match code.as_str() {
            "invalid_type" => match after(issue, "\"received\":").and_then(quoted) {
                Some(r) if r == "undefined" => Want::Present,
                _ => match after(issue, "\"expected\":").and_then(quoted) {
                    Some(t) => Want::Type(t),
                    None => continue,
                },
            },
            "invalid_enum_value" | "invalid_value" => {
                let options = after(issue, "\"options\":[")
                    .or_else(|| after(issue, "\"values\":["))
                    .map(|o| list(o.split(']').next().unwrap_or("")))
                    .unwrap_or_default();
                if options.is_empty() {
                    continue;
                }
                Want::OneOf(options)
            }
            _ => continue,
        };
        out.push((path, want));
    }
    out
}

/// pydantic's: `NAME Field required`, `NAME Input should be 'a', 'b' or 'c'`, `NAME Input
/// should be a valid integer`.
fn pydantic(text: &str) -> Vec<(String, Want)> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut out = Vec::new();
    for (i, pair) in words.windows(3).enumerate() {
        let name = pair[0];
        if pair[1] == "Field" && pair[2] == "required" {
            out.push((name.to_string(), Want::Present));
        } else if pair[1] == "Input" && pair[2] == "should" {
            let rest = words[i + 3..].join(" ");
            let rest = rest.strip_prefix("be ").unwrap_or(&rest);
            let rest = rest.split(" [").next().unwrap_or(rest);
            let kind = [
                ("a valid integer", "integer"),
                ("a valid number", "number"),
                ("a valid boolean", "boolean"),
                ("a valid string", "string"),
                ("a valid list", "array"),
                ("a valid array", "array"),
                ("a valid dictionary", "object"),
            ]
            .into_iter()
            .find(|(w, _)| rest.starts_with(w));
            match kind {
                Some((_, t)) => out.push((name.to_string(), Want::Type(t.into()))),
                None if rest.starts_with('\'') => {
                    let options = list(&rest.replace(" or ", ", "));
                    if !options.is_empty() {
                        out.push((name.to_string(), Want::OneOf(options)));
                    }
                }
                None => {}
            }
        }
    }
    out
}

/// Python jsonschema's: `'NAME' is a required property`; `'VALUE' is not one of ['a', 'b']`
/// (the property is the one whose value it is).
fn json_schema(text: &str) -> Vec<(String, Want)> {
    let mut out = Vec::new();
    for part in text
        .split("' is a required property")
        .collect::<Vec<_>>()
        .iter()
        .rev()
        .skip(1)
    {
        if let Some(name) = part.rsplit('\'').next() {
            out.push((name.to_string(), Want::Present));
        }
    }
    out.reverse();
    out
}

/// The value a missing property gets: the plan's own value for it (its schema, filled as
/// every first call is), else a plain word.
fn property_value(schema: &Value, name: &str) -> Value {
    let prop = schema
        .get("properties")
        .and_then(|p| p.get(name))
        .cloned()
        .unwrap_or(Value::Bool(true));
    let one = serde_json::json!({
        "type": "object",
        "properties": {name: prop},
        "required": [name],
    });
    generate_arguments(&one)
        .get(name)
        .cloned()
        .unwrap_or_else(|| Value::String("glassbox".into()))
}

/// An option as the message wrote it: a number when it is one.
fn option_value(option: &str) -> Value {
    match option.parse::<i64>() {
        Ok(n) => Value::from(n),
        Err(_) => Value::String(option.to_string()),
    }
}

/// A value of JSON type `t` for the property (its schema's, when it has one of that type).
fn type_value(t: &str, schema: &Value, name: &str) -> Option<Value> {
    let generated = property_value(schema, name);
    let fits = match t {
        "string" => generated.is_string(),
        "number" => generated.is_number(),
        "integer" => generated.is_i64() || generated.is_u64(),
        "boolean" => generated.is_boolean(),
        "array" => generated.is_array(),
        "object" => generated.is_object(),
        _ => false,
    };
    if fits {
        return Some(generated);
    }
    Some(match t {
        "string" => Value::String("glassbox".into()),
        "number" | "integer" => Value::from(1),
        "boolean" => Value::Bool(true),
        "array" => Value::Array(Vec::new()),
        "object" => Value::Object(Map::new()),
        _ => return None,
    })
}

/// The text after the first `marker` in `s`.
fn after<'a>(s: &'a str, marker: &str) -> Option<&'a str> {
    s.find(marker).map(|i| &s[i + marker.len()..])
}

/// The first `"..."` or `'...'` string at the start of `s` (after spaces).
fn quoted(s: &str) -> Option<String> {
    let s = s.trim_start();
    let q = s.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    let rest = &s[1..];
    rest.find(q).map(|end| rest[..end].to_string())
}

/// The quoted items of a list (`"a","b"`, `'a', 'b'`), at most 32.
fn list(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(i) = rest.find(['"', '\'']) {
        let q = rest[i..].chars().next().unwrap_or('"');
        let after = &rest[i + 1..];
        let Some(end) = after.find(q) else {
            break;
        };
        out.push(after[..end].to_string());
        rest = &after[end + 1..];
        if out.len() >= 32 {
            break;
        }
    }
    out
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    match s.chars().count() > 40 {
        true => format!("{}…", s.chars().take(40).collect::<String>()),
        false => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "query": {"type": "string"},
            "mode": {"type": "string"},
            "limit": {"type": "integer", "minimum": 1, "maximum": 50},
        }})
    }

    #[test]
    fn zod_issues_as_the_typescript_sdk_writes_them() {
        let error = "MCP error -32602: Invalid arguments for tool search: [\n  {\n    \"code\": \"invalid_type\",\n    \"expected\": \"string\",\n    \"received\": \"undefined\",\n    \"path\": [\n      \"query\"\n    ],\n    \"message\": \"Required\"\n  },\n  {\n    \"code\": \"invalid_enum_value\",\n    \"options\": [\"fast\", \"slow\"],\n    \"path\": [\"mode\"],\n    \"received\": \"glassbox\"\n  }\n]";
        let c = correct(&schema(), &json!({"mode": "glassbox"}), error).unwrap();
        assert_eq!(c.arguments["query"], "glassbox");
        assert_eq!(c.arguments["mode"], "fast");
        assert_eq!(
            c.label,
            "corrected from the server's message: query=\"glassbox\", mode=\"fast\""
        );
    }

    #[test]
    fn pydantic_and_json_schema_messages() {
        let fastmcp = "Error executing tool search: 2 validation errors for searchArguments\\nlimit\\n  Input should be a valid integer, unable to parse string as an integer [type=int_parsing, input_value='x', input_type=str]\\nmode\\n  Input should be 'fast' or 'slow' [type=literal_error";
        let c = correct(&schema(), &json!({"limit": "x", "mode": "y"}), fastmcp).unwrap();
        assert_eq!(c.arguments["limit"], 1);
        assert_eq!(c.arguments["mode"], "fast");
        let missing =
            "1 validation error for fetchArguments\\nurl\\n  Field required [type=missing";
        let c = correct(&schema(), &json!({}), missing).unwrap();
        assert!(c.arguments["url"].is_string());
        let js = "'query' is a required property";
        let c = correct(&schema(), &json!({"mode": "fast"}), js).unwrap();
        assert_eq!(c.arguments, json!({"mode": "fast", "query": "glassbox"}));
    }

    #[test]
    fn a_message_that_says_nothing_usable_gives_no_correction() {
        for error in [
            "no such city: Paris",
            "Provide exactly one of url or alexandria",
            "",
            "[{\"code\":\"custom\",\"path\":[\"x\"]}]",
            "'a b' is a required property",
        ] {
            assert_eq!(correct(&schema(), &json!({}), error), None, "{error}");
        }
        // Already what the message asks: nothing changes, no call.
        assert_eq!(
            correct(
                &schema(),
                &json!({"query": "glassbox"}),
                "'query' is a required property"
            ),
            None
        );
    }
}
