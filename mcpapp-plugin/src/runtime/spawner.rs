//! The thread that forks: every fork of the module (an app and its guardian,
//! `upstream/process.rs`) runs on one dedicated thread, `mcpapp-spawner`, started on first use and
//! ending only when neither a module instance of this library nor a child it forked is left
//! ([`retire`], called by [`super::library`]). `PR_SET_PDEATHSIG` fires when the *thread* that
//! forked a child exits, not the process: on this thread it fires only when the whole process goes,
//! or when no app of this library is left to fire on. The thread also reaps the processes it was
//! asked to ([`reap`]: polled `waitpid(pid, WNOHANG)` on those pids only, so tokio's own reaping
//! of app processes is untouched).

use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// How often the spawner thread looks for exited guardians while some are pending.
const REAP_POLL: Duration = Duration::from_millis(100);
/// How long a retiring spawner thread (or a guardian's drop without one) waits for stood-down
/// guardians to exit, so that none is left a zombie.
const REAP_BOUND: Duration = Duration::from_secs(5);

/// Work for the spawner thread: a fork and what goes with it.
pub type Job = Box<dyn FnOnce() + Send>;

enum Message {
    Run(Job),
    /// A guardian was stood down: reap it once it has exited.
    Reap(libc::pid_t),
}

#[derive(Clone)]
struct Spawner {
    tx: mpsc::Sender<Message>,
}

impl Spawner {
    fn run(&self, job: Job) -> Result<(), String> {
        self.tx.send(Message::Run(job)).map_err(|_| "the spawner thread is gone".to_string())
    }

    fn reap(&self, pid: libc::pid_t) {
        let _ = self.tx.send(Message::Reap(pid));
    }
}

/// The library's spawner while it runs: started on first use, taken by [`retire`].
static SPAWNER: Mutex<Option<Spawner>> = Mutex::new(None);

/// The library's spawner, started if none runs.
fn running() -> Result<Spawner, String> {
    let mut running = SPAWNER.lock();
    if let Some(spawner) = running.as_ref() {
        return Ok(spawner.clone());
    }
    let (tx, rx) = mpsc::channel::<Message>();
    std::thread::Builder::new()
        .name("mcpapp-spawner".into())
        .spawn(move || spawner_loop(rx))
        .map_err(|e| format!("cannot start the spawner thread: {e}"))?;
    let spawner = Spawner { tx };
    *running = Some(spawner.clone());
    Ok(spawner)
}

/// Runs `job` on the spawner thread (started if none runs), in order with the jobs before it.
pub fn run(job: Job) -> Result<(), String> {
    running()?.run(job)
}

/// Reaps `pid`, a process a job forked and has told to exit, once it has: on the spawner thread
/// when one runs; else here, within [`REAP_BOUND`]. A spawner retired meanwhile is not restarted
/// for this.
pub fn reap(pid: libc::pid_t) {
    let running = SPAWNER.lock().clone();
    match running {
        Some(spawner) => spawner.reap(pid),
        None => reap_within(&mut vec![pid], REAP_BOUND),
    }
}

/// Ends the spawner thread once it has run its queued jobs and reaped the guardians stood down
/// (bounded by [`REAP_BOUND`]). Only when no app it forked is running: its children get their
/// death signal as it ends. The next spawn starts a new one.
pub fn retire() {
    // Dropping the last sender ends the thread's loop; jobs in flight hold a clone for moments.
    SPAWNER.lock().take();
}

/// Runs jobs one at a time and reaps stood-down guardians, until every sender is gone (see
/// [`retire`]).
fn spawner_loop(rx: mpsc::Receiver<Message>) {
    let mut exiting: Vec<libc::pid_t> = Vec::new();
    loop {
        let message = if exiting.is_empty() {
            rx.recv().map_err(|_| RecvTimeoutError::Disconnected)
        } else {
            rx.recv_timeout(REAP_POLL)
        };
        match message {
            Ok(Message::Run(job)) => {
                // A panicking job must not end the thread (its children would get PDEATHSIG).
                if let Err(payload) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)) {
                    tracing::error!(
                        "panic while spawning an app process: {}",
                        super::containment::panic_message(&*payload)
                    );
                }
            }
            Ok(Message::Reap(pid)) => exiting.push(pid),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                reap_within(&mut exiting, REAP_BOUND);
                return;
            }
        }
        exiting.retain(|&pid| !reaped(pid));
    }
}

/// Whether `pid` (a guardian we forked) has exited and is reaped now.
fn reaped(pid: libc::pid_t) -> bool {
    let mut status = 0;
    // SAFETY: waitpid on a pid we forked; WNOHANG never blocks.
    unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) != 0 }
}

/// Reaps `pids` as they exit, for at most `bound`.
fn reap_within(pids: &mut Vec<libc::pid_t>, bound: Duration) {
    let until = Instant::now() + bound;
    loop {
        pids.retain(|&pid| !reaped(pid));
        if pids.is_empty() || Instant::now() >= until {
            return;
        }
        std::thread::sleep(REAP_POLL / 10);
    }
}
