//! The module as the gateway sees it: [`loader`] finds and loads the library (refusing an
//! incompatible one), [`host`] is the typed face the routes call (with the live swap), [`relay`]
//! routes a relayed call's events to the one call waiting, [`listed`] says when a view the host
//! keeps of the module (tools, `/mcp`'s apps) must list it again, [`app_http`] sends the module's
//! requests to HTTP apps on the host's runtime (`HostSink::http_post`), and [`payloads`] reads
//! the module's large payloads in one tolerant pass.

pub mod app_http;
pub mod host;
pub mod listed;
pub mod loader;
pub mod payloads;
pub mod relay;
