//! Installing MCP Apps from npm, PyPI, an MCP Registry `server.json` or a folder in one step
//! (SPEC R53): `gateway-host apps add|update|remove|list --installed` and
//! `POST /admin/mcpapps/install` both go through here.
//!
//! An installed app is a folder of `Gateway.AppsPath` (a discovery path, so a running gateway's
//! watcher starts it):
//!
//! ```text
//! {AppsPath}/{id}/openclaw.mcpapp.json   written by the installer, checked by the module
//! {AppsPath}/{id}/v1/                    npm: package.json + node_modules; PyPI: .venv
//! ```
//!
//! Each install or update goes to a new version folder (`v1`, `v2`, …) that no manifest names
//! yet, so discovery sees nothing until the manifest is written; the manifest is then put in
//! place in one rename, the only change a running gateway sees. An update therefore keeps the
//! old version serving while the new one is fetched, and its folder until the new version is
//! known to run (or until the next update, when no gateway was asked). A venv is never moved
//! (its scripts name their interpreter by absolute path): it is made where it stays.
//!
//! The steps are: [`prepare_add`]/[`prepare_update`] (what to install, refusals that change
//! nothing), [`stage`] (blocking: run npm or pip, read the package, write the candidate
//! manifest), [`validate`] (the module's `manifest.validate`, as `gateway-host validate` does),
//! [`Staged::commit`], and for an update [`Committed::finish`] or [`Committed::roll_back`].

pub mod manifest_writer;
pub mod npm;
pub mod progress;
pub mod pypi;
pub mod registry_json;
pub mod source;

use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};

use host_abi::payloads::{ValidateParams, ValidationResult, VALIDATE};
use serde_json::Value;

use crate::module::host::ModuleHost;
use manifest_writer::{AppChoices, PackageEntry};
use progress::{Failed, Progress};
use registry_json::RegistryPackage;
use source::Source;

/// The manifest's file name (mcpapp-plugin `apps/manifest.rs`).
pub const MANIFEST_FILE: &str = "openclaw.mcpapp.json";
/// The candidate manifest of a version being installed: not a manifest to discovery.
const CANDIDATE_FILE: &str = "openclaw.mcpapp.json.new";

/// Why an install, update or removal did not happen. Each leaves the apps folder as it was.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error("{source_text}: {why}")]
    BadSource { source_text: String, why: String },
    #[error("unknown package {package}: the {registry} registry has no such package or version ({detail})")]
    UnknownPackage { registry: &'static str, package: String, detail: String },
    #[error("the {registry} registry is unreachable while installing {package}: {detail}")]
    Unreachable { registry: &'static str, package: String, detail: String },
    #[error("no MCP server entry found in {package}: {why}")]
    NoServerEntry { package: String, why: String },
    #[error("an app with the id '{id}' exists already ({at}); choose another with --id, or `apps update {id}`")]
    Clash { id: String, at: String },
    #[error("'{id}' is not a usable app id: it must start with a letter or digit and hold only letters, digits, '.', '_' and '-' (at most 128); choose one with --id")]
    BadId { id: String },
    #[error("{step} failed ({status}); its last lines:\n{tail}")]
    StepFailed { step: String, status: String, tail: String },
    #[error("server.json {path}: {why}")]
    BadServerJson { path: PathBuf, why: String },
    #[error("the written manifest is not valid, so nothing was installed:\n{0}")]
    Invalid(String),
    #[error("'{id}' was not installed with `apps add` ({why})")]
    NotInstalled { id: String, why: String },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("checking the manifest through the module: {0}")]
    Module(String),
    #[error("the new version of '{id}' did not start ({why}); the previous version was put back")]
    RolledBack { id: String, why: String },
}

impl InstallError {
    /// The machine-readable code of the error (`--json`, the admin route's `error.code`).
    pub fn code(&self) -> &'static str {
        match self {
            InstallError::BadSource { .. } => "bad_source",
            InstallError::UnknownPackage { .. } => "unknown_package",
            InstallError::Unreachable { .. } => "registry_unreachable",
            InstallError::NoServerEntry { .. } => "no_server_entry",
            InstallError::Clash { .. } => "id_clash",
            InstallError::BadId { .. } => "bad_id",
            InstallError::StepFailed { .. } => "install_failed",
            InstallError::BadServerJson { .. } => "bad_server_json",
            InstallError::Invalid(_) => "invalid_manifest",
            InstallError::NotInstalled { .. } => "not_installed",
            InstallError::Io { .. } => "io_error",
            InstallError::Module(_) => "module_error",
            InstallError::RolledBack { .. } => "rolled_back",
        }
    }
}

/// What `apps add` was asked.
#[derive(Debug, Clone, Default)]
pub struct AddRequest {
    pub source: String,
    pub id: Option<String>,
    pub prefix: Option<String>,
    /// Run the packages' npm install scripts (off by default).
    pub allow_scripts: bool,
}

/// An install decided on, before anything was fetched.
#[derive(Debug, Clone)]
pub struct Plan {
    pub id: String,
    pub app_dir: PathBuf,
    source: Source,
    source_text: String,
    registry: Option<RegistryPackage>,
    prefix: Option<String>,
    allow_scripts: bool,
    /// The app this replaces (an update).
    previous: Option<Previous>,
}

/// The installed version an update replaces.
#[derive(Debug, Clone)]
struct Previous {
    manifest_text: String,
    folder: Option<String>,
    environment: BTreeMap<String, String>,
    /// What the new manifest keeps of the old one ([`manifest_writer::kept_fields`]).
    kept: serde_json::Map<String, Value>,
}

/// A version installed beside the app's manifest, its candidate manifest written and not yet in
/// place.
#[derive(Debug)]
pub struct Staged {
    pub id: String,
    pub app_dir: PathBuf,
    pub candidate: PathBuf,
    pub manifest: Value,
    /// The manifest as written (its fields in a reader's order).
    pub text: String,
    /// Remarks for the user (values to fill in, arguments found in a README).
    pub notes: Vec<String>,
    version_dir: PathBuf,
    previous: Option<Previous>,
}

/// A manifest put in place.
#[derive(Debug)]
pub struct Committed {
    pub id: String,
    pub manifest_path: PathBuf,
    pub manifest: Value,
    pub text: String,
    pub notes: Vec<String>,
    /// The semantic version the new manifest declares (what `/apps/health` will say).
    pub version: String,
    version_dir: PathBuf,
    previous: Option<Previous>,
}

/// The ids apps have now (discovered, or running in the gateway), to refuse a clash up front.
pub async fn known_ids(module: &ModuleHost, live: bool) -> Result<Vec<(String, String)>, InstallError> {
    if live {
        let apps = module.list_apps().await.map_err(|e| InstallError::Module(e.message.as_str().to_string()))?;
        return Ok(apps.iter().map(|a| (a.id.as_str().to_string(), "an app the gateway runs".to_string())).collect());
    }
    let report = module.discover().await.map_err(|e| InstallError::Module(e.message.as_str().to_string()))?;
    Ok(report
        .apps
        .iter()
        .map(|a| (a.key.clone(), a.rest.get("manifestPath").and_then(Value::as_str).unwrap_or("a discovered app").to_string()))
        .collect())
}

/// Decides an install from `request`; refuses a bad source, a bad id or a clash before anything
/// is fetched. `cwd` resolves relative paths; `known` are the ids apps have now.
pub fn prepare_add(apps_path: &Path, request: &AddRequest, cwd: &Path, known: &[(String, String)]) -> Result<Plan, InstallError> {
    let source = Source::parse(&request.source, cwd)?;
    let (source, registry) = match &source {
        Source::ServerJson(path) => {
            let picked = registry_json::read(path)?;
            (picked.source.clone(), Some(picked))
        }
        other => (other.clone(), None),
    };
    let id = match &request.id {
        Some(id) => id.trim().to_string(),
        None => default_id(&source, registry.as_ref())?,
    };
    check_id(&id)?;
    if let Some((_, at)) = known.iter().find(|(k, _)| k.eq_ignore_ascii_case(&id)) {
        return Err(InstallError::Clash { id, at: at.clone() });
    }
    let app_dir = apps_path.join(&id);
    if app_dir.exists() {
        let at = if app_dir.join(MANIFEST_FILE).exists() {
            app_dir.join(MANIFEST_FILE).display().to_string()
        } else {
            format!("{}, a folder without a manifest: an install that was interrupted? remove the folder", app_dir.display())
        };
        return Err(InstallError::Clash { id, at });
    }
    // A file or folder is recorded by its absolute path: `apps update` may run elsewhere.
    let source_text = match Source::parse(&request.source, cwd)? {
        Source::ServerJson(p) | Source::Folder(p) => absolute(&p).display().to_string(),
        other => other.display(),
    };
    Ok(Plan {
        id,
        app_dir,
        source,
        source_text,
        registry,
        prefix: request.prefix.clone().filter(|p| !p.trim().is_empty()),
        allow_scripts: request.allow_scripts,
        previous: None,
    })
}

/// Decides an update of the installed app `id` to `version` (the newest when `None`), from the
/// source its manifest records.
pub fn prepare_update(apps_path: &Path, id: &str, version: Option<String>, allow_scripts: bool) -> Result<Plan, InstallError> {
    let app_dir = apps_path.join(id);
    let (text, manifest) = installed_manifest(apps_path, id)?;
    let install = &manifest["metadata"]["install"];
    let source_text = install["source"].as_str().unwrap_or_default().to_string();
    let parsed = Source::parse(&source_text, Path::new("/"))?;
    let (source, registry) = match &parsed {
        Source::ServerJson(path) => {
            let mut picked = registry_json::read(path)?;
            picked.source = picked.source.at_version(version.clone().or_else(|| picked.source_version()));
            (picked.source.clone(), Some(picked))
        }
        Source::Folder(_) if version.is_some() => {
            return Err(InstallError::BadSource { source_text, why: "a folder has no versions to choose from; update it without --version".into() })
        }
        other => (other.at_version(version), None),
    };
    // The source as this update asked for it: `apps update` without `--version` stays on "the
    // newest", with it on that version.
    let source_text = match &parsed {
        Source::Npm { .. } | Source::Pypi { .. } => source.display(),
        _ => source_text,
    };
    let environment = manifest["environment"]
        .as_object()
        .map(|e| e.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect())
        .unwrap_or_default();
    Ok(Plan {
        id: id.to_string(),
        app_dir,
        source,
        source_text,
        registry,
        prefix: manifest["toolNamePrefix"].as_str().map(str::to_string),
        allow_scripts,
        previous: Some(Previous {
            kept: manifest_writer::kept_fields(&manifest),
            manifest_text: text,
            folder: install["folder"].as_str().map(str::to_string),
            environment,
        }),
    })
}

impl RegistryPackage {
    fn source_version(&self) -> Option<String> {
        match &self.source {
            Source::Npm { version, .. } | Source::Pypi { version, .. } => version.clone(),
            _ => None,
        }
    }
}

/// The installed app `id`'s manifest (text and JSON); refused when it was not installed by
/// `apps add` (no `metadata.install`): apps of other discovery paths are not this command's.
pub fn installed_manifest(apps_path: &Path, id: &str) -> Result<(String, Value), InstallError> {
    check_id(id)?;
    let file = apps_path.join(id).join(MANIFEST_FILE);
    let text = crate::config::settings::read_text_bounded(&file, crate::config::settings::MAX_CONFIG_BYTES)
        .map_err(|e| InstallError::NotInstalled { id: id.to_string(), why: format!("{}: {e}", file.display()) })?;
    let manifest: Value = serde_json::from_str(&text)
        .map_err(|e| InstallError::NotInstalled { id: id.to_string(), why: format!("{}: {e}", file.display()) })?;
    if !manifest["metadata"]["install"]["source"].is_string() {
        return Err(InstallError::NotInstalled { id: id.to_string(), why: format!("{} has no metadata.install", file.display()) });
    }
    Ok((text, manifest))
}

/// Runs the install of `plan` (blocking: npm or pip run here) into a new version folder and
/// writes the candidate manifest. On failure nothing of it is left.
pub fn stage(plan: Plan, progress: &Progress) -> Result<Staged, InstallError> {
    let fresh = plan.previous.is_none();
    if fresh {
        // `create_dir`, not `_all`: a second install of the same id at the same time is a clash.
        std::fs::create_dir_all(plan.app_dir.parent().unwrap_or(Path::new("."))).map_err(|source| InstallError::Io { path: plan.app_dir.clone(), source })?;
        std::fs::create_dir(&plan.app_dir).map_err(|source| match source.kind() {
            std::io::ErrorKind::AlreadyExists => InstallError::Clash { id: plan.id.clone(), at: plan.app_dir.display().to_string() },
            _ => InstallError::Io { path: plan.app_dir.clone(), source },
        })?;
    } else {
        remove_stale_versions(&plan);
    }
    let folder = next_version_folder(&plan.app_dir);
    let version_dir = plan.app_dir.join(&folder);
    let result = std::fs::create_dir(&version_dir)
        .map_err(|source| InstallError::Io { path: version_dir.clone(), source })
        .and_then(|()| install_into(&plan, &version_dir, &folder, progress));
    match result {
        Ok(staged) => Ok(staged),
        Err(e) => {
            let leftover = if fresh { &plan.app_dir } else { &version_dir };
            let _ = std::fs::remove_dir_all(leftover);
            Err(e)
        }
    }
}

fn install_into(plan: &Plan, version_dir: &Path, folder: &str, progress: &Progress) -> Result<Staged, InstallError> {
    let shown = plan.source.display();
    let mut entry: PackageEntry = match &plan.source {
        Source::Npm { name, version } => {
            let spec = match version {
                Some(v) => format!("{name}@{v}"),
                None => name.clone(),
            };
            npm::install(&spec, &shown, version_dir, plan.allow_scripts, progress)?;
            npm::entry(version_dir, folder, name)?
        }
        Source::Pypi { name, version } => {
            let spec = match version {
                Some(v) => format!("{name}=={v}"),
                None => name.clone(),
            };
            pypi::install(&spec, &shown, version_dir, progress)?;
            pypi::entry(version_dir, folder, name)?
        }
        Source::Folder(dir) if dir.join("package.json").is_file() => {
            let name = npm::folder_package_name(dir)?;
            npm::install(&dir.display().to_string(), &shown, version_dir, plan.allow_scripts, progress)?;
            let mut e = npm::entry(version_dir, folder, &name)?;
            e.registry_type = "folder";
            e
        }
        Source::Folder(dir) if dir.join("pyproject.toml").is_file() => {
            let name = pypi::folder_package_name(dir)?;
            pypi::install(&dir.display().to_string(), &shown, version_dir, progress)?;
            let mut e = pypi::entry(version_dir, folder, &name)?;
            e.registry_type = "folder";
            e
        }
        Source::Folder(dir) => {
            let mut why = "the folder holds no package.json (npm) or pyproject.toml (Python)".to_string();
            if dir.join(MANIFEST_FILE).is_file() {
                // Already an app (the example apps are): nothing to install, only to discover.
                why.push_str(&format!(
                    "; it has an {MANIFEST_FILE} and is an MCP App as it is: put it, or a link to it, in a discovery folder (OpenClaw.McpApps.DiscoveryPaths, ./mcpapps by default)"
                ));
            }
            return Err(InstallError::NoServerEntry { package: dir.display().to_string(), why });
        }
        Source::ServerJson(path) => {
            return Err(InstallError::BadServerJson { path: path.clone(), why: "names no package to install".into() })
        }
    };
    if let Some(registry) = &plan.registry {
        apply_registry(&mut entry, registry);
    }
    let choices = AppChoices {
        id: plan.id.clone(),
        prefix: plan.prefix.clone(),
        source: plan.source_text.clone(),
        folder: folder.to_string(),
        filled_environment: plan.previous.as_ref().map(|p| p.environment.clone()).unwrap_or_default(),
        kept: plan.previous.as_ref().map(|p| p.kept.clone()).unwrap_or_default(),
    };
    progress.step("writing the manifest from the package's metadata");
    let (manifest, text) = manifest_writer::manifest(&entry, &choices);
    let candidate = plan.app_dir.join(CANDIDATE_FILE);
    write_file(&candidate, text.as_bytes())?;
    let mut notes = entry.notes.clone();
    let kept: Vec<&str> = choices.kept.keys().map(String::as_str).collect();
    if !kept.is_empty() {
        notes.push(format!("kept from the previous manifest: {}", kept.join(", ")));
    }
    if let Some(previous) = plan.previous.as_ref().and_then(|p| serde_json::from_str::<Value>(&p.manifest_text).ok()) {
        let replaced = manifest_writer::replaced_fields(&previous, &manifest);
        if !replaced.is_empty() {
            notes.push(format!("written anew from the package, not kept: {} — edit the new manifest if you changed them", replaced.join("; ")));
        }
    }
    for var in &entry.environment {
        let value = manifest["environment"][&var.name].as_str().unwrap_or_default();
        if value.is_empty() {
            let what = [var.is_required.then_some("required"), var.is_secret.then_some("secret")].into_iter().flatten().collect::<Vec<_>>().join(", ");
            let what = if what.is_empty() { String::new() } else { format!(" ({what})") };
            let about = var.description.as_deref().map(|d| format!(": {d}")).unwrap_or_default();
            notes.push(format!(
                "fill in {}{what}{about} — in the manifest's \"environment\", or as McpApps.Entries.{}.Environment.{} in the configuration (better for secrets)",
                var.name, plan.id, var.name
            ));
        }
    }
    Ok(Staged { id: plan.id.clone(), app_dir: plan.app_dir.clone(), candidate, manifest, text, notes, version_dir: version_dir.to_path_buf(), previous: plan.previous.clone() })
}

/// What a `server.json` declares beyond the package: its arguments, variables and names.
fn apply_registry(entry: &mut PackageEntry, registry: &RegistryPackage) {
    if entry.registry_type == "npm" {
        let script = entry.arguments.first().cloned().unwrap_or_default();
        let mut arguments = registry.runtime_arguments.clone();
        arguments.push(script);
        arguments.extend(registry.package_arguments.clone());
        entry.arguments = arguments;
    } else {
        entry.arguments = registry.package_arguments.clone();
    }
    entry.notes.retain(|n| !n.contains("README"));
    entry.environment = registry.environment.clone();
    entry.mcp_name = registry.server_name.clone().or(entry.mcp_name.take());
    entry.title = registry.title.clone().or(entry.title.take());
    entry.description = registry.description.clone().or(entry.description.take());
    entry.notes.extend(registry.notes.clone());
}

/// Checks the candidate manifest as `gateway-host validate` does (the module's
/// `manifest.validate`): every problem with its field.
pub async fn validate(module: &ModuleHost, staged: &Staged) -> Result<ValidationResult, InstallError> {
    let params = ValidateParams { paths: vec![staged.candidate.display().to_string()] };
    let results: Vec<ValidationResult> =
        module.invoke_typed(VALIDATE, &params).await.map_err(|e| InstallError::Module(e.message.as_str().to_string()))?;
    let result = results.into_iter().next().ok_or_else(|| InstallError::Module("no validation result".into()))?;
    if result.valid {
        Ok(result)
    } else {
        Err(InstallError::Invalid(result.errors.iter().map(|e| format!("  error: {e}")).collect::<Vec<_>>().join("\n")))
    }
}

/// Plans (`plan`), installs (blocking, off the runtime's workers), checks through the module
/// and puts the manifest in place; what is left of a refused install is removed.
pub async fn run(
    module: &ModuleHost,
    progress: &Progress,
    plan: impl Future<Output = Result<Plan, InstallError>>,
) -> Result<Committed, InstallError> {
    let plan = plan.await?;
    let staging = progress.clone();
    let mut staged = tokio::task::spawn_blocking(move || stage(plan, &staging))
        .await
        .map_err(|e| InstallError::Module(format!("the install task ended: {e}")))??;
    progress.step("checking the manifest (as `gateway-host validate` does)");
    match validate(module, &staged).await {
        Ok(result) => staged.notes.extend(confinement_note(&result)),
        Err(e) => {
            staged.abandon();
            return Err(e);
        }
    }
    staged.commit()
}

/// What the user should know of the app's confinement: an installed server that fetches from
/// the web fails with only "a connection issue" of its own when it may reach no network (the
/// default), so the note says where to widen it.
fn confinement_note(result: &ValidationResult) -> Option<String> {
    let report = result.rest.get("confinement")?;
    let network = report["network"].as_str().unwrap_or_default();
    (report["confined"] == true && network.starts_with("none")).then(|| {
        "it runs confined: no network, and files only in its own folders; if it needs more (a web API, other files), \
         declare it in the manifest's \"permissions\" (README, \"Confinement\"), e.g. \"permissions\": {\"network\": \"any\"}"
            .to_string()
    })
}

impl Staged {
    /// Puts the manifest in place (one rename: a running gateway sees one change).
    pub fn commit(self) -> Result<Committed, InstallError> {
        let manifest_path = self.app_dir.join(MANIFEST_FILE);
        if let Err(source) = std::fs::rename(&self.candidate, &manifest_path) {
            let error = InstallError::Io { path: manifest_path, source };
            self.abandon();
            return Err(error);
        }
        Ok(Committed {
            version: self.manifest["version"].as_str().unwrap_or_default().to_string(),
            id: self.id,
            manifest_path,
            manifest: self.manifest,
            text: self.text,
            notes: self.notes,
            version_dir: self.version_dir,
            previous: self.previous,
        })
    }

    /// Removes what was installed (the whole app folder of a new app, the new version of an
    /// update).
    pub fn abandon(self) {
        let _ = std::fs::remove_file(&self.candidate);
        let leftover = if self.previous.is_none() { &self.app_dir } else { &self.version_dir };
        let _ = std::fs::remove_dir_all(leftover);
    }
}

impl Committed {
    /// The result an install answers with (`--json`, `POST /admin/mcpapps/install`): the
    /// manifest written, where, the notes, and `app` as the gateway runs it (or `null`).
    pub fn result_json(&self, app: Value) -> Value {
        serde_json::json!({
            "ok": true,
            "id": self.id,
            "version": self.version,
            "manifestPath": self.manifest_path,
            "manifest": self.manifest,
            "notes": self.notes,
            "app": app,
        })
    }

    /// Whether this replaced an installed version (an update).
    pub fn is_update(&self) -> bool {
        self.previous.is_some()
    }

    /// The new version runs: the old one's folder goes.
    pub fn finish(self) {
        if let Some(folder) = self.previous.as_ref().and_then(|p| p.folder.as_ref()) {
            let old = self.version_dir.parent().unwrap_or(Path::new(".")).join(folder);
            if old != self.version_dir {
                let _ = std::fs::remove_dir_all(old);
            }
        }
    }

    /// The new version did not start: the old manifest goes back (one rename again) and the new
    /// version's folder is removed.
    pub fn roll_back(self, why: String) -> InstallError {
        let Some(previous) = &self.previous else { return InstallError::RolledBack { id: self.id, why } };
        let back = self.manifest_path.with_file_name(CANDIDATE_FILE);
        let restored = write_file(&back, previous.manifest_text.as_bytes())
            .and_then(|()| std::fs::rename(&back, &self.manifest_path).map_err(|source| InstallError::Io { path: self.manifest_path.clone(), source }));
        if let Err(e) = restored {
            return InstallError::Io { path: self.manifest_path.clone(), source: std::io::Error::other(format!("rolling back after '{why}': {e}")) };
        }
        let _ = std::fs::remove_dir_all(&self.version_dir);
        InstallError::RolledBack { id: self.id, why }
    }
}

/// Removes the installed app `id`: its manifest first (a running gateway stops the app), then,
/// once `stopped` says so, its folder.
pub fn remove_manifest(apps_path: &Path, id: &str) -> Result<PathBuf, InstallError> {
    installed_manifest(apps_path, id)?;
    let app_dir = apps_path.join(id);
    std::fs::remove_file(app_dir.join(MANIFEST_FILE)).map_err(|source| InstallError::Io { path: app_dir.join(MANIFEST_FILE), source })?;
    Ok(app_dir)
}

/// Deletes an app's folder (after [`remove_manifest`]).
pub fn remove_folder(app_dir: &Path) -> Result<(), InstallError> {
    std::fs::remove_dir_all(app_dir).map_err(|source| InstallError::Io { path: app_dir.to_path_buf(), source })
}

/// One installed app, for `apps list --installed`.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InstalledApp {
    pub id: String,
    pub version: String,
    pub package_version: String,
    pub source: String,
    pub registry_type: String,
    pub folder: String,
    pub path: String,
}

/// The apps `apps add` installed into `apps_path`, by id.
pub fn list_installed(apps_path: &Path) -> Vec<InstalledApp> {
    let mut out = Vec::new();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(apps_path).into_iter().flatten().flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect();
    dirs.sort();
    for dir in dirs {
        let Some(id) = dir.file_name().map(|n| n.to_string_lossy().to_string()) else { continue };
        let Ok((_, m)) = installed_manifest(apps_path, &id) else { continue };
        let install = &m["metadata"]["install"];
        let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
        out.push(InstalledApp {
            id: s(&m["id"]),
            version: s(&m["version"]),
            package_version: s(&install["version"]),
            source: s(&install["source"]),
            registry_type: s(&install["registryType"]),
            folder: s(&install["folder"]),
            path: dir.join(MANIFEST_FILE).display().to_string(),
        });
    }
    out
}

/// The default id of an install (see [`Source::default_id`]).
fn default_id(source: &Source, registry: Option<&RegistryPackage>) -> Result<String, InstallError> {
    if let Some(name) = registry.and_then(|r| r.server_name.as_deref()) {
        return Ok(Source::default_id(name));
    }
    Ok(match source {
        Source::Npm { name, .. } | Source::Pypi { name, .. } => Source::default_id(name),
        Source::Folder(dir) => {
            let name = npm::folder_package_name(dir).or_else(|_| pypi::folder_package_name(dir)).unwrap_or_else(|_| {
                absolute(dir).file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default()
            });
            Source::default_id(&name)
        }
        Source::ServerJson(p) => Source::default_id(&p.display().to_string()),
    })
}

/// The manifest's rule for ids (mcpapp-plugin `apps/manifest.rs` `validate_id`), checked before
/// the id names a folder.
fn check_id(id: &str) -> Result<(), InstallError> {
    let ok = id.len() <= 128
        && id.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok { Ok(()) } else { Err(InstallError::BadId { id: id.to_string() }) }
}

/// `v{n+1}` for the highest `v{n}` in the app's folder.
fn next_version_folder(app_dir: &Path) -> String {
    let highest = std::fs::read_dir(app_dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().strip_prefix('v').and_then(|n| n.parse::<u64>().ok()))
        .max()
        .unwrap_or(0);
    format!("v{}", highest + 1)
}

/// Version folders an earlier update kept (no gateway said the new one ran) and that the
/// current manifest does not use.
fn remove_stale_versions(plan: &Plan) {
    let current = plan.previous.as_ref().and_then(|p| p.folder.clone());
    for entry in std::fs::read_dir(&plan.app_dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        let versioned = name.strip_prefix('v').is_some_and(|n| n.parse::<u64>().is_ok());
        if versioned && Some(&name) != current.as_ref() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// A failed npm or pip run as the error a user can act on: an unknown package, an unreachable
/// registry (recognised in what the program printed), or the failure with its last lines.
fn classify(registry: &'static str, package: &str, failed: Failed, unknown: &[&str], unreachable: &[&str]) -> InstallError {
    let last_matching = |needles: &[&str]| {
        failed.output.lines().rfind(|l| needles.iter().any(|n| l.contains(n))).map(|l| l.trim().to_string())
    };
    if let Some(line) = last_matching(unreachable) {
        return InstallError::Unreachable { registry, package: package.to_string(), detail: line };
    }
    if let Some(line) = last_matching(unknown) {
        return InstallError::UnknownPackage { registry, package: package.to_string(), detail: line };
    }
    let tool = if registry == "npm" { "npm install" } else { "pip install" };
    InstallError::StepFailed { step: format!("{tool} {package}"), status: failed.status, tail: failed.tail.join("\n") }
}

/// The package arguments a README's client configuration gives (`"args": ["-y", "NAME",
/// "--stdio"]` → `["--stdio"]`): how a package says it speaks stdio when it has no `server.json`.
/// `None` when no configuration in the README runs the package.
pub fn readme_arguments(readme: &str, package: &str) -> Option<Vec<String>> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in readme.lines().take(5000) {
        let fence = line.trim_start().starts_with("```");
        match (&mut current, fence) {
            (None, true) => current = Some(String::new()),
            (Some(block), true) => {
                blocks.push(std::mem::take(block));
                current = None;
            }
            (Some(block), false) => {
                block.push_str(line);
                block.push('\n');
            }
            (None, false) => {}
        }
    }
    blocks.iter().filter_map(|b| serde_json::from_str::<Value>(b).ok()).find_map(|v| args_after(&v, package))
}

/// In any object of `v` with `"args"`, the strings after the one naming `package`.
fn args_after(v: &Value, package: &str) -> Option<Vec<String>> {
    match v {
        Value::Object(map) => {
            if let Some(Value::Array(args)) = map.get("args") {
                let words: Vec<&str> = args.iter().filter_map(Value::as_str).collect();
                let named = |w: &&str| *w == package || w.strip_prefix(package).is_some_and(|rest| rest.starts_with('@') || rest.starts_with("=="));
                if let Some(at) = words.iter().position(named) {
                    return Some(words[at + 1..].iter().map(|w| w.to_string()).collect());
                }
            }
            map.values().find_map(|inner| args_after(inner, package))
        }
        Value::Array(items) => items.iter().find_map(|inner| args_after(inner, package)),
        _ => None,
    }
}

/// Writes a file whole (its folder exists).
pub(crate) fn write_file(path: &Path, bytes: &[u8]) -> Result<(), InstallError> {
    std::fs::write(path, bytes).map_err(|source| InstallError::Io { path: path.to_path_buf(), source })
}

/// Reads a text file an install reads (a `server.json`, what a package holds: its
/// `package.json`, README, `METADATA`; an installed manifest): a few KiB, refused past the
/// configuration's bound. What a package holds is a third party's, and a file of it that never
/// ends must be an error naming the limit, not a read that takes the memory.
pub(crate) fn read_text(path: &Path) -> Result<String, InstallError> {
    crate::config::settings::read_text_bounded(path, crate::config::settings::MAX_CONFIG_BYTES)
        .map_err(|source| InstallError::Io { path: path.to_path_buf(), source })
}

/// [`read_text`], or `None` when the file does not exist (an optional file of a package).
pub(crate) fn read_optional_text(path: &Path) -> Result<Option<String>, InstallError> {
    match crate::config::settings::read_text_bounded(path, crate::config::settings::MAX_CONFIG_BYTES) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(InstallError::Io { path: path.to_path_buf(), source }),
    }
}

/// Reads a JSON file ([`read_text`]).
pub(crate) fn read_json(path: &Path) -> Result<Value, InstallError> {
    let text = read_text(path)?;
    serde_json::from_str(&text).map_err(|e| InstallError::Io { path: path.to_path_buf(), source: std::io::Error::other(e) })
}

fn absolute(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_readme_client_configuration_gives_the_package_arguments() {
        let readme = "# X\n\n```json\n{\"mcpServers\": {\"b\": {\"command\": \"npx\", \"args\": [\"-y\", \"--silent\", \"@x/server-b\", \"--stdio\"]}}}\n```\n";
        assert_eq!(readme_arguments(readme, "@x/server-b"), Some(vec!["--stdio".to_string()]));
        let uvx = "```\n{\"servers\": {\"t\": {\"command\": \"uvx\", \"args\": [\"mcp-server-time==1\", \"--local-timezone\", \"UTC\"]}}}\n```";
        assert_eq!(readme_arguments(uvx, "mcp-server-time"), Some(vec!["--local-timezone".to_string(), "UTC".to_string()]));
        assert_eq!(readme_arguments("```json\n{\"args\": [\"other\"]}\n```", "@x/server-b"), None);
        assert_eq!(readme_arguments("no blocks", "x"), None);
    }

    /// A folder that is an app already (it has a manifest, no package) is not installed, and the
    /// refusal says what to do with it instead; nothing is left in the apps folder.
    #[test]
    fn a_folder_that_is_an_app_already_is_refused_saying_where_it_goes() {
        let (apps, app) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        std::fs::write(app.path().join(MANIFEST_FILE), "{}").unwrap();
        let request = AddRequest { source: app.path().display().to_string(), id: Some("mine".into()), ..Default::default() };
        let plan = prepare_add(apps.path(), &request, apps.path(), &[]).unwrap();
        let err = stage(plan, &Progress::new(progress::Style::Quiet)).err().expect("nothing to install");
        let text = err.to_string();
        assert!(text.contains("no package.json (npm) or pyproject.toml") && text.contains("put it, or a link to it, in a discovery folder"), "{text}");
        assert_eq!(std::fs::read_dir(apps.path()).unwrap().count(), 0, "nothing was left");
    }

    #[test]
    fn a_clash_or_a_bad_id_is_refused_before_anything_is_fetched() {
        let apps = tempfile::tempdir().unwrap();
        std::fs::create_dir(apps.path().join("time")).unwrap();
        let request = |source: &str, id: Option<&str>| AddRequest { source: source.into(), id: id.map(str::to_string), ..Default::default() };
        let err = prepare_add(apps.path(), &request("pypi:mcp-server-time", None), apps.path(), &[]).unwrap_err();
        assert!(matches!(err, InstallError::Clash { .. }), "{err}");
        assert!(err.to_string().contains("a folder without a manifest"), "{err}");
        let known = [("grocery-inventory".to_string(), "/x/openclaw.mcpapp.json".to_string())];
        let err = prepare_add(apps.path(), &request("npm:@x/y", Some("Grocery-Inventory")), apps.path(), &known).unwrap_err();
        assert!(err.to_string().contains("/x/openclaw.mcpapp.json"), "{err}");
        let err = prepare_add(apps.path(), &request("npm:@x/y", Some("../up")), apps.path(), &[]).unwrap_err();
        assert!(matches!(err, InstallError::BadId { .. }), "{err}");
        let plan = prepare_add(apps.path(), &request("npm:@x/server-y@1.0.0", None), apps.path(), &[]).unwrap();
        assert_eq!(plan.id, "y");
        assert_eq!(plan.source_text, "npm:@x/server-y@1.0.0");
        assert_eq!(std::fs::read_dir(apps.path()).unwrap().count(), 1, "nothing was made");
    }

    #[test]
    fn version_folders_count_up() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(next_version_folder(dir.path()), "v1");
        std::fs::create_dir(dir.path().join("v1")).unwrap();
        std::fs::create_dir(dir.path().join("v7")).unwrap();
        std::fs::create_dir(dir.path().join("vx")).unwrap();
        assert_eq!(next_version_folder(dir.path()), "v8");
    }

    #[test]
    fn npm_and_pip_failures_are_told_apart() {
        let failed = |output: &str| Failed { status: "exit status: 1".into(), tail: vec!["last".into()], output: output.into() };
        let npm = |o: &str| classify("npm", "npm:x", failed(o), &["E404"], &["ECONNREFUSED"]);
        assert!(matches!(npm("npm error code E404\nnpm error 404 Not Found"), InstallError::UnknownPackage { .. }));
        assert!(matches!(npm("npm error code ECONNREFUSED"), InstallError::Unreachable { .. }));
        let other = npm("npm error something else");
        assert!(other.to_string().contains("last"), "{other}");
        assert_eq!(other.code(), "install_failed");
    }
}
