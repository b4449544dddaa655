//! The argument generator against any JSON as a tool's `inputSchema`.

use glassbox_mcp::args::{generate_arguments, generate_arguments_marked, plan_calls, schema_note};
use serde_json::Value;

/// Values the generator may make in one call (its documented budget, `MAX_NODES`).
const NODES: usize = 10_000;
/// Bytes of strings it may make in one call (`MAX_BYTES`).
const STRING_BYTES: usize = 1 << 20;

/// Values in `v` and bytes of its strings (object keys included).
fn size(v: &Value) -> (usize, usize) {
    match v {
        Value::String(s) => (1, s.len()),
        Value::Array(a) => a
            .iter()
            .map(size)
            .fold((1, 0), |x, y| (x.0 + y.0, x.1 + y.1)),
        Value::Object(o) => o.iter().fold((1, 0), |acc, (k, v)| {
            let (n, b) = size(v);
            (acc.0 + n, acc.1 + b + k.len())
        }),
        _ => (1, 0),
    }
}

/// `args`: `data` as a schema (when it is JSON). The arguments are always an object, the
/// same for the same schema, and bounded: at most the generator's budget plus one more value
/// copied from the schema (a `const`, a `default`), whatever the schema.
pub fn generate(data: &[u8]) {
    let Ok(schema) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let (schema_nodes, schema_bytes) = size(&schema);
    let args = generate_arguments(&schema);
    assert!(args.is_object(), "arguments are not an object: {args}");
    let (nodes, bytes) = size(&args);
    assert!(
        nodes <= NODES + schema_nodes + 1,
        "{nodes} values generated from a schema of {schema_nodes}"
    );
    assert!(
        bytes <= STRING_BYTES + schema_bytes + 64 * 1024,
        "{bytes} bytes of strings generated from a schema of {schema_bytes}"
    );
    assert_eq!(generate_arguments(&schema), args, "not deterministic");
    let marked = generate_arguments_marked(&schema, "fuzzmark");
    assert!(marked.is_object());
    if let Some(note) = schema_note(&schema) {
        assert!(!note.is_empty());
    }
    // What goes to the server must serialize.
    serde_json::to_vec(&args).expect("arguments serialize");
    // A plan: its first set is the arguments above, every set an object, no set twice, at
    // most as many as asked, the same plan each time.
    let plan = plan_calls(&schema, "", 12);
    assert!(
        !plan.is_empty() && plan.len() <= 12,
        "{} calls planned",
        plan.len()
    );
    assert_eq!(
        plan[0].arguments, args,
        "the plan's first set is not the arguments"
    );
    for (i, call) in plan.iter().enumerate() {
        assert!(
            call.arguments.is_object(),
            "{}: {}",
            call.label,
            call.arguments
        );
        assert!(
            plan[..i].iter().all(|c| c.arguments != call.arguments),
            "{} planned twice",
            call.label
        );
    }
    assert_eq!(plan_calls(&schema, "", 12), plan, "plan not deterministic");
}
