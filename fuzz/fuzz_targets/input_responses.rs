//! The params of a 2026-07-28 retry (`inputResponses`, `requestState`) and of every MCP request
//! the gateway's JSON-RPC gate checks (`jsonrpc_gate.rs` `params_problem`): the input is JSON
//! taken as a `tools/call`'s `inputResponses` (and, when it is an object with them, as the whole
//! params), then as the params of each of MCP's methods.
//!
//! What must hold, for any bytes: no panic; params the gate lets through are params rmcp reads
//! for that method, with `inputResponses` an object and `requestState` a string when present;
//! a refusal names the params.
#![no_main]

use gateway_host::fuzzing::params_problem;
use libfuzzer_sys::fuzz_target;
use rmcp::model::CallToolRequestParams;
use serde_json::{json, Value};

const METHODS: &[&str] = &[
    "initialize", "server/discover", "completion/complete", "logging/setLevel", "prompts/get", "prompts/list",
    "resources/list", "resources/templates/list", "tools/list", "skills/list", "resources/read",
    "resources/directory/read", "subscriptions/listen", "resources/subscribe", "resources/unsubscribe", "tools/call",
    "tasks/get", "tasks/update", "tasks/cancel", "skills/get", "x/custom",
];

fn check(method: &str, params: &Value) {
    match params_problem(method, Some(params)) {
        None => {
            if method == "tools/call" {
                serde_json::from_value::<CallToolRequestParams>(params.clone()).expect("passed params rmcp cannot read");
            }
            if let Some(object) = params.as_object().filter(|_| method != "x/custom") {
                assert!(object.get("inputResponses").is_none_or(Value::is_object), "{params}");
                assert!(object.get("requestState").is_none_or(Value::is_string), "{params}");
            }
        }
        Some(problem) => assert!(problem.contains("params"), "{method}: {problem}"),
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<Value>(data) else { return };
    check("tools/call", &json!({ "name": "echo", "arguments": {}, "inputResponses": value, "requestState": "s" }));
    for method in METHODS {
        check(method, &value);
    }
});
