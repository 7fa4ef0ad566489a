//! The short way of a tool call (issue 15), and of a resource read (an app's UI is one: hundreds
//! of KiB of text): the request's JSON goes to the app, and the app's answer
//! comes back as JSON, without rmcp's client in between — its service loop is a task a call hops
//! through, and every message is parsed into rmcp's types and written out again (measured: more
//! than a third of the gateway's CPU per proxied call). rmcp still opens the session, answers the
//! app's questions and takes everything else; the short way speaks on that same session, so that
//! callers cannot tell the ways apart.
//!
//! One way per transport: [`HttpShortWay`] posts on the session's pooled connection,
//! [`StdioShortWay`] writes the line to the app's stdin and takes the answer off its stdout before
//! rmcp reads it. Their requests have string ids (`gw-1`, …), so they never meet rmcp's numbers
//! on the same session.
//!
//! A session of the 2026-07-28 revision has no handshake state: each request carries it, in an
//! [`Envelope`] in its `_meta` (the revision, the gateway's client info and capabilities) and, over
//! HTTP, in headers. The short way puts in the same envelope rmcp would, over the caller's
//! `_meta`; [`HttpShortWay`] sends the headers rmcp sends and leaves to rmcp the calls of a tool
//! whose schema mirrors arguments into headers (`x-mcp-header`, SEP-2243).
//!
//! An initialize-era app's `tools/list` pages take the same way when the catalog is enumerated
//! ([`ShortWay::request`], `Session::request_as_sent`): rmcp's `Tool` keeps only the fields it
//! knows, and a 2025-11-25 tool's `execution` (its `taskSupport`, which decides whether the
//! gateway runs its calls as tasks) is not one of them.

use serde_json::Value;

use self::http::HttpShortWay;
use self::message::{CallContext, Relayed};
use self::stdio::StdioShortWay;

pub mod http;
pub mod http_sender;
pub mod message;
pub mod stdio;

/// The short way of one session.
pub enum ShortWay {
    Http(HttpShortWay),
    Stdio(StdioShortWay),
}

impl ShortWay {
    /// Sends one request of `method` (`tools/call`, `resources/read`, or a list the app's answer
    /// is wanted as it sent it: `tools/list`), or gives it back for rmcp's way.
    pub async fn request(&self, method: &str, params: Option<&Value>, call: CallContext<'_>) -> Relayed {
        match self {
            ShortWay::Http(http) => http.request(method, params, call).await,
            ShortWay::Stdio(stdio) => stdio.request(method, params, call).await,
        }
    }
}

