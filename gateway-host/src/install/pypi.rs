//! Installing a PyPI package as an app (SPEC R53): a venv of its own in the app's version folder
//! (apps pin different `mcp` versions; the gateway's Python, if any, is never touched), `pip
//! install` into it, then the installed distribution's metadata: its console scripts
//! (`entry_points.txt`), version, summary and whether it depends on the `mcp` SDK.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::manifest_writer::PackageEntry;
use super::progress::Progress;
use super::InstallError;

/// The venv's folder inside a version folder.
pub const VENV: &str = ".venv";

/// Makes the venv in `dir` and installs `spec` (`name==version`, `name`, or a folder) into it.
pub fn install(spec: &str, shown: &str, dir: &Path, progress: &Progress) -> Result<(), InstallError> {
    let mut venv = Command::new(python());
    venv.args(["-m", "venv"]).arg(dir.join(VENV));
    progress.run("making a Python venv for the app", venv).map_err(|failed| InstallError::StepFailed {
        step: format!("{} -m venv", python()),
        status: failed.status,
        tail: failed.tail.join("\n"),
    })?;
    let mut pip = Command::new(dir.join(VENV).join("bin/python"));
    pip.args(["-m", "pip", "install", "--disable-pip-version-check", "--no-input", "--progress-bar", "off"]).arg(spec);
    progress
        .run(&format!("fetching and installing {shown} with pip"), pip)
        .map(|_| ())
        .map_err(|failed| super::classify("PyPI", shown, failed, &PIP_UNKNOWN, &PIP_UNREACHABLE))
}

/// The interpreter venvs are made with: `python3` on `PATH` (the venv records where it lives, so
/// confinement grants it: README "Confinement").
fn python() -> &'static str {
    "python3"
}

/// What pip prints for a package or version that does not exist.
const PIP_UNKNOWN: [&str; 2] = ["No matching distribution found", "Could not find a version that satisfies"];
/// What pip prints when it cannot reach its index.
const PIP_UNREACHABLE: [&str; 6] = [
    "Failed to establish a new connection",
    "Temporary failure in name resolution",
    "Network is unreachable",
    "Connection refused",
    "Max retries exceeded",
    "Read timed out",
];

/// PEP 503's normal form of a distribution name: `Mcp_Server.Time` → `mcp-server-time`.
pub fn normalize(name: &str) -> String {
    let mut out = String::new();
    for c in name.trim().chars() {
        if matches!(c, '-' | '_' | '.') {
            if !out.ends_with('-') {
                out.push('-');
            }
        } else {
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

/// The project name of a Python source folder (`pyproject.toml` `[project] name`).
pub fn folder_package_name(folder: &Path) -> Result<String, InstallError> {
    let file = folder.join("pyproject.toml");
    let text = super::read_text(&file)?;
    let mut in_project = false;
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            in_project = line == "[project]";
        } else if in_project {
            if let Some(value) = line.strip_prefix("name").map(str::trim_start).and_then(|l| l.strip_prefix('=')) {
                return Ok(value.trim().trim_matches(['"', '\'']).to_string());
            }
        }
    }
    Err(InstallError::NoServerEntry { package: folder.display().to_string(), why: format!("{} has no [project] name", file.display()) })
}

/// The installed distribution `name` in the venv of `dir` (at `folder` in the app's folder):
/// its console script is the program, relative to the app's folder.
pub fn entry(dir: &Path, folder: &str, name: &str) -> Result<PackageEntry, InstallError> {
    let no_entry = |why: String| InstallError::NoServerEntry { package: format!("pypi:{name}"), why };
    let dist_info = find_dist_info(&dir.join(VENV), name).ok_or_else(|| no_entry("pip installed it, but its metadata (*.dist-info) is not in the venv".into()))?;
    let metadata = super::read_optional_text(&dist_info.join("METADATA"))?.unwrap_or_default();
    let header = |key: &str| -> Vec<String> {
        metadata
            .lines()
            .take_while(|l| !l.is_empty())
            .filter_map(|l| l.split_once(": ").filter(|(k, _)| k.eq_ignore_ascii_case(key)).map(|(_, v)| v.trim().to_string()))
            .collect()
    };
    let scripts = console_scripts(&super::read_optional_text(&dist_info.join("entry_points.txt"))?.unwrap_or_default());
    let wanted = normalize(name);
    let script = scripts
        .iter()
        .find(|s| normalize(s) == wanted)
        .or_else(|| scripts.iter().find(|s| s.contains("mcp")))
        .or_else(|| scripts.first())
        .ok_or_else(|| no_entry("it declares no console script (entry_points.txt [console_scripts]): there is no program to start".into()))?;
    let requires: Vec<String> = header("Requires-Dist");
    let speaks_mcp = requires.iter().any(|r| {
        let dist: String = r.chars().take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')).collect();
        matches!(normalize(&dist).as_str(), "mcp" | "fastmcp")
    });
    if !speaks_mcp {
        return Err(no_entry("it does not depend on the MCP SDK (mcp or fastmcp): it is not an MCP server".into()));
    }
    let homepage = header("Home-page").into_iter().next().or_else(|| {
        header("Project-URL").into_iter().find_map(|u| u.split_once(", ").map(|(_, url)| url.trim().to_string()))
    });
    Ok(PackageEntry {
        registry_type: "pypi",
        package: header("Name").into_iter().next().unwrap_or_else(|| name.to_string()),
        version: header("Version").into_iter().next().unwrap_or_else(|| "0.0.0".into()),
        command: format!("{folder}/{VENV}/bin/{script}"),
        arguments: Vec::new(),
        title: None,
        description: header("Summary").into_iter().next().filter(|s| !s.is_empty()),
        homepage,
        license: header("License").into_iter().next().filter(|l| !l.is_empty() && l.len() < 64),
        author: header("Author").into_iter().next().or_else(|| header("Author-email").into_iter().next()),
        mcp_name: None,
        environment: Vec::new(),
        notes: Vec::new(),
    })
}

/// The `*.dist-info` folder of distribution `name` in `venv`.
fn find_dist_info(venv: &Path, name: &str) -> Option<PathBuf> {
    let wanted = normalize(name);
    let lib = venv.join("lib");
    for python in std::fs::read_dir(&lib).ok()?.flatten() {
        let site = python.path().join("site-packages");
        for entry in std::fs::read_dir(&site).into_iter().flatten().flatten() {
            let file_name = entry.file_name().to_string_lossy().to_string();
            let Some(stem) = file_name.strip_suffix(".dist-info") else { continue };
            // `{name}-{version}`: the name has no `-` once normalised by the wheel's builder.
            let dist = stem.rsplit_once('-').map_or(stem, |(n, _)| n);
            if normalize(dist) == wanted {
                return Some(entry.path());
            }
        }
    }
    None
}

/// The names under `[console_scripts]` of an `entry_points.txt`.
fn console_scripts(text: &str) -> Vec<String> {
    let mut in_section = false;
    let mut out = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            in_section = line == "[console_scripts]";
        } else if in_section {
            if let Some((name, _)) = line.split_once('=') {
                out.push(name.trim().to_string());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dist(dir: &Path, folder: &str, metadata: &str, entry_points: &str) {
        let d = dir.join(VENV).join("lib/python3.11/site-packages").join(folder);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("METADATA"), metadata).unwrap();
        std::fs::write(d.join("entry_points.txt"), entry_points).unwrap();
    }

    #[test]
    fn the_console_script_of_an_mcp_distribution_is_its_entry() {
        let dir = tempfile::tempdir().unwrap();
        dist(
            dir.path(),
            "mcp_server_time-2026.10.19.dist-info",
            "Metadata-Version: 2.4\nName: mcp-server-time\nVersion: 2026.10.19\nSummary: A time server\nRequires-Dist: mcp>=1.0.0\nRequires-Dist: tzdata\n\nlong text\nName: no\n",
            "[console_scripts]\nmcp-server-time = mcp_server_time:main\n",
        );
        let e = entry(dir.path(), "v1", "MCP_Server.Time").unwrap();
        assert_eq!(e.command, "v1/.venv/bin/mcp-server-time");
        assert_eq!(e.version, "2026.10.19");
        assert_eq!(e.package, "mcp-server-time");
        assert_eq!(e.description.as_deref(), Some("A time server"));
    }

    #[test]
    fn a_distribution_without_a_script_or_the_sdk_has_no_server_entry() {
        let dir = tempfile::tempdir().unwrap();
        dist(dir.path(), "six-1.17.0.dist-info", "Name: six\nVersion: 1.17.0\n\n", "");
        assert!(entry(dir.path(), "v1", "six").unwrap_err().to_string().contains("no console script"));
        dist(dir.path(), "black-24.1.0.dist-info", "Name: black\nVersion: 24.1.0\nRequires-Dist: click\n\n", "[console_scripts]\nblack = black:main\n");
        assert!(entry(dir.path(), "v1", "black").unwrap_err().to_string().contains("not an MCP server"));
    }

    #[test]
    fn a_metadata_file_that_never_ends_is_an_error_naming_it_and_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let folder = "endless-1.0.dist-info";
        dist(dir.path(), folder, "", "");
        let metadata = dir.path().join(VENV).join("lib/python3.11/site-packages").join(folder).join("METADATA");
        std::fs::remove_file(&metadata).unwrap();
        std::os::unix::fs::symlink("/dev/zero", &metadata).unwrap();
        let error = entry(dir.path(), "v1", "endless").unwrap_err().to_string();
        assert!(error.contains("METADATA") && error.contains("larger than"), "{error}");
    }

    #[test]
    fn names_are_compared_in_their_normal_form() {
        assert_eq!(normalize("Mcp_Server..Time"), "mcp-server-time");
    }
}
