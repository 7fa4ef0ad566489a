//! Child processes of apps: spawned in their own process group, tied to the gateway's life, and
//! killed as a group (SPEC R16: no orphans).
//!
//! Each child gets `PR_SET_PDEATHSIG = SIGKILL`, so it dies with the gateway even when the gateway
//! is killed outright; on an orderly stop the whole group gets SIGTERM, then SIGKILL after a grace
//! period. Spawning happens on a module runtime worker (those threads live as long as the module),
//! because the death signal fires when the spawning *thread* exits.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::manifest::Manifest;

/// Environment variables of the gateway that an app must never inherit: its own configuration
/// overrides (which may carry tokens) and anything the gateway reads secrets from.
const WITHHELD_ENV_PREFIXES: &[&str] =
    &["GATEWAY__", "OPENCLAW__", "SECURITY__", "AGENT__", "PLUGINS__", "MCPAPPS__", "SESSIONS__", "GATEWAY_AUTH"];

#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    #[error("manifest has no command to run")]
    NoCommand,
    #[error("cannot start '{command}': {source}")]
    Io { command: String, source: std::io::Error },
}

/// A running app process. Dropping it kills the whole process group.
pub struct AppProcess {
    child: Child,
    pgid: i32,
    pub stdin: Option<ChildStdin>,
    pub stdout: Option<ChildStdout>,
}

impl AppProcess {
    /// Starts the manifest's command. With `stdio_transport`, stdin/stdout are kept for MCP;
    /// otherwise stdout goes to the logs like stderr.
    pub fn spawn(manifest: &Manifest, app_id: &str, stdio_transport: bool) -> Result<AppProcess, SpawnError> {
        let command = manifest.resolved_command().ok_or(SpawnError::NoCommand)?;
        let mut cmd = Command::new(&command);
        cmd.args(&manifest.arguments)
            .current_dir(manifest.resolved_working_dir())
            .stdin(if stdio_transport { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .process_group(0);
        for (key, _) in std::env::vars_os() {
            let upper = key.to_string_lossy().to_ascii_uppercase();
            if WITHHELD_ENV_PREFIXES.iter().any(|p| upper.starts_with(p)) {
                cmd.env_remove(&key);
            }
        }
        cmd.envs(&manifest.environment);
        // SAFETY: only async-signal-safe libc calls between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // The gateway may have died between fork and prctl.
                if libc::getppid() == 1 {
                    libc::_exit(1);
                }
                Ok(())
            });
        }
        let mut child =
            cmd.spawn().map_err(|source| SpawnError::Io { command: command.display().to_string(), source })?;
        let pgid = child.id().map(|p| p as i32).unwrap_or(0);
        if let Some(stderr) = child.stderr.take() {
            forward_lines(stderr, app_id.to_string(), "stderr");
        }
        let stdout = child.stdout.take();
        let stdout = if stdio_transport {
            stdout
        } else {
            if let Some(out) = stdout {
                forward_lines(out, app_id.to_string(), "stdout");
            }
            None
        };
        let stdin = child.stdin.take();
        tracing::debug!(app = app_id, pid = pgid, "started process {}", command.display());
        Ok(AppProcess { child, pgid, stdin, stdout })
    }

    pub fn pid(&self) -> i32 {
        self.pgid
    }

    /// Waits for the process to exit and describes how it ended.
    pub async fn wait(&mut self) -> String {
        match self.child.wait().await {
            Ok(status) => describe_exit(status),
            Err(e) => format!("could not wait for the process: {e}"),
        }
    }

    /// How the process ended, if it has.
    pub fn try_exit(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(describe_exit(status)),
            Ok(None) => None,
            Err(e) => Some(format!("could not check the process: {e}")),
        }
    }

    /// SIGTERM to the group, then SIGKILL after `grace` if the leader is still alive.
    pub async fn terminate(&mut self, grace: Duration) {
        if self.pgid <= 0 {
            return;
        }
        signal_group(self.pgid, libc::SIGTERM);
        if tokio::time::timeout(grace, self.child.wait()).await.is_err() {
            signal_group(self.pgid, libc::SIGKILL);
            let _ = self.child.wait().await;
        }
        // Stragglers in the group (grandchildren) go too.
        signal_group(self.pgid, libc::SIGKILL);
    }
}

impl Drop for AppProcess {
    fn drop(&mut self) {
        signal_group(self.pgid, libc::SIGKILL);
    }
}

fn signal_group(pgid: i32, signal: i32) {
    if pgid > 0 {
        // SAFETY: plain syscall; ESRCH (already gone) is fine.
        unsafe {
            libc::killpg(pgid, signal);
        }
    }
}

pub fn describe_exit(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("process exited with code {code}"),
        (None, Some(sig)) => format!("process was killed by signal {sig}"),
        _ => "process exited".to_string(),
    }
}

/// Copies a child's output into the logs line by line, tagged with the app id.
fn forward_lines<R: AsyncRead + Unpin + Send + 'static>(reader: R, app_id: String, stream: &'static str) {
    tokio::spawn(async move {
        let mut lines = BufReader::new(reader).lines();
        loop {
            match lines.next_line().await {
                Ok(Some(line)) => tracing::info!(target: "mcpapp_plugin::app_output", app = %app_id, stream, "[{app_id}] {line}"),
                Ok(None) => break,
                Err(e) => {
                    tracing::debug!(app = %app_id, "stopped reading {stream}: {e}");
                    break;
                }
            }
        }
    });
}
