// One app UI rendered inline in the conversation, through the official MCP Apps host bridge
// (`AppBridge` of @modelcontextprotocol/ext-apps) whose MCP client talks to the app's
// gateway-managed session at `/apps/mcp/{appId}?sessionId={chat session}` — the session the
// agent's tool calls use too (R32).
//
// Security (MCP Apps spec, web hosts): the UI runs in the sandbox proxy on the gateway's
// sandbox origin (a different origin from this page), which puts it in an inner frame with an
// opaque origin; messages are accepted only from that frame's window *and* origin, and sent
// only to that origin. The CSP is the gateway's HTTP header, built from the resource's
// `_meta.ui.csp`; `_meta.ui.permissions` become the frames' `allow`.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import {
  AppBridge,
  PostMessageTransport,
  getToolUiResourceUri,
  isToolVisibilityModelOnly,
} from "@modelcontextprotocol/ext-apps/app-bridge";
import { allowAttribute } from "./permissions.js";

const HOST_INFO = { name: "gateway-host-page", version: "1.0.0" };
const TEARDOWN_WAIT_MS = 2000;
const MAX_HEIGHT = 4000;

/** MCP clients of `/apps/mcp/{appId}`, one per app and chat session. */
const clients = new Map();

function clientKey(appId, sessionId) {
  return `${appId}\n${sessionId}`;
}

function appClient(appId, sessionId) {
  const key = clientKey(appId, sessionId);
  let client = clients.get(key);
  if (!client) {
    client = (async () => {
      const url = new URL(`/apps/mcp/${encodeURIComponent(appId)}`, location.href);
      url.searchParams.set("sessionId", sessionId);
      const client = new Client(HOST_INFO, { capabilities: {} });
      await client.connect(new StreamableHTTPClientTransport(url));
      return client;
    })();
    clients.set(key, client);
    client.catch(() => clients.delete(key));
  }
  return client;
}

/** Ends the MCP clients of a chat session that is no longer shown. */
export async function closeClients(sessionId) {
  for (const [key, client] of clients) {
    if (key.endsWith(`\n${sessionId}`)) {
      clients.delete(key);
      client.then((c) => c.close()).catch(() => {});
    }
  }
}

/**
 * The official postMessage transport, plus the origin checks it leaves to the host, and a
 * witness of the app's own `tools/call`s (request and the answer the bridge sends back), so the
 * page can tell the agent what the user did in the app.
 */
class SandboxTransport extends PostMessageTransport {
  constructor(frameWindow, origin, onToolCall) {
    super(frameWindow, frameWindow);
    const accept = this.messageListener;
    this.calls = new Map();
    this.messageListener = (event) => {
      if (event.origin !== origin) return;
      const message = event.data;
      if (message?.method === "tools/call" && message.id !== undefined) this.calls.set(message.id, message.params ?? {});
      accept(event);
    };
    this.sandboxOrigin = origin;
    this.onToolCall = onToolCall;
  }

  async send(message) {
    const params = message.method === undefined ? this.calls.get(message.id) : undefined;
    if (params) {
      this.calls.delete(message.id);
      if (message.result) this.onToolCall(params, message.result);
    }
    this.eventTarget.postMessage(message, this.sandboxOrigin);
  }
}

function decodeBlob(blob) {
  const bytes = Uint8Array.from(atob(blob), (c) => c.charCodeAt(0));
  return new TextDecoder().decode(bytes);
}

function theme() {
  return matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
}

/** The tool's input schema asks for nothing: the host can call it to show the UI. */
function callableWithoutInput(tool) {
  const required = tool?.inputSchema?.required;
  return !Array.isArray(required) || required.length === 0;
}

export class AppView {
  /**
   * @param {object} o
   * @param {string} o.appId
   * @param {string} o.appName
   * @param {string} o.resourceUri
   * @param {string} o.sessionId
   * @param {string} o.sandboxOrigin
   * @param {string} [o.toolName] the app's own name of the tool whose result this shows
   * @param {object} [o.toolInput]
   * @param {object} [o.toolResult]
   * @param {boolean} [o.launch] opened by the user: call the UI's tool to give it data
   * @param {object} o.host `{onMessage(view, text), onToolCalled(view, params, result), confirmLink(view, url)}`
   */
  constructor(o) {
    Object.assign(this, o);
    this.element = document.createElement("figure");
    this.element.className = "app-view";
    this.element.dataset.appId = o.appId;
    this.element.dataset.state = "loading";
    const caption = document.createElement("figcaption");
    const title = document.createElement("span");
    title.className = "app-view-title";
    title.textContent = o.appName;
    this.statusLine = document.createElement("span");
    this.statusLine.className = "app-view-status";
    this.statusLine.textContent = "Loading…";
    const close = document.createElement("button");
    close.type = "button";
    close.className = "app-view-close";
    close.textContent = "Close";
    close.setAttribute("aria-label", `Close ${o.appName}`);
    close.addEventListener("click", () => this.close());
    caption.append(title, this.statusLine, close);
    this.element.append(caption);
    this.closed = false;
  }

  status(text, state) {
    this.statusLine.textContent = text;
    if (state) this.element.dataset.state = state;
  }

  async start() {
    try {
      await this.#start();
    } catch (error) {
      this.status(`Cannot show the app: ${error.message ?? error}`, "error");
    }
  }

  async #start() {
    const client = await appClient(this.appId, this.sessionId);
    this.client = client;
    const read = await client.readResource({ uri: this.resourceUri });
    const content = read.contents.find((c) => c.uri === this.resourceUri) ?? read.contents[0];
    if (!content) throw new Error(`the app returned no content for ${this.resourceUri}`);
    const html = typeof content.text === "string" ? content.text : decodeBlob(content.blob ?? "");
    let ui = content._meta?.ui;
    if (!ui) {
      const listed = (await client.listResources()).resources.find((r) => r.uri === this.resourceUri);
      ui = listed?._meta?.ui ?? {};
    }
    const csp = ui.csp ?? {};
    const permissions = ui.permissions ?? {};
    if (ui.prefersBorder === false) this.element.classList.add("borderless");

    const tools = (await client.listTools()).tools;
    const tool = this.toolName ? tools.find((t) => t.name === this.toolName) : undefined;
    const launchTool =
      this.launch &&
      tools.find(
        (t) => getToolUiResourceUri(t) === this.resourceUri && !isToolVisibilityModelOnly(t) && callableWithoutInput(t),
      );
    if (this.closed) return;

    const frame = document.createElement("iframe");
    frame.className = "app-frame";
    frame.title = `${this.appName} app`;
    // The spec's sandbox permissions for the proxy frame (Chromium warns that such a frame
    // could lift its own sandbox: it is cross-origin, so that reaches nothing of this page). The
    // app inside it gets neither permission's origin: see sandbox.js.
    frame.setAttribute("sandbox", "allow-scripts allow-same-origin allow-forms");
    const allow = allowAttribute(permissions);
    if (allow) frame.setAttribute("allow", allow);
    frame.setAttribute("referrerpolicy", "no-referrer");
    this.element.append(frame);
    this.frame = frame;

    const hostContext = {
      theme: theme(),
      displayMode: "inline",
      availableDisplayModes: ["inline"],
      containerDimensions: { maxHeight: MAX_HEIGHT },
      locale: navigator.language,
      timeZone: Intl.DateTimeFormat().resolvedOptions().timeZone,
      platform: "web",
      userAgent: HOST_INFO.name,
      ...(tool ? { toolInfo: { tool } } : {}),
    };
    const capabilities = {
      openLinks: {},
      serverTools: { listChanged: true },
      serverResources: { listChanged: true },
      logging: {},
      message: { text: {} },
      sandbox: { permissions, csp },
    };
    const bridge = new AppBridge(client, HOST_INFO, capabilities, { hostContext });
    this.bridge = bridge;

    bridge.onmessage = async (params) => {
      const text = (params.content ?? [])
        .filter((block) => block?.type === "text")
        .map((block) => block.text)
        .join("\n");
      if (!text.trim()) return { isError: true };
      this.host.onMessage(this, text);
      return {};
    };
    bridge.onopenlink = async ({ url }) => ((await this.host.confirmLink(this, url)) ? {} : { isError: true });
    bridge.onrequestdisplaymode = async () => ({ mode: "inline" });
    bridge.onupdatemodelcontext = async () => ({});
    bridge.addEventListener("sizechange", ({ height }) => {
      if (typeof height === "number" && height > 0) frame.style.height = `${Math.min(Math.ceil(height), MAX_HEIGHT)}px`;
    });
    bridge.addEventListener("requestteardown", () => this.close());
    bridge.addEventListener("sandboxready", () => {
      bridge.sendSandboxResourceReady({ html, csp, permissions });
    });
    bridge.addEventListener("initialized", async () => {
      this.initialized = true;
      this.status("", "ready");
      try {
        if (this.toolInput !== undefined) await bridge.sendToolInput({ arguments: this.toolInput ?? {} });
        if (this.toolResult) {
          await bridge.sendToolResult(this.toolResult);
        } else if (launchTool) {
          await bridge.sendToolInput({ arguments: {} });
          const result = await client.callTool({ name: launchTool.name, arguments: {} });
          await bridge.sendToolResult(result);
        }
      } catch (error) {
        this.status(`The app's data could not be loaded: ${error.message ?? error}`, "error");
      }
    });
    this.themeWatch = matchMedia("(prefers-color-scheme: dark)");
    this.onTheme = () => bridge.sendHostContextChange({ theme: theme() });
    this.themeWatch.addEventListener("change", this.onTheme);

    // Connecting wires the app's requests to the client: its own tool calls go to its server
    // that way (the gateway enforces visibility: model-only tools are refused); the transport
    // also reports them, for the next turn's `appEvents`.
    const onToolCall = (params, result) => this.host.onToolCalled(this, params, result);
    await bridge.connect(new SandboxTransport(frame.contentWindow, this.sandboxOrigin, onToolCall));
    const src = new URL("/sandbox", this.sandboxOrigin);
    src.searchParams.set("host", location.origin);
    src.searchParams.set("csp", JSON.stringify(csp));
    frame.src = src.href;
  }

  /** Tells the app it goes away (`ui/resource-teardown`), then removes it. */
  async close() {
    if (this.closed) return;
    this.closed = true;
    this.themeWatch?.removeEventListener("change", this.onTheme);
    if (this.bridge && this.initialized) {
      const teardown = this.bridge.teardownResource({}).catch(() => {});
      await Promise.race([teardown, new Promise((resolve) => setTimeout(resolve, TEARDOWN_WAIT_MS))]);
    }
    await this.bridge?.close().catch(() => {});
    this.element.remove();
  }
}
