// The gateway's host page (`/apps/`): sign-in when the gateway needs credentials, the apps with
// their live states (`/apps/events`), the chat sessions (`/apps/sessions`), and the
// conversation with the agent and the apps' UIs (chat.js).
import { ApiError, getJson, sendJson } from "./api.js";
import { Conversation } from "./chat.js";

const $ = (id) => document.getElementById(id);

const page = {
  apps: new Map(),
  sandboxOrigin: null,
  events: null,
  conversation: null,
};

function setStatus(text) {
  $("status").textContent = text;
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
  return state ? state[0].toUpperCase() + state.slice(1) : "Unknown";
}

function renderApps(apps) {
  page.apps = new Map(apps.map((a) => [a.id, a]));
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
    counts.textContent = `v${app.version} · ${app.tools} tools · ${app.resources} resources · ${app.prompts} prompts`;
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
  events.addEventListener("apps", (event) => {
    renderApps(JSON.parse(event.data).apps ?? []);
    setStatus("Connected");
  });
  events.addEventListener("error", async () => {
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
  for (const session of sessions) {
    const item = document.createElement("li");
    const link = document.createElement("a");
    link.href = `#/chat/${session.id}`;
    link.className = "session";
    link.dataset.sessionId = session.id;
    link.textContent = session.title || "(untitled)";
    if (session.id === current) {
      link.setAttribute("aria-current", "page");
      $("chat-heading").textContent = session.title || "Chat";
    }
    const when = document.createElement("small");
    when.textContent = new Date(session.updatedAt).toLocaleString();
    item.append(link, when);
    list.append(item);
  }
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
  renderApps(health.apps ?? []);
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
      $("send").textContent = busy ? "Working…" : "Send";
      $("conversation").setAttribute("aria-busy", String(busy));
    },
  });
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
    await page.conversation.show(null);
    $("composer-input").focus();
  });
  window.addEventListener("hashchange", showSessionFromHash);
  start();
}

main();
