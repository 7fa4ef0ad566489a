//! Operator routes under `/admin`. They change what runs, so they always need the gateway token
//! as `Authorization: Bearer` — even on an open loopback gateway, and never from a cookie (a
//! page's requests carry cookies by themselves).
//!
//! - `POST /admin/module` `{"path": …}`: swap the running module live ([`ModuleHost::swap`]). The
//!   library must lie in `Gateway.ModuleDirectory`, so the route can load only what an operator
//!   put there.
//! - `POST /admin/mcpapps/reload`: re-read the configuration file (`McpApps` entries, allow/deny,
//!   discovery paths; `Plugins.Mcp`) and re-run discovery (R21) — new apps start, removed ones
//!   stop, changed ones restart, Failed ones are retried; answers the report.
//! - `POST /admin/mcpapps/{id}/start|stop`: start (clearing a crash-loop hold) or stop one MCP App;
//!   answers the app as `/apps/health` lists it.
//! - `POST /admin/mcpapps/install` `{source, id?, prefix?}` (SPEC R53): `apps add` from a running
//!   gateway; answers the written manifest and the app as the gateway runs it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::json_error::json_error;
use super::connections;
use super::GatewayState;
use crate::install;
use crate::module::host::SwapError;
use crate::module::loader::LoadError;

/// How long a swap lets calls in flight finish before cancelling them, when
/// `Gateway.ModuleSwapDrainSeconds` is not set.
const DEFAULT_DRAIN: Duration = Duration::from_secs(10);

/// The drain bound of a swap (`Gateway.ModuleSwapDrainSeconds`).
pub fn drain_bound(state: &GatewayState) -> Duration {
    state.settings.get_seconds("Gateway:ModuleSwapDrainSeconds", DEFAULT_DRAIN)
}

/// `POST /admin/module`.
pub async fn swap_module(State(state): State<Arc<GatewayState>>, headers: HeaderMap, body: Body) -> Response {
    if let Some(refusal) = state.auth.admin_refusal(&headers) {
        return refusal;
    }
    let body = match connections::read_body(body, connections::MAX_JSON_BODY_BYTES).await {
        Ok(body) => body,
        Err(refusal) => return refusal,
    };
    let Some(path) = serde_json::from_slice::<Value>(&body).ok().and_then(|b| b["path"].as_str().map(PathBuf::from)) else {
        return json_error(StatusCode::BAD_REQUEST, "bad_body", "send a JSON object {\"path\": \"…/libmcpapp_plugin….so\"}");
    };
    let path = match allowed_module_path(&state, &path) {
        Ok(path) => path,
        Err(response) => return response,
    };
    if Path::new(&state.module.summary().path) == path {
        return json_error(
            StatusCode::CONFLICT,
            "already_serving",
            format!("{} is the module serving now (a library is loaded once per path: give each build its own file name)", path.display()),
        );
    }
    let config = crate::config::gateway_config::module_config(&state.workspace.module_settings());
    match state.module.swap(&path, config, drain_bound(&state)).await {
        Ok(record) => Json(json!({ "ok": true, "module": state.module.summary(), "swap": record })).into_response(),
        Err(e) => swap_refusal(&e),
    }
}

/// The answer for a swap that did not happen (the old module keeps serving).
pub fn swap_refusal(error: &SwapError) -> Response {
    let (status, code) = match error {
        SwapError::Busy => (StatusCode::CONFLICT, "swap_in_progress"),
        SwapError::Refused(LoadError::Missing(_)) => (StatusCode::NOT_FOUND, "module_not_found"),
        SwapError::Refused(_) => (StatusCode::UNPROCESSABLE_ENTITY, "module_refused"),
        SwapError::Create { .. } => (StatusCode::UNPROCESSABLE_ENTITY, "module_failed_to_start"),
    };
    json_error(status, code, format!("{error}; the current module keeps serving"))
}

/// `path`, canonical, if it lies in `Gateway.ModuleDirectory`.
fn allowed_module_path(state: &GatewayState, path: &Path) -> Result<PathBuf, Response> {
    let Some(directory) = state.settings.get_str("Gateway:ModuleDirectory") else {
        return Err(json_error(
            StatusCode::FORBIDDEN,
            "no_module_directory",
            "module swaps over HTTP are off: set Gateway.ModuleDirectory to the folder new module builds are put in",
        ));
    };
    let directory = state.settings.resolve_path(&directory);
    let directory = directory.canonicalize().map_err(|e| {
        json_error(StatusCode::FORBIDDEN, "no_module_directory", format!("Gateway.ModuleDirectory {}: {e}", directory.display()))
    })?;
    let candidate = if path.is_absolute() { path.to_path_buf() } else { directory.join(path) };
    let Ok(candidate) = candidate.canonicalize() else {
        return Err(json_error(StatusCode::NOT_FOUND, "module_not_found", format!("module not found: {}", candidate.display())));
    };
    if !candidate.starts_with(&directory) {
        return Err(json_error(
            StatusCode::FORBIDDEN,
            "outside_module_directory",
            format!("{} is not in Gateway.ModuleDirectory ({})", candidate.display(), directory.display()),
        ));
    }
    Ok(candidate)
}

/// `POST /admin/mcpapps/reload`.
pub async fn reload_apps(State(state): State<Arc<GatewayState>>, headers: HeaderMap) -> Response {
    if let Some(refusal) = state.auth.admin_refusal(&headers) {
        return refusal;
    }
    match state.workspace.reload(&state.module).await {
        Ok(report) => {
            state.tools.refresh().await;
            Json(json!({ "ok": true, "report": report })).into_response()
        }
        Err(crate::config::workspace::WorkspaceError::Module(e)) => module_failure(&e),
        // The configuration file does not read: nothing changed.
        Err(e) => json_error(StatusCode::UNPROCESSABLE_ENTITY, "bad_configuration", format!("{e}; nothing was reloaded")),
    }
}

/// `POST /admin/mcpapps/{id}/start`.
pub async fn start_app(State(state): State<Arc<GatewayState>>, headers: HeaderMap, UrlPath(id): UrlPath<String>) -> Response {
    app_operation(&state, &headers, &id, true).await
}

/// `POST /admin/mcpapps/{id}/stop`.
pub async fn stop_app(State(state): State<Arc<GatewayState>>, headers: HeaderMap, UrlPath(id): UrlPath<String>) -> Response {
    app_operation(&state, &headers, &id, false).await
}

/// Starts or stops the MCP App `id` (standard `Plugins.Mcp` servers are not managed here).
async fn app_operation(state: &GatewayState, headers: &HeaderMap, id: &str, start: bool) -> Response {
    if let Some(refusal) = state.auth.admin_refusal(headers) {
        return refusal;
    }
    let apps = match state.module.list_apps().await {
        Ok(apps) => apps,
        Err(e) => return module_failure(&e),
    };
    if !apps.iter().any(|a| a.id.as_str() == id && crate::module::host::is_mcp_app(a)) {
        return json_error(StatusCode::NOT_FOUND, "no_such_app", format!("there is no MCP App '{id}'"));
    }
    let outcome = if start { state.module.start_app(id).await } else { state.module.stop_app(id).await };
    match outcome {
        Ok(app) => Json(json!({ "ok": true, "app": crate::module::host::app_json(&app) })).into_response(),
        // The app did not come up: say why, and show where it stands now.
        Err(e) if e.code() == host_abi::ErrorCode::Upstream => json_error(
            StatusCode::BAD_GATEWAY,
            "app_failed_to_start",
            format!("McpApp '{id}' did not start: {}", e.message.as_str()),
        ),
        Err(e) => module_failure(&e),
    }
}

pub fn module_failure(e: &host_abi::AbiError) -> Response {
    let status = match e.code() {
        host_abi::ErrorCode::NotFound => StatusCode::NOT_FOUND,
        host_abi::ErrorCode::ShutDown => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    json_error(status, &e.code.to_string(), e.message.as_str().to_string())
}

/// How long the install route waits for the watcher to start an installed app before it answers
/// (the manifest's startup timeout is 30 s).
const INSTALL_START_WAIT: Duration = Duration::from_secs(45);

/// `POST /admin/mcpapps/install` `{source, id?, prefix?}`: installs as `gateway-host apps add`
/// does (npm scripts off), into `Gateway.AppsPath`, which this gateway discovers; answers 201
/// with the manifest and the app once the gateway runs it (or has tried to). Relative paths in
/// `source` resolve against the configuration's folder.
pub async fn install_app(State(state): State<Arc<GatewayState>>, headers: HeaderMap, body: Body) -> Response {
    if let Some(refusal) = state.auth.admin_refusal(&headers) {
        return refusal;
    }
    let body = match connections::read_body(body, connections::MAX_JSON_BODY_BYTES).await {
        Ok(body) => body,
        Err(refusal) => return refusal,
    };
    let parsed: Option<Value> = serde_json::from_slice(&body).ok();
    let field = |k: &str| parsed.as_ref().and_then(|b| b.get(k)).and_then(Value::as_str).map(str::to_string);
    let Some(source) = field("source").filter(|s| !s.trim().is_empty()) else {
        return json_error(
            StatusCode::BAD_REQUEST,
            "bad_body",
            "send a JSON object {\"source\": \"npm:NAME[@VERSION]\" | \"pypi:NAME[==VERSION]\" | a server.json path | a folder, \"id\"?, \"prefix\"?}",
        );
    };
    let request = install::AddRequest { source, id: field("id"), prefix: field("prefix"), allow_scripts: false };
    let apps_path = crate::config::gateway_config::apps_path(&state.settings);
    let cwd = state.settings.config_dir.clone();
    let module = state.module.clone();
    // On a task of its own: a client that goes away mid-install does not cut it off half-way
    // (the install finishes, or cleans up after itself, either way).
    let work = tokio::spawn(async move {
        let progress = install::progress::Progress::new(install::progress::Style::Log);
        install::run(&module, &progress, async {
            let known = install::known_ids(&module, true).await?;
            install::prepare_add(&apps_path, &request, &cwd, &known)
        })
        .await
    });
    let committed = match work.await {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => return install_refusal(&e),
        Err(e) => return json_error(StatusCode::INTERNAL_SERVER_ERROR, "install_failed", format!("the install task ended: {e}")),
    };
    tracing::info!("Installed MCP App '{}' {} at {}", committed.id, committed.version, committed.manifest_path.display());
    let app = wait_for_start(&state, &committed.id).await;
    (StatusCode::CREATED, Json(committed.result_json(app))).into_response()
}

/// The installed app once the module has it Running or Failed (the discovery watcher starts it;
/// after a few seconds without it, a reload is asked for, as `POST /admin/mcpapps/reload` does);
/// `null` if it did not show up in time.
async fn wait_for_start(state: &GatewayState, id: &str) -> Value {
    let started = std::time::Instant::now();
    let mut reloaded = false;
    while started.elapsed() < INSTALL_START_WAIT {
        if let Ok(apps) = state.module.list_apps().await {
            if let Some(app) = apps.iter().find(|a| a.id.as_str() == id) {
                let state_name = app.state().as_str();
                if state_name == "running" || state_name == "failed" {
                    return crate::module::host::app_json(app);
                }
            } else if !reloaded && started.elapsed() > Duration::from_secs(3) {
                reloaded = true;
                if let Err(e) = state.workspace.reload(&state.module).await {
                    tracing::warn!("reloading after installing '{id}': {e}");
                }
                state.tools.refresh().await;
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Value::Null
}

/// An install that did not happen, as a JSON error with its code (nothing was changed).
fn install_refusal(error: &install::InstallError) -> Response {
    use install::InstallError as E;
    let status = match error {
        E::BadSource { .. } | E::BadId { .. } | E::BadServerJson { .. } => StatusCode::BAD_REQUEST,
        E::UnknownPackage { .. } => StatusCode::NOT_FOUND,
        E::Clash { .. } => StatusCode::CONFLICT,
        E::NoServerEntry { .. } | E::Invalid(_) => StatusCode::UNPROCESSABLE_ENTITY,
        E::Unreachable { .. } | E::StepFailed { .. } => StatusCode::BAD_GATEWAY,
        E::NotInstalled { .. } => StatusCode::NOT_FOUND,
        E::Io { .. } | E::Module(_) | E::RolledBack { .. } => StatusCode::INTERNAL_SERVER_ERROR,
    };
    json_error(status, error.code(), error.to_string())
}
