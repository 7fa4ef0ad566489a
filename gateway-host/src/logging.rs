//! The gateway's logs: stderr, one record per line, plain text or JSON (`Logging.Format`).
//!
//! Which records: `RUST_LOG` when it is set (and not empty); else `-v`/`-vv`/`-vvv` on the command
//! line; else, for `serve`, `Logging.Level` from the configuration; else the command's default:
//! `info,rmcp=warn` for `serve`, `warn` for the one-shot commands (`validate`, `apps`,
//! `module-info`, `boundary-check`), whose result is what they print on stdout.
//!
//! The `log` bridge is installed too, because the module's records arrive through it with their
//! own targets (`mcpapp_plugin::…`, see `module_host.rs`): they come out in the same format.
//!
//! The configuration is read before this runs (the format comes from it), so a problem with the
//! `Logging` section is kept in [`LogSetup::problems`] and logged by [`init`] once the
//! subscriber is in place.

use crate::settings::Settings;

/// How each record is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `2026-01-02T03:04:05.678Z  INFO target: message`, coloured on a terminal.
    Plain,
    /// One JSON object per line: `timestamp`, `level`, `message` and the record's other fields,
    /// `target` (and `span` when inside one).
    Json,
}

/// Which kind of command runs: it decides the default level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The gateway serving: its log is the operator's record of what happened.
    Serve,
    /// A command that prints a result on stdout and exits: logs only what went wrong.
    OneShot,
}

/// The filter of `serve` when nothing else is configured.
pub const SERVE_DEFAULT_FILTER: &str = "info,rmcp=warn";

/// The filters `-v` steps through, from the one-shot default (`warn`) up.
const LEVELS: [&str; 4] = ["warn", "info,rmcp=warn", "debug,rmcp=info", "trace"];

/// What [`init`] installs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogSetup {
    pub format: Format,
    /// An `EnvFilter` directive string.
    pub filter: String,
    /// Problems with `Logging.*` or `RUST_LOG`, logged as warnings once logging works.
    pub problems: Vec<String>,
}

/// Decides format and filter. `settings` is `None` when the configuration could not be read (the
/// command then reports why); `rust_log` is the `RUST_LOG` variable.
pub fn setup(settings: Option<&Settings>, mode: Mode, verbose: u8, rust_log: Option<&str>) -> LogSetup {
    let mut problems = Vec::new();
    let format = match settings.and_then(|s| s.get_str("Logging:Format")) {
        None => Format::Plain,
        Some(f) if f.eq_ignore_ascii_case("json") => Format::Json,
        Some(f) if f.eq_ignore_ascii_case("plain") || f.eq_ignore_ascii_case("text") => Format::Plain,
        Some(other) => {
            problems.push(format!("Logging.Format '{other}' is not \"plain\" or \"json\"; writing plain text"));
            Format::Plain
        }
    };
    let default = match mode {
        Mode::Serve => SERVE_DEFAULT_FILTER.to_string(),
        Mode::OneShot => LEVELS[0].to_string(),
    };
    let filter = if let Some(env) = rust_log.map(str::trim).filter(|v| !v.is_empty()) {
        match parse(env) {
            Ok(()) => env.to_string(),
            Err(e) => {
                problems.push(format!("RUST_LOG '{env}' is not a valid filter ({e}); using {default}"));
                default
            }
        }
    } else if verbose > 0 {
        let base = if mode == Mode::Serve { 1 } else { 0 };
        LEVELS[(base + usize::from(verbose)).min(LEVELS.len() - 1)].to_string()
    } else if let Some(level) = settings.and_then(|s| s.get_str("Logging:Level")).filter(|_| mode == Mode::Serve) {
        let directive = level_name(&level).map(str::to_string).unwrap_or(level.clone());
        match parse(&directive) {
            Ok(()) => directive,
            Err(e) => {
                problems.push(format!("Logging.Level '{level}' is not a level or a RUST_LOG-style filter ({e}); using {default}"));
                default
            }
        }
    } else {
        default
    };
    LogSetup { format, filter, problems }
}

/// ASP.NET's level names (what an `appsettings.json` author may write), as `tracing` levels.
fn level_name(level: &str) -> Option<&'static str> {
    Some(match level.trim().to_ascii_lowercase().as_str() {
        "trace" => "trace",
        "debug" => "debug",
        "information" | "info" => "info",
        "warning" | "warn" => "warn",
        "error" | "critical" => "error",
        "none" | "off" => "off",
        _ => return None,
    })
}

fn parse(directives: &str) -> Result<(), String> {
    tracing_subscriber::EnvFilter::builder().parse(directives).map(drop).map_err(|e| e.to_string())
}

/// Installs the subscriber (and the `log` bridge) and logs the setup's problems.
pub fn init(setup: &LogSetup) {
    use std::io::IsTerminal as _;
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::builder().parse(&setup.filter).unwrap_or_else(|_| EnvFilter::new(SERVE_DEFAULT_FILTER));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match setup.format {
        Format::Plain => builder.with_ansi(std::io::stderr().is_terminal()).init(),
        Format::Json => builder.json().flatten_event(true).with_span_list(false).with_ansi(false).init(),
    }
    for problem in &setup.problems {
        tracing::warn!("{problem}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::path::PathBuf;

    fn settings(v: serde_json::Value) -> Settings {
        Settings { effective: v, config_dir: PathBuf::from("/cfg") }
    }

    #[test]
    fn defaults_per_command() {
        assert_eq!(setup(None, Mode::Serve, 0, None).filter, "info,rmcp=warn");
        assert_eq!(setup(None, Mode::OneShot, 0, None).filter, "warn");
        assert_eq!(setup(None, Mode::OneShot, 0, Some("  ")).filter, "warn", "an empty RUST_LOG is unset");
        assert_eq!(setup(None, Mode::OneShot, 0, None).format, Format::Plain);
    }

    #[test]
    fn rust_log_wins_then_verbosity_then_the_configured_level() {
        let s = settings(json!({"Logging": {"Level": "debug", "Format": "JSON"}}));
        assert_eq!(setup(Some(&s), Mode::Serve, 2, Some("error")).filter, "error");
        assert_eq!(setup(Some(&s), Mode::OneShot, 1, None).filter, "info,rmcp=warn");
        assert_eq!(setup(Some(&s), Mode::OneShot, 9, None).filter, "trace");
        assert_eq!(setup(Some(&s), Mode::Serve, 1, None).filter, "debug,rmcp=info");
        assert_eq!(setup(Some(&s), Mode::Serve, 0, None).filter, "debug");
        assert_eq!(setup(Some(&s), Mode::OneShot, 0, None).filter, "warn", "Logging.Level is the served gateway's");
        assert_eq!(setup(Some(&s), Mode::Serve, 0, None).format, Format::Json);
        let aspnet = settings(json!({"logging": {"level": "Warning"}}));
        assert_eq!(setup(Some(&aspnet), Mode::Serve, 0, None).filter, "warn");
        let directives = settings(json!({"Logging": {"Level": "info,mcpapp_plugin=debug"}}));
        assert_eq!(setup(Some(&directives), Mode::Serve, 0, None).filter, "info,mcpapp_plugin=debug");
    }

    #[test]
    fn bad_values_are_named_and_fall_back() {
        let s = settings(json!({"Logging": {"Level": "loud=[", "Format": "xml"}}));
        let setup = setup(Some(&s), Mode::Serve, 0, None);
        assert_eq!((setup.format, setup.filter.as_str()), (Format::Plain, "info,rmcp=warn"));
        assert_eq!(setup.problems.len(), 2, "{:?}", setup.problems);
        assert!(setup.problems[0].contains("Logging.Format 'xml'"), "{:?}", setup.problems);
        assert!(setup.problems[1].contains("Logging.Level 'loud=['"), "{:?}", setup.problems);
        let bad_env = super::setup(None, Mode::OneShot, 0, Some("foo=[["));
        assert_eq!(bad_env.filter, "warn");
        assert!(bad_env.problems[0].contains("RUST_LOG"), "{:?}", bad_env.problems);
    }
}
