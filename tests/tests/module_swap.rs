//! Live module swap (issue 13, SPEC R3): `POST /admin/module` and `SIGHUP` replace the running
//! module with another build while the gateway serves — under load on `/apps/mcp/{id}` and with
//! an open `/mcp` session — with no failed request, the new version on `/healthz`, and no app
//! process of the old module left. A module that is refused leaves the old one serving.

mod support;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use gateway_e2e::{build_altered_abi_module, build_variant_module, wait_until, AbiAlteration, GatewayOptions, GatewayProcess};
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::ServiceExt;
use serde_json::{json, Value};
use support::*;

const TOKEN: &str = "swap-test-token-0123456789";

/// A copy of `library` in `dir` (each build keeps its own file name: the OS loads a path once).
fn copy_into(dir: &Path, library: &Path) -> PathBuf {
    let target = dir.join(library.file_name().unwrap());
    std::fs::copy(library, &target).unwrap();
    target
}

fn pid_alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    unsafe { libc::kill(pid, 0) == 0 }
}

fn read_pid(file: &Path) -> Option<i32> {
    std::fs::read_to_string(file).ok()?.trim().parse().ok()
}

struct Setup {
    _dir: tempfile::TempDir,
    gw: GatewayProcess,
    modules: PathBuf,
    pid_file: PathBuf,
}

fn start(extra_gateway: Value) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let modules = dir.path().join("modules");
    std::fs::create_dir_all(&modules).unwrap();
    let pid_file = dir.path().join("app.pid");
    write_manifest(&dir.path().join("apps"), "sw", &stdio_app("sw", &["--pid-file", &pid_file.display().to_string()]));
    let mut gateway = json!({ "AlwaysRequireAuth": false, "ModuleDirectory": modules, "AuthTokenEnv": "SWAP_TEST_TOKEN" });
    for (k, v) in extra_gateway.as_object().unwrap() {
        gateway[k] = v.clone();
    }
    let config = json!({
        "Gateway": gateway,
        "OpenClaw": { "McpApps": { "Enabled": true, "DiscoveryPaths": [dir.path().join("apps")], "Allow": ["*"] } }
    });
    let gw = GatewayProcess::start_with(GatewayOptions {
        config,
        env: vec![("SWAP_TEST_TOKEN".into(), TOKEN.into())],
        config_dir: Some(dir.path().to_path_buf()),
        ..Default::default()
    });
    assert!(
        wait_until(Duration::from_secs(30), Duration::from_millis(100), || echo(&gw, "ready").is_ok()
            && gw.get_json("/tools").1.to_string().contains("\"sw.echo\"")),
        "the app never served (or its tools never reached the registry)\n{}",
        gw.logs()
    );
    Setup { _dir: dir, gw, modules, pid_file }
}

/// `tools/call echo` through `/apps/mcp/sw` (stateless 2026-07-28): `Err` with what went wrong.
fn echo(gw: &GatewayProcess, text: &str) -> Result<(), String> {
    let (status, response) = gw.mcp_request("/apps/mcp/sw", "tools/call", json!({ "name": "echo", "arguments": { "text": text } }), json!({}));
    let expected = format!("echo: {text}");
    match (status, response["result"]["content"][0]["text"].as_str()) {
        (200, Some(t)) if t == expected => Ok(()),
        _ => Err(format!("{status} {response}")),
    }
}

fn post_swap(gw: &GatewayProcess, path: &Path, token: Option<&str>) -> (u16, Value) {
    let mut request = gw.client().post(gw.url("/admin/module")).header("content-type", "application/json");
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.body(json!({ "path": path }).to_string()).send().expect("POST /admin/module");
    let status = response.status().as_u16();
    (status, serde_json::from_str(&response.text().unwrap()).unwrap_or(Value::Null))
}

#[test]
fn a_module_swaps_live_under_load_and_a_refused_one_leaves_the_old_serving() {
    let variant = build_variant_module();
    let mut setup = start(json!({}));
    let gw = &setup.gw;
    let (_, health) = gw.get_json("/healthz");
    let production_version = health["module"]["version"].as_str().unwrap().to_string();
    assert_ne!(production_version, variant.version);
    let variant_copy = copy_into(&setup.modules, &variant.path);
    let old_pid = read_pid(&setup.pid_file).expect("the app wrote its pid");

    // Refusals first: no token, a path outside Gateway.ModuleDirectory.
    let (status, body) = post_swap(gw, &variant_copy, None);
    assert_eq!(status, 401, "no token, even on loopback: {body}");
    let (status, body) = post_swap(gw, &variant_copy, Some("wrong"));
    assert_eq!(status, 401, "{body}");
    let (status, body) = post_swap(gw, &variant.path, Some(TOKEN));
    assert_eq!(status, 403, "outside the module directory: {body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("Gateway.ModuleDirectory"), "{body}");

    // An open /mcp session (initialize-era) from before the swap.
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let url = gw.url("/mcp");
    let session = runtime
        .block_on(async { ().serve(StreamableHttpClientTransport::from_uri(url)).await })
        .expect("connecting to /mcp");
    let call = |text: &str| {
        let params = CallToolRequestParams::new("sw.echo").with_arguments(json!({ "text": text }).as_object().cloned().unwrap());
        runtime.block_on(session.call_tool(params))
    };
    let before = call("before").expect("a call in the /mcp session before the swap");
    assert_eq!(before.is_error, Some(false), "{before:?}");

    // 16 clients call through /apps/mcp/sw while the module is swapped.
    let stop = AtomicBool::new(false);
    let done = AtomicUsize::new(0);
    let failures = std::sync::Mutex::new(Vec::new());
    let swap = std::thread::scope(|scope| {
        for client in 0..16 {
            let (stop, done, failures) = (&stop, &done, &failures);
            scope.spawn(move || {
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    if let Err(e) = echo(gw, &format!("c{client}-{n}")) {
                        failures.lock().unwrap().push(e);
                    }
                    done.fetch_add(1, Ordering::Relaxed);
                    n += 1;
                }
            });
        }
        // Load is flowing before and after the swap.
        assert!(wait_until(Duration::from_secs(30), Duration::from_millis(20), || done.load(Ordering::Relaxed) >= 100));
        let swap = post_swap(gw, &variant_copy, Some(TOKEN));
        let after_swap = done.load(Ordering::Relaxed);
        assert!(wait_until(Duration::from_secs(60), Duration::from_millis(20), || done.load(Ordering::Relaxed) >= after_swap + 100));
        stop.store(true, Ordering::Relaxed);
        swap
    });
    let (status, body) = swap;
    assert_eq!(status, 200, "{body}\n{}", gw.logs());
    let failures = failures.into_inner().unwrap();
    assert!(failures.is_empty(), "{} of {} requests failed during the swap, e.g. {:?}\n{}", failures.len(), done.load(Ordering::Relaxed), failures.first(), gw.logs());

    let (_, health) = gw.get_json("/healthz");
    assert_eq!(health["module"]["version"], json!(variant.version), "{health}");
    assert_eq!(health["swaps"][0]["outcome"], json!("swapped"), "{health}");
    assert_eq!(health["swaps"][0]["from"]["version"], json!(production_version), "{health}");

    // The /mcp session carries on, served by the new module.
    let after = call("after").expect("a call in the same /mcp session after the swap");
    assert_eq!(after.is_error, Some(false), "{after:?}");

    // The old module's app process is gone; the new module runs its own.
    assert!(wait_until(Duration::from_secs(10), Duration::from_millis(50), || !pid_alive(old_pid)), "the old module's app {old_pid} is still running");
    let new_pid = read_pid(&setup.pid_file).unwrap();
    assert_ne!(new_pid, old_pid);
    assert!(pid_alive(new_pid));

    // An incompatible module: 4xx naming why, and the current one keeps serving.
    let incompatible = copy_into(&setup.modules, &build_altered_abi_module(AbiAlteration::Version));
    let (status, body) = post_swap(gw, &incompatible, Some(TOKEN));
    assert_eq!(status, 422, "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    // The fixture declares the next major of the repository's interface.
    let interface = gateway_e2e::package_version(&gateway_e2e::repo_root().join("host-abi/Cargo.toml"));
    let major: u64 = interface.split('.').next().and_then(|m| m.parse().ok()).unwrap();
    let next = format!("{}.0.0", major + 1);
    assert!(message.contains("incompatible") && message.contains(&next), "{body}");
    assert!(message.contains("keeps serving"), "{body}");
    echo(gw, "still").expect("the current module keeps serving");
    let (_, health) = gw.get_json("/healthz");
    assert_eq!(health["module"]["version"], json!(variant.version), "{health}");
    assert!(health["swaps"][1]["outcome"].as_str().unwrap().starts_with("refused"), "{health}");
    assert!(pid_alive(new_pid), "a refused swap touches no app");

    runtime.block_on(async { drop(session.cancel().await) });
    let status = setup.gw.terminate();
    assert!(status.is_some_and(|s| s.success()), "orderly exit after swaps: {status:?}\n{}", setup.gw.logs());
}

#[test]
fn sighup_swaps_to_the_module_the_configuration_names() {
    let variant = build_variant_module();
    let mut setup = start(json!({}));
    let variant_copy = copy_into(&setup.modules, &variant.path);
    // The configuration now names another module; SIGHUP makes the gateway read it.
    let config_path = setup.gw.config_dir().join("appsettings.json");
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&config_path).unwrap()).unwrap();
    config["Gateway"]["ModulePath"] = json!(variant_copy);
    std::fs::write(&config_path, config.to_string()).unwrap();
    setup.gw.signal(libc::SIGHUP);
    let gw = &setup.gw;
    assert!(
        wait_until(Duration::from_secs(60), Duration::from_millis(100), || gw.get_json("/healthz").1["module"]["version"] == json!(variant.version)),
        "SIGHUP did not swap\n{}",
        gw.logs()
    );
    assert!(
        wait_until(Duration::from_secs(30), Duration::from_millis(100), || echo(gw, "after sighup").is_ok()),
        "the new module's app does not serve\n{}",
        gw.logs()
    );
    let status = setup.gw.terminate();
    assert!(status.is_some_and(|s| s.success()), "{status:?}\n{}", setup.gw.logs());
}

/// How many of the gateway's threads have each name (`/proc/PID/task/*/comm`).
fn thread_names(pid: u32) -> std::collections::BTreeMap<String, usize> {
    let mut names = std::collections::BTreeMap::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).into_iter().flatten().flatten() {
        if let Ok(comm) = std::fs::read_to_string(task.path().join("comm")) {
            *names.entry(comm.trim().to_string()).or_default() += 1;
        }
    }
    names
}

/// A swapped-out library stays loaded, but lets go of its process-wide threads — the thread
/// that forked its apps and its allocator's background thread (`mcpapp-plugin/src/runtime/library.rs`)
/// — so swap after swap the gateway runs as many threads as it started with, and each new
/// module's apps serve. Swapping back to a file already loaded takes its threads up again.
#[test]
fn swaps_leave_no_thread_of_the_old_library_behind() {
    let mut setup = start(json!({}));
    let pid = setup.gw.pid();
    let at_start = thread_names(pid);
    assert_eq!(at_start.get("mcpapp-spawner"), Some(&1), "{at_start:?}");
    assert!(at_start.get("jemalloc_bg_thd").is_some(), "{at_start:?}");
    let library = gateway_e2e::module_lib();
    let copies: Vec<PathBuf> = (1..=3)
        .map(|i| {
            let copy = setup.modules.join(format!("libmcpapp_plugin_copy{i}.so"));
            std::fs::copy(&library, &copy).unwrap();
            copy
        })
        .collect();
    // Three distinct libraries, then the first again (already loaded: its threads start anew).
    for (round, copy) in copies.iter().chain(copies.first()).enumerate() {
        let (status, body) = post_swap(&setup.gw, copy, Some(TOKEN));
        assert_eq!(status, 200, "swap {round} to {}: {body}\n{}", copy.display(), setup.gw.logs());
        let gw = &setup.gw;
        assert!(
            wait_until(Duration::from_secs(30), Duration::from_millis(100), || echo(gw, "after a swap").is_ok()),
            "swap {round}: the new module's app does not serve\n{}",
            gw.logs()
        );
        let mut now = thread_names(pid);
        let same = wait_until(Duration::from_secs(10), Duration::from_millis(100), || {
            now = thread_names(pid);
            now.get("mcpapp-spawner") == at_start.get("mcpapp-spawner") && now.get("jemalloc_bg_thd") == at_start.get("jemalloc_bg_thd")
        });
        assert!(same, "swap {round}: threads at start {at_start:?}, now {now:?}\n{}", gw.logs());
    }
    let status = setup.gw.terminate();
    assert!(status.is_some_and(|s| s.success()), "{status:?}\n{}", setup.gw.logs());
}
