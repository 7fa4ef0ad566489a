// A scripted OpenAI-compatible Chat Completions server (the one stand-in the tests use: no model
// can run here). Each POST /v1/chat/completions takes the next scripted reply and streams it
// as the real API does (SSE `chat.completion.chunk`s, then `[DONE]`); every request body is
// recorded. With nothing scripted it answers a short text, so a stray turn never hangs.
import { createServer } from "node:http";

export const reply = {
  text: (text) => ({ text }),
  /** Text streamed piece by piece, `delayMs` apart (until the client goes away). */
  slowText: (pieces, delayMs) => ({ pieces, delayMs }),
  toolCall: (name, args = {}, id = `call_${Math.random().toString(16).slice(2, 10)}`) => ({ toolCalls: [{ id, name, arguments: JSON.stringify(args) }] }),
};

function chunk(delta, finish = null) {
  return `data: ${JSON.stringify({ id: "chatcmpl-scripted", object: "chat.completion.chunk", created: 0, model: "scripted", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
}

export async function startScriptedLlm() {
  const queue = [];
  const requests = [];
  const server = createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      if (req.method !== "POST" || !req.url.endsWith("/chat/completions")) {
        res.writeHead(404, { "Content-Type": "application/json" }).end(JSON.stringify({ error: { message: "not found" } }));
        return;
      }
      let parsed = null;
      try {
        parsed = JSON.parse(body);
      } catch {
        res.writeHead(400).end();
        return;
      }
      requests.push(parsed);
      const next = queue.shift() ?? { text: "(nothing scripted)" };
      res.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache" });
      res.write(chunk({ role: "assistant" }));
      if (next.pieces !== undefined) {
        const write = (i) => {
          if (res.destroyed || res.writableEnded) return;
          if (i === next.pieces.length) {
            res.write(chunk({}, "stop"));
            res.end("data: [DONE]\n\n");
            return;
          }
          res.write(chunk({ content: next.pieces[i] }));
          setTimeout(() => write(i + 1), next.delayMs);
        };
        write(0);
        return;
      }
      if (next.text !== undefined) {
        // Two pieces, so the page really streams.
        const half = Math.ceil(next.text.length / 2);
        res.write(chunk({ content: next.text.slice(0, half) }));
        res.write(chunk({ content: next.text.slice(half) }));
        res.write(chunk({}, "stop"));
      } else {
        next.toolCalls.forEach((call, index) => {
          res.write(chunk({ tool_calls: [{ index, id: call.id, type: "function", function: { name: call.name, arguments: call.arguments } }] }));
        });
        res.write(chunk({}, "tool_calls"));
      }
      res.end("data: [DONE]\n\n");
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    push: (...replies) => queue.push(...replies),
    requests,
    pending: () => queue.length,
    /** Drops every reply not taken yet (e.g. after a turn that was stopped). */
    clear: () => queue.splice(0, queue.length),
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}
