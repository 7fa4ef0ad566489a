//! Apps confined to what they declare (SPEC R48, issue 41): the real gateway, the real module and
//! test-app's `escape` tool, which tries each escape with real system calls and reports what the
//! kernel answered. The same attempts with `Sandbox.Mode` off succeed, so each refusal is the
//! confinement's doing (the tests run as a user the files' modes would not stop).

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use gateway_e2e::{run_gateway, wait_until, GatewayOptions, GatewayProcess};
use serde_json::{json, Value};
use support::*;

/// A secret file in the user's home, removed when dropped.
struct HomeSecret(PathBuf);

impl HomeSecret {
    fn new() -> HomeSecret {
        let home = PathBuf::from(std::env::var("HOME").expect("HOME"));
        let path = home.join(format!(".mcpapp-confinement-secret-{}", std::process::id()));
        std::fs::write(&path, "the user's secret").unwrap();
        HomeSecret(path)
    }
}

impl Drop for HomeSecret {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

struct Setup {
    _root: tempfile::TempDir,
    cfg: PathBuf,
    apps: PathBuf,
    declared: PathBuf,
    pid_file: PathBuf,
}

/// A configuration folder with the escaper app (declaring one folder and one port) and another
/// app whose folder holds a secret.
fn setup(declared_port: u16, sandbox: Value) -> Setup {
    let root = tempfile::tempdir().unwrap();
    let cfg = root.path().join("cfg");
    let apps = cfg.join("apps");
    let declared = root.path().join("declared");
    std::fs::create_dir_all(&declared).unwrap();
    std::fs::write(declared.join("note.txt"), "a declared file").unwrap();
    let pid_file = root.path().join("pids/escaper.pid");
    let mut escaper = stdio_app("escaper", &["--escape-tool", "--pid-file", pid_file.to_str().unwrap()]);
    escaper["permissions"]["filesystem"]["read"] = json!([declared]);
    escaper["permissions"]["network"] = json!([format!("127.0.0.1:{declared_port}")]);
    escaper["permissions"]["limits"] = json!({ "memoryMb": 256, "processes": 64 });
    escaper["requestTimeoutSeconds"] = json!(60);
    write_manifest(&apps, "escaper", &escaper);
    let other = write_manifest(&apps, "other", &stdio_app("other", &[]));
    std::fs::write(other.join("secret.txt"), "another app's secret").unwrap();
    let config = json!({
        "McpApps": { "Enabled": true, "DiscoveryPaths": ["./apps"], "Allow": ["*"] },
        "Sandbox": sandbox,
    });
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(cfg.join("appsettings.json"), serde_json::to_string_pretty(&config).unwrap()).unwrap();
    Setup { _root: root, cfg, apps, declared, pid_file }
}

fn start(s: &Setup) -> GatewayProcess {
    let gw = GatewayProcess::start_with(GatewayOptions { config_dir: Some(s.cfg.clone()), config: Value::Null, ..Default::default() });
    assert!(
        wait_until(Duration::from_secs(30), Duration::from_millis(100), || app_of(&gw, "escaper")["state"] == "running"
            && app_of(&gw, "other")["state"] == "running"),
        "{}",
        gw.logs()
    );
    gw
}

fn app_of(gw: &GatewayProcess, id: &str) -> Value {
    let (_, health) = gw.get_json("/apps/health");
    health["apps"].as_array().into_iter().flatten().find(|a| a["id"] == id).cloned().unwrap_or(Value::Null)
}

fn escape(gw: &GatewayProcess, arguments: Value) -> Value {
    let (status, answer) = gw.mcp_request("/apps/mcp/escaper", "tools/call", json!({ "name": "escape", "arguments": arguments }), json!({}));
    assert_eq!(status, 200, "{answer}");
    answer["result"]["structuredContent"].clone()
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

fn refused(v: &Value) -> bool {
    v.as_str().is_some_and(|t| t.starts_with("refused: "))
}

fn ok(v: &Value) -> bool {
    v.as_str().is_some_and(|t| t.starts_with("ok "))
}

#[test]
fn each_escape_is_refused_and_what_the_app_declares_works() {
    let declared_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let declared_port = declared_listener.local_addr().unwrap().port();
    let undeclared_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let undeclared = format!("127.0.0.1:{}", undeclared_listener.local_addr().unwrap().port());
    let secret = HomeSecret::new();
    let setup = setup(declared_port, json!({}));
    let gw = start(&setup);
    let data = setup.cfg.join(".gateway-data");
    assert!(
        wait_until(Duration::from_secs(10), Duration::from_millis(50), || data.join("sessions.db").exists()),
        "the gateway made its sessions.db"
    );
    let gateway_port = gw.base_url().rsplit(':').next().unwrap().to_string();
    let own_data = data.join("apps/escaper");
    let reads = [
        s(&setup.cfg.join("appsettings.json")),
        s(&data.join("sessions.db")),
        s(&data),
        s(&setup.apps.join("other/secret.txt")),
        s(&setup.apps.join("other")),
        s(&secret.0),
        s(&gateway_e2e::module_lib()),
    ];
    let writes = [
        s(&setup.cfg.join("escaped.txt")),
        s(&setup.apps.join("other/escaped.txt")),
        s(&setup.apps.join("escaper/escaped.txt")),
        format!("/tmp/mcpapp-escaped-{}", std::process::id()),
        s(&secret.0.with_extension("escaped")),
    ];
    let connects = [undeclared.clone(), format!("127.0.0.1:{gateway_port}")];
    let report = escape(
        &gw,
        json!({
            "read": reads.iter().chain([s(&setup.declared.join("note.txt")), s(&setup.apps.join("escaper/openclaw.mcpapp.json"))].iter()).collect::<Vec<_>>(),
            "write": writes.iter().chain([s(&own_data.join("mine.txt"))].iter()).collect::<Vec<_>>(),
            "connect": connects.iter().chain([format!("127.0.0.1:{declared_port}")].iter()).collect::<Vec<_>>(),
            "fork": 1000,
            "allocateMb": 512,
            "ptraceParent": true,
        }),
    );
    eprintln!("escape report: {report:#}");
    for p in &reads {
        assert!(refused(&report["read"][p]), "read {p}: {}", report["read"][p]);
    }
    for p in &writes {
        assert!(refused(&report["write"][p]), "write {p}: {}", report["write"][p]);
        assert!(!Path::new(p).exists(), "{p} was written");
    }
    for c in &connects {
        assert!(refused(&report["connect"][c]), "connect {c}: {}", report["connect"][c]);
    }
    let fork = &report["fork"];
    assert!(fork["started"].as_u64().unwrap() < 64, "{fork}");
    assert!(refused(&fork["refused"]), "{fork}");
    assert!(refused(&report["allocate"]), "{}", report["allocate"]);
    assert!(refused(&report["ptrace"]), "{}", report["ptrace"]);
    // What it declares works: its folder, the declared folder, its data folder, the declared port.
    assert!(ok(&report["read"][s(&setup.declared.join("note.txt"))]), "{report}");
    assert!(ok(&report["read"][s(&setup.apps.join("escaper/openclaw.mcpapp.json"))]), "{report}");
    assert!(ok(&report["write"][s(&own_data.join("mine.txt"))]), "{report}");
    assert!(ok(&report["connect"][format!("127.0.0.1:{declared_port}")]), "{report}");
    // The kernel holds the app to it: no new privileges, a seccomp filter.
    let pid = read_pid(&setup.pid_file, Duration::from_secs(5));
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    assert!(status.lines().any(|l| l.split_whitespace().eq(["NoNewPrivs:", "1"])), "{status}");
    assert!(status.lines().any(|l| l.split_whitespace().eq(["Seccomp:", "2"])), "{status}");
    // Still running after all that, and /apps/health shows its confinement.
    let app = app_of(&gw, "escaper");
    assert_eq!(app["state"], "running", "{app}");
    let c = &app["confinement"];
    assert_eq!(c["mode"], "enforce", "{c}");
    assert_eq!(c["filesystem"]["write"][0], s(&std::fs::canonicalize(&own_data).unwrap()), "{c}");
    assert_eq!(c["limits"]["memoryMb"], 256, "{c}");
    drop(gw);

    // The same attempts unconfined succeed: the refusals above were the confinement's.
    let setup = self::setup(declared_port, json!({ "Mode": "off" }));
    let gw = start(&setup);
    let report = escape(&gw, json!({ "read": [s(&setup.cfg.join("appsettings.json")), s(&setup.apps.join("other/secret.txt")), s(&secret.0)], "connect": [undeclared] }));
    for (kind, attempts) in report.as_object().unwrap() {
        for (what, outcome) in attempts.as_object().unwrap() {
            assert!(ok(outcome), "unconfined {kind} {what}: {outcome}");
        }
    }
    assert_eq!(app_of(&gw, "escaper")["confinement"]["mode"], "off");
}

#[test]
fn enforce_without_landlock_refuses_apps_and_warn_starts_them_with_one_warning() {
    let setup = setup(9, json!({ "Mode": "enforce", "SimulateNoLandlock": true }));
    let gw = GatewayProcess::start_with(GatewayOptions { config_dir: Some(setup.cfg.clone()), config: Value::Null, ..Default::default() });
    assert!(
        wait_until(Duration::from_secs(20), Duration::from_millis(100), || app_of(&gw, "escaper")["state"] == "failed"),
        "{}",
        gw.logs()
    );
    let app = app_of(&gw, "escaper");
    let last_error = app["lastError"].as_str().unwrap_or_default();
    assert!(last_error.contains("Sandbox.Mode is enforce but this kernel offers no Landlock"), "{app}");
    assert!(last_error.contains("set Sandbox.Mode to warn"), "{app}");
    assert!(app["confinement"]["refused"].as_str().is_some_and(|r| r.contains("no Landlock")), "{app}");
    assert!(!setup.pid_file.exists() || std::fs::read_to_string(&setup.pid_file).unwrap().is_empty(), "the app never ran");
    drop(gw);

    let setup = self::setup(9, json!({ "Mode": "warn", "SimulateNoLandlock": true }));
    let gw = start(&setup);
    let warnings: Vec<String> =
        gw.log_lines().into_iter().filter(|l| l.contains("starts without filesystem confinement") && l.contains("'escaper'")).collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    let c = &app_of(&gw, "escaper")["confinement"];
    assert_eq!(c["mode"], "warn", "{c}");
    assert_eq!(c["landlockAbi"], 0, "{c}");
    // Without Landlock the rest still holds: ptrace and the process limit.
    let report = escape(&gw, json!({ "ptraceParent": true, "fork": 1000 }));
    assert!(refused(&report["ptrace"]), "{report}");
    assert!(report["fork"]["started"].as_u64().unwrap() < 64, "{report}");
}

#[test]
fn crossing_the_cpu_limit_ends_the_app_with_an_error_naming_it() {
    let setup = setup(9, json!({}));
    let mut manifest: Value = serde_json::from_str(&std::fs::read_to_string(setup.apps.join("escaper/openclaw.mcpapp.json")).unwrap()).unwrap();
    manifest["permissions"]["limits"] = json!({ "cpuSeconds": 1 });
    write_manifest(&setup.apps, "escaper", &manifest);
    let gw = start(&setup);
    let (_, answer) = gw.mcp_request("/apps/mcp/escaper", "tools/call", json!({ "name": "escape", "arguments": { "spinSeconds": 10 } }), json!({}));
    assert!(answer.get("error").is_some() || answer["result"]["isError"] == true, "{answer}");
    assert!(
        wait_until(Duration::from_secs(20), Duration::from_millis(50), || {
            app_of(&gw, "escaper")["lastError"].as_str().is_some_and(|e| e.contains("its CPU time limit (1 s) was reached"))
        }),
        "{}\n{}",
        app_of(&gw, "escaper"),
        gw.logs()
    );
}

#[test]
fn apps_and_validate_show_each_apps_confinement() {
    let setup = setup(4242, json!({}));
    let config = s(&setup.cfg.join("appsettings.json"));
    let out = run_gateway(&["apps", "--config", &config], &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.lines().next().unwrap_or_default().contains("CONFINEMENT"), "{text}");
    let row = text.lines().find(|l| l.starts_with("escaper ")).unwrap_or_else(|| panic!("{text}"));
    assert!(row.contains("enforce L") && row.contains(" net:tcp:4242 mem:256M procs:64"), "{row}");
    let row = text.lines().find(|l| l.starts_with("other ")).unwrap_or_else(|| panic!("{text}"));
    assert!(row.contains("enforce L") && row.contains(" net:none mem:2048M procs:256"), "{row}");
    let out = run_gateway(&["apps", "--json", "--config", &config], &[]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    let escaper = report["apps"].as_array().unwrap().iter().find(|a| a["key"] == "escaper").unwrap();
    let c = &escaper["confinement"];
    assert!(c["filesystem"]["read"].as_array().unwrap().contains(&json!(s(&setup.declared))), "{c}");
    assert_eq!(c["network"], "TCP connect to ports [4242] only (Landlock filters ports, not hosts)", "{c}");
    assert_eq!(c["filesystem"]["write"][0], s(&setup.cfg.join(".gateway-data/apps/escaper")), "{c}");

    // validate: a declared path that would open the gateway's configuration is not granted.
    let mut manifest: Value = serde_json::from_str(&std::fs::read_to_string(setup.apps.join("escaper/openclaw.mcpapp.json")).unwrap()).unwrap();
    manifest["permissions"]["filesystem"]["read"] = json!(["../..", "~"]);
    let dir = write_manifest(&setup.apps, "escaper", &manifest);
    let out = run_gateway(&["validate", "--config", &config, &s(&dir)], &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("warning: permissions.filesystem: ") && text.contains("would open the gateway's"), "{text}");
    assert!(text.contains("  confinement: enforce (Landlock ABI"), "{text}");
    assert!(text.contains("not granted: "), "{text}");
}

/// The official apps run and answer under the default profile (they declare nothing):
/// server-everything and the budget allocator from npm, mcp-server-time from PyPI (in a venv:
/// its program's prefix is granted), and GroceryInventory from this repository (its manifest
/// declares its program in the build's `target` folder).
#[test]
fn official_apps_and_grocery_inventory_answer_under_the_default_profile() {
    let repo = gateway_e2e::repo_root();
    let modules = repo.join("tests/js/node_modules/@modelcontextprotocol");
    let everything = modules.join("server-everything/dist/index.js");
    let budget = modules.join("server-budget-allocator/dist/index.js");
    let time = repo.join("tests/py/.venv-time/bin/mcp-server-time");
    for f in [&everything, &budget] {
        assert!(f.exists(), "run `npm ci` in tests/js first ({} missing)", f.display());
    }
    assert!(time.exists(), "run scripts/test.sh first, which installs mcp-server-time in tests/py/.venv-time ({} missing)", time.display());
    let root = tempfile::tempdir().unwrap();
    let cfg = root.path().join("cfg");
    let apps = cfg.join("apps");
    let node = |id: &str, entry: &Path, args: &[&str]| {
        let mut arguments = vec![s(entry)];
        arguments.extend(args.iter().map(|a| a.to_string()));
        json!({ "id": id, "transport": "stdio", "command": "node", "arguments": arguments, "startupTimeoutSeconds": 30, "toolNamePrefix": format!("{id}.") })
    };
    write_manifest(&apps, "everything", &node("everything", &everything, &["stdio"]));
    write_manifest(&apps, "budget", &node("budget", &budget, &["--stdio"]));
    write_manifest(
        &apps,
        "time",
        &json!({ "id": "time", "transport": "stdio", "command": time, "arguments": ["--local-timezone", "UTC"], "startupTimeoutSeconds": 30, "toolNamePrefix": "time." }),
    );
    let port = gateway_e2e::free_port();
    let config = json!({
        "McpApps": {
            "Enabled": true, "DiscoveryPaths": ["./apps", repo.join("mcpapps")], "Allow": ["*"],
            "Entries": { "grocery-inventory": {
                "Url": format!("http://127.0.0.1:{port}/mcp"), "Arguments": ["--listen", format!("127.0.0.1:{port}")],
            } }
        },
    });
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(cfg.join("appsettings.json"), config.to_string()).unwrap();
    let gw = GatewayProcess::start_with(GatewayOptions { config_dir: Some(cfg.clone()), config: Value::Null, ..Default::default() });
    let ids = ["everything", "budget", "time", "grocery-inventory"];
    assert!(
        wait_until(Duration::from_secs(60), Duration::from_millis(100), || ids.iter().all(|id| app_of(&gw, id)["state"] == "running")),
        "{:#}\n{}",
        gw.get_json("/apps/health").1,
        gw.logs()
    );
    for id in ids {
        let c = &app_of(&gw, id)["confinement"];
        assert_eq!(c["mode"], "enforce", "{id}: {c}");
        assert_eq!(c["confined"], true, "{id}: {c}");
    }
    let call = |id: &str, tool: &str, arguments: Value| {
        let (status, answer) = gw.mcp_request(&format!("/apps/mcp/{id}"), "tools/call", json!({ "name": tool, "arguments": arguments }), json!({}));
        assert_eq!(status, 200, "{id}: {answer}");
        assert!(answer["result"]["isError"] != true && answer.get("error").is_none(), "{id} {tool}: {answer}");
        answer["result"].to_string()
    };
    assert!(call("everything", "echo", json!({ "message": "confined hello" })).contains("confined hello"));
    assert!(call("budget", "get-budget-data", json!({})).contains("categor"));
    assert!(call("time", "get_current_time", json!({ "timezone": "Europe/Paris" })).contains("Europe/Paris"));
    assert!(call("grocery-inventory", "get_stores", json!({})).contains("Downtown Market"));
}

/// `network: "loopback"` (a stdio app): a namespace of its own whose loopback is up — it reaches
/// nothing of the host's, not even a port listening on the host's loopback.
#[test]
fn a_loopback_app_reaches_only_its_own_loopback() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let host_port = listener.local_addr().unwrap().port();
    let setup = setup(host_port, json!({}));
    let mut manifest: Value = serde_json::from_str(&std::fs::read_to_string(setup.apps.join("escaper/openclaw.mcpapp.json")).unwrap()).unwrap();
    manifest["permissions"]["network"] = json!("loopback");
    write_manifest(&setup.apps, "escaper", &manifest);
    let gw = start(&setup);
    let host = format!("127.0.0.1:{host_port}");
    let report = escape(&gw, json!({ "connect": [host] }));
    assert!(refused(&report["connect"][&host]), "{report}");
    let c = &app_of(&gw, "escaper")["confinement"];
    assert!(c["network"].as_str().is_some_and(|n| n.starts_with("loopback (a network namespace of its own")), "{c}");
}
