// The gateway's host page (`/apps/`): sign-in when the gateway needs credentials, the apps with
// their live states (`/apps/events`), the chat sessions (`/apps/sessions`), and the
// conversation with the agent and the apps' UIs (chat.js).
import { ApiError, getJson, sendJson } from "./api.js";
import { Conversation } from "./chat.js";
import { initInstallForm } from "./install_form.js";
import { THEME_KEY, storedTheme } from "./theme_choice.js";

const $ = (id) => document.getElementById(id);

const page = {
  apps: new Map(),
  sandboxOrigin: null,
  events: null,
  conversation: null,
  agent: null,
  suggestionsFor: null,
};

function setStatus(text) {
  $("status").textContent = text;
}

function plural(n, one, many = `${one}s`) {
  return `${n} ${n === 1 ? one : many}`;
}

// --- theme ---------------------------------------------------------------------------------

const systemDark = matchMedia("(prefers-color-scheme: dark)");

/** The theme in effect: the user's choice, else the system's. */
function currentTheme() {
  return document.documentElement.dataset.theme || (systemDark.matches ? "dark" : "light");
}

function showTheme() {
  const dark = currentTheme() === "dark";
  const toggle = $("theme-toggle");
  toggle.setAttribute("aria-label", dark ? "Switch to light theme" : "Switch to dark theme");
  toggle.title = dark ? "Light theme" : "Dark theme";
  toggle.querySelector(".theme-icon").textContent = dark ? "☀" : "☾";
}

function setTheme(theme) {
  document.documentElement.dataset.theme = theme;
  try {
    localStorage.setItem(THEME_KEY, theme);
  } catch {
    // Private mode: the choice holds for this page only.
  }
  showTheme();
  document.dispatchEvent(new CustomEvent("host-theme"));
}

function initTheme() {
  const stored = storedTheme();
  if (stored) document.documentElement.dataset.theme = stored;
  showTheme();
  $("theme-toggle").addEventListener("click", () => setTheme(currentTheme() === "dark" ? "light" : "dark"));
  systemDark.addEventListener("change", () => {
    if (document.documentElement.dataset.theme) return;
    showTheme();
    document.dispatchEvent(new CustomEvent("host-theme"));
  });
}

// --- phone drawer --------------------------------------------------------------------------

const phone = matchMedia("(max-width: 760px)");

function drawerOpen() {
  return document.body.classList.contains("drawer-open");
}

function setDrawer(open, { focus = true } = {}) {
  const wasOpen = drawerOpen();
  document.body.classList.toggle("drawer-open", open);
  $("drawer-toggle").setAttribute("aria-expanded", String(open));
  $("drawer-backdrop").hidden = !open;
  if (open && !wasOpen && focus) $("new-chat").focus();
  if (!open && wasOpen && focus && phone.matches) $("drawer-toggle").focus();
}

function initDrawer() {
  $("drawer-toggle").addEventListener("click", () => setDrawer(!drawerOpen()));
  $("drawer-backdrop").addEventListener("click", () => setDrawer(false));
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && drawerOpen() && !document.querySelector("dialog[open]")) {
      event.preventDefault();
      setDrawer(false);
    }
  });
  $("sidebar").addEventListener("click", (event) => {
    if (event.target.closest("a.session, .app-open")) setDrawer(false, { focus: false });
  });
  phone.addEventListener("change", () => {
    if (!phone.matches) setDrawer(false, { focus: false });
  });
}

// --- empty state ---------------------------------------------------------------------------

function renderModelStatus() {
  const status = document.querySelector("#empty-state .model-status");
  const agent = page.agent;
  status.replaceChildren();
  if (!agent) {
    status.dataset.configured = "unknown";
    status.textContent = "The gateway did not say whether a model is configured.";
  } else if (agent.configured) {
    status.dataset.configured = "true";
    status.append("Model: ");
    const name = document.createElement("strong");
    name.textContent = agent.model || "configured";
    status.append(name);
  } else {
    status.dataset.configured = "false";
    const strong = document.createElement("strong");
    strong.textContent = "No model is configured.";
    const problem = document.createElement("span");
    problem.className = "model-problem";
    const text = agent.problem || "Set the gateway's Agent settings (its model's base URL and name) and restart it.";
    problem.textContent = text[0].toUpperCase() + text.slice(1) + (/[.!]$/.test(text) ? "" : ".");
    status.append(strong, " ", problem);
  }
}

const VERBS = new Set(["show", "get", "list", "open", "view", "display", "find", "search", "create", "add", "run", "start", "check", "count", "compare", "calculate", "explain", "summarize", "plan", "adjust", "set", "update", "guide"]);

/** The app id of a registry provider (`mcpapp:grocery-inventory` → `grocery-inventory`). */
function providerApp(providerId) {
  return String(providerId ?? "").replace(/^mcpapp:/, "");
}

/** A tool's name as words: `grocery.show_store_dashboard` → "show store dashboard". */
function toolWords(name) {
  const bare = name.includes(".") ? name.slice(name.indexOf(".") + 1) : name;
  return bare
    .replace(/([a-z0-9])([A-Z])/g, "$1 $2")
    .replace(/[_\-.]+/g, " ")
    .trim()
    .toLowerCase();
}

function suggestionRequest(title) {
  const words = title.trim();
  const first = words.split(/\s+/)[0]?.toLowerCase() ?? "";
  if (VERBS.has(first)) return words[0].toUpperCase() + words.slice(1);
  return `Show me ${words[0].toLowerCase() + words.slice(1)}`;
}

async function renderSuggestions() {
  const running = [...page.apps.values()].filter((a) => a.state === "running").map((a) => a.id).sort();
  const key = running.join("\n");
  if (key === page.suggestionsFor) return;
  page.suggestionsFor = key;
  let tools = [];
  try {
    const registry = await getJson("/tools");
    const model = new Map((registry.model ?? []).map((t) => [`${t.providerId}\n${t.name}`, t]));
    tools = (registry.all ?? [])
      .filter((t) => t.selected && t.visibleToModel !== false && running.includes(providerApp(t.providerId)))
      .map((t) => ({ ...model.get(`${t.providerId}\n${t.name}`), ...t, appId: providerApp(t.providerId) }))
      .filter((t) => !(t.inputSchema?.required?.length > 0) || t.uiResourceUri);
  } catch {
    tools = [];
  }
  if (page.suggestionsFor !== key) return;
  // Tools with a UI first, one per app before a second of the same app.
  tools.sort((a, b) => Number(Boolean(b.uiResourceUri)) - Number(Boolean(a.uiResourceUri)));
  // Two apps may offer the same tool (two copies of one server): one suggestion says it.
  const chosen = [];
  const apps = new Set();
  const titles = new Set();
  for (const pass of [true, false]) {
    for (const tool of tools) {
      if (chosen.length >= 4) break;
      const title = (tool.title || toolWords(tool.name)).toLowerCase();
      if (chosen.includes(tool) || titles.has(title) || (pass && apps.has(tool.appId))) continue;
      chosen.push(tool);
      apps.add(tool.appId);
      titles.add(title);
    }
  }
  const list = document.querySelector("#empty-state .suggestions");
  list.replaceChildren();
  for (const tool of chosen) {
    const title = tool.title || toolWords(tool.name);
    const request = suggestionRequest(title);
    const item = document.createElement("li");
    const button = document.createElement("button");
    button.type = "button";
    button.className = "suggestion";
    button.dataset.tool = tool.name;
    button.dataset.request = request;
    const label = document.createElement("span");
    label.className = "suggestion-title";
    label.textContent = request;
    button.append(label);
    const app = page.apps.get(tool.appId);
    const detail = document.createElement("span");
    detail.className = "suggestion-detail";
    const description = (tool.description ?? "").split(/(?<=\.)\s/)[0].trim();
    detail.textContent = [app?.name || tool.appId, description].filter(Boolean).join(" — ");
    button.append(detail);
    button.addEventListener("click", () => {
      const input = $("composer-input");
      input.value = request;
      $("composer").requestSubmit();
    });
    item.append(button);
    list.append(item);
  }
  document.querySelector("#empty-state .suggestions-block").hidden = chosen.length === 0;
}

function watchEmptyState() {
  const log = $("conversation");
  const empty = $("empty-state");
  const update = () => {
    empty.hidden = [...log.children].some((child) => child !== empty);
  };
  new MutationObserver(update).observe(log, { childList: true });
  update();
}

// --- sign-in -------------------------------------------------------------------------------

function showSignIn(message) {
  $("workspace").hidden = true;
  $("signin").hidden = false;
  $("signin-error").textContent = message ?? "";
  setStatus("Sign-in needed");
  $("signin-token").focus();
}

async function signIn(event) {
  event.preventDefault();
  const token = $("signin-token").value;
  $("signin-error").textContent = "";
  try {
    await sendJson("POST", "/auth/session", { token });
  } catch (error) {
    $("signin-error").textContent =
      error instanceof ApiError && error.status === 401 ? "That token is not valid." : `Sign-in failed: ${error.message}`;
    $("signin-token").select();
    return;
  }
  $("signin-token").value = "";
  $("signin").hidden = true;
  await start();
}

// --- apps ----------------------------------------------------------------------------------

function stateLabel(state) {
  if (state === "loaded" || state === "validated") return "Starting";
  return state ? state[0].toUpperCase() + state.slice(1) : "Unknown";
}

function countsText(app) {
  const parts = [`v${app.version}`];
  const starting = app.state !== "running" && !app.tools && !app.resources && !app.resourceTemplates && !app.prompts;
  if (starting) return parts.join(" · ");
  parts.push(plural(app.tools ?? 0, "tool"));
  if (app.resources) parts.push(plural(app.resources, "resource"));
  if (app.resourceTemplates) parts.push(plural(app.resourceTemplates, "resource template"));
  if (app.prompts) parts.push(plural(app.prompts, "prompt"));
  return parts.join(" · ");
}

function renderApps(apps) {
  page.apps = new Map(apps.map((a) => [a.id, a]));
  const running = apps.filter((a) => a.state === "running").length;
  $("apps-count").textContent = apps.length ? `(${running === apps.length ? apps.length : `${running} of ${apps.length} running`})` : "";
  renderSuggestions();
  const list = $("apps");
  list.replaceChildren();
  if (apps.length === 0) {
    const empty = document.createElement("li");
    empty.className = "empty";
    empty.textContent = "No MCP Apps are installed.";
    list.append(empty);
    return;
  }
  for (const app of apps) {
    const item = document.createElement("li");
    item.className = "app";
    item.dataset.appId = app.id;
    item.dataset.state = app.state;
    const head = document.createElement("div");
    head.className = "app-head";
    const name = document.createElement("span");
    name.className = "app-name";
    name.textContent = app.name || app.id;
    const state = document.createElement("span");
    state.className = "app-state";
    state.textContent = stateLabel(app.state);
    head.append(name, state);
    const counts = document.createElement("p");
    counts.className = "app-counts";
    counts.textContent = countsText(app);
    item.append(head, counts);
    const problems = [app.lastError, ...(app.validationErrors ?? [])].filter(Boolean);
    for (const problem of problems) {
      const p = document.createElement("p");
      p.className = "app-error";
      p.textContent = problem;
      item.append(p);
    }
    if (app.hasUi && app.uiResourceUri) {
      const open = document.createElement("button");
      open.type = "button";
      open.className = "app-open";
      open.textContent = "Open";
      open.setAttribute("aria-label", `Open ${app.name || app.id}`);
      open.disabled = app.state !== "running";
      if (open.disabled) open.title = "The app is not running yet";
      open.addEventListener("click", () => page.conversation.openApp(app));
      item.append(open);
    }
    list.append(item);
  }
}

function followApps() {
  page.events?.close();
  const events = new EventSource("/apps/events");
  page.events = events;
  // "Connected" once per (re)connection, not on every update: an app's state changing must not
  // wipe what the status line says (an install's outcome, an error).
  let connected = false;
  events.addEventListener("apps", (event) => {
    renderApps(JSON.parse(event.data).apps ?? []);
    if (!connected) {
      connected = true;
      setStatus("Connected");
    }
  });
  events.addEventListener("error", async () => {
    connected = false;
    setStatus("Reconnecting…");
    // EventSource retries by itself; a 401 (the session expired) it cannot fix.
    try {
      await getJson("/apps/health");
    } catch (error) {
      if (error instanceof ApiError && error.status === 401) {
        events.close();
        showSignIn("Your session ended; sign in again.");
      }
    }
  });
}

// --- sessions ------------------------------------------------------------------------------

function sessionFromHash() {
  const match = /^#\/chat\/([A-Za-z0-9._-]{1,128})$/.exec(location.hash);
  return match ? match[1] : null;
}

async function renderSessions() {
  let sessions = [];
  try {
    sessions = (await getJson("/apps/sessions")).sessions ?? [];
  } catch (error) {
    setStatus(`Cannot list chats: ${error.message}`);
    return;
  }
  const current = page.conversation.sessionId;
  const list = $("sessions");
  list.replaceChildren();
  if (sessions.length === 0) {
    const empty = document.createElement("li");
    empty.className = "empty";
    empty.textContent = "No chats yet.";
    list.append(empty);
  }
  for (const session of sessions) {
    const title = session.title || "(untitled)";
    const item = document.createElement("li");
    item.className = "session-row";
    const link = document.createElement("a");
    link.href = `#/chat/${session.id}`;
    link.className = "session";
    link.dataset.sessionId = session.id;
    link.textContent = title;
    if (session.id === current) {
      link.setAttribute("aria-current", "page");
      $("chat-heading").textContent = session.title || "Chat";
    }
    const when = document.createElement("small");
    when.textContent = new Date(session.updatedAt).toLocaleString();
    const actions = document.createElement("div");
    actions.className = "session-actions";
    const rename = document.createElement("button");
    rename.type = "button";
    rename.className = "icon-button session-rename";
    rename.setAttribute("aria-label", `Rename chat ${title}`);
    rename.title = "Rename";
    rename.innerHTML = '<svg viewBox="0 0 16 16" width="15" height="15" aria-hidden="true" focusable="false"><path d="M11 2.5l2.5 2.5L6 12.5 3 13l.5-3z" fill="none" stroke="currentColor" stroke-width="1.5" stroke-linejoin="round"/></svg>';
    rename.addEventListener("click", () => startRename(item, session));
    const remove = document.createElement("button");
    remove.type = "button";
    remove.className = "icon-button session-delete";
    remove.setAttribute("aria-label", `Delete chat ${title}`);
    remove.title = "Delete";
    remove.innerHTML = '<svg viewBox="0 0 16 16" width="15" height="15" aria-hidden="true" focusable="false"><path d="M3 4.5h10M6.5 4.5V3h3v1.5M4.5 4.5l.7 8.5h5.6l.7-8.5M7 7v4M9 7v4" fill="none" stroke="currentColor" stroke-width="1.4" stroke-linecap="round" stroke-linejoin="round"/></svg>';
    remove.addEventListener("click", () => deleteSession(session));
    actions.append(rename, remove);
    const main = document.createElement("div");
    main.className = "session-main";
    main.append(link, when);
    item.append(main, actions);
    list.append(item);
  }
}

/** Replaces a chat row's link with a small form to rename it (Enter saves, Escape cancels). */
function startRename(item, session) {
  const form = document.createElement("form");
  form.className = "session-rename-form";
  const id = `rename-${session.id}`;
  const label = document.createElement("label");
  label.htmlFor = id;
  label.className = "visually-hidden";
  label.textContent = "Chat title";
  const input = document.createElement("input");
  input.id = id;
  input.name = "title";
  input.value = session.title || "";
  input.maxLength = 200;
  input.required = true;
  const save = document.createElement("button");
  save.type = "submit";
  save.className = "primary";
  save.textContent = "Save";
  const cancel = document.createElement("button");
  cancel.type = "button";
  cancel.textContent = "Cancel";
  const error = document.createElement("p");
  error.className = "error";
  error.setAttribute("role", "alert");
  const buttons = document.createElement("div");
  buttons.className = "dialog-buttons";
  buttons.append(cancel, save);
  form.append(label, input, buttons, error);
  const restore = () => {
    form.replaceWith(...saved);
    item.querySelector(".session-rename")?.focus();
  };
  const saved = [...item.children];
  item.replaceChildren(form);
  form.scrollIntoView({ block: "nearest" });
  input.focus();
  input.select();
  cancel.addEventListener("click", restore);
  input.addEventListener("keydown", (event) => {
    if (event.key === "Escape") {
      event.preventDefault();
      event.stopPropagation();
      restore();
    }
  });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const title = input.value.trim();
    if (!title) return;
    save.disabled = true;
    try {
      await sendJson("PATCH", `/apps/sessions/${encodeURIComponent(session.id)}`, { title });
    } catch (e) {
      error.textContent = `Cannot rename: ${e.message}`;
      save.disabled = false;
      return;
    }
    if (session.id === page.conversation.sessionId) $("chat-heading").textContent = title;
    await renderSessions();
    $("sessions").querySelector(`.session[data-session-id="${CSS.escape(session.id)}"]`)?.closest("li")?.querySelector(".session-rename")?.focus();
  });
}

/** Asks first (a dialog), then deletes a chat; the chat shown goes to a new one. */
function deleteSession(session) {
  const dialog = $("delete-dialog");
  $("delete-dialog-title").textContent = session.title || "(untitled)";
  dialog.returnValue = "";
  dialog.showModal();
  dialog.addEventListener(
    "close",
    async () => {
      if (dialog.returnValue !== "delete") return;
      try {
        await sendJson("DELETE", `/apps/sessions/${encodeURIComponent(session.id)}`);
      } catch (error) {
        if (!(error instanceof ApiError && error.status === 404)) {
          setStatus(`Cannot delete the chat: ${error.message}`);
          return;
        }
      }
      if (session.id === page.conversation.sessionId) {
        await page.conversation.show(null);
      } else {
        await renderSessions();
      }
      $("new-chat").focus();
    },
    { once: true },
  );
}

async function showSessionFromHash() {
  const id = sessionFromHash();
  if (id && id === page.conversation.sessionId) return;
  await page.conversation.show(id);
}

// --- dialogs -------------------------------------------------------------------------------

function confirmLink(view, url) {
  let parsed;
  try {
    parsed = new URL(url);
  } catch {
    return Promise.resolve(false);
  }
  if (parsed.protocol !== "https:" && parsed.protocol !== "http:") return Promise.resolve(false);
  const dialog = $("link-dialog");
  $("link-dialog-app").textContent = view.appName;
  $("link-dialog-url").textContent = parsed.href;
  dialog.returnValue = "";
  dialog.showModal();
  return new Promise((resolve) => {
    dialog.addEventListener(
      "close",
      () => {
        const open = dialog.returnValue === "open";
        if (open) window.open(parsed.href, "_blank", "noopener,noreferrer");
        resolve(open);
      },
      { once: true },
    );
  });
}

// --- start ---------------------------------------------------------------------------------

async function start() {
  let health;
  try {
    health = await getJson("/apps/health");
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) return showSignIn();
    setStatus(`The gateway did not answer: ${error.message}`);
    return;
  }
  page.sandboxOrigin = health.sandbox ?? null;
  page.agent = health.agent ?? null;
  renderModelStatus();
  renderApps(health.apps ?? []);
  initInstallForm({
    admin: health.admin === true,
    onInstalled: (answer) => {
      // What the user has to do next (a variable to fill in); the rest is in the manifest.
      const fill = (answer.notes ?? []).filter((n) => n.startsWith("fill in"));
      const notes = fill.length ? ` ${fill.join(" ")}` : "";
      setStatus(`Installed ${answer.id} ${answer.version}: ${stateLabel(answer.app?.state ?? "starting")}.${notes}`);
    },
  });
  $("workspace").hidden = false;
  followApps();
  await showSessionFromHash();
  await renderSessions();
}

function main() {
  page.conversation = new Conversation({
    log: $("conversation"),
    title: $("chat-heading"),
    sandboxOrigin: () => page.sandboxOrigin,
    app: (id) => page.apps.get(id),
    confirmLink,
    onSession: (id) => {
      if (sessionFromHash() !== id) history.replaceState(null, "", `#/chat/${id}`);
      renderSessions();
    },
    onBusy: (busy) => {
      const stop = $("stop");
      const hadFocus = document.activeElement === stop;
      stop.hidden = !busy;
      if (hadFocus && !busy) $("composer-input").focus();
      $("conversation").setAttribute("aria-busy", String(busy));
    },
  });
  initTheme();
  initDrawer();
  watchEmptyState();
  $("stop").addEventListener("click", () => page.conversation.stop());
  $("signin-form").addEventListener("submit", signIn);
  $("composer").addEventListener("submit", (event) => {
    event.preventDefault();
    const input = $("composer-input");
    const text = input.value.trim();
    if (!text) return;
    input.value = "";
    page.conversation.send({ text });
  });
  $("composer-input").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      $("composer").requestSubmit();
    }
  });
  $("new-chat").addEventListener("click", async () => {
    setDrawer(false, { focus: false });
    await page.conversation.show(null);
    $("composer-input").focus();
  });
  window.addEventListener("hashchange", showSessionFromHash);
  start();
}

main();
