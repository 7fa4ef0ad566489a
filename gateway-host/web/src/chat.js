// The conversation: one chat session at a time, its history, and its turns over
// `POST /apps/chat` (streamed text, tool calls and results as they happen, `input` frames as
// forms). Tool results with a UI render the app inline (AppView); what the user does in an app
// (its tool calls) travels with the next message as `appEvents`, and an app's `ui/message`
// starts a turn of its own. Turns run one after another, as the gateway runs them.
import { ApiError, chatFrames, getJson, newSessionId, resultText, sendJson } from "./api.js";
import { AppView, closeClients } from "./app_view.js";
import { inputForm } from "./input_form.js";

const MAX_PENDING_EVENTS = 20;

function element(tag, className, text) {
  const e = document.createElement(tag);
  if (className) e.className = className;
  if (text !== undefined) e.textContent = text;
  return e;
}

function pretty(value) {
  try {
    return JSON.stringify(value, null, 2);
  } catch {
    return String(value);
  }
}

export class Conversation {
  /**
   * @param {object} o
   * @param {HTMLElement} o.log the conversation element
   * @param {HTMLElement} o.title the heading naming the chat
   * @param {() => string|null} o.sandboxOrigin
   * @param {(appId: string) => object|undefined} o.app the app's entry from /apps/events
   * @param {(view, url) => Promise<boolean>} o.confirmLink
   * @param {(sessionId: string) => void} o.onSession a session was shown or its turn ended
   * @param {(busy: boolean) => void} o.onBusy
   */
  constructor(o) {
    Object.assign(this, o);
    this.sessionId = null;
    this.views = new Set();
    this.pendingEvents = [];
    this.queue = Promise.resolve();
    this.busyCount = 0;
    this.abort = null;
  }

  /** Shows session `id` (its history), or a new empty one. */
  async show(id) {
    await this.clear();
    this.sessionId = id ?? newSessionId();
    this.title.textContent = "New chat";
    this.onSession(this.sessionId);
    if (!id) return;
    let session;
    try {
      session = await getJson(`/apps/sessions/${encodeURIComponent(id)}`);
    } catch (error) {
      if (error instanceof ApiError && error.status === 404) return; // Nothing said yet.
      this.note(`Cannot load this chat: ${error.message}`, "error");
      return;
    }
    if (this.sessionId !== id) return;
    this.title.textContent = session.title || "Chat";
    this.renderHistory(session.messages ?? []);
  }

  async clear() {
    this.abort?.abort();
    const views = [...this.views];
    this.views.clear();
    await Promise.all(views.map((v) => v.close()));
    if (this.sessionId) closeClients(this.sessionId);
    this.pendingEvents = [];
    this.log.replaceChildren();
  }

  note(text, kind = "info") {
    const p = element("p", `note note-${kind}`, text);
    if (kind === "error") p.setAttribute("role", "alert");
    this.log.append(p);
    this.scroll();
    return p;
  }

  scroll() {
    this.log.scrollTop = this.log.scrollHeight;
  }

  userBubble(text, fromApp) {
    const bubble = element("div", "message user");
    if (fromApp) {
      bubble.append(element("span", "via", `via ${fromApp}`));
      bubble.classList.add("from-app");
    }
    bubble.append(element("p", "text", text));
    this.log.append(bubble);
    this.scroll();
  }

  assistantBubble(text = "") {
    const bubble = element("div", "message assistant");
    const p = element("p", "text", text);
    bubble.append(p);
    this.log.append(bubble);
    this.scroll();
    return p;
  }

  toolCard(id, name, input) {
    const card = element("details", "tool-call");
    card.dataset.toolCallId = id;
    card.dataset.tool = name;
    card.dataset.state = "running";
    const summary = element("summary");
    summary.append(element("span", "tool-name", name), element("span", "tool-state", "running…"));
    card.append(summary, element("pre", "tool-input", pretty(input ?? {})));
    this.log.append(card);
    this.scroll();
    return card;
  }

  finishToolCard(card, text, isError) {
    card.dataset.state = isError ? "error" : "done";
    card.querySelector(".tool-state").textContent = isError ? "failed" : "done";
    card.append(element("pre", "tool-output", text));
  }

  /** Renders an app inline; `ui` is `{appId, toolName, resourceUri, input, result}`. */
  mountApp(ui, { launch = false } = {}) {
    const sandboxOrigin = this.sandboxOrigin();
    if (!sandboxOrigin) {
      this.note("App UIs cannot be shown: the gateway reports no sandbox origin.", "error");
      return;
    }
    const app = this.app(ui.appId);
    const view = new AppView({
      appId: ui.appId,
      appName: app?.name ?? ui.appId,
      resourceUri: ui.resourceUri,
      sessionId: this.sessionId,
      sandboxOrigin,
      toolName: ui.toolName ?? undefined,
      toolInput: ui.input ?? undefined,
      toolResult: ui.result ?? undefined,
      launch,
      host: {
        onMessage: (v, text) => this.send({ text, fromApp: v.appName, appId: v.appId }),
        onToolCalled: (v, params, result) => {
          this.pendingEvents.push({ app: v.appId, tool: params.name, args: params.arguments ?? {}, resultText: resultText(result) });
          this.pendingEvents.splice(0, Math.max(0, this.pendingEvents.length - MAX_PENDING_EVENTS));
        },
        confirmLink: (v, url) => this.confirmLink(v, url),
      },
    });
    this.views.add(view);
    const close = view.close.bind(view);
    view.close = async () => {
      this.views.delete(view);
      await close();
    };
    this.log.append(view.element);
    this.scroll();
    view.start();
    return view;
  }

  /** The user opened an app from the list: its UI, fed by its own UI tool. */
  openApp(app) {
    if (!this.sessionId) return;
    this.note(`Opened ${app.name}.`);
    this.mountApp({ appId: app.id, resourceUri: app.uiResourceUri }, { launch: true });
  }

  renderHistory(messages) {
    const cards = new Map();
    for (const m of messages) {
      if (m.role === "user") {
        this.userBubble(typeof m.content === "string" ? m.content : pretty(m.content));
      } else if (m.role === "assistant") {
        if (m.content) this.assistantBubble(m.content);
        for (const call of m.tool_calls ?? []) {
          let input = {};
          try {
            input = JSON.parse(call.function?.arguments || "{}");
          } catch {
            input = call.function?.arguments;
          }
          cards.set(call.id, this.toolCard(call.id, call.function?.name ?? "tool", input));
        }
      } else if (m.role === "tool") {
        const card = cards.get(m.tool_call_id);
        const text = typeof m.content === "string" ? m.content : pretty(m.content);
        if (card) {
          card.querySelector(".tool-name").textContent = m.ui?.name ?? card.dataset.tool;
          this.finishToolCard(card, text, text.startsWith("Error:"));
        }
        if (m.ui?.resourceUri && m.ui?.appId) this.mountApp(m.ui);
      }
    }
  }

  /** Queues a turn: a typed message, or a message an app posted (`ui/message`). */
  send({ text, fromApp, appId }) {
    const sessionId = this.sessionId;
    const events = this.pendingEvents.splice(0);
    const body = { sessionId };
    if (fromApp) {
      body.appEvents = [...events, { app: appId, text }];
    } else {
      body.message = text;
      if (events.length) body.appEvents = events;
    }
    this.userBubble(text, fromApp);
    this.queue = this.queue.then(() => (this.sessionId === sessionId ? this.turn(body) : undefined));
    return this.queue;
  }

  async turn(body) {
    this.busyCount += 1;
    this.onBusy(true);
    const abort = new AbortController();
    this.abort = abort;
    const cards = new Map();
    let text = null;
    let streamed = "";
    try {
      for await (const frame of chatFrames(body, abort.signal)) {
        switch (frame.type) {
          case "session":
            break;
          case "text":
            text ??= this.assistantBubble();
            streamed += frame.delta;
            text.textContent = streamed;
            this.scroll();
            break;
          case "tool":
            text = null;
            streamed = "";
            cards.set(frame.id, this.toolCard(frame.id, frame.name, frame.input));
            break;
          case "tool_result": {
            const card = cards.get(frame.id) ?? this.toolCard(frame.id, frame.name, frame.input);
            this.finishToolCard(card, frame.text, frame.isError);
            if (frame.resourceUri && frame.appId) {
              this.mountApp({
                appId: frame.appId,
                toolName: frame.toolName,
                resourceUri: frame.resourceUri,
                input: frame.input,
                result: frame.result,
              });
            }
            break;
          }
          case "input": {
            const app = [...cards.values()].at(-1)?.dataset.tool ?? "An app";
            this.log.append(
              inputForm(frame, app, (answer) =>
                sendJson("POST", `/apps/chat/${encodeURIComponent(body.sessionId)}/input`, { inputId: frame.inputId, ...answer }),
              ),
            );
            this.scroll();
            break;
          }
          case "error":
            this.note(frame.message, "error");
            break;
          case "result":
            if (!streamed && frame.text) this.assistantBubble(frame.text);
            break;
          case "done":
            break;
        }
      }
    } catch (error) {
      if (error.name !== "AbortError") this.note(`The turn failed: ${error.message}`, "error");
    } finally {
      if (this.abort === abort) this.abort = null;
      this.busyCount -= 1;
      this.onBusy(this.busyCount > 0);
      if (this.sessionId === body.sessionId) this.onSession(body.sessionId);
    }
  }
}
