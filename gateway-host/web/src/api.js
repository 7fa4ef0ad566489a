// The gateway's HTTP API as the page uses it: JSON in and out, errors as `ApiError` carrying
// the gateway's `{error: {code, message}}` (so the page can show what the gateway said).
// Credentials travel as the session cookie of `POST /auth/session` (same origin).
import { EventSourceParserStream } from "eventsource-parser/stream";

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function errorOf(response) {
  let code = `http_${response.status}`;
  let message = `${response.status} ${response.statusText}`.trim();
  try {
    const body = await response.json();
    code = body?.error?.code ?? code;
    message = body?.error?.message ?? message;
  } catch {
    // Not JSON: the status line says enough.
  }
  return new ApiError(response.status, code, message);
}

export async function getJson(path) {
  const response = await fetch(path, { headers: { Accept: "application/json" } });
  if (!response.ok) throw await errorOf(response);
  return response.json();
}

export async function sendJson(method, path, body) {
  const response = await fetch(path, {
    method,
    headers: { "Content-Type": "application/json", Accept: "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!response.ok) throw await errorOf(response);
  return response.status === 204 ? null : response.json();
}

/** `POST /apps/chat`: yields the turn's frames (`{type, …}`) as they arrive. */
export async function* chatFrames(body, signal) {
  const response = await fetch("/apps/chat", {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
    body: JSON.stringify(body),
    signal,
  });
  if (!response.ok) throw await errorOf(response);
  const reader = response.body
    .pipeThrough(new TextDecoderStream())
    .pipeThrough(new EventSourceParserStream())
    .getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      if (!value.data) continue;
      yield JSON.parse(value.data);
    }
  } finally {
    reader.releaseLock();
  }
}

/** A fresh chat/app session id (the `sessionId` the chat and the app UIs share, R32). */
export function newSessionId() {
  const bytes = crypto.getRandomValues(new Uint8Array(12));
  return "web-" + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** A tool result as text (its text blocks; a note for the others). */
export function resultText(result) {
  const blocks = Array.isArray(result?.content) ? result.content : [];
  const parts = blocks.map((b) => (b?.type === "text" ? b.text : `[${b?.type ?? "unknown"} content]`));
  return parts.join("\n");
}
