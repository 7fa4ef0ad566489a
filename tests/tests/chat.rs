//! The agent and `POST /apps/chat` (SPEC R33–R35, issue 11), end to end: the real gateway-host,
//! real apps (the repository's GroceryInventory and test-app), the real SQLite session store, and
//! one test double — a scripted OpenAI-compatible Chat Completions server
//! ([`gateway_e2e::scripted_llm`]), since no LLM can run here. Turns are read with
//! [`gateway_e2e::chat::ChatStream`], which sees each frame as it arrives.
//!
//! Every wait is bounded: a missing frame fails the test with the frames seen so far.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use gateway_e2e::chat::{start_chat, Frame};
use gateway_e2e::scripted_llm::{Gate, Outcome, Reply, ScriptedLlm, ScriptedToolCall};
use gateway_e2e::own_redis::{self, OwnRedis};
use gateway_e2e::{free_port, json, release_bin, wait_until, GatewayOptions, GatewayProcess, Value};

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// The bound of one turn (the machine is small and shared).
const TURN: Duration = Duration::from_secs(90);
/// The environment variable the gateway reads the provider's key from, and the key.
const API_KEY_ENV: &str = "GATEWAY_E2E_LLM_KEY";
const API_KEY: &str = "sk-scripted-e2e-0123";
const SYSTEM_PROMPT: &str = "You are the assistant of the gateway's end-to-end tests.";

// ---------------------------------------------------------------------------------------------
// Setup
// ---------------------------------------------------------------------------------------------

/// The `Agent` section pointing at `base_url`.
fn agent(base_url: &str) -> Value {
    json!({
        "BaseUrl": base_url,
        "Model": "scripted",
        "ApiKeyEnv": API_KEY_ENV,
        "SystemPrompt": SYSTEM_PROMPT,
        "MaxToolRounds": 5,
        "TimeoutSeconds": 30,
    })
}

/// A gateway configuration with apps under `dir/apps`, sessions in SQLite under `dir/data`, and
/// `agent` as its `Agent` section (none when `Value::Null`).
fn chat_config(dir: &Path, agent: Value) -> Value {
    std::fs::create_dir_all(dir.join("apps")).unwrap();
    let mut config = json!({
        "Gateway": { "AuthTokenEnv": "GATEWAY_E2E_TOKEN_NOT_SET", "DataPath": dir.join("data") },
        "OpenClaw": { "McpApps": { "Enabled": true, "DiscoveryPaths": [dir.join("apps")], "Allow": ["*"] } },
        "Sessions": { "Store": "sqlite" },
    });
    if !agent.is_null() {
        config["Agent"] = agent;
    }
    config
}

/// Starts the gateway with `config` written to `dir/appsettings.json` (`Value::Null`: the one
/// already there, for a restart), the provider key in its environment.
fn start_gateway(dir: &Path, config: Value) -> GatewayProcess {
    GatewayProcess::start_with(GatewayOptions {
        config,
        config_dir: Some(dir.to_path_buf()),
        env: vec![(API_KEY_ENV.to_string(), API_KEY.to_string())],
        ..Default::default()
    })
}

fn write_manifest(dir: &Path, folder: &str, manifest: &Value) -> PathBuf {
    let app_dir = dir.join("apps").join(folder);
    std::fs::create_dir_all(&app_dir).unwrap();
    std::fs::write(app_dir.join("openclaw.mcpapp.json"), serde_json::to_string_pretty(manifest).unwrap()).unwrap();
    app_dir
}

/// The repository's GroceryInventory manifest, on a free port, the release binary.
fn grocery_manifest() -> Value {
    let text = std::fs::read_to_string(gateway_e2e::repo_root().join("mcpapps/grocery-inventory/openclaw.mcpapp.json")).unwrap();
    let mut manifest: Value = serde_json::from_str(&text).unwrap();
    let port = free_port();
    manifest["command"] = json!(release_bin("grocery-inventory"));
    manifest["url"] = json!(format!("http://127.0.0.1:{port}/mcp"));
    manifest["arguments"] = json!(["--listen", format!("127.0.0.1:{port}")]);
    manifest["startupTimeoutSeconds"] = json!(30);
    manifest
}

/// A stdio test-app manifest with tool prefix `{id}.`.
fn test_app_manifest(id: &str, args: &[&str]) -> Value {
    json!({
        "id": id,
        "name": format!("Test {id}"),
        "version": "1.2.3",
        "transport": "stdio",
        "command": release_bin("test-app"),
        "arguments": args,
        "toolNamePrefix": format!("{id}."),
        "startupTimeoutSeconds": 15,
        "requestTimeoutSeconds": 30,
    })
}

/// Waits until the registry offers `name` to the model (`GET /tools`) and returns its
/// provider-safe name.
fn provider_name(gw: &GatewayProcess, name: &str) -> String {
    let mut found = None;
    let mut last = Value::Null;
    let ok = wait_until(secs(90), Duration::from_millis(200), || {
        let (status, tools) = gw.get_json("/tools");
        if status == 200 {
            found = tools["model"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|t| t["name"] == name)
                .and_then(|t| t["providerName"].as_str().map(str::to_string));
            last = tools;
        }
        found.is_some()
    });
    assert!(ok, "the registry never offered {name} to the model; GET /tools: {last}\n--- gateway ---\n{}", gw.logs());
    found.unwrap()
}

/// `GET /apps/sessions/{id}` → the session (asserting 200).
fn session(gw: &GatewayProcess, id: &str) -> Value {
    let (status, body) = gw.get_json(&format!("/apps/sessions/{id}"));
    assert_eq!(status, 200, "GET /apps/sessions/{id}: {body}");
    body
}

/// Saved messages as the model reads them: without the page's parts (`ui`).
fn models(messages: &[Value]) -> Vec<Value> {
    let mut messages = messages.to_vec();
    for m in &mut messages {
        m.as_object_mut().map(|o| o.remove("ui"));
    }
    messages
}

fn roles(session: &Value) -> Vec<String> {
    session["messages"].as_array().unwrap_or_else(|| panic!("no messages: {session}")).iter().map(|m| m["role"].as_str().unwrap_or("?").to_string()).collect()
}

fn types(frames: &[Frame]) -> Vec<String> {
    frames.iter().map(|f| f.ty().to_string()).collect()
}

/// Frame types with runs of `text` collapsed into one.
fn shape(frames: &[Frame]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for t in types(frames) {
        if t == "text" && out.last().map(String::as_str) == Some("text") {
            continue;
        }
        out.push(t);
    }
    out
}

fn describe(frames: &[Frame]) -> String {
    frames.iter().map(|f| format!("  {}\n", f.data)).collect()
}

/// Runs one turn to its `done` and returns its frames.
fn turn(gw: &GatewayProcess, body: Value) -> Vec<Frame> {
    let mut stream = start_chat(gw, &body);
    stream.expect_event_stream(secs(30));
    stream.until_done(TURN)
}

/// A turn that must end well: no `error` frame, a `result`, then `done`.
fn good_turn(gw: &GatewayProcess, body: Value) -> Vec<Frame> {
    let frames = turn(gw, body);
    let t = types(&frames);
    assert!(!t.contains(&"error".to_string()), "an error frame in a turn that should succeed:\n{}\n--- gateway ---\n{}", describe(&frames), gw.logs());
    assert_eq!(t.first().map(String::as_str), Some("session"), "{t:?}");
    assert_eq!(&t[t.len() - 2..], ["result", "done"], "{t:?}");
    frames
}

fn frame<'a>(frames: &'a [Frame], ty: &str) -> &'a Frame {
    frames.iter().find(|f| f.ty() == ty).unwrap_or_else(|| panic!("no '{ty}' frame in\n{}", describe(frames)))
}

/// A request with a raw body → (status, body as JSON, or `Value::String` when not JSON).
fn post_raw(gw: &GatewayProcess, path: &str, content_type: &str, body: Vec<u8>) -> (u16, Value) {
    let response = gw
        .client()
        .post(gw.url(path))
        .header("content-type", content_type)
        .body(body)
        .send()
        .unwrap_or_else(|e| panic!("POST {path}: {e}"));
    let status = response.status().as_u16();
    let text = response.text().unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

/// A 4xx answer whose body is a JSON object mentioning one of `words` (case-insensitive).
fn assert_problem(what: &str, (status, body): (u16, Value), expected: u16, words: &[&str]) {
    assert_eq!(status, expected, "{what}: status {status}, body {body}");
    assert!(body.is_object(), "{what}: the {status} body is not a JSON object: {body}");
    let text = body.to_string().to_lowercase();
    assert!(words.iter().any(|w| text.contains(&w.to_lowercase())), "{what}: the body names none of {words:?}: {body}");
}

/// An accepting answer to an elicitation form: the first choice of each `oneOf`/`enum`, the
/// default, else 7 for numbers, true for booleans, "e2e" for strings.
fn accept_form(params: &Value) -> Value {
    let properties = params["requestedSchema"]["properties"]
        .as_object()
        .unwrap_or_else(|| panic!("an elicitation without requestedSchema.properties: {params}"));
    let mut content = serde_json::Map::new();
    for (field, spec) in properties {
        let value = if let Some(first) = spec["oneOf"].get(0) {
            first["const"].clone()
        } else if let Some(first) = spec["enum"].get(0) {
            first.clone()
        } else if let Some(default) = spec.get("default") {
            default.clone()
        } else {
            match spec["type"].as_str() {
                Some("integer") | Some("number") => json!(7),
                Some("boolean") => json!(true),
                _ => json!("e2e"),
            }
        };
        content.insert(field.clone(), value);
    }
    json!({ "action": "accept", "content": content })
}

/// `PRAGMA integrity_check` and `PRAGMA journal_mode` of an SQLite file.
fn sqlite_check(db: &Path) -> (String, String) {
    let conn = rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE)
        .unwrap_or_else(|e| panic!("opening {}: {e}", db.display()));
    conn.busy_timeout(secs(10)).unwrap();
    let integrity: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    let journal: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
    (integrity, journal)
}

// ---------------------------------------------------------------------------------------------
// Must show 1: a tool-calling turn, streamed in order, saved whole
// ---------------------------------------------------------------------------------------------

#[test]
fn a_tool_calling_turn_streams_its_frames_in_order_and_is_saved_whole() {
    let llm = ScriptedLlm::start();
    let dir = tempfile::tempdir().unwrap();
    let config = chat_config(dir.path(), agent(&llm.base_url()));
    write_manifest(dir.path(), "grocery-inventory", &grocery_manifest());
    let gw = start_gateway(dir.path(), config);

    let low = provider_name(&gw, "grocery.get_low_stock");
    assert_eq!(low, "grocery_get_low_stock", "the provider-safe name of grocery.get_low_stock");
    llm.push(Reply::tool_call("call_low_1", &low, &json!({ "storeId": 1 })));
    llm.push(Reply::text(["Several products ", "are low ", "at Downtown Market."]));

    let question = "What is low on stock at store 1?";
    let frames = good_turn(&gw, json!({ "message": question }));
    assert_eq!(
        shape(&frames),
        ["session", "tool", "tool_result", "text", "result", "done"],
        "frames of the turn:\n{}",
        describe(&frames)
    );
    let session_id = frame(&frames, "session").data["sessionId"].as_str().unwrap().to_string();
    assert!(session_id.starts_with("apps-"), "a new session's id: {session_id}");
    let tool = &frame(&frames, "tool").data;
    assert_eq!(tool["id"], "call_low_1", "{tool}");
    assert_eq!(tool["name"], "grocery.get_low_stock", "the tool frame names the registry tool: {tool}");
    assert_eq!(tool["input"], json!({ "storeId": 1 }), "{tool}");
    let result = &frame(&frames, "tool_result").data;
    assert_eq!(result["id"], "call_low_1", "{result}");
    assert_eq!(result["name"], "grocery.get_low_stock", "{result}");
    assert_eq!(result["isError"], false, "{result}");
    assert!(result["text"].as_str().unwrap().contains("below reorder threshold"), "{result}");
    let text: String = frames.iter().filter(|f| f.ty() == "text").map(|f| f.data["delta"].as_str().unwrap()).collect();
    assert_eq!(text, "Several products are low at Downtown Market.", "the text deltas, in order");
    assert!(frames.iter().filter(|f| f.ty() == "text").count() >= 2, "text streamed as deltas, not at the end in one piece");
    assert_eq!(frame(&frames, "result").data["text"], "Several products are low at Downtown Market.");

    // What the model got.
    assert_eq!(llm.request_count(), 2, "{:#?}", llm.requests());
    let first = llm.request(0);
    assert_eq!(first.body["model"], "scripted");
    assert_eq!(first.body["stream"], true, "the agent streams");
    assert_eq!(first.authorization.as_deref(), Some(format!("Bearer {API_KEY}").as_str()), "the key of Agent.ApiKeyEnv");
    let messages = first.messages();
    assert_eq!(messages[0], json!({ "role": "system", "content": SYSTEM_PROMPT }), "Agent.SystemPrompt first");
    assert_eq!(first.last_user_message().unwrap()["content"], question);
    let offered = first.tool_names();
    assert!(offered.contains(&low), "{low} offered: {offered:?}");
    assert!(offered.contains(&"grocery_guided_stock_count".to_string()), "{offered:?}");
    for name in &offered {
        assert!(
            !name.is_empty() && name.len() <= 64 && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'),
            "a tool name a provider refuses: {name}"
        );
    }
    assert!(!offered.iter().any(|n| n.contains("refresh_dashboard_data")), "an app-only tool offered to the model: {offered:?}");
    let declared = first.body["tools"].as_array().unwrap().iter().find(|t| t["function"]["name"] == low.as_str()).unwrap().clone();
    assert_eq!(declared["type"], "function");
    assert_eq!(declared["function"]["parameters"]["type"], "object", "{declared}");

    let second = llm.request(1);
    let messages = second.messages();
    let n = messages.len();
    assert!(n >= 4, "{messages:#?}");
    let assistant = &messages[n - 2];
    assert_eq!(assistant["role"], "assistant", "{messages:#?}");
    assert_eq!(assistant["tool_calls"][0]["id"], "call_low_1");
    assert_eq!(assistant["tool_calls"][0]["type"], "function");
    assert_eq!(assistant["tool_calls"][0]["function"]["name"], low.as_str());
    let arguments: Value = serde_json::from_str(assistant["tool_calls"][0]["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments, json!({ "storeId": 1 }), "the streamed argument pieces, reassembled");
    let tool_message = &messages[n - 1];
    assert_eq!(tool_message["role"], "tool", "{messages:#?}");
    assert_eq!(tool_message["tool_call_id"], "call_low_1");
    assert!(tool_message["content"].as_str().unwrap().contains("below reorder threshold"), "{tool_message}");

    // The history holds the whole exchange.
    let saved = session(&gw, &session_id);
    assert_eq!(roles(&saved), ["user", "assistant", "tool", "assistant"], "{saved:#}");
    let m = saved["messages"].as_array().unwrap();
    assert_eq!(m[0]["content"], question);
    assert_eq!(m[1]["tool_calls"][0]["id"], "call_low_1");
    assert_eq!(m[1]["tool_calls"][0]["function"]["name"], low.as_str());
    assert_eq!(m[2]["tool_call_id"], "call_low_1");
    assert_eq!(m[3]["content"], "Several products are low at Downtown Market.");
    assert_eq!(saved["id"], session_id.as_str());
    assert_eq!(saved["turns"], 1, "{saved:#}");
    assert!(saved["title"].as_str().unwrap().starts_with("What is low"), "{saved:#}");
    assert!(saved["createdAt"].as_i64().unwrap() > 0 && saved["updatedAt"].as_i64().unwrap() >= saved["createdAt"].as_i64().unwrap());

    // The session resumes: the model gets the history, the history grows.
    llm.push(Reply::text(["You asked about store 1."]));
    let frames = good_turn(&gw, json!({ "message": "What did I ask?", "sessionId": session_id }));
    assert_eq!(frame(&frames, "session").data["sessionId"], session_id.as_str());
    let third = llm.request(2);
    let sent: Vec<Value> = third.messages();
    assert_eq!(sent.len(), 1 + 4 + 1, "system, the saved turn, the new message: {sent:#?}");
    assert_eq!(&sent[1..5], &models(m)[..], "the saved history, as saved (without the page's parts)");
    let saved = session(&gw, &session_id);
    assert_eq!(roles(&saved), ["user", "assistant", "tool", "assistant", "user", "assistant"]);
    assert_eq!(saved["turns"], 2);

    // Listed, then deleted.
    let (status, list) = gw.get_json("/apps/sessions");
    assert_eq!(status, 200, "{list}");
    let listed = list["sessions"].as_array().unwrap().iter().find(|s| s["id"] == session_id.as_str()).cloned();
    let listed = listed.unwrap_or_else(|| panic!("{session_id} not in {list}"));
    assert_eq!(listed["turns"], 2, "{listed}");
    for key in ["title", "createdAt", "updatedAt"] {
        assert!(!listed[key].is_null(), "{key} in {listed}");
    }
    let response = gw.client().delete(gw.url(&format!("/apps/sessions/{session_id}"))).send().unwrap();
    assert!(response.status().is_success(), "DELETE: {}", response.status());
    let (status, body) = gw.get_json(&format!("/apps/sessions/{session_id}"));
    assert_problem("GET a deleted session", (status, body), 404, &[&session_id]);
    assert_eq!(llm.remaining(), 0);
}

/// `Agent.MaxHistoryBytes`: a model request carries only the session's most recent whole turns
/// that fit (a tool call with its result, or not at all); the session keeps every turn.
#[test]
fn a_long_session_sends_the_model_only_its_recent_whole_turns() {
    let llm = ScriptedLlm::start();
    let dir = tempfile::tempdir().unwrap();
    let mut agent = agent(&llm.base_url());
    agent["MaxHistoryBytes"] = json!(400);
    let config = chat_config(dir.path(), agent);
    write_manifest(dir.path(), "grocery-inventory", &grocery_manifest());
    let gw = start_gateway(dir.path(), config);
    let low = provider_name(&gw, "grocery.get_low_stock");

    // Turn 1 (well over the budget): a tool call and its result.
    let question = format!("What is low on stock at store 1? {}", "Please list every product. ".repeat(16));
    llm.push(Reply::tool_call("call_low_1", &low, &json!({ "storeId": 1 })));
    llm.push(Reply::text(["Milk is low."]));
    let frames = good_turn(&gw, json!({ "message": question }));
    let session_id = frame(&frames, "session").data["sessionId"].as_str().unwrap().to_string();
    // Within the turn the model still gets the turn's own tool call and result.
    let within = llm.request(1).messages();
    assert_eq!(within.iter().map(|m| m["role"].as_str().unwrap()).collect::<Vec<_>>(), ["system", "user", "assistant", "tool"]);

    // Turn 2: turn 1 does not fit, so none of it is sent.
    llm.push(Reply::text(["That is all."]));
    good_turn(&gw, json!({ "message": "Is that all?", "sessionId": session_id }));
    let sent = llm.request(2).messages();
    assert_eq!(sent, [json!({ "role": "system", "content": SYSTEM_PROMPT }), json!({ "role": "user", "content": "Is that all?" })]);

    // Turn 3: turn 2 fits, turn 1 still does not.
    llm.push(Reply::text(["Bye."]));
    good_turn(&gw, json!({ "message": "Thanks", "sessionId": session_id }));
    let sent = llm.request(3).messages();
    let roles_sent: Vec<&str> = sent.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles_sent, ["system", "user", "assistant", "user"], "{sent:#?}");
    assert_eq!(sent[1]["content"], "Is that all?");
    assert_eq!(sent[2]["content"], "That is all.");
    assert!(!serde_json::to_string(&sent).unwrap().contains("call_low_1"), "no part of turn 1: {sent:#?}");

    // The session itself keeps every turn.
    let saved = session(&gw, &session_id);
    assert_eq!(roles(&saved), ["user", "assistant", "tool", "assistant", "user", "assistant", "user", "assistant"], "{saved:#}");
    assert_eq!(saved["messages"][0]["content"], question.as_str());
    assert_eq!(llm.remaining(), 0);
}

// ---------------------------------------------------------------------------------------------
// Must show 2: elicitation during a tool call
// ---------------------------------------------------------------------------------------------

#[test]
fn an_app_question_during_a_tool_call_is_answered_through_input() {
    let llm = ScriptedLlm::start();
    let dir = tempfile::tempdir().unwrap();
    let config = chat_config(dir.path(), agent(&llm.base_url()));
    write_manifest(dir.path(), "grocery-inventory", &grocery_manifest());
    let gw = start_gateway(dir.path(), config);

    let guided = provider_name(&gw, "grocery.guided_stock_count");
    llm.push(Reply::tool_call("call_count_1", &guided, &json!({})));
    llm.push(Reply::text(["The count is recorded."]));

    let mut stream = start_chat(&gw, &json!({ "message": "Walk me through a stock count." })).labelled("guided count");
    stream.expect_event_stream(secs(30));
    let session_id = stream.session_id(TURN);
    let tool = stream.until("tool", TURN);
    assert_eq!(tool.data["name"], "grocery.guided_stock_count");

    // Store, product, quantity, confirmation: one input frame each, answered as they come.
    let mut asked = Vec::new();
    let result = loop {
        let next = stream.next(TURN);
        match next.ty() {
            "input" => {
                let data = &next.data;
                assert_eq!(data["method"], "elicitation/create", "{data}");
                let input_id = data["inputId"].as_str().unwrap_or_else(|| panic!("an input frame without inputId: {data}"));
                assert!(data["params"]["message"].is_string(), "{data}");
                let answer = accept_form(&data["params"]);
                let (status, body) = gw.post_json(
                    &format!("/apps/chat/{session_id}/input"),
                    &json!({ "inputId": input_id, "result": answer }),
                );
                assert!(status == 200 || status == 202, "answering {input_id}: {status} {body}");
                asked.push((data["params"]["message"].as_str().unwrap().to_string(), input_id.to_string()));
                assert!(asked.len() <= 6, "more questions than the tool has: {asked:?}");
            }
            "tool_result" => break next,
            other => panic!("unexpected '{other}' frame while the tool asks: {}\n{}", next.data, stream.describe()),
        }
    };
    assert_eq!(asked.len(), 4, "store, product, quantity, confirmation: {asked:?}");
    assert!(asked[0].0.contains("store"), "{asked:?}");
    assert_eq!(result.data["isError"], false, "{}", result.data);
    let text = result.data["text"].as_str().unwrap();
    assert!(text.contains("Recorded stock count") && text.contains("is now 7"), "{text}");

    let frames = stream.until_done(TURN);
    assert_eq!(
        shape(&frames),
        ["session", "tool", "input", "input", "input", "input", "tool_result", "text", "result", "done"],
        "{}",
        describe(&frames)
    );
    let fed_back = llm.request(1).messages();
    let tool_message = fed_back.last().unwrap();
    assert_eq!(tool_message["tool_call_id"], "call_count_1");
    assert!(tool_message["content"].as_str().unwrap().contains("Recorded stock count"), "{tool_message}");

    // An answered question cannot be answered again; the turn is over.
    let (status, body) = gw.post_json(
        &format!("/apps/chat/{session_id}/input"),
        &json!({ "inputId": asked[0].1, "result": { "action": "accept", "content": {} } }),
    );
    assert_problem("answering an answered question", (status, body), 404, &[&asked[0].1, "input", "question"]);
    let saved = session(&gw, &session_id);
    assert_eq!(roles(&saved), ["user", "assistant", "tool", "assistant"]);
    // A reloaded page shows the questions answered: each one and its answer, in order.
    let inputs = saved["messages"][2]["ui"]["inputs"].as_array().cloned().unwrap_or_default();
    let ids: Vec<&str> = inputs.iter().map(|i| i["inputId"].as_str().unwrap_or("")).collect();
    assert_eq!(ids, asked.iter().map(|(_, id)| id.as_str()).collect::<Vec<_>>(), "{:#}", saved["messages"][2]);
    for input in &inputs {
        assert_eq!(input["method"], "elicitation/create", "{input}");
        assert_eq!(input["answer"]["result"], accept_form(&input["params"]), "the answer as posted: {input}");
    }
    assert_eq!(saved["messages"][2]["ui"]["name"], "grocery.guided_stock_count", "the gateway's name, as live");
}

// ---------------------------------------------------------------------------------------------
// Must show 3: one session's turns queue, sessions overlap
// ---------------------------------------------------------------------------------------------

#[test]
fn turns_of_one_session_run_one_after_another_and_sessions_overlap() {
    let llm = ScriptedLlm::start();
    let dir = tempfile::tempdir().unwrap();
    let gw = start_gateway(dir.path(), chat_config(dir.path(), agent(&llm.base_url())));

    // A session of the client's choosing.
    let sid = "e2e-serial-1";
    llm.push(Reply::text(["first"]));
    let frames = good_turn(&gw, json!({ "message": "hello", "sessionId": sid }));
    assert_eq!(frame(&frames, "session").data["sessionId"], sid);

    // Turn A's model answer is held; turn B on the same session is sent meanwhile.
    let gate = Gate::new();
    llm.push(Reply::text(["A ", "answer"]).held(&gate));
    llm.push(Reply::text(["B answer"]));
    let mut a = start_chat(&gw, &json!({ "message": "turn A", "sessionId": sid })).labelled("turn A");
    a.expect_event_stream(secs(30));
    a.session_id(TURN);
    assert!(llm.wait_for_requests(2, secs(30)), "turn A's model call never came");
    let mut b = start_chat(&gw, &json!({ "message": "turn B", "sessionId": sid })).labelled("turn B");
    let early = b.drain_for(secs(2));
    assert!(early.is_empty(), "turn B sent frames while turn A runs:\n{}", describe(&early));
    assert_eq!(llm.request_count(), 2, "turn B called the model while turn A runs: {:#?}", llm.requests());

    gate.open();
    let a_frames = a.until_done(TURN);
    b.expect_event_stream(secs(30));
    let b_frames = b.until_done(TURN);
    assert_eq!(shape(&a_frames), ["session", "text", "result", "done"], "{}", describe(&a_frames));
    assert_eq!(shape(&b_frames), ["session", "text", "result", "done"], "{}", describe(&b_frames));
    let a_done = a_frames.last().unwrap().at;
    let b_first = b_frames[0].at;
    // Two connections: the gateway writes A's done before B's first frame, but the two reader
    // threads may stamp them a few milliseconds apart in either order on a busy machine.
    assert!(
        b_first + Duration::from_millis(250) >= a_done,
        "turn B's first frame came {:?} before turn A's done",
        a_done.duration_since(b_first)
    );
    // The gateway side of the same order, on one clock: B's model call came after A's ended,
    // and it carried turn A as history.
    let a_request = llm.request(1);
    let b_request = llm.request(2);
    assert!(b_request.received_at >= a_request.ended_at.unwrap(), "B's model call began before A's ended");
    let contents: Vec<String> = b_request.messages().iter().map(|m| m["content"].as_str().unwrap_or("").to_string()).collect();
    assert_eq!(contents, [SYSTEM_PROMPT, "hello", "first", "turn A", "A answer", "turn B"], "B's history");
    assert_eq!(roles(&session(&gw, sid)), ["user", "assistant", "user", "assistant", "user", "assistant"]);

    // Two sessions: X's answer is held, Y runs to its end meanwhile.
    let gate = Gate::new();
    let before = llm.request_count();
    llm.push(Reply::text(["X answer"]).held(&gate));
    let mut x = start_chat(&gw, &json!({ "message": "turn X" })).labelled("turn X");
    x.expect_event_stream(secs(30));
    let x_session = x.session_id(TURN);
    assert!(llm.wait_for_requests(before + 1, secs(30)), "turn X's model call never came");
    llm.push(Reply::text(["Y answer"]));
    let mut y = start_chat(&gw, &json!({ "message": "turn Y" })).labelled("turn Y");
    y.expect_event_stream(secs(30));
    let y_frames = y.until_done(TURN);
    assert_eq!(shape(&y_frames), ["session", "text", "result", "done"], "{}", describe(&y_frames));
    assert_ne!(y.session_id(secs(1)), x_session);
    x.drain_for(Duration::from_millis(100));
    assert!(!x.types().contains(&"done".to_string()), "turn X ended while its model was held");
    gate.open();
    let x_frames = x.until_done(TURN);
    assert_eq!(shape(&x_frames), ["session", "text", "result", "done"], "{}", describe(&x_frames));
    assert!(y_frames.last().unwrap().at < x_frames.last().unwrap().at, "Y finished while X was running");
    assert!(y_frames[0].at < x_frames.last().unwrap().at);
}

// ---------------------------------------------------------------------------------------------
// Must show 4: SIGKILL mid-turn
// ---------------------------------------------------------------------------------------------

#[test]
fn a_gateway_killed_mid_turn_keeps_every_completed_turn() {
    let llm = ScriptedLlm::start();
    let dir = tempfile::tempdir().unwrap();
    let config = chat_config(dir.path(), agent(&llm.base_url()));
    write_manifest(dir.path(), "tapp", &test_app_manifest("tapp", &[]));
    let mut gw = start_gateway(dir.path(), config);
    let echo = provider_name(&gw, "tapp.echo");
    let sid = "e2e-durable";

    llm.push(Reply::text(["one"]));
    good_turn(&gw, json!({ "message": "first", "sessionId": sid }));
    llm.push(Reply::tool_call("call_echo_1", &echo, &json!({ "text": "durable" })));
    llm.push(Reply::text(["two"]));
    let frames = good_turn(&gw, json!({ "message": "second", "sessionId": sid }));
    assert!(frame(&frames, "tool_result").data["text"].as_str().unwrap().contains("echo: durable"), "{}", describe(&frames));

    // The third turn has run a tool and waits for the model when the gateway is killed.
    let gate = Gate::new();
    llm.push(Reply::tool_call("call_echo_2", &echo, &json!({ "text": "lost" })));
    llm.push(Reply::text(["never said"]).held(&gate));
    let mut third = start_chat(&gw, &json!({ "message": "third", "sessionId": sid })).labelled("killed turn");
    third.expect_event_stream(secs(30));
    third.until("tool_result", TURN);
    assert!(llm.wait_for_requests(5, secs(30)), "the killed turn's second model call never came");
    gw.signal(libc::SIGKILL);
    assert!(gw.wait_exit(secs(15)).is_some(), "the gateway survived SIGKILL");
    let rest = third.drain_for(secs(5));
    assert!(!types(&rest).contains(&"done".to_string()), "a killed turn finished: {}", describe(&rest));
    drop(third);

    let db = dir.path().join("data").join("sessions.db");
    assert!(db.exists(), "no {}; data folder: {:?}", db.display(), std::fs::read_dir(dir.path().join("data")).map(|d| d.map(|e| e.unwrap().file_name()).collect::<Vec<_>>()));
    let (integrity, journal) = sqlite_check(&db);
    assert_eq!(integrity, "ok", "PRAGMA integrity_check after SIGKILL");
    assert_eq!(journal.to_lowercase(), "wal", "the session database runs in WAL mode");

    // Restarted on the same data: both completed turns, nothing of the killed one.
    let gw = start_gateway(dir.path(), Value::Null);
    let saved = session(&gw, sid);
    assert_eq!(roles(&saved), ["user", "assistant", "user", "assistant", "tool", "assistant"], "{saved:#}");
    let m = saved["messages"].as_array().unwrap();
    assert_eq!(m[0]["content"], "first");
    assert_eq!(m[1]["content"], "one");
    assert_eq!(m[3]["tool_calls"][0]["id"], "call_echo_1");
    assert_eq!(m[4]["tool_call_id"], "call_echo_1");
    assert_eq!(m[5]["content"], "two");
    assert_eq!(saved["turns"], 2);
    let text = saved.to_string();
    assert!(!text.contains("call_echo_2") && !text.contains("\"third\""), "a part of the killed turn was saved: {saved:#}");
    let (_, list) = gw.get_json("/apps/sessions");
    assert!(list["sessions"].as_array().unwrap().iter().any(|s| s["id"] == sid && s["turns"] == 2), "{list}");

    // The session goes on.
    let next = llm.request_count();
    llm.push(Reply::text(["three"]));
    let frames = good_turn(&gw, json!({ "message": "fourth", "sessionId": sid }));
    assert_eq!(frame(&frames, "result").data["text"], "three");
    let sent = llm.request(next).messages();
    assert_eq!(sent.len(), 1 + 6 + 1, "system, the two saved turns, the new message: {sent:#?}");
    assert_eq!(&sent[1..7], &models(m)[..]);
    let saved = session(&gw, sid);
    assert_eq!(saved["turns"], 3);
    assert_eq!(saved["messages"].as_array().unwrap().len(), 8);
    let (integrity, _) = sqlite_check(&db);
    assert_eq!(integrity, "ok", "PRAGMA integrity_check with the restarted gateway running");
}

// ---------------------------------------------------------------------------------------------
// Must show 6: bad requests, provider faults, no provider
// ---------------------------------------------------------------------------------------------

#[test]
fn bad_chat_requests_get_4xx_json_naming_the_problem() {
    let llm = ScriptedLlm::start();
    let dir = tempfile::tempdir().unwrap();
    let gw = start_gateway(dir.path(), chat_config(dir.path(), agent(&llm.base_url())));
    let json_type = "application/json";

    assert_problem("bad JSON", post_raw(&gw, "/apps/chat", json_type, b"{\"message\": ".to_vec()), 400, &["json"]);
    assert_problem("empty body", post_raw(&gw, "/apps/chat", json_type, Vec::new()), 400, &["empty"]);
    assert_problem("whitespace body", post_raw(&gw, "/apps/chat", json_type, b"  \n".to_vec()), 400, &["empty"]);
    assert_problem("not an object", post_raw(&gw, "/apps/chat", json_type, b"[1, 2]".to_vec()), 400, &["object"]);
    for body in [json!({}), json!({ "sessionId": "e2e-x" }), json!({ "message": "   " }), json!({ "appEvents": [] })] {
        assert_problem(&format!("nothing to say: {body}"), post_raw(&gw, "/apps/chat", json_type, body.to_string().into_bytes()), 400, &["message"]);
    }
    assert_problem("message not a string", post_raw(&gw, "/apps/chat", json_type, br#"{"message": 5}"#.to_vec()), 400, &["message"]);
    assert_problem(
        "appEvents not events",
        post_raw(&gw, "/apps/chat", json_type, br#"{"appEvents": "clicked"}"#.to_vec()),
        400,
        &["appEvents"],
    );
    assert_problem(
        "a session id that cannot be one",
        post_raw(&gw, "/apps/chat", json_type, br#"{"message": "hi", "sessionId": "../../etc/passwd"}"#.to_vec()),
        400,
        &["sessionId"],
    );
    let big = json!({ "message": "x".repeat(1_200_000) }).to_string().into_bytes();
    assert_problem("oversized body", post_raw(&gw, "/apps/chat", json_type, big), 413, &["exceeds", "too large", "bytes"]);

    // /input
    let answer = json!({ "inputId": "in-0000", "result": { "action": "accept", "content": {} } });
    assert_problem(
        "an answer for an unknown session",
        post_raw(&gw, "/apps/chat/no-such-session/input", json_type, answer.to_string().into_bytes()),
        404,
        &["no-such-session", "in-0000"],
    );
    assert_problem("/input bad JSON", post_raw(&gw, "/apps/chat/s1/input", json_type, b"{oops".to_vec()), 400, &["json"]);
    assert_problem("/input empty body", post_raw(&gw, "/apps/chat/s1/input", json_type, Vec::new()), 400, &["empty"]);
    assert_problem(
        "/input without inputId",
        post_raw(&gw, "/apps/chat/s1/input", json_type, br#"{"result": {"action": "accept"}}"#.to_vec()),
        400,
        &["inputId"],
    );
    assert_problem(
        "/input without a result",
        post_raw(&gw, "/apps/chat/s1/input", json_type, br#"{"inputId": "in-1"}"#.to_vec()),
        400,
        &["result"],
    );

    // Sessions
    let (status, body) = gw.get_json("/apps/sessions/no-such-session");
    assert_problem("GET an unknown session", (status, body), 404, &["no-such-session"]);
    let response = gw.client().delete(gw.url("/apps/sessions/no-such-session")).send().unwrap();
    let status = response.status().as_u16();
    let body: Value = serde_json::from_str(&response.text().unwrap()).unwrap_or(Value::Null);
    assert_problem("DELETE an unknown session", (status, body), 404, &["no-such-session"]);
    let (status, list) = gw.get_json("/apps/sessions");
    assert_eq!(status, 200, "{list}");
    assert_eq!(list["sessions"], json!([]), "bad requests made no session: {list}");

    assert_eq!(llm.request_count(), 0, "a bad request reached the model: {:#?}", llm.requests());
}

/// A turn that must fail with an `error` frame (then `done`, no `result`); returns the message.
fn failing_turn(gw: &GatewayProcess, body: Value) -> (String, Vec<Frame>) {
    let frames = turn(gw, body);
    let t = types(&frames);
    assert_eq!(t.first().map(String::as_str), Some("session"), "{t:?}");
    assert_eq!(t.last().map(String::as_str), Some("done"), "{t:?}");
    assert!(!t.contains(&"result".to_string()), "a result in a failed turn:\n{}", describe(&frames));
    let error = frame(&frames, "error").data["message"].as_str().unwrap_or("").to_string();
    assert!(!error.trim().is_empty(), "an error frame without a message:\n{}", describe(&frames));
    (error, frames)
}

#[test]
fn provider_faults_become_error_frames_and_the_session_survives() {
    // Nothing listens on the provider's port at first.
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let mut agent = agent(&format!("http://127.0.0.1:{port}/v1"));
    agent["TimeoutSeconds"] = json!(4);
    let gw = start_gateway(dir.path(), chat_config(dir.path(), agent));
    let sid = "e2e-faults";

    let (error, _) = failing_turn(&gw, json!({ "message": "anyone there?", "sessionId": sid }));
    assert!(error.contains(&port.to_string()) || error.to_lowercase().contains("reach"), "provider down: {error}");

    // The provider comes up: the session takes its first turn.
    let llm = ScriptedLlm::start_on(port);
    llm.push(Reply::text(["hello back"]));
    good_turn(&gw, json!({ "message": "hello", "sessionId": sid }));
    let intact = |why: &str| {
        let saved = session(&gw, sid);
        assert_eq!(roles(&saved), ["user", "assistant"], "after {why}: {saved:#}");
        assert_eq!(saved["turns"], 1, "after {why}");
    };

    let faults: Vec<(&str, Reply, &[&str])> = vec![
        ("HTTP 500", Reply::http_error(500, "the model fell over"), &["500"]),
        ("HTTP 429", Reply::http_error(429, "rate limited"), &["429"]),
        ("garbage instead of SSE", Reply::garbage(), &["malformed", "json", "stream"]),
        ("JSON instead of SSE", Reply::raw("application/json", r#"{"object":"chat.completion"}"#), &["malformed", "stream", "ended"]),
        ("a stream cut in the middle", Reply::cut(["Half an ", "ans"]), &["malformed", "stream", "ended", "error"]),
        ("no answer within Agent.TimeoutSeconds", Reply::text(["too late"]).delayed(secs(10)), &["within", "timeout", "timed out"]),
    ];
    for (what, reply, words) in faults {
        let index = llm.request_count();
        llm.push(reply);
        let (error, frames) = failing_turn(&gw, json!({ "message": format!("try: {what}"), "sessionId": sid }));
        let lower = error.to_lowercase();
        assert!(words.iter().any(|w| lower.contains(w)), "{what}: the error frame says {error:?}\n{}", describe(&frames));
        // The scripted reply is over (so the next fault gets the next request).
        llm.wait_for_end(index, secs(30)).unwrap_or_else(|| panic!("{what}: the provider's reply never ended"));
        intact(what);
    }

    // Down again, then back: the session still loads and takes a next turn.
    drop(llm);
    let (error, _) = failing_turn(&gw, json!({ "message": "still there?", "sessionId": sid }));
    assert!(error.contains(&port.to_string()) || error.to_lowercase().contains("reach"), "provider down: {error}");
    intact("the provider went down");
    let llm = ScriptedLlm::start_on(port);
    llm.push(Reply::text(["back again"]));
    good_turn(&gw, json!({ "message": "and now?", "sessionId": sid }));
    let contents: Vec<String> = llm.request(0).messages().iter().map(|m| m["content"].as_str().unwrap_or("").to_string()).collect();
    assert_eq!(contents, [SYSTEM_PROMPT, "hello", "hello back", "and now?"], "failed turns left nothing in the history");
    let saved = session(&gw, sid);
    assert_eq!(roles(&saved), ["user", "assistant", "user", "assistant"]);
    assert_eq!(saved["turns"], 2);
}

/// A provider that does not stream, although asked to, answers one whole `chat.completion`
/// (`application/json`): its tool calls run and its text is the turn's result. An answer that is
/// neither an event stream nor JSON (a web page where the API was expected) and a chunk whose text
/// is a number are errors naming what came, not an empty answer.
#[test]
fn a_provider_that_does_not_stream_is_read_whole_and_wrong_answers_are_named() {
    let llm = ScriptedLlm::start();
    let dir = tempfile::tempdir().unwrap();
    write_manifest(dir.path(), "tapp", &test_app_manifest("tapp", &[]));
    let gw = start_gateway(dir.path(), chat_config(dir.path(), agent(&llm.base_url())));
    let echo = provider_name(&gw, "tapp.echo");
    let whole = |message: Value| json!({ "object": "chat.completion", "choices": [{ "index": 0, "finish_reason": "stop", "message": message }] });
    let call = json!({ "id": "w1", "type": "function", "function": { "name": echo, "arguments": "{\"text\":\"whole\"}" } });
    llm.push(Reply::raw("application/json", &whole(json!({ "role": "assistant", "content": null, "tool_calls": [call] })).to_string()));
    llm.push(Reply::raw("application/json; charset=utf-8", &whole(json!({ "role": "assistant", "content": "Echoed." })).to_string()));
    let frames = good_turn(&gw, json!({ "message": "echo whole", "sessionId": "whole" }));
    assert_eq!(shape(&frames), ["session", "tool", "tool_result", "text", "result", "done"], "{}", describe(&frames));
    assert_eq!(frame(&frames, "tool_result").data["text"], "echo: whole", "{}", describe(&frames));
    assert_eq!(frame(&frames, "result").data["text"], "Echoed.");

    let number = format!("data: {}\n\ndata: [DONE]\n\n", json!({ "choices": [{ "index": 0, "delta": { "content": 5 } }] }));
    for (what, reply, named) in [
        ("a web page", Reply::raw("text/html; charset=utf-8", "<html>Sign in</html>"), "it answered text/html; charset=utf-8, neither server-sent events nor JSON"),
        ("a number for text", Reply::raw("text/event-stream", &number), "delta.content is a number, not text"),
    ] {
        llm.push(reply);
        let (error, frames) = failing_turn(&gw, json!({ "message": format!("try: {what}"), "sessionId": "whole" }));
        assert!(error.contains(named), "{what}: {error}\n{}", describe(&frames));
    }
}

/// A provider streaming nonsense (issue 37): the tool-call index of a billion that killed the
/// gateway (its list was resized to it), more tool calls than one answer may make, an event
/// that never ends, arguments without end. Each turn ends with an error frame naming the bound,
/// the gateway lives on, and its memory comes back within 10 % of its idle size.
#[test]
fn a_hostile_provider_stream_is_bounded_and_the_memory_comes_back() {
    let llm = ScriptedLlm::start();
    let dir = tempfile::tempdir().unwrap();
    let gw = start_gateway(dir.path(), chat_config(dir.path(), agent(&llm.base_url())));
    let sid = "e2e-hostile-provider";
    // Warm up both ways a turn can end, so that the idle size includes what a turn leaves.
    for _ in 0..2 {
        llm.push(Reply::text(["ready"]));
        good_turn(&gw, json!({ "message": "hello", "sessionId": sid }));
        llm.push(Reply::garbage());
        failing_turn(&gw, json!({ "message": "garbage", "sessionId": sid }));
    }
    let idle = gw.settled_rss_kib();

    let sse = |chunks: &[Value]| chunks.iter().map(|c| format!("data: {c}\n\n")).collect::<String>() + "data: [DONE]\n\n";
    let piece = |index: Value, name: &str, arguments: &str| {
        json!({ "choices": [{ "index": 0, "delta": { "tool_calls": [
            { "index": index, "id": "c1", "function": { "name": name, "arguments": arguments } }
        ] } }] })
    };
    let finish = json!({ "choices": [{ "index": 0, "delta": {}, "finish_reason": "tool_calls" }] });
    let billion = json!({ "choices": [{ "index": 0, "delta": { "tool_calls": [
        { "index": 1_000_000_000u64, "id": "c1", "function": { "name": "grocery_get_low_stock", "arguments": "{}" } }
    ] }, "finish_reason": "tool_calls" }] });
    let many: Vec<Value> = (0..200).map(|i| piece(json!(i), "grocery_get_low_stock", "{}")).chain([finish.clone()]).collect();
    let endless_event = format!("data: {{\"choices\":[{{\"delta\":{{\"content\":\"{}", "x".repeat(20 << 20));
    let endless_arguments: Vec<Value> =
        std::iter::once(piece(json!(0), "grocery_get_low_stock", "")).chain((0..350).map(|_| piece(json!(0), "", &"y".repeat(60_000)))).chain([finish]).collect();
    let hostile: Vec<(&str, String, &str)> = vec![
        ("a tool-call index of a billion", sse(&[billion]), "1000000000"),
        ("200 tool calls in one answer", sse(&many), "128"),
        ("an event that never ends", endless_event, "16777216 bytes"),
        ("arguments without end", sse(&endless_arguments), "16777216 bytes"),
    ];
    for (what, body, named) in hostile {
        let index = llm.request_count();
        llm.push(Reply::raw("text/event-stream", &body));
        let (error, frames) = failing_turn(&gw, json!({ "message": format!("try: {what}"), "sessionId": sid }));
        assert!(error.contains(named), "{what}: the error frame says {error:?}\n{}", describe(&frames));
        llm.wait_for_end(index, secs(30)).unwrap_or_else(|| panic!("{what}: the provider's reply never ended"));
    }
    // Alive and serving, and the memory came back.
    llm.push(Reply::text(["still here"]));
    good_turn(&gw, json!({ "message": "still there?", "sessionId": sid }));
    let (back, after) = gw.rss_back_within(idle, 10);
    println!("{}", json!({ "rss_kib_idle": idle, "rss_kib_after": after }));
    assert!(back, "resident size {idle} KiB idle, still {after} KiB a minute after the hostile streams");
}

#[test]
fn no_provider_configured_is_an_error_frame_naming_the_keys() {
    let dir = tempfile::tempdir().unwrap();
    let gw = start_gateway(dir.path(), chat_config(dir.path(), Value::Null));
    let (error, frames) = failing_turn(&gw, json!({ "message": "hello?" }));
    assert_eq!(shape(&frames), ["session", "error", "done"], "{}", describe(&frames));
    assert!(error.contains("Agent.BaseUrl") && error.contains("Agent.Model"), "the error names the keys to set: {error}");
    // The page learns it before anyone types: no model, and how to configure one.
    let (_, health) = gw.get_json("/apps/health");
    assert_eq!(health["agent"]["configured"], false, "{health}");
    assert!(health["agent"]["problem"].as_str().unwrap_or("").contains("Agent.BaseUrl"), "{health}");
    // Bad requests are still refused as such.
    assert_problem("bad JSON", post_raw(&gw, "/apps/chat", "application/json", b"{".to_vec()), 400, &["json"]);
}

// ---------------------------------------------------------------------------------------------
// Beyond the must-shows: UI tools, flattening, app events, round limit, cancellation
// ---------------------------------------------------------------------------------------------

#[test]
fn ui_tool_results_carry_the_app_and_results_are_flattened_for_the_model_only() {
    let llm = ScriptedLlm::start();
    let dir = tempfile::tempdir().unwrap();
    write_manifest(dir.path(), "tapp", &test_app_manifest("tapp", &[]));
    let gw = start_gateway(dir.path(), chat_config(dir.path(), agent(&llm.base_url())));
    let show = provider_name(&gw, "tapp.show_ui");
    let media = provider_name(&gw, "tapp.media");

    // Two calls in one answer (indices 0 and 1).
    llm.push(Reply::tool_calls(vec![
        ScriptedToolCall::new("call_ui", &show, &json!({})),
        ScriptedToolCall::new("call_media", &media, &json!({})),
    ]));
    llm.push(Reply::text(["Shown."]));
    let frames = good_turn(&gw, json!({ "message": "show me" }));
    assert_eq!(shape(&frames), ["session", "tool", "tool_result", "tool", "tool_result", "text", "result", "done"], "{}", describe(&frames));
    let results: Vec<&Frame> = frames.iter().filter(|f| f.ty() == "tool_result").collect();
    let ui = &results[0].data;
    assert_eq!(ui["id"], "call_ui");
    assert_eq!(ui["isError"], false, "{ui}");
    assert_eq!(ui["resourceUri"], "ui://test-app/app.html", "a UI tool's result names its UI: {ui}");
    assert_eq!(ui["input"], json!({}), "{ui}");
    assert_eq!(ui["result"]["structuredContent"], json!({ "shown": true }), "the raw MCP result: {ui}");
    assert!(ui["result"]["content"].is_array(), "{ui}");
    let plain = &results[1].data;
    assert_eq!(plain["id"], "call_media");
    assert!(plain.get("resourceUri").is_none_or(Value::is_null), "a tool without UI: {plain}");

    // The model reads text: the text blocks, embedded text, and a note for everything else.
    let fed = llm.request(1).messages();
    let tool_messages: Vec<&Value> = fed.iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(tool_messages.len(), 2, "{fed:#?}");
    assert_eq!(tool_messages[0]["tool_call_id"], "call_ui");
    assert_eq!(tool_messages[1]["tool_call_id"], "call_media");
    let flattened = tool_messages[1]["content"].as_str().unwrap();
    assert!(flattened.contains("media: one block of each kind"), "{flattened}");
    assert!(flattened.contains("A note embedded in a tool result."), "{flattened}");
    assert!(flattened.contains("image") && flattened.contains("audio"), "notes for the non-text blocks: {flattened}");
    assert!(flattened.len() < 2000, "binary data fed to the model: {} bytes", flattened.len());
}

#[test]
fn app_events_join_the_turn_unknown_tools_are_errors_and_tool_rounds_are_bounded() {
    let llm = ScriptedLlm::start();
    let dir = tempfile::tempdir().unwrap();
    write_manifest(dir.path(), "tapp", &test_app_manifest("tapp", &[]));
    let mut agent = agent(&llm.base_url());
    agent["MaxToolRounds"] = json!(2);
    let gw = start_gateway(dir.path(), chat_config(dir.path(), agent));
    let echo = provider_name(&gw, "tapp.echo");

    // What the user did in an app's UI reaches the model with the turn (no message needed).
    llm.push(Reply::text(["I see you echoed."]));
    let frames = good_turn(
        &gw,
        json!({ "appEvents": [{ "tool": "tapp.echo", "args": { "text": "from the UI" }, "resultText": "echo: from the UI" }] }),
    );
    let sid = frame(&frames, "session").data["sessionId"].as_str().unwrap().to_string();
    let user = llm.request(0).last_user_message().unwrap();
    let content = user["content"].as_str().unwrap();
    assert!(content.contains("tapp.echo") && content.contains("echo: from the UI"), "{content}");

    // The chat session is the app session (R32): the agent's tool calls carry the sessionId the
    // browser puts on /apps/mcp/{appId}?sessionId=….
    let echo_meta = provider_name(&gw, "tapp.echo_meta");
    llm.push(Reply::tool_call("call_meta", &echo_meta, &json!({})));
    llm.push(Reply::text(["ok"]));
    let frames = good_turn(&gw, json!({ "message": "which session?", "sessionId": sid }));
    let agent_meta: Value = serde_json::from_str(frame(&frames, "tool_result").data["text"].as_str().unwrap()).unwrap();
    assert_eq!(agent_meta["sessionId"], sid.as_str(), "the agent's call _meta: {agent_meta}");
    let (_, response) = gw.mcp_request(
        &format!("/apps/mcp/tapp?sessionId={sid}"),
        "tools/call",
        json!({ "name": "echo_meta", "arguments": {} }),
        json!({}),
    );
    assert_eq!(response["result"]["structuredContent"]["sessionId"], sid.as_str(), "the browser's call: {response}");

    // A tool the registry does not have: an error result the model reads, and the turn goes on.
    llm.push(Reply::tool_call("call_ghost", "no_such_tool", &json!({})));
    llm.push(Reply::text(["That tool does not exist."]));
    let frames = good_turn(&gw, json!({ "message": "call a ghost", "sessionId": sid }));
    let result = &frame(&frames, "tool_result").data;
    assert_eq!(result["isError"], true, "{result}");
    let fed = llm.requests().last().unwrap().messages();
    assert_eq!(fed.last().unwrap()["tool_call_id"], "call_ghost");
    assert!(fed.last().unwrap()["content"].as_str().unwrap().starts_with("Error:"), "{:#}", fed.last().unwrap());

    // A model that keeps calling tools is stopped after Agent.MaxToolRounds.
    for i in 0..3 {
        llm.push(Reply::tool_call(&format!("call_loop_{i}"), &echo, &json!({ "text": format!("round {i}") })));
    }
    let before = llm.request_count();
    let frames = turn(&gw, json!({ "message": "loop forever", "sessionId": sid }));
    let t = types(&frames);
    assert_eq!(t.last().map(String::as_str), Some("done"));
    let error = frame(&frames, "error").data["message"].as_str().unwrap().to_string();
    assert!(error.contains("MaxToolRounds"), "{error}");
    assert_eq!(llm.request_count() - before, 2, "two rounds, then the turn ends");
    assert_eq!(frames.iter().filter(|f| f.ty() == "tool_result").count(), 2, "{}", describe(&frames));
}

#[test]
fn a_client_that_goes_away_cancels_the_model_call_and_the_tool_call() {
    let llm = ScriptedLlm::start();
    let dir = tempfile::tempdir().unwrap();
    write_manifest(dir.path(), "tapp", &test_app_manifest("tapp", &[]));
    let gw = start_gateway(dir.path(), chat_config(dir.path(), agent(&llm.base_url())));
    let cancellable = provider_name(&gw, "tapp.cancellable");
    let sid = "e2e-cancel";

    // Going away while the model streams: the gateway drops its model request.
    llm.push(Reply::text(vec!["word "; 40]).chunk_delay(Duration::from_millis(250)));
    let mut stream = start_chat(&gw, &json!({ "message": "talk slowly", "sessionId": sid })).labelled("slow talk");
    stream.expect_event_stream(secs(30));
    stream.until("text", TURN);
    stream.until("text", TURN);
    stream.disconnect();
    let recorded = llm.wait_for_end(0, secs(20)).expect("the model call never ended");
    assert_eq!(recorded.outcome, Outcome::ClientGone, "the model call was not cancelled: {recorded:?}");
    let gone_after = recorded.ended_at.unwrap().duration_since(recorded.received_at);
    assert!(gone_after < secs(8), "cancelled only after {gone_after:?} (the stream takes 10 s)");

    // Going away while a tool runs: the app sees the call cancelled.
    llm.push(Reply::tool_call("call_wait", &cancellable, &json!({ "ms": 60000 })));
    let mut stream = start_chat(&gw, &json!({ "message": "wait a minute", "sessionId": sid })).labelled("long tool");
    stream.expect_event_stream(secs(30));
    stream.until("tool", TURN);
    std::thread::sleep(Duration::from_millis(500));
    stream.disconnect();
    let mut seen = Value::Null;
    let cancelled = wait_until(secs(20), Duration::from_millis(250), || {
        let (_, response) = gw.mcp_request("/apps/mcp/tapp", "tools/call", json!({ "name": "cancellations", "arguments": {} }), json!({}));
        seen = response["result"]["structuredContent"].clone();
        seen["count"].as_u64().unwrap_or(0) >= 1
    });
    assert!(cancelled, "the app never saw the tool call cancelled: {seen}\n--- gateway ---\n{}", gw.logs());

    // A stopped turn keeps what was said and done so far, as the page showed it — the answer as
    // far as it had streamed, a call cut short with a result saying so — marked stopped for the
    // model and the page; the session was released.
    let started = Instant::now();
    llm.push(Reply::text(["still here"]));
    good_turn(&gw, json!({ "message": "hello again", "sessionId": sid }));
    assert!(started.elapsed() < secs(30), "the next turn waited for the cancelled ones");
    let saved = session(&gw, sid);
    let m = saved["messages"].as_array().unwrap();
    assert_eq!(roles(&saved), ["user", "assistant", "user", "assistant", "tool", "assistant", "user", "assistant"], "{saved:#}");
    let said: Vec<&str> = m.iter().filter(|m| m["role"] == "user").filter_map(|m| m["content"].as_str()).collect();
    assert_eq!(said, ["talk slowly", "wait a minute", "hello again"]);
    let partial = m[1]["ui"]["text"].as_str().unwrap();
    assert!(partial.starts_with("word word "), "the answer as far as it had streamed: {:#}", m[1]);
    assert_eq!(m[1]["content"].as_str().unwrap(), format!("{partial}\n\n[Stopped by the user before an answer was complete.]"));
    assert_eq!(m[3]["tool_calls"][0]["id"], "call_wait");
    assert_eq!(m[4]["tool_call_id"], "call_wait", "the call cut short has its result: {:#}", m[4]);
    assert_eq!(m[4]["content"], "Error: the turn was stopped before this call finished.");
    assert_eq!(m[4]["ui"]["name"], "tapp.cancellable");
    assert_eq!(m[5]["ui"], json!({ "stopped": true, "text": "" }), "{:#}", m[5]);
    assert_eq!(m[7]["content"], "still here");
    assert_eq!(saved["turns"], 3, "{saved:#}");
    let fed = llm.requests().last().unwrap().messages();
    assert!(fed.iter().all(|m| m.get("ui").is_none()), "the page's parts stay out of the model's request: {fed:#?}");
    assert_eq!(fed.iter().filter(|m| m["role"] == "tool").count(), 1, "the stopped call's result reaches the model: {fed:#?}");
}

#[test]
fn a_reloaded_session_has_what_the_page_showed() {
    let llm = ScriptedLlm::start();
    let dir = tempfile::tempdir().unwrap();
    write_manifest(dir.path(), "tapp", &test_app_manifest("tapp", &[]));
    let gw = start_gateway(dir.path(), chat_config(dir.path(), agent(&llm.base_url())));
    let (_, health) = gw.get_json("/apps/health");
    assert_eq!(health["agent"], json!({ "configured": true, "model": "scripted", "problem": null }), "{health}");

    // The user opens the app before saying anything (once it runs): the session starts, titled
    // by the app.
    let echo = provider_name(&gw, "tapp.echo");
    let sid = "web-reload-1";
    let (status, body) = gw.post_json(&format!("/apps/sessions/{sid}/opened"), &json!({ "appId": "tapp" }));
    assert_eq!(status, 204, "{body}");
    let saved = session(&gw, sid);
    assert_eq!(saved["messages"], json!([{ "ui": { "opened": { "appId": "tapp", "resourceUri": "ui://test-app/app.html" } } }]));
    assert_eq!((saved["turns"].as_u64(), saved["title"].as_str()), (Some(0), Some("Test tapp")), "{saved}");
    assert_problem("an unknown app", gw.post_json(&format!("/apps/sessions/{sid}/opened"), &json!({ "appId": "nope" })), 404, &["nope"]);
    assert_problem("no appId", gw.post_json(&format!("/apps/sessions/{sid}/opened"), &json!({})), 400, &["appId"]);

    // A message the app posted: the page shows its text and the app, the model reads where it
    // came from; a tool with a dot in its name keeps it.
    assert_ne!(echo, "tapp.echo", "the provider-safe name differs from the gateway's");
    llm.push(Reply::tool_call("call_echo", &echo, &json!({ "text": "hi" })));
    llm.push(Reply::text(["Echoed."]));
    good_turn(&gw, json!({ "sessionId": sid, "appEvents": [{ "app": "tapp", "text": "Count the milk" }] }));
    let fed = llm.request(0).messages();
    assert!(fed.iter().all(|m| m.get("ui").is_none() && m.get("role").is_some()), "the opened note is not the model's: {fed:#?}");
    let user = llm.request(0).last_user_message().unwrap();
    assert!(user["content"].as_str().unwrap().contains("[Sent from the UI of the app 'tapp'] Count the milk"), "{user}");
    let saved = session(&gw, sid);
    let messages = saved["messages"].as_array().unwrap();
    assert_eq!(messages[1]["ui"], json!({ "text": "Count the milk", "appId": "tapp" }), "{saved:#}");
    assert_eq!(messages[2]["tool_calls"][0]["function"]["name"], echo.as_str());
    assert_eq!(messages[3]["ui"], json!({ "name": "tapp.echo" }), "{saved:#}");
    assert_eq!((saved["turns"].as_u64(), saved["title"].as_str()), (Some(1), Some("Test tapp")));

    // A typed message is shown as typed; a user's title replaces the app's.
    llm.push(Reply::text(["Fine."]));
    good_turn(&gw, json!({ "sessionId": sid, "message": "and now?" }));
    assert_eq!(session(&gw, sid)["messages"][5]["ui"], json!({ "text": "and now?" }));
    let client = gw.client();
    let patch = |body: &str| {
        let r = client.patch(gw.url(&format!("/apps/sessions/{sid}"))).header("content-type", "application/json").body(body.to_string()).send().unwrap();
        (r.status().as_u16(), r.json::<Value>().unwrap_or(Value::Null))
    };
    let (status, renamed) = patch(r#"{"title": "  Milk count  "}"#);
    assert_eq!((status, renamed["title"].as_str(), renamed["turns"].as_u64()), (200, Some("Milk count"), Some(2)), "{renamed}");
    assert_eq!(session(&gw, sid)["title"], "Milk count");
    assert_problem("an empty title", patch(r#"{"title": " "}"#), 400, &["title"]);
    assert_problem("a two-line title", patch(r#"{"title": "a\nb"}"#), 400, &["one line"]);
    let r = client.patch(gw.url("/apps/sessions/nobody")).header("content-type", "application/json").body(r#"{"title":"x"}"#).send().unwrap();
    assert_eq!(r.status().as_u16(), 404);
}

// ---------------------------------------------------------------------------------------------
// Must show 5: two replicas, one Redis
// ---------------------------------------------------------------------------------------------

/// The Redis the test script runs (`scripts/test.sh` exports it); `None` outside the script.
fn test_redis_url() -> Option<String> {
    let url = std::env::var("GATEWAY_TEST_REDIS_URL").ok().filter(|u| !u.is_empty());
    if url.is_none() {
        eprintln!("GATEWAY_TEST_REDIS_URL is not set (scripts/test.sh runs a redis-server and sets it): skipping the replica test");
    }
    url
}

/// A replica: its own folder and data, the shared Redis store with a short lease, the shared model.
fn replica(dir: &Path, redis_url: &str, llm: &ScriptedLlm) -> GatewayProcess {
    replica_of(dir, json!({ "Store": "redis", "RedisUrl": redis_url, "LockLeaseSeconds": 3 }), llm)
}

/// A replica with this `Sessions` section.
fn replica_of(dir: &Path, sessions: Value, llm: &ScriptedLlm) -> GatewayProcess {
    let mut config = chat_config(dir, agent(&llm.base_url()));
    config["Sessions"] = sessions;
    start_gateway(dir, config)
}

#[test]
fn two_replicas_share_sessions_and_the_turn_lock_through_redis() {
    let Some(redis_url) = test_redis_url() else { return };
    two_replicas_share(json!({ "Store": "redis", "RedisUrl": redis_url, "LockLeaseSeconds": 3 }));
}

/// The same through a three-master Redis Cluster (`Sessions.RedisCluster`): a session's keys
/// share one slot, the answers forwarded between replicas go through the cluster's pub/sub.
#[test]
fn two_replicas_share_sessions_and_the_turn_lock_through_a_redis_cluster() {
    let cluster = gateway_e2e::own_redis::OwnRedisCluster::start();
    two_replicas_share(json!({ "Store": "redis", "RedisCluster": true, "RedisUrl": cluster.urls(), "LockLeaseSeconds": 3 }));
    // A session's keys carry its id as a hash tag, so they live on one node (one slot).
    let keys = cluster.keys("gateway:chat:*");
    let node_of = |prefix: &str| keys.iter().find(|(_, k)| k.starts_with(prefix)).map(|(port, _)| *port);
    let session = node_of("gateway:chat:session:{e2e-replicas-");
    assert!(session.is_some(), "no tagged session key: {keys:?}");
    assert_eq!(session, node_of("gateway:chat:messages:{e2e-replicas-"), "a session's keys on two nodes: {keys:?}");
}

fn two_replicas_share(sessions: Value) {
    let llm = ScriptedLlm::start();
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // Each replica runs its own copy of a stdio app that asks the user something (elicitation).
    for dir in [dir_a.path(), dir_b.path()] {
        write_manifest(dir, "tapp", &test_app_manifest("tapp", &[]));
    }
    let mut a = replica_of(dir_a.path(), sessions.clone(), &llm);
    let b = replica_of(dir_b.path(), sessions, &llm);
    let sid = format!("e2e-replicas-{}-{}", std::process::id(), gateway_e2e::free_port());

    // Alternate turns between the replicas: each sees the whole history, in order.
    for (i, gw) in [&a, &b, &a, &b].into_iter().enumerate() {
        llm.push(Reply::text([format!("answer {i}")]));
        good_turn(gw, json!({ "message": format!("question {i}"), "sessionId": sid }));
    }
    for gw in [&a, &b] {
        let saved = session(gw, &sid);
        let contents: Vec<&str> = saved["messages"].as_array().unwrap().iter().map(|m| m["content"].as_str().unwrap_or("")).collect();
        let expected: Vec<String> = (0..4).flat_map(|i| [format!("question {i}"), format!("answer {i}")]).collect();
        assert_eq!(contents, expected, "the history as one replica reads it");
        assert_eq!(saved["turns"], 4, "{saved}");
    }
    let last = llm.request(llm.request_count() - 1);
    assert_eq!(last.messages().len(), 1 + 6 + 1, "the last turn's model call carried the whole history: {:#?}", last.messages());

    // Simultaneous turns on the two replicas: the second waits for the first (the Redis lock).
    let gate = Gate::new();
    let before = llm.request_count();
    llm.push(Reply::text(["held on A"]).held(&gate));
    llm.push(Reply::text(["after A, on B"]));
    let mut on_a = start_chat(&a, &json!({ "message": "turn on A", "sessionId": sid })).labelled("turn on A");
    on_a.expect_event_stream(secs(30));
    assert!(llm.wait_for_requests(before + 1, secs(30)), "turn on A never called the model");
    let mut on_b = start_chat(&b, &json!({ "message": "turn on B", "sessionId": sid })).labelled("turn on B");
    let early = on_b.drain_for(secs(2));
    assert!(early.is_empty(), "the turn on B ran while A held the session:\n{}", describe(&early));
    assert_eq!(llm.request_count(), before + 1, "B called the model while A held the session");
    gate.open();
    assert_eq!(shape(&on_a.until_done(TURN)), ["session", "text", "result", "done"]);
    on_b.expect_event_stream(secs(30));
    assert_eq!(shape(&on_b.until_done(TURN)), ["session", "text", "result", "done"]);
    let contents: Vec<String> = llm.request(before + 1).messages().iter().map(|m| m["content"].as_str().unwrap_or("").to_string()).collect();
    assert_eq!(contents[contents.len() - 3..], ["turn on A", "held on A", "turn on B"], "B's turn followed A's");

    // A question of a turn on A, answered through B (a load balancer may send it anywhere).
    let elicit = provider_name(&a, "tapp.elicit");
    llm.push(Reply::tool_call("call_ask", &elicit, &json!({ "message": "pick one" })));
    llm.push(Reply::text(["answered across replicas"]));
    let mut asking = start_chat(&a, &json!({ "message": "ask me", "sessionId": sid })).labelled("asking on A");
    asking.expect_event_stream(secs(30));
    let question = asking.until("input", TURN);
    let input_id = question.data["inputId"].as_str().unwrap().to_string();
    let (status, body) = b.post_json(
        &format!("/apps/chat/{sid}/input"),
        &json!({ "inputId": input_id, "result": { "action": "accept", "content": { "name": "replica", "color": "green", "count": 2 } } }),
    );
    assert_eq!(status, 200, "answering A's question through B: {body}");
    let frames = asking.until_done(TURN);
    let result = frame(&frames, "tool_result");
    assert_eq!(result.data["isError"], false, "{}", result.data);
    assert!(result.data["text"].as_str().unwrap().contains("green"), "{}", result.data);
    let (status, body) = b.post_json(&format!("/apps/chat/{sid}/input"), &json!({ "inputId": input_id, "result": { "action": "accept" } }));
    assert_eq!(status, 404, "an answered question is gone on every replica: {body}");

    // A replica killed while it holds the lock blocks the session only until the lease ends.
    let gate = Gate::new();
    let before = llm.request_count();
    llm.push(Reply::text(["never finished"]).held(&gate));
    llm.push(Reply::text(["after the lease"]));
    let mut doomed = start_chat(&a, &json!({ "message": "killed mid-turn", "sessionId": sid })).labelled("doomed turn");
    doomed.expect_event_stream(secs(30));
    assert!(llm.wait_for_requests(before + 1, secs(30)), "the doomed turn never called the model");
    a.signal(libc::SIGKILL);
    assert!(a.wait_exit(secs(15)).is_some(), "replica A survived SIGKILL");
    let frames = good_turn(&b, json!({ "message": "after the crash", "sessionId": sid }));
    assert_eq!(frame(&frames, "result").data["text"], "after the lease");
    let saved = session(&b, &sid);
    let contents: Vec<&str> = saved["messages"].as_array().unwrap().iter().map(|m| m["content"].as_str().unwrap_or("")).collect();
    assert!(!contents.contains(&"killed mid-turn"), "the killed turn was saved: {contents:?}");
    assert_eq!(contents[contents.len() - 2..], ["after the crash", "after the lease"]);
    gate.open();
}

/// One initialize-era MCP request (`session`: `""` for none) → status, `Mcp-Session-Id`, and the
/// JSON-RPC message with `id` (read from JSON or SSE).
fn legacy_mcp(gw: &GatewayProcess, path: &str, session: &str, body: Value) -> (u16, Option<String>, Value) {
    let mut request = gw
        .client()
        .post(gw.url(path))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    if !session.is_empty() {
        request = request.header("mcp-session-id", session).header("mcp-protocol-version", "2025-11-25");
    }
    let response = request.body(body.to_string()).send().expect("POST");
    let status = response.status().as_u16();
    let session_id = response.headers().get("mcp-session-id").map(|v| v.to_str().unwrap().to_string());
    let text = response.text().unwrap_or_default();
    let message = serde_json::from_str(&text).ok().or_else(|| {
        text.lines().filter_map(|l| l.strip_prefix("data:")).filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok()).find(|m| m["id"] == body["id"])
    });
    (status, session_id, message.unwrap_or(Value::Null))
}

/// R35: an initialize-era client's MCP session (the browser's, on `/apps/mcp`; any client's on
/// `/mcp`) made on one replica is served by the other: the shared store restores it.
#[test]
fn initialize_era_mcp_sessions_are_served_by_either_replica() {
    let Some(redis_url) = test_redis_url() else { return };
    let llm = ScriptedLlm::start();
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    for dir in [dir_a.path(), dir_b.path()] {
        write_manifest(dir, "tapp", &test_app_manifest("tapp", &[]));
    }
    let a = replica(dir_a.path(), &redis_url, &llm);
    let b = replica(dir_b.path(), &redis_url, &llm);
    for gw in [&a, &b] {
        provider_name(gw, "tapp.echo");
    }
    for (path, tool) in [("/apps/mcp/tapp", "echo"), ("/mcp", "tapp.echo")] {
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}}});
        let (status, session, answer) = legacy_mcp(&a, path, "", init);
        assert_eq!(status, 200, "{path} initialize on A: {answer}");
        let session = session.unwrap_or_else(|| panic!("{path}: no Mcp-Session-Id"));
        let (status, _, _) = legacy_mcp(&a, path, &session, json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        assert_eq!(status, 202, "{path} initialized on A");
        // Its record runs out a day after its last use: make that a minute from now.
        let record = format!("gateway:chat:mcp:{session}");
        assert_eq!(own_redis::cli(&redis_url, &["EXPIRE", &record, "60"]), "1", "{path}: no record {record}");
        // The next request of that session reaches the other replica, and renews the record.
        let call = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": tool, "arguments": {"text": "via B"}}});
        let (status, _, answer) = legacy_mcp(&b, path, &session, call);
        assert_eq!(status, 200, "{path}: B did not serve A's session: {answer}\n--- B ---\n{}", b.logs());
        assert_eq!(answer["result"]["content"][0]["text"], "echo: via B", "{path}: {answer}");
        let ttl: u64 = own_redis::cli(&redis_url, &["TTL", &record]).parse().unwrap();
        assert!(ttl > 86_000, "{path}: a session in use keeps its record a day from now, not {ttl} s");
        // Ending it on B ends it everywhere: A does not restore it any more.
        let ended = b.client().delete(b.url(path)).header("mcp-session-id", &session).header("mcp-protocol-version", "2025-11-25").send().unwrap();
        assert_eq!(ended.status().as_u16(), 200, "{path} DELETE on B");
        let (status, _, _) = legacy_mcp(&b, path, &session, json!({"jsonrpc": "2.0", "id": 6, "method": "tools/list"}));
        assert_eq!(status, 404, "{path}: the ended session is still served by B");
        // Nor A, where it began and is still live: a call (the short way's) and any other request.
        let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": tool, "arguments": {"text": "via A"}}});
        let (status, _, answer) = legacy_mcp(&a, path, &session, call);
        assert_eq!(status, 404, "{path}: the ended session's call is still served by A: {answer}");
        let (status, _, answer) = legacy_mcp(&a, path, &session, json!({"jsonrpc": "2.0", "id": 8, "method": "tools/list"}));
        assert_eq!(status, 404, "{path}: the ended session is still served by A: {answer}");
    }
}

/// Issue 42: a replica that cannot reach its Redis does not start, and says which Redis (the URL
/// without its password) and why.
#[test]
fn a_replica_whose_redis_does_not_answer_refuses_to_start_naming_it_without_the_password() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut config = chat_config(dir.path(), agent("http://127.0.0.1:9/v1"));
    config["Sessions"] = json!({ "Store": "redis", "RedisUrl": format!("redis://:s3cret-pw@127.0.0.1:{port}/") });
    let refused = GatewayProcess::try_start_with(GatewayOptions {
        config,
        config_dir: Some(dir.path().to_path_buf()),
        env: vec![(API_KEY_ENV.to_string(), API_KEY.to_string())],
        ..Default::default()
    });
    let output = match refused {
        Ok(gw) => panic!("the gateway started without its Redis\n{}", gw.logs()),
        Err(output) => output,
    };
    assert!(output.contains("the chat session store is not reachable at startup"), "{output}");
    assert!(output.contains(&format!("redis://:***@127.0.0.1:{port}/")), "names the URL: {output}");
    assert!(!output.contains("s3cret-pw"), "never the password: {output}");
}

/// Issue 42: Redis restarted under a running replica. While it is away `/healthz`, the metrics
/// and the log say so; when it is back the replica serves again without restarting. Its keys live under `Sessions.RedisKeyPrefix`.
#[test]
fn a_redis_restart_is_reported_while_it_lasts_and_the_replica_recovers() {
    let port = free_port();
    let redis = OwnRedis::start(port);
    let llm = ScriptedLlm::start();
    let dir = tempfile::tempdir().unwrap();
    let prefix = format!("e2e-{}-{port}:", std::process::id());
    let mut config = chat_config(dir.path(), agent(&llm.base_url()));
    config["Sessions"] = json!({ "Store": "redis", "RedisUrl": format!("redis://127.0.0.1:{port}/"), "RedisKeyPrefix": prefix, "LockLeaseSeconds": 3 });
    let mut gw = start_gateway(dir.path(), config);
    let (status, health) = gw.get_json("/healthz");
    assert_eq!((status, &health["sessions"]), (200, &json!({ "store": "redis", "up": true })), "{health}");

    llm.push(Reply::text(["before the outage"]));
    good_turn(&gw, json!({ "message": "first", "sessionId": "outage" }));
    let keys = OwnRedis::keys(port, "*");
    assert!(!keys.is_empty() && keys.iter().all(|k| k.starts_with(&prefix)), "every key under the prefix {prefix}: {keys:?}");

    drop(redis);
    let reported = wait_until(secs(15), Duration::from_millis(200), || {
        let (status, health) = gw.get_json("/healthz");
        status == 200 && health["sessions"]["up"] == false
    });
    assert!(reported, "/healthz never reported the outage: {}\n{}", gw.get_json("/healthz").1, gw.logs());
    let (_, health) = gw.get_json("/healthz");
    assert!(health["sessions"]["error"].as_str().unwrap_or_default().contains(&format!("redis://127.0.0.1:{port}/")), "{health}");
    let metrics = gw.get("/metrics").1;
    assert!(metrics.contains("gateway_session_store_up{store=\"redis\"} 0"), "{metrics}");
    assert!(gw.wait_for_log("the chat session store does not answer", secs(10)), "{}", gw.logs());

    let _redis = OwnRedis::start(port);
    let back = wait_until(secs(30), Duration::from_millis(200), || gw.get_json("/healthz").1["sessions"]["up"] == true);
    assert!(back, "/healthz never saw Redis back: {}\n{}", gw.get_json("/healthz").1, gw.logs());
    assert!(gw.get("/metrics").1.contains("gateway_session_store_up{store=\"redis\"} 1"));
    assert!(gw.wait_for_log("answers again", secs(10)), "{}", gw.logs());
    llm.push(Reply::text(["after the outage"]));
    good_turn(&gw, json!({ "message": "second", "sessionId": "after" }));
    assert_eq!(session(&gw, "after")["turns"], 1);
    assert!(gw.is_running(), "the replica never restarted");
}

/// A CA and a server certificate for 127.0.0.1, made with `openssl` into `dir`: (CA PEM path,
/// server certificate, server key).
fn tls_certificates(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let run = |args: &[&str]| {
        let out = std::process::Command::new("openssl").args(args).current_dir(dir).output().expect("openssl (scripts/test.sh installs it)");
        assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    run(&["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "2", "-subj", "/CN=e2e-test-ca"]);
    run(&["req", "-newkey", "rsa:2048", "-nodes", "-keyout", "srv.key", "-out", "srv.csr", "-subj", "/CN=127.0.0.1"]);
    std::fs::write(dir.join("ext"), "subjectAltName=IP:127.0.0.1,DNS:localhost").unwrap();
    run(&["x509", "-req", "-in", "srv.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-out", "srv.crt", "-days", "2", "-extfile", "ext"]);
    (dir.join("ca.crt"), dir.join("srv.crt"), dir.join("srv.key"))
}

/// Issue 42: Redis over TLS (`rediss://`), verified against `Sessions.RedisCaFile`: a replica
/// serves its sessions through it; without the CA (the system's roots do not know it) the
/// replica refuses to start, naming the URL.
#[test]
fn a_replica_reaches_redis_over_tls_verified_against_its_ca() {
    let certs = tempfile::tempdir().unwrap();
    let (ca, cert, key) = tls_certificates(certs.path());
    let port = free_port();
    let mut server = std::process::Command::new("redis-server")
        .args(["--port", "0", "--tls-port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--tls-auth-clients", "no"])
        .arg("--tls-cert-file").arg(&cert)
        .arg("--tls-key-file").arg(&key)
        .arg("--tls-ca-cert-file").arg(&ca)
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("redis-server");
    assert!(wait_until(secs(10), Duration::from_millis(50), || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()), "no TLS redis-server");
    let url = format!("rediss://127.0.0.1:{port}/");

    let llm = ScriptedLlm::start();
    let dir = tempfile::tempdir().unwrap();
    let mut config = chat_config(dir.path(), agent(&llm.base_url()));
    config["Sessions"] = json!({ "Store": "redis", "RedisUrl": url, "RedisCaFile": ca, "LockLeaseSeconds": 3 });
    let gw = start_gateway(dir.path(), config.clone());
    assert_eq!(gw.get_json("/healthz").1["sessions"], json!({ "store": "redis", "up": true }));
    llm.push(Reply::text(["over TLS"]));
    good_turn(&gw, json!({ "message": "hello", "sessionId": "tls" }));
    assert_eq!(session(&gw, "tls")["turns"], 1);
    drop(gw);

    let other = tempfile::tempdir().unwrap();
    config["Sessions"]["RedisCaFile"] = Value::Null;
    let refused = GatewayProcess::try_start_with(GatewayOptions {
        config,
        config_dir: Some(other.path().to_path_buf()),
        env: vec![(API_KEY_ENV.to_string(), API_KEY.to_string())],
        ..Default::default()
    });
    let _ = server.kill();
    let _ = server.wait();
    let output = match refused {
        Ok(gw) => panic!("the gateway trusted a certificate no root it knows signed\n{}", gw.logs()),
        Err(output) => output,
    };
    assert!(output.contains("the chat session store is not reachable at startup") && output.contains(&url), "{output}");
}
