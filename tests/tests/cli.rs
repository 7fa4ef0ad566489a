//! The command line as an operator reads it (issue 14).

use std::time::Duration;

use gateway_e2e::{
    describe_output, free_port, json, release_bin, run_gateway, wait_until, GatewayOptions, GatewayProcess, Value,
};

#[test]
fn help_describes_each_command_with_its_own_text() {
    let output = run_gateway(&["--help"], &[]);
    assert!(output.status.success());
    let help = String::from_utf8_lossy(&output.stdout).to_string();
    let line = |command: &str| help.lines().find(|l| l.trim_start().starts_with(command)).unwrap_or_default().to_string();
    assert!(line("validate").contains("Check manifest files"), "{help}");
    assert!(!line("validate").contains("calls in flight"), "validate carries boundary-check's text:\n{help}");
    assert!(line("boundary-check").contains("calls in flight"), "{help}");
    assert!(line("apps").contains("discovery finds"), "{help}");
    assert!(line("module-info").contains("ABI version"), "{help}");
}

/// A folder with `appsettings.json` (`config`) and, under `apps/`, one stdio test-app per id.
fn config_folder(config: Value, apps: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for id in apps {
        let folder = dir.path().join("apps").join(id);
        std::fs::create_dir_all(&folder).unwrap();
        let manifest = json!({
            "id": id, "version": "1.2.3", "transport": "stdio",
            "command": release_bin("test-app"), "toolNamePrefix": format!("{id}."),
        });
        std::fs::write(folder.join("openclaw.mcpapp.json"), manifest.to_string()).unwrap();
    }
    std::fs::write(dir.path().join("appsettings.json"), config.to_string()).unwrap();
    dir
}

fn apps_config() -> Value {
    json!({ "McpApps": { "Enabled": true, "DiscoveryPaths": ["./apps"], "Allow": ["*"] } })
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).to_string()
}

/// Log lines at a level (`INFO`, `WARN`) in plain output.
fn lines_at(level: &str, stderr: &str) -> Vec<String> {
    stderr.lines().filter(|l| l.split_whitespace().nth(1) == Some(level)).map(str::to_string).collect()
}

#[test]
fn apps_prints_only_its_table_and_logs_warnings_only_unless_verbose() {
    let dir = config_folder(apps_config(), &["quiet-app"]);
    let cfg = dir.path().join("appsettings.json").display().to_string();
    // RUST_LOG empty counts as unset: the command's own default decides.
    let out = run_gateway(&["apps", "--config", &cfg], &[("RUST_LOG", "")]);
    assert!(out.status.success(), "{}", describe_output(&out));
    let stdout = text(&out.stdout);
    let mut lines = stdout.lines();
    assert!(lines.next().unwrap_or_default().starts_with("ID "), "{}", describe_output(&out));
    for line in lines {
        assert!(line.starts_with("quiet-app ") || line == "1 app(s) discovered", "not part of the table: {line:?}\n{stdout}");
    }
    let stderr = text(&out.stderr);
    assert!(lines_at("INFO", &stderr).is_empty(), "info lines without -v:\n{stderr}");

    let verbose = run_gateway(&["apps", "-v", "--config", &cfg], &[("RUST_LOG", "")]);
    assert!(verbose.status.success(), "{}", describe_output(&verbose));
    assert_eq!(text(&verbose.stdout), stdout, "-v changes only stderr");
    assert!(!lines_at("INFO", &text(&verbose.stderr)).is_empty(), "no info line with -v:\n{}", describe_output(&verbose));
    // The flag is global: before the command too.
    let before = run_gateway(&["-v", "apps", "--config", &cfg], &[("RUST_LOG", "")]);
    assert!(!lines_at("INFO", &text(&before.stderr)).is_empty(), "{}", describe_output(&before));
}

/// `apps --json` prints the module's report as one indented JSON document and nothing else on
/// stdout: the apps in discovery order with their states, a bad manifest as a failed app naming
/// the field.
#[test]
fn apps_json_is_the_discovery_report_indented() {
    let dir = config_folder(apps_config(), &["alpha", "beta"]);
    std::fs::write(dir.path().join("apps/beta/openclaw.mcpapp.json"), r#"{"id":"beta","version":"1.2.3"}"#).unwrap();
    let cfg = dir.path().join("appsettings.json").display().to_string();
    let out = run_gateway(&["apps", "--json", "--config", &cfg], &[("RUST_LOG", "")]);
    assert!(out.status.success(), "{}", describe_output(&out));
    let stdout = text(&out.stdout);
    assert!(stdout.starts_with("{\n  \"") && stdout.ends_with("}\n"), "not one indented document:\n{stdout}");
    let report: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}:\n{stdout}"));
    assert_eq!(report["enabled"], true, "{report}");
    let apps = report["apps"].as_array().unwrap_or_else(|| panic!("no apps: {report}"));
    let summary: Vec<(&str, &str)> = apps.iter().map(|a| (a["key"].as_str().unwrap_or_default(), a["state"].as_str().unwrap_or_default())).collect();
    assert_eq!(summary, [("alpha", "validated"), ("beta", "failed")], "{report}");
    assert_eq!(apps[0]["manifest"]["version"], "1.2.3", "{report}");
    let errors = apps[1]["validationErrors"].as_array().unwrap_or_else(|| panic!("no validation errors: {report}"));
    assert!(errors.iter().any(|e| e["field"] == "command"), "{report}");
}

/// A listing piped into a reader that stops early (`apps | head -1`) ends the command as it ends
/// `cat`: by SIGPIPE, quietly — not a panic of the table's `println!` and not a "Broken pipe"
/// error. 500 apps' table and reports are more than a pipe holds (64 KiB), so the writer meets
/// the closed pipe.
#[test]
fn a_listing_into_a_reader_that_stops_early_ends_quietly() {
    use std::io::Read;
    use std::os::unix::process::ExitStatusExt;
    let ids: Vec<String> = (0..500).map(|i| format!("app{i}")).collect();
    let dir = config_folder(apps_config(), &ids.iter().map(String::as_str).collect::<Vec<_>>());
    let cfg = dir.path().join("appsettings.json").display().to_string();
    for args in [vec!["apps"], vec!["apps", "--json"], vec!["apps", "list", "--json"]] {
        let mut cmd = std::process::Command::new(gateway_e2e::gateway_bin());
        gateway_e2e::scrub_config_env(&mut cmd);
        cmd.args(&args).args(["--config", &cfg]).env("RUST_LOG", "").stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let mut first = [0u8; 16];
        child.stdout.take().unwrap().read_exact(&mut first).unwrap();
        // The read end closes here, long before the listing has been written.
        let mut stderr = String::new();
        child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGPIPE), "{args:?}: {status:?}\n{stderr}");
        assert!(!stderr.contains("panicked") && !stderr.contains("Broken pipe"), "{args:?}: {stderr}");
    }
}

/// A path naming something that never ends (`/dev/zero`) as a manifest to validate or as the
/// configuration is an error naming the limit, at once — not a read that never ends while its
/// buffer takes the memory.
#[test]
fn a_file_that_never_ends_is_an_error_naming_the_limit() {
    let out = run_gateway(&["validate", "/dev/zero"], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", describe_output(&out));
    assert!(text(&out.stdout).contains("the limit is 1048576"), "{}", describe_output(&out));
    for command in [vec!["apps"], vec!["validate", "x.json"], vec![]] {
        let mut args = vec!["--config", "/dev/zero"];
        args.extend(command);
        let out = run_gateway(&args, &[]);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", describe_output(&out));
        assert!(text(&out.stderr).contains("cannot read configuration file /dev/zero: larger than 16777216 bytes"), "{args:?}: {}", describe_output(&out));
    }
}

#[test]
fn validate_requires_a_semantic_version() {
    let dir = tempfile::tempdir().unwrap();
    for bad in ["1.2", "banana"] {
        let path = dir.path().join(format!("{bad}.json"));
        std::fs::write(&path, json!({"id": "v", "command": "x", "version": bad}).to_string()).unwrap();
        let out = run_gateway(&["validate", &path.display().to_string()], &[]);
        assert_eq!(out.status.code(), Some(1), "{}", describe_output(&out));
        let stdout = text(&out.stdout);
        let error = stdout.lines().find(|l| l.trim_start().starts_with("error: version")).unwrap_or_else(|| panic!("{stdout}"));
        assert!(error.contains("semantic version") && error.contains(bad), "{error}");
    }
    let good = dir.path().join("good.json");
    std::fs::write(&good, json!({"id": "v", "command": "x", "version": "1.2.0-rc.1"}).to_string()).unwrap();
    let out = run_gateway(&["validate", &good.display().to_string()], &[]);
    assert!(out.status.success(), "{}", describe_output(&out));
}

#[test]
fn an_unknown_configuration_key_is_named_in_one_warning() {
    let mut config = apps_config();
    config["Gateway"] = json!({ "Urlz": "http://127.0.0.1:1" });
    config["McpApps"]["Enabled"] = json!(false);
    let gateway = GatewayProcess::start(config.clone());
    let warnings: Vec<String> = gateway.log_lines().into_iter().filter(|l| l.contains("Gateway.Urlz")).collect();
    assert_eq!(warnings.len(), 1, "{}", gateway.logs());
    assert!(warnings[0].contains("WARN") && warnings[0].contains("unknown configuration key"), "{}", warnings[0]);
    assert!(!gateway.logs().contains("unknown configuration key McpApps"), "{}", gateway.logs());
    assert_eq!(gateway.get("/healthz").0, 200, "the gateway serves all the same");

    // The one-shot commands warn the same way, on stderr only.
    let dir = config_folder(config, &[]);
    let cfg = dir.path().join("appsettings.json").display().to_string();
    let out = run_gateway(&["apps", "--config", &cfg], &[("RUST_LOG", "")]);
    assert!(out.status.success(), "{}", describe_output(&out));
    let stderr = text(&out.stderr);
    assert_eq!(stderr.lines().filter(|l| l.contains("Gateway.Urlz")).count(), 1, "{stderr}");
    assert!(!text(&out.stdout).contains("Gateway.Urlz"));
    // An environment variable is a key like any other.
    let env = run_gateway(&["apps", "--config", &cfg], &[("RUST_LOG", ""), ("Agent__Modle", "x")]);
    assert!(text(&env.stderr).contains("Agent.Modle"), "{}", describe_output(&env));
}

#[test]
fn json_logs_are_one_object_per_line_module_lines_included() {
    let mut config = apps_config();
    config["Logging"] = json!({ "Format": "json" });
    let dir = config_folder(config, &["json-app"]);
    let mut gateway = GatewayProcess::start_with(GatewayOptions {
        config: Value::Null,
        config_dir: Some(dir.path().to_path_buf()),
        ..Default::default()
    });
    let running = wait_until(Duration::from_secs(30), Duration::from_millis(100), || {
        gateway.get_json("/apps/health").1["apps"].as_array().is_some_and(|a| a.iter().any(|x| x["state"] == "running"))
    });
    assert!(running, "the app did not run:\n{}", gateway.logs());
    gateway.terminate();
    let lines = gateway.log_lines();
    let records: Vec<Value> = lines
        .iter()
        .map(|l| serde_json::from_str::<Value>(l).unwrap_or_else(|e| panic!("not a JSON object ({e}): {l}")))
        .collect();
    for r in &records {
        assert!(r.is_object() && r["level"].is_string() && r["target"].is_string() && r["timestamp"].is_string(), "{r}");
    }
    let message = |r: &Value| r["message"].as_str().unwrap_or_default().to_string();
    assert!(records.iter().any(|r| message(r).starts_with("Gateway listening on")), "{lines:#?}");
    assert!(records.iter().any(|r| message(r).starts_with("Gateway stopped")), "{lines:#?}");
    let module = records
        .iter()
        .find(|r| r["target"].as_str().unwrap().starts_with("mcpapp_plugin") && message(r).contains("json-app"));
    assert!(module.is_some(), "no module line about the app:\n{lines:#?}");
}

#[test]
fn apps_url_lists_the_live_states_of_a_running_gateway() {
    let token = "cli-e2e-token";
    let mut config = apps_config();
    config["Gateway"] = json!({ "AlwaysRequireAuth": true, "AuthTokenEnv": "CLI_E2E_TOKEN" });
    let dir = config_folder(config.clone(), &["live-app"]);
    let gateway = GatewayProcess::start_with(GatewayOptions {
        config: Value::Null,
        config_dir: Some(dir.path().to_path_buf()),
        env: vec![("CLI_E2E_TOKEN".into(), token.into())],
        ..Default::default()
    });
    let base = gateway.base_url().to_string();
    let live = |args: &[&str], env: &[(&str, &str)]| {
        let mut all = vec!["apps", "--url", base.as_str()];
        all.extend_from_slice(args);
        let mut env = env.to_vec();
        env.push(("RUST_LOG", ""));
        if !env.iter().any(|(k, _)| *k == "GATEWAY_AUTH_TOKEN") {
            env.push(("GATEWAY_AUTH_TOKEN", ""));
        }
        run_gateway(&all, &env)
    };

    // Without the token: one clear line, exit 1.
    let refused = live(&[], &[]);
    assert_eq!(refused.status.code(), Some(1), "{}", describe_output(&refused));
    let stderr = text(&refused.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("requires a token") && stderr.contains("--token"), "{stderr}");
    assert!(text(&refused.stdout).is_empty());
    let wrong = live(&["--token", "nope"], &[]);
    assert_eq!(wrong.status.code(), Some(1));
    assert!(text(&wrong.stderr).contains("refused the token"), "{}", describe_output(&wrong));

    let running = wait_until(Duration::from_secs(30), Duration::from_millis(200), || {
        let out = live(&["--token", token, "--json"], &[]);
        out.status.success()
            && serde_json::from_slice::<Value>(&out.stdout).is_ok_and(|v| v["apps"][0]["state"] == "running")
    });
    assert!(running, "live-app never listed as running:\n{}", gateway.logs());

    let out = live(&["--token", token], &[]);
    assert!(out.status.success(), "{}", describe_output(&out));
    let stdout = text(&out.stdout);
    let row = stdout.lines().find(|l| l.starts_with("live-app ")).unwrap_or_else(|| panic!("{stdout}"));
    assert!(row.contains("running") && row.contains("1.2.3") && row.contains("/apps/mcp/live-app"), "{row}");
    assert!(stdout.lines().next().unwrap().starts_with("ID "), "{stdout}");
    assert!(stdout.contains(&format!("1 app(s) at {base}")), "{stdout}");

    // The token may come from the environment, as the gateway's own does.
    let json_out = live(&["--json"], &[("GATEWAY_AUTH_TOKEN", token)]);
    assert!(json_out.status.success(), "{}", describe_output(&json_out));
    let listing: Value = serde_json::from_slice(&json_out.stdout).unwrap();
    let app = &listing["apps"][0];
    assert_eq!((app["key"].as_str(), app["state"].as_str()), (Some("live-app"), Some("running")), "{listing}");
    assert_eq!(app["manifest"]["version"], "1.2.3", "{listing}");
    assert!(app["validationErrors"].as_array().is_some_and(Vec::is_empty), "{listing}");

    // A gateway that is not there: one line, exit 1.
    let nowhere = format!("http://127.0.0.1:{}", free_port());
    let out = run_gateway(&["apps", "--url", &nowhere], &[("RUST_LOG", "")]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("cannot reach the gateway at"), "{stderr}");
}
