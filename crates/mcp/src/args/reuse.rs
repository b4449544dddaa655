//! Values earlier calls returned, given to later calls' parameters of the same name: a tool
//! that lists issues returns their ids, the tool that gets one wants an `id` (or an
//! `issue_id`); a made-up value would only be "not found". Read from a successful result's
//! text parts that are JSON (and its `structuredContent`), bounded, scalars only.

use super::PlannedCall;
use serde_json::{Map, Value};

/// Most values kept from all answers.
const MAX_VALUES: usize = 256;
/// Most nodes of one answer walked.
const MAX_NODES: usize = 10_000;
/// Longest string value kept.
const MAX_LEN: usize = 512;
/// Deepest value walked.
const MAX_DEPTH: usize = 32;

/// Values returned by earlier calls, by normalized key (`issue_id`, `issueId` and `IssueID`
/// alike), the first of each.
#[derive(Debug, Default)]
pub struct Returned {
    values: Vec<(String, Value)>,
}

impl Returned {
    /// Keeps the scalars of a successful `tools/call` result, each under its key.
    pub fn keep(&mut self, result: &Value) {
        let mut docs = Vec::new();
        if let Some(Value::Array(items)) = result.get("content") {
            for item in items {
                if let Some(t) = item.get("text").and_then(Value::as_str) {
                    if let Ok(v) = serde_json::from_str::<Value>(t.trim()) {
                        docs.push(v);
                    }
                }
            }
        }
        if let Some(s) = result.get("structuredContent") {
            docs.push(s.clone());
        }
        let mut budget = MAX_NODES;
        for d in &docs {
            self.walk(d, None, &mut budget, 0);
        }
    }

    fn walk(&mut self, v: &Value, key: Option<&str>, budget: &mut usize, depth: usize) {
        if *budget == 0 || self.values.len() >= MAX_VALUES || depth > MAX_DEPTH {
            return;
        }
        *budget -= 1;
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    self.walk(x, Some(k), budget, depth + 1);
                }
            }
            Value::Array(a) => {
                for x in a {
                    self.walk(x, key, budget, depth + 1);
                }
            }
            Value::String(s) if !s.is_empty() && s.len() <= MAX_LEN => self.add(key, v),
            Value::Number(_) => self.add(key, v),
            _ => {}
        }
    }

    fn add(&mut self, key: Option<&str>, v: &Value) {
        let Some(key) = key.map(norm).filter(|k| !k.is_empty()) else {
            return;
        };
        if !self.values.iter().any(|(k, _)| *k == key) {
            self.values.push((key, v.clone()));
        }
    }

    /// The value for a parameter named `name`: one returned under the same key, else, for a
    /// name that ends in `id` (`issue_id`), one returned as `id`.
    fn value_for(&self, name: &str) -> Option<&Value> {
        let n = norm(name);
        let get = |k: &str| self.values.iter().find(|(x, _)| x == k).map(|(_, v)| v);
        get(&n).or_else(|| {
            (n.len() > 2 && n.ends_with("id"))
                .then(|| get("id"))
                .flatten()
        })
    }

    /// `arguments` with every top-level string or number parameter of `schema` that an
    /// earlier answer has a value for given that value, labelled; `None` when none has.
    pub fn apply(&self, schema: &Value, arguments: &Value) -> Option<PlannedCall> {
        let props = schema.get("properties")?.as_object()?;
        let mut args = match arguments {
            Value::Object(m) => m.clone(),
            _ => Map::new(),
        };
        let mut said = Vec::new();
        for (name, prop) in props {
            let Some(v) = self.value_for(name) else {
                continue;
            };
            let wants = prop.get("type").and_then(Value::as_str);
            let fits = match wants {
                Some("string") | None => v.is_string(),
                Some("integer") => v.is_i64() || v.is_u64(),
                Some("number") => v.is_number(),
                _ => false,
            };
            if !fits || args.get(name) == Some(v) {
                continue;
            }
            said.push(name.clone());
            args.insert(name.clone(), v.clone());
        }
        if said.is_empty() {
            return None;
        }
        Some(PlannedCall {
            label: format!("values earlier answers returned: {}", said.join(", ")),
            arguments: Value::Object(args),
        })
    }
}

/// A key as compared: lower case, letters and digits only.
fn norm(k: &str) -> String {
    k.chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ids_and_names_an_answer_returned_fill_later_parameters() {
        let mut r = Returned::default();
        r.keep(&json!({"content": [{"type": "text", "text":
            "{\"issues\": [{\"id\": \"ISS-7\", \"title\": \"x\", \"repoName\": \"api\"}], \"total\": 1}"}]}));
        r.keep(&json!({"content": [{"type": "text", "text": "not json"}]}));
        let schema = json!({"properties": {
            "issue_id": {"type": "string"},
            "repo_name": {"type": "string"},
            "total": {"type": "integer"},
            "title": {"type": "integer"},
            "other": {"type": "string"},
        }});
        let c = r
            .apply(&schema, &json!({"issue_id": "glassbox", "other": "o"}))
            .unwrap();
        assert_eq!(
            c.arguments,
            json!({"issue_id": "ISS-7", "repo_name": "api", "total": 1, "other": "o"})
        );
        assert_eq!(
            c.label,
            "values earlier answers returned: issue_id, repo_name, total"
        );
        // Nothing to give: no call.
        assert!(Returned::default().apply(&schema, &json!({})).is_none());
    }

    #[test]
    fn huge_or_deep_answers_are_bounded() {
        let mut r = Returned::default();
        let many: Vec<Value> = (0..100_000).map(|i| json!({format!("k{i}"): i})).collect();
        r.keep(&json!({"structuredContent": many}));
        assert!(r.values.len() <= MAX_VALUES);
        let mut deep = json!("x");
        for _ in 0..100 {
            deep = json!({"a": deep});
        }
        r.keep(&json!({"structuredContent": deep}));
    }
}
