//! The host's side of the boundary: the sink the module logs and reports events into, and the
//! HTTP requests it has the host send.

use abi_stable::{
    sabi_trait,
    std_types::{RBox, ROption, RStr, RString, RVec, Tuple2},
    StableAbi,
};

use crate::{ErrorCode, AbiError, AbiFuture, LogLevel, LogRecord, ModuleEvent, RResult};

/// The host's log and event sink as a trait object owned by the module.
pub type HostSinkBox = HostSink_TO<'static, RBox<()>>;

/// Implemented by the host, called by the module from any of its threads. Must not block.
#[sabi_trait]
pub trait HostSink: Send + Sync {
    /// Whether the host would record an event of this level and target (lets the module skip
    /// formatting what would be dropped).
    fn log_enabled(&self, level: LogLevel, target: RStr<'_>) -> bool;

    fn log(&self, record: LogRecord);

    #[sabi(last_prefix_field)]
    fn event(&self, event: ModuleEvent);

    /// Since ABI 1.1, optional ([`capability::HOST_SINK_HTTP_POST`](crate::capability::HOST_SINK_HTTP_POST)): sends `post` on the host's own runtime and
    /// answers with the response's head and its body as it arrives. Why: a module's sockets are
    /// driven by the module's runtime, so each exchange with an HTTP app would otherwise hand a
    /// call from a host thread to a module thread and back (measured: thread wake-ups were most
    /// of the gateway's CPU per proxied call). The host's future and body may be polled on any
    /// thread. The default body (a host without it) answers `not_implemented`.
    fn http_post(&self, post: HttpPost) -> AbiFuture<HttpAnswer> {
        let _ = post;
        async_ffi::FfiFuture::new(async {
            RResult::RErr(AbiError::new(ErrorCode::NotImplemented, "this host has no HostSink::http_post"))
        })
    }
    // Minor versions append methods here, each with a default body (run when the host's vtable
    // lacks the method), called only when the host lists it in `ModuleConfigExtra::capabilities`.
}

/// An HTTP POST the module has the host send ([`HostSink::http_post`]).
#[repr(C)]
#[derive(StableAbi, Debug, Clone)]
pub struct HttpPost {
    pub url: RString,
    /// Names and values, sent as they are (a value need not be UTF-8).
    pub headers: RVec<Tuple2<RString, RVec<u8>>>,
    pub body: RVec<u8>,
    /// The most an answer's body may hold; a JSON answer that is larger fails the post.
    pub max_body_bytes: u64,
}

/// The head of the answer to an [`HttpPost`], and its body.
#[repr(C)]
#[derive(StableAbi)]
pub struct HttpAnswer {
    pub status: u16,
    /// The answer's `Content-Type`, empty when it has none.
    pub content_type: RString,
    pub body: HttpAnswerBody,
}

/// The body of an [`HttpAnswer`]: a JSON answer whole — read by the host to its end, so it
/// crosses the boundary once — or any other (an event stream) to read as it arrives.
#[repr(u8)]
#[derive(StableAbi)]
pub enum HttpAnswerBody {
    Whole(RVec<u8>),
    Stream(HttpBodyBox),
}

/// The body of an [`HttpAnswer`], read in order by one reader. Dropping it before its end lets
/// the host finish reading it, so that the connection can serve the next request.
#[sabi_trait]
pub trait HttpBody: Send + Sync {
    /// The next chunk; `RNone` at the end of the body.
    #[sabi(last_prefix_field)]
    fn next_chunk(&self) -> AbiFuture<ROption<RVec<u8>>>;
}

/// An [`HttpBody`] as a trait object owned by the module.
pub type HttpBodyBox = HttpBody_TO<'static, RBox<()>>;
