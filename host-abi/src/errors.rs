//! Errors crossing the boundary, and the result and future types every fallible call returns.

use abi_stable::{std_types::RString, StableAbi};

use crate::RResult;

/// The result of every fallible call across the boundary.
pub type AbiResult<T> = RResult<T, AbiError>;

/// A future that crosses the boundary. The module resolves it from its own runtime; the host may
/// poll it from any executor.
pub type AbiFuture<T> = async_ffi::FfiFuture<AbiResult<T>>;

/// An error crossing the boundary: a machine-readable code and a message for people.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct AbiError {
    /// One of [`error_code`].
    pub code: RString,
    pub message: RString,
}

impl AbiError {
    pub fn new(code: &str, message: impl Into<String>) -> Self {
        AbiError {
            code: code.into(),
            message: RString::from(message.into()),
        }
    }
}

impl std::fmt::Display for AbiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

impl std::error::Error for AbiError {}

/// Codes of [`AbiError`]. New codes may appear; treat unknown ones like `internal`.
pub mod error_code {
    pub const NOT_FOUND: &str = "not_found";
    pub const NOT_RUNNING: &str = "not_running";
    pub const INVALID_ARGUMENT: &str = "invalid_argument";
    pub const INVALID_CONFIG: &str = "invalid_config";
    pub const TIMEOUT: &str = "timeout";
    pub const CANCELLED: &str = "cancelled";
    pub const UPSTREAM: &str = "upstream";
    pub const NOT_IMPLEMENTED: &str = "not_implemented";
    pub const PANIC: &str = "panic";
    pub const SHUT_DOWN: &str = "shut_down";
    pub const INTERNAL: &str = "internal";
}
