//! How many times the module parses JSON on the message path: a debug counter (issue 40).
//!
//! On this side of the boundary a request's `params` are parsed once (`export/forward.rs`) and
//! the app's answer once, where it comes off the wire to be routed by its id
//! (`upstream/short_way/http.rs`, `upstream/short_way/stdio.rs`). Every parse on that path goes through
//! [`parsed`] or [`count`]; the host reads the totals with `invoke("diag.parse_counts")` and
//! reports them in `/metrics` beside its own, so a test can check the budget: at most one parse
//! per direction on each side of the boundary. The cost is one relaxed atomic add per parse.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::de::DeserializeOwned;
use serde::Deserialize;

/// Which way the parsed text travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// A client's request, on its way to an app.
    Request,
    /// An app's answer, on its way to the client.
    Answer,
}

static REQUEST: AtomicU64 = AtomicU64::new(0);
static ANSWER: AtomicU64 = AtomicU64::new(0);

/// Counts one parse of text travelling `direction`.
pub fn count(direction: Direction) {
    match direction {
        Direction::Request => &REQUEST,
        Direction::Answer => &ANSWER,
    }
    .fetch_add(1, Ordering::Relaxed);
}

/// Parses `text`, counted.
pub fn parsed<T: DeserializeOwned>(direction: Direction, text: &str) -> Result<T, serde_json::Error> {
    count(direction);
    serde_json::from_str(text)
}

/// [`parsed`] of bytes.
pub fn parsed_slice<T: DeserializeOwned>(direction: Direction, bytes: &[u8]) -> Result<T, serde_json::Error> {
    count(direction);
    serde_json::from_slice(bytes)
}

/// [`parsed`] into a type that borrows from `text`.
pub fn parsed_borrowed<'a, T: Deserialize<'a>>(direction: Direction, text: &'a str) -> Result<T, serde_json::Error> {
    count(direction);
    serde_json::from_str(text)
}

/// The totals so far: (request, answer).
pub fn totals() -> (u64, u64) {
    (REQUEST.load(Ordering::Relaxed), ANSWER.load(Ordering::Relaxed))
}
