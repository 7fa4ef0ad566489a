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
/** The display modes of the MCP Apps spec this page offers. */
const DISPLAY_MODES = ["inline", "fullscreen", "pip"];
/** Height of an inline frame before the app reports its own (capped like any other). */
const INITIAL_HEIGHT = 320;
/** At or below this width the page is laid out for a phone (host.css uses the same width). */
const PHONE_WIDTH = 760;

/** An inline app grows to its content up to 80 % of the viewport, then scrolls inside. */
function inlineCap() {
  return Math.round(innerHeight * 0.8);
}

/** A picture-in-picture app floats over at most 40 % of the viewport. */
function pipCap() {
  return Math.round(innerHeight * 0.4);
}

/** The app view shown full screen and the one in picture-in-picture: one of each at a time. */
let fullscreenView = null;
let pipView = null;
let viewCount = 0;

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

/** The page's theme: the user's choice (`<html data-theme>`), else the system's preference. */
function pageTheme() {
  const chosen = document.documentElement.dataset.theme;
  if (chosen === "light" || chosen === "dark") return chosen;
  return matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
}

/**
 * The spec's standard style variables (McpUiStyleVariableKey), from the page's own CSS custom
 * properties as they are now (so for the current theme): apps that use them match the page.
 */
function hostStyles() {
  const css = getComputedStyle(document.documentElement);
  const read = (name, fallback) => css.getPropertyValue(name).trim() || fallback;
  const bg = read("--bg", "Canvas");
  const panel = read("--panel", "Canvas");
  const text = read("--text", "CanvasText");
  const muted = read("--muted", text);
  const border = read("--border", muted);
  const accent = read("--accent", "LinkText");
  const danger = read("--danger", "#b42318");
  const ok = read("--ok", "#1a7f37");
  const warn = read("--warn", "#9a6700");
  const info = read("--user", accent);
  const mix = (color, percent, base = panel) => `color-mix(in srgb, ${color} ${percent}%, ${base})`;
  const radius = Number.parseFloat(read("--radius", "8px")) || 8;
  const px = (n) => `${Math.round(n)}px`;
  const variables = {
    "--color-background-primary": panel,
    "--color-background-secondary": bg,
    "--color-background-tertiary": mix(text, 6, bg),
    "--color-background-inverse": text,
    "--color-background-ghost": "transparent",
    "--color-background-info": info,
    "--color-background-danger": mix(danger, 12),
    "--color-background-success": mix(ok, 12),
    "--color-background-warning": mix(warn, 14),
    "--color-background-disabled": mix(muted, 15),
    "--color-text-primary": text,
    "--color-text-secondary": muted,
    "--color-text-tertiary": mix(muted, 80),
    "--color-text-inverse": panel,
    "--color-text-ghost": muted,
    "--color-text-info": accent,
    "--color-text-danger": danger,
    "--color-text-success": ok,
    "--color-text-warning": warn,
    "--color-text-disabled": mix(muted, 65),
    "--color-border-primary": border,
    "--color-border-secondary": mix(border, 70),
    "--color-border-tertiary": mix(border, 45),
    "--color-border-inverse": text,
    "--color-border-ghost": "transparent",
    "--color-border-info": accent,
    "--color-border-danger": danger,
    "--color-border-success": ok,
    "--color-border-warning": warn,
    "--color-border-disabled": mix(border, 60),
    "--color-ring-primary": accent,
    "--color-ring-secondary": muted,
    "--color-ring-inverse": panel,
    "--color-ring-info": accent,
    "--color-ring-danger": danger,
    "--color-ring-success": ok,
    "--color-ring-warning": warn,
    "--font-sans": read("--font", "system-ui, sans-serif"),
    "--font-mono": read("--mono", "ui-monospace, monospace"),
    "--font-weight-normal": "400",
    "--font-weight-medium": "500",
    "--font-weight-semibold": "600",
    "--font-weight-bold": "700",
    "--font-text-xs-size": "12px",
    "--font-text-sm-size": "13px",
    "--font-text-md-size": "15px",
    "--font-text-lg-size": "17px",
    "--font-heading-xs-size": "13px",
    "--font-heading-sm-size": "15px",
    "--font-heading-md-size": "17px",
    "--font-heading-lg-size": "20px",
    "--font-heading-xl-size": "24px",
    "--font-heading-2xl-size": "30px",
    "--font-heading-3xl-size": "36px",
    "--font-text-xs-line-height": "1.4",
    "--font-text-sm-line-height": "1.45",
    "--font-text-md-line-height": "1.45",
    "--font-text-lg-line-height": "1.5",
    "--font-heading-xs-line-height": "1.35",
    "--font-heading-sm-line-height": "1.35",
    "--font-heading-md-line-height": "1.3",
    "--font-heading-lg-line-height": "1.3",
    "--font-heading-xl-line-height": "1.25",
    "--font-heading-2xl-line-height": "1.2",
    "--font-heading-3xl-line-height": "1.15",
    "--border-radius-xs": px(radius / 2),
    "--border-radius-sm": px(radius * 0.75),
    "--border-radius-md": px(radius),
    "--border-radius-lg": px(radius * 1.5),
    "--border-radius-xl": px(radius * 2),
    "--border-radius-full": "9999px",
    "--border-width-regular": "1px",
    "--shadow-hairline": `0 0 0 1px ${border}`,
    "--shadow-sm": "0 1px 2px rgb(0 0 0 / 0.1)",
    "--shadow-md": "0 4px 12px rgb(0 0 0 / 0.14)",
    "--shadow-lg": "0 12px 32px rgb(0 0 0 / 0.2)",
  };
  return { variables };
}

function isPhone() {
  return matchMedia("(pointer: coarse)").matches || innerWidth <= PHONE_WIDTH;
}

function deviceCapabilities() {
  return {
    touch: navigator.maxTouchPoints > 0 || matchMedia("(pointer: coarse)").matches,
    hover: matchMedia("(hover: hover)").matches,
  };
}

/** Caption icons (drawn, so that no font is needed): 16×16 strokes in the text colour. */
const ICONS = {
  fullscreen: "M2 6V2h4M10 2h4v4M14 10v4h-4M6 14H2v-4",
  pip: "M1.5 3h13v10h-13zM8 8.5h5v3.5H8z",
  inline: "M6 4 2 8l4 4M2.5 8H10a4 4 0 0 1 4 4",
  close: "M3.5 3.5l9 9M12.5 3.5l-9 9",
};

function icon(name) {
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("viewBox", "0 0 16 16");
  svg.setAttribute("width", "16");
  svg.setAttribute("height", "16");
  svg.setAttribute("aria-hidden", "true");
  svg.setAttribute("focusable", "false");
  svg.setAttribute("class", "app-view-icon");
  const path = document.createElementNS("http://www.w3.org/2000/svg", "path");
  path.setAttribute("d", ICONS[name]);
  path.setAttribute("fill", "none");
  path.setAttribute("stroke", "currentColor");
  path.setAttribute("stroke-width", "1.6");
  path.setAttribute("stroke-linecap", "round");
  path.setAttribute("stroke-linejoin", "round");
  svg.append(path);
  return svg;
}

/**
 * A caption button: an icon, a label (hidden where space is short: phone width,
 * picture-in-picture) and, for screen readers, the app's name.
 */
function captionButton(name, label, appName, onClick) {
  const button = document.createElement("button");
  button.type = "button";
  button.className = `app-view-button app-view-${name}`;
  button.title = label;
  const text = document.createElement("span");
  text.className = "app-view-label";
  text.textContent = label;
  button.append(icon(name), text);
  if (appName) {
    const named = document.createElement("span");
    named.className = "visually-hidden";
    named.textContent = ` ${appName}`;
    button.append(named);
  }
  button.addEventListener("click", onClick);
  return button;
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
    this.displayMode = "inline";
    /** The app's last reported content height (`ui/notifications/size-changed`). */
    this.contentHeight = undefined;
    this.element = document.createElement("figure");
    this.element.className = "app-view";
    this.element.dataset.appId = o.appId;
    this.element.dataset.state = "loading";
    this.element.dataset.displayMode = "inline";
    this.element.tabIndex = -1;
    const caption = document.createElement("figcaption");
    const title = document.createElement("span");
    title.className = "app-view-title";
    title.id = `app-view-title-${++viewCount}`;
    this.element.setAttribute("aria-labelledby", title.id);
    title.textContent = o.appName;
    this.statusLine = document.createElement("span");
    this.statusLine.className = "app-view-status";
    this.statusLine.textContent = "Loading…";
    const actions = document.createElement("span");
    actions.className = "app-view-actions";
    this.buttons = {
      fullscreen: captionButton("fullscreen", "Full screen", o.appName, () => this.setDisplayMode("fullscreen", { user: true })),
      pip: captionButton("pip", "Picture in picture", o.appName, () => this.setDisplayMode("pip", { user: true })),
      inline: captionButton("inline", "Back to chat", "", () => this.setDisplayMode("inline", { user: true })),
      close: captionButton("close", "Close", o.appName, () => this.close()),
    };
    actions.append(this.buttons.inline, this.buttons.fullscreen, this.buttons.pip, this.buttons.close);
    caption.append(title, this.statusLine, actions);
    this.element.append(caption);
    this.closed = false;
    this.#showButtons();
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
    this.tool = tool;
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
    this.#applySize();

    const capabilities = {
      openLinks: {},
      serverTools: { listChanged: true },
      serverResources: { listChanged: true },
      logging: {},
      message: { text: {} },
      sandbox: { permissions, csp },
    };
    const bridge = new AppBridge(client, HOST_INFO, capabilities, { hostContext: this.#hostContext() });
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
    // The spec: answer with the mode actually set (the current one when the request is refused).
    bridge.onrequestdisplaymode = async ({ mode }) => {
      this.setDisplayMode(mode);
      return { mode: this.displayMode };
    };
    bridge.onupdatemodelcontext = async () => ({});
    bridge.addEventListener("sizechange", ({ height }) => {
      if (typeof height !== "number" || !(height > 0)) return;
      this.contentHeight = Math.ceil(height);
      this.#applySize();
    });
    bridge.addEventListener("requestteardown", () => this.close());
    bridge.addEventListener("sandboxready", () => {
      bridge.sendSandboxResourceReady({ html, csp, permissions });
    });
    bridge.addEventListener("initialized", async () => {
      this.initialized = true;
      this.status("", "ready");
      // Modes the app said it cannot show are not offered (spec: the host must not switch to them).
      this.#showButtons();
      if (!this.#appAllows(this.displayMode)) this.setDisplayMode("inline");
      // What changed between the initialize answer and now (spec: nothing is sent before this).
      this.#sendContext();
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
    this.#watch();

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

  /** The host context of the spec, as it is now. */
  #hostContext() {
    return {
      theme: pageTheme(),
      styles: hostStyles(),
      displayMode: this.displayMode,
      availableDisplayModes: DISPLAY_MODES,
      containerDimensions: this.#containerDimensions(),
      locale: navigator.language,
      timeZone: Intl.DateTimeFormat().resolvedOptions().timeZone,
      platform: isPhone() ? "mobile" : "web",
      deviceCapabilities: deviceCapabilities(),
      userAgent: HOST_INFO.name,
      ...(this.tool ? { toolInfo: { tool: this.tool } } : {}),
    };
  }

  /** Inline and pip: the app's width is the container's, its height its own up to a cap; full screen: fixed. */
  #containerDimensions() {
    const width = Math.round((this.frame ?? this.element).getBoundingClientRect().width) || undefined;
    if (this.displayMode === "fullscreen" && this.frame) {
      const rect = this.frame.getBoundingClientRect();
      return { width: Math.round(rect.width), height: Math.round(rect.height) };
    }
    const maxHeight = this.displayMode === "pip" ? pipCap() : inlineCap();
    return width ? { width, maxHeight } : { maxHeight };
  }

  /**
   * Sends what changed in the host context (`ui/notifications/host-context-changed`); the
   * bridge compares with what the app has and sends only the changed fields, nothing when none.
   */
  #sendContext() {
    if (!this.bridge || !this.initialized || this.closed) return;
    try {
      this.bridge.setHostContext(this.#hostContext());
    } catch {
      // The bridge is closing: nothing to tell.
    }
  }

  /** The frame's height for the mode: the app's content height up to the cap; full screen: CSS fills. */
  #applySize() {
    if (!this.frame) return;
    if (this.displayMode === "fullscreen") {
      this.frame.style.height = "";
      return;
    }
    const cap = this.displayMode === "pip" ? pipCap() : inlineCap();
    const wanted = this.contentHeight ?? INITIAL_HEIGHT;
    this.frame.style.height = `${Math.max(1, Math.min(wanted, cap))}px`;
  }

  /** Window, theme and layout changes reach the frame's size and the app's host context. */
  #watch() {
    let pending = 0;
    const update = () => {
      if (pending) return;
      pending = requestAnimationFrame(() => {
        pending = 0;
        if (this.closed) return;
        this.#applySize();
        if (this.displayMode === "pip") this.#placePip();
        this.#sendContext();
      });
    };
    const media = ["(prefers-color-scheme: dark)", "(pointer: coarse)", "(hover: hover)"].map((q) => matchMedia(q));
    for (const m of media) m.addEventListener("change", update);
    addEventListener("resize", update);
    document.addEventListener("host-theme", update);
    const themeObserver = new MutationObserver(update);
    themeObserver.observe(document.documentElement, { attributes: true, attributeFilter: ["data-theme", "class", "style"] });
    const sizeObserver = new ResizeObserver(update);
    sizeObserver.observe(this.element);
    const onKey = (event) => {
      if (event.key !== "Escape" || this.displayMode !== "fullscreen" || event.defaultPrevented) return;
      if (document.querySelector("dialog[open]")) return;
      event.preventDefault();
      this.setDisplayMode("inline", { user: true });
    };
    document.addEventListener("keydown", onKey);
    this.unwatch = () => {
      if (pending) cancelAnimationFrame(pending);
      for (const m of media) m.removeEventListener("change", update);
      removeEventListener("resize", update);
      document.removeEventListener("host-theme", update);
      document.removeEventListener("keydown", onKey);
      themeObserver.disconnect();
      sizeObserver.disconnect();
    };
  }

  /** The app declared the modes it supports (or none: then all of the host's). */
  #appAllows(mode) {
    const declared = this.bridge?.getAppCapabilities()?.availableDisplayModes;
    return !Array.isArray(declared) || declared.includes(mode);
  }

  #showButtons() {
    const mode = this.displayMode;
    this.buttons.fullscreen.hidden = mode === "fullscreen" || !this.#appAllows("fullscreen");
    this.buttons.pip.hidden = mode === "pip" || !this.#appAllows("pip");
    this.buttons.inline.hidden = mode === "inline";
  }

  /** Keeps the floating view above the composer so that Send stays reachable. */
  #placePip() {
    const composer = document.getElementById("composer");
    const top = composer && composer.offsetParent ? composer.getBoundingClientRect().top : innerHeight;
    const bottom = Math.max(12, Math.round(innerHeight - top + 12));
    this.element.style.setProperty("--app-view-pip-bottom", `${Math.min(bottom, Math.round(innerHeight * 0.5))}px`);
  }

  /**
   * Shows the app inline, full screen or in picture-in-picture. The figure stays where it is
   * in the conversation (moving it would reload the frame): the modes are CSS, and a
   * placeholder keeps its place while it is out of the flow. `user`: from the page's
   * controls, so focus follows.
   */
  setDisplayMode(mode, { user = false } = {}) {
    if (this.closed || !DISPLAY_MODES.includes(mode) || mode === this.displayMode) return;
    if (!this.#appAllows(mode)) return;
    const previous = this.displayMode;
    const hadFocus = this.element.contains(document.activeElement);
    if (mode === "fullscreen" && fullscreenView && fullscreenView !== this) fullscreenView.setDisplayMode("inline");
    if (mode === "pip" && pipView && pipView !== this) pipView.setDisplayMode("inline");
    if (mode === "inline") this.#releasePlace();
    else this.#holdPlace(mode);
    if (fullscreenView === this) fullscreenView = null;
    if (pipView === this) pipView = null;
    if (mode === "fullscreen") fullscreenView = this;
    if (mode === "pip") pipView = this;

    this.displayMode = mode;
    this.element.dataset.displayMode = mode;
    if (mode === "fullscreen") {
      this.element.setAttribute("role", "region");
      document.documentElement.classList.add("app-view-fullscreen-open");
      this.#hidePage();
    } else {
      this.element.removeAttribute("role");
      this.#showPage();
      if (!fullscreenView) document.documentElement.classList.remove("app-view-fullscreen-open");
    }
    if (mode === "pip") this.#placePip();
    this.#showButtons();
    this.#applySize();
    this.#sendContext();

    // Focus follows the page's controls; an app's own request leaves focus in the app.
    const inApp = !user && document.activeElement === this.frame;
    if (inApp || !(user || hadFocus)) return;
    if (mode === "fullscreen") {
      this.element.focus();
    } else if (mode === "inline") {
      const back = previous === "fullscreen" ? this.buttons.fullscreen : this.buttons.pip;
      (back.hidden ? this.element : back).focus();
      this.element.scrollIntoView({ block: "nearest" });
    } else {
      this.buttons.inline.focus();
    }
  }

  /**
   * Full screen covers the page: what is under it leaves the keyboard's and screen readers'
   * reach (`inert`) until the view leaves full screen. Dialogs stay reachable (a link
   * confirmation asked by the app).
   */
  #hidePage() {
    if (this.inerted) return;
    this.inerted = [];
    for (let node = this.element; node && node !== document.body; node = node.parentElement) {
      for (const sibling of node.parentElement?.children ?? []) {
        if (sibling === node || sibling.inert || sibling.tagName === "DIALOG" || sibling.tagName === "SCRIPT") continue;
        sibling.inert = true;
        this.inerted.push(sibling);
      }
    }
  }

  #showPage() {
    for (const node of this.inerted ?? []) node.inert = false;
    this.inerted = undefined;
  }

  /** While the view floats or fills the screen, its place in the conversation is kept. */
  #holdPlace(mode) {
    if (!this.placeholder) {
      this.placeholder = document.createElement("div");
      this.placeholder.className = "app-view-placeholder";
      this.element.before(this.placeholder);
    }
    // Full screen covers the page: the place keeps the view's height, so that the conversation
    // does not move under it; picture-in-picture leaves a line saying where the app went.
    this.placeholder.style.height =
      mode === "fullscreen" && this.displayMode === "inline" ? `${Math.round(this.element.getBoundingClientRect().height)}px` : "";
    this.placeholder.dataset.displayMode = mode;
    this.placeholder.textContent = mode === "pip" ? `${this.appName} is shown in picture-in-picture.` : "";
  }

  #releasePlace() {
    this.placeholder?.remove();
    this.placeholder = undefined;
  }

  /** Tells the app it goes away (`ui/resource-teardown`), then removes it. */
  async close() {
    if (this.closed) return;
    const hadFocus = this.element.contains(document.activeElement);
    this.closed = true;
    this.unwatch?.();
    this.#showPage();
    if (fullscreenView === this) {
      fullscreenView = null;
      document.documentElement.classList.remove("app-view-fullscreen-open");
    }
    if (pipView === this) pipView = null;
    if (this.bridge && this.initialized) {
      const teardown = this.bridge.teardownResource({}).catch(() => {});
      await Promise.race([teardown, new Promise((resolve) => setTimeout(resolve, TEARDOWN_WAIT_MS))]);
    }
    await this.bridge?.close().catch(() => {});
    this.#releasePlace();
    this.element.remove();
    if (hadFocus) document.getElementById("composer-input")?.focus();
  }
}
