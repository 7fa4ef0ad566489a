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
    /// What went wrong, for programs: read it with [`AbiError::code`].
    pub code: ErrorCode_NE,
    pub message: RString,
}

impl AbiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        AbiError { code: ErrorCode_NE::new(code), message: RString::from(message.into()) }
    }

    /// The code; one this side does not know (sent by a newer side) reads as
    /// [`ErrorCode::Internal`]. Its name is still in the error's `Display`.
    pub fn code(&self) -> ErrorCode {
        self.code.as_enum().map_or(ErrorCode::Internal, |code| *code)
    }
}

impl std::fmt::Display for AbiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // `self.code` displays through the vtable of the side that made it: a code newer than
        // this side still shows its own name.
        write!(f, "{} ({})", self.message, self.code)
    }
}

impl std::error::Error for AbiError {}

/// The code of an [`AbiError`].
///
/// Codes will grow, so this crosses the boundary as abi_stable's `NonExhaustive`
/// ([`ErrorCode_NE`]): a minor version may append variants (at the end, with the next
/// discriminant), and a side that receives one it does not know reads it as `Internal`
/// ([`AbiError::code`]) instead of failing the layout check or reading an invalid enum.
#[repr(u8)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[sabi(kind(WithNonExhaustive(size = [u8; 8], align = 1, traits(Debug, Display, Clone, PartialEq, Eq))))]
#[non_exhaustive]
pub enum ErrorCode {
    NotFound = 0,
    NotRunning = 1,
    InvalidArgument = 2,
    InvalidConfig = 3,
    Timeout = 4,
    Cancelled = 5,
    Upstream = 6,
    NotImplemented = 7,
    Panic = 8,
    ShutDown = 9,
    Internal = 10,
}

impl ErrorCode {
    /// The code's name where it is written out (logs, the admin API's `error` field).
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorCode::NotFound => "not_found",
            ErrorCode::NotRunning => "not_running",
            ErrorCode::InvalidArgument => "invalid_argument",
            ErrorCode::InvalidConfig => "invalid_config",
            ErrorCode::Timeout => "timeout",
            ErrorCode::Cancelled => "cancelled",
            ErrorCode::Upstream => "upstream",
            ErrorCode::NotImplemented => "not_implemented",
            ErrorCode::Panic => "panic",
            ErrorCode::ShutDown => "shut_down",
            ErrorCode::Internal => "internal",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
