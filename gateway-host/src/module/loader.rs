//! Loading the MCP App module library and refusing incompatible ones with a short message (SPEC R3),
//! under the version policy of `host_abi` (its crate documentation): a module of another ABI major is
//! refused; any minor of the same major loads, older or newer than this host's.
//!
//! How (abi_stable 0.11.3 facts, measured by `tests/tests/module_versions.rs`):
//! - Same or newer module minor: `abi_stable`'s own check (`init_root_module`), which requires this
//!   host's interface to be a prefix of the module's; a newer module's appended methods are never read.
//! - Older module minor: `abi_stable`'s check alone would refuse it ("too many fields": this host's
//!   vtables are longer), so the loader runs `abi_stable`'s layout checker the other way round (the
//!   module's interface must be a prefix of this host's: shared types identical, only appended items
//!   missing) and then takes the root module without the one-directional check. A method the module
//!   lacks reads as absent from its vtable, so calling it runs the method's default body
//!   (`not_implemented`); the host asks [`LoadedModule::supports`] first and reports the feature
//!   unavailable instead.
//!
//! abi_stable's raw incompatibility report is a ~1,200-line layout dump, so [`LoadError`] keeps only
//! what a person needs: the path, both versions, and the last lines of the report.

use std::path::{Path, PathBuf};

use abi_stable::abi_stability::abi_checking::check_layout_compatibility;
use abi_stable::library::{lib_header_from_path, LibraryError, RootModule};
use abi_stable::sabi_types::{VersionNumber, VersionStrings};
use abi_stable::StableAbi;
use host_abi::{McpAppModule_Ref, ModuleConfigExtra, ModuleInfo, ModuleInfoExtra, ABI_VERSION, INTERFACE_VERSION};
use serde::Serialize;

/// The optional methods (`host_abi::capability` names) this gateway implements on its side of the
/// boundary (`HostSink`), declared to the module in `ModuleConfig::extra_json`.
pub const HOST_CAPABILITIES: &[&str] = &[host_abi::capability::HOST_SINK_HTTP_POST];

/// How a loaded module's ABI minor version relates to this host's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum MinorRelation {
    Same,
    /// The module appended methods this host does not know; it never calls them.
    NewerModule,
    /// This host knows methods the module lacks; it calls them only when the module declares them.
    OlderModule,
}

/// A loaded module library: its root module and identity.
pub struct LoadedModule {
    pub root: McpAppModule_Ref,
    pub info: ModuleInfo,
    pub path: PathBuf,
    /// The interface version in the module's library header (its ABI `MAJOR.MINOR`, and patch).
    pub interface: VersionNumber,
    pub minor: MinorRelation,
    /// What the module declared in `ModuleInfo::extra_json` (its optional methods).
    pub declared: ModuleInfoExtra,
}

/// What `module-info` and `/healthz` report about the module.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModuleSummary {
    pub name: String,
    pub version: String,
    pub abi_version: u32,
    /// The `host-abi` version the module was built against (`MAJOR.MINOR.PATCH`): which
    /// optional methods it can have.
    pub interface_version: String,
    pub path: String,
}

impl LoadedModule {
    pub fn summary(&self) -> ModuleSummary {
        ModuleSummary {
            name: self.info.name.to_string(),
            version: self.info.version.to_string(),
            abi_version: self.info.abi_version,
            interface_version: self.info.interface_version.to_string(),
            path: self.path.display().to_string(),
        }
    }

    /// Whether the module implements the optional method `capability` (a `host_abi::capability`
    /// name). Ask before calling any method appended after ABI x.0; when it answers false, report the
    /// feature unavailable (the call would only get `not_implemented` from the default body).
    pub fn supports(&self, capability: &str) -> bool {
        self.declared.has(capability)
    }

    /// Of `wanted` (optional module methods this host would use), those the module lacks.
    pub fn unavailable<'a>(&self, wanted: &[&'a str]) -> Vec<&'a str> {
        wanted.iter().copied().filter(|c| !self.supports(c)).collect()
    }
}

/// `ModuleConfig::extra_json` for a host that implements the optional methods `capabilities`
/// (the gateway passes [`HOST_CAPABILITIES`]).
pub fn config_extra_json(capabilities: &[&str]) -> String {
    let extra = ModuleConfigExtra {
        interface_version: INTERFACE_VERSION.to_string(),
        capabilities: capabilities.iter().map(|c| c.to_string()).collect(),
    };
    serde_json::to_string(&extra).unwrap_or_else(|_| "{}".into())
}

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("module not found: {0}")]
    Missing(PathBuf),
    #[error("cannot load {path} as a library: {reason}")]
    NotALibrary { path: PathBuf, reason: String },
    #[error("{path} is not an MCP App module (it exports no abi_stable root module)")]
    NotAModule { path: PathBuf },
    #[error(
        "module {path} is incompatible: it speaks ABI version {module_abi} (host-abi {module_version}), \
         this gateway speaks ABI version {host_abi} (host-abi {host_version}); only modules of ABI major \
         {host_abi} load"
    )]
    IncompatibleMajor { path: PathBuf, module_abi: u32, module_version: String, host_abi: u32, host_version: String },
    #[error(
        "module {path} is incompatible: its interface (host-abi {module_version}) does not match this \
         gateway's (host-abi {host_version}, ABI {host_abi}):\n  {detail}"
    )]
    IncompatibleLayout { path: PathBuf, module_version: String, host_version: String, host_abi: String, detail: String },
    #[error("cannot load module {path}: {detail}")]
    Other { path: PathBuf, detail: String },
}

/// The default module path: `libmcpapp_plugin.so` beside the running executable.
pub fn default_module_path() -> PathBuf {
    let file = format!("{}mcpapp_plugin{}", std::env::consts::DLL_PREFIX, std::env::consts::DLL_SUFFIX);
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(Path::to_path_buf))
        .unwrap_or_else(|| PathBuf::from("."))
        .join(file)
}

/// Loads the module at `path`: checks the ABI major, the layout (in the direction its minor calls
/// for, see the module documentation) and the semantic `ABI_VERSION`, then reads its capabilities.
///
/// Each distinct file is loaded once per process and never unloaded; load each module version
/// from its own file name.
pub fn load(path: &Path) -> Result<LoadedModule, LoadError> {
    let path = path.to_path_buf();
    if !path.exists() {
        return Err(LoadError::Missing(path));
    }
    let path = path.canonicalize().unwrap_or(path);
    let header = lib_header_from_path(&path).map_err(|e| classify(&path, "", e))?;
    let module_version = header.version_strings().version.to_string();
    let host = host_interface();
    let interface = VersionNumber::new(header.version_strings())
        .map_err(|e| LoadError::Other { path: path.clone(), detail: first_line(&e.to_string()) })?;
    // host-abi is 1.0 or later, so the first number is the major (abi_stable reads 0.y.z otherwise).
    if interface.major != host.major {
        return Err(LoadError::IncompatibleMajor {
            path,
            module_abi: interface.major,
            module_version,
            host_abi: host.major,
            host_version: INTERFACE_VERSION.to_string(),
        });
    }
    let minor = match interface.minor.cmp(&host.minor) {
        std::cmp::Ordering::Equal => MinorRelation::Same,
        std::cmp::Ordering::Greater => MinorRelation::NewerModule,
        std::cmp::Ordering::Less => MinorRelation::OlderModule,
    };
    let root = if minor == MinorRelation::OlderModule {
        // The module's interface must be a prefix of this host's (the reverse of abi_stable's rule).
        let Some(module_layout) = header.layout() else {
            return Err(LoadError::Other { path, detail: "the library carries no layout to check".into() });
        };
        let host_layout = <McpAppModule_Ref as StableAbi>::LAYOUT;
        if let Err(report) = check_layout_compatibility(module_layout, host_layout) {
            let report = report.to_string();
            tracing::debug!("abi_stable's full layout report for {} (older minor):\n{report}", path.display());
            return Err(layout_error(&path, &module_version, &report, Direction::ModuleIsExpected));
        }
        // SAFETY: the layout check just above, in the direction an older module needs: every type
        // the module knows is identical in this host's interface, which only appends to prefix
        // types (whose accessors see the module's shorter vtables as lacking those items).
        unsafe { header.init_root_module_with_unchecked_layout::<McpAppModule_Ref>() }
    } else {
        header.init_root_module::<McpAppModule_Ref>()
    }
    .map_err(|e| classify(&path, &module_version, e))?;
    let info = (root.info())();
    if info.abi_version != ABI_VERSION {
        return Err(LoadError::IncompatibleMajor {
            path,
            module_abi: info.abi_version,
            module_version: info.interface_version.to_string(),
            host_abi: ABI_VERSION,
            host_version: INTERFACE_VERSION.to_string(),
        });
    }
    let declared = ModuleInfoExtra::from_json(info.extra_json.as_str());
    let loaded = LoadedModule { root, info, path, interface, minor, declared };
    let (module_abi, host_abi) = (format!("{}.{}", loaded.interface.major, loaded.interface.minor), host_abi_label());
    match loaded.minor {
        MinorRelation::Same => {}
        MinorRelation::NewerModule => tracing::info!(
            "Module {} speaks ABI {module_abi}, newer than this gateway's {host_abi}: loaded; operations added after {host_abi} are not used",
            loaded.path.display()
        ),
        MinorRelation::OlderModule => tracing::info!(
            "Module {} speaks ABI {module_abi}, older than this gateway's {host_abi}: loaded; unavailable (the module lacks them): {:?}",
            loaded.path.display(),
            loaded.unavailable(&module_side_optional())
        ),
    }
    Ok(loaded)
}

/// The optional methods on the module's side of the boundary that this host's interface knows.
fn module_side_optional() -> Vec<&'static str> {
    host_abi::capability::ALL
        .iter()
        .copied()
        .filter(|c| c.starts_with("ModuleInstance::") || c.starts_with("McpAppModule::"))
        .collect()
}

/// This host's interface version, as its root module type declares it.
fn host_interface() -> VersionNumber {
    VersionNumber::new(<McpAppModule_Ref as RootModule>::VERSION_STRINGS)
        .unwrap_or_else(|_| VersionNumber::new(VersionStrings::new("0.0.0")).expect("a valid version"))
}

fn host_abi_label() -> String {
    let host = host_interface();
    format!("{}.{}", host.major, host.minor)
}

/// Which side abi_stable's report calls "expected" (the other one is "found").
#[derive(Clone, Copy)]
enum Direction {
    /// abi_stable's own check: this host's interface is expected.
    HostIsExpected,
    /// The reversed check of an older-minor module: the module's interface is expected.
    ModuleIsExpected,
}

fn layout_error(path: &Path, module_version: &str, report: &str, direction: Direction) -> LoadError {
    LoadError::IncompatibleLayout {
        path: path.to_path_buf(),
        module_version: module_version.to_string(),
        host_version: INTERFACE_VERSION.to_string(),
        host_abi: host_abi_label(),
        detail: summarize_instability(report, direction),
    }
}

/// Maps abi_stable's errors to short ones. `module_version` is the interface version the library
/// declares (empty before its header was read).
fn classify(path: &Path, module_version: &str, err: LibraryError) -> LoadError {
    let path = path.to_path_buf();
    match err {
        LibraryError::OpenError { err, .. } => LoadError::NotALibrary { path, reason: first_line(&err.to_string()) },
        LibraryError::GetSymbolError { .. } => LoadError::NotAModule { path },
        LibraryError::IncompatibleVersionNumber { expected_version, actual_version, .. } => LoadError::IncompatibleMajor {
            path,
            module_abi: actual_version.major,
            module_version: actual_version.to_string(),
            host_abi: expected_version.major,
            host_version: expected_version.to_string(),
        },
        LibraryError::AbiInstability(report) => {
            let report = report.to_string();
            tracing::debug!("abi_stable's full layout report for {}:\n{report}", path.display());
            layout_error(&path, module_version, &report, Direction::HostIsExpected)
        }
        other => LoadError::Other { path, detail: first_line(&other.to_string()) },
    }
}

fn first_line(text: &str) -> String {
    text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("").chars().take(300).collect()
}

/// The useful part of abi_stable's layout report is its `Error:` entries at the end ("too many
/// fields", "incompatible type size", each with `Expected:`/`Found:` values) and the type they
/// concern. Keep those, one line each, naming which value is the gateway's and which the module's;
/// fall back to the report's last lines if the format changes.
fn summarize_instability(report: &str, direction: Direction) -> String {
    let lines: Vec<&str> = report.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    let error_at: Vec<usize> = lines.iter().enumerate().filter(|(_, l)| l.starts_with("Error:")).map(|(i, _)| i).collect();
    let Some(&first) = error_at.first() else {
        let start = lines.len().saturating_sub(4);
        return lines[start..].iter().map(|l| l.chars().take(200).collect::<String>()).collect::<Vec<_>>().join("\n  ");
    };
    let type_name = lines[..first]
        .iter()
        .rposition(|l| *l == "--- Type Layout ---")
        .and_then(|k| lines.get(k + 1))
        .and_then(|l| l.strip_prefix("type:"))
        .unwrap_or("a type");
    let mut out = Vec::new();
    for (n, &at) in error_at.iter().enumerate().take(4) {
        let end = error_at.get(n + 1).copied().unwrap_or(lines.len());
        let value = |label: &str| {
            (at..end)
                .find(|&j| lines[j] == label)
                .and_then(|j| lines.get(j + 1))
                .map(|v| v.trim_start_matches("field_name:").chars().take(80).collect::<String>())
                .unwrap_or_else(|| "?".into())
        };
        let kind = &lines[at]["Error:".len()..];
        let (gateway, module) = match direction {
            Direction::HostIsExpected => (value("Expected:"), value("Found:")),
            Direction::ModuleIsExpected => (value("Found:"), value("Expected:")),
        };
        out.push(format!("{type_name}: {kind} (gateway: {gateway}, module: {module})"));
    }
    out.join("\n  ")
}
