//! Panic containment at the boundary (SPEC R4).
//!
//! abi_stable turns a panic escaping an `extern "C"` function into `process::exit(1)`, which the
//! host cannot catch. Every exported function runs its body through [`contain`]; every task starts
//! through [`crate::runtime::executor::Tasks::spawn`], which catches its own panics.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};

use host_abi::{ErrorCode, AbiError};

/// Runs `body`, turning a panic into `on_panic(error)` after logging it.
pub fn contain<T>(what: &str, body: impl FnOnce() -> T, on_panic: impl FnOnce(AbiError) -> T) -> T {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(value) => value,
        Err(payload) => {
            let msg = panic_message(&*payload);
            tracing::error!("panic in module while {what}: {msg}");
            on_panic(AbiError::new(ErrorCode::Panic, format!("panic in module while {what}: {msg}")))
        }
    }
}

/// Routes the module's panic messages (with their location) through `tracing`, and so to the host's
/// log, instead of std's default hook printing to stderr. The module library has its own copy of
/// std and therefore its own hook: this does not touch the host's.
pub fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let location = info.location().map(|l| format!("{}:{}", l.file(), l.line())).unwrap_or_default();
        tracing::error!(target: "mcpapp_plugin::panic", "panic at {location}: {}", panic_message(info.payload()));
    }));
}

/// The text of a panic payload (`&str` or `String`), or a placeholder.
pub fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_string()
    }
}
