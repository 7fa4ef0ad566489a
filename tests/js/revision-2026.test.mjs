// MCP revision 2026-07-28 conformance over raw HTTP (issue 10, Must show 1). Every malformed or
// mismatched request is sent with plain `fetch` — no SDK — to BOTH gateway endpoints:
//   - /apps/mcp/t  the stdio test app's own endpoint (its unprefixed tool names);
//   - /mcp         the gateway as an MCP server (the same app's tools as `t.` + name).
// The cases are one table; each runs unchanged against each endpoint, so the same rule is checked
// identically on both. The expected answers are those of the rmcp library's Streamable HTTP server
// (the revision's rules: HTTP status and JSON-RPC error code).
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { TEST_APP_BIN, gatewayConfig, startGateway, tempDir, waitRunning, writeManifest } from "./lib/gateway.mjs";

const V2026 = "2026-07-28";
const V2025 = "2025-11-25";
/** Any single HTTP exchange that takes longer is a failure, not a hang. */
const REQUEST_TIMEOUT_MS = 20_000;

/** JSON-RPC error codes of the revision. */
const INVALID_PARAMS = -32602;
const METHOD_NOT_FOUND = -32601;
const HEADER_MISMATCH = -32020;
const MISSING_REQUIRED_CLIENT_CAPABILITY = -32021;
const UNSUPPORTED_PROTOCOL_VERSION = -32022;

const CLIENT_INFO = { name: "revision-2026-test", version: "1.0.0" };

/** A complete, valid 2026-07-28 request `_meta`; `omit` drops keys, `set` overrides them. */
function meta2026({ omit = [], set = {} } = {}) {
  const meta = {
    "io.modelcontextprotocol/protocolVersion": V2026,
    "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
    "io.modelcontextprotocol/clientCapabilities": {},
    ...set,
  };
  for (const key of omit) delete meta[`io.modelcontextprotocol/${key}`];
  return meta;
}

/** Methods whose `Mcp-Name` header repeats a body field (SEP-2243, as rmcp checks it). */
const NAME_FIELD = {
  "tools/call": "name",
  "prompts/get": "name",
  "resources/read": "uri",
  "resources/subscribe": "uri",
  "resources/unsubscribe": "uri",
  "tasks/get": "taskId",
  "tasks/update": "taskId",
  "tasks/cancel": "taskId",
};

/**
 * Headers of a POST; `version` null leaves MCP-Protocol-Version out. Given a JSON-RPC request
 * `body`, a 2026-07-28 POST also gets the revision's standard headers `Mcp-Method` and, where
 * the method names something, `Mcp-Name` (a valid 2026-07-28 request carries them). `extra` adds
 * or overrides headers; an `extra` value of null removes that header.
 */
function headersFor(version = V2026, extra = {}, body = null) {
  const headers = { "Content-Type": "application/json", Accept: "application/json, text/event-stream" };
  if (version !== null) headers["MCP-Protocol-Version"] = version;
  if (version !== null && version >= V2026 && body?.method) {
    headers["Mcp-Method"] = body.method;
    const field = NAME_FIELD[body.method];
    if (field && typeof body.params?.[field] === "string") headers["Mcp-Name"] = body.params[field];
  }
  for (const [key, value] of Object.entries(extra)) {
    if (value === null) delete headers[key];
    else headers[key] = value;
  }
  return headers;
}

/** Parses a complete SSE body into its JSON messages (events without data, e.g. priming, are skipped). */
function parseSse(text) {
  const messages = [];
  for (const block of text.split(/\r?\n\r?\n/)) {
    const data = block
      .split(/\r?\n/)
      .filter((line) => line.startsWith("data:"))
      .map((line) => line.slice(5).replace(/^ /, ""))
      .join("\n");
    if (data.trim()) messages.push(JSON.parse(data));
  }
  return messages;
}

/**
 * Reads a POST's answer, JSON or SSE alike: `{ status, headers, contentType, text, messages }`,
 * where `messages` are the JSON-RPC messages in order (one for a JSON body, every `data:` event
 * for a stream). A body that is not JSON leaves `messages` empty and `text` as sent.
 */
async function readAnswer(response) {
  const contentType = response.headers.get("content-type") ?? "";
  const text = await response.text();
  let messages = [];
  if (contentType.includes("text/event-stream")) messages = parseSse(text);
  else if (text.trim()) {
    try {
      const body = JSON.parse(text);
      messages = Array.isArray(body) ? body : [body];
    } catch {
      messages = [];
    }
  }
  return { status: response.status, headers: response.headers, contentType, text, messages };
}

/** The answer to request `id` (a result or an error) among an exchange's messages. */
const answerTo = (answer, id) => answer.messages.find((m) => m.id === id && ("result" in m || "error" in m));

const describeAnswer = (answer) => `HTTP ${answer.status} ${answer.contentType}: ${answer.text.slice(0, 1500)}`;

let nextId = 1;

/** POSTs one JSON-RPC request; `meta` (unless undefined) becomes `params._meta`. */
async function rpc(url, { method, params = {}, meta, version = V2026, headers = {} }) {
  const id = nextId++;
  const body = { jsonrpc: "2.0", id, method, params: meta === undefined ? params : { ...params, _meta: meta } };
  const response = await fetch(url, {
    method: "POST",
    headers: headersFor(version, headers, body),
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
  });
  const answer = await readAnswer(response);
  return { ...answer, id, message: answerTo(answer, id) };
}

/** Asserts an HTTP status and a JSON-RPC error code (with the answer in every failure message). */
function assertError(answer, status, code) {
  const detail = describeAnswer(answer);
  assert.ok(answer.message?.error, `expected a JSON-RPC error ${code}, got ${detail}`);
  assert.equal(answer.message.error.code, code, `JSON-RPC error code; ${detail}`);
  assert.equal(answer.status, status, `HTTP status; ${detail}`);
}

/** Asserts HTTP 200 with a JSON-RPC result, which it returns. */
function assertResult(answer) {
  const detail = describeAnswer(answer);
  assert.equal(answer.status, 200, `HTTP status; ${detail}`);
  assert.ok(answer.message?.result, `expected a JSON-RPC result, got ${detail}`);
  return answer.message.result;
}

/**
 * Reads an SSE response incrementally until `until(message)` holds for a JSON-RPC message, then
 * aborts the request. Returns `{ status, contentType, messages }` (the messages read so far).
 */
async function readStreamUntil(url, body, headers, until, timeoutMs = REQUEST_TIMEOUT_MS) {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(new Error(`no matching message within ${timeoutMs} ms`)), timeoutMs);
  try {
    const response = await fetch(url, { method: "POST", headers, body: JSON.stringify(body), signal: controller.signal });
    const contentType = response.headers.get("content-type") ?? "";
    if (!contentType.includes("text/event-stream")) {
      const answer = await readAnswer(response);
      return { status: answer.status, contentType, messages: answer.messages, text: answer.text };
    }
    const messages = [];
    const decoder = new TextDecoder();
    let buffer = "";
    for await (const chunk of response.body) {
      buffer += decoder.decode(chunk, { stream: true });
      let end;
      while ((end = buffer.search(/\r?\n\r?\n/)) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end).replace(/^\r?\n\r?\n/, "");
        const parsed = parseSse(`${block}\n\n`);
        messages.push(...parsed);
        if (parsed.some(until)) return { status: response.status, contentType, messages, text: "" };
      }
    }
    return { status: response.status, contentType, messages, text: buffer };
  } finally {
    clearTimeout(timer);
    controller.abort();
  }
}

// ---------------------------------------------------------------------------------------------
// The endpoints. URLs are only known after `before`.

const state = { gateway: null, temp: null };

const ENDPOINTS = [
  { name: "/apps/mcp/t (stdio test app)", path: "/apps/mcp/t", tool: (name) => name },
  { name: "/mcp (test app as t.)", path: "/mcp", tool: (name) => `t.${name}` },
];

before(async () => {
  state.temp = tempDir("gateway-js-rev2026-");
  writeManifest(state.temp.apps, "t", {
    id: "t",
    version: "1.0.0",
    transport: "stdio",
    command: TEST_APP_BIN,
    arguments: ["--name", "rev2026-stdio", "--schema-2020"],
    toolNamePrefix: "t.",
    startupTimeoutSeconds: 20,
    requestTimeoutSeconds: 30,
  });
  state.gateway = await startGateway(gatewayConfig(state.temp.apps), { dir: state.temp.dir });
  await waitRunning(state.gateway, ["t"]);
});

after(async () => {
  await state.gateway?.stop();
  state.temp?.cleanup();
});

// ---------------------------------------------------------------------------------------------
// The cases. A case is either one request (`request(ep)` → the rpc options) with `expect(answer,
// ep)`, or a whole exchange `run(url, ep)`. Names lead with the rule they check.

// test-app --schema-2020: the schemas of its tool schema_2020 (mcpapps/test-app/src/main.rs).
const SCHEMA_2020_INPUT = {
  $schema: "https://json-schema.org/draft/2020-12/schema",
  $id: "urn:test-app:schema_2020",
  type: "object",
  $defs: { point: { type: "array", prefixItems: [{ type: "number" }, { type: "number" }], items: false } },
  properties: {
    at: { $ref: "#/$defs/point" },
    label: { type: ["string", "null"], minLength: 1 },
    tags: { type: "array", items: { type: "string" }, uniqueItems: true },
  },
  required: ["at"],
  dependentRequired: { label: ["tags"] },
  unevaluatedProperties: false,
};
const SCHEMA_2020_OUTPUT = {
  $schema: "https://json-schema.org/draft/2020-12/schema",
  type: "object",
  properties: { ok: { const: true } },
  unevaluatedProperties: false,
};

const CASES = [
  {
    name: "resultType and cache hints: a valid tools/list answers 200, resultType complete, ttlMs and cacheScope",
    request: () => ({ method: "tools/list", meta: meta2026() }),
    expect: (answer) => {
      const result = assertResult(answer);
      assert.equal(result.resultType, "complete", describeAnswer(answer));
      assert.equal(typeof result.ttlMs, "number", `ttlMs; ${describeAnswer(answer)}`);
      assert.ok(result.ttlMs >= 0, `ttlMs >= 0; ${describeAnswer(answer)}`);
      assert.ok(["private", "public"].includes(result.cacheScope), `cacheScope; ${describeAnswer(answer)}`);
      assert.ok(Array.isArray(result.tools) && result.tools.length > 0, `tools listed; ${describeAnswer(answer)}`);
    },
  },
  {
    name: "server/discover: 200 with supportedVersions listing 2026-07-28 and the 2025 revisions",
    request: () => ({ method: "server/discover", meta: meta2026() }),
    expect: (answer) => {
      const result = assertResult(answer);
      const versions = result.supportedVersions ?? [];
      for (const v of [V2026, "2025-11-25", "2025-06-18", "2025-03-26"]) {
        assert.ok(versions.includes(v), `supportedVersions has ${v}; ${describeAnswer(answer)}`);
      }
      assert.ok(result.capabilities?.tools, `tools capability; ${describeAnswer(answer)}`);
    },
  },
  {
    name: "per-request _meta validation: header 2026-07-28 but _meta without protocolVersion → 400, -32602",
    request: () => ({ method: "tools/list", meta: meta2026({ omit: ["protocolVersion"] }) }),
    expect: (answer) => assertError(answer, 400, INVALID_PARAMS),
  },
  {
    name: "per-request _meta validation: _meta without clientCapabilities → 400, -32602",
    request: () => ({ method: "tools/list", meta: meta2026({ omit: ["clientCapabilities"] }) }),
    expect: (answer) => assertError(answer, 400, INVALID_PARAMS),
  },
  {
    name: "per-request _meta validation: clientCapabilities that is not an object → 400, -32602",
    request: () => ({
      method: "tools/list",
      meta: meta2026({ set: { "io.modelcontextprotocol/clientCapabilities": "sampling" } }),
    }),
    expect: (answer) => assertError(answer, 400, INVALID_PARAMS),
  },
  {
    // The 2026-07-28 schema requires protocolVersion and clientCapabilities in a request's _meta;
    // clientInfo is optional (rmcp's RequestMetaObject::DRAFT_REQUIRED_KEYS), so its absence is
    // no error.
    name: "per-request _meta validation: _meta without clientInfo is still valid (clientInfo is optional) → 200",
    request: () => ({ method: "tools/list", meta: meta2026({ omit: ["clientInfo"] }) }),
    expect: (answer) => {
      const result = assertResult(answer);
      assert.equal(result.resultType, "complete", describeAnswer(answer));
    },
  },
  {
    name: "unsupported version: _meta and header 2099-01-01 → 400, -32022 with data.supported",
    request: () => ({
      method: "tools/list",
      version: "2099-01-01",
      meta: meta2026({ set: { "io.modelcontextprotocol/protocolVersion": "2099-01-01" } }),
    }),
    expect: (answer) => {
      assertError(answer, 400, UNSUPPORTED_PROTOCOL_VERSION);
      const supported = answer.message.error.data?.supported ?? [];
      assert.ok(supported.includes(V2026), `data.supported has ${V2026}; ${describeAnswer(answer)}`);
      assert.ok(supported.includes(V2025), `data.supported has ${V2025}; ${describeAnswer(answer)}`);
    },
  },
  {
    name: "header/_meta mismatch: header 2025-11-25, _meta 2026-07-28 → 400, -32020",
    request: () => ({ method: "tools/list", version: V2025, meta: meta2026() }),
    expect: (answer) => assertError(answer, 400, HEADER_MISMATCH),
  },
  {
    name: "header/_meta mismatch: _meta 2026-07-28 without an MCP-Protocol-Version header → 400, -32020",
    request: () => ({ method: "tools/list", version: null, meta: meta2026() }),
    expect: (answer) => assertError(answer, 400, HEADER_MISMATCH),
  },
  {
    name: "standard headers: a 2026-07-28 request without Mcp-Method → 400, -32020",
    request: () => ({ method: "tools/list", meta: meta2026(), headers: { "Mcp-Method": null } }),
    expect: (answer) => assertError(answer, 400, HEADER_MISMATCH),
  },
  {
    name: "standard headers: Mcp-Name disagreeing with the called tool → 400, -32020",
    request: (ep) => ({
      method: "tools/call",
      params: { name: ep.tool("media"), arguments: {} },
      meta: meta2026(),
      headers: { "Mcp-Name": ep.tool("cancellations") },
    }),
    expect: (answer) => assertError(answer, 400, HEADER_MISMATCH),
  },
  ...[
    ["ping", {}],
    ["resources/subscribe", { uri: "test://readme" }],
    ["resources/unsubscribe", { uri: "test://readme" }],
    ["logging/setLevel", { level: "info" }],
  ].map(([method, params]) => ({
    name: `removed methods: ${method} from a 2026-07-28 client → 404, -32601`,
    request: () => ({ method, params, meta: meta2026() }),
    expect: (answer) => assertError(answer, 404, METHOD_NOT_FOUND),
  })),
  {
    // The revision removed the handshake, but a server that also speaks the earlier revisions must
    // still answer it: rmcp treats every `initialize` as the initialize-first fallback, whatever
    // version it names, and negotiates down to the newest initialize-era revision.
    name: "removed methods: initialize naming 2026-07-28 is answered as the initialize-first handshake, at 2025-11-25",
    request: () => ({
      method: "initialize",
      params: { protocolVersion: V2026, capabilities: {}, clientInfo: CLIENT_INFO },
      meta: meta2026(),
    }),
    expect: (answer) => {
      const result = assertResult(answer);
      assert.equal(result.protocolVersion, V2025, describeAnswer(answer));
    },
  },
  {
    name: "declared-capability checks: a tool that samples, called without the sampling capability → 400, -32021",
    request: (ep) => ({
      method: "tools/call",
      params: { name: ep.tool("sample"), arguments: { prompt: "Say hi", timeoutMs: 5000 } },
      meta: meta2026(),
    }),
    expect: (answer) => {
      assertError(answer, 400, MISSING_REQUIRED_CLIENT_CAPABILITY);
      assert.ok(
        answer.message.error.data?.requiredCapabilities?.sampling,
        `data.requiredCapabilities.sampling; ${describeAnswer(answer)}`,
      );
    },
  },
  {
    name: "subscriptions/listen: an SSE stream acknowledging the accepted filter with a subscriptionId",
    run: async (url) => {
      const id = nextId++;
      const filter = { toolsListChanged: true };
      const body = { jsonrpc: "2.0", id, method: "subscriptions/listen", params: { notifications: filter, _meta: meta2026() } };
      const isAck = (m) => m.method === "notifications/subscriptions/acknowledged";
      const isAnswer = (m) => m.id === id && ("result" in m || "error" in m);
      const read = await readStreamUntil(url, body, headersFor(V2026, {}, body), (m) => isAck(m) || isAnswer(m));
      const detail = `HTTP ${read.status} ${read.contentType}: ${JSON.stringify(read.messages).slice(0, 1500)} ${read.text ?? ""}`;
      assert.equal(read.status, 200, `HTTP status; ${detail}`);
      assert.match(read.contentType, /text\/event-stream/, `an SSE stream; ${detail}`);
      const first = read.messages[0];
      assert.ok(first && isAck(first), `the first message is the acknowledgement; ${detail}`);
      assert.deepEqual(first.params.notifications, filter, `the accepted filter; ${detail}`);
      assert.equal(first.params._meta?.["io.modelcontextprotocol/subscriptionId"], id, `_meta subscriptionId; ${detail}`);
    },
  },
  {
    name: "JSON Schema 2020-12: tools/list passes a tool's 2020-12 input and output schemas exactly as the app sent them",
    run: async (url, ep) => {
      let tool;
      let cursor;
      do {
        const answer = await rpc(url, { method: "tools/list", params: cursor ? { cursor } : {}, meta: meta2026() });
        const result = assertResult(answer);
        tool = result.tools.find((t) => t.name === ep.tool("schema_2020")) ?? tool;
        cursor = result.nextCursor;
      } while (cursor && !tool);
      assert.ok(tool, `${ep.tool("schema_2020")} is listed`);
      assert.deepEqual(tool.inputSchema, SCHEMA_2020_INPUT);
      assert.deepEqual(tool.outputSchema, SCHEMA_2020_OUTPUT);
    },
  },
  {
    name: "initialize-first fallback: initialize (2025-11-25) gets a session; tools/list in it answers without resultType",
    run: async (url) => {
      const init = await rpc(url, {
        method: "initialize",
        version: null,
        params: { protocolVersion: V2025, capabilities: {}, clientInfo: CLIENT_INFO },
      });
      const initResult = assertResult(init);
      assert.equal(initResult.protocolVersion, V2025, describeAnswer(init));
      const session = init.headers.get("mcp-session-id");
      assert.ok(session, `an Mcp-Session-Id; ${describeAnswer(init)}`);
      const sessionHeaders = { "Mcp-Session-Id": session };
      const initialized = await fetch(url, {
        method: "POST",
        headers: headersFor(V2025, sessionHeaders),
        body: JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }),
        signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
      });
      await initialized.text();
      assert.ok(initialized.status === 202 || initialized.status === 200, `notifications/initialized: HTTP ${initialized.status}`);
      const list = await rpc(url, { method: "tools/list", version: V2025, headers: sessionHeaders });
      const result = assertResult(list);
      assert.ok(Array.isArray(result.tools) && result.tools.length > 0, describeAnswer(list));
      assert.equal(result.resultType, undefined, `no resultType for a 2025-11-25 client; ${describeAnswer(list)}`);
      // End the session politely; /apps/mcp keeps none (405), /mcp ends it.
      await fetch(url, { method: "DELETE", headers: headersFor(V2025, sessionHeaders), signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) })
        .then((r) => r.text())
        .catch(() => {});
    },
  },
];

for (const ep of ENDPOINTS) {
  describe(`MCP 2026-07-28 over raw HTTP: ${ep.name}`, () => {
    for (const c of CASES) {
      test(c.name, async () => {
        const url = state.gateway.url(ep.path);
        if (c.run) return c.run(url, ep);
        const answer = await rpc(url, c.request(ep));
        c.expect(answer, ep);
      });
    }
  });
}
