//! What an app may reach (SPEC R48, issue 41): what it declares (`permissions.rs`, after the
//! configuration's `Entries`) and `Sandbox.*`, turned into the profile the kernel enforces
//! (`upstream/confinement.rs`) and the report `apps`, `validate` and `/apps/health` show.
//!
//! The profile of an app is:
//! - read and execute: the app's folder, the program it launches (a program in a `bin/` folder
//!   brings its prefix: a Python venv, pyenv, nvm), the package of each file its arguments name
//!   (the outermost `node_modules`, or the venv), [`RUNTIME_READ`] (interpreters, system libraries,
//!   certificates, time zones, `/proc`), and the declared `filesystem.read`;
//! - read and write: its data folder `{Gateway.DataPath}/apps/{id}` (its `HOME` and `TMPDIR`),
//!   [`RUNTIME_WRITE`] (`/dev/null` and friends), and the declared `filesystem.write`;
//! - network: as declared, default `none`;
//! - limits: as declared, else [`DEFAULT_LIMITS`].
//!
//! A declared path is relative to the app's folder (`~/` is the user's home). A path that would
//! open the gateway's own configuration, data, module library or another app's folder — the path
//! itself, a folder holding one of them, or a place inside the gateway's data — is not granted,
//! and the report says so.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{json, Value};

use crate::apps::manifest::{Manifest, Transport, ValidationError};
use crate::apps::permissions::{get, LimitsDecl, NetworkDecl};
use crate::upstream::confinement::{self, Limits, Mode, Profile};
use crate::upstream::process::Confine;

/// Read and execute for every app: what interpreters and their programs need. Missing ones are
/// skipped.
pub const RUNTIME_READ: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/nix/store",
    "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/ssl", "/etc/ca-certificates",
    "/etc/pki", "/etc/resolv.conf", "/etc/hosts", "/etc/host.conf", "/etc/gai.conf", "/etc/nsswitch.conf",
    "/etc/passwd", "/etc/group", "/etc/localtime", "/etc/timezone", "/etc/mime.types", "/etc/os-release",
    "/etc/alternatives", "/etc/protocols", "/etc/services", "/etc/python3", "/etc/node",
    "/run/systemd/resolve", "/proc", "/sys/devices/system/cpu", "/sys/fs/cgroup",
];

/// Read and write for every app.
pub const RUNTIME_WRITE: &[&str] = &["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"];

/// Limits of an app that declares none.
pub const DEFAULT_LIMITS: LimitsDecl = LimitsDecl {
    memory_mb: Some(2048),
    processes: Some(256),
    open_files: Some(4096),
    cpu_seconds: Some(86_400),
};

/// `Sandbox.*` and what the gateway knows that confinement needs.
#[derive(Debug, Clone, Default)]
pub struct Sandbox {
    pub mode: Mode,
    /// The Landlock ABI of the kernel (0: none, or `Sandbox.SimulateNoLandlock`).
    pub landlock_abi: i32,
    /// `Gateway.DataPath`: apps' data folders are under `apps/` in it; the rest is never granted.
    pub data_dir: PathBuf,
    /// Paths no app may be granted, nor a folder holding one (the configuration folder and its
    /// `appsettings*.json`, the data folder, the module library, the gateway's program).
    pub protected: Vec<PathBuf>,
    /// The discovery folders: an app is granted none of them as a whole, and nothing inside them
    /// but its own folder (other apps' folders).
    pub apps_roots: Vec<PathBuf>,
    /// Problems with `Sandbox.*` (a bad mode reads as enforce).
    pub errors: Vec<ValidationError>,
}

impl Sandbox {
    pub fn from_config(config: &Value, config_dir: &Path, data_dir: &Path, discovery_paths: &[PathBuf]) -> Sandbox {
        let section = config
            .as_object()
            .and_then(|o| get(o, "Sandbox"))
            .or_else(|| config.as_object().and_then(|o| get(o, "OpenClaw")).and_then(|v| v.as_object()).and_then(|o| get(o, "Sandbox")))
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let mut errors = Vec::new();
        let mode = match get(&section, "Mode").and_then(Value::as_str) {
            None => Mode::Enforce,
            Some(s) => Mode::parse(s).unwrap_or_else(|| {
                errors.push(ValidationError::new("Sandbox.Mode", format!("'{s}' is not enforce, warn or off; using enforce")));
                Mode::Enforce
            }),
        };
        let simulate = get(&section, "SimulateNoLandlock")
            .map(|v| v.as_bool().unwrap_or_else(|| v.as_str().is_some_and(|s| s.eq_ignore_ascii_case("true"))))
            .unwrap_or(false);
        let mut protected = vec![absolute(config_dir), absolute(data_dir)];
        if let Ok(entries) = std::fs::read_dir(config_dir) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().to_ascii_lowercase();
                if name.starts_with("appsettings") && name.ends_with(".json") {
                    protected.push(absolute(&e.path()));
                }
            }
        }
        protected.extend(module_library_path());
        protected.extend(std::env::current_exe().ok().map(|p| absolute(&p)));
        let apps_roots = discovery_paths.iter().map(|p| absolute(p)).collect();
        Sandbox { mode, landlock_abi: confinement::landlock_abi(simulate), data_dir: absolute(data_dir), protected, apps_roots, errors }
    }

    /// Starts making what confining any app needs ([`confinement::warm_up`]), unless apps are
    /// not confined. Called when the apps are about to start.
    pub fn warm_up(&self) {
        if self.mode != Mode::Off {
            confinement::warm_up(RUNTIME_READ.iter().chain(RUNTIME_WRITE).map(PathBuf::from).collect());
        }
    }

    /// The app's private data folder.
    pub fn app_data_dir(&self, id: &str) -> PathBuf {
        self.data_dir.join("apps").join(id)
    }
}

/// The module library this code runs in (`dladdr` of one of its functions).
fn module_library_path() -> Option<PathBuf> {
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads the loader's tables; the name it returns lives as long as the library.
    let found = unsafe { libc::dladdr(module_library_path as *const libc::c_void, &mut info) };
    if found == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: a NUL-terminated string of the loader's.
    let name = unsafe { std::ffi::CStr::from_ptr(info.dli_fname) };
    use std::os::unix::ffi::OsStrExt as _;
    let path = PathBuf::from(std::ffi::OsStr::from_bytes(name.to_bytes()));
    path.is_absolute().then(|| absolute(&path))
}

/// A path made absolute and with symlinks resolved when it exists (lexically cleaned otherwise).
fn absolute(p: &Path) -> PathBuf {
    if let Ok(c) = std::fs::canonicalize(p) {
        return c;
    }
    let base = if p.is_absolute() { PathBuf::new() } else { std::env::current_dir().unwrap_or_default() };
    let mut out = PathBuf::new();
    for c in base.join(p).components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Paths made absolute as [`absolute`] makes them, each folder resolved once. A listing of many
/// apps resolves the same folders (the apps' common ancestors) and the same program over and over,
/// and `canonicalize` reads the link of every component of a path each time (`readlink`: 16 per
/// app, about a quarter of `apps --json`'s time with 10,000 apps, `bench discovery`). Kept for one pass (a
/// listing, one app's start), not longer: a folder may be replaced by a link meanwhile.
#[derive(Default)]
pub struct Resolved {
    /// By the path as written (a `Path` compares by components: `a/b/.` would be `a/b`).
    known: HashMap<std::ffi::OsString, PathBuf>,
    /// [`package_of`] by the file: apps of one kind launch the same program.
    packages: HashMap<PathBuf, Vec<PathBuf>>,
}

impl Resolved {
    /// `p` as [`absolute`] would make it: an existing entry that is no link is its resolved
    /// parent's, joined (one `lstat`); anything else (a link, a path not there, one with `.`,
    /// `..` or doubled slashes) goes through [`absolute`].
    pub fn absolute(&mut self, p: &Path) -> PathBuf {
        if let Some(known) = self.known.get(p.as_os_str()) {
            return known.clone();
        }
        let plain = p.is_absolute()
            && !p.components().any(|c| c == std::path::Component::ParentDir)
            && p.as_os_str() == p.components().collect::<PathBuf>().as_os_str();
        let resolved = match (p.parent(), p.file_name()) {
            (Some(parent), Some(name)) if plain && std::fs::symlink_metadata(p).is_ok_and(|m| !m.file_type().is_symlink()) => {
                self.absolute(parent).join(name)
            }
            _ => absolute(p),
        };
        self.known.insert(p.as_os_str().to_owned(), resolved.clone());
        resolved
    }
}

fn home() -> Option<PathBuf> {
    std::env::var_os("HOME").map(PathBuf::from).filter(|h| h.is_absolute())
}

fn resolve_declared(manifest: &Manifest, p: &str, resolved: &mut Resolved) -> PathBuf {
    if let (Some(rest), Some(home)) = (p.strip_prefix("~/"), home()) {
        return resolved.absolute(&home.join(rest));
    }
    if p == "~" {
        return home().map(|h| resolved.absolute(&h)).unwrap_or_default();
    }
    let app_dir = resolved.absolute(manifest.manifest_dir());
    resolved.absolute(&app_dir.join(p))
}

/// A program found on `PATH`, as `exec` would.
fn on_path(name: &str, env_path: Option<&str>) -> Option<PathBuf> {
    let path = env_path.map(str::to_string).or_else(|| std::env::var("PATH").ok())?;
    path.split(':').filter(|d| !d.is_empty()).map(|d| Path::new(d).join(name)).find(|p| p.is_file())
}

/// The folders that come with a program or script file: the prefix of a program in a `bin/`
/// folder (and, for a venv, its interpreter's prefix), the outermost `node_modules` holding a
/// script, else the file itself.
fn package_of(file: &Path, resolved: &mut Resolved) -> Vec<PathBuf> {
    if let Some(known) = resolved.packages.get(file) {
        return known.clone();
    }
    let package = package_of_file(file, resolved);
    resolved.packages.insert(file.to_path_buf(), package.clone());
    package
}

fn package_of_file(file: &Path, resolved: &mut Resolved) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut outermost_modules = None;
    for a in file.ancestors().skip(1) {
        if a.file_name().is_some_and(|n| n == "node_modules") {
            outermost_modules = Some(a.to_path_buf());
        }
    }
    if let Some(m) = outermost_modules {
        out.push(m);
        return out;
    }
    out.push(file.to_path_buf());
    // Symlinks too: /venv/bin/python → /root/.pyenv/versions/3.12/bin/python3.12.
    let targets = [Some(file.to_path_buf()), file.exists().then(|| resolved.absolute(file))];
    for f in targets.into_iter().flatten() {
        if let Some(bin) = f.parent().filter(|p| p.file_name().is_some_and(|n| n == "bin")) {
            if let Some(prefix) = bin.parent() {
                out.push(prefix.to_path_buf());
                if let Ok(cfg) = std::fs::read_to_string(prefix.join("pyvenv.cfg")) {
                    for line in cfg.lines() {
                        if let Some(home) = line.split_once('=').filter(|(k, _)| k.trim() == "home").map(|(_, v)| v.trim()) {
                            if let Some(p) = Path::new(home).parent() {
                                out.push(p.to_path_buf());
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

/// An app's confinement: what to enforce and the report of it, or why it may not start.
pub struct Effective {
    pub confine: Option<Confine>,
    /// Shown by `apps`, `validate` and `/apps/health` (`confinement` in an app's details).
    pub report: Report,
    /// `HOME` and `TMPDIR` for the app (its data folder), when confined.
    pub data_dir: Option<PathBuf>,
    /// One warning to log (warn mode without Landlock).
    pub warning: Option<String>,
}

/// The message of an app refused by enforce mode on a kernel without Landlock.
pub const NO_LANDLOCK: &str = "Sandbox.Mode is enforce but this kernel offers no Landlock (Linux 5.13 or later with landlock among the LSMs), so the app cannot be confined and is not started; set Sandbox.Mode to warn to start apps with seccomp, limits and network namespaces only, or to off";

/// The profile of `manifest` (the effective one, after `Entries`) under `sandbox`.
/// `Err` when the app may not start (enforce mode without Landlock).
pub fn effective(manifest: &Manifest, sandbox: &Sandbox) -> Result<Effective, String> {
    effective_in(manifest, sandbox, &mut Resolved::default())
}

/// [`effective`], with the paths resolved so far in a pass over many apps.
fn effective_in(manifest: &Manifest, sandbox: &Sandbox, resolved: &mut Resolved) -> Result<Effective, String> {
    if sandbox.mode == Mode::Off {
        return Ok(Effective {
            confine: None,
            report: Report::Unconfined(json!({ "mode": "off", "confined": false })),
            data_dir: None,
            warning: None,
        });
    }
    let mut warning = None;
    if sandbox.landlock_abi == 0 {
        if sandbox.mode == Mode::Enforce {
            return Err(NO_LANDLOCK.to_string());
        }
        warning = Some(format!(
            "McpApp '{}' starts without filesystem confinement: this kernel offers no Landlock (Sandbox.Mode is warn); seccomp, limits and network namespaces still apply",
            manifest.id
        ));
    }
    let perms = &manifest.permissions;
    let mut notes: Vec<String> = Vec::new();
    let mut read: Vec<PathBuf> = Vec::new();
    let mut write: Vec<PathBuf> = Vec::new();
    let app_dir = resolved.absolute(manifest.manifest_dir());
    let data_dir = sandbox.app_data_dir(&manifest.id);
    read.push(app_dir.clone());
    // The program and the packages of the files its arguments name.
    let program = manifest.resolved_command().and_then(|c| {
        if c.components().count() > 1 { Some(resolved.absolute(&c)) } else { on_path(&c.to_string_lossy(), manifest.environment.get("PATH").map(String::as_str)) }
    });
    let mut launched: Vec<PathBuf> = program.iter().flat_map(|p| package_of(p, resolved)).collect();
    for a in &manifest.arguments {
        let p = Path::new(a);
        if p.is_absolute() && p.is_file() {
            let file = resolved.absolute(p);
            launched.extend(package_of(&file, resolved));
        }
    }
    let mut denied = Vec::new();
    let grant = |list: &mut Vec<PathBuf>, p: PathBuf, denied: &mut Vec<String>| {
        if let Some(why) = forbidden(&p, sandbox, &app_dir, &data_dir) {
            denied.push(format!("{}: {why}", p.display()));
        } else if !list.contains(&p) {
            list.push(p);
        }
    };
    for p in launched {
        // What the system's own places hold (`/usr/bin/node`, its prefix `/usr`) every app
        // reads already: granted again it was a second rule and a duplicate in the report.
        if !under_runtime_read(&p) {
            grant(&mut read, p, &mut denied);
        }
    }
    let fs = perms.filesystem.clone().unwrap_or_default();
    for p in &fs.read {
        grant(&mut read, resolve_declared(manifest, p, resolved), &mut denied);
    }
    write.push(data_dir.clone());
    for p in &fs.write {
        grant(&mut write, resolve_declared(manifest, p, resolved), &mut denied);
    }
    // Network.
    let http_port = (manifest.transport == Transport::Http)
        .then(|| manifest.url.as_deref().and_then(url_port))
        .flatten();
    let stdio = manifest.transport == Transport::Stdio;
    let network = perms.network.clone().unwrap_or(NetworkDecl::None);
    let bind_ports: Vec<u16> = http_port.into_iter().collect();
    let (connect_ports, private_network, loopback_up, network_text) = match &network {
        NetworkDecl::Any => (None, false, false, "any".to_string()),
        NetworkDecl::None if stdio => (Some(Vec::new()), true, false, "none (a network namespace of its own, no TCP)".to_string()),
        NetworkDecl::None => (Some(Vec::new()), false, false, format!("none but serving on port {}", http_port.unwrap_or(0))),
        NetworkDecl::Loopback if stdio => (None, true, true, "loopback (a network namespace of its own with only its loopback)".to_string()),
        NetworkDecl::Loopback => {
            notes.push("network 'loopback' of an HTTP app is not enforced by address (it shares the host's network to be reachable); TCP is not restricted".into());
            (None, false, false, "loopback (not enforced: HTTP app)".to_string())
        }
        NetworkDecl::Endpoints(list) => {
            let mut ports: Vec<u16> = list.iter().map(|e| e.port).collect();
            ports.sort_unstable();
            ports.dedup();
            (Some(ports.clone()), false, false, format!("TCP connect to ports {ports:?} only (Landlock filters ports, not hosts)"))
        }
    };
    if sandbox.landlock_abi == 0 {
        notes.push("no Landlock: filesystem and TCP port rules not enforced".into());
    }
    let decl = perms.limits.unwrap_or_default();
    let limits = LimitsDecl {
        memory_mb: decl.memory_mb.or(DEFAULT_LIMITS.memory_mb),
        processes: decl.processes.or(DEFAULT_LIMITS.processes),
        open_files: decl.open_files.or(DEFAULT_LIMITS.open_files),
        cpu_seconds: decl.cpu_seconds.or(DEFAULT_LIMITS.cpu_seconds),
    };
    let profile = Profile {
        read,
        write,
        runtime_read: RUNTIME_READ,
        runtime_write: RUNTIME_WRITE,
        connect_ports,
        bind_ports: bind_ports.clone(),
        private_network,
        loopback_up,
        limits: Limits {
            memory_bytes: limits.memory_mb.map(|m| m << 20),
            processes: limits.processes,
            open_files: limits.open_files,
            cpu_seconds: limits.cpu_seconds,
        },
    };
    let shown = |v: &[PathBuf]| v.iter().map(|p| p.display().to_string()).collect::<Vec<_>>();
    let (runtime_read, runtime_write) = runtime_shown();
    let report = Report::Confined(Box::new(ConfinedReport {
        bind_ports,
        confined: true,
        filesystem: FilesystemReport {
            denied,
            read: Listed { own: shown(&profile.read), runtime: runtime_read },
            write: Listed { own: shown(&profile.write), runtime: runtime_write },
        },
        landlock_abi: sandbox.landlock_abi,
        limits: LimitsReport {
            cpu_seconds: limits.cpu_seconds,
            memory_mb: limits.memory_mb,
            open_files: limits.open_files,
            processes: limits.processes,
        },
        mode: sandbox.mode.as_str(),
        network: network_text,
        no_new_privs: true,
        notes,
        seccomp_denied: SeccompDenied,
    }));
    Ok(Effective {
        confine: Some(Confine { profile, landlock_abi: sandbox.landlock_abi, cgroup_name: manifest.id.clone() }),
        report,
        data_dir: Some(data_dir),
        warning,
    })
}

/// The report of an app's confinement without starting it (`validate`, an app not yet started).
pub fn report(manifest: &Manifest, sandbox: &Sandbox) -> Report {
    report_in(manifest, sandbox, &mut Resolved::default())
}

/// [`report`] of one app in a pass over many, with the paths resolved so far.
pub fn report_in(manifest: &Manifest, sandbox: &Sandbox, resolved: &mut Resolved) -> Report {
    match effective_in(manifest, sandbox, resolved) {
        Ok(e) => e.report,
        Err(why) => Report::refused(sandbox.mode, why),
    }
}

/// An app's effective confinement as `apps`, `validate` and `/apps/health` show it (R48).
///
/// Typed rather than a JSON tree: `apps --json` prints one for every app, and most of each is
/// what every app shares — the runtime paths and the refused system calls, made into text once
/// per process ([`runtime_shown`], [`SeccompDenied`]) and borrowed by every report. Its members
/// print in the order a JSON object of them always printed (by name).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Report {
    Confined(Box<ConfinedReport>),
    /// Not confined (`Sandbox.Mode` off, refused, a plain MCP server): `mode`, `confined` and why.
    Unconfined(Value),
}

impl Report {
    /// Not started: enforce mode where the app cannot be confined.
    pub fn refused(mode: Mode, why: impl Into<String>) -> Report {
        Report::Unconfined(json!({ "mode": mode.as_str(), "confined": false, "refused": why.into() }))
    }

    /// The declared paths that are not granted, each with why.
    pub fn denied(&self) -> &[String] {
        match self {
            Report::Confined(c) => &c.filesystem.denied,
            Report::Unconfined(_) => &[],
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfinedReport {
    bind_ports: Vec<u16>,
    confined: bool,
    filesystem: FilesystemReport,
    landlock_abi: i32,
    limits: LimitsReport,
    mode: &'static str,
    network: String,
    no_new_privs: bool,
    notes: Vec<String>,
    seccomp_denied: SeccompDenied,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
struct FilesystemReport {
    denied: Vec<String>,
    read: Listed,
    write: Listed,
}

/// The limits in effect (declared, else [`DEFAULT_LIMITS`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
struct LimitsReport {
    cpu_seconds: Option<u64>,
    memory_mb: Option<u64>,
    open_files: Option<u64>,
    processes: Option<u64>,
}

/// One list of paths: the app's own, then the runtime paths every app gets.
#[derive(Clone, Debug, PartialEq)]
struct Listed {
    own: Vec<String>,
    runtime: &'static [String],
}

impl Serialize for Listed {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.own.iter().chain(self.runtime))
    }
}

/// The names of [`confinement::DENIED_SYSCALLS`].
#[derive(Clone, Copy, Debug, PartialEq)]
struct SeccompDenied;

impl Serialize for SeccompDenied {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(confinement::DENIED_SYSCALLS.iter().map(|(name, _)| name))
    }
}

/// The runtime paths that exist ([`RUNTIME_READ`], [`RUNTIME_WRITE`]), as reports show them:
/// asked once per process, as [`confinement::runtime_path_exists`] answers once per path.
fn runtime_shown() -> (&'static [String], &'static [String]) {
    static SHOWN: std::sync::OnceLock<(Vec<String>, Vec<String>)> = std::sync::OnceLock::new();
    let (read, write) = SHOWN.get_or_init(|| {
        let existing = |list: &[&str]| {
            list.iter().filter(|p| confinement::runtime_path_exists(Path::new(p))).map(|p| p.to_string()).collect()
        };
        (existing(RUNTIME_READ), existing(RUNTIME_WRITE))
    });
    (read, write)
}

/// Whether `path` is one of the [`RUNTIME_READ`] places this machine has, or inside one.
fn under_runtime_read(path: &Path) -> bool {
    runtime_shown().0.iter().any(|r| path.starts_with(r))
}

fn url_port(url: &str) -> Option<u16> {
    let rest = url.split_once("://").map(|(_, r)| r)?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit_once('@').map(|(_, a)| a).unwrap_or(authority);
    match authority.rsplit_once(':') {
        Some((_, port)) if !port.contains(']') => port.parse().ok(),
        _ => Some(if url.starts_with("https") { 443 } else { 80 }),
    }
}

/// Why a path may not be granted, if it may not.
fn forbidden(p: &Path, sandbox: &Sandbox, app_dir: &Path, own_data: &Path) -> Option<String> {
    if p.as_os_str().is_empty() || p == Path::new("/") {
        return Some("the whole filesystem".into());
    }
    if p.starts_with(&sandbox.data_dir) && !p.starts_with(own_data) {
        return Some("inside the gateway's data folder".into());
    }
    for protected in &sandbox.protected {
        if protected.starts_with(p) {
            return Some(format!("would open the gateway's {}", protected.display()));
        }
    }
    for root in &sandbox.apps_roots {
        if root.starts_with(p) {
            return Some(format!("would open every app's folder in {}", root.display()));
        }
        if p.starts_with(root) && !p.starts_with(app_dir) {
            return Some("another app's folder".into());
        }
    }
    None
}

/// Makes an app's data folder (owner only) before its launch.
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

/// `HOME` and `TMPDIR` of a confined app: its data folder, unless its manifest sets them.
pub fn data_environment(environment: &mut BTreeMap<String, String>, data_dir: &Path) {
    for key in ["HOME", "TMPDIR"] {
        environment.entry(key.to_string()).or_insert_with(|| data_dir.display().to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apps::permissions::FilesystemDecl;

    #[test]
    fn the_gateways_own_paths_are_never_granted() {
        let root = tempfile::tempdir().unwrap();
        let config = root.path().join("cfg");
        let data = config.join(".gateway-data");
        let apps = config.join("mcpapps");
        let app = apps.join("a");
        std::fs::create_dir_all(&app).unwrap();
        std::fs::create_dir_all(&data).unwrap();
        let sandbox = Sandbox {
            mode: Mode::Enforce,
            landlock_abi: 7,
            data_dir: absolute(&data),
            protected: vec![absolute(&config), absolute(&data)],
            apps_roots: vec![absolute(&apps)],
            errors: Vec::new(),
        };
        let mut m = Manifest { id: "a".into(), command: Some("/bin/true".into()), manifest_path: app.join("openclaw.mcpapp.json"), ..Default::default() };
        m.permissions.filesystem = Some(FilesystemDecl {
            read: vec!["..".into(), "../../.gateway-data".into(), "/".into(), "own".into(), "../b".into()],
            write: vec!["../../.gateway-data/apps/b".into()],
        });
        let e = effective(&m, &sandbox).unwrap();
        // Printed as a JSON tree of it prints (members by name): what `apps --json` printed
        // when the report was built as one.
        let text = serde_json::to_string(&e.report).unwrap();
        let report: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(text, report.to_string());
        assert_eq!(e.report.denied(), report["filesystem"]["denied"].as_array().unwrap().iter().map(|d| d.as_str().unwrap()).collect::<Vec<_>>());
        assert!(report["seccompDenied"].as_array().unwrap().contains(&json!("ptrace")), "{report}");
        assert_eq!(report["limits"]["memoryMb"], 2048, "{report}");
        assert!(report["filesystem"]["read"].as_array().unwrap().contains(&json!("/usr")), "{report}");
        let denied = report["filesystem"]["denied"].as_array().unwrap();
        assert_eq!(denied.len(), 5, "{denied:?}");
        let read: Vec<&str> = report["filesystem"]["read"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
        assert!(read.contains(&absolute(&app).to_str().unwrap()));
        assert!(read.contains(&absolute(&app.join("own")).to_str().unwrap()));
        let write: Vec<&str> = report["filesystem"]["write"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
        assert_eq!(write[0], absolute(&data).join("apps/a").to_str().unwrap());
    }

    /// A program of the system (`/usr/bin/env` here, as `node` or `python3` would be) and the
    /// prefix it names (`/usr`) are read through the runtime places, not granted a second time.
    #[test]
    fn a_system_program_adds_no_rule_of_its_own() {
        let root = tempfile::tempdir().unwrap();
        let sandbox = Sandbox { mode: Mode::Enforce, landlock_abi: 7, data_dir: root.path().join("data"), ..Default::default() };
        let m = Manifest { id: "a".into(), command: Some("/usr/bin/env".into()), manifest_path: root.path().join("a/openclaw.mcpapp.json"), ..Default::default() };
        let e = effective(&m, &sandbox).unwrap();
        let read = e.confine.unwrap().profile.read;
        assert_eq!(read, [absolute(&root.path().join("a"))], "only the app's folder is its own");
        let report = serde_json::to_value(&e.report).unwrap();
        let shown: Vec<&str> = report["filesystem"]["read"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
        let mut unique = shown.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), shown.len(), "each place once: {shown:?}");
        assert!(shown.contains(&"/usr"), "{shown:?}");
    }

    #[test]
    fn enforce_without_landlock_refuses_and_warn_warns() {
        let mut sandbox = Sandbox { mode: Mode::Enforce, landlock_abi: 0, data_dir: std::env::temp_dir(), ..Default::default() };
        let m = Manifest { id: "a".into(), command: Some("/bin/true".into()), ..Default::default() };
        assert_eq!(effective(&m, &sandbox).err().as_deref(), Some(NO_LANDLOCK));
        sandbox.mode = Mode::Warn;
        let e = effective(&m, &sandbox).unwrap();
        assert!(e.warning.unwrap().contains("no Landlock"));
        sandbox.mode = Mode::Off;
        assert!(effective(&m, &sandbox).unwrap().confine.is_none());
    }

    /// A pass over many apps resolves each folder once and gets what `absolute` gets: through a
    /// linked folder, a link named with a trailing `/.`, `..`, a path not there.
    #[test]
    fn paths_resolved_in_a_pass_are_what_absolute_makes_them() {
        let root = tempfile::tempdir().unwrap();
        let real = root.path().join("real");
        std::fs::create_dir_all(real.join("app")).unwrap();
        std::fs::write(real.join("app/run"), "").unwrap();
        std::os::unix::fs::symlink(&real, root.path().join("link")).unwrap();
        let base = absolute(root.path()).to_string_lossy().into_owned();
        let mut resolved = Resolved::default();
        for p in [
            "real/app/run",
            "link/app/run",
            "link/app",
            "link/.",
            "link/",
            "link//app",
            "link/app/../app/run",
            "real/./app",
            "link/missing/file",
            "real/missing/../app",
        ] {
            let p = PathBuf::from(format!("{base}/{p}"));
            assert_eq!(resolved.absolute(&p), absolute(&p), "{}", p.display());
            assert_eq!(resolved.absolute(&p), absolute(&p), "{}, again", p.display());
        }
        assert_eq!(resolved.absolute(&PathBuf::from(format!("{base}/link/app/run"))), absolute(&real).join("app/run"));
        // Each folder once: the app's, then its ancestors, are known after the first lookup.
        assert!(resolved.known.contains_key(absolute(&real).join("app").as_os_str()));
    }
}
