//! The gateway as PID 1 (a container's entry point, `unshare --pid --fork`): a minimal init
//! forked in front of it, so that the orphans its apps leave behind are reaped.
//!
//! # Why an init
//!
//! PID 1 of a PID namespace inherits every orphan in it: a process whose parent exits is
//! reparented to it, and its exit status waits there, a zombie holding a pid, until PID 1 waits
//! for it. Apps leave orphans all the time (a shell's `cmd &`, a double-forked helper). The gateway
//! itself must not wait for processes it did not start: the module waits for its own children by
//! pid (tokio's process driver for the app processes, the spawner thread for their guardians: see
//! `mcpapp-plugin/src/upstream/process.rs`), and a `waitpid(-1)` anywhere in the same process
//! would take those exit statuses away from them: an app's crash would go unnoticed, a guardian
//! would never be reaped. Reaping only the pids that are not the module's children would need the
//! module to report every pid it forks across the ABI, and would still race the kernel's
//! reparenting. So the reaping happens in another process, the one that is PID 1.
//!
//! # What it does
//!
//! When the process starts as PID 1 it forks before anything of it runs (whatever the command: a
//! one-shot command is as well served, and not one line of the command runs twice):
//! - the parent stays PID 1 and is the init (`supervise`): it reaps every child that exits,
//!   forwards the `FORWARDED` signals to the gateway, and when the gateway ends exits as it did
//!   (`exit_code`); the kernel then kills whatever is left in the namespace;
//! - the child is the gateway, unchanged: it goes on to `main` and runs the command. The apps are
//!   its children as they would be anyway, so their `PR_SET_PDEATHSIG` and their guardians stand
//!   for the gateway process exactly as without the init.
//!
//! This is what tini and dumb-init do; built in, an image needs neither, and `docker run` without
//! `--init` does not pile up zombies.
//!
//! # Before `main`
//!
//! The fork runs from the executable's `.init_array` (`main.rs`), before Rust's runtime starts,
//! not from `main`: the runtime allocates before `main` runs, and jemalloc's first allocation
//! starts its background thread (`memory.rs`). A fork after that would copy a process of two
//! threads, and jemalloc turns its background thread off in a forked child: the gateway would
//! lose the purging that gives memory back after a burst. Before the runtime, the process has one
//! thread and nothing initialized; the init then never allocates (libc calls only), and the
//! gateway starts its runtime, its allocator and its threads as any process does. A failed fork is
//! only recorded there ([`fork_error`]) and reported by `main` once logging is set up.
//!
//! # Signals
//!
//! The signals the init handles are blocked before the fork and taken with `sigwaitinfo`: none is
//! lost between the fork and the init's loop, and the kernel queues them (PID 1 of a namespace
//! never receives a signal it has no handler for, but blocked ones are kept for it). The child
//! unblocks them again, and moves to its own process group: a terminal's Ctrl-C reaches the
//! foreground group, the init's, and so arrives at the gateway once, forwarded, not twice — a
//! second stop signal would cut its graceful shutdown short (`serve.rs`).

use std::io;
use std::sync::atomic::{AtomicI32, Ordering};

/// The signals the init passes on to the gateway: the stop signals (the graceful shutdown of
/// `serve.rs`), `SIGHUP` (the module swap) and the rest an operator sends a service on purpose.
/// An init that kept them would make the gateway deaf to `docker stop` and `kill -HUP 1`.
const FORWARDED: [libc::c_int; 6] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT, libc::SIGUSR1, libc::SIGUSR2];

/// The process name of the init (`ps`, `/proc/PID/comm`), so that the two processes of a
/// containerized gateway are told apart.
const INIT_NAME: &std::ffi::CStr = c"gateway-init";

/// The errno of a failed fork of the init, 0 when there was none (or no init was needed).
static FORK_ERROR: AtomicI32 = AtomicI32::new(0);

/// Puts an init in front of the gateway when this process is PID 1; returns in the process that
/// is to run the gateway (this one when it is not PID 1 or the fork fails, else the child). For
/// the executable's `.init_array` (see "Before `main`"): libc calls only, no allocation.
pub extern "C" fn run_as_init_if_pid_1() {
    // SAFETY: getpid is a plain syscall.
    if unsafe { libc::getpid() } != 1 {
        return;
    }
    if let Err(e) = fork_init() {
        FORK_ERROR.store(e.raw_os_error().unwrap_or(libc::EINVAL), Ordering::Relaxed);
    }
}

/// Why the gateway runs as PID 1 without an init, if it does: orphans of apps are not reaped then.
pub fn fork_error() -> Option<io::Error> {
    match FORK_ERROR.load(Ordering::Relaxed) {
        0 => None,
        errno => Some(io::Error::from_raw_os_error(errno)),
    }
}

/// Forks the init. Returns in the child, the gateway; the parent never returns.
fn fork_init() -> io::Result<()> {
    let handled = SignalSet::of(FORWARDED.iter().copied().chain([libc::SIGCHLD]))?;
    let previous = handled.block()?;
    // SAFETY: the process has one thread and nothing initialized yet ("Before `main`"), so the
    // child is a full copy of it and may go on to run any code.
    match unsafe { libc::fork() } {
        -1 => {
            let error = io::Error::last_os_error();
            previous.restore();
            Err(error)
        }
        0 => {
            previous.restore();
            // SAFETY: setpgid on ourselves; see the module docs for why.
            unsafe { libc::setpgid(0, 0) };
            Ok(())
        }
        gateway => supervise(gateway, &handled),
    }
}

/// The init's loop: reap on `SIGCHLD`, forward the rest, exit with the gateway.
fn supervise(gateway: libc::pid_t, handled: &SignalSet) -> ! {
    // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes.
    unsafe { libc::prctl(libc::PR_SET_NAME, INIT_NAME.as_ptr() as libc::c_ulong, 0, 0, 0) };
    loop {
        match handled.wait() {
            Some(libc::SIGCHLD) => {
                if let Some(status) = reap_children(gateway) {
                    // Nothing of the gateway's to flush here: it ran in the child.
                    // SAFETY: _exit ends the process.
                    unsafe { libc::_exit(exit_code(status)) }
                }
            }
            Some(signal) => {
                // SAFETY: kill on our own child; if it has just exited (a zombie), a no-op.
                unsafe { libc::kill(gateway, signal) };
            }
            None => {}
        }
    }
}

/// Waits for every child that has exited, orphans and the gateway alike; returns the gateway's
/// wait status if it was among them. Several exits may share one `SIGCHLD`, hence the loop.
fn reap_children(gateway: libc::pid_t) -> Option<libc::c_int> {
    let mut gateway_status = None;
    loop {
        let mut status = 0;
        // SAFETY: waitpid with WNOHANG never blocks; every child of the init is its to reap.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        // 0: children left, none exited; -1: no child left at all.
        if pid <= 0 {
            return gateway_status;
        }
        if pid == gateway {
            gateway_status = Some(status);
        }
    }
}

/// The init's exit code for the gateway's wait status: the gateway's exit code, or 128 + the
/// signal that ended it, as a shell reports it (PID 1 cannot die of a signal it sends itself,
/// so the signal itself cannot be passed on).
fn exit_code(status: libc::c_int) -> libc::c_int {
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else if libc::WIFSIGNALED(status) {
        128 + libc::WTERMSIG(status)
    } else {
        1
    }
}

/// A set of signals, and the calls on it the init needs.
struct SignalSet(libc::sigset_t);

/// The signal mask before [`SignalSet::block`], to put back.
struct PreviousMask(libc::sigset_t);

impl SignalSet {
    fn of(signals: impl IntoIterator<Item = libc::c_int>) -> io::Result<SignalSet> {
        // SAFETY: sigemptyset/sigaddset initialize and fill the set they are given.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for signal in signals {
                if libc::sigaddset(&mut set, signal) != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            Ok(SignalSet(set))
        }
    }

    /// Blocks the set's signals (pending ones are kept for [`wait`](Self::wait)).
    fn block(&self) -> io::Result<PreviousMask> {
        // SAFETY: both sets are valid; the process has one thread.
        unsafe {
            let mut previous: libc::sigset_t = std::mem::zeroed();
            match libc::pthread_sigmask(libc::SIG_BLOCK, &self.0, &mut previous) {
                0 => Ok(PreviousMask(previous)),
                errno => Err(io::Error::from_raw_os_error(errno)),
            }
        }
    }

    /// The next of the set's signals; `None` when the wait was interrupted.
    fn wait(&self) -> Option<libc::c_int> {
        // SAFETY: a valid set and siginfo buffer.
        let signal = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            libc::sigwaitinfo(&self.0, &mut info)
        };
        (signal > 0).then_some(signal)
    }
}

impl PreviousMask {
    fn restore(self) {
        // SAFETY: a mask pthread_sigmask returned.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.0, std::ptr::null_mut()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A wait status as the kernel writes it: exit code in the second byte, signal in the first.
    fn exited(code: libc::c_int) -> libc::c_int {
        code << 8
    }

    #[test]
    fn the_init_exits_with_the_gateways_exit_code() {
        assert_eq!(exit_code(exited(0)), 0);
        assert_eq!(exit_code(exited(1)), 1);
        assert_eq!(exit_code(exited(2)), 2);
    }

    #[test]
    fn a_gateway_killed_by_a_signal_is_128_plus_the_signal() {
        assert_eq!(exit_code(libc::SIGKILL), 128 + 9);
        assert_eq!(exit_code(libc::SIGTERM), 128 + 15);
        // The core-dump flag does not change the signal.
        assert_eq!(exit_code(libc::SIGQUIT | 0x80), 128 + 3);
    }

    /// The statuses above are what waitpid really reports, for a child that exits and one that
    /// is killed.
    #[test]
    fn exit_codes_of_real_children() {
        let status_of = |mut cmd: std::process::Command| {
            use std::os::unix::process::ExitStatusExt as _;
            cmd.status().expect("running sh").into_raw()
        };
        let mut exits = std::process::Command::new("sh");
        exits.args(["-c", "exit 3"]);
        assert_eq!(exit_code(status_of(exits)), 3);
        let mut killed = std::process::Command::new("sh");
        killed.args(["-c", "kill -TERM $$"]);
        assert_eq!(exit_code(status_of(killed)), 128 + libc::SIGTERM);
    }
}
