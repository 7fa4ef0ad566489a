//! The version policy of the module boundary, end to end (issue 13, "Must show" 1; the policy is
//! documented in `host-abi/src/lib.rs` and README.md, "Module versions"):
//! - a module of the next minor version (a method appended to `ModuleInstance` and one to
//!   `HostSink`) loads in today's gateway and serves;
//! - a host of the next minor version (the `altered-abi-host` fixture, which runs the gateway's own
//!   `module/loader.rs`) loads today's module and reports the optional method unavailable while
//!   the rest works;
//! - a module (or host) of another major version is refused in a few lines naming both versions;
//! - a module of the previous major (a 1.x module in a 2.x gateway) is refused in one line;
//! - and what `abi_stable` 0.11.3 decides by itself, the facts the policy is built on.
//!
//! Every build here is of `tests/fixtures/altered-abi` (into `target/fixtures`, a few seconds
//! per alteration once abi_stable is built); `target/release` is only read.
//!
//! Run: `cargo build --release --workspace && cargo test --release -p gateway-e2e --test module_versions`.

use std::collections::HashMap;
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use gateway_e2e::*;

// ---------------------------------------------------------------------------------------------
// Fixture builds
// ---------------------------------------------------------------------------------------------

/// One build of `tests/fixtures/altered-abi` with `ALTERED_ABI_MODE=mode`.
#[derive(Debug, Clone)]
struct Fixture {
    /// `target/fixtures/libaltered_abi_<mode>.so`: the module built against the altered interface.
    module: PathBuf,
    /// `target/fixtures/altered-abi-host-<mode>`: the small host built against it.
    host: PathBuf,
}

/// An exclusive `flock` on the lock file the harness uses for the same target folder, held while
/// the file is open (until drop).
struct BuildLock {
    _file: std::fs::File,
}

impl BuildLock {
    fn acquire(path: &Path) -> BuildLock {
        use std::os::fd::AsRawFd as _;
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let file = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(path).unwrap();
        // SAFETY: flock on a descriptor this struct owns; released by close on drop.
        assert_eq!(unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) }, 0, "flock {}", path.display());
        BuildLock { _file: file }
    }
}

/// Copies `from` to `to` through a temporary name (a process may have `to` mapped).
fn install(from: &Path, to: &Path) {
    let tmp = to.with_extension("tmp");
    std::fs::copy(from, &tmp).unwrap_or_else(|e| panic!("copying {}: {e}", from.display()));
    std::fs::rename(&tmp, to).unwrap();
}

/// Builds the fixture workspace (module and host) with `mode`; cached per mode for this process.
/// Serialized with `build_altered_abi_module` across processes by the same lock file.
fn fixture(mode: &str) -> Fixture {
    static CACHE: OnceLock<Mutex<HashMap<String, Fixture>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let mut cache = cache.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(found) = cache.get(mode) {
        return found.clone();
    }
    let root = repo_root();
    let dir = root.join("tests/fixtures/altered-abi");
    let target = target_dir().join("fixtures");
    let _lock = BuildLock::acquire(&target.join(".harness-build.lock"));
    let lock = dir.join("Cargo.lock");
    if !lock.exists() {
        std::fs::copy(root.join("Cargo.lock"), &lock).expect("seeding the fixture's Cargo.lock");
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    for var in ["CARGO_TARGET_DIR", "CARGO_BUILD_TARGET_DIR", "RUSTC_WORKSPACE_WRAPPER", "CARGO_PRIMARY_PACKAGE"] {
        cmd.env_remove(var);
    }
    cmd.current_dir(&dir)
        .env("CARGO_TARGET_DIR", &target)
        .env("ALTERED_ABI_MODE", mode)
        .env("HOST_ABI_SRC", root.join("host-abi/src/lib.rs"))
        .env("CARGO_TERM_COLOR", "never")
        .args(["build", "--release"]);
    eprintln!("[module_versions] building the altered-abi fixture ({mode}): {cmd:?}");
    let started = std::time::Instant::now();
    let output = run_with_timeout(cmd, BUILD_TIMEOUT);
    assert!(output.status.success(), "building the fixture ({mode}) failed\n{}", describe_output(&output));
    eprintln!("[module_versions] built the fixture ({mode}) in {:.1} s", started.elapsed().as_secs_f64());
    let built = Fixture {
        module: target.join(dylib_file_name(&format!("altered_abi_{mode}"))),
        host: target.join(format!("altered-abi-host-{mode}")),
    };
    install(&target.join("release").join(dylib_file_name("altered_abi_module")), &built.module);
    install(&target.join("release/altered-abi-host"), &built.host);
    cache.insert(mode.to_string(), built.clone());
    built
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// The interface version of the repository's `host-abi` (what today's gateway and module speak).
fn interface_version() -> String {
    package_version(&repo_root().join("host-abi/Cargo.toml"))
}

/// `(major, minor)` of a version string.
fn major_minor(version: &str) -> (u32, u32) {
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap());
    (parts.next().unwrap(), parts.next().unwrap())
}

/// Runs a fixture host (bounded), returning its output.
fn run_host(host: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(host);
    cmd.args(args).env("RUST_LOG", "info");
    run_with_timeout(cmd, COMMAND_TIMEOUT)
}

/// The JSON object on the last `{` line of stdout of a command that must have succeeded.
fn json_stdout(output: &Output, what: &str) -> Value {
    assert!(output.status.success(), "{what} failed\n{}", describe_output(output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .unwrap_or_else(|| panic!("{what}: no JSON object on stdout\n{}", describe_output(output)));
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{what}: stdout is not JSON ({e})\n{}", describe_output(output)))
}

/// A refusal: an exit code (no signal, no panic), nothing on stdout, and a message of at most six
/// lines on stderr that names the module and contains each of `needles`. Returns stderr.
fn assert_refused(output: &Output, module: &Path, needles: &[&str], what: &str) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    let context = format!("{what}\n{}", describe_output(output));
    assert!(output.status.signal().is_none(), "{what}: killed by a signal\n{context}");
    assert_ne!(output.status.code(), Some(0), "{what}: must exit non-zero\n{context}");
    assert!(!stderr.contains("panicked"), "{what}: panicked\n{context}");
    assert!(output.stdout.is_empty(), "{what}: printed something on stdout\n{context}");
    assert!(stderr.contains(&module.display().to_string()), "{what}: must name {}\n{context}", module.display());
    for needle in needles {
        assert!(stderr.contains(needle), "{what}: message must contain '{needle}'\n{context}");
    }
    let lines = stderr.lines().filter(|l| !l.trim().is_empty()).count();
    assert!((1..=6).contains(&lines), "{what}: at most 6 lines, got {lines}\n{context}");
    stderr
}

fn write_test_app(dir: &Path) -> PathBuf {
    let apps = dir.join("apps");
    let app = apps.join("tapp");
    std::fs::create_dir_all(&app).unwrap();
    let manifest = json!({
        "id": "tapp",
        "name": "Test tapp",
        "version": "1.2.3",
        "transport": "stdio",
        "command": release_bin("test-app"),
        "arguments": [],
        "toolNamePrefix": "tapp.",
        "startupTimeoutSeconds": 15,
        "requestTimeoutSeconds": 30,
    });
    std::fs::write(app.join("openclaw.mcpapp.json"), manifest.to_string()).unwrap();
    apps
}

// ---------------------------------------------------------------------------------------------
// What abi_stable 0.11.3 decides by itself
// ---------------------------------------------------------------------------------------------

/// The facts the policy is built on: abi_stable's own check (`init_root_module`) lets a host
/// load a module whose interface appended methods, but refuses a module whose interface lacks
/// methods the host's appended ("too many fields": the host's vtables are longer), and refuses
/// another major by version alone.
#[test]
fn abi_stable_alone_loads_newer_minor_modules_but_refuses_older_ones() {
    let append = fixture("append");
    let today = module_lib();
    let (major, minor) = major_minor(&interface_version());
    let newer = format!("{major}.{}.0", minor + 1);

    // A next-minor host, abi_stable only: a module of its own minor loads…
    let same = json_stdout(&run_host(&append.host, &[append.module.to_str().unwrap(), "--abi-stable-only"]), "probe");
    assert_eq!(same["abiStable"], json!("loads"), "{same}");
    assert_eq!(same["host"], json!(newer), "{same}");

    // …today's module (one minor older) does not: one error per vtable that grew.
    let older = json_stdout(&run_host(&append.host, &[today.to_str().unwrap(), "--abi-stable-only"]), "probe");
    eprintln!("abi_stable alone, host {newer} → module {}: {older}", interface_version());
    assert_eq!(older["abiStable"], json!("refused"), "{older}");
    assert_eq!(older["module"], json!(interface_version()), "{older}");
    let errors = older["errors"].as_array().expect("errors");
    assert_eq!(errors.len(), 2, "ModuleInstance's and HostSink's vtables each have one method more: {older}");
    for error in errors {
        assert!(error.as_str().unwrap().contains("too many fields"), "{older}");
    }

    // A next-major host, abi_stable only: today's module is refused by its version alone.
    let major_host = fixture("major");
    let other = json_stdout(&run_host(&major_host.host, &[today.to_str().unwrap(), "--abi-stable-only"]), "probe");
    assert_eq!(other["abiStable"], json!("refused"), "{other}");
    assert!(other["firstLine"].as_str().unwrap().contains("library version mismatch"), "{other}");
}

// ---------------------------------------------------------------------------------------------
// Must show 1: the three cases
// ---------------------------------------------------------------------------------------------

/// A module whose interface appends a method to `ModuleInstance` (and one to `HostSink`), one
/// minor newer, loads in today's gateway and serves: module-info, /healthz, its app and tool
/// through /apps/health and /mcp. It asks the gateway for `HostSink::notice` before calling it,
/// and the gateway (which lacks it) does not declare it.
#[test]
fn a_newer_minor_module_loads_in_todays_gateway_and_serves() {
    let module = fixture("append").module;
    let (major, minor) = major_minor(&interface_version());

    let info = json_stdout(&run_gateway(&["module-info", "--module", module.to_str().unwrap()], &[]), "module-info");
    assert_eq!(info["name"], json!("altered-abi-module"), "{info}");
    assert_eq!(info["abiVersion"], json!(major), "{info}");
    assert_eq!(info["interfaceVersion"], json!(format!("{major}.{}.0", minor + 1)), "{info}");

    let mut gateway = GatewayProcess::start_with(GatewayOptions { module: Some(module.clone()), ..Default::default() });
    let (status, body) = gateway.get_json("/healthz");
    assert_eq!(status, 200, "/healthz: {body}");
    assert_eq!(body["module"]["name"], json!("altered-abi-module"), "{body}");
    assert_eq!(body["module"]["path"], json!(module.canonicalize().unwrap().display().to_string()), "{body}");
    let newer = format!("speaks ABI {major}.{}, newer than this gateway's {major}.{minor}: loaded", minor + 1);
    assert!(gateway.find_log(&newer).is_some(), "expected '{newer}' in\n{}", gateway.logs());

    // The module sees what the gateway declared, and does not call what it lacks.
    let declared = format!("the host declares host-abi \"{}\" and capabilities [\"HostSink::http_post\"]", interface_version());
    assert!(gateway.wait_for_log(&declared, Duration::from_secs(10)), "expected '{declared}' in\n{}", gateway.logs());
    let gated = "the host does not declare HostSink::notice; not calling it";
    assert!(gateway.find_log(gated).is_some(), "expected '{gated}' in\n{}", gateway.logs());

    // It serves: its app on /apps/health, its tool on /mcp.
    let (status, health) = gateway.get_json("/apps/health");
    assert_eq!(status, 200, "/apps/health: {health}");
    let apps = health["apps"].as_array().expect("apps");
    assert_eq!(apps.len(), 1, "{health}");
    assert_eq!(apps[0]["id"], json!("fixture"), "{health}");
    let mut listed = Value::Null;
    let offered = wait_until(Duration::from_secs(20), Duration::from_millis(200), || {
        listed = gateway.mcp_request("/mcp", "tools/list", json!({}), json!({})).1;
        listed["result"]["tools"].as_array().is_some_and(|t| t.iter().any(|t| t["name"] == "fixture.echo"))
    });
    assert!(offered, "fixture.echo never listed on /mcp: {listed}\n{}", gateway.logs());
    let (status, called) =
        gateway.mcp_request("/mcp", "tools/call", json!({ "name": "fixture.echo", "arguments": { "text": "from 1.1" } }), json!({}));
    assert_eq!(status, 200, "tools/call: {called}");
    assert_eq!(called["result"]["content"][0]["text"], json!("from 1.1"), "{called}");
    assert_ne!(called["result"]["isError"], json!(true), "{called}");

    let exit = gateway.terminate().expect("exit status");
    assert!(exit.success(), "clean exit, got {exit}\n{}", gateway.logs());
    assert!(gateway.find_log("altered-abi-module shutting down").is_some(), "shutdown reached the module\n{}", gateway.logs());
}

/// A host one minor newer, which knows the appended (optional) `ModuleInstance::stats`, loads
/// today's module with the gateway's loader, reports that feature unavailable, and the rest of
/// the interface works (a real app starts and answers a tool call). Calling the method without
/// asking gets the method's default body (`not_implemented`), not a crash. The control: the same
/// host with a module of its own minor finds the feature available, and each side calls the
/// other's appended method because each declared it.
#[test]
fn a_newer_minor_host_loads_todays_module_and_reports_the_optional_method_unavailable() {
    let append = fixture("append");
    let today = module_lib();
    let (major, minor) = major_minor(&interface_version());
    let newer = format!("{major}.{}.0", minor + 1);

    let dir = tempfile::tempdir().unwrap();
    let apps = write_test_app(dir.path());
    let config = json!({ "OpenClaw": { "McpApps": { "Enabled": true, "DiscoveryPaths": [apps] } } });
    let args = [today.to_str().unwrap(), "--config-json", &config.to_string(), "--call", "tapp", "echo", r#"{"text":"hi"}"#];
    let report = json_stdout(&run_host(&append.host, &args), "the newer host with today's module");
    eprintln!("newer host, today's module: {report}");
    assert_eq!(report["host"]["interfaceVersion"], json!(newer), "{report}");
    assert_eq!(report["module"]["name"], json!("mcpapp-plugin"), "{report}");
    assert_eq!(report["module"]["interfaceVersion"], json!(interface_version()), "{report}");
    assert_eq!(report["module"]["minor"], json!("olderModule"), "{report}");
    assert_eq!(report["module"]["capabilities"], json!([]), "{report}");
    // Degraded, not refused.
    assert_eq!(report["features"], json!({ "ModuleInstance::stats": "unavailable" }), "{report}");
    assert_eq!(report["stats"], Value::Null, "never called when not declared: {report}");
    assert_eq!(report["statsCalledAnyway"]["error"], json!("not_implemented"), "{report}");
    // The rest works.
    assert_eq!(report["apps"]["ok"], json!([{ "id": "tapp", "state": "running" }]), "{report}");
    assert!(report["tools"]["ok"].as_array().unwrap().contains(&json!("tapp.echo")), "{report}");
    assert_eq!(report["toolCall"]["ok"], json!({ "isError": false, "text": "echo: hi" }), "{report}");
    assert_eq!(report["unknownInvoke"]["error"], json!("not_implemented"), "{report}");
    assert_eq!(report["shutdown"]["ok"], json!(true), "{report}");

    // Control: host and module of the same (next) minor use each other's appended methods.
    let same = json_stdout(&run_host(&append.host, &[append.module.to_str().unwrap()]), "the newer host with its module");
    assert_eq!(same["module"]["minor"], json!("same"), "{same}");
    assert_eq!(same["features"], json!({ "ModuleInstance::stats": "available" }), "{same}");
    assert_eq!(same["stats"]["ok"], json!({ "toolCalls": 0 }), "{same}");
    assert_eq!(same["notices"], json!(["altered-abi-module: hello through HostSink::notice"]), "{same}");
}

/// A host that does not offer `HostSink::http_post` (a 1.0 host, or here the next-minor fixture
/// host, which offers only `HostSink::notice`) still gets its tool calls to HTTP apps answered:
/// the module sends them with its own client (`upstream/short_way/http_sender.rs`), from its own runtime.
#[test]
fn a_host_without_http_post_gets_http_apps_called_by_the_modules_own_client() {
    let host = fixture("append").host;
    let dir = tempfile::tempdir().unwrap();
    let apps = dir.path().join("apps");
    let port = free_port();
    std::fs::create_dir_all(apps.join("web")).unwrap();
    let manifest = json!({
        "id": "web", "name": "Test web", "version": "1.2.3", "transport": "http",
        "url": format!("http://127.0.0.1:{port}/mcp"),
        "command": release_bin("test-app"), "arguments": ["--http", format!("127.0.0.1:{port}")],
        "toolNamePrefix": "web.", "startupTimeoutSeconds": 15, "requestTimeoutSeconds": 30,
    });
    std::fs::write(apps.join("web/openclaw.mcpapp.json"), manifest.to_string()).unwrap();
    let config = json!({ "OpenClaw": { "McpApps": { "Enabled": true, "DiscoveryPaths": [apps] } } });
    let module = module_lib();
    let args = [module.to_str().unwrap(), "--config-json", &config.to_string(), "--call", "web", "echo", r#"{"text":"own client"}"#];
    let report = json_stdout(&run_host(&host, &args), "a host without http_post, an HTTP app");
    let logs = report["moduleLogs"].to_string();
    assert!(logs.contains("this module sends the requests to HTTP apps (the host does not offer HostSink::http_post)"), "{report}");
    assert_eq!(report["apps"]["ok"], json!([{ "id": "web", "state": "running" }]), "{report}");
    assert_eq!(report["toolCall"]["ok"], json!({ "isError": false, "text": "echo: own client" }), "{report}");
    assert_eq!(report["shutdown"]["ok"], json!(true), "{report}");

    // The gateway offers it, and says so.
    let mut gateway = GatewayProcess::start_with(GatewayOptions { config, ..Default::default() });
    assert!(
        gateway.wait_for_log("the host sends the requests to HTTP apps", Duration::from_secs(10)),
        "{}",
        gateway.logs()
    );
    assert!(gateway.terminate().is_some_and(|s| s.success()), "{}", gateway.logs());
}

/// The reversed check is a real layout check: a host one minor newer still refuses an older
/// module whose interface changed a descriptor (a major change not called one), naming the type
/// and the field, and which value is whose.
#[test]
fn a_newer_minor_host_refuses_an_older_module_with_a_changed_layout() {
    let host = fixture("append").host;
    let module = fixture("layout").module;
    let output = run_host(&host, &[module.to_str().unwrap()]);
    let message = assert_refused(
        &output,
        &module,
        &["incompatible", "ToolDescriptor", "added_later", "module: added_later", &format!("host-abi {}", interface_version())],
        "next-minor host, module with a changed descriptor",
    );
    eprintln!("refusal: {message}");
}

/// A module of the next major is refused in at most six lines naming both versions — by the
/// gateway (module-info and serving) and by a host of the next minor; and a host of the next
/// major refuses today's module the same way.
#[test]
fn another_major_is_refused_in_a_few_lines_naming_both_versions() {
    let major = fixture("major");
    let (today_major, _) = major_minor(&interface_version());
    let today_version = interface_version();
    let next_version = format!("{}.0.0", today_major + 1);
    let ours = format!("host-abi {today_version}");
    let theirs = format!("host-abi {next_version}");
    let ours_abi = format!("ABI version {today_major}");
    let theirs_abi = format!("ABI version {}", today_major + 1);
    let needles = [ours.as_str(), theirs.as_str(), ours_abi.as_str(), theirs_abi.as_str(), "incompatible"];

    let path = major.module.to_str().unwrap();
    let info = run_gateway(&["module-info", "--module", path], &[]);
    let message = assert_refused(&info, &major.module, &needles, "gateway module-info, next major");
    eprintln!("refusal: {message}");

    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("appsettings.json");
    std::fs::write(&config, "{}").unwrap();
    let serve = run_gateway_with_timeout(
        &["--config", config.to_str().unwrap(), "--urls", "http://127.0.0.1:0", "--module", path],
        &[],
        Duration::from_secs(60),
    );
    let stderr = assert_refused(&serve, &major.module, &needles, "gateway serving, next major");
    assert!(!stderr.contains("Gateway listening on"), "{stderr}");

    // A newer-minor host refuses it too (minor tolerance never crosses a major).
    let host = run_host(&fixture("append").host, &[path]);
    assert_refused(&host, &major.module, &[theirs.as_str(), theirs_abi.as_str()], "next-minor host, next-major module");

    // And a next-major host refuses today's module, naming both versions.
    let today = module_lib().canonicalize().unwrap();
    let old = run_host(&major.host, &[today.to_str().unwrap()]);
    assert_refused(&old, &today, &needles, "next-major host, today's module");
}

/// A module of the previous major (a 1.x module in today's 2.x gateway: the `previous` build
/// declares interface (N-1).1.0 and ABI version N-1) is refused in one line naming both versions,
/// by module-info and when serving.
#[test]
fn a_module_of_the_previous_major_is_refused_in_one_line() {
    let (today_major, _) = major_minor(&interface_version());
    assert!(today_major >= 2, "there is no previous major before 1");
    let previous = fixture("previous");
    let ours = format!("ABI version {today_major} (host-abi {})", interface_version());
    let theirs = format!("ABI version {} (host-abi {}.1.0)", today_major - 1, today_major - 1);
    let needles = [ours.as_str(), theirs.as_str(), "incompatible"];
    let path = previous.module.to_str().unwrap();

    let info = run_gateway(&["module-info", "--module", path], &[]);
    let message = assert_refused(&info, &previous.module, &needles, "gateway module-info, previous major");
    assert_eq!(message.lines().filter(|l| !l.trim().is_empty()).count(), 1, "one line: {message}");
    eprintln!("refusal: {message}");

    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("appsettings.json");
    std::fs::write(&config, "{}").unwrap();
    let serve = run_gateway_with_timeout(
        &["--config", config.to_str().unwrap(), "--urls", "http://127.0.0.1:0", "--module", path],
        &[],
        Duration::from_secs(60),
    );
    let stderr = assert_refused(&serve, &previous.module, &needles, "gateway serving, previous major");
    assert!(!stderr.contains("Gateway listening on"), "{stderr}");
}

// ---------------------------------------------------------------------------------------------
// The README table
// ---------------------------------------------------------------------------------------------

/// README.md's "Module versions" table names, for each pair it lists, a test that exists in
/// `tests/tests/*.rs`, and every test of Must show 1 appears in it.
#[test]
fn the_readme_version_table_names_these_tests() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let start = readme.find("### Module versions").expect("README.md has a '### Module versions' section");
    let section = &readme[start..];
    let section = &section[..section[4..].find("\n#").map(|i| i + 4).unwrap_or(section.len())];
    let rows: Vec<&str> = section.lines().filter(|l| l.starts_with('|') && !l.starts_with("|--") && !l.starts_with("| Host")).collect();
    assert!(rows.len() >= 5, "the table lists at least 5 pairs:\n{section}");
    let sources: String = std::fs::read_dir(repo_root().join("tests/tests"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    for row in &rows {
        let name = row.rsplit('|').nth(1).and_then(|cell| cell.split('`').nth(1));
        let name = name.unwrap_or_else(|| panic!("the row's last cell names no test in backquotes: {row}"));
        assert!(sources.contains(&format!("fn {name}()")), "README row names a test tests/tests/*.rs lacks: {row}");
    }
    for test in [
        "a_newer_minor_module_loads_in_todays_gateway_and_serves",
        "a_newer_minor_host_loads_todays_module_and_reports_the_optional_method_unavailable",
        "another_major_is_refused_in_a_few_lines_naming_both_versions",
    ] {
        assert!(rows.iter().any(|r| r.contains(test)), "README's table does not name {test}:\n{section}");
    }
}
