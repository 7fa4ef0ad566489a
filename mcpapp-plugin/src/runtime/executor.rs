//! The module's own tokio runtime and the only ways work starts on it.
//!
//! Each dynamic library carries its own copy of tokio's thread-locals, so a module future polled on
//! a host thread that touched tokio would panic with "no reactor running". A call therefore either
//! enters this runtime's context on every poll, run by the host's own worker
//! ([`Tasks::run_inline`], for work that never blocks a thread), or runs as a task on this
//! runtime while the host's [`AbiFuture`] only waits on a runtime-agnostic `futures` oneshot
//! channel ([`Tasks::spawn_call`], for work that blocks).
//!
//! Ownership: the [`ModuleRuntime`] (the tokio `Runtime` itself) belongs to the module instance
//! alone. Tasks only ever hold a [`Tasks`] (a handle plus the shut-down flag), so the last
//! reference to the runtime is never dropped on one of its own threads (tokio panics there), and
//! shutting down is the instance's decision ([`ModuleRuntime::shut_down_on_own_thread`]).
//!
//! Every module task starts through [`Tasks::spawn`], the one place that calls tokio's spawn:
//! it catches the task's panic (a panic must never reach the host) and refuses work once the
//! module is shut down. `clippy.toml` forbids the bare spawns elsewhere, and
//! `tests/spawn_discipline.rs` checks the sources for them under `cargo test`.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_ffi::FutureExt as _;
use futures::FutureExt as _;
use host_abi::{ErrorCode, AbiError, AbiFuture, RResult};
use parking_lot::{Mutex, RwLock};
use tokio::runtime::{Handle, Runtime};
use tokio_util::sync::CancellationToken;

use crate::runtime::containment::panic_message;

/// How long tasks still running get to finish once the runtime shuts down.
pub const TASK_GRACE: Duration = Duration::from_secs(2);

/// The module's tokio runtime, owned by the module instance (see the module docs).
pub struct ModuleRuntime {
    runtime: Mutex<Option<Runtime>>,
    tasks: Tasks,
}

/// Why the runtime could not be shut down as asked.
#[derive(Debug, thiserror::Error)]
pub enum ShutdownError {
    #[error("the module's runtime is already shut down")]
    AlreadyShutDown,
    /// The dedicated thread could not be started; the runtime was shut down in the background
    /// instead, without the last work (apps may be killed rather than stopped).
    #[error("cannot start the module's shutdown thread: {0}")]
    NoThread(std::io::Error),
}

/// The module's share of the machine: half its cores, at least one. The work is I/O-bound and
/// threads do not grow with calls; what costs is handing a call between threads. Measured on
/// 2 cores (`bench proxy`, issue 15): one worker instead of two takes a proxied call from ~425 to
/// ~315 µs of gateway CPU and raises throughput ~15 %, since every idle worker that a call's next
/// task wakes is a sleep and a wake-up in the kernel. Blocking work (discovery, validation) runs
/// under `block_in_place`, which hands the worker's place to another thread meanwhile.
pub fn default_workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get() / 2).max(1)
}

impl ModuleRuntime {
    pub fn new(worker_threads: usize) -> std::io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(worker_threads.max(1))
            .thread_name("mcpapp-module")
            .enable_all()
            .build()?;
        let tasks = Tasks::new(runtime.handle().clone());
        Ok(ModuleRuntime { runtime: Mutex::new(Some(runtime)), tasks })
    }

    /// What tasks hold instead of the runtime.
    pub fn tasks(&self) -> &Tasks {
        &self.tasks
    }

    /// Stops accepting work at once, then, on a thread of its own (`mcpapp-shutdown`), runs
    /// `last_work` (e.g. stopping the apps; it may `block_on` the runtime it is given and must
    /// bound itself) and shuts the runtime down, giving tasks [`TASK_GRACE`]; what `last_work`
    /// returned is dropped after that. The receiver fires when all of it is done.
    ///
    /// Never blocks the caller: it may be a host async worker (the `shutdown` export, or a drop
    /// of the instance), and a runtime can only be shut down from a thread that is not its own.
    pub fn shut_down_on_own_thread<F, K>(&self, last_work: F) -> Result<futures::channel::oneshot::Receiver<()>, ShutdownError>
    where
        F: FnOnce(&Runtime) -> K + Send + 'static,
    {
        let runtime = self.runtime.lock().take().ok_or(ShutdownError::AlreadyShutDown)?;
        self.tasks.shut_down.store(true, Ordering::Release);
        let tasks = self.tasks.clone();
        // The runtime reaches the thread through a channel, so that if the thread cannot start,
        // it is still here to be shut down without blocking.
        let (handover, receive) = std::sync::mpsc::channel::<(Runtime, F)>();
        let (done, finished) = futures::channel::oneshot::channel();
        let started = std::thread::Builder::new().name("mcpapp-shutdown".into()).spawn(move || {
            let Ok((runtime, last_work)) = receive.recv() else { return };
            let kept = match std::panic::catch_unwind(AssertUnwindSafe(|| last_work(&runtime))) {
                Ok(kept) => Some(kept),
                Err(payload) => {
                    tracing::error!("panic while shutting the module down: {}", panic_message(&*payload));
                    None
                }
            };
            tasks.end_inline_polls();
            runtime.shutdown_timeout(TASK_GRACE);
            drop(kept);
            let _ = done.send(());
        });
        match started {
            Ok(_) => {
                let _ = handover.send((runtime, last_work));
                Ok(finished)
            }
            Err(e) => {
                self.tasks.end_inline_polls();
                runtime.shutdown_background();
                Err(ShutdownError::NoThread(e))
            }
        }
    }
}

/// Starts module tasks on the module's runtime; cheap to clone. Holding one does not keep the
/// runtime alive: after shutdown it refuses work.
#[derive(Clone)]
pub struct Tasks {
    handle: Handle,
    shut_down: Arc<AtomicBool>,
    /// Whether the runtime's drivers are stopping or stopped: `true` from just before
    /// `shutdown_timeout`. Each poll of an inline call reads it under the shared lock and holds
    /// that over the poll; the shutdown thread takes it exclusively to set it, so it waits for
    /// the polls under way and none starts after (see [`Inline`]'s `poll`).
    runtime_ended: Arc<RwLock<bool>>,
}

impl Tasks {
    /// A spawner for `handle`'s runtime (the module's; tests may bring their own runtime).
    pub fn new(handle: Handle) -> Tasks {
        Tasks { handle, shut_down: Arc::new(AtomicBool::new(false)), runtime_ended: Arc::new(RwLock::new(false)) }
    }

    /// From now on inline calls are answered [`ErrorCode::ShutDown`] instead of being polled:
    /// once the runtime's drivers stop, a timer or socket polled in its context panics ("A Tokio
    /// 1.x context was found, but it is being shutdown"). Returns after the polls under way end.
    fn end_inline_polls(&self) {
        *self.runtime_ended.write() = true;
    }

    /// The runtime's handle, for entering its context (never for spawning: use [`Self::spawn`]).
    pub fn handle(&self) -> &Handle {
        &self.handle
    }

    pub fn is_shut_down(&self) -> bool {
        self.shut_down.load(Ordering::Acquire)
    }

    /// The one way module code starts a task. A panic in `fut` is caught and logged instead of
    /// killing the process (or, worse, dying silently and leaving its duty undone: a task whose
    /// panic needs handling, like an app's supervisor, catches it itself first). Returns false,
    /// dropping `fut` unpolled, once the module is shut down.
    pub fn spawn<F>(&self, what: &'static str, fut: F) -> bool
    where
        F: Future<Output = ()> + Send + 'static,
    {
        if self.is_shut_down() {
            tracing::debug!(task = what, "not starting '{what}': the module is shut down");
            return false;
        }
        #[allow(clippy::disallowed_methods)] // the helper itself
        self.handle.spawn(async move {
            if let Err(payload) = AssertUnwindSafe(fut).catch_unwind().await {
                tracing::error!(task = what, "panic in module task while {what}: {}", panic_message(&*payload));
            }
        });
        true
    }

    /// Runs `fut` on the module runtime and returns a future the host can poll from anywhere.
    /// A panic in `fut` becomes an [`ErrorCode::Panic`] error (and a log line).
    ///
    /// `cancel` is the call's token (`fut` watches it): dropping the returned future before the
    /// result arrived cancels it, so a host that stops waiting stops the work, whatever else it
    /// does. This is the only place [`AbiFuture`]s of module work are made, so every call gets it.
    pub fn spawn_call<T, F>(&self, what: &'static str, cancel: CancellationToken, fut: F) -> AbiFuture<T>
    where
        T: Send + 'static,
        F: Future<Output = Result<T, AbiError>> + Send + 'static,
    {
        if self.is_shut_down() {
            return ready_err(AbiError::new(ErrorCode::ShutDown, format!("the module is shut down (while {what})")));
        }
        let (tx, rx) = futures::channel::oneshot::channel::<RResult<T, AbiError>>();
        self.spawn(what, async move {
            let outcome = match AssertUnwindSafe(fut).catch_unwind().await {
                Ok(result) => result.into(),
                Err(payload) => {
                    let msg = panic_message(&*payload);
                    tracing::error!(call = what, "panic in module while {what}: {msg}");
                    RResult::RErr(AbiError::new(ErrorCode::Panic, format!("panic in module while {what}: {msg}")))
                }
            };
            let _ = tx.send(outcome);
        });
        let mut guard = CancelOnDrop(Some(cancel));
        async move {
            let result = rx.await.unwrap_or_else(|_| {
                RResult::RErr(AbiError::new(ErrorCode::Internal, format!("the module dropped the call while {what}")))
            });
            guard.disarm();
            result
        }
        .into_ffi()
    }
}

/// Where a call's work runs (see [`Tasks::run_call`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Polled by whoever polls the call's future (a host worker), with this module's runtime
    /// entered. For calls the module answers itself, without blocking a thread or waiting on an
    /// app (the listings, `diag.echo`, a client's answer): what costs in such a call is handing
    /// it between threads, and this hands it over not at all (`bench boundary`: 8.6 → 0.6 µs
    /// over the same work in-process).
    Inline,
    /// A task of its own on the module runtime, the host's future only waiting for its result.
    /// For work that blocks (`block_in_place`: discovery, validation, a reload's scan), which
    /// must run on one of the runtime's own workers, and for calls that wait on rmcp's client
    /// tasks (which run there), so running them there too hands the call over no more often.
    /// A tool call to a stdio or HTTP app is not one of them: the short way writes its request
    /// itself (`upstream/short_way/stdio.rs`) or the host sends it, so inline it skips the module
    /// thread on the way to the app (stdio, `ab -c 1`: 2.6 → 1.2 module-thread context switches
    /// per call, ~20 % more calls per second).
    Spawned,
}

impl Tasks {
    /// Runs a call's work where `placement` says; see [`Self::spawn_call`] and [`Self::run_inline`].
    pub fn run_call<T, F>(&self, placement: Placement, what: &'static str, cancel: CancellationToken, fut: F) -> AbiFuture<T>
    where
        T: Send + 'static,
        F: Future<Output = Result<T, AbiError>> + Send + 'static,
    {
        match placement {
            Placement::Inline => self.run_inline(what, cancel, fut),
            Placement::Spawned => self.spawn_call(what, cancel, fut),
        }
    }

    /// Returns `fut` as a future the host polls itself: every poll enters this module's runtime
    /// (its tokio copy's context, so timers, sockets and spawns inside reach the module's
    /// reactor, which the runtime's workers keep driving) and catches a panic, which becomes an
    /// [`ErrorCode::Panic`] error. The same contract as [`Self::spawn_call`] otherwise:
    /// dropping it before its result cancels `cancel`, and the rest of the work then finishes
    /// as a task of its own (so a cancelled call still tells its app, as it would as a task).
    /// `fut` must not block the thread: it runs on a host worker.
    pub fn run_inline<T, F>(&self, what: &'static str, cancel: CancellationToken, fut: F) -> AbiFuture<T>
    where
        T: Send + 'static,
        F: Future<Output = Result<T, AbiError>> + Send + 'static,
    {
        if self.is_shut_down() {
            return ready_err(AbiError::new(ErrorCode::ShutDown, format!("the module is shut down (while {what})")));
        }
        Inline { what, tasks: self.clone(), cancel: Some(cancel), work: Some(Box::pin(fut)) }.into_ffi()
    }
}

type Work<T> = std::pin::Pin<Box<dyn Future<Output = Result<T, AbiError>> + Send>>;

/// A call run by its poller ([`Tasks::run_inline`]).
struct Inline<T: Send + 'static> {
    what: &'static str,
    tasks: Tasks,
    /// Armed until the work has finished: dropped before, the call is cancelled.
    cancel: Option<CancellationToken>,
    work: Option<Work<T>>,
}

impl<T: Send + 'static> Future for Inline<T> {
    type Output = RResult<T, AbiError>;

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Self::Output> {
        use std::task::Poll;
        let this = &mut *self;
        let what = this.what;
        let Some(work) = this.work.as_mut() else {
            return Poll::Ready(RResult::RErr(AbiError::new(ErrorCode::Internal, format!("polled again after it ended (while {what})"))));
        };
        // Held over the poll: the runtime cannot stop under it (see `Tasks::runtime_ended`).
        // Recursive: a poll inside a poll must not wait behind the shutdown thread's writer.
        let runtime_ended = this.tasks.runtime_ended.read_recursive();
        let _context = this.tasks.handle.enter();
        if *runtime_ended {
            end_work(&mut this.work, &mut this.cancel);
            return Poll::Ready(RResult::RErr(AbiError::new(
                ErrorCode::ShutDown,
                format!("the module shut down while {what} was in flight"),
            )));
        }
        let outcome = match std::panic::catch_unwind(AssertUnwindSafe(|| work.as_mut().poll(cx))) {
            Ok(Poll::Pending) => return Poll::Pending,
            Ok(Poll::Ready(result)) => result.into(),
            Err(payload) => {
                let msg = panic_message(&*payload);
                tracing::error!(call = what, "panic in module while {what}: {msg}");
                RResult::RErr(AbiError::new(ErrorCode::Panic, format!("panic in module while {what}: {msg}")))
            }
        };
        end_work(&mut this.work, &mut this.cancel);
        Poll::Ready(outcome)
    }
}

/// Drops an inline call's work, which has ended (or will never be polled again), and disarms its
/// cancel. Called with the module runtime's context entered: the work's tokio objects deregister
/// from the module's drivers, not the host's.
fn end_work<T>(work: &mut Option<Work<T>>, cancel: &mut Option<CancellationToken>) {
    // A panicked future may panic again as it is dropped: that must not cross the boundary.
    let finished = work.take();
    let _ = std::panic::catch_unwind(AssertUnwindSafe(move || drop(finished)));
    *cancel = None;
}

impl<T: Send + 'static> Drop for Inline<T> {
    /// Runs on the host's thread, inside the module library: nothing may unwind out of it.
    fn drop(&mut self) {
        let Some(work) = self.work.take() else { return };
        let (what, tasks, cancel) = (self.what, self.tasks.clone(), self.cancel.take());
        let handed_over = std::panic::catch_unwind(AssertUnwindSafe(move || {
            if let Some(token) = cancel {
                token.cancel();
            }
            let _context = tasks.handle.enter();
            // Refused once the module is shut down: the work is then dropped here, in context.
            tasks.spawn(what, async move {
                let _ = work.await;
            });
        }));
        if handed_over.is_err() {
            tracing::error!(call = what, "panic while handing a cancelled call ({what}) to the module runtime");
        }
    }
}

/// Cancels a call's token when the host drops the call's future before its result arrived.
///
/// The drop runs on a host thread, outside the module runtime's context (tokio's thread-locals
/// there are the host's copy, not ours): `CancellationToken::cancel` is plain synchronisation
/// plus waking the watching task through its waker, which is safe from any thread.
struct CancelOnDrop(Option<CancellationToken>);

impl CancelOnDrop {
    fn disarm(&mut self) {
        self.0 = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(token) = self.0.take() {
            token.cancel();
        }
    }
}

/// An already-failed [`AbiFuture`], for refusing a call without touching the runtime.
pub fn ready_err<T: Send + 'static>(err: AbiError) -> AbiFuture<T> {
    futures::future::ready(RResult::RErr(err)).into_ffi()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> ModuleRuntime {
        ModuleRuntime::new(1).unwrap()
    }

    fn end(rt: ModuleRuntime) {
        futures::executor::block_on(rt.shut_down_on_own_thread(|_| {}).unwrap()).unwrap();
    }

    /// Polls `fut` once on this (non-runtime) thread, like a host would, and returns it pending.
    fn poll_once<T>(fut: &mut AbiFuture<T>) -> bool {
        let waker = futures::task::noop_waker();
        let mut cx = std::task::Context::from_waker(&waker);
        std::pin::Pin::new(fut).poll(&mut cx).is_ready()
    }

    fn wait_for(token: &CancellationToken) -> bool {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !token.is_cancelled() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        token.is_cancelled()
    }

    #[test]
    fn dropping_the_future_cancels_the_call() {
        let rt = runtime();
        let cancel = CancellationToken::new();
        let (seen_tx, seen) = std::sync::mpsc::channel();
        let watched = cancel.clone();
        let mut fut = rt.tasks().spawn_call("waiting", cancel.clone(), async move {
            watched.cancelled().await;
            let _ = seen_tx.send(());
            Ok(())
        });
        assert!(!poll_once(&mut fut));
        drop(fut);
        assert!(wait_for(&cancel), "dropping the future must cancel the call's token");
        seen.recv_timeout(Duration::from_secs(10)).expect("the task saw the cancellation");
        end(rt);
    }

    #[test]
    fn a_finished_call_is_not_cancelled_by_its_drop() {
        let rt = runtime();
        let cancel = CancellationToken::new();
        let fut = rt.tasks().spawn_call("answering", cancel.clone(), async { Ok(7u32) });
        assert_eq!(futures::executor::block_on(fut).unwrap(), 7);
        assert!(!cancel.is_cancelled());
        end(rt);
    }

    #[test]
    fn a_panicking_call_becomes_a_panic_error() {
        let rt = runtime();
        let fut = rt.tasks().spawn_call::<(), _>("exploding", CancellationToken::new(), async { panic!("boom") });
        let err = futures::executor::block_on(fut).unwrap_err();
        assert_eq!(err.code(), ErrorCode::Panic);
        assert!(err.message.as_str().contains("boom"), "{}", err.message);
        end(rt);
    }

    /// An inline call polled on a thread that knows nothing of tokio (like a host's worker,
    /// whose tokio is another copy) still reaches the module's timers and sockets.
    #[test]
    fn an_inline_call_uses_the_module_runtime_from_any_thread() {
        let rt = runtime();
        let fut = rt.tasks().run_inline("sleeping", CancellationToken::new(), async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(|e| AbiError::new(ErrorCode::Internal, e.to_string()))?;
            Ok(listener.local_addr().map(|a| a.port()).unwrap_or(0))
        });
        assert!(futures::executor::block_on(fut).unwrap() > 0);
        end(rt);
    }

    #[test]
    fn an_inline_panic_becomes_a_panic_error() {
        let rt = runtime();
        let fut = rt.tasks().run_inline::<(), _>("exploding", CancellationToken::new(), async { panic!("boom") });
        let err = futures::executor::block_on(fut).unwrap_err();
        assert_eq!(err.code(), ErrorCode::Panic);
        assert!(err.message.as_str().contains("while exploding: boom"), "{}", err.message);
        end(rt);
    }

    /// Dropped before its end, an inline call is cancelled and what is left of it (its cancel
    /// path: telling the app) still runs, as a task.
    #[test]
    fn a_dropped_inline_call_is_cancelled_and_finishes_as_a_task() {
        let rt = runtime();
        let cancel = CancellationToken::new();
        let (seen_tx, seen) = std::sync::mpsc::channel();
        let watched = cancel.clone();
        let mut fut = rt.tasks().run_inline("waiting", cancel.clone(), async move {
            watched.cancelled().await;
            tokio::time::sleep(Duration::from_millis(5)).await;
            let _ = seen_tx.send(std::thread::current().name().map(str::to_string));
            Ok(())
        });
        assert!(!poll_once(&mut fut));
        drop(fut);
        assert!(cancel.is_cancelled());
        let thread = seen.recv_timeout(Duration::from_secs(10)).expect("the rest of the call ran");
        assert_eq!(thread.as_deref(), Some("mcpapp-module"), "on the module's runtime");
        end(rt);
    }

    /// An inline call still pending when the module shuts down (the host cut it off too late,
    /// or a swap drained past its bound) is answered "shut down" when next polled: polling its
    /// timer in the context of the stopped runtime would panic ("A Tokio 1.x context was found,
    /// but it is being shutdown"), which came back to the host as a panic error.
    #[test]
    fn an_inline_call_polled_after_the_runtime_ended_is_shut_down_not_a_panic() {
        let rt = runtime();
        let mut fut = rt.tasks().run_inline("forward", CancellationToken::new(), async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok(())
        });
        assert!(!poll_once(&mut fut), "the timer is armed");
        end(rt);
        let err = futures::executor::block_on(fut).unwrap_err();
        assert_eq!(err.code(), ErrorCode::ShutDown, "{}", err.message);
        assert_eq!(err.message.as_str(), "the module shut down while forward was in flight");
    }

    #[test]
    fn a_finished_inline_call_is_not_cancelled_by_its_drop() {
        let rt = runtime();
        let cancel = CancellationToken::new();
        let fut = rt.tasks().run_inline("answering", cancel.clone(), async { Ok(7u32) });
        assert_eq!(futures::executor::block_on(fut).unwrap(), 7);
        assert!(!cancel.is_cancelled());
        end(rt);
    }

    #[test]
    fn shutdown_runs_the_last_work_ends_tasks_and_refuses_new_ones() {
        let rt = runtime();
        let tasks = rt.tasks().clone();
        // A task that never ends holds a sender: its drop (the runtime ending) is seen.
        let (held, ended) = std::sync::mpsc::channel::<()>();
        assert!(tasks.spawn("idling", async move {
            let _held = held;
            std::future::pending::<()>().await;
        }));
        let (ran_tx, ran) = std::sync::mpsc::channel();
        let done = rt
            .shut_down_on_own_thread(move |runtime| {
                let on_runtime = runtime.block_on(async { tokio::runtime::Handle::try_current().is_ok() });
                let _ = ran_tx.send(on_runtime);
            })
            .unwrap();
        assert!(tasks.is_shut_down(), "work is refused from the moment shutdown begins");
        futures::executor::block_on(done).unwrap();
        assert_eq!(ran.recv_timeout(Duration::from_secs(1)), Ok(true), "the last work ran on the runtime");
        assert_eq!(ended.recv_timeout(Duration::from_secs(10)), Err(std::sync::mpsc::RecvTimeoutError::Disconnected));
        assert!(!tasks.spawn("too late", async {}));
        let late = futures::executor::block_on(tasks.spawn_call("too late", CancellationToken::new(), async { Ok(()) }));
        assert_eq!(late.unwrap_err().code(), ErrorCode::ShutDown);
        let late = futures::executor::block_on(tasks.run_inline("too late", CancellationToken::new(), async { Ok(()) }));
        assert_eq!(late.unwrap_err().code(), ErrorCode::ShutDown);
        assert!(matches!(rt.shut_down_on_own_thread(|_| {}), Err(ShutdownError::AlreadyShutDown)));
    }
}
