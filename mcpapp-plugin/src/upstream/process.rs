//! Child processes of apps: spawned in their own process group, alive exactly as long as the
//! gateway wants them, killed as a group (SPEC R16, R44: no orphans), with a clean environment.
//!
//! # Who forks
//!
//! Every fork of the module happens on one dedicated thread, `mcpapp-spawner`, started on first
//! use and ending only when neither a module instance of this library nor a child it forked is
//! left ([`crate::runtime::spawner`], retired by [`crate::runtime::library`]) — a library swapped
//! out stays loaded, and would otherwise keep a thread per swap. That matters because of
//! `PR_SET_PDEATHSIG`, which each app gets so that it dies with the gateway even when the gateway
//! is SIGKILLed: the kernel sends the death signal when the *thread* that forked the child exits,
//! not the process. Forking from a runtime worker or a blocking-pool thread (`block_in_place` in a
//! reload, tokio's 10 s blocking-pool keep-alive) got apps SIGKILLed seconds after they started.
//! On the spawner thread the signal fires only when the whole process goes, or when no app of this
//! library is left to fire on.
//!
//! Spawning is asynchronous for the caller: [`AppProcess::spawn`] sends a job over a channel and
//! awaits the child on a oneshot, so no runtime thread blocks on a fork. The job enters the calling
//! module runtime's [`tokio::runtime::Handle`] before building the `tokio::process::Command`, so
//! the child's pipes register with that runtime's I/O driver and its exit is observed by that
//! runtime's process (SIGCHLD) driver; each module instance (several in one process in tests, or
//! during a module swap) passes its own handle.
//!
//! In the child, between fork and exec: PDEATHSIG, then a check that the parent is still the
//! process that forked it (the pid captured before the fork: comparing with 1 would kill every app
//! when the gateway itself is PID 1, as in a container or `unshare --pid`).
//!
//! # The guardian
//!
//! PDEATHSIG reaches only the app's own process, not processes it started. So each app also gets
//! a guardian: a tiny process forked (on the spawner thread, without exec) right after the app,
//! holding one end of a socket pair whose other end only the gateway holds. It closes every other
//! descriptor (`close_range`), moves to its own process group (terminal signals to the gateway's
//! group do not reach it), ignores the usual termination signals, and blocks reading:
//! - end of file — the gateway is gone, however it died: it SIGKILLs the app's whole process group
//!   and exits;
//! - one byte — the gateway stopped the app in an orderly way and stands it down: it exits
//!   without touching anything (the gateway has already killed the group).
//!
//! Guardians are reaped by the spawner thread (polled `waitpid(pid, WNOHANG)` on their pids only,
//! so tokio's own reaping of app processes is untouched).
//!
//! # Stopping
//!
//! An orderly stop sends SIGTERM (and SIGCONT, so a stopped app can act on it) to the group, then
//! SIGKILL after a grace period, and SIGKILL once more to the group for stragglers.
//!
//! # Environment
//!
//! A child gets only [`INHERITED_ENV`] (and `LC_*`) from the gateway's environment, plus the
//! manifest's `environment` (after `Entries` overrides). Nothing else — not the gateway's token
//! variable (`Gateway.AuthTokenEnv`), not an agent API key, not any other secret.

use std::ffi::OsString;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::runtime::library::InUse;
use crate::upstream::confinement;
use crate::runtime::executor::Tasks;
use crate::runtime::spawner;

/// The variables of the gateway's environment an app inherits (when set), beside every `LC_*`
/// variable ([`INHERITED_ENV_PREFIX`]). Everything else of the gateway's environment is withheld;
/// an app that needs more names it in its manifest's `environment`.
pub const INHERITED_ENV: &[&str] = &["PATH", "HOME", "LANG", "TZ", "TMPDIR", "USER", "SHELL"];
/// Locale variables (`LC_ALL`, `LC_CTYPE`, …) are inherited too.
pub const INHERITED_ENV_PREFIX: &str = "LC_";

#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    #[error("manifest has no command to run")]
    NoCommand,
    #[error("cannot start '{command}': {source}")]
    Io { command: String, source: std::io::Error },
    #[error("cannot start '{command}': the process spawner is not available ({reason})")]
    Spawner { command: String, reason: String },
}

/// Whether a variable of the gateway's environment passes to apps.
pub fn is_inherited(name: &std::ffi::OsStr) -> bool {
    let Some(name) = name.to_str() else { return false };
    INHERITED_ENV.contains(&name) || name.starts_with(INHERITED_ENV_PREFIX)
}

/// The complete environment of a child: the allowlisted part of `parent`, then `manifest_env`
/// (which wins on a clash).
pub fn child_environment(
    parent: impl IntoIterator<Item = (OsString, OsString)>,
    manifest_env: &std::collections::BTreeMap<String, String>,
) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = parent.into_iter().filter(|(k, _)| is_inherited(k)).collect();
    env.retain(|(k, _)| !manifest_env.contains_key(k.to_string_lossy().as_ref()));
    env.extend(manifest_env.iter().map(|(k, v)| (OsString::from(k), OsString::from(v))));
    env
}

/// What to start for an app: its manifest's command, resolved (`Manifest::launch`).
#[derive(Debug, Clone, Default)]
pub struct Launch {
    /// The program (a path, or a bare name for the `PATH` lookup); `None` when there is none.
    pub command: Option<PathBuf>,
    pub arguments: Vec<String>,
    pub working_dir: PathBuf,
    /// The manifest's `environment` (after `Entries` overrides), on top of what is inherited.
    pub environment: std::collections::BTreeMap<String, String>,
    /// The confinement to apply in the child (SPEC R48), `None` for none.
    pub confinement: Option<Confine>,
}

/// An app's confinement for the spawner: the profile, the Landlock ABI to use (0: none) and a
/// name for its cgroup.
#[derive(Debug, Clone, Default)]
pub struct Confine {
    pub profile: confinement::Profile,
    pub landlock_abi: i32,
    pub cgroup_name: String,
}

/// A running app process. Dropping it kills the whole process group (and stands its guardian
/// down).
pub struct AppProcess {
    child: Child,
    pgid: i32,
    pub stdin: Option<ChildStdin>,
    pub stdout: Option<ChildStdout>,
    // Dropped after the group is killed (fields drop after `Drop::drop`).
    _guardian: Option<Guardian>,
    /// The app's pids cgroup (its process limit), removed when the process is gone.
    pids_group: Option<confinement::PidsGroup>,
    limits: confinement::Limits,
    /// Keeps the spawner thread (whose exit would be this child's death signal) while the child
    /// lives, instance or not ([`crate::runtime::library`]). Last, so it goes after the guardian.
    _library: InUse,
}

/// What the spawner thread needs to start one app: owned, so it can cross threads.
struct SpawnRequest {
    command: PathBuf,
    arguments: Vec<String>,
    working_dir: PathBuf,
    env: Vec<(OsString, OsString)>,
    stdio_transport: bool,
    app_id: String,
    /// The confinement, built (see [`AppProcess::spawn`]).
    prepared: Option<confinement::Prepared>,
    /// The limits it sets, to name the one an exit crossed (none when unconfined).
    limits: confinement::Limits,
    /// Taken before the spawner is asked for, so it cannot retire between then and the fork.
    library: InUse,
}

impl AppProcess {
    /// Starts the app's command (on the spawner thread; see the module docs). With
    /// `stdio_transport`, stdin/stdout are kept for MCP; otherwise stdout goes to the logs like
    /// stderr. Must be called on a module runtime.
    pub async fn spawn(
        launch: &Launch,
        app_id: &str,
        stdio_transport: bool,
        tasks: &Tasks,
    ) -> Result<AppProcess, SpawnError> {
        let command = launch.command.clone().ok_or(SpawnError::NoCommand)?;
        let confine_err = |e: String| SpawnError::Io {
            command: command.display().to_string(),
            source: std::io::Error::other(format!("cannot confine the app: {e}")),
        };
        // Built here, before the spawner is asked: the spawner thread, which every app's fork
        // waits for in turn, only forks, while the next apps of a startup are prepared. A few
        // hundred microseconds of system calls (the shared parts are made as the apps start,
        // `confinement::warm_up`); not on the blocking pool, whose new threads would each make
        // every later fork copy more (measured: `bench startup`).
        let prepared = match &launch.confinement {
            Some(c) => Some(
                confinement::Prepared::prepare(&c.profile, c.landlock_abi, &c.cgroup_name)
                    .map_err(|e| confine_err(e.to_string()))?,
            ),
            None => None,
        };
        let request = SpawnRequest {
            arguments: launch.arguments.clone(),
            working_dir: launch.working_dir.clone(),
            env: child_environment(std::env::vars_os(), &launch.environment),
            stdio_transport,
            app_id: app_id.to_string(),
            prepared,
            limits: launch.confinement.as_ref().map(|c| c.profile.limits).unwrap_or_default(),
            command: command.clone(),
            library: crate::runtime::library::in_use(),
        };
        let spawner_err =
            |reason: String| SpawnError::Spawner { command: command.display().to_string(), reason };
        let handle = tasks.handle().clone();
        let (tx, rx) = tokio::sync::oneshot::channel();
        spawner::run(Box::new(move || {
            let _entered = handle.enter();
            let result = spawn_here(request);
            // If the caller gave up meanwhile (startup timeout), the process is dropped here,
            // which kills its group.
            drop(tx.send(result));
        }))
        .map_err(spawner_err)?;
        let mut process = rx.await.map_err(|_| spawner_err("the spawn job was dropped".into()))??;
        if let Some(stderr) = process.child.stderr.take() {
            forward_lines(tasks, stderr, app_id.to_string(), "stderr");
        }
        if !stdio_transport {
            if let Some(out) = process.stdout.take() {
                forward_lines(tasks, out, app_id.to_string(), "stdout");
            }
        }
        tracing::debug!(app = app_id, pid = process.pgid, "started process {}", command.display());
        Ok(process)
    }

    pub fn pid(&self) -> i32 {
        self.pgid
    }

    /// Waits for the process to exit and describes how it ended.
    pub async fn wait(&mut self) -> String {
        match self.child.wait().await {
            Ok(status) => self.describe_confined_exit(status),
            Err(e) => format!("could not wait for the process: {e}"),
        }
    }

    /// How the process ended, if it has.
    pub fn try_exit(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(self.describe_confined_exit(status)),
            Ok(None) => None,
            Err(e) => Some(format!("could not check the process: {e}")),
        }
    }

    /// SIGTERM to the group (with SIGCONT, so a stopped process can act on it), then SIGKILL after
    /// `grace` if the leader is still alive.
    pub async fn terminate(&mut self, grace: Duration) {
        if self.pgid <= 0 {
            return;
        }
        signal_group(self.pgid, libc::SIGTERM);
        signal_group(self.pgid, libc::SIGCONT);
        if tokio::time::timeout(grace, self.child.wait()).await.is_err() {
            signal_group(self.pgid, libc::SIGKILL);
            let _ = self.child.wait().await;
        }
        // Stragglers in the group (grandchildren) go too.
        signal_group(self.pgid, libc::SIGKILL);
        if let Some(group) = &self.pids_group {
            group.remove();
        }
    }
}

impl AppProcess {
    /// [`describe_exit`], naming the limit the process crossed when the kernel says so (SPEC R48).
    fn describe_confined_exit(&self, status: std::process::ExitStatus) -> String {
        use std::os::unix::process::ExitStatusExt;
        let mut text = describe_exit(status);
        let signal = status.signal();
        if let Some(cpu) = self.limits.cpu_seconds {
            if signal == Some(libc::SIGXCPU) {
                text.push_str(&format!(": its CPU time limit ({cpu} s) was reached"));
            }
        }
        if let (Some(max), Some(group)) = (self.limits.processes, &self.pids_group) {
            if group.limit_hit() {
                text.push_str(&format!("; it reached its process limit ({max} processes and threads)"));
            }
        }
        if let Some(bytes) = self.limits.memory_bytes {
            if matches!(signal, Some(libc::SIGABRT) | Some(libc::SIGSEGV) | Some(libc::SIGBUS)) {
                text.push_str(&format!(" (an allocation refused by its memory limit of {} MiB ends a process this way)", bytes >> 20));
            }
        }
        text
    }
}

impl Drop for AppProcess {
    fn drop(&mut self) {
        signal_group(self.pgid, libc::SIGKILL);
    }
}

/// Runs on the spawner thread, inside the caller's runtime context.
fn spawn_here(request: SpawnRequest) -> Result<AppProcess, SpawnError> {
    let SpawnRequest { command, arguments, working_dir, env, stdio_transport, app_id, mut prepared, limits, library } = request;
    let io_err = |source: std::io::Error| SpawnError::Io { command: command.display().to_string(), source };
    for note in prepared.iter().flat_map(|p| p.notes.iter()) {
        tracing::warn!(app = %app_id, "McpApp '{app_id}': {note}");
    }
    let pids_group = prepared.as_mut().and_then(|p| p.pids_group.take());
    let mut cmd = Command::new(&command);
    cmd.args(&arguments)
        .current_dir(&working_dir)
        .env_clear()
        .envs(env)
        .stdin(if stdio_transport { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
    // SAFETY: getpid is a plain syscall.
    let parent = unsafe { libc::getpid() };
    // SAFETY: only async-signal-safe libc calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The gateway may have died between fork and prctl (then we were reparented).
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            if let Some(prepared) = &prepared {
                prepared.apply_in_child()?;
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(io_err)?;
    let pgid = child.id().map(|p| p as i32).unwrap_or(0);
    let guardian = match Guardian::start(pgid) {
        Ok(g) => Some(g),
        Err(e) => {
            tracing::warn!(
                app = %app_id,
                "McpApp '{app_id}': cannot start the guardian of process group {pgid} ({e}); processes the app starts may outlive a killed gateway"
            );
            None
        }
    };
    let stdin = child.stdin.take();
    let stdout = child.stdout.take();
    Ok(AppProcess { child, pgid, stdin, stdout, _guardian: guardian, pids_group, limits, _library: library })
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

/// The longest line of an app's output the logs take; the rest of a longer line is cut (an app
/// that writes megabytes without a newline must not make the gateway buffer them).
pub const MAX_OUTPUT_LINE_BYTES: usize = 8 * 1024;

/// Copies a child's output into the logs line by line, tagged with the app id, each line cut at
/// [`MAX_OUTPUT_LINE_BYTES`].
fn forward_lines<R: AsyncRead + Unpin + Send + 'static>(tasks: &Tasks, reader: R, app_id: String, stream: &'static str) {
    tasks.spawn("forwarding an app's output", async move {
        let mut reader = BufReader::new(reader);
        let mut line = Vec::new();
        loop {
            match next_line_bounded(&mut reader, &mut line, MAX_OUTPUT_LINE_BYTES).await {
                Ok(Some(cut)) => {
                    let text = String::from_utf8_lossy(&line);
                    let text = text.trim_end_matches('\r');
                    match cut {
                        0 => tracing::info!(target: "mcpapp_plugin::app_output", app = %app_id, stream, "[{app_id}] {text}"),
                        _ => tracing::info!(target: "mcpapp_plugin::app_output", app = %app_id, stream, "[{app_id}] {text} … ({cut} more bytes of this line cut)"),
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    tracing::debug!(app = %app_id, "stopped reading {stream}: {e}");
                    break;
                }
            }
        }
    });
}

/// Reads one line (without its `\n`) into `line`, keeping at most `max` bytes of it and
/// discarding the rest as it arrives. `Some(bytes cut)`, or `None` at end of input.
async fn next_line_bounded<R: tokio::io::AsyncBufRead + Unpin>(
    reader: &mut R,
    line: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Option<usize>> {
    line.clear();
    let mut cut = 0usize;
    let mut read_any = false;
    loop {
        let buf = reader.fill_buf().await?;
        if buf.is_empty() {
            return Ok(read_any.then_some(cut));
        }
        read_any = true;
        let newline = buf.iter().position(|b| *b == b'\n');
        let content = newline.unwrap_or(buf.len());
        let keep = content.min(max.saturating_sub(line.len()));
        line.extend_from_slice(&buf[..keep]);
        cut += content - keep;
        let consumed = newline.map_or(content, |i| i + 1);
        reader.consume(consumed);
        if newline.is_some() {
            return Ok(Some(cut));
        }
    }
}

// -------------------------------------------------------------------------------------------------
// The guardian
// -------------------------------------------------------------------------------------------------

/// The gateway's side of a guardian (see the module docs).
struct Guardian {
    pid: libc::pid_t,
    /// The gateway's end of the socket pair. Closing it without the stand-down byte (what the
    /// kernel does when the gateway dies) makes the guardian kill the group.
    link: OwnedFd,
}

/// Signals a guardian ignores: it must outlive whatever takes the gateway down.
const GUARDIAN_IGNORED: &[libc::c_int] =
    &[libc::SIGHUP, libc::SIGINT, libc::SIGQUIT, libc::SIGTERM, libc::SIGPIPE, libc::SIGUSR1, libc::SIGUSR2];

impl Guardian {
    /// Forks a guardian for process group `pgid`. Runs on the spawner thread.
    fn start(pgid: libc::pid_t) -> std::io::Result<Guardian> {
        if pgid <= 0 {
            return Err(std::io::Error::other("no process group"));
        }
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: socketpair fills two descriptors we then own.
        if unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr()) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: both descriptors were just created and are owned by nobody else.
        let (ours, theirs) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let name = b"mcpapp-guard\0";
        // SAFETY: fork; the child runs only async-signal-safe calls (guardian_main) and never returns.
        match unsafe { libc::fork() } {
            -1 => Err(std::io::Error::last_os_error()),
            0 => unsafe { guardian_main(theirs.as_raw_fd(), pgid, name.as_ptr()) },
            pid => {
                drop(theirs);
                Ok(Guardian { pid, link: ours })
            }
        }
    }
}

impl Drop for Guardian {
    fn drop(&mut self) {
        // Stand down: one byte, then close. MSG_NOSIGNAL: a guardian someone killed is no SIGPIPE.
        // SAFETY: send on a socket we own.
        unsafe {
            libc::send(self.link.as_raw_fd(), [1u8].as_ptr().cast(), 1, libc::MSG_NOSIGNAL);
        }
        // The guardian exits at the byte, and is reaped by the spawner (or here if it retired).
        spawner::reap(self.pid);
    }
}

/// The guardian process: async-signal-safe calls only (it is a fork of a threaded process).
unsafe fn guardian_main(link: libc::c_int, pgid: libc::pid_t, name: *const u8) -> ! {
    // Own process group: Ctrl-C or a kill of the gateway's group does not take it first.
    libc::setpgid(0, 0);
    for sig in 1..32 {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP {
            continue;
        }
        let disposition = if GUARDIAN_IGNORED.contains(&sig) { libc::SIG_IGN } else { libc::SIG_DFL };
        libc::signal(sig, disposition);
    }
    let mut empty: libc::sigset_t = std::mem::zeroed();
    libc::sigemptyset(&mut empty);
    libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
    libc::prctl(libc::PR_SET_NAME, name as libc::c_ulong, 0, 0, 0);
    close_all_but(link);
    loop {
        let mut byte = 0u8;
        let n = libc::read(link, (&mut byte as *mut u8).cast(), 1);
        if n == 1 {
            // Stood down by the gateway.
            libc::_exit(0);
        }
        if n < 0 && *libc::__errno_location() == libc::EINTR {
            continue;
        }
        // End of file (or an error): the gateway is gone.
        break;
    }
    libc::killpg(pgid, libc::SIGKILL);
    libc::_exit(0);
}

/// Closes every descriptor except `keep` (`close_range`, or a loop where it is missing).
unsafe fn close_all_but(keep: libc::c_int) {
    let close_range = |first: libc::c_uint, last: libc::c_uint| -> bool {
        first > last || libc::syscall(libc::SYS_close_range, first, last, 0 as libc::c_uint) == 0
    };
    let keep_u = keep as libc::c_uint;
    let low_ok = keep_u == 0 || close_range(0, keep_u - 1);
    let high_ok = close_range(keep_u + 1, libc::c_uint::MAX);
    if low_ok && high_ok {
        return;
    }
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    let max = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
        limit.rlim_cur.min(1 << 20) as libc::c_int
    } else {
        4096
    };
    for fd in 0..max {
        if fd != keep {
            libc::close(fd);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn os(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs.iter().map(|(k, v)| (OsString::from(k), OsString::from(v))).collect()
    }

    #[test]
    fn output_lines_are_cut_at_the_bound_without_buffering_the_rest() {
        let mut input = b"short\r\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', 100_000));
        input.extend(b"\nafter\nno newline at the end");
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let lines = rt.block_on(async {
            // A small buffer, so long lines arrive in many pieces.
            let mut reader = tokio::io::BufReader::with_capacity(64, &input[..]);
            let mut line = Vec::new();
            let mut out = Vec::new();
            while let Some(cut) = next_line_bounded(&mut reader, &mut line, 1000).await.unwrap() {
                assert!(line.capacity() < 4096, "the cut part was buffered");
                out.push((String::from_utf8(line.clone()).unwrap(), cut));
            }
            out
        });
        assert_eq!(lines.len(), 4);
        assert_eq!(lines[0], ("short\r".to_string(), 0));
        assert_eq!(lines[1], ("x".repeat(1000), 99_000));
        assert_eq!(lines[2], ("after".to_string(), 0));
        assert_eq!(lines[3], ("no newline at the end".to_string(), 0));
    }

    #[test]
    fn environment_is_an_allowlist_plus_the_manifest() {
        let parent = os(&[
            ("PATH", "/bin"),
            ("HOME", "/root"),
            ("LANG", "C.UTF-8"),
            ("LC_ALL", "C"),
            ("TZ", "UTC"),
            ("TMPDIR", "/tmp"),
            ("USER", "me"),
            ("SHELL", "/bin/sh"),
            ("MY_SECRET", "s3cret"),
            ("GATEWAY_AUTH_TOKEN", "t"),
            ("OPENAI_API_KEY", "k"),
            ("Gateway__AuthToken", "x"),
            ("LD_PRELOAD", "/evil.so"),
        ]);
        let mut manifest = BTreeMap::new();
        manifest.insert("APP_MODE".to_string(), "test".to_string());
        manifest.insert("TZ".to_string(), "Europe/Paris".to_string());
        let env: BTreeMap<String, String> = child_environment(parent, &manifest)
            .into_iter()
            .map(|(k, v)| (k.into_string().unwrap(), v.into_string().unwrap()))
            .collect();
        let keys: Vec<&str> = env.keys().map(String::as_str).collect();
        assert_eq!(keys, ["APP_MODE", "HOME", "LANG", "LC_ALL", "PATH", "SHELL", "TMPDIR", "TZ", "USER"]);
        assert_eq!(env["TZ"], "Europe/Paris", "the manifest wins");
    }

    fn launch(command: &str, args: &[&str]) -> Launch {
        Launch {
            command: Some(command.into()),
            arguments: args.iter().map(|s| s.to_string()).collect(),
            working_dir: "/".into(),
            ..Default::default()
        }
    }

    fn alive(pid: i32) -> bool {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Ok(stat) => !stat.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z'),
            Err(_) => false,
        }
    }

    /// Spawned from a thread that then exits (what the blocking pool does), the child lives on:
    /// PDEATHSIG is tied to the spawner thread.
    #[test]
    fn a_child_outlives_the_thread_that_asked_for_it() {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let handle = rt.handle().clone();
        let tasks = Tasks::new(handle.clone());
        let m = launch("/bin/sleep", &["30"]);
        let mut process = std::thread::spawn(move || handle.block_on(AppProcess::spawn(&m, "p", false, &tasks)).unwrap())
            .join()
            .unwrap();
        let pid = process.pid();
        std::thread::sleep(Duration::from_millis(300));
        assert!(alive(pid), "the child died with the thread that asked for it");
        rt.block_on(async {
            assert!(process.try_exit().is_none());
            process.terminate(Duration::from_secs(2)).await;
        });
        assert!(!alive(pid));
    }

    /// The guardian runs beside the app, holds none of its pipes, and leaves (reaped) when the
    /// app is stopped.
    #[test]
    fn the_guardian_stands_down_on_stop() {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        rt.block_on(async {
            let m = launch("/bin/cat", &[]);
            let mut process = AppProcess::spawn(&m, "p", true, &Tasks::new(tokio::runtime::Handle::current())).await.unwrap();
            let guardian = process._guardian.as_ref().expect("a guardian").pid;
            assert!(alive(guardian));
            let comm = || std::fs::read_to_string(format!("/proc/{guardian}/comm")).unwrap_or_default();
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            while comm().trim() != "mcpapp-guard" && std::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            assert_eq!(comm().trim(), "mcpapp-guard");
            // Closing stdin ends `cat`: nobody else (the guardian) holds the pipe.
            drop(process.stdin.take());
            let exit = tokio::time::timeout(Duration::from_secs(5), process.wait()).await.expect("cat saw EOF");
            assert_eq!(exit, "process exited with code 0");
            drop(process);
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            while std::fs::metadata(format!("/proc/{guardian}")).is_ok() && std::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            assert!(std::fs::metadata(format!("/proc/{guardian}")).is_err(), "the guardian was stood down and reaped");
        });
    }

    #[test]
    fn the_child_gets_a_clean_environment() {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        rt.block_on(async {
            // SAFETY: the test sets a variable no other test reads.
            unsafe { std::env::set_var("MCPAPP_PROCESS_TEST_SECRET", "s3cret") };
            let mut m = launch("/bin/sh", &["-c", "echo \"secret=${MCPAPP_PROCESS_TEST_SECRET:-absent} mode=$APP_MODE path=${PATH:+set}\""]);
            m.environment.insert("APP_MODE".into(), "test".into());
            let mut process = AppProcess::spawn(&m, "p", true, &Tasks::new(tokio::runtime::Handle::current())).await.unwrap();
            let mut out = String::new();
            use tokio::io::AsyncReadExt as _;
            process.stdout.take().unwrap().read_to_string(&mut out).await.unwrap();
            assert_eq!(out.trim(), "secret=absent mode=test path=set");
        });
    }
}
