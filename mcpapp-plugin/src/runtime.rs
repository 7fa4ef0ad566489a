//! The module's own tokio runtime and the one way work crosses back to the host: [`ModuleRuntime::spawn_call`].
//!
//! Each dynamic library carries its own copy of tokio's thread-locals, so a module future polled on
//! a host thread that touched tokio would panic with "no reactor running". Every call therefore
//! runs as a task on this runtime and the host gets an [`AbiFuture`] that only waits on a
//! runtime-agnostic `futures` oneshot channel.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_ffi::FutureExt as _;
use futures::FutureExt as _;
use host_abi::{error_code, AbiError, AbiFuture, RResult};
use parking_lot::Mutex;
use tokio::runtime::{Handle, Runtime};

use crate::containment::panic_message;

pub struct ModuleRuntime {
    handle: Handle,
    runtime: Mutex<Option<Runtime>>,
    shut_down: AtomicBool,
}

impl ModuleRuntime {
    /// Two worker threads are plenty: the work is I/O-bound, and threads do not grow with calls.
    pub fn new(worker_threads: usize) -> std::io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(worker_threads.max(1))
            .thread_name("mcpapp-module")
            .enable_all()
            .build()?;
        Ok(ModuleRuntime {
            handle: runtime.handle().clone(),
            runtime: Mutex::new(Some(runtime)),
            shut_down: AtomicBool::new(false),
        })
    }

    pub fn handle(&self) -> &Handle {
        &self.handle
    }

    /// Spawns a background task whose panic is caught and logged instead of killing the process.
    pub fn spawn_task<F>(&self, what: &'static str, fut: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        if self.shut_down.load(Ordering::Acquire) {
            return;
        }
        self.handle.spawn(async move {
            if let Err(payload) = AssertUnwindSafe(fut).catch_unwind().await {
                tracing::error!(task = what, "panic in module task while {what}: {}", panic_message(&*payload));
            }
        });
    }

    /// Runs `fut` on the module runtime and returns a future the host can poll from anywhere.
    /// A panic in `fut` becomes an [`error_code::PANIC`] error (and a log line).
    pub fn spawn_call<T, F>(&self, what: &'static str, fut: F) -> AbiFuture<T>
    where
        T: Send + 'static,
        F: Future<Output = Result<T, AbiError>> + Send + 'static,
    {
        if self.shut_down.load(Ordering::Acquire) {
            return ready_err(AbiError::new(error_code::SHUT_DOWN, format!("the module is shut down (while {what})")));
        }
        let (tx, rx) = futures::channel::oneshot::channel::<RResult<T, AbiError>>();
        self.handle.spawn(async move {
            let outcome = match AssertUnwindSafe(fut).catch_unwind().await {
                Ok(result) => result.into(),
                Err(payload) => {
                    let msg = panic_message(&*payload);
                    tracing::error!(call = what, "panic in module while {what}: {msg}");
                    RResult::RErr(AbiError::new(error_code::PANIC, format!("panic in module while {what}: {msg}")))
                }
            };
            let _ = tx.send(outcome);
        });
        async move {
            rx.await.unwrap_or_else(|_| {
                RResult::RErr(AbiError::new(error_code::INTERNAL, format!("the module dropped the call while {what}")))
            })
        }
        .into_ffi()
    }

    /// Stops accepting work and shuts the runtime down, giving tasks `grace` to finish.
    /// Must not be called from a thread of this runtime.
    pub fn shutdown(&self, grace: Duration) {
        self.shut_down.store(true, Ordering::Release);
        if let Some(rt) = self.runtime.lock().take() {
            rt.shutdown_timeout(grace);
        }
    }

    pub fn is_shut_down(&self) -> bool {
        self.shut_down.load(Ordering::Acquire)
    }
}

/// An already-failed [`AbiFuture`], for refusing a call without touching the runtime.
pub fn ready_err<T: Send + 'static>(err: AbiError) -> AbiFuture<T> {
    futures::future::ready(RResult::RErr(err)).into_ffi()
}
