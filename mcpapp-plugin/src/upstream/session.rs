//! One MCP client session to an app (SPEC R16, R19): transport setup, the handshake with protocol
//! negotiation, and the client-side handler that turns upstream notifications into module events.
//!
//! Requests go out as rmcp `ClientRequest`s but results come back as raw JSON, because the gateway
//! must pass apps' answers through intact (the browser proxy) and must judge tool schemas itself
//! (R18's strict rule) rather than have a typed parse reject a whole list for one odd tool.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use host_abi::HostSinkBox;
// Sampling and roots are deprecated by SEP-2577, but apps of every revision the gateway speaks
// still use them, and the gateway relays them faithfully.
#[allow(deprecated)]
use rmcp::model::{
    CancelledNotification, CancelledNotificationParam, ClientCapabilities, ClientRequest, ClientResult,
    CustomRequest, Implementation, InitializeRequestParams,
    ProtocolVersion, ServerNotification, ServerRequest,
};
use rmcp::service::{
    ClientLifecycleMode, ClientServiceExt as _, InboundStreamOrigin, NotificationContext, Peer, PeerRequestOptions,
    RequestContext, RoleClient, RunningService, RunningServiceCancellationToken, Service,
};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::ErrorData;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::runtime::events::EventSink;
use crate::runtime::executor::Tasks;
use crate::upstream::app_result::AppResult;
use crate::upstream::short_way::http::HttpShortWay;
use crate::upstream::short_way::http_sender::HttpSender;
use crate::upstream::error::UpstreamError;
use crate::upstream::notifier::{client_result, Notifier, UpstreamSignal};
use crate::upstream::short_way::message::{CallContext, Envelope, Relayed};
use crate::upstream::short_way::ShortWay;
use crate::upstream::short_way::stdio::{self, StdioShortWay};
use crate::upstream::ordering::{Seq, Sequenced};
use crate::upstream::process::AppProcess;
use crate::upstream::relay::{CallRelay, Relays};

/// The MCP Apps extension id and the UI MIME type (SPEC R19).
pub const UI_EXTENSION_ID: &str = "io.modelcontextprotocol/ui";
pub const UI_MIME_TYPE: &str = "text/html;profile=mcp-app";

/// UI resources can be several MB of HTML; rmcp's default JSON response cap is too small for them.
/// The one cap of an app's message, whatever its framing: a JSON body, an SSE event, a stdio line
/// (rmcp's defaults for the last two, 16 MiB, failed a 50 MiB tool result).
const MAX_JSON_RESPONSE_BYTES: usize = 64 * 1024 * 1024;

/// What a caller's request takes the short way for (`short_way`): a tool call, and a resource
/// read — an app's UI is one, hundreds of KiB of text that rmcp's way would parse into its types
/// and write out again (measured: 40 % of the gateway's CPU per read of GroceryInventory's UI).
const SHORT_WAY_METHODS: &[&str] = &["tools/call", "resources/read"];

/// The client side of the session: relays the app's requests and request-scoped notifications to
/// the client of the call they belong to (`relay.rs`), and reports the rest as module events.
pub struct UpstreamHandler {
    notifier: Notifier,
    info: InitializeRequestParams,
}

/// What the gateway declares to apps: the MCP Apps UI extension, MCP Tasks, and sampling,
/// elicitation (form and URL) and roots — it offers them on behalf of whichever client a request comes from, and
/// refuses them per request when that client cannot (SPEC R42).
fn gateway_client_capabilities() -> ClientCapabilities {
    serde_json::from_value(json!({
        "sampling": {},
        "elicitation": { "form": {}, "url": {} },
        "roots": { "listChanged": false },
        "extensions": {
            UI_EXTENSION_ID: { "mimeTypes": [UI_MIME_TYPE] },
            // Apps may run calls as tasks; the gateway drives them for its callers (app_server.rs).
            rmcp::model::TASKS_EXTENSION_ID: {},
        },
    }))
    .unwrap_or_default()
}

impl UpstreamHandler {
    pub fn new(
        app_id: &str,
        events: EventSink,
        signals: mpsc::UnboundedSender<UpstreamSignal>,
        relays: Arc<Relays>,
        protocol: ProtocolVersion,
        host_version: &str,
    ) -> Self {
        let mut client = Implementation::from_build_env();
        client.name = "openclaw-gateway".into();
        client.version = host_version.to_string();
        let info = InitializeRequestParams::new(gateway_client_capabilities(), client).with_protocol_version(protocol);
        let notifier = Notifier::new(app_id, events, signals, relays);
        UpstreamHandler { notifier, info }
    }

    pub fn notifier(&self) -> Notifier {
        self.notifier.clone()
    }
}

impl Service<RoleClient> for UpstreamHandler {
    async fn handle_request(
        &self,
        request: ServerRequest,
        context: RequestContext<RoleClient>,
    ) -> Result<ClientResult, ErrorData> {
        if let ServerRequest::PingRequest(_) = request {
            return Ok(ClientResult::empty(()));
        }
        let message = serde_json::to_value(&request).unwrap_or(Value::Null);
        let method = message.get("method").and_then(Value::as_str).unwrap_or("unknown").to_string();
        let params = message.get("params").cloned().unwrap_or_else(|| json!({}));
        let origin = match context.extensions.get::<InboundStreamOrigin>() {
            Some(InboundStreamOrigin::OutboundRequest(id)) => Some(id.clone()),
            _ => None,
        };
        let answer = self.notifier.put_question(&method, params, origin.as_ref(), &context.ct).await?;
        client_result(&method, answer)
    }

    async fn handle_notification(
        &self,
        notification: ServerNotification,
        context: NotificationContext<RoleClient>,
    ) -> Result<(), ErrorData> {
        let seq = context.extensions.get::<Seq>().copied();
        self.notifier.deliver(notification, seq).await;
        Ok(())
    }

    fn get_info(&self) -> InitializeRequestParams {
        self.info.clone()
    }
}

/// A live session to one app.
pub struct Session {
    peer: Peer<RoleClient>,
    notifier: Notifier,
    /// Ends the service; taken by the first [`Session::close`].
    cancel: parking_lot::Mutex<Option<RunningServiceCancellationToken>>,
    pub request_timeout: Duration,
    /// The short way of tool calls (`short_way.rs`).
    short_way: Option<ShortWay>,
    /// What each request of a 2026-07-28 session carries in its `_meta` (rmcp adds it to its
    /// own requests; the short way to its).
    envelope: Option<Envelope>,
}

impl Session {
    /// Whether its tool calls are best run on the host's worker: they wait only on requests the
    /// host sends (`http_sender.rs`), or they write to a stdio app's stdin themselves and are
    /// woken once, by the line answering them (`short_way/stdio.rs`).
    pub fn calls_run_on_host(&self) -> bool {
        match &self.short_way {
            Some(ShortWay::Http(relay)) => relay.runs_on_host(),
            Some(ShortWay::Stdio(_)) => true,
            None => false,
        }
    }

    /// A session rmcp opened; `short_way`, the short way of its tool calls. The session's end
    /// ([`SessionEnd`]) goes to whoever watches it: the app's supervisor.
    pub fn new(
        service: RunningService<RoleClient, UpstreamHandler>,
        request_timeout: Duration,
        short_way: Option<ShortWay>,
    ) -> (Session, SessionEnd) {
        let mut session = Session {
            peer: service.peer().clone(),
            notifier: service.service().notifier(),
            cancel: parking_lot::Mutex::new(Some(service.cancellation_token())),
            request_timeout,
            short_way,
            envelope: None,
        };
        if session.is_subscription_era() {
            // The envelope rmcp puts on its requests once the revision is negotiated: the
            // revision, and the client info and capabilities of the handler it was given.
            let info = service.service().get_info();
            let version = session.peer.peer_info().map(|p| p.protocol_version.to_string()).unwrap_or_default();
            let json = |v: Result<Value, serde_json::Error>| v.unwrap_or_else(|_| json!({}));
            session.envelope =
                Some(Envelope::new(&version, json(serde_json::to_value(&info.client_info)), json(serde_json::to_value(&info.capabilities))));
        }
        let end = SessionEnd(Some(Box::pin(async move {
            let _ = service.waiting().await;
        })));
        (session, end)
    }

    /// Where this session's notifications go (also those of its `subscriptions/listen` streams).
    pub fn notifier(&self) -> Notifier {
        self.notifier.clone()
    }

    pub fn peer(&self) -> &Peer<RoleClient> {
        &self.peer
    }

    /// The session negotiated the 2026-07-28 revision or later: the app sends list changes and
    /// resource updates only on `subscriptions/listen` streams, and has no `resources/subscribe`.
    pub fn is_subscription_era(&self) -> bool {
        self.peer.peer_info().is_some_and(|info| info.protocol_version >= ProtocolVersion::V_2026_07_28)
    }

    /// Sends one request and returns the raw JSON result, bounded by the request timeout.
    pub async fn request(&self, method: &str, params: Option<Value>) -> Result<Value, UpstreamError> {
        self.send(method, params.map(Cow::Owned), None, None, None, false).await?.into_value()
    }

    pub async fn request_with_timeout(
        &self,
        method: &str,
        params: Option<Value>,
        timeout: Option<Duration>,
    ) -> Result<Value, UpstreamError> {
        self.send(method, params.map(Cow::Owned), timeout, None, None, false).await?.into_value()
    }

    /// Sends one request for a caller: `cancel` ends it early and tells the app
    /// (`notifications/cancelled`, so the app stops working on it), and `relay` learns the
    /// upstream request id and progress token, so what the app sends for this request reaches
    /// the caller. `binds_headers`: the tool called mirrors arguments into HTTP headers
    /// (`x-mcp-header`), which rmcp's way writes. `params` are borrowed when the caller keeps
    /// them (for another round); only rmcp's way needs them owned, and copies borrowed ones.
    pub async fn send(
        &self,
        method: &str,
        params: Option<Cow<'_, Value>>,
        timeout: Option<Duration>,
        cancel: Option<&CancellationToken>,
        relay: Option<&CallRelay>,
        binds_headers: bool,
    ) -> Result<AppResult, UpstreamError> {
        let timeout = timeout.unwrap_or(self.request_timeout);
        let never = CancellationToken::new();
        if let Some(short) = self.short_way.as_ref().filter(|_| SHORT_WAY_METHODS.contains(&method)) {
            let call = CallContext {
                notifier: &self.notifier,
                relay,
                cancel: cancel.unwrap_or(&never),
                timeout,
                envelope: self.envelope.as_ref(),
                binds_headers,
            };
            if let Relayed::Done(result) = short.request(method, params.as_deref(), call).await {
                return result;
            }
        }
        // A closing session sends nothing new: the answer would reach a loop that is ending.
        if self.is_closed() {
            return Err(UpstreamError::Transport("the session is closed".to_string()));
        }
        let request = typed_request(method, params.map(Cow::into_owned));
        let options = PeerRequestOptions::with_timeout(timeout);
        let peer = &self.peer;
        let handle = peer
            .send_request_with_option(request, options)
            .await
            .map_err(|e| UpstreamError::from_service(e, timeout))?;
        if let Some(relay) = relay {
            relay.sent(handle.id.clone(), handle.progress_token.clone());
        }
        let request_id = handle.id.clone();
        let cancel = cancel.unwrap_or(&never);
        let result = tokio::select! {
            r = handle.await_response() => r.map_err(|e| UpstreamError::from_service(e, timeout))?,
            _ = cancel.cancelled() => {
                let notification = CancelledNotification::new(CancelledNotificationParam::new(
                    Some(request_id),
                    Some("cancelled by the client of the gateway".to_string()),
                ));
                if let Err(e) = peer.send_notification(notification.into()).await {
                    tracing::debug!("could not tell the app about a cancelled {method}: {e}");
                }
                return Err(UpstreamError::Cancelled);
            }
        };
        serde_json::to_value(&result).map(AppResult::Tree).map_err(|e| UpstreamError::Invalid(format!("unserializable result: {e}")))
    }

    /// All pages of a list method (`tools/list`, `resources/list`, …), as raw items. The tools as
    /// the app sent them ([`Self::request_as_sent`]).
    pub async fn list_all(&self, method: &str, key: &str) -> Result<Vec<Value>, UpstreamError> {
        let mut items = Vec::new();
        let mut cursor: Option<String> = None;
        for _page in 0..1000 {
            let params = cursor.as_ref().map(|c| json!({ "cursor": c }));
            let mut result = match method {
                "tools/list" => self.request_as_sent(method, params).await?,
                _ => self.request(method, params).await?,
            };
            if let Some(Value::Array(list)) = result.get_mut(key).map(Value::take) {
                items.extend(list);
            }
            match result.get("nextCursor").and_then(Value::as_str) {
                Some(next) if !next.is_empty() && Some(next) != cursor.as_deref() => cursor = Some(next.to_string()),
                _ => break,
            }
        }
        Ok(items)
    }

    /// [`Self::request`], with the result as the app sent it when the short way takes the request
    /// (`short_way.rs`): rmcp's types keep only the fields they know, and a 2025-11-25 tool's
    /// `execution` (whether its calls may run as tasks) is not one of them. Only on a session of
    /// an initialize-era revision: the 2026-07-28 revision has no `execution`, and rmcp's HTTP
    /// transport learns the tools' `Mcp-Param-*` headers from the lists it sees. Else, rmcp's way.
    pub async fn request_as_sent(&self, method: &str, params: Option<Value>) -> Result<Value, UpstreamError> {
        if let (Some(short), None) = (&self.short_way, &self.envelope) {
            if self.is_closed() {
                return Err(UpstreamError::Transport("the session is closed".to_string()));
            }
            let never = CancellationToken::new();
            let call = CallContext {
                notifier: &self.notifier,
                relay: None,
                cancel: &never,
                timeout: self.request_timeout,
                envelope: self.envelope.as_ref(),
                binds_headers: false,
            };
            if let Relayed::Done(result) = short.request(method, params.as_ref(), call).await {
                return result?.into_value();
            }
        }
        self.request(method, params).await
    }

    /// The server's self-description from the handshake, as JSON.
    pub fn server_info(&self) -> Value {
        self.peer.peer_info().map(|i| serde_json::to_value(&*i).unwrap_or(Value::Null)).unwrap_or(Value::Null)
    }

    pub fn has_capability(&self, name: &str) -> bool {
        self.server_info().get("capabilities").and_then(|c| c.get(name)).is_some_and(|v| !v.is_null())
    }

    /// The session ended: closed, or its transport closed (the service loop is gone).
    pub fn is_closed(&self) -> bool {
        self.cancel.lock().is_none() || self.peer.is_transport_closed()
    }

    /// Ends the session (idempotent) without waiting; [`SessionEnd::wait`] tells when it has.
    pub fn close(&self) {
        if let Some(cancel) = self.cancel.lock().take() {
            cancel.cancel();
        }
    }
}

/// The end of a session's service loop: its connection to the app is gone, or, after
/// [`Session::close`], the session has said goodbye (over Streamable HTTP, the `DELETE` that
/// lets the app forget it). Awaited by the app's supervisor, so a lost connection is noticed
/// when it happens rather than by polling; dropping it ends the session.
pub struct SessionEnd(Option<futures::future::BoxFuture<'static, ()>>);

impl SessionEnd {
    /// Resolves once the loop has ended (at once after that). Cancel-safe: a `select!` may
    /// drop it and call again.
    pub async fn wait(&mut self) {
        if let Some(waiting) = self.0.as_mut() {
            waiting.await;
            self.0 = None;
        }
    }
}

/// Builds the typed request for a method where rmcp knows it (so protocol-version rules and
/// headers apply), else a custom request carrying the method and params verbatim.
pub fn typed_request(method: &str, params: Option<Value>) -> ClientRequest {
    let mut envelope = json!({ "method": method });
    if let Some(p) = &params {
        envelope["params"] = p.clone();
    }
    match serde_json::from_value::<ClientRequest>(envelope) {
        Ok(ClientRequest::CustomRequest(_)) | Err(_) => {
            ClientRequest::CustomRequest(CustomRequest::new(method.to_string(), params))
        }
        Ok(typed) => typed,
    }
}

/// How to talk to the app: discover-first for apps that declare (`protocol_version`, the
/// manifest's) the 2026-07-28 revision or later (unless forced to legacy), else the initialize
/// handshake offering the newest initialize-era revision, which the server negotiates down.
pub fn lifecycle_for(protocol_version: &str, force_legacy: bool) -> (ClientLifecycleMode, ProtocolVersion) {
    let modern = protocol_version >= ProtocolVersion::V_2026_07_28.as_str();
    if modern && !force_legacy {
        (
            ClientLifecycleMode::Auto {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                legacy_version: Some(ProtocolVersion::LATEST_WITH_INITIALIZE),
            },
            ProtocolVersion::V_2026_07_28,
        )
    } else {
        (ClientLifecycleMode::Initialize, ProtocolVersion::LATEST_WITH_INITIALIZE)
    }
}

/// Performs the handshake over the app's stdio; the app's stdio is shared with the short way of
/// its tool calls (`short_way/stdio.rs`).
pub async fn connect_stdio(
    process: &mut AppProcess,
    handler: UpstreamHandler,
    lifecycle: ClientLifecycleMode,
    tasks: &Tasks,
) -> Result<(RunningService<RoleClient, UpstreamHandler>, StdioShortWay), UpstreamError> {
    let stdout = process.stdout.take().ok_or_else(|| UpstreamError::Connect("the process has no stdout".into()))?;
    let stdin = process.stdin.take().ok_or_else(|| UpstreamError::Connect("the process has no stdin".into()))?;
    let (stdout, stdin, short) = stdio::split(stdout, stdin, MAX_JSON_RESPONSE_BYTES, tasks);
    // The same cap as over HTTP (rmcp's stdio default, 16 MiB, silently drops a bigger frame, and
    // its caller waits for the request timeout).
    let transport =
        rmcp::transport::async_rw::AsyncRwTransport::<RoleClient, _, _>::new(stdout, stdin).with_max_line_length(MAX_JSON_RESPONSE_BYTES);
    let service = handler
        .serve_with_lifecycle(Sequenced::new(transport), lifecycle)
        .await
        .map_err(|e| UpstreamError::Connect(format!("MCP handshake over stdio failed: {}", handshake_failure(&e))))?;
    Ok((service, short))
}

/// What went wrong in a handshake, for a person: rmcp's own text for a transport failure names
/// the transport by its Rust type (`Send message error Transport [mcpapp_plugin::upstream::
/// ordering::Sequenced<…>], when send initialize request`); this says what failed and why, with
/// the underlying error's causes.
fn handshake_failure(error: &rmcp::service::ClientInitializeError) -> String {
    use rmcp::service::ClientInitializeError;
    match error {
        ClientInitializeError::TransportError { error, context } => {
            let mut text = format!("cannot {context}: {}", error.error);
            let mut source = error.error.source();
            while let Some(cause) = source {
                text.push_str(&format!(": {cause}"));
                source = cause.source();
            }
            text
        }
        other => other.to_string(),
    }
}

/// Performs the handshake over Streamable HTTP with the manifest's headers (and only those).
pub async fn connect_http(
    url: &str,
    headers: &std::collections::BTreeMap<String, String>,
    handler: UpstreamHandler,
    lifecycle: ClientLifecycleMode,
    tasks: &Tasks,
    host: Option<Arc<HostSinkBox>>,
) -> Result<(RunningService<RoleClient, UpstreamHandler>, Option<HttpShortWay>), UpstreamError> {
    let mut custom = HashMap::new();
    for (name, value) in headers {
        let name = http::HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| UpstreamError::Connect(format!("header name '{name}' is not valid")))?;
        let value = http::HeaderValue::from_str(value)
            .map_err(|_| UpstreamError::Connect(format!("header '{name}' has a value that is not valid")))?;
        custom.insert(name, value);
    }
    let config = StreamableHttpClientTransportConfig::with_uri(url.to_string())
        .custom_headers(custom)
        .max_json_response_size(MAX_JSON_RESPONSE_BYTES)
        .max_sse_event_size(MAX_JSON_RESPONSE_BYTES)
        .reinit_on_expired_session(true);
    let client = upstream_http_client()?;
    let short = HttpShortWay::new(url, HttpSender::new(client.clone(), host, tasks.clone()), MAX_JSON_RESPONSE_BYTES);
    let service = match &short {
        Some(short) => handler.serve_with_lifecycle(Sequenced::new(StreamableHttpClientTransport::with_client(short.client_for_rmcp(), config)), lifecycle).await,
        None => handler.serve_with_lifecycle(Sequenced::new(StreamableHttpClientTransport::with_client(client, config)), lifecycle).await,
    };
    let service =
        service.map_err(|e| UpstreamError::Connect(format!("MCP handshake with {url} failed: {}", handshake_failure(&e))))?;
    Ok((service, short))
}

/// The HTTP client of one app's session. rmcp's default client turns connection pooling off (to
/// dodge delayed-ACK stalls on reused connections), so every call to an http app opened a new
/// TCP connection — measured: one TIME-WAIT socket per proxied call, and connecting was a tenth
/// of the gateway's CPU on that path. Here idle connections are kept, and `TCP_NODELAY` removes
/// the stall's cause (Nagle's algorithm holding a small request behind a delayed ACK).
/// Redirects are not followed: a manifest names the app's endpoint exactly, and following one
/// would replay the app's headers elsewhere.
fn upstream_http_client() -> Result<reqwest::Client, UpstreamError> {
    reqwest::Client::builder()
        .tcp_nodelay(true)
        .pool_idle_timeout(std::time::Duration::from_secs(60))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| UpstreamError::Connect(format!("cannot build the HTTP client: {e}")))
}

/// Shared handle to a session.
pub type SharedSession = Arc<Session>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::notifier::notification_message;
    use host_abi::jsonrpc;
    use rmcp::model::{ErrorCode, GetExtensions as _, GetMeta as _};

    /// The shared vocabulary (`host_abi::jsonrpc`) and the protocol library's constants, which
    /// the module uses where it builds an rmcp `ErrorData`, name the same codes.
    #[test]
    fn shared_jsonrpc_codes_agree_with_rmcp() {
        assert_eq!(jsonrpc::PARSE_ERROR, ErrorCode::PARSE_ERROR.0);
        assert_eq!(jsonrpc::INVALID_REQUEST, ErrorCode::INVALID_REQUEST.0);
        assert_eq!(jsonrpc::METHOD_NOT_FOUND, ErrorCode::METHOD_NOT_FOUND.0);
        assert_eq!(jsonrpc::INVALID_PARAMS, ErrorCode::INVALID_PARAMS.0);
        assert_eq!(jsonrpc::INTERNAL_ERROR, ErrorCode::INTERNAL_ERROR.0);
        assert_eq!(jsonrpc::MISSING_REQUIRED_CLIENT_CAPABILITY, ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY.0);
    }

    /// The gateway's own codes are none of MCP's: a client must be able to tell an app that is
    /// down from a resource not found (-32002, which rmcp's server rewrites for 2026-07-28
    /// clients) or from any other code the protocol gives a meaning.
    #[test]
    fn the_gateways_own_codes_are_none_of_mcps() {
        let mcp = [
            ErrorCode::UNSUPPORTED_PROTOCOL_VERSION,
            ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
            ErrorCode::HEADER_MISMATCH,
            ErrorCode::RESOURCE_NOT_FOUND,
            ErrorCode::INVALID_REQUEST,
            ErrorCode::METHOD_NOT_FOUND,
            ErrorCode::INVALID_PARAMS,
            ErrorCode::INTERNAL_ERROR,
            ErrorCode::PARSE_ERROR,
        ];
        // -32042: URL elicitation required (MCP 2025-11-25), not among rmcp's constants.
        for own in [jsonrpc::APP_UNAVAILABLE, jsonrpc::UPSTREAM_FAILED] {
            assert!(mcp.iter().all(|code| code.0 != own) && own != -32042, "{own}");
            assert!((-32099..=-32000).contains(&own), "{own}: the server-error range");
        }
    }

    /// A notification as rmcp's client receives it off the wire, numbered by `Sequenced`.
    fn received(message: Value, seq: u64) -> ServerNotification {
        let mut notification: ServerNotification = serde_json::from_value(message).unwrap();
        notification.extensions_mut().insert(Seq(seq));
        notification
    }

    #[test]
    fn a_listen_streams_notification_is_forwarded_without_the_gateways_subscription_id() {
        let cases = [
            json!({ "jsonrpc": "2.0", "method": "notifications/tools/list_changed",
                    "params": { "_meta": { "io.modelcontextprotocol/subscriptionId": 3 } } }),
            json!({ "jsonrpc": "2.0", "method": "notifications/resources/updated",
                    "params": { "uri": "test://readme", "_meta": { "io.modelcontextprotocol/subscriptionId": "s-1" } } }),
        ];
        for (n, message) in cases.into_iter().enumerate() {
            let notification = received(message.clone(), 7 + n as u64);
            assert!(notification.get_meta().subscription_id().is_some(), "{message}");
            let (notification, seq) = Notifier::detach(notification);
            assert_eq!(seq, Some(Seq(7 + n as u64)));
            let forwarded = notification_message(&notification);
            assert!(!forwarded.to_string().contains("subscriptionId"), "{forwarded}");
            assert_eq!(forwarded["method"], message["method"]);
            assert_eq!(forwarded["jsonrpc"], "2.0");
            if let Some(uri) = message.pointer("/params/uri") {
                assert_eq!(forwarded["params"]["uri"], *uri);
            }
        }
    }
}
