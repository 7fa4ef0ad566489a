//! What an install shows while it works (SPEC R53), as people expect of a package manager: each
//! step as it starts, with a spinner and the seconds spent on a terminal, one plain line per
//! step when stderr is not a terminal (logs, CI), nothing with `--quiet`. Everything goes to
//! stderr: stdout carries only the result (the manifest, or `--json`'s object).
//!
//! The programs an install runs (npm, pip) are run here, their output kept: when one fails,
//! its last lines are the error a user needs.

use std::collections::VecDeque;
use std::io::{BufRead as _, IsTerminal as _, Write as _};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// A spinner line that is rewritten in place.
    Terminal,
    /// One line per step.
    Lines,
    /// Nothing (`--quiet`, `--json`, and the gateway's own route, which logs instead).
    Quiet,
    /// Log lines through `tracing` (the admin route).
    Log,
}

impl Style {
    /// `Terminal` when stderr is one, else `Lines`; `Quiet` when asked.
    pub fn for_stderr(quiet: bool) -> Style {
        if quiet {
            Style::Quiet
        } else if std::io::stderr().is_terminal() {
            Style::Terminal
        } else {
            Style::Lines
        }
    }
}

/// The reporter of one install.
#[derive(Debug, Clone)]
pub struct Progress {
    style: Style,
}

/// How many of a failing program's last lines an error shows.
pub const TAIL_LINES: usize = 15;

/// A program that ended badly (or did not start): its exit and last lines.
#[derive(Debug, Clone)]
pub struct Failed {
    pub status: String,
    /// The last [`TAIL_LINES`] lines of its stdout and stderr, interleaved as they came.
    pub tail: Vec<String>,
    /// All it printed (for recognising errors such as npm's `E404`).
    pub output: String,
}

impl Progress {
    pub fn new(style: Style) -> Progress {
        Progress { style }
    }

    /// A step that starts now: `==> fetching npm:x`.
    pub fn step(&self, message: &str) {
        match self.style {
            Style::Terminal | Style::Lines => eprintln!("==> {message}"),
            Style::Log => tracing::info!("apps install: {message}"),
            Style::Quiet => {}
        }
    }

    /// A remark after the steps (a value to fill in, a permission to widen).
    pub fn note(&self, message: &str) {
        match self.style {
            Style::Terminal | Style::Lines => eprintln!("    {message}"),
            Style::Log => tracing::info!("apps install: {message}"),
            Style::Quiet => {}
        }
    }

    /// Runs `command` to its end, showing `label` (with a spinner on a terminal), and keeps what
    /// it printed. `Ok` with its output when it exits 0.
    pub fn run(&self, label: &str, mut command: Command) -> Result<String, Failed> {
        let started = Instant::now();
        if self.style != Style::Terminal {
            self.step(label);
        }
        command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = command.spawn().map_err(|e| Failed {
            status: format!("could not start: {e}"),
            tail: vec![format!("{}: {e}", command.get_program().to_string_lossy())],
            output: String::new(),
        })?;
        let lines: Arc<Mutex<(VecDeque<String>, String)>> = Arc::default();
        let readers: Vec<_> = [child.stdout.take().map(|o| Box::new(o) as Box<dyn std::io::Read + Send>), child.stderr.take().map(|e| Box::new(e) as Box<dyn std::io::Read + Send>)]
            .into_iter()
            .flatten()
            .map(|stream| {
                let lines = lines.clone();
                std::thread::spawn(move || {
                    for line in std::io::BufReader::new(stream).lines().map_while(Result::ok) {
                        let mut kept = lines.lock().expect("not poisoned");
                        kept.1.push_str(&line);
                        kept.1.push('\n');
                        if !line.trim().is_empty() {
                            kept.0.push_back(line);
                            if kept.0.len() > TAIL_LINES {
                                kept.0.pop_front();
                            }
                        }
                    }
                })
            })
            .collect();
        let done = Arc::new(AtomicBool::new(false));
        let spinner = (self.style == Style::Terminal).then(|| spin(label.to_string(), done.clone()));
        let status = child.wait();
        for reader in readers {
            let _ = reader.join();
        }
        done.store(true, Ordering::SeqCst);
        if let Some(spinner) = spinner {
            let _ = spinner.join();
        }
        if self.style == Style::Terminal {
            // The spinner's line is gone: the step stays, with its time.
            eprintln!("==> {label} ({}s)", started.elapsed().as_secs());
        }
        let (tail, output) = std::mem::take(&mut *lines.lock().expect("not poisoned"));
        match status {
            Ok(s) if s.success() => Ok(output),
            Ok(s) => Err(Failed { status: s.to_string(), tail: tail.into(), output }),
            Err(e) => Err(Failed { status: format!("not waited for: {e}"), tail: tail.into(), output }),
        }
    }
}

/// The spinner: `⠋ installing … 3s`, rewritten ten times a second until `done`, then cleared.
fn spin(label: String, done: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
        let started = Instant::now();
        let short: String = label.chars().take(70).collect();
        let mut i = 0;
        while !done.load(Ordering::SeqCst) {
            eprint!("\r\x1b[2K{} {short} {}s", FRAMES[i % FRAMES.len()], started.elapsed().as_secs());
            let _ = std::io::stderr().flush();
            i += 1;
            std::thread::sleep(Duration::from_millis(100));
        }
        eprint!("\r\x1b[2K");
        let _ = std::io::stderr().flush();
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failing_program_leaves_its_last_lines() {
        let mut command = Command::new("sh");
        // One stream, so that the order of the lines is the program's.
        command.args(["-c", "for i in $(seq 1 40); do echo line $i; done >&2; echo oops >&2; exit 3"]);
        let failed = Progress::new(Style::Quiet).run("failing", command).unwrap_err();
        assert_eq!(failed.tail.len(), TAIL_LINES);
        assert_eq!(failed.tail.last().map(String::as_str), Some("oops"), "{:?}", failed.tail);
        assert!(failed.status.contains('3'), "{}", failed.status);
        assert!(failed.output.contains("line 1\n"));
    }

    #[test]
    fn a_missing_program_is_a_failure_naming_it() {
        let failed = Progress::new(Style::Quiet).run("missing", Command::new("/nonexistent/npm")).unwrap_err();
        assert!(failed.tail[0].contains("/nonexistent/npm"), "{:?}", failed.tail);
    }
}
