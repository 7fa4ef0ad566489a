//! `gateway-host`: the MCP App gateway.
//!
//! Loads the MCP App module from a shared library at startup, hands it the effective
//! configuration, and serves HTTP. See ARCHITECTURE.md at the repository root for the map.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod boundary_check;
mod chat;
mod commands;
mod env_overrides;
mod gateway_config;
mod http;
mod module_host;
mod module_loader;
mod relay;
mod serve;
mod settings;
mod tools;

/// The error of the gateway's commands and startup: anything with a message.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The MCP App gateway.
#[derive(Debug, Parser)]
#[command(name = "gateway-host", version, about)]
pub struct Cli {
    /// The appsettings.json to read (default: the embedded configuration, paths relative to the
    /// current folder).
    #[arg(long, global = true, value_name = "PATH")]
    config: Option<PathBuf>,

    /// The module library to load (default: `Gateway.ModulePath`, else libmcpapp_plugin.so beside
    /// this executable).
    #[arg(long, global = true, value_name = "PATH")]
    module: Option<PathBuf>,

    /// Where to listen, e.g. `http://127.0.0.1:5000` (default: `Gateway.Urls`).
    #[arg(long, value_name = "URLS")]
    urls: Option<String>,

    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the module's name, version and ABI version as one JSON object, then exit.
    ModuleInfo,
    /// Check manifest files (or folders of them): every problem with its field; exit 1 when any
    /// is invalid.
    Validate {
        /// Manifest files or folders to search.
        #[arg(required = true)]
        paths: Vec<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// List the apps discovery finds with this configuration, their effective settings and
    /// states, without serving.
    Apps {
        /// Print the discovery report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Hold many calls in flight across the module boundary at once and report completion and the
    /// process's thread count as JSON (a self-test and the boundary benchmark's probe).
    BoundaryCheck {
        /// Calls to start at once.
        #[arg(long, default_value_t = 10_000)]
        calls: usize,
        /// How long each call waits inside the module.
        #[arg(long, default_value_t = 5)]
        delay_ms: u64,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing();
    let result = match cli.command {
        None => serve::run(cli.config.as_deref(), cli.module.as_deref(), cli.urls.as_deref()),
        Some(Command::ModuleInfo) => serve::module_info(cli.config.as_deref(), cli.module.as_deref()),
        Some(Command::Validate { paths, json }) => {
            match commands::validate(cli.config.as_deref(), cli.module.as_deref(), &paths, json) {
                Ok(true) => Ok(()),
                Ok(false) => return ExitCode::FAILURE,
                Err(e) => Err(e),
            }
        }
        Some(Command::Apps { json }) => commands::apps(cli.config.as_deref(), cli.module.as_deref(), json),
        Some(Command::BoundaryCheck { calls, delay_ms }) => {
            boundary_check::run(cli.config.as_deref(), cli.module.as_deref(), calls, delay_ms)
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("gateway-host: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// Logs go to stderr, filtered by `RUST_LOG` (default `info`, rmcp's own chatter at `warn`). The `log` bridge is installed too,
/// because module records arrive through it with their own targets.
fn init_tracing() {
    use std::io::IsTerminal as _;
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,rmcp=warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .init();
}
