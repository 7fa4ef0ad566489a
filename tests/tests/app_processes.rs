//! App processes through the real gateway (issue 9, SPEC R44, R17, R18): they live exactly as
//! long as the gateway wants them (idle, through reloads, with the gateway as PID 1 of a PID
//! namespace), die with it (SIGKILL included, grandchildren too), get a clean environment; an
//! app whose optional list fails still runs; a launched http app that stops answering is noticed
//! by its health check and restarted; a slow http start is quiet.

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use gateway_e2e::{wait_until, GatewayOptions, GatewayProcess};
use serde_json::{json, Value};
use support::*;

fn config_for(dir: &Path) -> Value {
    // Like the default configuration (appsettings.default.json), with the test's apps folder.
    json!({
        "Gateway": { "AlwaysRequireAuth": false },
        "OpenClaw": {
            "McpApps": {
                "Enabled": true,
                "DiscoveryPaths": [dir.join("apps")],
                "AllowlistSemantics": "legacy",
                "Allow": ["*"],
                "Deny": ["bystander"]
            }
        }
    })
}

fn health_app(gw: &GatewayProcess, id: &str) -> Value {
    let (status, health) = gw.get_json("/apps/health");
    assert_eq!(status, 200, "{health}");
    health["apps"].as_array().and_then(|a| a.iter().find(|x| x["id"] == id).cloned()).unwrap_or(Value::Null)
}

fn wait_state(gw: &GatewayProcess, id: &str, state: &str, timeout: Duration) -> bool {
    wait_until(timeout, Duration::from_millis(100), || health_app(gw, id)["state"] == state)
}

fn count_logs(gw: &GatewayProcess, needle: &str) -> usize {
    gw.log_lines().iter().filter(|l| l.contains(needle)).count()
}

/// `tools/call` through `/apps/mcp/{app}` → the JSON-RPC response.
fn call_tool(gw: &GatewayProcess, app: &str, tool: &str, args: Value) -> Value {
    gw.mcp_request(&format!("/apps/mcp/{app}"), "tools/call", json!({"name": tool, "arguments": args}), json!({})).1
}

/// (a) Must-show 1: idle past every thread pool's keep-alive with no request meanwhile, then 20
/// reloads that do not touch the apps: same PIDs, no restart, no error.
#[test]
fn apps_stay_up_while_the_gateway_idles_and_reloads() {
    let dir = tempfile::tempdir().unwrap();
    let apps = dir.path().join("apps");
    let stdio_pid = dir.path().join("stdio.pid");
    let http_pid = dir.path().join("http.pid");
    write_manifest(&apps, "idle", &stdio_app("idle", &["--pid-file", &stdio_pid.display().to_string()]));
    write_manifest(&apps, "web", &http_app("web", &["--pid-file", &http_pid.display().to_string()]));
    let bystander = |rev: usize| {
        let mut m = stdio_app("bystander", &[]);
        m["description"] = json!(format!("revision {rev}"));
        m
    };
    write_manifest(&apps, "bystander", &bystander(0));
    let gw = GatewayProcess::start(config_for(dir.path()));
    assert!(wait_state(&gw, "idle", "running", Duration::from_secs(30)), "{}", gw.logs());
    assert!(wait_state(&gw, "web", "running", Duration::from_secs(30)), "{}", gw.logs());
    let pids = [read_pid(&stdio_pid, Duration::from_secs(5)), read_pid(&http_pid, Duration::from_secs(5))];

    // No request to the gateway at all while idle (an early request was seen to hide the defect).
    std::thread::sleep(Duration::from_secs(65));

    let check = |when: &str| {
        for (id, pid) in [("idle", pids[0]), ("web", pids[1])] {
            assert!(process_alive(pid), "{when}: app {id} (pid {pid}) is gone\n{}", gw.logs());
            let app = health_app(&gw, id);
            assert_eq!(app["state"], "running", "{when}: {app}");
            assert_eq!(app["lastError"], Value::Null, "{when}: {app}");
            assert_eq!(count_logs(&gw, &format!("Connecting to McpApp '{id}'")), 1, "{when}: {id} restarted\n{}", gw.logs());
        }
        assert_eq!(std::fs::read_to_string(&stdio_pid).unwrap().trim(), pids[0].to_string(), "{when}");
        assert_eq!(std::fs::read_to_string(&http_pid).unwrap().trim(), pids[1].to_string(), "{when}");
        assert_eq!(count_logs(&gw, " lost: "), 0, "{when}\n{}", gw.logs());
    };
    check("after 65 s idle");

    // 20 reloads (the manifest watcher) that change only a denied bystander app.
    let reloads_before = count_logs(&gw, "Reload after manifest change");
    for rev in 1..=20 {
        write_manifest(&apps, "bystander", &bystander(rev));
        assert!(
            wait_until(Duration::from_secs(15), Duration::from_millis(50), || {
                count_logs(&gw, "Reload after manifest change") >= reloads_before + rev
            }),
            "reload {rev} did not happen\n{}",
            gw.logs()
        );
    }
    assert_eq!(health_app(&gw, "bystander")["state"], "disabled");
    check("after 20 reloads");
}

/// `unshare --pid --fork --mount-proc` works here (root, or user namespaces).
fn unshare_usable() -> Result<(), String> {
    match std::process::Command::new("unshare").args(["--pid", "--fork", "--mount-proc", "true"]).output() {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => Err(format!("unshare failed: {}", String::from_utf8_lossy(&out.stderr).trim())),
        Err(e) => Err(format!("unshare is not available: {e}")),
    }
}

/// The pids of `pid`'s children (forked by any of its threads).
fn children(pid: u32) -> Vec<u32> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).map(|d| d.flatten().collect::<Vec<_>>()).unwrap_or_default();
    tasks
        .iter()
        .flat_map(|task| std::fs::read_to_string(task.path().join("children")).unwrap_or_default().split_whitespace().filter_map(|p| p.parse().ok()).collect::<Vec<u32>>())
        .collect()
}

/// `NSpid` of a process: its pid in each PID namespace, outermost first.
fn ns_pids(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))
        .map(|l| l.split_whitespace().filter_map(|p| p.parse().ok()).collect())
        .unwrap_or_default()
}

/// (b) Must-show 1: the gateway as PID 1 of a PID namespace starts its apps and keeps them.
#[test]
fn apps_stay_up_when_the_gateway_is_pid_1() {
    if let Err(why) = unshare_usable() {
        eprintln!("SKIPPED apps_stay_up_when_the_gateway_is_pid_1: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("app.pid");
    write_manifest(&dir.path().join("apps"), "one", &stdio_app("one", &["--pid-file", &pid_file.display().to_string()]));
    let mut gw = GatewayProcess::start_with(GatewayOptions {
        config: config_for(dir.path()),
        // --kill-child: SIGKILL of unshare (it ignores SIGTERM) takes the namespace down.
        wrapper: ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child"].map(String::from).to_vec(),
        ..Default::default()
    });
    // The gateway started as PID 1 of the namespace; its init (gateway-host/src/init.rs) stays
    // PID 1 and runs the gateway as its child.
    let init = children(gw.pid()).first().copied().expect("unshare's child, the gateway's init");
    assert_eq!(ns_pids(init).last(), Some(&1), "the gateway's init is PID 1 of its namespace");
    let gateway = children(init).first().copied().expect("the init's child, the gateway");
    assert!(wait_state(&gw, "one", "running", Duration::from_secs(30)), "{}", gw.logs());
    let inner_pid = read_pid(&pid_file, Duration::from_secs(5));
    let app = children(gateway)
        .into_iter()
        .find(|p| ns_pids(*p).last() == Some(&(inner_pid as u32)))
        .unwrap_or_else(|| panic!("the app (pid {inner_pid} in the namespace) is not a child of the gateway"));
    std::thread::sleep(Duration::from_secs(5));
    assert!(process_alive(app as i32), "the app died\n{}", gw.logs());
    assert_eq!(std::fs::read_to_string(&pid_file).unwrap().trim(), inner_pid.to_string(), "the app was restarted");
    let one = health_app(&gw, "one");
    assert_eq!(one["state"], "running", "{one}");
    assert_eq!(one["lastError"], Value::Null, "{one}");
    assert_eq!(count_logs(&gw, "Connecting to McpApp 'one'"), 1, "{}", gw.logs());
    gw.kill_hard();
    assert!(wait_until(Duration::from_secs(10), Duration::from_millis(50), || !process_alive(app as i32)));
}

/// (c) Must-show 1: SIGKILL of the gateway leaves no app process — neither the apps nor what
/// they started (the guardian kills the app's whole process group).
#[test]
fn sigkill_of_the_gateway_leaves_no_app_process_or_grandchild() {
    let dir = tempfile::tempdir().unwrap();
    let apps = dir.path().join("apps");
    let path = |name: &str| dir.path().join(name).display().to_string();
    write_manifest(&apps, "s", &stdio_app("s", &["--pid-file", &path("s.pid"), "--grandchild-pid-file", &path("s.child")]));
    write_manifest(&apps, "h", &http_app("h", &["--pid-file", &path("h.pid"), "--grandchild-pid-file", &path("h.child")]));
    let mut gw = GatewayProcess::start(config_for(dir.path()));
    assert!(wait_state(&gw, "s", "running", Duration::from_secs(30)), "{}", gw.logs());
    assert!(wait_state(&gw, "h", "running", Duration::from_secs(30)), "{}", gw.logs());
    let pids: Vec<(String, i32)> = ["s.pid", "s.child", "h.pid", "h.child"]
        .iter()
        .map(|f| (f.to_string(), read_pid(&dir.path().join(f), Duration::from_secs(10))))
        .collect();
    for (what, pid) in &pids {
        assert!(process_alive(*pid), "{what} ({pid}) is not running");
    }
    gw.kill_hard();
    for (what, pid) in &pids {
        assert!(
            wait_until(Duration::from_secs(10), Duration::from_millis(50), || !process_alive(*pid)),
            "{what} (pid {pid}) outlived the SIGKILLed gateway"
        );
    }
}

/// Must-show 2: an app's environment is the allowlist plus its manifest's `environment`.
#[test]
fn apps_get_the_allowlisted_environment_and_their_manifest_variables_only() {
    let dir = tempfile::tempdir().unwrap();
    let vars = ["MY_SECRET", "E2E_CUSTOM_TOKEN", "OPENAI_API_KEY", "GATEWAY_AUTH_TOKEN", "APP_MODE", "APP_REGION", "PATH", "LC_ALL"];
    let mut args = vec![];
    for v in vars {
        args.extend(["--env-echo", v]);
    }
    let mut manifest = stdio_app("env", &args);
    manifest["environment"] = json!({ "APP_MODE": "e2e", "APP_REGION": "eu" });
    write_manifest(&dir.path().join("apps"), "env", &manifest);
    let mut config = config_for(dir.path());
    config["Gateway"]["AuthTokenEnv"] = json!("E2E_CUSTOM_TOKEN");
    config["Agent"] = json!({ "ApiKeyEnv": "OPENAI_API_KEY" });
    let gw = GatewayProcess::start_with(GatewayOptions {
        config,
        env: [
            ("MY_SECRET", "my-secret-value"),
            ("E2E_CUSTOM_TOKEN", "custom-token-value"),
            ("OPENAI_API_KEY", "sk-test-key"),
            ("GATEWAY_AUTH_TOKEN", "default-token-value"),
            ("LC_ALL", "C.UTF-8"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .to_vec(),
        ..Default::default()
    });
    assert!(wait_state(&gw, "env", "running", Duration::from_secs(30)), "{}", gw.logs());
    let response = call_tool(&gw, "env", "env", json!({}));
    let env = &response["result"]["structuredContent"];
    assert!(env.is_object(), "{response}");
    for secret in ["MY_SECRET", "E2E_CUSTOM_TOKEN", "OPENAI_API_KEY", "GATEWAY_AUTH_TOKEN"] {
        assert_eq!(env[secret], Value::Null, "{secret} reached the app: {env}");
    }
    assert_eq!(env["APP_MODE"], "e2e", "{env}");
    assert_eq!(env["APP_REGION"], "eu", "{env}");
    assert!(env["PATH"].as_str().is_some_and(|p| !p.is_empty()), "{env}");
    assert_eq!(env["LC_ALL"], "C.UTF-8", "{env}");
}

/// Must-show 8: a failing `prompts/list` is a warning, not a failed app.
#[test]
fn an_app_whose_prompts_list_fails_runs_with_its_tools() {
    let dir = tempfile::tempdir().unwrap();
    write_manifest(&dir.path().join("apps"), "np", &stdio_app("np", &["--fail-list", "prompts"]));
    let gw = GatewayProcess::start(config_for(dir.path()));
    assert!(wait_state(&gw, "np", "running", Duration::from_secs(30)), "{}", gw.logs());
    let app = health_app(&gw, "np");
    assert!(app["tools"].as_u64().unwrap() >= 10, "{app}");
    assert_eq!(app["prompts"], 0, "{app}");
    assert!(app["resources"].as_u64().unwrap() >= 1, "{app}");
    let warning = gw.find_log("prompts/list failed").unwrap_or_else(|| panic!("no warning\n{}", gw.logs()));
    assert!(warning.contains("WARN") && warning.contains("'np'"), "{warning}");
    let response = call_tool(&gw, "np", "echo", json!({"text": "hi"}));
    assert_eq!(response["result"]["structuredContent"]["text"], "hi", "{response}");
}

/// Must-show 8: a launched http app that stops answering (SIGSTOP) is noticed by its health
/// check within its configured interval (two failed checks) and restarted.
#[test]
fn a_launched_http_app_that_stops_answering_is_restarted() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("h.pid");
    let mut manifest = http_app("h", &["--pid-file", &pid_file.display().to_string()]);
    manifest["healthCheckIntervalSeconds"] = json!(1);
    write_manifest(&dir.path().join("apps"), "h", &manifest);
    let gw = GatewayProcess::start(config_for(dir.path()));
    assert!(wait_state(&gw, "h", "running", Duration::from_secs(30)), "{}", gw.logs());
    let first = read_pid(&pid_file, Duration::from_secs(5));
    // SAFETY: kill(2) on the app process this test started through the gateway.
    unsafe { libc::kill(first, libc::SIGSTOP) };
    let stopped = Instant::now();
    assert!(
        wait_until(Duration::from_secs(10), Duration::from_millis(50), || count_logs(&gw, "McpApp 'h' lost:") > 0),
        "the hung app was not noticed\n{}",
        gw.logs()
    );
    let noticed = stopped.elapsed();
    // Two failed checks, 1 s apart and each allowed 1 s: 2–4 s; nothing else would notice a
    // stopped app this side of 30 s, so the bound leaves a loaded machine a wide margin.
    assert!(noticed < Duration::from_secs(15), "noticed only after {noticed:?}");
    assert!(gw.find_log("McpApp 'h' lost:").unwrap().contains("stopped answering"), "{}", gw.logs());
    assert_restarted(&gw, "h", &pid_file, first);
    assert!(wait_until(Duration::from_secs(10), Duration::from_millis(50), || !process_alive(first)), "the hung process was not killed");
    let response = call_tool(&gw, "h", "echo", json!({"text": "back"}));
    assert_eq!(response["result"]["structuredContent"]["text"], "back", "{response}");
    eprintln!("hung app noticed after {noticed:?}");
}

/// Waits until app `id` runs again in a process other than `first` (its `--pid-file` is
/// `pid_file`).
fn assert_restarted(gw: &GatewayProcess, id: &str, pid_file: &std::path::Path, first: i32) {
    assert!(
        wait_until(Duration::from_secs(30), Duration::from_millis(100), || {
            std::fs::read_to_string(pid_file).ok().and_then(|p| p.trim().parse::<i32>().ok()).is_some_and(|p| p != first)
                && health_app(gw, id)["state"] == "running"
        }),
        "{id} was not restarted\n{}",
        gw.logs()
    );
}

/// A launched http app killed outright is reported lost (naming the signal) and restarted, and
/// nothing else is logged as an error: no "fail to delete session" for the session the dead app
/// took with it.
#[test]
fn a_killed_http_app_is_restarted_without_an_error_line() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("k.pid");
    write_manifest(&dir.path().join("apps"), "k", &http_app("k", &["--pid-file", &pid_file.display().to_string()]));
    let gw = GatewayProcess::start(config_for(dir.path()));
    assert!(wait_state(&gw, "k", "running", Duration::from_secs(30)), "{}", gw.logs());
    let first = read_pid(&pid_file, Duration::from_secs(5));
    // SAFETY: kill(2) on the app process this test started through the gateway.
    unsafe { libc::kill(first, libc::SIGKILL) };
    assert_restarted(&gw, "k", &pid_file, first);
    let lost = gw.find_log("McpApp 'k' lost:").unwrap_or_else(|| panic!("the loss was not reported\n{}", gw.logs()));
    assert!(lost.contains("killed by signal 9"), "{lost}");
    let errors: Vec<String> = gw.log_lines().into_iter().filter(|l| l.contains(" ERROR ")).collect();
    assert!(errors.is_empty(), "error lines:\n{}\n\nall logs:\n{}", errors.join("\n"), gw.logs());
    let response = call_tool(&gw, "k", "echo", json!({"text": "back"}));
    assert_eq!(response["result"]["structuredContent"]["text"], "back", "{response}");
}

/// Must-show 8: an http app that takes 2 s to listen starts without an ERROR (or rmcp WARN) line,
/// and an orderly stop of the gateway ends its session before its process (no "fail to delete
/// session" ERROR from a DELETE sent to an app already killed).
#[test]
fn a_slow_http_start_and_an_orderly_stop_log_no_error() {
    let dir = tempfile::tempdir().unwrap();
    write_manifest(&dir.path().join("apps"), "slow", &http_app("slow", &["--startup-delay-ms", "2000"]));
    let started = Instant::now();
    let mut gw = GatewayProcess::start(config_for(dir.path()));
    assert!(wait_state(&gw, "slow", "running", Duration::from_secs(30)), "{}", gw.logs());
    assert!(started.elapsed() >= Duration::from_secs(2));
    std::thread::sleep(Duration::from_millis(500));
    let noisy = |gw: &GatewayProcess| -> Vec<String> {
        gw.log_lines()
            .into_iter()
            .filter(|l| l.contains("ERROR") || (l.contains("WARN") && (l.contains("rmcp") || l.contains("slow"))))
            .collect()
    };
    let at_start = noisy(&gw);
    assert!(at_start.is_empty(), "a slow start logged:\n{}\n--- all ---\n{}", at_start.join("\n"), gw.logs());
    assert!(gw.terminate().is_some(), "the gateway stops on SIGTERM");
    let at_stop = noisy(&gw);
    assert!(at_stop.is_empty(), "an orderly stop logged:\n{}\n--- all ---\n{}", at_stop.join("\n"), gw.logs());
}
