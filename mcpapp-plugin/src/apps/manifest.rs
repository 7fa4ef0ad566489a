//! The MCP App manifest (`openclaw.mcpapp.json`, SPEC R10).
//!
//! Parsing is deliberately two-phase:
//!
//! 1. [`Manifest::parse`] reads the JSON into a [`serde_json::Value`] and checks every field's type by
//!    hand. A derived `Deserialize` would stop at the first problem; a user fixing a manifest wants the
//!    whole list at once, each problem naming its field. A field with the wrong type falls back to its
//!    default so the remaining fields are still checked.
//! 2. [`Manifest::validate`] checks the semantic rules (stdio needs a `command`, http needs a `url`, …).
//!    It is separate because it must run on the *effective* manifest, after the `Entries` overrides of
//!    the gateway config have been applied (R14): an override may supply a missing `url`.
//!
//! [`Manifest::from_json_str`] and [`Manifest::load`] combine both phases for callers such as
//! `gateway-host validate` that have no overrides.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::upstream::process::Launch;

/// The file name discovery looks for, at any depth under a discovery path.
pub const MANIFEST_FILE_NAME: &str = "openclaw.mcpapp.json";
/// Default `version` when the manifest has none.
pub const DEFAULT_VERSION: &str = "0.1.0";
/// Default `protocolVersion`: the MCP revision the seed's apps were written against.
pub const DEFAULT_PROTOCOL_VERSION: &str = "2025-03-26";
/// Default `startupTimeoutSeconds` (connect + initialize + enumerate).
pub const DEFAULT_STARTUP_TIMEOUT_SECS: u64 = 15;
/// Default `requestTimeoutSeconds` (every upstream request).
pub const DEFAULT_REQUEST_TIMEOUT_SECS: u64 = 60;
/// Default `healthCheckIntervalSeconds`: how often an http app is pinged (0 turns checks off).
pub const DEFAULT_HEALTH_CHECK_INTERVAL_SECS: u64 = 5;
/// Upper bound for both timeouts (and the health-check interval). Far beyond anything useful, but keeps `Instant + Duration`
/// arithmetic in the runtime well away from overflow on absurd values. Shared with the host, which
/// checks workspace definitions against the same bound before the module sees them.
pub const MAX_TIMEOUT_SECS: u64 = host_abi::payloads::MAX_TIMEOUT_SECONDS;
/// Longest accepted app id. Ids appear in URLs (`/apps/mcp/{appId}`) and registry keys.
pub const MAX_ID_LEN: usize = 128;

/// Every field the manifest format defines; anything else is ignored with a debug log.
const KNOWN_FIELDS: &[&str] = &[
    "permissions",
    "id",
    "name",
    "description",
    "author",
    "license",
    "homepageUrl",
    "iconUrl",
    "category",
    "version",
    "protocolVersion",
    "minHostVersion",
    "transport",
    "command",
    "arguments",
    "workingDirectory",
    "url",
    "headers",
    "environment",
    "hasUi",
    "uiResourceUri",
    "toolNamePrefix",
    "startupTimeoutSeconds",
    "requestTimeoutSeconds",
    "healthCheckIntervalSeconds",
    "tags",
    "capabilities",
    "metadata",
];

/// One problem with a manifest (or config value), naming the field it is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ValidationError {
    /// The manifest field (camelCase, `headers.X-Key`, `arguments[2]`) or config key it concerns.
    pub field: String,
    /// What is wrong, in words a user can act on.
    pub message: String,
}

impl ValidationError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self { field: field.into(), message: message.into() }
    }
}

/// All problems found in one manifest file; returned by the strict entry points.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct ManifestErrors {
    /// The manifest file the problems are in.
    pub manifest_path: PathBuf,
    /// Every error found, in field order. Never empty.
    pub errors: Vec<ValidationError>,
    /// Non-fatal remarks (blank `version`, misspelt field names, …).
    pub warnings: Vec<String>,
}

impl fmt::Display for ManifestErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} problem(s)", self.manifest_path.display(), self.errors.len())?;
        for e in &self.errors {
            write!(f, "\n  {e}")?;
        }
        Ok(())
    }
}

/// How the gateway reaches the app.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// The gateway spawns `command` and speaks MCP over its stdin/stdout.
    #[default]
    Stdio,
    /// MCP Streamable HTTP to `url` (optionally after launching `command`).
    Http,
}

impl Transport {
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Stdio => "stdio",
            Transport::Http => "http",
        }
    }

    /// Parses `stdio` / `http`, case-insensitively (config overrides arrive in any case).
    pub fn parse(s: &str) -> Option<Transport> {
        if s.eq_ignore_ascii_case("stdio") {
            Some(Transport::Stdio)
        } else if s.eq_ignore_ascii_case("http") {
            Some(Transport::Http)
        } else {
            None
        }
    }
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The manifest model: camelCase as on disk, every default from the SPEC table applied.
///
/// `headers` keys are stored lower-cased (header names are case-insensitive; HTTP/2 sends them
/// lower-case anyway), which also makes override merging (R14) unambiguous.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Manifest {
    pub id: String,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub license: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub homepage_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub icon_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    pub version: String,
    pub protocol_version: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_host_version: Option<String>,
    pub transport: Transport,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    pub arguments: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub working_directory: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    pub headers: BTreeMap<String, String>,
    pub environment: BTreeMap<String, String>,
    pub has_ui: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ui_resource_uri: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_name_prefix: Option<String>,
    pub startup_timeout_seconds: u64,
    pub request_timeout_seconds: u64,
    /// http apps only: seconds between health checks (`ping`); two failures in a row and the app
    /// is lost (Failed, restarted with backoff). 0 disables the checks.
    pub health_check_interval_seconds: u64,
    pub tags: Vec<String>,
    pub capabilities: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    /// What the app may reach (SPEC R48; `apps/permissions.rs`).
    pub permissions: crate::apps::permissions::Permissions,
    /// Where the manifest was read from; relative `command`/`workingDirectory` resolve against its
    /// folder. Not part of the JSON format.
    #[serde(skip)]
    pub manifest_path: PathBuf,
}

impl Default for Manifest {
    fn default() -> Self {
        Self {
            id: String::new(),
            name: String::new(),
            description: None,
            author: None,
            license: None,
            homepage_url: None,
            icon_url: None,
            category: None,
            version: DEFAULT_VERSION.to_string(),
            protocol_version: DEFAULT_PROTOCOL_VERSION.to_string(),
            min_host_version: None,
            transport: Transport::Stdio,
            command: None,
            arguments: Vec::new(),
            working_directory: None,
            url: None,
            headers: BTreeMap::new(),
            environment: BTreeMap::new(),
            has_ui: false,
            ui_resource_uri: None,
            tool_name_prefix: None,
            startup_timeout_seconds: DEFAULT_STARTUP_TIMEOUT_SECS,
            request_timeout_seconds: DEFAULT_REQUEST_TIMEOUT_SECS,
            health_check_interval_seconds: DEFAULT_HEALTH_CHECK_INTERVAL_SECS,
            tags: Vec::new(),
            capabilities: vec!["tools".to_string()],
            metadata: None,
            permissions: Default::default(),
            manifest_path: PathBuf::new(),
        }
    }
}

/// Result of the lenient first phase: a manifest with defaults filled in wherever a field was missing
/// or had the wrong type, plus the type errors found on the way.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedManifest {
    pub manifest: Manifest,
    /// Type errors (and a missing/empty `id`). Semantic rules are in [`Manifest::validate`].
    pub errors: Vec<ValidationError>,
    pub warnings: Vec<String>,
}

/// A manifest that passed both phases, with its warnings.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedManifest {
    pub manifest: Manifest,
    pub warnings: Vec<String>,
}

/// Why a manifest file could not even be read as a JSON object.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestReadError {
    #[error("cannot read manifest file: {0}")]
    Io(String),
    #[error("manifest file is {size} bytes; the limit is {limit}")]
    TooLarge { size: u64, limit: u64 },
    #[error("manifest is not valid UTF-8")]
    NotUtf8,
    #[error("invalid JSON at line {line}, column {column}: {message}")]
    Syntax { line: usize, column: usize, message: String },
    #[error("expected a JSON object at the top level, found {0}")]
    NotAnObject(&'static str),
}

impl ManifestReadError {
    /// The pseudo-field name used when this error is reported as a [`ValidationError`].
    pub fn field(&self) -> &'static str {
        match self {
            ManifestReadError::Io(_) | ManifestReadError::TooLarge { .. } | ManifestReadError::NotUtf8 => "(file)",
            _ => "(json)",
        }
    }

    pub fn to_validation_error(&self) -> ValidationError {
        ValidationError::new(self.field(), self.to_string())
    }
}

/// Manifests are tiny; anything above this is a mistake (or an attack) and is refused before parsing.
pub const MAX_MANIFEST_BYTES: u64 = 1024 * 1024;

/// A stable hash of the effective manifest (plus where it lives). Reload compares fingerprints:
/// changed apps restart, unchanged apps keep running (R21).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ManifestFingerprint(pub u64);

impl Manifest {
    /// Phase 1 on text: JSON syntax/shape errors are `Err`; field type errors are collected in
    /// [`ParsedManifest::errors`] so every one of them can be reported.
    pub fn parse(text: &str, manifest_path: &Path) -> Result<ParsedManifest, ManifestReadError> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text); // editors on Windows add a BOM
        let value: Value = serde_json::from_str(text).map_err(|e| ManifestReadError::Syntax {
            line: e.line(),
            column: e.column(),
            message: strip_serde_position(&e.to_string()),
        })?;
        match value {
            Value::Object(obj) => Ok(Self::parse_object(&obj, manifest_path)),
            other => Err(ManifestReadError::NotAnObject(json_type_name(&other))),
        }
    }

    /// Phase 1 on an already-parsed JSON object.
    pub fn parse_object(obj: &Map<String, Value>, manifest_path: &Path) -> ParsedManifest {
        let mut r = FieldReader::new(obj);
        let mut warnings = Vec::new();
        let defaults = Manifest::default();

        let id = r.string("id").unwrap_or_default();
        if id.trim().is_empty() {
            r.errors.push(ValidationError::new("id", "is required and must not be empty"));
        }
        let name = match r.string("name") {
            Some(n) if !n.trim().is_empty() => n,
            Some(_) => {
                warnings.push("name: is blank; using the id instead".to_string());
                id.clone()
            }
            None => id.clone(),
        };
        let version = match r.string("version") {
            Some(v) if v.trim().is_empty() => {
                warnings.push(format!("version: is blank; using {DEFAULT_VERSION}"));
                defaults.version.clone()
            }
            Some(v) => v,
            None => defaults.version.clone(),
        };
        let transport = match r.string("transport") {
            Some(t) => Transport::parse(&t).unwrap_or_else(|| {
                r.errors.push(invalid_transport("transport", &t));
                Transport::Stdio
            }),
            None => Transport::Stdio,
        };
        let headers = r.string_map("headers").map(|h| normalize_headers("headers", h, &mut r.errors));

        let manifest = Manifest {
            name,
            description: r.string("description"),
            author: r.string("author"),
            license: r.string("license"),
            homepage_url: r.string("homepageUrl"),
            icon_url: r.string("iconUrl"),
            category: r.string("category"),
            version,
            protocol_version: r.string("protocolVersion").unwrap_or(defaults.protocol_version),
            min_host_version: r.string("minHostVersion"),
            transport,
            command: r.string("command"),
            arguments: r.string_list("arguments").unwrap_or_default(),
            working_directory: r.string("workingDirectory"),
            url: r.string("url"),
            headers: headers.unwrap_or_default(),
            environment: r.string_map("environment").map(|m| m.into_iter().collect()).unwrap_or_default(),
            has_ui: r.bool("hasUi").unwrap_or(false),
            ui_resource_uri: r.string("uiResourceUri"),
            tool_name_prefix: r.string("toolNamePrefix"),
            startup_timeout_seconds: r.uint("startupTimeoutSeconds").unwrap_or(DEFAULT_STARTUP_TIMEOUT_SECS),
            request_timeout_seconds: r.uint("requestTimeoutSeconds").unwrap_or(DEFAULT_REQUEST_TIMEOUT_SECS),
            health_check_interval_seconds: r
                .uint("healthCheckIntervalSeconds")
                .unwrap_or(DEFAULT_HEALTH_CHECK_INTERVAL_SECS),
            tags: r.string_list("tags").unwrap_or_default(),
            capabilities: r.string_list("capabilities").unwrap_or(defaults.capabilities),
            metadata: r.object("metadata"),
            permissions: r
                .get("permissions")
                .map(|v| {
                    let (permissions, problems) = crate::apps::permissions::Permissions::parse(v, "permissions");
                    r.errors.extend(problems.into_iter().map(|(field, message)| ValidationError::new(field, message)));
                    permissions
                })
                .unwrap_or_default(),
            manifest_path: manifest_path.to_path_buf(),
            id,
        };
        warnings.extend(unknown_field_warnings(obj, manifest_path));
        if !is_revision_like(&manifest.protocol_version) {
            warnings.push(format!(
                "protocolVersion: '{}' does not look like an MCP revision date (e.g. {DEFAULT_PROTOCOL_VERSION})",
                manifest.protocol_version
            ));
        }
        ParsedManifest { manifest, errors: r.errors, warnings }
    }

    /// Both phases, strict: `Ok` only when there is no error at all. Every problem is in the `Err`.
    pub fn from_json_str(text: &str, manifest_path: &Path) -> Result<LoadedManifest, ManifestErrors> {
        let parsed = Self::parse(text, manifest_path).map_err(|e| ManifestErrors {
            manifest_path: manifest_path.to_path_buf(),
            errors: vec![e.to_validation_error()],
            warnings: Vec::new(),
        })?;
        parsed.into_strict()
    }

    /// Reads and strictly checks a manifest file (what `gateway-host validate PATH` needs).
    pub fn load(manifest_path: &Path) -> Result<LoadedManifest, ManifestErrors> {
        let text = read_manifest_text(manifest_path).map_err(|e| ManifestErrors {
            manifest_path: manifest_path.to_path_buf(),
            errors: vec![e.to_validation_error()],
            warnings: Vec::new(),
        })?;
        Self::from_json_str(&text, manifest_path)
    }

    /// Phase 2: the semantic rules. Run it on the effective manifest (after the configuration's
    /// `Entries` overrides: `config::EntryOverride::apply_to`).
    pub fn validate(&self) -> Vec<ValidationError> {
        let mut errors = Vec::new();
        validate_id(&self.id, &mut errors);
        if let Err(message) = check_semantic_version(&self.version) {
            errors.push(ValidationError::new("version", message));
        }
        if let Some(v) = &self.min_host_version {
            if parse_version(v).is_none() {
                errors.push(ValidationError::new(
                    "minHostVersion",
                    format!("'{v}' is not a version like 1.2.3"),
                ));
            }
        }
        self.validate_connection(&mut errors);
        validate_headers(&self.headers, "headers", &mut errors);
        validate_environment(&self.environment, "environment", &mut errors);
        if let Some(uri) = &self.ui_resource_uri {
            // `get`, not indexing: byte 5 may fall inside a character (`ui:/ԝ…`, found by fuzzing).
            let ok = uri.len() > "ui://".len() && uri.get(..5).is_some_and(|p| p.eq_ignore_ascii_case("ui://"));
            if !ok {
                errors.push(ValidationError::new("uiResourceUri", format!("'{uri}' must be a ui:// URI")));
            }
        }
        if let Some(p) = &self.tool_name_prefix {
            if p.chars().any(|c| c.is_whitespace() || c.is_control()) {
                errors.push(ValidationError::new(
                    "toolNamePrefix",
                    "must not contain whitespace or control characters",
                ));
            }
        }
        validate_timeout("startupTimeoutSeconds", self.startup_timeout_seconds, &mut errors);
        validate_timeout("requestTimeoutSeconds", self.request_timeout_seconds, &mut errors);
        if self.health_check_interval_seconds > MAX_TIMEOUT_SECS {
            errors.push(ValidationError::new(
                "healthCheckIntervalSeconds",
                format!("must be at most {MAX_TIMEOUT_SECS} seconds (0 turns health checks off)"),
            ));
        }
        errors
    }

    fn validate_connection(&self, errors: &mut Vec<ValidationError>) {
        if let Some(cmd) = &self.command {
            if cmd.trim().is_empty() {
                errors.push(ValidationError::new("command", "must not be blank"));
            } else if cmd.contains('\0') {
                errors.push(ValidationError::new("command", "must not contain NUL characters"));
            }
        }
        for (i, a) in self.arguments.iter().enumerate() {
            if a.contains('\0') {
                errors.push(ValidationError::new(format!("arguments[{i}]"), "must not contain NUL characters"));
            }
        }
        if let Some(wd) = &self.working_directory {
            if wd.trim().is_empty() || wd.contains('\0') {
                errors.push(ValidationError::new("workingDirectory", "must be a non-blank path"));
            }
        }
        match self.transport {
            Transport::Stdio if self.command.is_none() => {
                errors.push(ValidationError::new("command", "is required when transport is \"stdio\""));
            }
            Transport::Http if self.url.is_none() => {
                errors.push(ValidationError::new("url", "is required when transport is \"http\""));
            }
            _ => {}
        }
        if let Some(url) = &self.url {
            if let Err(msg) = check_http_url(url) {
                errors.push(ValidationError::new("url", msg));
            }
        }
    }

    /// The folder containing the manifest (`.` when the manifest has no path).
    pub fn manifest_dir(&self) -> &Path {
        match self.manifest_path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        }
    }

    /// The program to spawn. A command containing a path separator or starting with `.` is a path and,
    /// when relative, resolves against the manifest's folder (so an app folder can be moved as a
    /// whole); a bare name such as `node` is left for the `PATH` lookup.
    pub fn resolved_command(&self) -> Option<PathBuf> {
        let cmd = self.command.as_deref()?;
        let is_path = cmd.contains('/') || cmd.contains('\\') || cmd.starts_with('.');
        let p = Path::new(cmd);
        if !is_path || p.is_absolute() {
            return Some(p.to_path_buf());
        }
        Some(clean_path(&self.manifest_dir().join(p)))
    }

    /// The child's working directory: `workingDirectory` resolved against the manifest's folder, or the
    /// manifest's folder itself (apps expect to find their files next to their manifest).
    pub fn resolved_working_dir(&self) -> PathBuf {
        match self.working_directory.as_deref() {
            Some(wd) if Path::new(wd).is_absolute() => PathBuf::from(wd),
            Some(wd) => clean_path(&self.manifest_dir().join(wd)),
            None => self.manifest_dir().to_path_buf(),
        }
    }

    /// What to start for this app (see [`Manifest::launches_process`]).
    pub fn launch(&self) -> Launch {
        Launch {
            command: self.resolved_command(),
            arguments: self.arguments.clone(),
            working_dir: self.resolved_working_dir(),
            environment: self.environment.clone(),
            confinement: None,
        }
    }

    /// True when the gateway must launch a process (stdio always; http when a `command` is given).
    pub fn launches_process(&self) -> bool {
        self.command.is_some()
    }

    /// Path escapes (issue 16): where this manifest's own `workingDirectory` or `command` leads
    /// out of the app's folder. A working directory outside the folder (`../../etc`, `/etc`) is an
    /// error naming the field. A relative command that climbs out of it (`../../bin/sh`) runs (the
    /// example app starts a binary of the workspace's `target` folder that way), reported as a
    /// warning naming where it leads; absolute commands and bare names (`PATH`) are not paths into
    /// the folder and are not reported. Checked on the manifest as written, not on an operator's
    /// `Entries` override, which may name any folder or program. Lexical: `..` is resolved without
    /// following symlinks.
    pub fn folder_escapes(&self) -> (Vec<ValidationError>, Vec<String>) {
        let base = lexical_absolute(self.manifest_dir());
        let leaves = |path: &Path| -> Option<PathBuf> {
            let resolved = lexical_absolute(&base.join(path));
            (!resolved.starts_with(&base)).then_some(resolved)
        };
        let mut errors = Vec::new();
        let mut warnings = Vec::new();
        if let Some(wd) = self.working_directory.as_deref().filter(|wd| !wd.trim().is_empty() && !wd.contains('\0')) {
            if let Some(resolved) = leaves(Path::new(wd)) {
                errors.push(ValidationError::new(
                    "workingDirectory",
                    format!(
                        "'{wd}' resolves to {}, outside the app's folder {}: an app's working directory must be inside its folder",
                        resolved.display(),
                        base.display()
                    ),
                ));
            }
        }
        if let Some(cmd) = self.command.as_deref().filter(|c| !c.contains('\0')) {
            let is_path = cmd.contains('/') || cmd.contains('\\') || cmd.starts_with('.');
            if is_path && !Path::new(cmd).is_absolute() {
                if let Some(resolved) = leaves(Path::new(cmd)) {
                    warnings.push(format!(
                        "command: '{cmd}' resolves to {}, outside the app's folder {}",
                        resolved.display(),
                        base.display()
                    ));
                }
            }
        }
        (errors, warnings)
    }

    /// Refuses the app when the gateway is older than `minHostVersion`. An unparsable version on
    /// either side is an error naming the field rather than a silent pass.
    pub fn check_host_version(&self, host_version: &str) -> Result<(), ValidationError> {
        let Some(min) = self.min_host_version.as_deref() else { return Ok(()) };
        let err = |msg: String| ValidationError::new("minHostVersion", msg);
        let need = parse_version(min).ok_or_else(|| err(format!("'{min}' is not a version like 1.2.3")))?;
        let have = parse_version(host_version)
            .ok_or_else(|| err(format!("cannot compare with the gateway version '{host_version}'")))?;
        if compare_parsed(&have, &need) == Ordering::Less {
            return Err(err(format!(
                "this app requires gateway version {min} or newer; this gateway is {host_version}"
            )));
        }
        Ok(())
    }

    /// Fingerprint of everything that affects how the app is run.
    pub fn fingerprint(&self) -> ManifestFingerprint {
        let mut bytes = serde_json::to_vec(self).unwrap_or_default();
        bytes.push(0);
        bytes.extend_from_slice(self.manifest_path.to_string_lossy().as_bytes());
        ManifestFingerprint(fnv1a64(&bytes))
    }
}

impl ParsedManifest {
    /// All errors of both phases, type errors first.
    pub fn all_errors(&self) -> Vec<ValidationError> {
        let mut all = self.errors.clone();
        for e in self.manifest.validate() {
            if !all.contains(&e) {
                all.push(e);
            }
        }
        all
    }

    fn into_strict(self) -> Result<LoadedManifest, ManifestErrors> {
        let errors = self.all_errors();
        if errors.is_empty() {
            Ok(LoadedManifest { manifest: self.manifest, warnings: self.warnings })
        } else {
            Err(ManifestErrors { manifest_path: self.manifest.manifest_path, errors, warnings: self.warnings })
        }
    }
}

/// Reads a manifest file as text, refusing huge or non-UTF-8 files with a clear message.
/// One `open` and the reads, typically two (discovery reads thousands of these: a `stat` for
/// the size first was a tenth of its system calls); the size is asked only of a file that
/// turns out too large, for the message.
pub fn read_manifest_text(path: &Path) -> Result<String, ManifestReadError> {
    use std::io::Read as _;
    let io = |e: std::io::Error| ManifestReadError::Io(e.to_string());
    let mut file = std::fs::File::open(path).map_err(io)?;
    // Never more than the limit, even if the file grows meanwhile.
    let mut bytes = Vec::with_capacity(MANIFEST_READ_START);
    (&mut file).take(MAX_MANIFEST_BYTES + 1).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 > MAX_MANIFEST_BYTES {
        let size = file.metadata().map_or(0, |m| m.len()).max(bytes.len() as u64);
        return Err(ManifestReadError::TooLarge { size, limit: MAX_MANIFEST_BYTES });
    }
    String::from_utf8(bytes).map_err(|_| ManifestReadError::NotUtf8)
}

/// The buffer a manifest is first read into: manifests are typically well under a KiB.
const MANIFEST_READ_START: usize = 4096;

// ---------------------------------------------------------------------------------------------
// Field reading with type errors
// ---------------------------------------------------------------------------------------------

/// Reads typed fields out of a JSON object, recording a [`ValidationError`] for each wrong type.
/// `null` counts as absent: several generators write optional fields as `null`.
struct FieldReader<'a> {
    obj: &'a Map<String, Value>,
    errors: Vec<ValidationError>,
}

impl<'a> FieldReader<'a> {
    fn new(obj: &'a Map<String, Value>) -> Self {
        Self { obj, errors: Vec::new() }
    }

    fn get(&self, name: &str) -> Option<&'a Value> {
        self.obj.get(name).filter(|v| !v.is_null())
    }

    fn wrong_type(&mut self, field: &str, expected: &str, found: &Value) {
        self.errors.push(ValidationError::new(
            field,
            format!("expected {expected}, found {}", json_type_name(found)),
        ));
    }

    fn string(&mut self, name: &str) -> Option<String> {
        match self.get(name)? {
            Value::String(s) => Some(s.clone()),
            other => {
                self.wrong_type(name, "a string", other);
                None
            }
        }
    }

    fn bool(&mut self, name: &str) -> Option<bool> {
        match self.get(name)? {
            Value::Bool(b) => Some(*b),
            other => {
                self.wrong_type(name, "true or false", other);
                None
            }
        }
    }

    fn uint(&mut self, name: &str) -> Option<u64> {
        let v = self.get(name)?;
        match json_to_u64(v) {
            Some(n) => Some(n),
            None => {
                self.wrong_type(name, "a positive integer", v);
                None
            }
        }
    }

    fn string_list(&mut self, name: &str) -> Option<Vec<String>> {
        let v = self.get(name)?;
        let Value::Array(items) = v else {
            self.wrong_type(name, "an array of strings", v);
            return None;
        };
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            match item {
                Value::String(s) => out.push(s.clone()),
                other => self.wrong_type(&format!("{name}[{i}]"), "a string", other),
            }
        }
        Some(out)
    }

    /// A string→string object, in the object's order.
    fn string_map(&mut self, name: &str) -> Option<Vec<(String, String)>> {
        let v = self.get(name)?;
        let Value::Object(map) = v else {
            self.wrong_type(name, "an object of strings", v);
            return None;
        };
        let mut out = Vec::with_capacity(map.len());
        for (k, item) in map {
            match item {
                Value::String(s) => out.push((k.clone(), s.clone())),
                other => self.wrong_type(&format!("{name}.{k}"), "a string", other),
            }
        }
        Some(out)
    }

    fn object(&mut self, name: &str) -> Option<Map<String, Value>> {
        match self.get(name)? {
            Value::Object(m) => Some(m.clone()),
            other => {
                self.wrong_type(name, "an object", other);
                None
            }
        }
    }
}

/// Lower-cases header names; two names differing only by case are an error (which one wins would
/// otherwise depend on JSON key order).
pub(crate) fn normalize_headers(
    field: &str,
    headers: Vec<(String, String)>,
    errors: &mut Vec<ValidationError>,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut original: BTreeMap<String, String> = BTreeMap::new();
    for (name, value) in headers {
        let lower = name.to_ascii_lowercase();
        if let Some(first) = original.get(&lower) {
            errors.push(ValidationError::new(
                format!("{field}.{name}"),
                format!("duplicate header name (header names are case-insensitive; also given as '{first}')"),
            ));
            continue;
        }
        original.insert(lower.clone(), name);
        out.insert(lower, value);
    }
    out
}

fn invalid_transport(field: &str, value: &str) -> ValidationError {
    ValidationError::new(field, format!("'{value}' is not a supported transport; expected \"stdio\" or \"http\""))
}

pub(crate) fn invalid_transport_error(field: &str, value: &str) -> ValidationError {
    invalid_transport(field, value)
}

/// Unknown fields are ignored (forward compatibility), logged at debug level; a field that matches a
/// known one except for case is almost certainly a typo and earns a warning.
fn unknown_field_warnings(obj: &Map<String, Value>, manifest_path: &Path) -> Vec<String> {
    let mut warnings = Vec::new();
    for key in obj.keys() {
        if KNOWN_FIELDS.contains(&key.as_str()) {
            continue;
        }
        tracing::debug!(manifest = %manifest_path.display(), field = %key, "ignoring unknown manifest field");
        if let Some(known) = KNOWN_FIELDS.iter().find(|k| k.eq_ignore_ascii_case(key)) {
            warnings.push(format!("{key}: unknown field ignored; did you mean '{known}'?"));
        }
    }
    warnings
}

// ---------------------------------------------------------------------------------------------
// Semantic checks
// ---------------------------------------------------------------------------------------------

/// Ids appear in URLs, registry keys and tool provider names, so they are kept to a URL-safe alphabet.
fn validate_id(id: &str, errors: &mut Vec<ValidationError>) {
    if id.trim().is_empty() {
        errors.push(ValidationError::new("id", "is required and must not be empty"));
        return;
    }
    let first_ok = id.chars().next().is_some_and(|c| c.is_ascii_alphanumeric());
    let rest_ok = id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if !first_ok || !rest_ok {
        errors.push(ValidationError::new(
            "id",
            format!("'{id}' must start with a letter or digit and contain only letters, digits, '.', '_' and '-'"),
        ));
    }
    if id.len() > MAX_ID_LEN {
        errors.push(ValidationError::new("id", format!("is longer than {MAX_ID_LEN} characters")));
    }
}

fn validate_timeout(field: &str, secs: u64, errors: &mut Vec<ValidationError>) {
    if secs == 0 {
        errors.push(ValidationError::new(field, "must be a positive integer (seconds)"));
    } else if secs > MAX_TIMEOUT_SECS {
        errors.push(ValidationError::new(field, format!("must be at most {MAX_TIMEOUT_SECS} seconds")));
    }
}

/// Header names must be RFC 9110 tokens and values free of control characters, or the HTTP client
/// would fail at connect time with a far less helpful message.
pub(crate) fn validate_headers(headers: &BTreeMap<String, String>, field: &str, errors: &mut Vec<ValidationError>) {
    for (name, value) in headers {
        let is_tchar = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
        if name.is_empty() || !name.chars().all(is_tchar) {
            errors.push(ValidationError::new(format!("{field}.{name}"), "is not a valid HTTP header name"));
        }
        if value.chars().any(|c| c.is_control() && c != '\t') {
            errors.push(ValidationError::new(
                format!("{field}.{name}"),
                "header value must not contain control characters (CR, LF, NUL, …)",
            ));
        }
    }
}

pub(crate) fn validate_environment(env: &BTreeMap<String, String>, field: &str, errors: &mut Vec<ValidationError>) {
    for (name, value) in env {
        if name.is_empty() || name.contains('=') || name.contains('\0') {
            errors.push(ValidationError::new(
                format!("{field}.{name}"),
                "is not a valid environment variable name (empty, or contains '=' or NUL)",
            ));
        }
        if value.contains('\0') {
            errors.push(ValidationError::new(format!("{field}.{name}"), "value must not contain NUL characters"));
        }
    }
}

/// A deliberately small http(s) URL check: scheme, non-empty host, numeric port, no whitespace.
/// (The HTTP client parses the URL fully at connect time; this catches the common mistakes early
/// with the field name attached.)
pub fn check_http_url(url: &str) -> Result<(), String> {
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("'{url}' must not contain whitespace"));
    }
    let lower = url.to_ascii_lowercase();
    let rest = if lower.starts_with("http://") {
        &url[7..]
    } else if lower.starts_with("https://") {
        &url[8..]
    } else {
        return Err(format!("'{url}' must be an http:// or https:// URL"));
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host_port = authority.rsplit('@').next().unwrap_or("");
    let (host, port) = split_host_port(host_port);
    if host.is_empty() {
        return Err(format!("'{url}' has no host"));
    }
    if let Some(port) = port {
        if port.parse::<u16>().is_err() {
            return Err(format!("'{url}' has an invalid port '{port}'"));
        }
    }
    Ok(())
}

fn split_host_port(s: &str) -> (&str, Option<&str>) {
    if let Some(after) = s.strip_prefix('[') {
        // IPv6 literal: [::1]:8080
        return match after.split_once(']') {
            Some((host, rest)) => (host, rest.strip_prefix(':')),
            None => ("", None),
        };
    }
    match s.rsplit_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (s, None),
    }
}

fn is_revision_like(v: &str) -> bool {
    let b = v.as_bytes();
    b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b.iter().enumerate().all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit())
}

// ---------------------------------------------------------------------------------------------
// Versions
// ---------------------------------------------------------------------------------------------

/// Parses "1.2.3" (also "v1.2", "1.2.3-beta+build": pre-release and build suffixes are ignored, so a
/// 1.2.0-beta gateway satisfies minHostVersion 1.2.0). 1 to 4 numeric components.
pub fn parse_version(v: &str) -> Option<Vec<u64>> {
    let v = v.trim();
    let v = v.strip_prefix(['v', 'V']).unwrap_or(v);
    let core = v.split(['-', '+']).next()?;
    let parts: Vec<&str> = core.split('.').collect();
    if parts.is_empty() || parts.len() > 4 {
        return None;
    }
    parts
        .iter()
        .map(|p| if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) { None } else { p.parse().ok() })
        .collect()
}

/// `version` must be a semantic version (semver.org 2.0.0): `MAJOR.MINOR.PATCH`, each a number
/// without leading zeros, optionally followed by `-pre.release` and `+build` (`1.4.0`,
/// `2.0.0-beta.1`). Unlike [`parse_version`] (used for `minHostVersion` comparisons), this is
/// strict: `1.2`, `v1.2.3` and `banana` are refused.
pub fn check_semantic_version(v: &str) -> Result<(), String> {
    semver::Version::parse(v)
        .map(drop)
        .map_err(|e| format!("'{v}' is not a semantic version (MAJOR.MINOR.PATCH, e.g. 1.2.0): {e}"))
}

/// Numeric comparison of two versions (missing components count as 0); `None` if either is unparsable.
pub fn compare_versions(a: &str, b: &str) -> Option<Ordering> {
    Some(compare_parsed(&parse_version(a)?, &parse_version(b)?))
}

fn compare_parsed(a: &[u64], b: &[u64]) -> Ordering {
    let n = a.len().max(b.len());
    (0..n)
        .map(|i| a.get(i).unwrap_or(&0).cmp(b.get(i).unwrap_or(&0)))
        .find(|o| *o != Ordering::Equal)
        .unwrap_or(Ordering::Equal)
}

// ---------------------------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------------------------

pub(crate) use crate::apps::json_values::{json_to_u64, json_type_name};

/// serde_json appends " at line L column C"; the position is reported separately.
fn strip_serde_position(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg.to_string(),
    }
}

/// Removes `.` components (`/apps/x/./bin` → `/apps/x/bin`) for readable logs. `..` is kept: resolving
/// it lexically would be wrong across symlinks.
fn clean_path(p: &Path) -> PathBuf {
    p.components().filter(|c| !matches!(c, Component::CurDir)).collect()
}

/// `p` made absolute (against the current folder, as the spawn resolves it) with `.` and `..`
/// resolved lexically (`..` at the root stays at the root). For containment checks only: the
/// spawn itself keeps `..`, which the kernel resolves through symlinks.
fn lexical_absolute(p: &Path) -> PathBuf {
    let joined;
    let p = if p.is_absolute() {
        p
    } else {
        joined = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")).join(p);
        &joined
    };
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// FNV-1a: tiny, stable across builds and Rust versions (unlike `DefaultHasher`), enough for
/// change detection.
fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The seed's manifest, verbatim.
    pub(crate) const SEED_MANIFEST: &str = r#"{
  "id": "grocery-inventory",
  "name": "Grocery Inventory Dashboard",
  "description": "Multi-store grocery inventory management MCP App with interactive dashboard. Manage products, categories, suppliers, stores, and inventory levels across a retail chain. Includes stock adjustment, low-stock alerts, restock recommendations, and purchase order drafting.",
  "version": "1.0.0",
  "protocolVersion": "2025-03-26",
  "iconUrl": "https://img.icons8.com/color/48/grocery-store.png",
  "author": "OpenClaw MCP App Demo",
  "license": "MIT",
  "homepageUrl": "https://github.com/boclifton-MSFT/MCPAppsDemo",
  "tags": ["grocery", "inventory", "retail", "supply-chain", "dashboard"],
  "transport": "http",
  "url": "https://localhost:5001/mcp",
  "hasUi": true,
  "uiResourceUri": "ui://grocery/store-dashboard.html",
  "category": "data",
  "capabilities": ["tools", "resources", "prompts", "completions"],
  "startupTimeoutSeconds": 10,
  "requestTimeoutSeconds": 60,
  "toolNamePrefix": "grocery.",
  "headers": {}
}"#;

    /// The shorter copy from the seed's tutorial (the description is elided with "…").
    const SEED_MANIFEST_SHORT: &str = r#"{
  "id": "grocery-inventory",
  "name": "Grocery Inventory Dashboard",
  "description": "Multi-store grocery inventory management MCP App…",
  "version": "1.0.0",
  "protocolVersion": "2025-03-26",
  "transport": "http",
  "url": "https://localhost:5001/mcp",
  "hasUi": true,
  "uiResourceUri": "ui://grocery/store-dashboard.html",
  "capabilities": ["tools", "resources", "prompts", "completions"],
  "toolNamePrefix": "grocery.",
  "startupTimeoutSeconds": 10,
  "requestTimeoutSeconds": 60
}"#;

    fn p() -> PathBuf {
        PathBuf::from("/apps/x/openclaw.mcpapp.json")
    }

    fn parse(v: Value) -> ParsedManifest {
        Manifest::parse(&v.to_string(), &p()).expect("json object")
    }

    fn fields(errors: &[ValidationError]) -> Vec<&str> {
        errors.iter().map(|e| e.field.as_str()).collect()
    }

    /// Found by the fuzzer: a multi-byte character across the `ui://` prefix's end panicked.
    #[test]
    fn a_ui_resource_uri_with_a_character_across_the_prefix_is_an_error_not_a_panic() {
        let text = r#"{"id":"b","name":"B","version":"1.0.0","transport":"stdio","command":"srv","hasUi":true,"uiResourceUri":"ui:/\u051d/x.html"}"#;
        let parsed = Manifest::parse(text, &p()).expect("parses");
        assert!(fields(&parsed.manifest.validate()).contains(&"uiResourceUri"));
    }

    #[test]
    fn seed_manifest_parses_verbatim() {
        for text in [SEED_MANIFEST, SEED_MANIFEST_SHORT] {
            let loaded = Manifest::from_json_str(text, &p()).expect("seed manifest is valid");
            let m = loaded.manifest;
            assert_eq!(m.id, "grocery-inventory");
            assert_eq!(m.name, "Grocery Inventory Dashboard");
            assert_eq!(m.version, "1.0.0");
            assert_eq!(m.transport, Transport::Http);
            assert_eq!(m.url.as_deref(), Some("https://localhost:5001/mcp"));
            assert!(m.has_ui);
            assert_eq!(m.ui_resource_uri.as_deref(), Some("ui://grocery/store-dashboard.html"));
            assert_eq!(m.tool_name_prefix.as_deref(), Some("grocery."));
            assert_eq!(m.startup_timeout_seconds, 10);
            assert_eq!(m.request_timeout_seconds, 60);
            assert_eq!(m.capabilities, ["tools", "resources", "prompts", "completions"]);
            assert!(m.headers.is_empty());
            assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
        }
        let full = Manifest::from_json_str(SEED_MANIFEST, &p()).unwrap().manifest;
        assert_eq!(full.tags.len(), 5);
        assert_eq!(full.category.as_deref(), Some("data"));
        assert_eq!(full.license.as_deref(), Some("MIT"));
        assert_eq!(full.author.as_deref(), Some("OpenClaw MCP App Demo"));
        assert_eq!(full.homepage_url.as_deref(), Some("https://github.com/boclifton-MSFT/MCPAppsDemo"));
        assert_eq!(full.icon_url.as_deref(), Some("https://img.icons8.com/color/48/grocery-store.png"));
    }

    #[test]
    fn every_default() {
        let m = Manifest::from_json_str(r#"{"id":"a","command":"node"}"#, &p()).unwrap().manifest;
        assert_eq!(m.name, "a", "name defaults to id");
        assert_eq!(m.version, "0.1.0");
        assert_eq!(m.protocol_version, "2025-03-26");
        assert_eq!(m.min_host_version, None);
        assert_eq!(m.transport, Transport::Stdio);
        assert!(m.arguments.is_empty());
        assert_eq!(m.working_directory, None);
        assert_eq!(m.url, None);
        assert!(m.headers.is_empty() && m.environment.is_empty());
        assert!(!m.has_ui);
        assert_eq!(m.ui_resource_uri, None);
        assert_eq!(m.tool_name_prefix, None);
        assert_eq!(m.startup_timeout_seconds, 15);
        assert_eq!(m.request_timeout_seconds, 60);
        assert!(m.tags.is_empty());
        assert_eq!(m.capabilities, ["tools"]);
        assert_eq!(m.metadata, None);
        assert_eq!(
            (m.description, m.author, m.license, m.homepage_url, m.icon_url, m.category),
            (None, None, None, None, None, None)
        );
    }

    #[test]
    fn missing_or_empty_id_is_an_error() {
        for v in [json!({"command": "x"}), json!({"id": "", "command": "x"}), json!({"id": "  ", "command": "x"})] {
            let errs = parse(v).all_errors();
            assert_eq!(fields(&errs), ["id"], "{errs:?}");
        }
    }

    #[test]
    fn bad_id_characters() {
        let errs = parse(json!({"id": "a/b", "command": "x"})).all_errors();
        assert_eq!(fields(&errs), ["id"]);
        assert!(errs[0].message.contains("'a/b'"));
        assert!(parse(json!({"id": "x".repeat(129), "command": "x"})).all_errors()[0].message.contains("longer"));
    }

    #[test]
    fn every_wrong_type_is_reported_with_its_field() {
        let v = json!({
            "id": 5, "name": [], "description": 1, "author": true, "license": {}, "homepageUrl": 1,
            "iconUrl": 1, "category": 1, "version": 1, "protocolVersion": 1, "minHostVersion": 1,
            "transport": 1, "command": 1, "arguments": "x", "workingDirectory": 1, "url": 1,
            "headers": [], "environment": "x", "hasUi": "true", "uiResourceUri": 1, "toolNamePrefix": 1,
            "startupTimeoutSeconds": "15", "requestTimeoutSeconds": -1, "healthCheckIntervalSeconds": "5",
            "tags": {}, "capabilities": 1,
            "metadata": [], "permissions": "all"
        });
        let parsed = parse(v);
        let got = fields(&parsed.errors);
        for f in KNOWN_FIELDS {
            assert!(got.contains(f), "no error for {f}: {got:?}");
        }
        let e = parsed.errors.iter().find(|e| e.field == "hasUi").unwrap();
        assert_eq!(e.to_string(), "hasUi: expected true or false, found a string");
        let e = parsed.errors.iter().find(|e| e.field == "requestTimeoutSeconds").unwrap();
        assert_eq!(e.message, "expected a positive integer, found a number");
    }

    #[test]
    fn element_type_errors_name_the_element() {
        let parsed = parse(json!({
            "id": "a", "command": "x", "arguments": ["ok", 2], "tags": [null], "environment": {"A": 1},
            "headers": {"X-A": false}
        }));
        assert_eq!(fields(&parsed.errors), ["headers.X-A", "arguments[1]", "environment.A", "tags[0]"]);
        assert_eq!(parsed.manifest.arguments, ["ok"]);
    }

    #[test]
    fn null_counts_as_absent() {
        let m = parse(json!({"id": "a", "command": "x", "url": null, "tags": null})).manifest;
        assert_eq!(m.url, None);
        assert!(m.tags.is_empty());
    }

    #[test]
    fn invalid_transport() {
        let errs = parse(json!({"id": "a", "transport": "sse", "command": "x"})).all_errors();
        assert_eq!(fields(&errs), ["transport"]);
        assert!(errs[0].message.contains("'sse'"));
        assert_eq!(parse(json!({"id": "a", "transport": "HTTP", "url": "http://h"})).manifest.transport, Transport::Http);
    }

    #[test]
    fn stdio_requires_command_http_requires_url() {
        let errs = parse(json!({"id": "a"})).all_errors();
        assert_eq!(errs, [ValidationError::new("command", "is required when transport is \"stdio\"")]);
        let errs = parse(json!({"id": "a", "transport": "http"})).all_errors();
        assert_eq!(fields(&errs), ["url"]);
        // http with a command: launch, then connect
        let m = parse(json!({"id": "a", "transport": "http", "url": "http://127.0.0.1:9/mcp", "command": "./srv"}));
        assert!(m.all_errors().is_empty());
        assert!(m.manifest.launches_process());
    }

    #[test]
    fn url_checks() {
        for good in ["http://h", "https://localhost:5001/mcp", "HTTP://[::1]:80/x?y#z", "http://u:p@h:1"] {
            assert_eq!(check_http_url(good), Ok(()), "{good}");
        }
        for bad in ["ftp://h", "localhost:5001", "http://", "http://h:99999/", "http://h:x", "http://h /x", "https://:80"] {
            assert!(check_http_url(bad).is_err(), "{bad}");
        }
        let errs = parse(json!({"id": "a", "transport": "http", "url": "ws://x"})).all_errors();
        assert_eq!(fields(&errs), ["url"]);
    }

    #[test]
    fn header_names_are_case_insensitive() {
        let parsed = parse(json!({"id": "a", "transport": "http", "url": "http://h", "headers": {"X-Api-Key": "1"}}));
        assert_eq!(parsed.manifest.headers.get("x-api-key").map(String::as_str), Some("1"));
        let parsed = parse(json!({"id": "a", "transport": "http", "url": "http://h",
            "headers": {"X-Api-Key": "1", "x-api-key": "2"}}));
        assert_eq!(parsed.errors.len(), 1, "{:?}", parsed.errors);
        assert!(parsed.errors[0].field.starts_with("headers."));
        assert!(parsed.errors[0].message.contains("case-insensitive"));
    }

    #[test]
    fn header_and_environment_contents() {
        let errs = parse(json!({"id": "a", "transport": "http", "url": "http://h",
            "headers": {"bad name": "v", "ok": "line\nbreak"}, "environment": {"A=B": "x", "C": "nul\u{0}"}}))
        .all_errors();
        assert_eq!(fields(&errs), ["headers.bad name", "headers.ok", "environment.A=B", "environment.C"]);
    }

    #[test]
    fn ui_resource_uri_must_be_ui_scheme() {
        let errs = parse(json!({"id": "a", "command": "x", "uiResourceUri": "https://x/y.html"})).all_errors();
        assert_eq!(fields(&errs), ["uiResourceUri"]);
        assert_eq!(fields(&parse(json!({"id": "a", "command": "x", "uiResourceUri": "ui://"})).all_errors()), ["uiResourceUri"]);
        assert!(parse(json!({"id": "a", "command": "x", "uiResourceUri": "ui://a/b"})).all_errors().is_empty());
    }

    #[test]
    fn timeouts_must_be_positive_integers() {
        let errs = parse(json!({"id": "a", "command": "x", "startupTimeoutSeconds": 0, "requestTimeoutSeconds": 1.5}))
            .all_errors();
        assert_eq!(fields(&errs), ["requestTimeoutSeconds", "startupTimeoutSeconds"]);
        let errs = parse(json!({"id": "a", "command": "x", "startupTimeoutSeconds": 100000})).all_errors();
        assert_eq!(fields(&errs), ["startupTimeoutSeconds"]);
        let m = parse(json!({"id": "a", "command": "x", "startupTimeoutSeconds": 20.0})).manifest;
        assert_eq!(m.startup_timeout_seconds, 20);
    }

    #[test]
    fn health_check_interval_defaults_and_allows_zero() {
        let m = parse(json!({"id": "a", "transport": "http", "url": "http://h/mcp"})).manifest;
        assert_eq!(m.health_check_interval_seconds, DEFAULT_HEALTH_CHECK_INTERVAL_SECS);
        let off = parse(json!({"id": "a", "transport": "http", "url": "http://h/mcp", "healthCheckIntervalSeconds": 0}));
        assert!(off.all_errors().is_empty(), "{:?}", off.all_errors());
        assert_eq!(off.manifest.health_check_interval_seconds, 0);
        for bad in [json!(-1), json!("5"), json!(1.5), json!(100000)] {
            let errs = parse(json!({"id": "a", "command": "x", "healthCheckIntervalSeconds": bad})).all_errors();
            assert_eq!(fields(&errs), ["healthCheckIntervalSeconds"], "{bad}");
        }
    }

    #[test]
    fn blank_version_is_a_warning() {
        let loaded = Manifest::from_json_str(r#"{"id":"a","command":"x","version":" "}"#, &p()).unwrap();
        assert_eq!(loaded.manifest.version, "0.1.0");
        assert_eq!(loaded.warnings.len(), 1);
        assert!(loaded.warnings[0].starts_with("version:"));
    }

    #[test]
    fn unknown_fields_are_ignored_and_case_typos_warned() {
        let loaded = Manifest::from_json_str(r#"{"id":"a","command":"x","future":1,"ToolNamePrefix":"p."}"#, &p()).unwrap();
        assert_eq!(loaded.manifest.tool_name_prefix, None);
        assert_eq!(loaded.warnings, ["ToolNamePrefix: unknown field ignored; did you mean 'toolNamePrefix'?"]);
    }

    #[test]
    fn all_problems_are_reported_at_once() {
        let err = Manifest::from_json_str(
            r#"{"transport":"http","url":"nope","hasUi":1,"startupTimeoutSeconds":0,"uiResourceUri":"x"}"#,
            &p(),
        )
        .unwrap_err();
        assert_eq!(
            fields(&err.errors),
            ["id", "hasUi", "url", "uiResourceUri", "startupTimeoutSeconds"]
        );
        let text = err.to_string();
        assert!(text.contains("5 problem(s)") && text.contains("\n  url: 'nope' must be an http:// or https:// URL"), "{text}");
    }

    #[test]
    fn syntax_and_shape_errors() {
        let e = Manifest::parse("{\n  \"id\": ", &p()).unwrap_err();
        assert!(matches!(e, ManifestReadError::Syntax { line: 2, .. }), "{e:?}");
        assert_eq!(e.to_validation_error().field, "(json)");
        assert_eq!(Manifest::parse("[1]", &p()).unwrap_err(), ManifestReadError::NotAnObject("an array"));
        // A UTF-8 BOM is tolerated.
        assert!(Manifest::from_json_str("\u{feff}{\"id\":\"a\",\"command\":\"x\"}", &p()).is_ok());
    }

    #[test]
    fn min_host_version() {
        let m = parse(json!({"id": "a", "command": "x", "minHostVersion": "1.2.3"})).manifest;
        assert!(m.check_host_version("1.2.3").is_ok());
        assert!(m.check_host_version("1.10.0").is_ok());
        assert!(m.check_host_version("v2").is_ok());
        let e = m.check_host_version("1.2.2").unwrap_err();
        assert_eq!(e.field, "minHostVersion");
        assert!(e.message.contains("1.2.3") && e.message.contains("1.2.2"));
        assert_eq!(m.check_host_version("dev").unwrap_err().field, "minHostVersion");
        let bad = parse(json!({"id": "a", "command": "x", "minHostVersion": "latest"}));
        assert_eq!(fields(&bad.all_errors()), ["minHostVersion"]);
        assert_eq!(bad.manifest.check_host_version("1.0.0").unwrap_err().field, "minHostVersion");
        assert!(parse(json!({"id": "a", "command": "x"})).manifest.check_host_version("garbage").is_ok());
    }

    #[test]
    fn version_must_be_a_semantic_version() {
        for good in ["1.2.3", "0.1.0", "2.0.0-beta.1", "1.0.0+build.5", "10.20.30-rc.1+sha.abc"] {
            let errs = parse(json!({"id": "a", "command": "x", "version": good})).all_errors();
            assert!(errs.is_empty(), "{good}: {errs:?}");
        }
        for bad in ["1.2", "banana", "v1.2.3", "1.2.3.4", "01.2.3", "1.2.3-"] {
            let err = Manifest::from_json_str(&json!({"id": "a", "command": "x", "version": bad}).to_string(), &p()).unwrap_err();
            assert_eq!(fields(&err.errors), ["version"], "{bad}");
            let message = &err.errors[0].message;
            assert!(message.contains(bad) && message.contains("is not a semantic version"), "{bad}: {message}");
        }
        // No version at all (or a blank one) is the default, which is one.
        assert!(parse(json!({"id": "a", "command": "x"})).all_errors().is_empty());
    }

    #[test]
    fn version_compare() {
        assert_eq!(compare_versions("1.2", "1.2.0"), Some(Ordering::Equal));
        assert_eq!(compare_versions("1.2.0-beta", "1.2.0"), Some(Ordering::Equal));
        assert_eq!(compare_versions("1.9", "1.10"), Some(Ordering::Less));
        assert_eq!(compare_versions("1..2", "1"), None);
        assert_eq!(compare_versions("1.2.3.4.5", "1"), None);
    }

    #[test]
    fn relative_paths_resolve_against_the_manifest_folder() {
        let m = parse(json!({"id": "a", "command": "./bin/app", "workingDirectory": "data"})).manifest;
        assert_eq!(m.resolved_command(), Some(PathBuf::from("/apps/x/bin/app")));
        assert_eq!(m.resolved_working_dir(), PathBuf::from("/apps/x/data"));
        let m = parse(json!({"id": "a", "command": "bin/app"})).manifest;
        assert_eq!(m.resolved_command(), Some(PathBuf::from("/apps/x/bin/app")));
        assert_eq!(m.resolved_working_dir(), PathBuf::from("/apps/x"));
        let m = parse(json!({"id": "a", "command": "node", "workingDirectory": "/srv"})).manifest;
        assert_eq!(m.resolved_command(), Some(PathBuf::from("node")), "bare names use PATH");
        assert_eq!(m.resolved_working_dir(), PathBuf::from("/srv"));
        let m = parse(json!({"id": "a", "command": "/usr/bin/python3"})).manifest;
        assert_eq!(m.resolved_command(), Some(PathBuf::from("/usr/bin/python3")));
        let mut m = m;
        m.manifest_path = PathBuf::from("openclaw.mcpapp.json");
        assert_eq!(m.resolved_working_dir(), PathBuf::from("."));
    }

    #[test]
    fn path_escapes_of_working_directory_are_errors_and_of_command_warnings() {
        let escapes = |v: Value| parse(v).manifest.folder_escapes();
        for wd in ["../../etc", "..", "data/../../etc", "/etc", "/apps/xy", "/apps/x/../y"] {
            let (errors, warnings) = escapes(json!({"id": "a", "command": "x", "workingDirectory": wd}));
            assert_eq!(fields(&errors), ["workingDirectory"], "{wd}");
            let message = errors[0].to_string();
            assert!(message.contains(&format!("'{wd}'")) && message.contains("outside the app's folder /apps/x"), "{message}");
            assert!(warnings.is_empty());
        }
        let (errors, _) = escapes(json!({"id": "a", "command": "x", "workingDirectory": "../../../../etc"}));
        assert!(errors[0].message.contains("resolves to /etc,"), "{}", errors[0]);
        for wd in ["data", "./data", "data/../logs", ".", "/apps/x", "/apps/x/data", "/apps/x/./data/../d"] {
            let (errors, warnings) = escapes(json!({"id": "a", "command": "x", "workingDirectory": wd}));
            assert!(errors.is_empty() && warnings.is_empty(), "{wd}: {errors:?}");
        }
        for cmd in ["../../bin/sh", "../other/app", "./bin/../../y", "bin/../../../z"] {
            let (errors, warnings) = escapes(json!({"id": "a", "command": cmd}));
            assert!(errors.is_empty(), "{cmd}");
            assert_eq!(warnings.len(), 1, "{cmd}");
            assert!(warnings[0].starts_with(&format!("command: '{cmd}' resolves to ")), "{}", warnings[0]);
            assert!(warnings[0].ends_with("outside the app's folder /apps/x"), "{}", warnings[0]);
        }
        let (_, warnings) = escapes(json!({"id": "a", "command": "../../bin/sh"}));
        assert!(warnings[0].contains("resolves to /bin/sh,"), "{}", warnings[0]);
        for cmd in ["node", "./bin/app", "bin/app", "/usr/bin/python3", "/bin/sh", "./a/../b"] {
            let (errors, warnings) = escapes(json!({"id": "a", "command": cmd}));
            assert!(errors.is_empty() && warnings.is_empty(), "{cmd}: {warnings:?}");
        }
    }

    #[test]
    fn fingerprint_tracks_effective_changes() {
        let a = parse(json!({"id": "a", "command": "x"})).manifest;
        let b = parse(json!({"id": "a", "command": "x"})).manifest;
        assert_eq!(a.fingerprint(), b.fingerprint());
        let mut c = a.clone();
        c.startup_timeout_seconds = 3;
        assert_ne!(a.fingerprint(), c.fingerprint());
        let mut d = a.clone();
        d.manifest_path = PathBuf::from("/elsewhere/openclaw.mcpapp.json");
        assert_ne!(a.fingerprint(), d.fingerprint());
    }

    #[test]
    fn serializes_camel_case_and_round_trips() {
        let m = Manifest::from_json_str(SEED_MANIFEST, &p()).unwrap().manifest;
        let v = serde_json::to_value(&m).unwrap();
        assert_eq!(v["toolNamePrefix"], "grocery.");
        assert_eq!(v["startupTimeoutSeconds"], 10);
        assert_eq!(v["transport"], "http");
        let back: Manifest = serde_json::from_value(v).unwrap();
        assert_eq!(back, Manifest { manifest_path: PathBuf::new(), ..m });
    }

    #[test]
    fn load_reads_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(MANIFEST_FILE_NAME);
        std::fs::write(&path, SEED_MANIFEST).unwrap();
        let loaded = Manifest::load(&path).unwrap();
        assert_eq!(loaded.manifest.manifest_path, path);
        let missing = Manifest::load(&dir.path().join("nope.json")).unwrap_err();
        assert_eq!(missing.errors[0].field, "(file)");
        std::fs::write(&path, vec![b' '; (MAX_MANIFEST_BYTES + 1) as usize]).unwrap();
        assert!(Manifest::load(&path).unwrap_err().errors[0].message.contains("limit"));
        // The message names the file's whole size, not where reading stopped.
        std::fs::write(&path, vec![b' '; 3 * MAX_MANIFEST_BYTES as usize]).unwrap();
        let message = &Manifest::load(&path).unwrap_err().errors[0].message;
        assert!(message.contains(&format!("{} bytes", 3 * MAX_MANIFEST_BYTES)), "{message}");
        // Exactly at the limit is allowed (the JSON is then what is wrong with it).
        std::fs::write(&path, vec![b' '; MAX_MANIFEST_BYTES as usize]).unwrap();
        assert!(!Manifest::load(&path).unwrap_err().errors[0].message.contains("limit"));
        std::fs::write(&path, [0xff, 0xfe, b'{']).unwrap();
        assert!(Manifest::load(&path).unwrap_err().errors[0].message.contains("UTF-8"));
    }
}
