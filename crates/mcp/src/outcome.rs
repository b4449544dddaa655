//! What a call's answer says happened: one of the [`CallResult`] outcomes, from the result's
//! `isError` and text or the JSON-RPC error's code and message.
//!
//! The texts looked for are the messages real runtimes and SDKs write: `-32602` and the MCP
//! SDKs' "Input validation error", pydantic's "validation error for" and "Field required",
//! zod's "invalid_type", JSON Schema validators' "is a required property"; Node's
//! "fetch failed", `ECONNREFUSED` and "socket disconnected", Python's "Connection refused",
//! "Max retries exceeded", "CERTIFICATE_VERIFY_FAILED". A text that says neither is a plain
//! tool error: nothing is inferred from it.

use glassbox_model::CallResult;
use serde_json::Value;

/// The JSON-RPC code of invalid params.
const INVALID_PARAMS: &str = "JSON-RPC error -32602";

/// Lower-case pieces of text that say the arguments failed validation.
const REJECTED: &[&str] = &[
    "invalid params",
    "invalid arguments",
    "invalid argument",
    "input validation",
    "validation error",
    "validationerror",
    "failed validation",
    "validation failed",
    "is a required property",
    "required property",
    "missing required",
    "field required",
    "invalid_type",
    "invalid_enum_value",
    "invalid_union",
    "unrecognized_keys",
    "additional properties",
    "invalid input",
    "invalid value",
    "must be one of",
    "must be provided",
    "provide exactly one",
    "exactly one of",
    "not a valid",
    "does not match",
    "is not of type",
];

/// Lower-case pieces of text that say the server rejected its own result (the SDKs check a
/// tool's answer against its `outputSchema`, and say so with the code and words of rejected
/// arguments): the tool's failure, not the call's arguments.
const OWN_RESULT: &[&str] = &[
    "output validation",
    "invalid structured content",
    "has an output schema but",
    "structured content does not match",
    "outputschema",
    "output schema",
];

/// Lower-case pieces of text that say a network request failed.
const TRANSPORT: &[&str] = &[
    "fetch failed",
    "econnrefused",
    "econnreset",
    "enotfound",
    "eai_again",
    "etimedout",
    "ehostunreach",
    "enetunreach",
    "socket hang up",
    "socket disconnected",
    "connection refused",
    "connection reset",
    "connection aborted",
    "connection error",
    "connecterror",
    "connecttimeout",
    "failed to establish a new connection",
    "max retries exceeded",
    "remote end closed connection",
    "remotedisconnected",
    "name or service not known",
    "temporary failure in name resolution",
    "getaddrinfo",
    "network is unreachable",
    "certificate verify failed",
    "certificate_verify_failed",
    "unable to verify the first certificate",
    "self signed certificate",
    "self-signed certificate",
    "unable to get local issuer certificate",
    "sslerror",
    "ssl error",
    "tls handshake",
];

/// Most characters of an error's text kept with the call.
const ERROR_CHARS: usize = 300;

/// The outcome of a call answered with `result`, and the error's text when it is not `ok`.
pub(crate) fn of_result(result: &Value) -> (CallResult, Option<String>) {
    let Some(obj) = result.as_object() else {
        return (
            CallResult::RpcError,
            Some("the result is not an object".into()),
        );
    };
    if obj.get("isError") != Some(&Value::Bool(true)) {
        return (CallResult::Ok, None);
    }
    let text = result_text(result);
    let lower = text.to_lowercase();
    let outcome = if says(&lower, TRANSPORT) {
        CallResult::TransportFailure
    } else if says(&lower, OWN_RESULT) {
        CallResult::ToolError
    } else if says(&lower, REJECTED) {
        CallResult::RejectedArguments
    } else {
        CallResult::ToolError
    };
    (outcome, Some(crate::message::sanitize(&text, ERROR_CHARS)))
}

/// The outcome of a call answered with a JSON-RPC error whose description is `error`
/// (`JSON-RPC error CODE: MESSAGE`).
pub(crate) fn of_rpc_error(error: &str) -> CallResult {
    let lower = error.to_lowercase();
    if says(&lower, OWN_RESULT) {
        CallResult::RpcError
    } else if error.starts_with(INVALID_PARAMS) {
        CallResult::RejectedArguments
    } else if says(&lower, TRANSPORT) {
        CallResult::TransportFailure
    } else if says(&lower, REJECTED) && error.contains("-326") {
        // The SDKs' own codes (-32600..-32603) with a validation message.
        CallResult::RejectedArguments
    } else {
        CallResult::RpcError
    }
}

/// The text parts of a tool result's `content`, joined, at most a few KiB.
fn result_text(result: &Value) -> String {
    let mut text = String::new();
    if let Some(Value::Array(items)) = result.get("content") {
        for item in items {
            if let Some(t) = item.get("text").and_then(Value::as_str) {
                if !text.is_empty() {
                    text.push(' ');
                }
                text.extend(t.chars().take(4096));
            }
            if text.len() >= 4096 {
                break;
            }
        }
    }
    if text.is_empty() {
        if let Some(s) = result.get("structuredContent") {
            text = s.to_string().chars().take(4096).collect();
        }
    }
    text
}

/// Whether `lower` (lower-cased text) holds one of `pieces`.
fn says(lower: &str, pieces: &[&str]) -> bool {
    pieces.iter().any(|p| lower.contains(p))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool_error(text: &str) -> CallResult {
        of_result(&json!({"isError": true, "content": [{"type": "text", "text": text}]})).0
    }

    #[test]
    fn results_and_tool_errors() {
        assert_eq!(of_result(&json!({"content": []})).0, CallResult::Ok);
        assert_eq!(
            of_result(&json!({"isError": false, "content": []})),
            (CallResult::Ok, None)
        );
        assert_eq!(of_result(&json!([1])).0, CallResult::RpcError);
        assert_eq!(tool_error("no such city: Paris"), CallResult::ToolError);
        assert_eq!(
            tool_error("An unexpected error occurred"),
            CallResult::ToolError
        );
    }

    #[test]
    fn rejected_arguments_as_sdks_write_them() {
        for text in [
            "MCP error -32602: Input validation error: Invalid arguments for tool search",
            "1 validation error for fetchArguments\nurl\n  Field required",
            "[{\"code\": \"invalid_type\", \"expected\": \"string\", \"received\": \"undefined\"}]",
            "Provide exactly one of url or alexandria",
            "'query' is a required property",
        ] {
            assert_eq!(tool_error(text), CallResult::RejectedArguments, "{text}");
        }
        assert_eq!(
            of_rpc_error("JSON-RPC error -32602: Invalid params"),
            CallResult::RejectedArguments
        );
        assert_eq!(
            of_rpc_error(
                "JSON-RPC error -32603: Input validation error: 'x' is a required property"
            ),
            CallResult::RejectedArguments
        );
        assert_eq!(
            of_rpc_error("JSON-RPC error -32601: Method not found"),
            CallResult::RpcError
        );
    }

    #[test]
    fn a_server_that_rejects_its_own_result_did_not_reject_the_arguments() {
        // The TypeScript SDK's words, with its InvalidParams code; FastMCP's tool error.
        assert_eq!(
            of_rpc_error(
                "JSON-RPC error -32602: MCP error -32602: Output validation error: Invalid \
                 structured content for tool get_forecast: expected number, received string"
            ),
            CallResult::RpcError
        );
        assert_eq!(
            of_rpc_error(
                "JSON-RPC error -32602: Tool list_items has an output schema but no structured \
                 content was provided"
            ),
            CallResult::RpcError
        );
        assert_eq!(
            tool_error("Output validation error: 'temperature' is a required property"),
            CallResult::ToolError
        );
        // Input validation keeps its meaning.
        assert_eq!(
            tool_error("Input validation error: 'city' is a required property"),
            CallResult::RejectedArguments
        );
    }

    #[test]
    fn transport_failures_as_runtimes_write_them() {
        for text in [
            "TypeError: fetch failed",
            "Error: connect ECONNREFUSED 198.18.0.7:443",
            "Client network socket disconnected before secure TLS connection was established",
            "HTTPSConnectionPool(host='api.example', port=443): Max retries exceeded with url: /",
            "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed",
        ] {
            assert_eq!(tool_error(text), CallResult::TransportFailure, "{text}");
        }
        assert_eq!(
            of_rpc_error("JSON-RPC error -32603: fetch failed"),
            CallResult::TransportFailure
        );
    }

    #[test]
    fn the_error_text_is_kept_short_and_printable() {
        let long = format!("\x1b[31m{}", "x".repeat(5000));
        let (_, text) =
            of_result(&json!({"isError": true, "content": [{"type": "text", "text": long}]}));
        let text = text.unwrap();
        assert!(!text.contains('\x1b'));
        assert!(text.chars().count() <= ERROR_CHARS + 8, "{text}");
    }
}
