//! Loading the MCP App module library and refusing incompatible ones with a short message (SPEC R3).
//!
//! abi_stable checks the interface's layout and version when the root module is initialised; its
//! raw incompatibility report is a ~1,200-line layout dump, so [`LoadError`] keeps only what a
//! person needs: the path, both versions, and the last lines of the report.

use std::path::{Path, PathBuf};

use abi_stable::library::{lib_header_from_path, LibraryError};
use host_abi::{McpAppModule_Ref, ModuleInfo, ABI_VERSION, INTERFACE_VERSION};
use serde::Serialize;

/// A loaded module library: its root module and identity.
pub struct LoadedModule {
    pub root: McpAppModule_Ref,
    pub info: ModuleInfo,
    pub path: PathBuf,
}

/// What `module-info` and `/healthz` report about the module.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModuleSummary {
    pub name: String,
    pub version: String,
    pub abi_version: u32,
    pub path: String,
}

impl LoadedModule {
    pub fn summary(&self) -> ModuleSummary {
        ModuleSummary {
            name: self.info.name.to_string(),
            version: self.info.version.to_string(),
            abi_version: self.info.abi_version,
            path: self.path.display().to_string(),
        }
    }
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
        "module {path} is incompatible: it was built against host-abi {module_version}, \
         this gateway uses host-abi {host_version}"
    )]
    IncompatibleVersion { path: PathBuf, module_version: String, host_version: String },
    #[error(
        "module {path} is incompatible: its interface (host-abi {module_version}) does not match this \
         gateway's (host-abi {host_version}, ABI {host_abi}):\n  {detail}"
    )]
    IncompatibleLayout { path: PathBuf, module_version: String, host_version: String, host_abi: u32, detail: String },
    #[error(
        "module {path} speaks ABI version {module_abi} (host-abi {module_version}), \
         this gateway speaks ABI version {host_abi} (host-abi {host_version})"
    )]
    IncompatibleAbi { path: PathBuf, module_abi: u32, module_version: String, host_abi: u32, host_version: String },
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

/// Loads the module at `path`, checking layout, interface version and semantic ABI version.
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
    let root = header.init_root_module::<McpAppModule_Ref>().map_err(|e| classify(&path, &module_version, e))?;
    let info = (root.info())();
    if info.abi_version != ABI_VERSION {
        return Err(LoadError::IncompatibleAbi {
            path,
            module_abi: info.abi_version,
            module_version: info.interface_version.to_string(),
            host_abi: ABI_VERSION,
            host_version: INTERFACE_VERSION.to_string(),
        });
    }
    Ok(LoadedModule { root, info, path })
}

/// Maps abi_stable's errors to short ones. `module_version` is the interface version the library
/// declares (empty before its header was read).
fn classify(path: &Path, module_version: &str, err: LibraryError) -> LoadError {
    let path = path.to_path_buf();
    match err {
        LibraryError::OpenError { err, .. } => LoadError::NotALibrary { path, reason: first_line(&err.to_string()) },
        LibraryError::GetSymbolError { .. } => LoadError::NotAModule { path },
        LibraryError::IncompatibleVersionNumber { expected_version, actual_version, .. } => {
            LoadError::IncompatibleVersion {
                path,
                module_version: actual_version.to_string(),
                host_version: expected_version.to_string(),
            }
        }
        LibraryError::AbiInstability(report) => {
            tracing::debug!("abi_stable's full layout report for {}:\n{report}", path.display());
            LoadError::IncompatibleLayout {
            path,
            module_version: module_version.to_string(),
            host_version: INTERFACE_VERSION.to_string(),
            host_abi: ABI_VERSION,
            detail: summarize_instability(&report.to_string()),
        }
        }
        other => LoadError::Other { path, detail: first_line(&other.to_string()) },
    }
}

fn first_line(text: &str) -> String {
    text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("").chars().take(300).collect()
}

/// The useful part of abi_stable's layout report is its `Error:` entries at the end ("too many
/// fields", "incompatible type size", each with `Expected:`/`Found:` values) and the type they
/// concern. Keep those, one line each; fall back to the report's last lines if the format changes.
fn summarize_instability(report: &str) -> String {
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
        out.push(format!("{type_name}: {kind} (expected {}, found {})", value("Expected:"), value("Found:")));
    }
    out.join("\n  ")
}
