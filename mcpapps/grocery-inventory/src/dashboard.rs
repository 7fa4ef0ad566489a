//! The dashboard UI resource: a single HTML file built from `ui/` (see `ui/package.json`) and
//! embedded at compile time, so building and running the server needs no Node.js.

use serde_json::{json, Value};

/// Where hosts fetch the dashboard (`resources/read`), as named in the tools' `_meta.ui.resourceUri`.
pub const DASHBOARD_URI: &str = "ui://grocery/store-dashboard.html";

/// The MCP Apps MIME type: HTML meant to run inside a host's sandboxed iframe.
pub const DASHBOARD_MIME: &str = "text/html;profile=mcp-app";

/// The built dashboard (`npm run build` in `ui/` writes it; a test checks it is not stale).
pub const DASHBOARD_HTML: &str = include_str!("../ui/dist/store-dashboard.html");

/// `_meta.ui` of the dashboard resource. Everything (script, styles) is inlined and the page
/// talks only to its host through `postMessage`, so it asks for no network origin at all; the
/// empty lists say so explicitly rather than leaving it to each host's default.
pub fn resource_ui_meta() -> Value {
    json!({
        "csp": {
            "connectDomains": [],
            "resourceDomains": [],
            "frameDomains": [],
            "baseUriDomains": []
        },
        "prefersBorder": true
    })
}
