//! The gateway as PID 1 (issue 37, item 10), as a container's entry point runs it: PID 1 of its
//! own PID namespace, made here without root by `unshare --user --map-root-user --pid`. Orphans an
//! app leaves are reparented to PID 1; an init in front of the gateway (`gateway-host/src/init.rs`)
//! reaps them, forwards SIGTERM to the gateway, and exits as the gateway did. The module still
//! sees its own apps exit (a crash is noticed), and one-shot commands keep their exit codes.

mod support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use gateway_e2e::{describe_output, gateway_bin, run_with_timeout, wait_until, GatewayOptions, GatewayProcess};
use serde_json::{json, Value};
use support::*;

/// A new user namespace (so no root is needed), mapping us to its root, and a new PID namespace
/// whose PID 1 is the command. `--kill-child`: should unshare itself be killed, so is the
/// namespace.
const UNSHARE: [&str; 7] = ["unshare", "--user", "--map-root-user", "--pid", "--fork", "--mount-proc", "--kill-child"];

/// How long the orphans may take to be reaped (they exit 0.2 s after they are forked).
const REAP_WAIT: Duration = Duration::from_secs(10);
const POLL: Duration = Duration::from_millis(50);

/// Why the test cannot run here: the kernel refuses unprivileged user and PID namespaces (a
/// container's seccomp profile, `user.max_user_namespaces = 0`). Anything else is a failure.
fn namespaces_refused() -> Option<String> {
    let out = Command::new(UNSHARE[0])
        .args(&UNSHARE[1..])
        .arg("true")
        .output()
        .unwrap_or_else(|e| panic!("running unshare (util-linux) failed: {e}"));
    if out.status.success() {
        return None;
    }
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
    const REFUSALS: [&str; 5] =
        ["Operation not permitted", "Permission denied", "No space left on device", "Invalid argument", "Function not implemented"];
    assert!(REFUSALS.iter().any(|r| stderr.contains(r)), "unshare failed for another reason than the kernel refusing: {}", describe_output(&out));
    Some(stderr)
}

/// A stdio test-app that writes its pid (in the namespace) to `app_pid_file` and, before it
/// starts, forks an orphan: a process that writes its pid to `orphan_pid_file`, lives 0.2 s and
/// exits, its parent long gone.
fn app_with_an_orphan(app_pid_file: &Path, orphan_pid_file: &Path) -> Value {
    let mut manifest = stdio_app("forks", &["--pid-file", &app_pid_file.display().to_string()]);
    let script = r#"orphan_pid_file=$1; shift; (sh -c 'echo $$ > "$0"; exec sleep 0.2' "$orphan_pid_file" &); exec "$@""#;
    let mut arguments: Vec<Value> = vec![json!("-c"), json!(script), json!("app"), json!(orphan_pid_file)];
    arguments.push(manifest["command"].take());
    arguments.extend(manifest["arguments"].as_array().cloned().unwrap_or_default());
    manifest["command"] = json!("sh");
    manifest["arguments"] = Value::Array(arguments);
    // A confined app writes only what it declares (SPEC R48): the orphan's pid file too.
    std::fs::write(orphan_pid_file, "").unwrap();
    manifest["permissions"]["filesystem"]["write"].as_array_mut().unwrap().push(json!(orphan_pid_file));
    manifest
}

fn config_for(dir: &Path) -> Value {
    json!({
        "Gateway": { "AlwaysRequireAuth": false },
        "OpenClaw": { "McpApps": { "Enabled": true, "DiscoveryPaths": [dir.join("apps")], "Allow": ["*"] } }
    })
}

/// A field of `/proc/PID/status` (`State`, `PPid`, `NSpid`), without its name.
fn status_field(pid: u32, field: &str) -> Option<String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|l| l.strip_prefix(field)?.strip_prefix(':')).map(|v| v.trim().to_string())
}

/// Every process on the machine (pids as seen from here).
fn all_pids() -> Vec<u32> {
    std::fs::read_dir("/proc").map(|d| d.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).collect()).unwrap_or_default()
}

/// The processes whose parent is `parent`.
fn children(parent: u32) -> Vec<u32> {
    all_pids().into_iter().filter(|p| status_field(*p, "PPid").and_then(|v| v.parse().ok()) == Some(parent)).collect()
}

/// `(pid, State)` of the zombies whose parent is `parent`.
fn zombie_children(parent: u32) -> Vec<(u32, String)> {
    children(parent)
        .into_iter()
        .filter_map(|p| Some((p, status_field(p, "State")?)))
        .filter(|(_, state)| state.starts_with('Z'))
        .collect()
}

/// The pid of a process as its own namespace sees it (the last of `NSpid`).
fn inner_pid(pid: u32) -> Option<u32> {
    status_field(pid, "NSpid")?.split_whitespace().last()?.parse().ok()
}

/// The process of `init`'s namespace whose pid there is `inner`, if it still exists.
fn in_namespace(init: u32, inner: u32) -> Option<u32> {
    let namespace = std::fs::read_link(format!("/proc/{init}/ns/pid")).ok()?;
    all_pids()
        .into_iter()
        .find(|p| inner_pid(*p) == Some(inner) && std::fs::read_link(format!("/proc/{p}/ns/pid")).ok().as_ref() == Some(&namespace))
}

fn health_app(gw: &GatewayProcess, id: &str) -> Value {
    let (status, health) = gw.get_json("/apps/health");
    assert_eq!(status, 200, "{health}");
    health["apps"].as_array().and_then(|a| a.iter().find(|x| x["id"] == id).cloned()).unwrap_or(Value::Null)
}

/// Waits until the orphan that wrote `pid_file` is gone — exited and reaped — and no zombie is
/// left whose parent is the namespace's PID 1.
fn assert_orphan_reaped(gw: &GatewayProcess, init: u32, pid_file: &Path) {
    let orphan = read_pid(pid_file, Duration::from_secs(10)) as u32;
    let reaped = wait_until(REAP_WAIT, POLL, || in_namespace(init, orphan).is_none() && zombie_children(init).is_empty());
    assert!(
        reaped,
        "zombies left with the namespace's PID 1 (pid {init} here) as parent: {:?}; the orphan (pid {orphan} in the namespace) is {:?}\n{}",
        zombie_children(init),
        in_namespace(init, orphan).and_then(|p| status_field(p, "State")),
        gw.logs()
    );
}

/// The orphans of an app are reaped, the gateway keeps serving and supervising its app, and
/// SIGTERM to PID 1 is a graceful shutdown: exit 0, no app process left.
#[test]
fn as_pid_1_the_gateway_reaps_orphans_and_stops_on_sigterm() {
    if let Some(why) = namespaces_refused() {
        eprintln!("SKIPPED as_pid_1_the_gateway_reaps_orphans_and_stops_on_sigterm: the kernel refuses user+PID namespaces: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let app_pid_file = dir.path().join("app.pid");
    let orphan_pid_file = dir.path().join("orphan.pid");
    write_manifest(&dir.path().join("apps"), "forks", &app_with_an_orphan(&app_pid_file, &orphan_pid_file));
    let mut gw = GatewayProcess::start_with(GatewayOptions {
        config: config_for(dir.path()),
        wrapper: UNSHARE.map(String::from).to_vec(),
        ..Default::default()
    });
    let init = *children(gw.pid()).first().expect("unshare's child, the namespace's PID 1");
    assert_eq!(inner_pid(init), Some(1), "unshare's child is PID 1 of the namespace");
    assert!(
        wait_until(Duration::from_secs(30), Duration::from_millis(100), || health_app(&gw, "forks")["state"] == "running"),
        "{}",
        gw.logs()
    );

    assert_orphan_reaped(&gw, init, &orphan_pid_file);
    let (status, body) = gw.get("/healthz");
    assert_eq!(status, 200, "{body}");

    // The module still sees its own app exit (nobody else waited for it): the crash is noticed
    // and the app restarted; the restarted app's orphan is reaped too.
    // Emptied, not removed: a confined app may write only the files its manifest declares (SPEC R48).
    std::fs::write(&orphan_pid_file, "").unwrap();
    std::fs::write(&app_pid_file, "").unwrap();
    let _ = gw.mcp_request("/apps/mcp/forks", "tools/call", json!({"name": "crash", "arguments": {}}), json!({}));
    let mut app = Value::Null;
    assert!(
        wait_until(Duration::from_secs(30), Duration::from_millis(100), || {
            app = health_app(&gw, "forks");
            app["state"] == "running" && app["lastError"].as_str().unwrap_or_default().contains("code 4")
        }),
        "the app's crash went unnoticed: {app}\n{}",
        gw.logs()
    );
    assert_orphan_reaped(&gw, init, &orphan_pid_file);

    // The restarted app's process, as seen from here, to check it is gone after the shutdown.
    let app_inner = read_pid(&app_pid_file, Duration::from_secs(10)) as u32;
    let app = in_namespace(init, app_inner).unwrap_or_else(|| panic!("no process with pid {app_inner} in the namespace"));
    assert!(process_alive(app as i32), "the restarted app (pid {app}) is not running");

    // SIGTERM to the namespace's PID 1, as `docker stop` sends it.
    // SAFETY: kill(2) on a process of ours, alive (checked above through /proc).
    unsafe { libc::kill(init as libc::pid_t, libc::SIGTERM) };
    let status = gw.wait_exit(Duration::from_secs(30)).unwrap_or_else(|| panic!("the gateway did not exit on SIGTERM\n{}", gw.logs()));
    assert_eq!(status.code(), Some(0), "{}", gw.logs());
    assert!(gw.logs().contains("Gateway stopped"), "not a graceful shutdown:\n{}", gw.logs());
    assert!(wait_until(Duration::from_secs(5), POLL, || !process_alive(app as i32)), "the app (pid {app}) outlived the gateway");
}

/// A one-shot command run as PID 1 exits with its own exit code, passed on by the init.
#[test]
fn as_pid_1_a_one_shot_command_keeps_its_exit_code() {
    if let Some(why) = namespaces_refused() {
        eprintln!("SKIPPED as_pid_1_a_one_shot_command_keeps_its_exit_code: the kernel refuses user+PID namespaces: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let validate = |manifest: Value| {
        let path = dir.path().join("manifest.json");
        std::fs::write(&path, manifest.to_string()).unwrap();
        let mut cmd = Command::new(UNSHARE[0]);
        cmd.args(&UNSHARE[1..]).arg(gateway_bin()).arg("validate").arg(&path).current_dir(dir.path());
        run_with_timeout(cmd, Duration::from_secs(60))
    };
    let bad = validate(json!({"id": "v", "command": "x", "version": "not-a-version"}));
    assert_eq!(bad.status.code(), Some(1), "{}", describe_output(&bad));
    assert!(String::from_utf8_lossy(&bad.stdout).contains("error: version"), "{}", describe_output(&bad));
    let good = validate(json!({"id": "v", "command": "x", "version": "1.2.0"}));
    assert!(good.status.success(), "{}", describe_output(&good));
}
