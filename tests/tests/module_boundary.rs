//! The module boundary, end to end (issue 2, "Must show" 1–6): the real `gateway-host` binary
//! loading real module libraries — the workspace's, a second build the test makes itself, and
//! modules built against altered copies of the interface.
//!
//! Run: `cargo build --release --workspace && cargo test --release -p gateway-e2e --test module_boundary`.

use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, SystemTime};

use gateway_e2e::*;

/// stdout of a command that must have succeeded, parsed as the JSON object on its last line.
fn json_stdout(output: &Output) -> Value {
    assert!(output.status.success(), "command failed\n{}", describe_output(output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .unwrap_or_else(|| panic!("no JSON object on stdout\n{}", describe_output(output)));
    serde_json::from_str(line).unwrap_or_else(|e| panic!("stdout is not JSON ({e})\n{}", describe_output(output)))
}

fn module_info(module: &Path) -> Value {
    json_stdout(&run_gateway(&["module-info", "--module", module.to_str().unwrap()], &[]))
}

fn canonical(path: &Path) -> String {
    path.canonicalize().unwrap_or_else(|e| panic!("canonicalize {}: {e}", path.display())).display().to_string()
}

/// Identity of a file's contents and modification time, to prove a binary was not rebuilt.
fn file_stamp(path: &Path) -> (u64, SystemTime, Vec<u8>) {
    let meta = std::fs::metadata(path).unwrap();
    let bytes = std::fs::read(path).unwrap();
    let digest = bytes.iter().step_by(4099).copied().collect();
    (meta.len(), meta.modified().unwrap(), digest)
}

/// Serves with `module` and checks `/healthz` reports it; returns the gateway for further checks.
fn serve_and_check_healthz(module: &Path, expected_version: &str) -> GatewayProcess {
    let gateway =
        GatewayProcess::start_with(GatewayOptions { module: Some(module.to_path_buf()), ..Default::default() });
    let (status, body) = gateway.get_json("/healthz");
    assert_eq!(status, 200, "/healthz: {body}");
    assert_eq!(body["ok"], json!(true), "/healthz: {body}");
    assert_eq!(body["module"]["name"], json!("mcpapp-plugin"), "/healthz: {body}");
    assert_eq!(body["module"]["version"], json!(expected_version), "/healthz: {body}");
    assert_eq!(body["module"]["abiVersion"], json!(abi_major()), "/healthz: {body}");
    assert_eq!(body["module"]["interfaceVersion"], json!(interface_version()), "/healthz: {body}");
    assert_eq!(body["module"]["path"], json!(canonical(module)), "/healthz: {body}");
    gateway
}

// ---------------------------------------------------------------------------------------------
// 1. The real module
// ---------------------------------------------------------------------------------------------

#[test]
fn module_info_of_the_workspace_module_matches_its_crate() {
    let expected_version = module_crate_version();
    let lib = module_lib();
    for info in [
        module_info(&lib),
        // Without --module: the library beside the executable.
        json_stdout(&run_gateway(&["module-info"], &[])),
    ] {
        assert_eq!(info["name"], json!("mcpapp-plugin"), "{info}");
        assert_eq!(info["version"], json!(expected_version), "{info}");
        assert_eq!(info["abiVersion"], json!(abi_major()), "{info}");
        assert_eq!(info["interfaceVersion"], json!(interface_version()), "{info}");
        assert_eq!(info["path"], json!(canonical(&lib)), "{info}");
        let keys: Vec<&String> = info.as_object().unwrap().keys().collect();
        assert_eq!(keys.len(), 5, "module-info prints exactly name, version, abiVersion, interfaceVersion, path: {info}");
    }
}

// ---------------------------------------------------------------------------------------------
// 2. Swapping the module without rebuilding the host
// ---------------------------------------------------------------------------------------------

#[test]
fn the_same_host_binary_runs_two_module_builds() {
    let host = gateway_bin();
    let host_before = file_stamp(&host);
    let production = module_lib();
    let production_version = module_crate_version();
    let variant = build_variant_module();
    eprintln!("variant module: {} ({:.1} s to build)", variant.path.display(), variant.build_time.as_secs_f64());
    assert_eq!(file_stamp(&host), host_before, "building the second module must not rebuild gateway-host");
    assert_ne!(variant.version, production_version);
    assert_ne!(variant.path.file_name(), production.file_name(), "each module build has its own file name");

    // module-info with each.
    let a = module_info(&production);
    let b = module_info(&variant.path);
    assert_eq!(a["version"], json!(production_version), "{a}");
    assert_eq!(b["version"], json!(variant.version), "{b}");
    for info in [&a, &b] {
        assert_eq!(info["name"], json!("mcpapp-plugin"), "{info}");
        assert_eq!(info["abiVersion"], json!(abi_major()), "{info}");
    }
    assert_eq!(b["path"], json!(canonical(&variant.path)), "{b}");

    // Serving with each, one after the other, the same binary.
    for (module, version) in [(&production, &production_version), (&variant.path, &variant.version)] {
        let mut gateway = serve_and_check_healthz(module, version);
        let created = format!("MCP App module mcpapp-plugin {version} created");
        assert!(gateway.wait_for_log(&created, Duration::from_secs(10)), "expected '{created}' in\n{}", gateway.logs());
        let status = gateway.terminate().expect("gateway exit status");
        assert!(status.success(), "gateway should exit 0 on SIGTERM, got {status}\n{}", gateway.logs());
    }
}

// ---------------------------------------------------------------------------------------------
// 3. Refusals
// ---------------------------------------------------------------------------------------------

/// Checks a refusal: non-zero exit code (not a signal), a short message on stderr naming the
/// module's path and containing each of `needles`, no JSON on stdout. Returns stderr.
fn assert_refused(output: &Output, path: &Path, needles: &[&str], what: &str) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    let context = format!("{what}\n{}", describe_output(output));
    assert!(output.status.signal().is_none(), "{what}: killed by a signal (a crash)\n{context}");
    let code = output.status.code().expect("an exit code");
    assert_ne!(code, 0, "{what}: must exit non-zero\n{context}");
    assert!(!stderr.contains("panicked"), "{what}: the gateway panicked\n{context}");
    assert!(stderr.contains(&path.display().to_string()), "{what}: message must name {}\n{context}", path.display());
    for needle in needles {
        assert!(stderr.contains(needle), "{what}: message must contain '{needle}'\n{context}");
    }
    let lines = stderr.lines().filter(|l| !l.trim().is_empty()).count();
    assert!((1..=6).contains(&lines), "{what}: message must be short (≤ 6 lines), got {lines}\n{context}");
    assert!(stderr.len() < 2000, "{what}: message must be short, got {} bytes\n{context}", stderr.len());
    stderr
}

/// `module-info --module X` and serving with `--module X` are both refused the same way.
fn assert_both_refuse(path: &Path, needles: &[&str], what: &str) {
    let p = path.to_str().unwrap();
    let info = run_gateway(&["module-info", "--module", p], &[]);
    assert_refused(&info, path, needles, &format!("{what} (module-info)"));
    assert!(info.stdout.is_empty(), "{what}: module-info printed something on stdout\n{}", describe_output(&info));

    let config_dir = tempfile::tempdir().unwrap();
    let config = config_dir.path().join("appsettings.json");
    std::fs::write(&config, "{}").unwrap();
    let serve = run_gateway_with_timeout(
        &["--config", config.to_str().unwrap(), "--urls", "http://127.0.0.1:0", "--module", p],
        &[],
        Duration::from_secs(60),
    );
    let stderr = assert_refused(&serve, path, needles, &format!("{what} (serving)"));
    assert!(!stderr.contains("Gateway listening on"), "{what}: the gateway must not serve\n{stderr}");
}

#[test]
fn a_module_built_against_another_interface_version_is_refused() {
    let module = build_altered_abi_module(AbiAlteration::Version);
    let next = format!("host-abi {}.0.0", abi_major() + 1);
    assert_both_refuse(&module, &["incompatible", &next, &todays_interface()], "interface version of the next major");
}

#[test]
fn a_module_with_an_altered_interface_layout_is_refused() {
    let module = build_altered_abi_module(AbiAlteration::Layout);
    // Both interface versions are today's here (only the layout differs); the message names the
    // interface version and ABI and keeps the useful end of abi_stable's report (the new field).
    assert_both_refuse(&module, &["incompatible", &todays_interface(), &format!("ABI {}", abi_major()), "added_later"], "altered layout");
}

#[test]
fn a_module_speaking_another_abi_version_is_refused() {
    let module = build_altered_abi_module(AbiAlteration::Abi);
    assert_both_refuse(&module, &["ABI version 99", &format!("ABI version {}", abi_major()), &todays_interface()], "ABI version 99");
}

/// `host-abi X.Y.Z` of the repository's interface crate, as refusals name it.
/// The version of `host-abi` in this repository: the interface the workspace's host and module use.
fn interface_version() -> String {
    package_version(&repo_root().join("host-abi/Cargo.toml"))
}

/// The ABI major of the repository's interface (its crate major), as modules report it.
fn abi_major() -> u64 {
    interface_version().split('.').next().and_then(|m| m.parse().ok()).expect("host-abi's version has a numeric major")
}

fn todays_interface() -> String {
    format!("host-abi {}", interface_version())
}

#[test]
fn the_unaltered_fixture_loads_so_the_refusals_are_due_to_the_alterations() {
    let module = build_altered_abi_module(AbiAlteration::None);
    let info = module_info(&module);
    assert_eq!(info["name"], json!("altered-abi-module"), "{info}");
    assert_eq!(info["abiVersion"], json!(abi_major()), "{info}");
    // Its `create` fails on purpose: serving ends with a short message, not a crash.
    let config_dir = tempfile::tempdir().unwrap();
    let config = config_dir.path().join("appsettings.json");
    std::fs::write(&config, "{}").unwrap();
    let serve = run_gateway(
        &["--config", config.to_str().unwrap(), "--urls", "http://127.0.0.1:0", "--module", module.to_str().unwrap()],
        &[],
    );
    assert_refused(&serve, &module, &["cannot be created"], "fixture whose create fails");
}

/// A real shared library that is not a module (prefers zlib; any system library will do).
fn some_system_library() -> PathBuf {
    let candidates = [
        "/lib/x86_64-linux-gnu/libz.so.1",
        "/usr/lib/x86_64-linux-gnu/libz.so.1",
        "/lib/aarch64-linux-gnu/libz.so.1",
        "/usr/lib/aarch64-linux-gnu/libz.so.1",
        "/usr/lib/libz.so.1",
        "/lib/x86_64-linux-gnu/libm.so.6",
        "/lib/aarch64-linux-gnu/libm.so.6",
        "/usr/lib/libm.so.6",
        "/lib64/libm.so.6",
    ];
    candidates
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .expect("no system shared library found to use as a non-module .so")
}

#[test]
fn a_shared_library_that_is_not_a_module_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("libnot_a_module.so");
    std::fs::copy(some_system_library(), &path).unwrap();
    assert_both_refuse(&path, &["not an MCP App module"], "a system library");
}

#[test]
fn a_garbage_file_named_so_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("libgarbage.so");
    let garbage: Vec<u8> = (0..64 * 1024u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    std::fs::write(&path, garbage).unwrap();
    assert_both_refuse(&path, &["cannot load", "as a library"], "a garbage .so");
}

#[test]
fn a_missing_module_path_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("no-such-dir/libmcpapp_plugin.so");
    assert_both_refuse(&path, &["not found"], "a missing path");
}

// ---------------------------------------------------------------------------------------------
// 4. Many calls in flight, no thread per call
// ---------------------------------------------------------------------------------------------

#[test]
fn ten_thousand_calls_in_flight_complete_without_a_thread_per_call() {
    let output = run_gateway(&["boundary-check", "--calls", "10000", "--delay-ms", "5"], &[]);
    let report = json_stdout(&output);
    eprintln!("boundary-check: {report}");
    assert_eq!(report["calls"], json!(10000), "{report}");
    assert_eq!(report["completed"], json!(10000), "every call completes: {report}");
    assert_eq!(report["correct"], json!(10000), "every call gets its own answer: {report}");
    let before = report["threadsBefore"].as_u64().expect("threadsBefore");
    let peak = report["threadsPeak"].as_u64().expect("threadsPeak");
    assert!(before > 0, "thread count read: {report}");
    assert!(peak <= before + 1, "thread count must stay flat (before {before}, peak {peak}): {report}");
    // The calls really were concurrent: 10,000 sequential 5 ms waits would take 50 s.
    let elapsed = report["elapsedMs"].as_f64().expect("elapsedMs");
    // Half of the sequential time: a loaded machine cannot make overlapping calls look sequential.
    assert!(elapsed < 25_000.0, "10,000 calls of 5 ms must overlap, took {elapsed} ms: {report}");
}

// ---------------------------------------------------------------------------------------------
// 5. Panics inside the module are contained
// ---------------------------------------------------------------------------------------------

fn assert_panics_are_contained(fault: &str) {
    let variant = build_variant_module();
    let mut gateway = GatewayProcess::start_with(GatewayOptions {
        config: json!({ "Testing": { "Faults": [fault] } }),
        module: Some(variant.path.clone()),
        ..Default::default()
    });
    for round in 0..3 {
        let (status, body) = gateway.get_json("/apps/health");
        assert_eq!(status, 500, "{fault} round {round}: /apps/health must fail: {body}");
        assert_eq!(body["ok"], json!(false), "{fault}: {body}");
        assert_eq!(body["error"]["code"], json!("panic"), "{fault}: {body}");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("panic"), "{fault}: error mentions the panic: {body}");
        assert!(message.contains(&format!("injected fault {fault}")), "{fault}: error carries the panic message: {body}");

        let (status, body) = gateway.get_json("/healthz");
        assert_eq!(status, 200, "{fault} round {round}: /healthz after a panic: {body}");
        assert_eq!(body["ok"], json!(true), "{body}");
        assert_eq!(body["module"]["version"], json!(variant.version), "{body}");
        assert!(gateway.is_running(), "{fault}: the gateway must stay up\n{}", gateway.logs());
    }
    let needle = "panic in module while list_apps: injected fault";
    assert!(gateway.wait_for_log(needle, Duration::from_secs(5)), "{fault}: expected '{needle}' in\n{}", gateway.logs());
    let line = gateway.find_log(needle).unwrap();
    assert!(line.contains("ERROR"), "{fault}: the panic is logged as an error: {line}");
    // The variant's crate is `mcpapp_plugin_variant`, so its targets are `mcpapp_plugin_variant::…`.
    assert!(line.contains(" mcpapp_plugin_variant::"), "{fault}: the panic line has the module's target: {line}");
    let status = gateway.terminate().expect("exit status");
    assert!(status.success(), "{fault}: clean exit after panics, got {status}\n{}", gateway.logs());
}

#[test]
fn a_panic_in_a_module_task_becomes_an_error_and_the_gateway_keeps_serving() {
    assert_panics_are_contained("task:list_apps");
}

#[test]
fn a_panic_in_an_exported_function_becomes_an_error_and_the_gateway_keeps_serving() {
    assert_panics_are_contained("export:list_apps");
}

#[test]
fn the_production_module_ignores_injected_faults() {
    let gateway = GatewayProcess::start(json!({ "Testing": { "Faults": ["task:list_apps", "export:list_apps"] } }));
    let warning = "Testing.Faults is set but this module was built without fault injection";
    assert!(gateway.wait_for_log(warning, Duration::from_secs(10)), "expected the warning in\n{}", gateway.logs());
    assert!(gateway.find_log(warning).unwrap().contains("WARN"), "logged as a warning");
    let (status, body) = gateway.get_json("/apps/health");
    assert_eq!(status, 200, "/apps/health: {body}");
    assert_eq!(body["ok"], json!(true), "{body}");
    assert!(!gateway.logs().contains("injected fault"), "no fault fired\n{}", gateway.logs());
}

// ---------------------------------------------------------------------------------------------
// 6. Module logs in the gateway's output
// ---------------------------------------------------------------------------------------------

#[test]
fn module_log_lines_appear_in_the_gateway_output_with_their_target() {
    let version = module_crate_version();
    let mut gateway = GatewayProcess::start(json!({}));
    let created = format!("MCP App module mcpapp-plugin {version} created");
    assert!(gateway.wait_for_log(&created, Duration::from_secs(10)), "expected '{created}' in\n{}", gateway.logs());
    let line = gateway.find_log(&created).unwrap();
    assert!(line.contains("mcpapp_plugin::instance"), "the module's target is kept: {line}");
    assert!(line.contains("INFO"), "the module's level is kept: {line}");
    // The host's own lines carry the host's target, so the two are told apart.
    let listening = gateway.find_log("Gateway listening on").unwrap();
    assert!(listening.contains("gateway_host"), "{listening}");
    assert!(!listening.contains("mcpapp_plugin"), "{listening}");

    // Logs keep flowing after startup, up to the module's shutdown.
    let status = gateway.terminate().expect("exit status");
    assert!(status.success(), "exit after SIGTERM: {status}\n{}", gateway.logs());
    let shutting_down = gateway.find_log("MCP App module shutting down");
    assert!(
        shutting_down.as_deref().is_some_and(|l| l.contains("mcpapp_plugin::instance")),
        "expected the module's shutdown line with its target in\n{}",
        gateway.logs()
    );
}

#[test]
fn module_logs_respect_the_gateway_log_filter() {
    // RUST_LOG silencing the module's target drops its lines; the host's remain.
    let gateway = GatewayProcess::start_with(GatewayOptions {
        env: vec![("RUST_LOG".into(), "info,mcpapp_plugin=off".into())],
        ..Default::default()
    });
    let (status, _) = gateway.get("/healthz");
    assert_eq!(status, 200);
    std::thread::sleep(Duration::from_millis(300));
    let logs = gateway.logs();
    assert!(!logs.contains("mcpapp_plugin::"), "module lines must be filtered out:\n{logs}");
    assert!(logs.contains("Gateway listening on"), "{logs}");
}
