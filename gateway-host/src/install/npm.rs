//! Installing an npm package as an app (SPEC R53): `npm install` into the app's version folder
//! (lifecycle scripts off unless `--allow-scripts`: a package's install script would run with
//! the gateway user's rights, outside any confinement), then reading its `package.json` for the
//! program (`bin`), `mcpName` and what describes it.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use super::manifest_writer::PackageEntry;
use super::progress::Progress;
use super::InstallError;

/// Runs `npm install SPEC` into `dir` (a new, empty version folder). `spec` is `name@version`,
/// `name`, or a folder's path.
pub fn install(spec: &str, shown: &str, dir: &Path, allow_scripts: bool, progress: &Progress) -> Result<(), InstallError> {
    // npm looks for the nearest package.json upwards: this one keeps the install in `dir`.
    super::write_file(&dir.join("package.json"), b"{ \"private\": true, \"description\": \"An MCP App installed by gateway-host apps add\" }\n")?;
    let mut npm = Command::new("npm");
    npm.arg("install")
        .arg("--prefix")
        .arg(dir)
        .args(["--no-audit", "--no-fund", "--no-update-notifier", "--save-exact", "--omit=dev", "--loglevel=error"]);
    if !allow_scripts {
        npm.arg("--ignore-scripts");
    }
    if Path::new(spec).is_dir() {
        // A folder is copied, not linked: the app must not depend on where it came from.
        npm.arg("--install-links");
    }
    npm.arg(spec);
    let scripts = if allow_scripts { "" } else { " (install scripts off)" };
    progress
        .run(&format!("fetching and installing {shown} with npm{scripts}"), npm)
        .map(|_| ())
        .map_err(|failed| super::classify("npm", shown, failed, &NPM_UNKNOWN, &NPM_UNREACHABLE))
}

/// What npm prints for a package or version that does not exist.
const NPM_UNKNOWN: [&str; 4] = ["E404", "404 Not Found", "ETARGET", "No matching version"];
/// What npm prints when it cannot reach its registry.
const NPM_UNREACHABLE: [&str; 7] = ["ENOTFOUND", "ECONNREFUSED", "ETIMEDOUT", "EAI_AGAIN", "ECONNRESET", "ENETUNREACH", "EHOSTUNREACH"];

/// The name of the package a folder holds (its `package.json` `name`).
pub fn folder_package_name(folder: &Path) -> Result<String, InstallError> {
    let file = folder.join("package.json");
    let json = super::read_json(&file)?;
    json["name"].as_str().map(str::to_string).ok_or_else(|| InstallError::NoServerEntry {
        package: folder.display().to_string(),
        why: format!("{} has no \"name\"", file.display()),
    })
}

/// The program of the installed package `name` in `dir`, which lies at `folder` inside the
/// app's folder (`v1`): `node` and its `bin` script, relative to the app's folder (the app's
/// working folder), so the app's folder can move.
pub fn entry(dir: &Path, folder: &str, name: &str) -> Result<PackageEntry, InstallError> {
    let package_dir = dir.join("node_modules").join(name);
    let json = super::read_json(&package_dir.join("package.json"))?;
    let no_entry = |why: String| InstallError::NoServerEntry { package: format!("npm:{name}"), why };
    let basename = name.rsplit('/').next().unwrap_or(name);
    let script = match &json["bin"] {
        Value::String(s) => s.clone(),
        Value::Object(bins) if !bins.is_empty() => {
            let pick = bins
                .iter()
                .find(|(k, _)| k.as_str() == basename)
                .or_else(|| bins.iter().find(|(k, _)| k.contains("mcp")))
                .or_else(|| bins.iter().next())
                .expect("not empty");
            pick.1.as_str().unwrap_or_default().to_string()
        }
        _ => return Err(no_entry("its package.json declares no \"bin\": there is no program to start".into())),
    };
    if !speaks_mcp(&json) {
        return Err(no_entry(
            "it has no \"mcpName\" and depends on no MCP SDK (@modelcontextprotocol/…, fastmcp, mcp-framework): it is not an MCP server".into(),
        ));
    }
    let script = script.trim_start_matches("./");
    // The first README that reads (one too large or not UTF-8 is passed over).
    let readme = ["README.md", "readme.md", "Readme.md", "README"].iter().find_map(|f| super::read_optional_text(&package_dir.join(f)).ok().flatten());
    let mut notes = Vec::new();
    let package_args = match readme.as_deref().and_then(|r| super::readme_arguments(r, name)) {
        Some(args) => {
            if !args.is_empty() {
                notes.push(format!("arguments {args:?} from the client configuration in the package's README"));
            }
            args
        }
        None => Vec::new(),
    };
    let mut arguments = vec![format!("{folder}/node_modules/{name}/{script}")];
    arguments.extend(package_args);
    Ok(PackageEntry {
        registry_type: "npm",
        package: name.to_string(),
        version: json["version"].as_str().unwrap_or("0.0.0").to_string(),
        command: "node".into(),
        arguments,
        title: None,
        description: json["description"].as_str().map(str::to_string),
        homepage: json["homepage"].as_str().map(str::to_string),
        license: json["license"].as_str().map(str::to_string),
        author: match &json["author"] {
            Value::String(s) => Some(s.clone()),
            Value::Object(a) => a.get("name").and_then(Value::as_str).map(str::to_string),
            _ => None,
        },
        mcp_name: json["mcpName"].as_str().map(str::to_string),
        environment: Vec::new(),
        notes,
    })
}

/// Whether a `package.json` is an MCP server's: it names itself in the MCP Registry
/// (`mcpName`) or depends on an MCP SDK.
fn speaks_mcp(json: &Value) -> bool {
    if json["mcpName"].is_string() {
        return true;
    }
    ["dependencies", "peerDependencies", "optionalDependencies"].iter().any(|section| {
        json[section].as_object().is_some_and(|deps| {
            deps.keys().any(|d| d.starts_with("@modelcontextprotocol/") || d == "fastmcp" || d == "mcp-framework" || d == "@mastra/mcp")
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn package(dir: &Path, name: &str, json: Value) {
        let p = dir.join("node_modules").join(name);
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(p.join("package.json"), json.to_string()).unwrap();
    }

    #[test]
    fn the_bin_of_an_mcp_server_is_its_entry() {
        let dir = tempfile::tempdir().unwrap();
        package(
            dir.path(),
            "@x/server-weather",
            json!({"name": "@x/server-weather", "version": "1.2.0", "bin": {"other": "o.js", "mcp-weather": "./dist/index.js"},
                   "mcpName": "io.github.x/weather", "description": "Weather", "author": {"name": "X"}}),
        );
        let e = entry(dir.path(), "v1", "@x/server-weather").unwrap();
        assert_eq!(e.command, "node");
        assert_eq!(e.arguments, ["v1/node_modules/@x/server-weather/dist/index.js"]);
        assert_eq!(e.mcp_name.as_deref(), Some("io.github.x/weather"));
        assert_eq!(e.author.as_deref(), Some("X"));
        assert_eq!(e.version, "1.2.0");
    }

    #[test]
    fn a_package_without_a_program_or_an_mcp_sdk_has_no_server_entry() {
        let dir = tempfile::tempdir().unwrap();
        package(dir.path(), "lib", json!({"name": "lib", "version": "1.0.0"}));
        let err = entry(dir.path(), "v1", "lib").unwrap_err();
        assert!(err.to_string().contains("no \"bin\""), "{err}");
        package(dir.path(), "tool", json!({"name": "tool", "version": "1.0.0", "bin": "cli.js", "dependencies": {"chalk": "5"}}));
        let err = entry(dir.path(), "v1", "tool").unwrap_err();
        assert!(err.to_string().contains("not an MCP server"), "{err}");
        package(dir.path(), "srv", json!({"name": "srv", "version": "1.0.0", "bin": "cli.js", "dependencies": {"@modelcontextprotocol/sdk": "1"}}));
        assert_eq!(entry(dir.path(), "v1", "srv").unwrap().arguments, ["v1/node_modules/srv/cli.js"]);
    }
}
