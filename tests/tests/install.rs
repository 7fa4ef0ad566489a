//! Installing apps in one command (issue 43, SPEC R53), with real installs from the npm and PyPI
//! registries: `gateway-host apps add|update|remove|list --installed` beside a gateway already
//! serving, `POST /admin/mcpapps/install` with an MCP Registry `server.json`, and the refusals
//! that change nothing. The host page's "Add app" form is tested in
//! `tests/js/host-page-install.test.mjs`.
//!
//! Installs are few and shared: one gateway per test, each package installed once.
//! Run: `cargo test --release -p gateway-e2e --test install`.

mod support;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gateway_e2e::{describe_output, run_gateway_with_timeout, wait_until, GatewayOptions, GatewayProcess};
use serde_json::{json, Value};
use support::*;

const BUDGET: &str = "@modelcontextprotocol/server-budget-allocator";
const TOKEN: &str = "install-test-token-0123456789";
/// npm and pip fetch from the registries: generous, as CI's network may be slow.
const INSTALL_TIMEOUT: Duration = Duration::from_secs(300);

/// A gateway serving from a folder of its own, with an app of its own discovered (`local`, for
/// the clash) and the admin token set.
fn serving_gateway() -> (tempfile::TempDir, GatewayProcess) {
    let dir = tempfile::tempdir().unwrap();
    write_manifest(&dir.path().join("apps"), "local", &stdio_app("local", &[]));
    let config = json!({
        "Gateway": { "AlwaysRequireAuth": false, "AuthTokenEnv": "INSTALL_TEST_TOKEN" },
        "McpApps": { "Enabled": true, "DiscoveryPaths": ["./apps"], "Allow": ["*"] }
    });
    let gw = GatewayProcess::start_with(GatewayOptions {
        config,
        config_dir: Some(dir.path().to_path_buf()),
        env: vec![("INSTALL_TEST_TOKEN".into(), TOKEN.into())],
        ..Default::default()
    });
    assert!(wait_until(Duration::from_secs(30), Duration::from_millis(100), || state(&gw, "local") == "running"), "{}", gw.logs());
    (dir, gw)
}

/// `gateway-host --config DIR/appsettings.json ARGS`.
fn cli(dir: &Path, args: &[&str]) -> Output {
    cli_with(dir, args, &[])
}

fn cli_with(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let config = dir.join("appsettings.json");
    let mut all = vec!["--config", config.to_str().unwrap()];
    all.extend_from_slice(args);
    run_gateway_with_timeout(&all, env, INSTALL_TIMEOUT)
}

fn app(gw: &GatewayProcess, id: &str) -> Value {
    let (_, health) = gw.get_json("/apps/health");
    health["apps"].as_array().and_then(|a| a.iter().find(|a| a["id"] == id)).cloned().unwrap_or(Value::Null)
}

fn state(gw: &GatewayProcess, id: &str) -> String {
    app(gw, id)["state"].as_str().unwrap_or_default().to_string()
}

/// A model-side tool call through `/mcp` → the result's text, or the error.
fn call(gw: &GatewayProcess, tool: &str, arguments: Value) -> Result<String, String> {
    let (status, answer) = gw.mcp_request("/mcp", "tools/call", json!({ "name": tool, "arguments": arguments }), json!({}));
    if status != 200 || answer.get("error").is_some() || answer["result"]["isError"] == true {
        return Err(format!("{status} {answer}"));
    }
    Ok(answer["result"].to_string())
}

fn apps_folder(dir: &Path) -> PathBuf {
    dir.join(".gateway-apps")
}

/// The folders of the apps folder, sorted, with what is in each.
fn listing(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = walk(&apps_folder(dir), 2);
    out.sort();
    out
}

fn walk(dir: &Path, depth: usize) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        out.push(e.path().display().to_string());
        if depth > 1 && e.path().is_dir() {
            out.extend(walk(&e.path(), depth - 1));
        }
    }
    out
}

/// Must show 1 and 3: `apps add` of the budget allocator (npm) and mcp-server-time (PyPI) beside
/// a serving gateway — each runs, its tools answer through `/mcp`; `apps update` to another
/// version keeps the app serving while the new one is fetched, and the new one then runs;
/// `apps remove` stops the app and deletes its folder.
#[test]
fn npm_and_pypi_apps_install_update_and_remove_beside_a_serving_gateway() {
    let (dir, gw) = serving_gateway();
    let url = gw.base_url().to_string();

    // npm, pinned to an older version so that the update below has a newer one to go to.
    let out = cli(dir.path(), &["apps", "add", &format!("npm:{BUDGET}@2.0.1"), "--url", &url]);
    assert!(out.status.success(), "{}", describe_output(&out));
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("stdout is the manifest ({e}): {}", describe_output(&out)));
    assert_eq!(printed["id"], "budget-allocator");
    assert_eq!(printed["version"], "2.0.1", "pinned to what was installed");
    assert_eq!(printed["command"], "node");
    assert_eq!(printed["arguments"][1], "--stdio", "how it speaks stdio, from its package");
    assert_eq!(printed["metadata"]["install"]["source"], format!("npm:{BUDGET}@2.0.1"));
    let manifest_path = apps_folder(dir.path()).join("budget-allocator/openclaw.mcpapp.json");
    let on_disk: Value = serde_json::from_str(&std::fs::read_to_string(&manifest_path).unwrap()).unwrap();
    assert_eq!(on_disk, printed, "what is printed is what was written");
    let budget = app(&gw, "budget-allocator");
    assert_eq!(budget["state"], "running", "{budget}\n{}", gw.logs());
    assert_eq!(budget["confinement"]["confined"], true, "an installed app runs confined: {budget}");
    assert_eq!(budget["hasUi"], true, "{budget}");
    let data = call(&gw, "budget-allocator.get-budget-data", json!({})).unwrap();
    assert!(data.contains("Marketing"), "{data}");

    // PyPI, into a venv of its own.
    let out = cli(dir.path(), &["apps", "add", "pypi:mcp-server-time", "--url", &url]);
    assert!(out.status.success(), "{}", describe_output(&out));
    let time_manifest: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(time_manifest["id"], "time");
    assert_eq!(time_manifest["command"], "v1/.venv/bin/mcp-server-time");
    assert!(apps_folder(dir.path()).join("time/v1/.venv/pyvenv.cfg").is_file());
    assert_eq!(state(&gw, "time"), "running", "{}", gw.logs());
    let now = call(&gw, "time.get_current_time", json!({ "timezone": "Europe/Paris" })).unwrap();
    assert!(now.contains("Europe/Paris"), "{now}");

    let listed = cli(dir.path(), &["apps", "list", "--installed", "--json"]);
    assert!(listed.status.success(), "{}", describe_output(&listed));
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    let ids: Vec<&str> = listed["apps"].as_array().unwrap().iter().filter_map(|a| a["id"].as_str()).collect();
    assert_eq!(ids, ["budget-allocator", "time"], "{listed}");

    // Update the budget allocator to 2.0.3 while calling it: it answers while the new version
    // is fetched (the old one serves), and the new one runs at the end.
    let stop = Arc::new(AtomicBool::new(false));
    let seen: Arc<Mutex<Vec<(String, String, bool)>>> = Arc::default();
    let watcher = {
        let (stop, seen, base) = (stop.clone(), seen.clone(), gw.base_url().to_string());
        std::thread::spawn(move || {
            let client = reqwest::blocking::Client::builder().no_proxy().timeout(Duration::from_secs(20)).build().unwrap();
            while !stop.load(Ordering::SeqCst) {
                let health: Value = client.get(format!("{base}/apps/health")).send().and_then(|r| r.json()).unwrap_or(Value::Null);
                let a = health["apps"].as_array().and_then(|a| a.iter().find(|a| a["id"] == "budget-allocator")).cloned().unwrap_or(Value::Null);
                let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": { "name": "budget-allocator.get-budget-data", "arguments": {},
                    "_meta": { "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {} } } });
                let answered = client
                    .post(format!("{base}/mcp"))
                    .header("content-type", "application/json")
                    .header("accept", "application/json, text/event-stream")
                    .header("mcp-protocol-version", "2026-07-28")
                    .header("mcp-method", "tools/call")
                    .header("mcp-name", "budget-allocator.get-budget-data")
                    .body(body.to_string())
                    .send()
                    .and_then(|r| r.text())
                    .is_ok_and(|t| t.contains("Marketing") && !t.contains("\"isError\":true"));
                let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
                seen.lock().unwrap().push((s(&a["version"]), s(&a["state"]), answered));
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };
    let out = cli(dir.path(), &["apps", "update", "budget-allocator", "--version", "2.0.3", "--url", &url]);
    stop.store(true, Ordering::SeqCst);
    watcher.join().unwrap();
    assert!(out.status.success(), "{}", describe_output(&out));
    let seen = seen.lock().unwrap().clone();
    let old_serving = seen.iter().filter(|(v, s, ok)| v == "2.0.1" && s == "running" && *ok).count();
    assert!(old_serving >= 3, "the old version answered while the new one was installed: {seen:?}");
    let first_new = seen.iter().position(|(v, _, _)| v == "2.0.3");
    if let Some(first_new) = first_new {
        assert!(seen[..first_new].iter().all(|(v, _, _)| v == "2.0.1" || v.is_empty()), "{seen:?}");
    }
    let updated = app(&gw, "budget-allocator");
    assert_eq!((updated["version"].as_str(), updated["state"].as_str()), (Some("2.0.3"), Some("running")), "{updated}");
    assert!(call(&gw, "budget-allocator.get-budget-data", json!({})).unwrap().contains("Marketing"));
    let folder = apps_folder(dir.path()).join("budget-allocator");
    assert!(folder.join("v2").is_dir() && !folder.join("v1").exists(), "the old version goes once the new one runs: {:?}", walk(&folder, 1));

    // Remove: the app stops and its folder goes; the other app is untouched.
    let out = cli(dir.path(), &["apps", "remove", "time", "--url", &url]);
    assert!(out.status.success(), "{}", describe_output(&out));
    assert!(!apps_folder(dir.path()).join("time").exists());
    assert!(app(&gw, "time").is_null(), "{}", gw.get_json("/apps/health").1);
    assert!(call(&gw, "time.get_current_time", json!({ "timezone": "UTC" })).is_err(), "its tools are gone");
    assert_eq!(state(&gw, "budget-allocator"), "running");
}

/// Must show 2: a `server.json` of the MCP Registry naming the npm package installs the same way,
/// here through `POST /admin/mcpapps/install` of the running gateway (token always): its package
/// arguments and declared variables reach the manifest; a clashing id is refused with 409.
#[test]
fn a_registry_server_json_installs_through_the_admin_route() {
    let (dir, gw) = serving_gateway();
    let server_json = dir.path().join("server.json");
    std::fs::write(
        &server_json,
        json!({
            "$schema": "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json",
            "name": "io.github.modelcontextprotocol/budget-allocator",
            "title": "Budget Allocator",
            "description": "Allocate a budget across categories",
            "version": "2.0.3",
            "packages": [
                { "registryType": "npm", "identifier": BUDGET, "version": "2.0.3", "transport": { "type": "streamable-http", "url": "http://localhost:3001/mcp" } },
                {
                    "registryType": "npm", "identifier": BUDGET, "version": "2.0.3", "runtimeHint": "npx",
                    "transport": { "type": "stdio" },
                    "runtimeArguments": [ { "type": "positional", "value": "-y" } ],
                    "packageArguments": [ { "type": "positional", "value": "--stdio" } ],
                    "environmentVariables": [
                        { "name": "BUDGET_CURRENCY", "description": "Currency shown", "default": "EUR" },
                        { "name": "BUDGET_API_KEY", "description": "Not used by the app", "isRequired": true, "isSecret": true }
                    ]
                }
            ]
        })
        .to_string(),
    )
    .unwrap();
    let admin = |body: Value, token: Option<&str>| {
        let mut request = gw.client().post(gw.url("/admin/mcpapps/install")).header("content-type", "application/json").body(body.to_string());
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.timeout(INSTALL_TIMEOUT).send().expect("POST /admin/mcpapps/install");
        let status = response.status().as_u16();
        (status, serde_json::from_str::<Value>(&response.text().unwrap()).unwrap_or(Value::Null))
    };
    let (status, body) = admin(json!({ "source": "server.json" }), None);
    assert_eq!(status, 401, "the token, always: {body}");
    let (status, body) = admin(json!({ "source": "server.json", "id": "local" }), Some(TOKEN));
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("id_clash")), "{body}");
    assert_eq!(listing(dir.path()), Vec::<String>::new(), "a refusal changes nothing");

    let (status, body) = admin(json!({ "source": "server.json", "prefix": "budget." }), Some(TOKEN));
    assert_eq!(status, 201, "{body}\n{}", gw.logs());
    let manifest = &body["manifest"];
    assert_eq!(manifest["id"], "budget-allocator", "the id comes from the registry name: {manifest}");
    assert_eq!(manifest["name"], "Budget Allocator");
    assert_eq!(manifest["toolNamePrefix"], "budget.");
    assert_eq!(manifest["version"], "2.0.3");
    assert_eq!(manifest["arguments"], json!([format!("v1/node_modules/{BUDGET}/dist/index.js"), "--stdio"]), "npx's -y is not node's: {manifest}");
    assert_eq!(manifest["environment"], json!({ "BUDGET_API_KEY": "", "BUDGET_CURRENCY": "EUR" }), "declared variables as placeholders: {manifest}");
    assert_eq!(manifest["metadata"]["install"]["mcpName"], "io.github.modelcontextprotocol/budget-allocator");
    assert!(body["notes"].to_string().contains("BUDGET_API_KEY"), "{body}");
    assert_eq!(body["app"]["state"], "running", "{body}");
    assert!(call(&gw, "budget.get-budget-data", json!({})).unwrap().contains("Marketing"));
    let written: Value = serde_json::from_str(&std::fs::read_to_string(body["manifestPath"].as_str().unwrap()).unwrap()).unwrap();
    assert_eq!(&written, manifest);

    // The same source again: the id is taken now.
    let (status, body) = admin(json!({ "source": server_json }), Some(TOKEN));
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("id_clash")), "{body}");
}

/// Must show 4: an unknown package, a package without an MCP server, a clashing id, an
/// unreachable registry and a failing install each give one clear error (exit 1) and change
/// nothing.
#[test]
fn refusals_give_one_clear_error_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    write_manifest(&dir.path().join("apps"), "local", &stdio_app("local", &[]));
    std::fs::write(
        dir.path().join("appsettings.json"),
        json!({ "McpApps": { "Enabled": true, "DiscoveryPaths": ["./apps"], "Allow": ["*"] } }).to_string(),
    )
    .unwrap();
    std::fs::create_dir(apps_folder(dir.path())).unwrap();
    let error_line = |out: &Output| -> String {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("gateway-host: ")).collect();
        assert_eq!(errors.len(), 1, "one error: {}", describe_output(out));
        assert!(!out.status.success(), "{}", describe_output(out));
        errors[0].to_string()
    };
    // (arguments, environment, what the one error line says)
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);
    let cases: [Case; 5] = [
        (&["apps", "add", "npm:@modelcontextprotocol/no-such-server-issue-43"], &[], "unknown package"),
        (&["apps", "add", "pypi:no-such-mcp-server-issue-43"], &[], "unknown package"),
        (&["apps", "add", "npm:is-number@7.0.0"], &[], "no MCP server entry found in npm:is-number"),
        (&["apps", "add", "npm:@modelcontextprotocol/server-budget-allocator", "--id", "local"], &[], "an app with the id 'local' exists already"),
        (
            &["apps", "add", "npm:@modelcontextprotocol/server-budget-allocator"],
            &[("npm_config_registry", "http://127.0.0.1:9/"), ("npm_config_fetch_retries", "0")],
            "registry is unreachable",
        ),
    ];
    for (args, env, expected) in cases {
        let out = cli_with(dir.path(), args, env);
        let line = error_line(&out);
        assert!(line.contains(expected), "{args:?}: {line}");
        assert!(out.stdout.is_empty(), "nothing printed as a result: {}", describe_output(&out));
        assert_eq!(listing(dir.path()), Vec::<String>::new(), "{args:?} left something behind");
    }
    // A failing install: its program's last lines. A local package whose install script fails
    // (it runs only with --allow-scripts; without, the scripts are off and the package is
    // refused for what it is: no MCP server).
    let broken = dir.path().join("broken");
    std::fs::create_dir(&broken).unwrap();
    std::fs::write(
        broken.join("package.json"),
        json!({ "name": "broken-mcp", "version": "1.0.0", "bin": "x.js", "dependencies": {},
                "scripts": { "postinstall": "echo boom-issue-43 >&2; exit 7" } })
        .to_string(),
    )
    .unwrap();
    let out = cli(dir.path(), &["apps", "add", broken.to_str().unwrap(), "--allow-scripts"]);
    assert!(!out.status.success(), "{}", describe_output(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("failed (exit status: 7); its last lines:") && stderr.contains("boom-issue-43"), "{}", describe_output(&out));
    assert_eq!(listing(dir.path()), Vec::<String>::new());
    let out = cli(dir.path(), &["apps", "add", broken.to_str().unwrap()]);
    assert!(error_line(&out).contains("no MCP server entry found in npm:broken-mcp"), "scripts off: {}", describe_output(&out));
    assert_eq!(listing(dir.path()), Vec::<String>::new());

    // On a terminal (a pseudo-terminal of `script`): a spinner while npm runs, then the step
    // stays with the seconds it took; the error is still one line.
    let command = format!(
        "{} --config {} apps add npm:is-number@7.0.0",
        gateway_e2e::gateway_bin().display(),
        dir.path().join("appsettings.json").display()
    );
    let mut on_tty = std::process::Command::new("script");
    on_tty.args(["-qec", &command, "/dev/null"]).env("RUST_LOG", "warn");
    let out = gateway_e2e::run_with_timeout(on_tty, INSTALL_TIMEOUT);
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains("\r\x1b[2K⠋ fetching and installing npm:is-number@7.0.0"), "a spinner: {shown:?}");
    assert!(shown.contains("==> fetching and installing npm:is-number@7.0.0 with npm (install scripts off) ("), "{shown:?}");
    assert!(shown.contains("gateway-host: no MCP server entry found in npm:is-number"), "{shown:?}");
    assert_eq!(listing(dir.path()), Vec::<String>::new());

    // `--json`: the same, as one object.
    let out = cli(dir.path(), &["apps", "add", "npm:is-number@7.0.0", "--json"]);
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", describe_output(&out)));
    assert_eq!((answer["ok"].as_bool(), answer["error"]["code"].as_str()), (Some(false), Some("no_server_entry")), "{answer}");
    // Update and remove only touch what `apps add` installed.
    let out = cli(dir.path(), &["apps", "remove", "local"]);
    assert!(error_line(&out).contains("'local' was not installed with `apps add`"));
    assert!(dir.path().join("apps/local/openclaw.mcpapp.json").is_file());
}

/// A minimal MCP server over stdio in plain Node (no dependencies, so a local package of it
/// installs without the registry): `initialize`, `tools/list` with one tool `hello` answering
/// `VERSION`, everything else -32601. With `FAIL` it exits at once instead.
fn tiny_server(version: &str, fail: bool) -> String {
    let body = if fail {
        "process.stderr.write('this version cannot start\\n'); process.exit(3);".to_string()
    } else {
        format!(
            r#"const rl = require('readline').createInterface({{ input: process.stdin }});
const send = (m) => process.stdout.write(JSON.stringify(m) + '\n');
rl.on('line', (line) => {{
  const m = JSON.parse(line);
  if (m.id === undefined) return;
  if (m.method === 'initialize') return send({{ jsonrpc: '2.0', id: m.id, result: {{ protocolVersion: m.params.protocolVersion, capabilities: {{ tools: {{}} }}, serverInfo: {{ name: 'tiny', version: '{version}' }} }} }});
  if (m.method === 'tools/list') return send({{ jsonrpc: '2.0', id: m.id, result: {{ tools: [{{ name: 'hello', inputSchema: {{ type: 'object' }} }}] }} }});
  if (m.method === 'tools/call') return send({{ jsonrpc: '2.0', id: m.id, result: {{ content: [{{ type: 'text', text: 'hello from {version}' }}] }} }});
  if (m.method === 'ping') return send({{ jsonrpc: '2.0', id: m.id, result: {{}} }});
  send({{ jsonrpc: '2.0', id: m.id, error: {{ code: -32601, message: 'not here' }} }});
}});"#
        )
    };
    format!("#!/usr/bin/env node\n{body}\n")
}

fn write_tiny_package(folder: &Path, version: &str, fail: bool) {
    std::fs::create_dir_all(folder).unwrap();
    let package = json!({ "name": "tiny-mcp-server", "version": version, "bin": { "tiny-mcp-server": "server.js" },
                          "mcpName": "io.github.example/tiny" });
    std::fs::write(folder.join("package.json"), package.to_string()).unwrap();
    std::fs::write(folder.join("server.js"), tiny_server(version, fail)).unwrap();
}

/// `apps add` of the tiny package 1.0.0 (a folder `tiny` in `dir`) beside the gateway at `url`,
/// which must succeed: the package's folder, and what the command wrote.
fn add_tiny(dir: &Path, url: &str) -> (PathBuf, Output) {
    let package = dir.join("tiny");
    write_tiny_package(&package, "1.0.0", false);
    let out = cli(dir, &["apps", "add", package.to_str().unwrap(), "--url", url]);
    assert!(out.status.success(), "{}", describe_output(&out));
    (package, out)
}

/// "Roll back otherwise" (must show 3): an update whose new version does not start puts the
/// previous manifest back; the old version runs again, the new one's folder is gone. The package
/// is a local folder (no registry needed): version 1.0.0 runs, 2.0.0 exits at start.
#[test]
fn an_update_whose_new_version_fails_is_rolled_back() {
    let (dir, gw) = serving_gateway();
    let url = gw.base_url().to_string();
    let (package, _) = add_tiny(dir.path(), &url);
    let tiny = app(&gw, "tiny");
    assert_eq!((tiny["state"].as_str(), tiny["version"].as_str()), (Some("running"), Some("1.0.0")), "{tiny}");
    assert!(call(&gw, "tiny.hello", json!({})).unwrap().contains("hello from 1.0.0"));
    let manifest_before = std::fs::read_to_string(apps_folder(dir.path()).join("tiny/openclaw.mcpapp.json")).unwrap();

    write_tiny_package(&package, "2.0.0", true);
    let out = cli(dir.path(), &["apps", "update", "tiny", "--url", &url]);
    assert!(!out.status.success(), "{}", describe_output(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("the new version of 'tiny' did not start") && stderr.contains("the previous version was put back"), "{stderr}");
    assert_eq!(std::fs::read_to_string(apps_folder(dir.path()).join("tiny/openclaw.mcpapp.json")).unwrap(), manifest_before);
    let folder = apps_folder(dir.path()).join("tiny");
    assert!(folder.join("v1").is_dir() && !folder.join("v2").exists(), "{:?}", walk(&folder, 1));
    assert!(
        wait_until(Duration::from_secs(60), Duration::from_millis(200), || {
            let a = app(&gw, "tiny");
            a["state"] == "running" && a["version"] == "1.0.0"
        }),
        "the previous version runs again: {}\n{}",
        app(&gw, "tiny"),
        gw.logs()
    );
    assert!(call(&gw, "tiny.hello", json!({})).unwrap().contains("hello from 1.0.0"));
}

/// `apps add --url` run with another configuration than the gateway's installs into a folder
/// that gateway does not discover: it says so once the gateway has had ample time to list the
/// app (10 s), naming the folder, instead of waiting its whole 90 s for "not there yet".
#[test]
fn an_install_the_gateway_does_not_discover_is_named() {
    let (_dir, gw) = serving_gateway();
    let url = gw.base_url().to_string();
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::write(elsewhere.path().join("appsettings.json"), json!({ "McpApps": { "DiscoveryPaths": ["./apps"] } }).to_string()).unwrap();
    let package = elsewhere.path().join("tiny");
    write_tiny_package(&package, "1.0.0", false);
    let started = std::time::Instant::now();
    let out = cli(elsewhere.path(), &["apps", "add", package.to_str().unwrap(), "--url", &url]);
    let took = started.elapsed();
    assert!(!out.status.success(), "{}", describe_output(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let folder = apps_folder(elsewhere.path());
    assert!(
        stderr.contains("it lists no app 'tiny'") && stderr.contains(&format!("does not discover {}", folder.display())),
        "{stderr}"
    );
    assert!(took < Duration::from_secs(60), "it waited {took:?}");
    // The install itself stands (its manifest may be what the user wants elsewhere).
    assert!(folder.join("tiny/openclaw.mcpapp.json").is_file(), "{:?}", walk(&folder, 2));
    assert_eq!(app(&gw, "tiny"), Value::Null);
}

/// An update keeps what the user added to the manifest: the confinement they widened
/// (`permissions`, which the gateway then applies to the new version) and a request timeout;
/// the install said where to widen it. An argument they added is replaced, and named.
#[test]
fn an_update_keeps_the_permissions_the_user_added() {
    let (dir, gw) = serving_gateway();
    let url = gw.base_url().to_string();
    let (package, out) = add_tiny(dir.path(), &url);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("it runs confined: no network") && stderr.contains("\"permissions\""), "{stderr}");

    let path = apps_folder(dir.path()).join("tiny/openclaw.mcpapp.json");
    let mut manifest: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    manifest["permissions"] = json!({ "network": "loopback" });
    manifest["requestTimeoutSeconds"] = json!(77);
    manifest["arguments"].as_array_mut().unwrap().push(json!("--verbose"));
    std::fs::write(&path, serde_json::to_string_pretty(&manifest).unwrap()).unwrap();
    assert!(
        wait_until(Duration::from_secs(60), Duration::from_millis(200), || app(&gw, "tiny")["confinement"]["network"]
            .as_str()
            .is_some_and(|n| n.starts_with("loopback"))),
        "the edited manifest runs: {}",
        app(&gw, "tiny")
    );

    write_tiny_package(&package, "2.0.0", false);
    let out = cli(dir.path(), &["apps", "update", "tiny", "--url", &url]);
    assert!(out.status.success(), "{}", describe_output(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("kept from the previous manifest: permissions, requestTimeoutSeconds"), "{stderr}");
    // An argument added by hand is not kept (the package says how it starts), but it is named.
    assert!(stderr.contains("written anew from the package, not kept: arguments (was [") && stderr.contains("--verbose"), "{stderr}");
    let updated: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!((&updated["permissions"], &updated["requestTimeoutSeconds"]), (&json!({ "network": "loopback" }), &json!(77)), "{updated}");
    let tiny = app(&gw, "tiny");
    assert_eq!(tiny["version"], "2.0.0", "{tiny}");
    assert!(tiny["confinement"]["network"].as_str().unwrap().starts_with("loopback"), "{tiny}");
    assert!(call(&gw, "tiny.hello", json!({})).unwrap().contains("hello from 2.0.0"));
}
