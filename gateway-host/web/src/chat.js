// The conversation: one chat session at a time, its history, and its turns over
// `POST /apps/chat` (streamed text, tool calls and results as they happen, `input` frames as
// forms). Tool results with a UI render the app inline (AppView); what the user does in an app
// (its tool calls) travels with the next message as `appEvents`, and an app's `ui/message`
// starts a turn of its own. Turns run one after another, as the gateway runs them.
import { ApiError, chatFrames, getJson, newSessionId, resultText, sendJson } from "./api.js";
import { AppView, closeClients } from "./app_view.js";
import { inputForm } from "./input_form.js";
import { renderMarkdown } from "./markdown.js";

const MAX_PENDING_EVENTS = 20;
const PREVIEW_CHARS = 90;
/** What a stopped turn shows, live and after a reload. */
const STOPPED_NOTE = "Stopped.";
/** A call cut short by Stop: the result the gateway saves for it (`chat::agent::STOPPED_CALL_REASON`, after "Error: "). */
const STOPPED_CALL = "Error: the turn was stopped before this call finished.";

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

function prettyJson(text) {
  const trimmed = text.trim();
  if (!/^[[{]/.test(trimmed)) return null;
  try {
    return JSON.stringify(JSON.parse(trimmed), null, 2);
  } catch {
    return null;
  }
}

/**
 * A tool's text as shown: pretty-printed when it is JSON; when it is a sentence and then JSON
 * on lines of its own (a tool's text block, then its structured content), the JSON part is.
 */
function prettyText(text) {
  const all = String(text ?? "");
  const whole = prettyJson(all);
  if (whole !== null) return whole;
  const start = all.search(/\n[[{]/);
  if (start >= 0) {
    const tail = prettyJson(all.slice(start + 1));
    if (tail !== null) return `${all.slice(0, start)}\n${tail}`;
  }
  return all;
}

/** One line of a result, for a folded tool card. */
function preview(text) {
  const line = String(text ?? "").replace(/\s+/g, " ").trim();
  return line.length > PREVIEW_CHARS ? `${line.slice(0, PREVIEW_CHARS - 1)}…` : line;
}

/** A folded section of a tool card: its input or its result. */
function section(label, className, text, open) {
  const details = element("details", "tool-section");
  details.open = open;
  const pre = element("pre", className, text);
  pre.tabIndex = 0;
  details.append(element("summary", undefined, label), pre);
  return details;
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
    // The empty-state panel stays (the page shows it while the log has nothing else).
    this.log.replaceChildren(...this.log.querySelectorAll(":scope > .empty-state"));
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

  /** An assistant message; its text (Markdown) is set with `setAssistantText`. */
  assistantBubble(text = "") {
    const bubble = element("div", "message assistant");
    const body = element("div", "text");
    bubble.append(body);
    if (text) renderMarkdown(body, text);
    this.log.append(bubble);
    this.scroll();
    return body;
  }

  setAssistantText(body, text) {
    renderMarkdown(body, text);
    this.scroll();
  }

  toolCard(id, name, input) {
    const card = element("details", "tool-call");
    card.dataset.toolCallId = id;
    card.dataset.tool = name;
    card.dataset.state = "running";
    const summary = element("summary");
    summary.append(
      element("span", "tool-name", name),
      element("span", "tool-state", "running…"),
      element("span", "tool-preview", ""),
    );
    card.append(summary, section("Input", "tool-input", pretty(input ?? {}), false));
    this.log.append(card);
    this.scroll();
    return card;
  }

  finishToolCard(card, text, isError) {
    card.dataset.state = isError ? "error" : "done";
    card.querySelector(".tool-state").textContent = isError ? "failed" : "done";
    card.querySelector(".tool-preview").textContent = preview(text);
    card.append(section("Result", "tool-output", prettyText(text), true));
  }

  /** An app's question during a tool call: a form, answered live or (from history) already. */
  inputRequest(request, appName, answered) {
    const sessionId = this.sessionId;
    const form = inputForm(
      request,
      appName,
      (answer) => sendJson("POST", `/apps/chat/${encodeURIComponent(sessionId)}/input`, { inputId: request.inputId, ...answer }),
      answered,
    );
    this.log.append(form);
    this.scroll();
    return form;
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

  appName(appId) {
    return this.app(appId)?.name || appId;
  }

  /** The user opened an app from the list: its UI, fed by its own UI tool; the session keeps it. */
  openApp(app) {
    if (!this.sessionId) return;
    const sessionId = this.sessionId;
    this.showOpened(app.id, app.uiResourceUri);
    sendJson("POST", `/apps/sessions/${encodeURIComponent(sessionId)}/opened`, { appId: app.id })
      .then(() => {
        if (this.sessionId === sessionId) this.onSession(sessionId);
      })
      .catch((error) => {
        if (this.sessionId === sessionId) this.note(`This chat could not record that ${this.appName(app.id)} was opened: ${error.message}`, "error");
      });
  }

  showOpened(appId, resourceUri) {
    this.note(`Opened ${this.appName(appId)}.`);
    this.mountApp({ appId, resourceUri }, { launch: true });
  }

  /** Stops the running turn (the gateway cancels it when its request goes away). */
  stop() {
    if (!this.abort) return;
    this.abort.stopped = true;
    this.abort.abort();
  }

  renderHistory(messages) {
    const cards = new Map();
    for (const m of messages) {
      const ui = m.ui ?? {};
      if (!m.role && ui.opened?.appId) {
        const app = this.app(ui.opened.appId);
        this.showOpened(ui.opened.appId, ui.opened.resourceUri ?? app?.uiResourceUri);
      } else if (m.role === "user") {
        if (typeof ui.text === "string") {
          this.userBubble(ui.text, ui.appId ? ui.appName || this.appName(ui.appId) : undefined);
        } else {
          this.userBubble(typeof m.content === "string" ? m.content : pretty(m.content));
        }
      } else if (m.role === "assistant" && ui.stopped) {
        if (ui.text) this.assistantBubble(ui.text);
        this.note(STOPPED_NOTE);
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
        const name = ui.name ?? card?.dataset.tool ?? "tool";
        if (card) {
          card.dataset.tool = name;
          card.querySelector(".tool-name").textContent = name;
        }
        for (const input of ui.inputs ?? []) this.inputRequest(input, name, input.answer ?? {});
        if (card) this.finishToolCard(card, text, text.startsWith("Error:"));
        if (ui.resourceUri && ui.appId) this.mountApp(ui);
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
    const state = { cards, forms: [], streamText: null, streamed: "" };
    try {
      for await (const frame of chatFrames(body, abort.signal)) {
        this.handleFrame(frame, state);
      }
    } catch (error) {
      if (abort.stopped && this.sessionId === body.sessionId) {
        this.cutShort(state);
        this.note(STOPPED_NOTE);
        this.afterStop(body.sessionId, state);
      } else if (!abort.signal.aborted && error.name !== "AbortError") {
        this.note(`The turn failed: ${error.message}`, "error");
      }
    } finally {
      if (this.abort === abort) this.abort = null;
      this.busyCount -= 1;
      this.onBusy(this.busyCount > 0);
      if (this.sessionId === body.sessionId) this.onSession(body.sessionId);
    }
  }

  /**
   * What a stopped turn keeps, as the gateway saves it: everything shown so far, calls still
   * running marked as cut short, and without the questions those calls were asking.
   */
  cutShort(state) {
    for (const card of state.cards.values()) {
      if (card.dataset.state !== "running") continue;
      for (const { form } of state.forms.filter((f) => f.card === card)) form.remove();
      this.finishToolCard(card, STOPPED_CALL, true);
    }
  }

  /**
   * The gateway saves a stopped turn once it has noticed the request went away, a moment after
   * the page stopped — by then it may have streamed a few more words, or finished a call: the
   * page takes those from the saved turn, so it reads as a reload will, and refreshes the list.
   */
  async afterStop(sessionId, state) {
    let saved = null;
    for (let attempt = 0; attempt < 20 && this.sessionId === sessionId && !saved; attempt += 1) {
      await new Promise((resolve) => setTimeout(resolve, 250));
      try {
        const messages = (await getJson(`/apps/sessions/${encodeURIComponent(sessionId)}`)).messages ?? [];
        if (messages.at(-1)?.ui?.stopped) saved = messages;
      } catch {
        // Not saved yet.
      }
    }
    if (this.sessionId !== sessionId) return;
    if (saved) {
      const text = saved.at(-1).ui.text ?? "";
      if (state.streamText && text) this.setAssistantText(state.streamText, text);
      else state.streamText?.closest(".message")?.remove();
      for (const message of saved) {
        const card = message.role === "tool" ? state.cards.get(message.tool_call_id) : undefined;
        const output = card?.querySelector(".tool-output");
        if (output && typeof message.content === "string" && output.textContent !== prettyText(message.content)) {
          output.closest(".tool-section")?.remove();
          this.finishToolCard(card, message.content, message.content.startsWith("Error:"));
        }
      }
    }
    this.onSession(sessionId);
  }

  /** One frame of a turn; `state` is the turn's: its tool cards, the text streaming now. */
  handleFrame(frame, state) {
    const { cards } = state;
    switch (frame.type) {
      case "session":
        break;
      case "text":
        state.streamText ??= this.assistantBubble();
        state.streamed += frame.delta;
        this.setAssistantText(state.streamText, state.streamed);
        break;
      case "tool":
        state.streamText = null;
        state.streamed = "";
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
        const card = [...cards.values()].at(-1);
        state.forms.push({ card, form: this.inputRequest(frame, card?.dataset.tool ?? "An app") });
        break;
      }
      case "error":
        this.note(frame.message, "error");
        break;
      case "result":
        if (!state.streamed && frame.text) this.assistantBubble(frame.text);
        break;
      case "done":
        break;
    }
  }
}
