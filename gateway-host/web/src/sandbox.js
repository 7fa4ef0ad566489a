// The sandbox proxy of the MCP Apps spec, served by the gateway's sandbox listener (a different
// origin from the host page). The host page embeds this page; this page embeds the app's HTML
// in an inner iframe and relays JSON-RPC messages both ways:
// - from the parent only when it comes from the host origin named in `?host=` (anything else is
//   dropped), and to the parent only addressed to that origin;
// - the inner frame is sandboxed without `allow-same-origin`: the app runs in an opaque origin,
//   so it can reach neither this page, the host page, nor any cookie;
// - the app's Content-Security-Policy is this page's, sent by the gateway as an HTTP header from
//   the resource's `_meta.ui.csp`; an `srcdoc` frame inherits it.
// `ui/notifications/sandbox-*` messages are between the host and this proxy and are never
// relayed; this page sends no request of its own (spec: the sandbox must not make up ids).
import { allowAttribute } from "./permissions.js";

const READY = "ui/notifications/sandbox-proxy-ready";
const RESOURCE_READY = "ui/notifications/sandbox-resource-ready";
const INNER_SANDBOX = "allow-scripts allow-forms";

const hostOrigin = new URLSearchParams(location.search).get("host");
let inner = null;

function isSandboxMessage(message) {
  return typeof message?.method === "string" && message.method.startsWith("ui/notifications/sandbox-");
}

function load(params) {
  if (inner || typeof params?.html !== "string") return;
  inner = document.createElement("iframe");
  inner.setAttribute("sandbox", INNER_SANDBOX);
  const allow = allowAttribute(params.permissions);
  if (allow) inner.setAttribute("allow", allow);
  inner.setAttribute("title", "App");
  inner.srcdoc = params.html;
  document.body.appendChild(inner);
}

window.addEventListener("message", (event) => {
  const message = event.data;
  if (event.source === window.parent) {
    if (event.origin !== hostOrigin) return;
    if (message?.method === RESOURCE_READY) {
      load(message.params);
    } else if (!isSandboxMessage(message)) {
      // The inner frame's origin is opaque: "*" is the only target that reaches it, and only
      // its window is addressed.
      inner?.contentWindow?.postMessage(message, "*");
    }
  } else if (inner && event.source === inner.contentWindow) {
    if (!isSandboxMessage(message)) window.parent.postMessage(message, hostOrigin);
  }
});

if (hostOrigin && window.parent !== window) {
  window.parent.postMessage({ jsonrpc: "2.0", method: READY, params: {} }, hostOrigin);
} else {
  document.body.textContent = "This page is the gateway's app sandbox; it only works inside the gateway's host page.";
}
