//! What `apps add SOURCE` names (SPEC R53): a package of a registry, a `server.json` of the MCP
//! Registry, or a local folder. Parsing only; nothing is fetched here.

use std::path::{Path, PathBuf};

use super::InstallError;

/// A parsed SOURCE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// `npm:NAME[@VERSION]` (`NAME` may be scoped, `@scope/name`).
    Npm { name: String, version: Option<String> },
    /// `pypi:NAME[==VERSION]`.
    Pypi { name: String, version: Option<String> },
    /// A `server.json` of the MCP Registry (a file path).
    ServerJson(PathBuf),
    /// A local folder: one holding an `openclaw.mcpapp.json` is copied; one holding a
    /// `package.json` is installed with npm, one with `pyproject.toml` or `setup.py` with pip.
    Folder(PathBuf),
}

impl Source {
    /// Reads SOURCE as a user typed it. Relative paths resolve against `cwd`.
    pub fn parse(text: &str, cwd: &Path) -> Result<Source, InstallError> {
        let text = text.trim();
        if let Some(spec) = text.strip_prefix("npm:") {
            let (name, version) = split_npm(spec);
            check_name(text, &name)?;
            return Ok(Source::Npm { name, version });
        }
        if let Some(spec) = text.strip_prefix("pypi:") {
            let (name, version) = match spec.split_once("==") {
                Some((n, v)) => (n.trim().to_string(), Some(v.trim().to_string()).filter(|v| !v.is_empty())),
                None => (spec.trim().to_string(), None),
            };
            check_name(text, &name)?;
            return Ok(Source::Pypi { name, version });
        }
        let path = if Path::new(text).is_absolute() { PathBuf::from(text) } else { cwd.join(text) };
        // As it is on disk (`cfg/../pkg` → `/…/pkg`): messages and the recorded source name it so.
        let path = std::fs::canonicalize(&path).unwrap_or(path);
        if path.is_dir() {
            return Ok(Source::Folder(path));
        }
        if path.is_file() {
            return Ok(Source::ServerJson(path));
        }
        Err(InstallError::BadSource {
            source_text: text.to_string(),
            why: "expected npm:NAME[@VERSION], pypi:NAME[==VERSION], the path of a server.json, or a folder".into(),
        })
    }

    /// The same source at another version (`apps update --version`); a file or folder has none.
    pub fn at_version(&self, version: Option<String>) -> Source {
        match (self, version) {
            (Source::Npm { name, .. }, Some(v)) => Source::Npm { name: name.clone(), version: Some(v) },
            (Source::Npm { name, .. }, None) => Source::Npm { name: name.clone(), version: None },
            (Source::Pypi { name, .. }, Some(v)) => Source::Pypi { name: name.clone(), version: Some(v) },
            (Source::Pypi { name, .. }, None) => Source::Pypi { name: name.clone(), version: None },
            (other, _) => other.clone(),
        }
    }

    /// As typed (what the manifest records in `metadata.install.source`).
    pub fn display(&self) -> String {
        match self {
            Source::Npm { name, version: Some(v) } => format!("npm:{name}@{v}"),
            Source::Npm { name, version: None } => format!("npm:{name}"),
            Source::Pypi { name, version: Some(v) } => format!("pypi:{name}=={v}"),
            Source::Pypi { name, version: None } => format!("pypi:{name}"),
            Source::ServerJson(p) | Source::Folder(p) => p.display().to_string(),
        }
    }

    /// The id an app gets when `--id` is not given, from the package's name:
    /// `@modelcontextprotocol/server-budget-allocator` → `budget-allocator`, `mcp-server-time` →
    /// `time` (the words every MCP server's name repeats are left out).
    pub fn default_id(name: &str) -> String {
        let last = name.rsplit('/').next().unwrap_or(name).to_ascii_lowercase();
        let mut core = last.as_str();
        for prefix in ["mcp-server-", "server-", "mcp-"] {
            if let Some(rest) = core.strip_prefix(prefix).filter(|r| !r.is_empty()) {
                core = rest;
                break;
            }
        }
        for suffix in ["-mcp-server", "-mcp", "-server"] {
            if let Some(rest) = core.strip_suffix(suffix).filter(|r| !r.is_empty()) {
                core = rest;
                break;
            }
        }
        let id: String = core.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '-' }).collect();
        let id = id.trim_start_matches(|c: char| !c.is_ascii_alphanumeric()).to_string();
        if id.is_empty() { "app".to_string() } else { id }
    }
}

/// `@scope/name@1.2.3` → (`@scope/name`, `1.2.3`); the leading `@` of a scope is not a version.
fn split_npm(spec: &str) -> (String, Option<String>) {
    let spec = spec.trim();
    let search_from = usize::from(spec.starts_with('@'));
    match spec[search_from..].find('@') {
        Some(i) => {
            let at = search_from + i;
            (spec[..at].to_string(), Some(spec[at + 1..].to_string()).filter(|v| !v.is_empty()))
        }
        None => (spec.to_string(), None),
    }
}

/// A package name is handed to npm or pip as one argument: it may not look like an option or
/// hold white space.
fn check_name(source: &str, name: &str) -> Result<(), InstallError> {
    let bad = name.is_empty() || name.starts_with('-') || name.chars().any(|c| c.is_whitespace() || c.is_control());
    if bad {
        return Err(InstallError::BadSource { source_text: source.to_string(), why: format!("'{name}' is not a package name") });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_sources_are_read_with_their_versions() {
        let cwd = Path::new("/nowhere");
        assert_eq!(
            Source::parse("npm:@modelcontextprotocol/server-budget-allocator@2.0.1", cwd).unwrap(),
            Source::Npm { name: "@modelcontextprotocol/server-budget-allocator".into(), version: Some("2.0.1".into()) }
        );
        assert_eq!(Source::parse("npm:@scope/x", cwd).unwrap(), Source::Npm { name: "@scope/x".into(), version: None });
        assert_eq!(Source::parse("npm:left-pad@^1", cwd).unwrap(), Source::Npm { name: "left-pad".into(), version: Some("^1".into()) });
        assert_eq!(
            Source::parse("pypi:mcp-server-time==2026.10.19", cwd).unwrap(),
            Source::Pypi { name: "mcp-server-time".into(), version: Some("2026.10.19".into()) }
        );
        assert_eq!(Source::parse("pypi:mcp-server-time", cwd).unwrap(), Source::Pypi { name: "mcp-server-time".into(), version: None });
        for bad in ["npm:", "npm:--registry=x", "pypi:a b", "nothing-here"] {
            assert!(matches!(Source::parse(bad, cwd), Err(InstallError::BadSource { .. })), "{bad}");
        }
    }

    #[test]
    fn files_and_folders_are_told_apart() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("server.json"), "{}").unwrap();
        let real = dir.path().canonicalize().unwrap();
        assert_eq!(Source::parse("server.json", dir.path()).unwrap(), Source::ServerJson(real.join("server.json")));
        assert_eq!(Source::parse(".", dir.path()).unwrap(), Source::Folder(real.clone()));
    }

    #[test]
    fn default_ids_leave_out_the_words_every_server_repeats() {
        assert_eq!(Source::default_id("@modelcontextprotocol/server-budget-allocator"), "budget-allocator");
        assert_eq!(Source::default_id("mcp-server-time"), "time");
        assert_eq!(Source::default_id("Weather_MCP"), "weather_mcp");
        assert_eq!(Source::default_id("github-mcp-server"), "github");
        assert_eq!(Source::default_id("io.github.x/some tool"), "some-tool");
        assert_eq!(Source::default_id("mcp-"), "mcp-");
    }
}
