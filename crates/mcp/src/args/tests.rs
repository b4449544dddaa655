use super::*;
use serde_json::json;

fn gen(schema: Value) -> Value {
    generate_arguments(&schema)
}

#[test]
fn broken_schemas_give_an_empty_object() {
    for schema in [
        Value::Null,
        json!(42),
        json!("object"),
        json!([1, 2]),
        json!(false),
        json!(true),
        json!({}),
        json!({"type": "string"}),
        json!({"type": "frobnicate"}),
        json!({"type": 7}),
        json!({"$ref": "#"}),
        json!({"$ref": "https://elsewhere.test/schema.json"}),
        json!({"allOf": "nope", "anyOf": 3}),
    ] {
        let v = generate_arguments(&schema);
        assert!(v.is_object(), "{schema}: {v}");
    }
    assert_eq!(gen(json!({"type": "object"})), json!({}));
}

#[test]
fn required_and_optional_properties_are_filled() {
    let v = gen(json!({
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "count": {"type": "integer"},
            "ratio": {"type": "number"},
            "flag": {"type": "boolean"},
            "nothing": {"type": "null"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "nested": {"type": "object", "properties": {"a": {"type": "integer"}}},
            "free": {},
        },
        "required": ["name", "count", "extra"],
    }));
    assert_eq!(
        v,
        json!({
            "name": "glassbox",
            "count": 1,
            "ratio": 1,
            "flag": false,
            "nothing": null,
            "tags": ["glassbox"],
            "nested": {"a": 1},
            "free": "glassbox",
            "extra": "glassbox",
        })
    );
}

#[test]
fn type_arrays_and_nullable_prefer_a_real_value() {
    let v = gen(json!({"properties": {
        "a": {"type": ["null", "string"]},
        "b": {"type": "integer", "nullable": true},
        "c": {"anyOf": [{"type": "null"}, {"type": "integer", "minimum": 5}]},
        "d": {"oneOf": [{"const": null}, {"type": "boolean"}]},
        "e": {"type": ["null"]},
    }}));
    assert_eq!(
        v,
        json!({"a": "glassbox", "b": 1, "c": 5, "d": false, "e": null})
    );
}

#[test]
fn enum_const_default_and_examples() {
    let v = gen(json!({"properties": {
        "mode": {"type": "string", "enum": ["fast", "slow"]},
        "fixed": {"const": {"x": [1]}},
        "level": {"type": "integer", "default": 3, "minimum": 1},
        "bad_default": {"type": "integer", "default": "three"},
        "out_of_range": {"type": "integer", "default": 0, "minimum": 1},
        "example": {"type": "string", "examples": [7, "sample"]},
        "remote": {"type": "string", "default": "https://api.github.com/"},
        "absolute": {"type": "string", "default": "/etc/passwd"},
        "mixed_enum": {"enum": [null, "http://real.example.com/", "safe"]},
    }}));
    assert_eq!(v["mode"], "fast");
    assert_eq!(v["fixed"], json!({"x": [1]}));
    assert_eq!(v["level"], 3);
    assert_eq!(v["bad_default"], 1);
    assert_eq!(v["out_of_range"], 1);
    assert_eq!(v["example"], "sample");
    assert_eq!(v["remote"], "glassbox");
    assert_eq!(v["absolute"], "glassbox");
    assert_eq!(v["mixed_enum"], "safe");
}

#[test]
fn string_lengths_patterns_and_formats() {
    let v = gen(json!({"properties": {
        "short": {"type": "string", "maxLength": 3},
        "long": {"type": "string", "minLength": 12},
        "huge": {"type": "string", "minLength": 1_000_000_000u64},
        "code": {"type": "string", "pattern": "^[A-Z]{3}-\\d{2}$"},
        "slug": {"type": "string", "pattern": "^[a-z]+$", "minLength": 4},
        "lookaround": {"type": "string", "pattern": "^(?=x)y$"},
        "realhost": {"type": "string", "pattern": "^https://[a-z]+\\.com/$"},
        "uri": {"type": "string", "format": "uri"},
        "email": {"type": "string", "format": "email"},
        "date": {"type": "string", "format": "date"},
        "datetime": {"type": "string", "format": "date-time"},
        "uuid": {"type": "string", "format": "uuid"},
        "ipv4": {"type": "string", "format": "ipv4"},
        "ipv6": {"type": "string", "format": "ipv6"},
        "hostname": {"type": "string", "format": "hostname"},
        "unknown_format": {"type": "string", "format": "color"},
    }}));
    assert_eq!(v["short"], "gla");
    assert_eq!(v["long"], "glassboxxxxx");
    assert_eq!(v["huge"].as_str().unwrap().len(), MAX_STRING);
    assert_eq!(v["code"], "AAA-00");
    assert_eq!(v["slug"], "aaaa");
    assert_eq!(v["lookaround"], "glassbox");
    assert_eq!(v["realhost"], "https://example.test/");
    assert_eq!(v["uri"], "https://example.test/");
    assert_eq!(v["email"], "user@example.test");
    assert_eq!(v["date"], "2024-01-01");
    assert_eq!(v["datetime"], "2024-01-01T00:00:00Z");
    assert_eq!(v["uuid"], "00000000-0000-4000-8000-000000000000");
    assert_eq!(v["ipv4"], "192.0.2.1");
    assert_eq!(v["ipv6"], "2001:db8::1");
    assert_eq!(v["hostname"], "host.example.test");
    assert_eq!(v["unknown_format"], "glassbox");
}

#[test]
fn property_names_suggest_safe_values() {
    let v = gen(json!({"properties": {
        "path": {"type": "string"},
        "filePath": {"type": "string"},
        "file_name": {"type": "string"},
        "output_dir": {"type": "string"},
        "directory": {"type": "string", "default": "/"},
        "paths": {"type": "array", "items": {"type": "string"}, "minItems": 2},
        "url": {"type": "string"},
        "host": {"type": "string"},
        "email": {"type": "string"},
        "ip": {"type": "string"},
        "direction": {"type": "string"},
        "path_enum": {"type": "string", "enum": ["/tmp"]},
    }}));
    assert_eq!(v["path"], "glassbox-probe.txt");
    assert_eq!(v["filePath"], "glassbox-probe.txt");
    assert_eq!(v["file_name"], "glassbox-probe.txt");
    assert_eq!(v["output_dir"], "glassbox-probe");
    assert_eq!(v["directory"], "glassbox-probe");
    assert_eq!(
        v["paths"],
        json!(["glassbox-probe.txt", "glassbox-probe-1.txt"])
    );
    assert_eq!(v["url"], "https://example.test/");
    assert_eq!(v["host"], "host.example.test");
    assert_eq!(v["email"], "user@example.test");
    assert_eq!(v["ip"], "192.0.2.1");
    assert_eq!(v["direction"], "glassbox");
    assert_eq!(v["path_enum"], "/tmp");
}

#[test]
fn connection_strings_are_urls_of_the_database_the_name_says() {
    let v = gen(json!({"properties": {
        "connection_string": {"type": "string"},
        "dsn": {"type": "string"},
        "databaseUrl": {"type": "string"},
        "mongo_connection_uri": {"type": "string"},
        "redis_url": {"type": "string"},
        "mysql_dsn": {"type": "string"},
        "webhook_url": {"type": "string"},
    }}));
    let pg = "postgresql://glassbox:glassbox@db.example.test:5432/glassbox";
    assert_eq!(v["connection_string"], pg);
    assert_eq!(v["dsn"], pg);
    assert_eq!(v["databaseUrl"], pg);
    assert_eq!(
        v["mongo_connection_uri"],
        "mongodb://glassbox:glassbox@db.example.test:27017/glassbox"
    );
    assert_eq!(v["redis_url"], "redis://db.example.test:6379/0");
    assert_eq!(
        v["mysql_dsn"],
        "mysql://glassbox:glassbox@db.example.test:3306/glassbox"
    );
    // A URL that names no database stays a URL.
    assert_eq!(v["webhook_url"], "https://example.test/");
}

#[test]
fn number_bounds() {
    let v = gen(json!({"properties": {
        "min": {"type": "integer", "minimum": 10},
        "max": {"type": "integer", "maximum": -5},
        "exclusive": {"type": "integer", "exclusiveMinimum": 10, "exclusiveMaximum": 12},
        "draft4": {"type": "integer", "minimum": 0, "exclusiveMinimum": true},
        "below_zero": {"type": "integer", "exclusiveMaximum": 0},
        "multiple": {"type": "integer", "minimum": 7, "multipleOf": 5},
        "number_multiple": {"type": "number", "minimum": 0.3, "multipleOf": 0.25},
        "float_exclusive": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
        "huge": {"type": "integer", "minimum": 1e300},
        "tiny_step": {"type": "number", "minimum": 1e300, "multipleOf": 1e-300},
        "fractional_min": {"type": "integer", "minimum": 2.5},
        "impossible": {"type": "integer", "minimum": 5, "maximum": 3},
    }}));
    assert_eq!(v["min"], 10);
    assert_eq!(v["max"], -5);
    assert_eq!(v["exclusive"], 11);
    assert_eq!(v["draft4"], 1);
    assert_eq!(v["below_zero"], -1);
    assert_eq!(v["multiple"], 10);
    assert_eq!(v["number_multiple"], 0.5);
    assert_eq!(v["float_exclusive"], 0.5);
    assert_eq!(v["huge"].as_f64(), Some(1e300));
    assert!(v["tiny_step"].is_number());
    assert_eq!(v["fractional_min"], 3);
    assert!(v["impossible"].is_number());
}

#[test]
fn arrays() {
    let v = gen(json!({"properties": {
        "three": {"type": "array", "items": {"type": "integer"}, "minItems": 3, "uniqueItems": true},
        "colors": {"type": "array", "items": {"enum": ["red", "green", "blue"]}, "minItems": 3, "uniqueItems": true},
        "none": {"type": "array", "maxItems": 0},
        "absurd": {"type": "array", "items": {"type": "string"}, "minItems": 1_000_000_000u64},
        "tuple": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": false},
        "old_tuple": {"type": "array", "items": [{"type": "boolean"}, {"type": "null"}], "additionalItems": false},
        "impossible_items": {"type": "array", "items": false},
    }}));
    assert_eq!(v["three"], json!([1, 2, 3]));
    assert_eq!(v["colors"], json!(["red", "green", "blue"]));
    assert_eq!(v["none"], json!([]));
    assert_eq!(v["absurd"].as_array().unwrap().len(), MAX_ITEMS);
    assert_eq!(v["tuple"], json!(["glassbox", 1]));
    assert_eq!(v["old_tuple"], json!([false, null]));
    assert_eq!(v["impossible_items"], json!([]));
}

#[test]
fn objects_and_additional_properties() {
    let v = gen(json!({"properties": {
        "env": {"type": "object", "additionalProperties": {"type": "string"}},
        "closed": {"type": "object", "additionalProperties": false, "minProperties": 3},
        "min": {"type": "object", "minProperties": 2},
        "max": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}, "c": {"type": "integer"}}, "required": ["b"], "maxProperties": 2},
    }}));
    assert_eq!(v["env"], json!({"glassbox": "glassbox"}));
    assert_eq!(v["closed"], json!({}));
    assert_eq!(
        v["min"],
        json!({"glassbox": "glassbox", "glassbox1": "glassbox"})
    );
    let max = v["max"].as_object().unwrap();
    assert_eq!(max.len(), 2);
    assert!(max.contains_key("b"));
}

#[test]
fn combinators() {
    let v = gen(json!({"properties": {
        "any": {"anyOf": [false, {"type": "frob"}, {"type": "integer", "minimum": 4}]},
        "all": {"allOf": [
            {"type": "object", "properties": {"a": {"type": "string"}}},
            {"properties": {"b": {"type": "integer", "minimum": 2}}, "required": ["b"]},
            {"properties": {"b": {"maximum": 9}}},
        ]},
        "narrowed": {"allOf": [{"type": ["string", "integer"]}, {"type": "integer"}]},
        "conflict": {"allOf": [{"minimum": 3}, {"minimum": 8}, {"type": "integer"}]},
        "one": {"type": "object", "properties": {"kind": {"type": "string"}}, "oneOf": [
            {"properties": {"kind": {"const": "circle"}, "r": {"type": "number"}}, "required": ["r"]},
            {"properties": {"kind": {"const": "square"}}},
        ]},
    }}));
    assert_eq!(v["any"], 4);
    assert_eq!(v["all"], json!({"a": "glassbox", "b": 2}));
    assert_eq!(v["narrowed"], 1);
    assert_eq!(v["conflict"], 8);
    assert_eq!(v["one"], json!({"kind": "circle", "r": 1}));
}

#[test]
fn local_references() {
    let v = gen(json!({
        "type": "object",
        "properties": {
            "point": {"$ref": "#/$defs/Point"},
            "legacy": {"$ref": "#/definitions/Legacy"},
            "color": {"$ref": "#/$defs/Color", "default": "green"},
            "escaped": {"$ref": "#/$defs/a~1b%20c"},
            "missing": {"$ref": "#/$defs/Nope", "type": "integer"},
        },
        "required": ["point", "legacy", "color"],
        "$defs": {
            "Point": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}}, "required": ["x", "y"]},
            "Color": {"enum": ["red", "green"]},
            "a/b c": {"type": "boolean"},
        },
        "definitions": {"Legacy": {"type": "string", "minLength": 10}},
    }));
    assert_eq!(v["point"], json!({"x": 1, "y": 1}));
    assert_eq!(v["legacy"], "glassboxxx");
    // A `default` beside a `$ref` is used when it fits.
    assert_eq!(v["color"], "green");
    assert_eq!(v["escaped"], false);
    assert_eq!(v["missing"], 1);
}

#[test]
fn cyclic_and_deep_schemas_are_bounded() {
    // A tree: a node with children of the same type.
    let tree = json!({
        "$ref": "#/$defs/Node",
        "$defs": {"Node": {"type": "object", "properties": {
            "name": {"type": "string"},
            "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
        }, "required": ["name", "children"]}},
    });
    let v = generate_arguments(&tree);
    assert_eq!(v["name"], "glassbox");
    assert!(serde_json::to_string(&v).unwrap().len() < 100_000);

    // Mutually recursive bare references.
    let cycle = json!({"properties": {"a": {"$ref": "#/$defs/a"}}, "required": ["a"],
        "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}});
    assert_eq!(generate_arguments(&cycle), json!({"a": ""}));

    // allOf referencing itself.
    let self_all = json!({"$defs": {"x": {"allOf": [{"$ref": "#/$defs/x"}]}},
        "properties": {"p": {"$ref": "#/$defs/x"}}});
    assert!(generate_arguments(&self_all).is_object());

    // Very deep nesting.
    let mut deep = json!({"type": "string"});
    for _ in 0..500 {
        deep = json!({"type": "object", "properties": {"x": deep}, "required": ["x"]});
    }
    let v = generate_arguments(&deep);
    assert!(v.is_object());

    // Very wide objects of wide arrays.
    let wide_props: Map<String, Value> = (0..5000)
        .map(|i| (format!("p{i}"), json!({"type": "array", "minItems": 16, "items": {"type": "string", "minLength": 10_000}})))
        .collect();
    let v = generate_arguments(&json!({"type": "object", "properties": wide_props}));
    let text = serde_json::to_string(&v).unwrap();
    assert!(text.len() < 2 << 20, "{} bytes", text.len());
}

/// Found by the `args` fuzz target: values copied from the schema (`const`, `enum`,
/// `default`, property names) were not counted against the budget, so a 4 KiB schema made
/// 16 MiB of arguments (and a 1 MiB one could exhaust memory).
#[test]
fn copies_from_the_schema_count_against_the_budget() {
    let big = "x".repeat(4000);
    let nest = |leaf: Value| {
        json!({"type": "object", "required": ["a"], "properties": {"a": {
            "type": "array", "minItems": 16, "items": {
                "type": "array", "minItems": 16, "items": {
                    "type": "array", "minItems": 16, "items": leaf}}}}})
    };
    let long_name = "n".repeat(4000);
    for schema in [
        nest(json!({"const": big})),
        nest(json!({"enum": [big]})),
        nest(json!({"type": "string", "default": big})),
        nest(
            json!({"type": "object", "required": [long_name], "properties": {long_name.clone(): {"type": "boolean"}}}),
        ),
    ] {
        let v = generate_arguments(&schema);
        let text = serde_json::to_string(&v).unwrap();
        assert!(text.len() < MAX_BYTES + 64 * 1024, "{} bytes", text.len());
        // Within the budget, copies are still made: the value is what the schema asks for.
        let first = &v["a"][0][0][0];
        assert!(
            first == &json!(big) || first.get(&long_name) == Some(&json!(false)),
            "{first}"
        );
    }
}

#[test]
fn safe_strings() {
    for s in [
        "glassbox",
        "https://example.test/",
        "http://a.b.example/x?y=1",
        "user@example.test",
        "192.0.2.7",
        "http://[2001:db8::1]:80/",
        "file.txt",
        "1.2.3",
    ] {
        assert!(is_safe_string(s), "{s}");
    }
    for s in [
        "https://api.github.com/",
        "http://user@evil.com:80/",
        "https://example.test/?next=https://evil.com",
        "file:///etc/passwd",
        "someone@gmail.com",
        "8.8.8.8",
        "www.example.com",
    ] {
        assert!(!is_safe_string(s), "{s}");
    }
}

#[test]
fn words_split_identifiers() {
    assert_eq!(words("filePath"), ["file", "path"]);
    assert_eq!(words("output_dir"), ["output", "dir"]);
    assert_eq!(words("URL"), ["url"]);
    assert_eq!(words("sourceURL"), ["source", "url"]);
}

/// Cross-check with Python's `jsonschema` when it is installed (the assertions above are the
/// real tests; this one adds breadth).
#[test]
fn generated_values_validate_with_python_jsonschema_when_available() {
    use std::process::Command;
    let available = Command::new("python3")
        .args(["-c", "import jsonschema"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !available {
        eprintln!("python3 jsonschema not installed: cross-check skipped");
        return;
    }
    let schemas = vec![
        json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "^[a-f0-9]{8}-[a-f0-9]{4}$"}, "b": {"type": "integer", "multipleOf": 3, "minimum": 4, "maximum": 20}}, "required": ["a", "b"]}),
        json!({"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string", "enum": ["x", "y", "z"]}, "minItems": 2, "uniqueItems": true}}}),
        json!({"type": "object", "properties": {"n": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 0.5}}}),
        json!({"type": "object", "properties": {"when": {"type": "string", "format": "date-time"}, "mail": {"type": "string", "format": "email"}}}),
        json!({"type": "object", "$defs": {"P": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"], "additionalProperties": false}}, "properties": {"p": {"$ref": "#/$defs/P"}, "q": {"type": "array", "items": {"$ref": "#/$defs/P"}, "maxItems": 2}}, "required": ["p"]}),
        json!({"type": "object", "properties": {"v": {"anyOf": [{"type": "null"}, {"type": "string", "minLength": 3, "maxLength": 5}]}}}),
        json!({"type": "object", "properties": {"m": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 2}, "minProperties": 2}}}),
        json!({"type": "object", "properties": {"t": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "boolean"}], "items": false, "minItems": 2}}}),
        json!({"type": "object", "allOf": [{"properties": {"a": {"type": "integer"}}, "required": ["a"]}, {"properties": {"b": {"type": "string", "maxLength": 2}}, "required": ["b"]}]}),
        json!({"type": "object", "properties": {"s": {"type": "string", "pattern": "^(https?|ftp)://[^\\s/$.?#].[^\\s]*$"}}}),
        json!({"type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-Z]{2}\\d{3,5}(-[a-z]+)?$", "minLength": 7}}}),
    ];
    let cases: Vec<Value> = schemas
        .into_iter()
        .map(|s| {
            let instance = generate_arguments(&s);
            json!({"schema": s, "instance": instance})
        })
        .collect();
    let script = r#"
import json, sys, jsonschema
cases = json.load(sys.stdin)
bad = []
for c in cases:
    v = jsonschema.Draft202012Validator(c["schema"], format_checker=jsonschema.FormatChecker())
    errs = [e.message for e in v.iter_errors(c["instance"])]
    if errs:
        bad.append((c["instance"], errs))
print(json.dumps(bad))
sys.exit(1 if bad else 0)
"#;
    let mut child = Command::new("python3")
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(&serde_json::to_vec(&cases).unwrap())
            .unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "invalid instances: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn why_arguments_fall_back_is_said() {
    assert_eq!(
        schema_note(&json!({"type": "object", "properties": {"a": {"type": "string"}}})),
        None
    );
    assert_eq!(schema_note(&json!(true)), None);
    for (schema, want) in [
        (Value::Null, "no inputSchema"),
        (json!("object"), "is a string, not a JSON Schema object"),
        (json!({"type": "string"}), "type is \"string\", not object"),
        (
            json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}}),
            "resolves to nothing",
        ),
        (
            json!({"type": "object", "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "properties": {"x": {"$ref": "#/$defs/a"}}}),
            "is cyclic",
        ),
        (
            json!({"type": "object", "properties": {"x": {"$ref": "https://schemas.example/x.json"}}}),
            "refers outside itself",
        ),
    ] {
        let note = schema_note(&schema).unwrap_or_default();
        assert!(note.contains(want), "{schema}: {note}");
    }
    // Deep and huge schemas are bounded and said so; the generator still answers an object.
    let mut deep = json!({"type": "string"});
    for _ in 0..60 {
        deep = json!({"type": "object", "properties": {"x": deep}});
    }
    assert!(schema_note(&deep).unwrap().contains("deeper than"));
    assert!(gen(deep).is_object());
    let huge = json!({"type": "object", "description": "x".repeat(2 << 20)});
    assert!(schema_note(&huge).unwrap().contains("bytes"));
}

#[test]
fn names_of_a_vocabulary_get_ordinary_values() {
    let v = gen(json!({"properties": {
        "timezone": {"type": "string"},
        "source_timezone": {"type": "string"},
        "language": {"type": "string"},
        "currency": {"type": "string"},
        "expression": {"type": "string"},
        "zones": {"type": "array", "items": {"type": "string"}},
        "tz_enum": {"type": "string", "enum": ["Asia/Tokyo"]},
    }}));
    assert_eq!(v["timezone"], "UTC");
    assert_eq!(v["source_timezone"], "UTC");
    assert_eq!(v["language"], "en");
    assert_eq!(v["currency"], "USD");
    assert_eq!(v["expression"], "1 + 2");
    assert_eq!(v["tz_enum"], "Asia/Tokyo");
    // With the audit's marker too: a made-up zone would only fail the call.
    let v = crate::args::generate_arguments_marked(
        &json!({"properties": {"timezone": {"type": "string"}}}),
        "gbm0123456789",
    );
    assert_eq!(v["timezone"], "UTC");
}
