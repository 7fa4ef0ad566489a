//! `gateway-host`: the MCP App gateway.
//!
//! Loads the MCP App module from a shared library at startup, hands it the effective
//! configuration, and serves HTTP. See ARCHITECTURE.md at the repository root for the map.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use gateway_host::config::{config_keys, settings};
use gateway_host::{boundary_check, commands, init, logging, serve};

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

    /// More log lines on stderr: the one-shot commands log only warnings by default, `-v` adds
    /// info, `-vv` debug; the gateway serving logs info by default (`Logging.Level`), `-v` adds
    /// debug. `RUST_LOG`, when set, decides instead.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,

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
    /// states, without serving; with `--url`, the live states of a running gateway's apps.
    Apps {
        #[command(subcommand)]
        action: Option<AppsAction>,
        /// Print the discovery report (or the live listing) as JSON.
        #[arg(long)]
        json: bool,
        /// Ask the gateway running at this URL (e.g. `http://127.0.0.1:5000`) for its apps' live
        /// states instead of running discovery.
        #[arg(long, value_name = "URL")]
        url: Option<String>,
        /// The gateway token for `--url` (default: `Gateway.AuthToken` of the configuration, else
        /// the environment variable `Gateway.AuthTokenEnv` names, `GATEWAY_AUTH_TOKEN`).
        #[arg(long, value_name = "TOKEN", requires = "url")]
        token: Option<String>,
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

/// `apps add|update|remove|list` (SPEC R53): apps installed from npm, PyPI, an MCP Registry
/// `server.json` or a folder into `Gateway.AppsPath`, which a running gateway discovers.
#[derive(Debug, Subcommand)]
enum AppsAction {
    /// Install an app: SOURCE is npm:NAME[@VERSION], pypi:NAME[==VERSION], the path of an MCP
    /// Registry server.json, or a folder. Writes, checks and prints its openclaw.mcpapp.json.
    Add {
        /// npm:NAME[@VERSION], pypi:NAME[==VERSION], a server.json path, or a folder.
        source: String,
        /// The app's id (default: from the package's name, e.g. budget-allocator).
        #[arg(long)]
        id: Option<String>,
        /// The app's tool-name prefix (default: the id and a dot).
        #[arg(long)]
        prefix: Option<String>,
        /// Run the npm packages' install scripts (off by default: they would run unconfined).
        #[arg(long)]
        allow_scripts: bool,
        #[command(flatten)]
        output: InstallOutputArgs,
    },
    /// Install another version of an installed app (the newest, or --version) beside the one
    /// serving, then switch to it; with --url, the old one comes back if the new one fails.
    Update {
        /// The id of an app `apps add` installed.
        id: String,
        /// The version to install (default: the newest).
        #[arg(long)]
        version: Option<String>,
        /// Run the npm packages' install scripts (off by default: they would run unconfined).
        #[arg(long)]
        allow_scripts: bool,
        #[command(flatten)]
        output: InstallOutputArgs,
    },
    /// Remove an installed app: its manifest (a running gateway stops it), then its folder.
    Remove {
        /// The id of an app `apps add` installed.
        id: String,
        #[command(flatten)]
        output: InstallOutputArgs,
    },
    /// List apps: with --installed, those `apps add` installed; otherwise as `apps`.
    List {
        /// Only the apps installed into Gateway.AppsPath, with their sources.
        #[arg(long)]
        installed: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// How an install reports (`apps add|update|remove`).
#[derive(Debug, clap::Args)]
struct InstallOutputArgs {
    /// No progress or notes on stderr (errors still).
    #[arg(long, short)]
    quiet: bool,
    /// Print the result as one JSON object on stdout (no progress).
    #[arg(long)]
    json: bool,
    /// A running gateway to follow (e.g. http://127.0.0.1:5000): wait until it runs the new
    /// version (or has stopped a removed app); an update that fails there is rolled back.
    #[arg(long, value_name = "URL")]
    url: Option<String>,
    /// The gateway token for --url (default as for `apps --url`).
    #[arg(long, value_name = "TOKEN", requires = "url")]
    token: Option<String>,
}

impl InstallOutputArgs {
    fn options(self) -> commands::InstallOutput {
        commands::InstallOutput { quiet: self.quiet, json: self.json, url: self.url, token: self.token }
    }
}

/// jemalloc, for the reasons in `memory.rs` (not in builds with `--cfg fuzzing`, which have no
/// jemalloc: see Cargo.toml).
#[cfg(not(fuzzing))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// The settings jemalloc reads at its first allocation (the symbol name is its prefixed one).
#[cfg(not(fuzzing))]
#[unsafe(export_name = "_rjem_malloc_conf")]
static ALLOCATOR_CONF: &[u8] = gateway_host::memory::ALLOCATOR_CONF;

/// As PID 1, an init that reaps orphans takes PID 1's place (init.rs). It is forked from here,
/// before Rust's runtime starts, while the process has one thread and jemalloc is not started
/// (init.rs, "Before `main`").
#[used]
#[unsafe(link_section = ".init_array")]
static RUN_AS_INIT_IF_PID_1: extern "C" fn() = init::run_as_init_if_pid_1;

/// Commands whose output is a listing and that write to no socket and no child: `apps` (not
/// `--url`, which does so once it has its answer), `apps list`, `validate`, `module-info`.
fn prints_a_listing_only(command: &Command) -> bool {
    match command {
        Command::Apps { action: Some(AppsAction::List { .. }), .. } => true,
        Command::Apps { action: None, url, .. } => url.is_none(),
        Command::Validate { .. } | Command::ModuleInfo => true,
        _ => false,
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.command.as_ref().is_some_and(prints_a_listing_only) {
        commands::end_quietly_when_stdout_closes();
    }
    // The log format comes from the configuration, so it is read first (quietly: the command reads
    // it again and logs the environment overrides then). A configuration that cannot be read is
    // reported by the command itself.
    let settings = settings::Settings::read(cli.config.as_deref()).ok().map(|(settings, _)| settings);
    let mode = if cli.command.is_none() { logging::Mode::Serve } else { logging::Mode::OneShot };
    let log_setup = logging::setup(settings.as_ref(), mode, cli.verbose, std::env::var("RUST_LOG").ok().as_deref());
    logging::init(&log_setup);
    if let Some(e) = init::fork_error() {
        tracing::warn!("running as PID 1 without an init (cannot fork one: {e}); orphans of apps will not be reaped");
    }
    if let Some(settings) = &settings {
        config_keys::warn_unknown(&settings.effective);
    }
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
        Some(Command::Apps { action: Some(action), .. }) => {
            let (config, module) = (cli.config.as_deref(), cli.module.as_deref());
            let outcome = match action {
                AppsAction::Add { source, id, prefix, allow_scripts, output } => {
                    let request = commands::AddRequest { source, id, prefix, allow_scripts };
                    commands::apps_add(config, module, request, output.options())
                }
                AppsAction::Update { id, version, allow_scripts, output } => {
                    commands::apps_update(config, module, &id, version, allow_scripts, output.options())
                }
                AppsAction::Remove { id, output } => commands::apps_remove(config, &id, output.options()),
                AppsAction::List { installed: true, json } => commands::apps_installed(config, json).map(|()| true),
                AppsAction::List { installed: false, json } => commands::apps(config, module, json).map(|()| true),
            };
            match outcome {
                Ok(true) => Ok(()),
                Ok(false) => return ExitCode::FAILURE,
                Err(e) => Err(e),
            }
        }
        Some(Command::Apps { json, url: Some(url), token, .. }) => commands::apps_live(cli.config.as_deref(), &url, token, json),
        Some(Command::Apps { json, url: None, .. }) => commands::apps(cli.config.as_deref(), cli.module.as_deref(), json),
        Some(Command::BoundaryCheck { calls, delay_ms }) => {
            boundary_check::run(cli.config.as_deref(), cli.module.as_deref(), calls, delay_ms)
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) if log_setup.format == logging::Format::Json => {
            // Every stderr line stays one JSON object.
            tracing::error!("gateway-host: {err:#}");
            ExitCode::FAILURE
        }
        Err(err) => {
            eprintln!("gateway-host: {err:#}");
            ExitCode::FAILURE
        }
    }
}
