//! One-shot commands that use the module without serving (SPEC R41): `validate` and `apps`; and
//! `apps --url`, which asks a running gateway instead.
//!
//! They print their result on stdout and nothing else: logs go to stderr (warnings only unless
//! `-v`, see `logging.rs`).

use std::future::Future;
use std::io::Write as _;
use std::path::Path;
use std::sync::Arc;

use host_abi::payloads::{FieldError, Transport, ValidateParams, ValidationResult, VALIDATE};
use serde::{Deserialize, Serialize};

use serde_json::{json, Value};

use std::time::Duration;

use crate::config::gateway_config;
use crate::http::auth::DEFAULT_TOKEN_ENV;
use crate::install::progress::{Progress, Style};
use crate::install::{self, InstallError};
use crate::module::host::ModuleHost;
use crate::serve;
use crate::config::settings::Settings;
use crate::BoxError;

/// Loads the module, creates an instance, runs `work`, and shuts the instance down again.
pub fn with_module<T, F, Fut>(config: Option<&Path>, module: Option<&Path>, work: F) -> Result<T, BoxError>
where
    F: FnOnce(Arc<ModuleHost>) -> Fut,
    Fut: Future<Output = Result<T, BoxError>>,
{
    let (settings, loaded) = serve::load(config, module)?;
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    runtime.block_on(async move {
        let module = serve::create_module(&settings, loaded)?;
        let result = work(module.clone()).await;
        if let Err(e) = module.shutdown().await {
            tracing::warn!("module shutdown reported: {e}");
        }
        result
    })
}

/// `gateway-host validate PATH…`: prints every problem with its field; `Ok(false)` when any
/// manifest is invalid.
pub fn validate(config: Option<&Path>, module: Option<&Path>, paths: &[String], json: bool) -> Result<bool, BoxError> {
    let params = ValidateParams { paths: paths.to_vec() };
    let results: Vec<ValidationResult> = with_module(config, module, |m| async move { Ok(m.invoke_typed(VALIDATE, &params).await?) })?;
    let all_valid = results.iter().all(|r| r.valid);
    if json {
        println!("{}", serde_json::to_string_pretty(&results)?);
        return Ok(all_valid);
    }
    for r in &results {
        let id = r.id.as_deref().map(|i| format!(" ({i})")).unwrap_or_default();
        println!("{} {}{id}", if r.valid { "VALID  " } else { "INVALID" }, r.path);
        for e in &r.errors {
            println!("  error: {e}");
        }
        for w in &r.warnings {
            println!("  warning: {w}");
        }
        if let Some(c) = r.rest.get("confinement").filter(|c| !c.is_null()) {
            println!("  confinement: {}", confinement_summary(c));
        }
    }
    let invalid = results.iter().filter(|r| !r.valid).count();
    println!("{} manifest(s) checked, {invalid} invalid", results.len());
    Ok(all_valid)
}

/// `gateway-host apps`: what discovery finds with this configuration, without starting anything.
pub fn apps(config: Option<&Path>, module: Option<&Path>, json: bool) -> Result<(), BoxError> {
    if json {
        let report = with_module(config, module, |m| async move { Ok(m.discover_json().await?) })?;
        return print_pretty(&report);
    }
    let report = with_module(config, module, |m| async move { Ok(m.discover().await?) })?;
    if !report.enabled {
        println!("MCP Apps are disabled (McpApps.Enabled is false)");
        return Ok(());
    }
    let rows: Vec<[String; 8]> = report
        .apps
        .iter()
        .map(|a| {
            let m = a.manifest.clone().unwrap_or_default();
            let target = match Transport::of(&m.transport) {
                Transport::Http => m.url.clone().unwrap_or_default(),
                _ => std::iter::once(m.command.clone().unwrap_or_default()).chain(m.arguments.iter().cloned()).collect::<Vec<_>>().join(" "),
            };
            let mut notes: Vec<String> = a.validation_errors.iter().map(|e| format!("{}: {}", e.field, e.message)).collect();
            if let Some(r) = &a.disabled_reason {
                notes.push(r.clone());
            } else if let Some(e) = &a.last_error {
                if notes.is_empty() {
                    notes.push(e.clone());
                }
            }
            [
                a.key.clone(),
                a.state.clone(),
                m.version.clone(),
                m.transport.clone(),
                m.tool_name_prefix.clone(),
                format!("{}s/{}s", m.startup_timeout_seconds, m.request_timeout_seconds),
                a.rest.get("confinement").map(confinement_short).unwrap_or_else(|| "-".to_string()),
                if notes.is_empty() { target } else { format!("{target}  [{}]", notes.join("; ")) },
            ]
        })
        .collect();
    print_table(&rows);
    for s in &report.skipped {
        println!("skipped {}: {}", s.path, s.reason);
    }
    for e in &report.config_errors {
        println!("config error: {}: {}", e.field, e.message);
    }
    println!("{} app(s) discovered", rows.len());
    Ok(())
}

/// One line for an app's effective confinement (SPEC R48), from the module's report of it
/// (`apps/permissions.rs`): the mode, what it may read and write, its network and limits.
pub fn confinement_summary(c: &Value) -> String {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    if let Some(why) = c.get("refused").and_then(Value::as_str) {
        return format!("refused: {why}");
    }
    if c.get("confined").and_then(Value::as_bool) != Some(true) {
        let reason = c.get("reason").map(text).unwrap_or_default();
        return format!("none (Sandbox.Mode {}){}", text(&c["mode"]), if reason.is_empty() { String::new() } else { format!(": {reason}") });
    }
    let list = |v: &Value| v.as_array().map(|a| a.iter().map(text).collect::<Vec<_>>().join(", ")).unwrap_or_default();
    let fs = &c["filesystem"];
    let limits = &c["limits"];
    let limit = |k: &str, unit: &str| match limits.get(k).and_then(Value::as_u64) {
        Some(n) => format!("{n}{unit}"),
        None => "unlimited".to_string(),
    };
    let mut line = format!(
        "{} (Landlock ABI {}); read+exec: {}; read+write: {}; network: {}; limits: memory {}, processes {}, open files {}, CPU {}; seccomp denies {} calls",
        text(&c["mode"]),
        c["landlockAbi"].as_i64().unwrap_or(0),
        list(&fs["read"]),
        list(&fs["write"]),
        text(&c["network"]),
        limit("memoryMb", " MiB"),
        limit("processes", ""),
        limit("openFiles", ""),
        limit("cpuSeconds", " s"),
        c["seccompDenied"].as_array().map_or(0, Vec::len),
    );
    let denied = list(&fs["denied"]);
    if !denied.is_empty() {
        line.push_str(&format!("; not granted: {denied}"));
    }
    let notes = list(&c["notes"]);
    if !notes.is_empty() {
        line.push_str(&format!("; {notes}"));
    }
    line
}

/// An app's confinement in a few words, for the `apps` table (`--json` has all of it):
/// `enforce L7 net:none mem:2048M procs:256`, `off`, `refused`, `-` when not known.
pub fn confinement_short(c: &Value) -> String {
    if c.is_null() {
        return "-".to_string();
    }
    if c.get("refused").is_some() {
        return "refused".to_string();
    }
    let mode = c["mode"].as_str().unwrap_or("?");
    if c.get("confined").and_then(Value::as_bool) != Some(true) {
        return mode.to_string();
    }
    let net = c["network"].as_str().unwrap_or_default();
    let net = match net.split_whitespace().next().unwrap_or_default() {
        "TCP" => format!("tcp:{}", net.split('[').nth(1).and_then(|r| r.split(']').next()).unwrap_or_default().replace(' ', "")),
        word => word.to_string(),
    };
    let limit = |k: &str, unit: &str| c["limits"][k].as_u64().map_or("-".to_string(), |n| format!("{n}{unit}"));
    format!("{mode} L{} net:{net} mem:{} procs:{}", c["landlockAbi"].as_i64().unwrap_or(0), limit("memoryMb", "M"), limit("processes", ""))
}

/// The table of `apps`: one row per app, the last column unpadded.
fn print_table(rows: &[[String; 8]]) {
    let header = ["ID", "STATE", "VERSION", "TRANSPORT", "PREFIX", "TIMEOUTS", "CONFINEMENT", "TARGET / NOTES"];
    let mut widths = header.map(str::len);
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row.iter()).take(7) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let print = |cells: &[&str]| {
        let mut line = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i < 7 {
                line.push_str(&format!("{cell:<width$}  ", width = widths[i]));
            } else {
                line.push_str(cell);
            }
        }
        println!("{}", line.trim_end());
    };
    print(&header);
    for row in rows {
        print(&row.iter().map(String::as_str).collect::<Vec<_>>());
    }
}

/// `report` (JSON text) indented, on stdout. The module indents it itself: printed as it
/// wrote it, once checked to be one JSON value — decoding megabytes of it into the host's types
/// only to write them out again was a fifth of `apps --json` on a 10,000-app tree, and indenting
/// it here a sixth (BENCHMARKS.md, "where discovery's time goes"). A module that does not (an
/// older one) has its text indented here. Nothing is printed unless the whole text is JSON.
fn print_pretty(report: &str) -> Result<(), BoxError> {
    let invalid = |e: serde_json::Error| format!("the module's discovery report is not valid JSON: {e}");
    let mut out = std::io::stdout().lock();
    if report.starts_with("{\n") {
        one_json_value(report).map_err(invalid)?;
        out.write_all(report.trim_end().as_bytes())?;
        out.write_all(b"\n")?;
    } else {
        out.write_all(&indented(report).map_err(invalid)?)?;
    }
    out.flush()?;
    Ok(())
}

/// Whether `text` is one JSON value (white space around it allowed), read without building it.
fn one_json_value(text: &str) -> Result<(), serde_json::Error> {
    let mut reader = serde_json::Deserializer::from_str(text);
    serde::de::IgnoredAny::deserialize(&mut reader)?;
    reader.end()
}

/// `text` as `serde_json::to_writer_pretty` writes it, and a line end; without a tree in between.
fn indented(text: &str) -> Result<Vec<u8>, serde_json::Error> {
    // Indented, a report of many apps is ~1.7 times its text: room for twice, so that it is
    // never copied to grow (pages not written are never touched).
    let mut pretty = Vec::with_capacity(text.len() * 2);
    let mut reader = serde_json::Deserializer::from_str(text);
    serde_transcode::transcode(&mut reader, &mut serde_json::Serializer::pretty(&mut pretty))?;
    reader.end()?;
    pretty.push(b'\n');
    Ok(pretty)
}

/// A listing piped into a reader that stops early (`gateway-host apps --json | head`) ends the
/// command as it ends `ls` or `cat`: quietly, by `SIGPIPE`. Rust ignores the signal so that a
/// write to a closed socket is an error rather than a kill, which turned the closed pipe into a
/// panic of `println!` or a "Broken pipe" error. Only once nothing but stdout is written to.
pub fn end_quietly_when_stdout_closes() {
    // SAFETY: sets one signal's disposition back to the default; nothing here handles SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// `gateway-host apps --url URL`: the MCP Apps of the gateway running at `url`, with their live
/// states, from its `GET /apps/health` (the listing the browser page shows). The token is
/// `--token`, else the one the gateway itself would use with this configuration
/// (`Gateway.AuthToken`, else the variable `Gateway.AuthTokenEnv` names).
///
/// The table has the columns of the offline listing; the effective settings a running gateway
/// does not publish (prefix, timeouts) show as `-`, and TARGET is the app's `/apps/mcp` URL.
/// `--json` prints each app in the offline report's shape (`key`, `state`, `manifest.version`,
/// `manifest.transport`, `validationErrors`, `lastError`) plus what the gateway adds (`name`,
/// counts, `hasUi`, `mcp`).
pub fn apps_live(config: Option<&Path>, url: &str, token: Option<String>, json: bool) -> Result<(), BoxError> {
    let settings = Settings::load(config)?;
    let token = token.filter(|t| !t.trim().is_empty()).or_else(|| configured_token(&settings));
    let base = url.trim().trim_end_matches('/').to_string();
    let health: LiveHealth = serde_json::from_value(fetch_health(&base, token.as_deref())?)
        .map_err(|e| format!("{base}/apps/health answered an unexpected listing: {e}"))?;
    // The gateway has answered: from here on only stdout is written to.
    end_quietly_when_stdout_closes();
    let entries: Vec<LiveEntry> = health.apps.into_iter().map(LiveEntry::from).collect();
    if json {
        let listing = json!({
            "url": base,
            "gateway": { "name": health.name, "version": health.version },
            "apps": entries,
        });
        println!("{}", serde_json::to_string_pretty(&listing)?);
        return Ok(());
    }
    let rows: Vec<[String; 8]> = entries
        .iter()
        .map(|e| {
            let mut notes: Vec<String> = e.validation_errors.iter().map(|v| format!("{}: {}", v.field, v.message)).collect();
            if let (true, Some(last)) = (notes.is_empty(), &e.last_error) {
                notes.push(last.clone());
            }
            let target = e.mcp.clone().unwrap_or_default();
            [
                e.key.clone(),
                e.state.clone(),
                e.manifest.version.clone(),
                e.manifest.transport.clone(),
                "-".to_string(),
                "-".to_string(),
                confinement_short(&e.confinement),
                if notes.is_empty() { target } else { format!("{target}  [{}]", notes.join("; ")) },
            ]
        })
        .collect();
    print_table(&rows);
    println!("{} app(s) at {base}", rows.len());
    Ok(())
}

/// `GET /apps/health` as `apps --url` reads it (see `http/health.rs` and `module_host::app_json`).
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct LiveHealth {
    name: String,
    version: String,
    apps: Vec<LiveApp>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct LiveApp {
    id: String,
    name: String,
    version: String,
    state: String,
    transport: String,
    tools: u64,
    resources: u64,
    resource_templates: u64,
    prompts: u64,
    has_ui: bool,
    ui_resource_uri: Option<String>,
    last_error: Option<String>,
    /// `field: message`.
    validation_errors: Vec<String>,
    mcp: Option<String>,
    confinement: Value,
}

/// One app of `apps --url --json`: the offline report's fields (`key`, `state`,
/// `manifest.version`/`transport`, `validationErrors`, `lastError`) and what the gateway adds.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct LiveEntry {
    key: String,
    state: String,
    manifest: LiveManifest,
    validation_errors: Vec<FieldError>,
    last_error: Option<String>,
    name: String,
    tools: u64,
    resources: u64,
    resource_templates: u64,
    prompts: u64,
    has_ui: bool,
    ui_resource_uri: Option<String>,
    mcp: Option<String>,
    confinement: Value,
}

#[derive(Serialize)]
struct LiveManifest {
    version: String,
    transport: String,
}

impl From<LiveApp> for LiveEntry {
    fn from(a: LiveApp) -> LiveEntry {
        let validation_errors = a
            .validation_errors
            .iter()
            .map(|e| match e.split_once(": ") {
                Some((field, message)) => FieldError { field: field.into(), message: message.into() },
                None => FieldError { field: String::new(), message: e.clone() },
            })
            .collect();
        LiveEntry {
            key: a.id,
            state: a.state,
            manifest: LiveManifest { version: a.version, transport: a.transport },
            validation_errors,
            last_error: a.last_error,
            name: a.name,
            tools: a.tools,
            resources: a.resources,
            resource_templates: a.resource_templates,
            prompts: a.prompts,
            has_ui: a.has_ui,
            ui_resource_uri: a.ui_resource_uri,
            mcp: a.mcp,
            confinement: a.confinement,
        }
    }
}

/// The token the gateway would use with these settings (see `http/auth.rs`).
fn configured_token(settings: &Settings) -> Option<String> {
    let env = settings.get_str("Gateway:AuthTokenEnv").unwrap_or_else(|| DEFAULT_TOKEN_ENV.to_string());
    settings
        .get_str("Gateway:AuthToken")
        .or_else(|| std::env::var(&env).ok().map(|t| t.trim().to_string()).filter(|t| !t.is_empty()))
}

/// `GET {base}/apps/health`, with one-line errors an operator can act on.
fn fetch_health(base: &str, token: Option<&str>) -> Result<Value, BoxError> {
    let target = reqwest::Url::parse(&format!("{base}/apps/health"))
        .map_err(|e| format!("--url {base}: not a URL like http://127.0.0.1:5000 ({e})"))?;
    if !matches!(target.scheme(), "http" | "https") {
        return Err(format!("--url {base}: not a URL like http://127.0.0.1:5000").into());
    }
    let host = target.host_str().unwrap_or_default().trim_matches(['[', ']']);
    let loopback =
        host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
    let mut client = reqwest::Client::builder()
        .connect_timeout(std::time::Duration::from_secs(5))
        .timeout(std::time::Duration::from_secs(30));
    if loopback {
        // A proxy of the environment cannot reach this machine's loopback.
        client = client.no_proxy();
    }
    let client = client.build()?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let (status, body) = runtime.block_on(async {
        let mut request = client.get(target.clone());
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.map_err(|e| format!("cannot reach the gateway at {base}: {}", root_cause(&e)))?;
        let status = response.status();
        let body = response.text().await.map_err(|e| format!("reading the answer of {base}: {}", root_cause(&e)))?;
        Ok::<_, BoxError>((status, body))
    })?;
    let parsed: Option<Value> = serde_json::from_str(&body).ok();
    let message = parsed
        .as_ref()
        .and_then(|v| v.pointer("/error/message").or_else(|| v.get("message")))
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| body.chars().take(200).collect::<String>());
    // One line, whatever the body held.
    let message = message.split_whitespace().collect::<Vec<_>>().join(" ");
    match status.as_u16() {
        200..=299 => parsed.ok_or_else(|| format!("{target} did not answer JSON: is {base} a gateway-host?").into()),
        401 if token.is_none() => Err(format!(
            "the gateway at {base} requires a token: pass --token, or set {DEFAULT_TOKEN_ENV} (or Gateway.AuthToken / \
             the variable Gateway.AuthTokenEnv names in --config)"
        )
        .into()),
        401 => Err(format!("the gateway at {base} refused the token (401): {message}").into()),
        404 => Err(format!("{target} answered 404: is {base} a gateway-host?").into()),
        _ => Err(format!("the gateway at {base} answered {status}: {message}").into()),
    }
}

/// Why a request failed, in a few words: the innermost cause (`Connection refused (os error
/// 111)`, `operation timed out`); reqwest's own message only repeats the URL.
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = e;
    while let Some(inner) = cause.source() {
        cause = inner;
    }
    cause.to_string()
}

// ---------------------------------------------------------------------------------------------
// Installing apps (SPEC R53): `apps add|update|remove|list --installed`. The work is in
// `install/`; here is the command line's side: progress, the printed result, and following a
// running gateway (`--url`).

pub use crate::install::AddRequest;

/// How `apps add|update|remove` report, and the gateway they follow.
#[derive(Debug, Clone, Default)]
pub struct InstallOutput {
    pub quiet: bool,
    pub json: bool,
    pub url: Option<String>,
    pub token: Option<String>,
}

impl InstallOutput {
    fn progress(&self) -> Progress {
        Progress::new(if self.json { Style::Quiet } else { Style::for_stderr(self.quiet) })
    }
}

/// How long `--url` waits for a gateway to run an installed version (its startup timeout is 30 s;
/// the watcher's debounce and a restart come on top).
const FOLLOW_TIMEOUT: Duration = Duration::from_secs(90);

/// How long `--url` waits for an installed app to show up in the gateway's listing at all. The
/// gateway's watcher picks a new manifest up within a second (its debounce is half a second):
/// an app still unlisted after this goes to a folder that gateway does not discover (this
/// command ran with another configuration or from another folder), and waiting the whole
/// [`FOLLOW_TIMEOUT`] for it would only end in "not there yet".
const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(10);

/// `gateway-host apps add SOURCE`: installs, checks and prints the manifest. `Ok(false)` when the
/// install was refused or failed (said on stderr, or as `--json`'s object).
pub fn apps_add(config: Option<&Path>, module: Option<&Path>, request: AddRequest, output: InstallOutput) -> Result<bool, BoxError> {
    let settings = Settings::load(config)?;
    let apps_path = gateway_config::apps_path(&settings);
    let progress = output.progress();
    let cwd = std::env::current_dir()?;
    let installed = with_module(config, module, |m| async move {
        Ok(install::run(&m, &progress, async {
            progress.step(&format!("resolving {}", request.source));
            let known = install::known_ids(&m, false).await?;
            install::prepare_add(&apps_path, &request, &cwd, &known)
        })
        .await)
    })?;
    let committed = match installed {
        Ok(c) => c,
        Err(e) => return Ok(report_failure(&e, &output)),
    };
    let mut app = Value::Null;
    if let Some(url) = &output.url {
        match follow(&settings, config, url, output.token.clone(), &committed, &output.progress()) {
            Ok(found) => app = found,
            Err(why) => {
                // A new app is not taken back: its manifest may only need a value filled in.
                let message = format!("'{}' is installed ({}) but did not run at {url}: {why}", committed.id, committed.manifest_path.display());
                if output.json {
                    println!("{}", json!({ "ok": false, "error": { "code": "not_running", "message": message }, "manifestPath": committed.manifest_path, "manifest": committed.manifest }));
                } else {
                    eprintln!("gateway-host: {message}");
                }
                return Ok(false);
            }
        }
    }
    report_success(&committed, app, &output);
    Ok(true)
}

/// `gateway-host apps update ID [--version V]`: installs the version beside the one serving,
/// switches the manifest, and with `--url` waits for the gateway to run it (rolling back if it
/// does not); without `--url` the old version's folder stays until the next update.
pub fn apps_update(
    config: Option<&Path>,
    module: Option<&Path>,
    id: &str,
    version: Option<String>,
    allow_scripts: bool,
    output: InstallOutput,
) -> Result<bool, BoxError> {
    let settings = Settings::load(config)?;
    let apps_path = gateway_config::apps_path(&settings);
    let progress = output.progress();
    let id_owned = id.to_string();
    let installed = with_module(config, module, |m| async move {
        Ok(install::run(&m, &progress, async {
            progress.step(&format!("updating {id_owned}"));
            install::prepare_update(&apps_path, &id_owned, version, allow_scripts)
        })
        .await)
    })?;
    let committed = match installed {
        Ok(c) => c,
        Err(e) => return Ok(report_failure(&e, &output)),
    };
    let mut app = Value::Null;
    match &output.url {
        Some(url) => match follow(&settings, config, url, output.token.clone(), &committed, &output.progress()) {
            Ok(found) => app = found,
            Err(why) => {
                let error = committed.roll_back(why);
                return Ok(report_failure(&error, &output));
            }
        },
        None => output.progress().note("the previous version's folder is kept until the next update (pass --url to have it removed once the gateway runs this one)"),
    }
    report_success(&committed, app, &output);
    if output.url.is_some() {
        // The gateway runs the new version: the old one's folder goes.
        committed.finish();
    }
    Ok(true)
}

/// `gateway-host apps remove ID`: the manifest goes first (a running gateway stops the app; with
/// `--url`, once it has), then the app's folder.
pub fn apps_remove(config: Option<&Path>, id: &str, output: InstallOutput) -> Result<bool, BoxError> {
    let settings = Settings::load(config)?;
    let apps_path = gateway_config::apps_path(&settings);
    let progress = output.progress();
    progress.step(&format!("removing {id}"));
    let app_dir = match install::remove_manifest(&apps_path, id) {
        Ok(dir) => dir,
        Err(e) => return Ok(report_failure(&e, &output)),
    };
    if let Some(url) = &output.url {
        progress.step(&format!("waiting for the gateway at {url} to stop it"));
        let token = output.token.clone().filter(|t| !t.trim().is_empty()).or_else(|| configured_token(&settings));
        let gone = wait_for(url, token.as_deref(), FOLLOW_TIMEOUT, |apps| (!apps.iter().any(|a| a.id == id)).then_some(Ok(Value::Null)));
        if let Err(why) = gone {
            progress.note(&format!("the gateway at {url} did not stop it: {why}; its folder is removed anyway"));
        }
    }
    if let Err(e) = install::remove_folder(&app_dir) {
        return Ok(report_failure(&e, &output));
    }
    if output.json {
        println!("{}", json!({ "ok": true, "id": id, "removed": app_dir }));
    } else {
        progress.step(&format!("removed {id} ({})", app_dir.display()));
    }
    Ok(true)
}

/// `gateway-host apps list --installed`: the apps in `Gateway.AppsPath` and where they came from.
pub fn apps_installed(config: Option<&Path>, json: bool) -> Result<(), BoxError> {
    let settings = Settings::load(config)?;
    let apps_path = gateway_config::apps_path(&settings);
    let apps = install::list_installed(&apps_path);
    if json {
        println!("{}", serde_json::to_string_pretty(&json!({ "appsPath": apps_path, "apps": apps }))?);
        return Ok(());
    }
    let header = ["ID", "VERSION", "PACKAGE VERSION", "SOURCE"];
    let rows: Vec<[String; 4]> = apps.iter().map(|a| [a.id.clone(), a.version.clone(), a.package_version.clone(), a.source.clone()]).collect();
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row.iter()) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for row in std::iter::once(header.map(str::to_string)).chain(rows) {
        println!("{:<w0$}  {:<w1$}  {:<w2$}  {}", row[0], row[1], row[2], row[3], w0 = widths[0], w1 = widths[1], w2 = widths[2]);
    }
    println!("{} app(s) installed in {}", apps.len(), apps_path.display());
    Ok(())
}

/// Waits for the gateway at `url` to run the installed version: its entry in `/apps/health` once
/// Running, the reason if it went Failed, did not show up in time, or the gateway lists no app
/// of its id at all after [`DISCOVERY_TIMEOUT`] (it does not discover the folder it went to).
fn follow(settings: &Settings, config: Option<&Path>, url: &str, token: Option<String>, committed: &install::Committed, progress: &Progress) -> Result<Value, String> {
    let (id, version) = (committed.id.as_str(), committed.version.as_str());
    progress.step(&format!("waiting for the gateway at {url} to run {id} {version}"));
    let token = token.filter(|t| !t.trim().is_empty()).or_else(|| configured_token(settings));
    let since = std::time::Instant::now();
    let mut listed = false;
    wait_for(url, token.as_deref(), FOLLOW_TIMEOUT, |apps| {
        listed |= apps.iter().any(|a| a.id == id);
        if !listed && since.elapsed() >= DISCOVERY_TIMEOUT {
            return Some(Err(undiscovered(id, settings, config, DISCOVERY_TIMEOUT)));
        }
        let app = apps.iter().find(|a| a.id == id && a.version == version)?;
        match app.state.as_str() {
            "running" => Some(Ok(json!({ "id": app.id, "version": app.version, "state": app.state, "tools": app.tools, "hasUi": app.has_ui }))),
            "failed" => Some(Err(app.last_error.clone().unwrap_or_else(|| "it failed".into()))),
            _ => None,
        }
    })
}

/// Why a gateway never listed an app installed into this command's apps folder: it does not
/// discover that folder, and how to put the two together.
fn undiscovered(id: &str, settings: &Settings, config: Option<&Path>, waited: Duration) -> String {
    let whose = match config {
        Some(path) => format!("Gateway.AppsPath of {}", path.display()),
        None => "no --config: the current folder's".to_string(),
    };
    format!(
        "it lists no app '{id}' after {} s, so it does not discover {}, where this command installs ({whose}); \
         run the command with the gateway's own --config, or add that folder to the gateway's McpApps.DiscoveryPaths",
        waited.as_secs(),
        gateway_config::apps_path(settings).display(),
    )
}

/// Polls `GET {url}/apps/health` until `done` decides, or `timeout`.
fn wait_for(
    url: &str,
    token: Option<&str>,
    timeout: Duration,
    mut done: impl FnMut(&[LiveApp]) -> Option<Result<Value, String>>,
) -> Result<Value, String> {
    let base = url.trim().trim_end_matches('/');
    let deadline = std::time::Instant::now() + timeout;
    let mut last = String::from("no answer yet");
    while std::time::Instant::now() < deadline {
        match fetch_health(base, token).map(serde_json::from_value::<LiveHealth>) {
            Ok(Ok(health)) => {
                if let Some(outcome) = done(&health.apps) {
                    return outcome;
                }
                last = "not there yet".into();
            }
            Ok(Err(e)) => last = format!("{base}/apps/health answered an unexpected listing: {e}"),
            Err(e) => last = e.to_string(),
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    Err(format!("not within {} s ({last})", timeout.as_secs()))
}

/// What a finished install prints: the manifest on stdout (or `--json`'s object), and where it
/// is and what to fill in on stderr.
fn report_success(committed: &install::Committed, app: Value, output: &InstallOutput) {
    if output.json {
        println!("{}", serde_json::to_string_pretty(&committed.result_json(app)).unwrap_or_default());
        return;
    }
    let progress = output.progress();
    let verb = if committed.is_update() { "updated" } else { "installed" };
    progress.step(&format!("{verb} {} {} — {}", committed.id, committed.version, committed.manifest_path.display()));
    for note in &committed.notes {
        progress.note(note);
    }
    if let Some(state) = app["state"].as_str() {
        progress.note(&format!("the gateway runs it: {state}, {} tool(s)", app["tools"]));
    }
    print!("{}", committed.text);
}

/// A refused or failed install: one clear message on stderr (or `--json`'s object). Always
/// `false`, the command's failure.
fn report_failure(error: &InstallError, output: &InstallOutput) -> bool {
    if output.json {
        println!("{}", json!({ "ok": false, "error": { "code": error.code(), "message": error.to_string() } }));
    } else {
        eprintln!("gateway-host: {error}");
    }
    false
}

#[cfg(test)]
mod tests {
    use super::{indented, one_json_value};

    #[test]
    fn a_report_is_indented_as_serde_json_writes_it_in_the_modules_key_order() {
        let text = r#"{"enabled":true,"apps":[{"id":"a","state":"failed","errors":[{"field":"id","message":"bad \"x\" \u00e9"}]}],"n":-1.5e3,"none":null,"empty":{},"list":[]}"#;
        let value: serde_json::Value = serde_json::from_str(text).unwrap();
        let mut expected = serde_json::to_vec_pretty(&value).unwrap();
        expected.push(b'\n');
        let pretty = indented(text).unwrap();
        assert_eq!(serde_json::from_slice::<serde_json::Value>(&pretty).unwrap(), value);
        assert!(String::from_utf8(pretty.clone()).unwrap().starts_with("{\n  \"enabled\": true,\n  \"apps\": [\n    {\n      \"id\": \"a\""));
        assert_eq!(pretty.len(), expected.len());
    }

    #[test]
    fn text_that_is_not_one_json_value_is_refused() {
        for bad in ["", "{", "{\n", r#"{"a":1} {"b":2}"#, "{\n  \"a\": 1\n}\n{}", r#"{"a":1}x"#, "[1,]", "nul"] {
            assert!(indented(bad).is_err(), "{bad:?}");
            assert!(one_json_value(bad).is_err(), "{bad:?}");
        }
        for good in ["  {\"a\": [1, 2]}  \n", "{\n  \"a\": [\n    1\n  ]\n}"] {
            assert!(indented(good).is_ok(), "white space around one value is JSON: {good:?}");
            assert!(one_json_value(good).is_ok(), "{good:?}");
        }
    }
}
