// Issue 10, Must show 2 (second half): a 2025-11-25 client — the official TypeScript SDK 1.x
// (`Client` + `StreamableHTTPClientTransport`, initialize-first) — against /apps/mcp/{appId} where the
// app speaks 2026-07-28: the repository's test app over stdio with `"protocolVersion": "2026-07-28"` in
// its manifest, which the gateway then reaches discover-first. Tools listed (all pages) and called,
// resources and a template read, prompts listed and got, arguments completed, and the app's sampling
// and elicitation — `input_required` results on the app's side — put to this client as the requests
// of its own revision and answered by its request handlers. The app itself reports which revision
// the gateway spoke to it (its `client_info` tool), against a control app reached initialize-first.
// (The first half — a 2026-07-28 client against a 2025-11-25-only app — is tests/py/test_revisions.py.)
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CreateMessageRequestSchema, ElicitRequestSchema, ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { TEST_APP_BIN, gatewayConfig, startGateway, tempDir, waitRunning, writeManifest } from "./lib/gateway.mjs";
import { text, waitFor } from "./lib/grocery-harness.mjs";

/** A call the gateway should answer quickly: a missing relay must fail the test, not hang it. */
const CALL_TIMEOUT_MS = 15_000;
/** How long the test app waits for the client's answer to its own request before a clear tool error. */
const APP_WAIT_MS = 5_000;
/** How long a tool-list change may take to reach the client. */
const NOTIFY_TIMEOUT_MS = 10_000;


const state = { gateway: null, temp: null };
const url = (id) => state.gateway.url(`/apps/mcp/${id}`);

function testApp(id, name, extra = {}) {
  return {
    id,
    version: "1.0.0",
    transport: "stdio",
    command: TEST_APP_BIN,
    arguments: ["--name", name],
    toolNamePrefix: `${id}.`,
    startupTimeoutSeconds: 20,
    requestTimeoutSeconds: 30,
    ...extra,
  };
}

before(async () => {
  state.temp = tempDir("gateway-js-revisions-");
  // The app under test: 2026-07-28, reached discover-first.
  writeManifest(state.temp.apps, "t26", testApp("t26", "rev26", { protocolVersion: "2026-07-28" }));
  // The control: the same app without the declaration, reached initialize-first.
  writeManifest(state.temp.apps, "t25", testApp("t25", "rev25"));
  state.gateway = await startGateway(gatewayConfig(state.temp.apps), { dir: state.temp.dir });
  await waitRunning(state.gateway, ["t26", "t25"]);
});

after(async () => {
  await state.gateway?.stop();
  state.temp?.cleanup();
});

/**
 * A 2025-11-25 SDK client. `sampling` / `elicit` are request handlers; without one the capability
 * is not declared.
 */
async function connect(target, { sampling, elicit } = {}) {
  const capabilities = {};
  if (sampling) capabilities.sampling = {};
  if (elicit) capabilities.elicitation = { form: {} };
  const client = new Client({ name: "revisions-test", version: "1.0.0" }, { capabilities });
  if (sampling) client.setRequestHandler(CreateMessageRequestSchema, async (request) => sampling(request));
  if (elicit) client.setRequestHandler(ElicitRequestSchema, async (request) => elicit(request));
  const transport = new StreamableHTTPClientTransport(new URL(target));
  await client.connect(transport);
  return { client, transport };
}

/** Runs `body` with a connected client and closes it after. */
async function withClient(target, handlers, body) {
  const { client, transport } = await connect(target, handlers);
  try {
    return await body(client, transport);
  } finally {
    await client.close().catch(() => {});
  }
}

async function allTools(client) {
  const tools = [];
  let cursor;
  let pages = 0;
  do {
    const page = await client.listTools(cursor ? { cursor } : {});
    tools.push(...page.tools);
    cursor = page.nextCursor;
    pages += 1;
  } while (cursor && pages < 100);
  return { tools, pages };
}

const call = (client, name, args) => client.callTool({ name, arguments: args }, undefined, { timeout: CALL_TIMEOUT_MS });

describe("a 2025-11-25 client against /apps/mcp/{id} of an app that speaks 2026-07-28", () => {
  test("the client's session is 2025-11-25 while the gateway speaks 2026-07-28 to the app", async () => {
    const seen = {};
    for (const id of ["t26", "t25"]) {
      await withClient(url(id), {}, async (client, transport) => {
        assert.equal(transport.protocolVersion, "2025-11-25", `${id}: the client negotiated ${transport.protocolVersion}`);
        const info = await call(client, "client_info", {});
        assert.ok(!info.isError, text(info));
        seen[id] = info.structuredContent;
      });
    }
    // What the app itself saw from the gateway (its request context), not what the gateway claims.
    assert.equal(seen.t26.protocolVersion, "2026-07-28", `the app declared 2026-07-28 but was reached as ${JSON.stringify(seen.t26)}`);
    assert.equal(seen.t25.protocolVersion, "2025-11-25", `control: ${JSON.stringify(seen.t25)}`);
    assert.equal(seen.t26.clientInfo?.name, "openclaw-gateway", JSON.stringify(seen.t26));
  });

  test("tools: every page listed, a tool called", async () => {
    await withClient(url("t26"), {}, async (client) => {
      const { tools, pages } = await allTools(client);
      const names = tools.map((t) => t.name);
      // The test app pages tools/list by 10: the cursor went through the gateway and back.
      assert.ok(pages >= 2, `expected several pages, got ${pages}`);
      for (const tool of ["echo", "client_info", "sample", "elicit", "add_tool", "media"]) {
        assert.ok(names.includes(tool), `${tool} missing from ${names.join(", ")}`);
      }
      assert.equal(new Set(names).size, names.length, `duplicates across pages: ${names.join(", ")}`);
      const echo = tools.find((t) => t.name === "echo");
      assert.deepEqual(echo.inputSchema.required, ["text"]);
      assert.deepEqual(Object.keys(echo.outputSchema?.properties ?? {}).sort(), ["length", "text"]);

      const result = await call(client, "echo", { text: "across revisions ✓" });
      assert.ok(!result.isError, text(result));
      assert.equal(text(result), "echo: across revisions ✓");
      assert.deepEqual(result.structuredContent, { text: "across revisions ✓", length: 18 });
    });
  });

  test("resources: listed, read, and a template read", async () => {
    await withClient(url("t26"), {}, async (client) => {
      const { resources } = await client.listResources();
      assert.deepEqual(resources.map((r) => r.uri).sort(), ["test://readme", "ui://test-app/app.html"]);
      const readme = await client.readResource({ uri: "test://readme" });
      assert.deepEqual(readme.contents, [{ uri: "test://readme", mimeType: "text/plain", text: "rev26 is a test app for the MCP App gateway.\n" }]);
      const { resourceTemplates } = await client.listResourceTemplates();
      assert.deepEqual(resourceTemplates.map((t) => t.uriTemplate), ["test://items/{id}"]);
      const item = await client.readResource({ uri: "test://items/42" });
      assert.equal(item.contents[0].text, "item 42");
      const ui = await client.readResource({ uri: "ui://test-app/app.html" });
      assert.equal(ui.contents[0].mimeType, "text/html;profile=mcp-app");
      assert.match(ui.contents[0].text, /<html/i);
    });
  });

  test("prompts: listed and got", async () => {
    await withClient(url("t26"), {}, async (client) => {
      const { prompts } = await client.listPrompts();
      assert.deepEqual(
        prompts.map((p) => [p.name, p.arguments.map((a) => [a.name, a.required])]),
        [
          ["greet", [["name", true]]],
          ["summarize", [["topic", true]]],
        ],
      );
      const greet = await client.getPrompt({ name: "greet", arguments: { name: "Ada" } });
      assert.equal(greet.description, "Greeting for Ada");
      assert.deepEqual(greet.messages, [{ role: "user", content: { type: "text", text: "Say hello to Ada." } }]);
      const summary = await client.getPrompt({ name: "summarize", arguments: { topic: "MCP revisions" } });
      assert.equal(summary.messages[0].content.text, "Summarize MCP revisions in three sentences.");
    });
  });

  test("completion: a prompt argument and a resource template variable", async () => {
    await withClient(url("t26"), {}, async (client) => {
      const name = await client.complete({ ref: { type: "ref/prompt", name: "greet" }, argument: { name: "name", value: "" } });
      assert.deepEqual(name.completion.values, ["alice", "bob", "carol"]);
      const narrowed = await client.complete({ ref: { type: "ref/prompt", name: "summarize" }, argument: { name: "topic", value: "r" } });
      assert.deepEqual(narrowed.completion.values, ["rust"]);
      const id = await client.complete({ ref: { type: "ref/resource", uri: "test://items/{id}" }, argument: { name: "id", value: "4" } });
      assert.deepEqual(id.completion.values, ["42"]);
    });
  });

  test("the app's sampling request is answered by the client's sampling handler", async () => {
    const asked = [];
    const sampling = (request) => {
      asked.push(request.params);
      return { model: "revisions-model-25", role: "assistant", content: { type: "text", text: "forty-two" }, stopReason: "endTurn" };
    };
    await withClient(url("t26"), { sampling }, async (client) => {
      const result = await call(client, "sample", { prompt: "What is six times seven?", maxTokens: 20, timeoutMs: APP_WAIT_MS });
      assert.equal(asked.length, 1, `the sampling handler was called ${asked.length} times; result: ${JSON.stringify(result)}`);
      assert.deepEqual(asked[0].messages, [{ role: "user", content: { type: "text", text: "What is six times seven?" } }]);
      assert.equal(asked[0].maxTokens, 20);
      assert.ok(!result.isError, text(result));
      assert.equal(text(result), 'sample: the client answered "forty-two" (model revisions-model-25)');
      assert.deepEqual(result.structuredContent, { text: "forty-two", model: "revisions-model-25", stopReason: "endTurn" });
    });
  });

  test("the app's elicitation is answered by the client's elicitation handler", async () => {
    const asked = [];
    const elicit = (request) => {
      asked.push(request.params);
      return { action: "accept", content: { name: "Grace", color: "blue", count: 9 } };
    };
    await withClient(url("t26"), { elicit }, async (client) => {
      const result = await call(client, "elicit", { message: "Pick a colour", timeoutMs: APP_WAIT_MS });
      assert.equal(asked.length, 1, `the elicitation handler was called ${asked.length} times; result: ${JSON.stringify(result)}`);
      const form = asked[0];
      assert.equal(form.message, "Pick a colour");
      assert.ok(form.mode === undefined || form.mode === "form", `mode ${form.mode}`);
      assert.deepEqual(form.requestedSchema.properties.color.enum, ["red", "green", "blue"]);
      assert.equal(form.requestedSchema.properties.name.default, "Ada");
      assert.deepEqual(form.requestedSchema.required, ["color"]);
      assert.ok(!result.isError, text(result));
      assert.deepEqual(result.structuredContent, { action: "accept", content: { name: "Grace", color: "blue", count: 9 } });
    });
  });

  test("a client without sampling is told clearly, at once, that the call needs sampling", async () => {
    // The app's input_required question cannot be put to this client: the call ends at once with the
    // JSON-RPC error the 2026-07-28 revision names for it (-32021; 2025-11-25 has none of its own).
    await withClient(url("t26"), {}, async (client) => {
      const started = Date.now();
      let outcome;
      try {
        const result = await call(client, "sample", { prompt: "anyone there?", timeoutMs: APP_WAIT_MS });
        assert.fail(`the call was not refused: ${JSON.stringify(result)}`);
      } catch (e) {
        assert.equal(e.code, -32021, `${e}`);
        assert.ok(e.data?.requiredCapabilities?.sampling, JSON.stringify(e.data));
        outcome = e.message;
      }
      assert.match(outcome, /sampling/, outcome);
      assert.ok(Date.now() - started < APP_WAIT_MS, `the refusal took ${Date.now() - started} ms`);
    });
  });

  test("the app's tool-list change reaches the client as notifications/tools/list_changed", async () => {
    const newTool = `dyn_js_${process.pid}`;
    await withClient(url("t26"), {}, async (client) => {
      let changed = 0;
      client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
        changed += 1;
      });
      // The SDK opens its GET stream after initialize; give it a moment to be there.
      await new Promise((r) => setTimeout(r, 300));
      await withClient(url("t26"), {}, async (actor) => {
        const added = await call(actor, "add_tool", { name: newTool });
        assert.ok(!added.isError, text(added));
      });
      await waitFor(() => changed > 0, { timeoutMs: NOTIFY_TIMEOUT_MS, what: "notifications/tools/list_changed on the client's stream" });
      const { tools } = await allTools(client);
      assert.ok(tools.some((t) => t.name === newTool), `${newTool} is not listed after the change`);
    });
  });

  test("results carry no 2026-07-28-only fields for a 2025-11-25 client", async () => {
    // What rmcp's own server sends a 2025-11-25 client: no resultType, ttlMs, cacheScope, … .
    const MODERN_ONLY = ["resultType", "ttlMs", "cacheScope", "inputRequests", "requestState"];
    await withClient(url("t26"), {}, async (client) => {
      const results = {
        "tools/list": await client.listTools(),
        "tools/call": await call(client, "echo", { text: "x" }),
        "resources/list": await client.listResources(),
        "resources/read": await client.readResource({ uri: "test://readme" }),
        "resources/templates/list": await client.listResourceTemplates(),
        "prompts/list": await client.listPrompts(),
        "prompts/get": await client.getPrompt({ name: "greet", arguments: { name: "Ada" } }),
        "completion/complete": await client.complete({ ref: { type: "ref/prompt", name: "greet" }, argument: { name: "name", value: "a" } }),
      };
      const leaks = Object.entries(results).flatMap(([method, result]) =>
        MODERN_ONLY.filter((field) => field in result).map((field) => `${method}: ${field}=${JSON.stringify(result[field])}`),
      );
      assert.deepEqual(leaks, [], `2026-07-28 fields in 2025-11-25 results:\n${leaks.join("\n")}`);
    });
  });
});
