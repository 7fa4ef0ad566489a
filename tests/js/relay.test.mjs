// The faithful relay of server-to-client flows (SPEC R42, issue 9 Must show 3, 4 and 5), with the
// official TypeScript client (an initialize-era, 2025-11-25 client). The SAME assertions run against:
//   - the test app directly, over its own Streamable HTTP (this validates the tests themselves);
//   - the gateway's /apps/mcp/{appId} (the app's own names), for a stdio app and an http app;
//   - the gateway's /mcp (names with the app's toolNamePrefix), for the same two apps.
// What is checked: progress notifications before the result, log messages, sampling / elicitation /
// roots requests answered by the client's handlers (and a clear tool error for a client without the
// capability), a client cancel observed by the app; the media tool's blocks through /mcp
// byte-identical to a direct call, with the tool's title, annotations, icons and output schema; and
// GroceryInventory's guided_stock_count / guided_purchase_order through the gateway, checked over its
// REST API.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  LoggingMessageNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";
import {
  TEST_APP_BIN,
  freePort,
  gatewayConfig,
  groceryManifest,
  startGateway,
  stopChild,
  tempDir,
  waitRunning,
  writeManifest,
} from "./lib/gateway.mjs";
import { autoAnswer } from "./lib/grocery-harness.mjs";

/** A call that the relay should answer quickly: a missing relay must fail the test, not hang it. */
const CALL_TIMEOUT_MS = 15_000;
/** How long the test app waits for the client's answer to its own request before a clear tool error. */
const APP_WAIT_MS = 5_000;

const text = (result) => (result.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("\n");

const waitFor = async (what, check, timeoutMs = 5_000) => {
  const start = Date.now();
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() - start > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
};

/** Starts `test-app --http 127.0.0.1:0` and waits for the URL it prints. */
async function startDirectTestApp() {
  const child = spawn(TEST_APP_BIN, ["--http", "127.0.0.1:0", "--name", "relay-direct"], { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`test-app did not listen:\n${stderr}`)), 20_000);
    child.stderr.setEncoding("utf8").on("data", (chunk) => {
      stderr += chunk;
      const match = stderr.match(/listening on (http:\/\/\S+\/mcp)/);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`test-app exited early (${code}):\n${stderr}`));
    });
  });
  child.removeAllListeners("exit");
  return { url, child, stderr: () => stderr };
}

/**
 * An SDK client for `url`. `handlers` chooses the declared capabilities: `sampling`, `elicit`,
 * `roots` are request handlers; without one, the capability is not declared.
 */
async function connect(url, { sampling, elicit, roots } = {}) {
  const capabilities = {};
  if (sampling) capabilities.sampling = {};
  if (elicit) capabilities.elicitation = { form: { applyDefaults: true } };
  if (roots) capabilities.roots = { listChanged: true };
  const client = new Client({ name: "relay-test", version: "1.0.0" }, { capabilities });
  if (sampling) client.setRequestHandler(CreateMessageRequestSchema, async (request) => sampling(request));
  if (elicit) client.setRequestHandler(ElicitRequestSchema, async (request) => elicit(request));
  if (roots) client.setRequestHandler(ListRootsRequestSchema, async (request) => roots(request));
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  return client;
}

// ---------------------------------------------------------------------------------------------
// The endpoints. URLs are only known after `before`, so each endpoint resolves its URL lazily.

const state = { direct: null, gateway: null, temp: null, groceryBase: null, groceryUrl: null };

const ENDPOINTS = [
  { name: "test-app directly (its own HTTP)", url: () => state.direct.url, prefix: "", modelSide: false },
  { name: "/apps/mcp/t (stdio app)", url: () => state.gateway.url("/apps/mcp/t"), prefix: "", modelSide: false },
  { name: "/apps/mcp/th (http app)", url: () => state.gateway.url("/apps/mcp/th"), prefix: "", modelSide: false },
  { name: "/mcp, t. (stdio app)", url: () => state.gateway.url("/mcp"), prefix: "t.", modelSide: true, appId: "t" },
  { name: "/mcp, th. (http app)", url: () => state.gateway.url("/mcp"), prefix: "th.", modelSide: true, appId: "th" },
];

/** A resource URI as /mcp names it (README, "Everything the apps offer, through /mcp"): the app in the authority. */
const mcpUri = (appId, uri) => {
  const [, scheme, rest] = uri.match(/^([A-Za-z][A-Za-z0-9+.-]*):(.*)$/s) ?? [];
  if (scheme === undefined) return uri;
  return rest.startsWith("//") ? `${scheme}://${appId}/${rest.slice(2)}` : `${scheme}://${appId}!/${rest}`;
};

/** A content block as /mcp passes it on: the same, its resource URIs named as /mcp names them. */
const asOnMcp = (appId, block) => {
  if (block.type === "resource_link") return { ...block, uri: mcpUri(appId, block.uri) };
  if (block.type === "resource") return { ...block, resource: { ...block.resource, uri: mcpUri(appId, block.resource.uri) } };
  return block;
};

before(async () => {
  state.direct = await startDirectTestApp();
  state.temp = tempDir("gateway-js-relay-");
  const thPort = await freePort();
  const common = { version: "1.0.0", startupTimeoutSeconds: 20, requestTimeoutSeconds: 30 };
  writeManifest(state.temp.apps, "t", { id: "t", transport: "stdio", command: TEST_APP_BIN, arguments: ["--name", "relay-stdio"], toolNamePrefix: "t.", ...common });
  writeManifest(state.temp.apps, "th", {
    id: "th",
    transport: "http",
    url: `http://127.0.0.1:${thPort}/mcp`,
    command: TEST_APP_BIN,
    arguments: ["--http", `127.0.0.1:${thPort}`, "--name", "relay-http"],
    toolNamePrefix: "th.",
    ...common,
  });
  const grocery = await groceryManifest();
  state.groceryUrl = grocery.url;
  state.groceryBase = grocery.url.replace(/\/mcp$/, "");
  writeManifest(state.temp.apps, "grocery-inventory", grocery);
  state.gateway = await startGateway(gatewayConfig(state.temp.apps), { dir: state.temp.dir });
  await waitRunning(state.gateway, ["t", "th", "grocery-inventory"]);
});

after(async () => {
  await state.gateway?.stop();
  if (state.direct) await stopChild(state.direct.child);
  state.temp?.cleanup();
});

/** Opens clients for one test and closes them at its end. */
function clientsFor(ep) {
  const open = [];
  return {
    connect: async (handlers) => {
      const client = await connect(ep.url(), handlers);
      open.push(client);
      return client;
    },
    close: async () => {
      for (const c of open) await c.close().catch(() => {});
    },
  };
}

/** The harness itself must be right: the tool is offered at this endpoint under this name. */
async function assertToolOffered(client, ep, tool) {
  const names = [];
  let cursor;
  do {
    const page = await client.listTools(cursor ? { cursor } : {});
    names.push(...page.tools.map((t) => t.name));
    cursor = page.nextCursor;
  } while (cursor);
  assert.ok(names.includes(ep.prefix + tool), `harness: ${ep.prefix + tool} is not offered at ${ep.name}: ${names.join(", ")}`);
}

/** A tool error's text: on /mcp the model-side rule (R20) puts "Error: " in front. */
function errorText(result, ep) {
  const t = text(result);
  return ep.modelSide ? t.replace(/^Error: /, "") : t;
}

for (const ep of ENDPOINTS) {
  describe(`relay: ${ep.name}`, () => {
    const call = (client, tool, args, options = {}) =>
      client.callTool({ name: ep.prefix + tool, arguments: args }, undefined, { timeout: CALL_TIMEOUT_MS, ...options });

    test("progress notifications arrive before the result", async () => {
      const c = clientsFor(ep);
      try {
        const client = await c.connect();
        await assertToolOffered(client, ep, "progress");
        const events = [];
        const result = await call(client, "progress", { steps: 3, delayMs: 30 }, { onprogress: (p) => events.push(p) });
        // The SDK drops progress for a request once its result has arrived: seen here = before it.
        assert.equal(text(result), "progress done: 3 steps", JSON.stringify(result));
        assert.deepEqual(
          events.map((p) => [p.progress, p.total, p.message]),
          [
            [1, 3, "step 1 of 3"],
            [2, 3, "step 2 of 3"],
            [3, 3, "step 3 of 3"],
          ],
          `progress received: ${JSON.stringify(events)}`,
        );
      } finally {
        await c.close();
      }
    });

    test("log messages arrive before the result", async () => {
      const c = clientsFor(ep);
      try {
        const client = await c.connect();
        await assertToolOffered(client, ep, "log");
        const marker = `relay-log-${Math.random().toString(36).slice(2)}`;
        const logs = [];
        client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
          if (String(n.params.data).startsWith(marker)) logs.push(n.params);
        });
        const result = await call(client, "log", { level: "warning", message: marker, count: 2 });
        const atResult = logs.length;
        assert.ok(!result.isError, text(result));
        assert.match(text(result), /log: sent 2 message/);
        await waitFor(`2 log messages (got ${JSON.stringify(logs)})`, () => logs.length >= 2, 3_000);
        assert.equal(atResult, 2, `only ${atResult} of the 2 log messages had arrived when the result did`);
        assert.deepEqual(
          logs.map((l) => [l.level, l.logger, l.data]),
          [
            ["warning", "test-app", `${marker} [1/2]`],
            ["warning", "test-app", `${marker} [2/2]`],
          ],
        );
      } finally {
        await c.close();
      }
    });

    test("a sampling request is answered by the client's handler", async () => {
      const c = clientsFor(ep);
      try {
        const asked = [];
        const client = await c.connect({
          sampling: (request) => {
            asked.push(request.params);
            return { model: "relay-model-7", role: "assistant", content: { type: "text", text: "forty-two" }, stopReason: "endTurn" };
          },
        });
        await assertToolOffered(client, ep, "sample");
        const result = await call(client, "sample", { prompt: "What is six times seven?", maxTokens: 20, timeoutMs: APP_WAIT_MS });
        assert.equal(asked.length, 1, `the client's sampling handler was called ${asked.length} times; result: ${JSON.stringify(result)}`);
        assert.equal(asked[0].messages[0].content.text, "What is six times seven?");
        assert.equal(asked[0].maxTokens, 20);
        assert.ok(!result.isError, text(result));
        assert.match(text(result), /forty-two/);
        assert.match(text(result), /relay-model-7/);
        assert.deepEqual(result.structuredContent, { text: "forty-two", model: "relay-model-7", stopReason: "endTurn" });
      } finally {
        await c.close();
      }
    });

    test("an elicitation request (form with defaults and enum choices) is answered by the client's handler", async () => {
      const c = clientsFor(ep);
      try {
        const asked = [];
        const client = await c.connect({
          elicit: (request) => {
            asked.push(request.params);
            // Only the choice: the SDK fills the other fields from the form's defaults (applyDefaults).
            return { action: "accept", content: { color: "green" } };
          },
        });
        await assertToolOffered(client, ep, "elicit");
        const result = await call(client, "elicit", { message: "Pick a colour", timeoutMs: APP_WAIT_MS });
        assert.equal(asked.length, 1, `the client's elicitation handler was called ${asked.length} times; result: ${JSON.stringify(result)}`);
        const form = asked[0];
        assert.equal(form.message, "Pick a colour");
        assert.ok(form.mode === undefined || form.mode === "form", `mode ${form.mode}`);
        const props = form.requestedSchema.properties;
        assert.deepEqual(props.color.enum, ["red", "green", "blue"], JSON.stringify(form.requestedSchema));
        assert.equal(props.color.default, "red");
        assert.equal(props.name.type, "string");
        assert.equal(props.name.default, "Ada");
        assert.equal(props.count.type, "number");
        assert.equal(props.count.default, 3);
        assert.deepEqual(form.requestedSchema.required, ["color"]);
        assert.ok(!result.isError, text(result));
        assert.match(text(result), /action=accept/);
        assert.match(text(result), /green/);
        assert.deepEqual(result.structuredContent, { action: "accept", content: { color: "green", name: "Ada", count: 3 } });
      } finally {
        await c.close();
      }
    });

    test("roots/list is answered by the client's roots handler", async () => {
      const c = clientsFor(ep);
      try {
        let asked = 0;
        const roots = [
          { uri: "file:///tmp/relay-root", name: "relay root" },
          { uri: "file:///srv/data", name: "data" },
        ];
        const client = await c.connect({
          roots: () => {
            asked += 1;
            return { roots };
          },
        });
        await assertToolOffered(client, ep, "roots");
        const result = await call(client, "roots", { timeoutMs: APP_WAIT_MS });
        assert.equal(asked, 1, `the client's roots handler was called ${asked} times; result: ${JSON.stringify(result)}`);
        assert.ok(!result.isError, text(result));
        assert.deepEqual(result.structuredContent, { roots });
        assert.match(text(result), /roots: 2 root\(s\): file:\/\/\/tmp\/relay-root, file:\/\/\/srv\/data/);
      } finally {
        await c.close();
      }
    });

    test("a client without sampling, elicitation or roots gets the tool's clear error", async () => {
      const c = clientsFor(ep);
      try {
        const client = await c.connect();
        await assertToolOffered(client, ep, "sample");
        for (const tool of ["sample", "elicit", "roots"]) {
          const args = tool === "sample" ? { prompt: "anyone there?", timeoutMs: APP_WAIT_MS } : { timeoutMs: APP_WAIT_MS };
          const result = await call(client, tool, args);
          assert.equal(result.isError, true, `${tool}: ${JSON.stringify(result)}`);
          assert.ok(errorText(result, ep).startsWith(`${tool}: `), `${tool}: ${text(result)}`);
          // The app saw either no capability or a JSON-RPC error from the gateway, never a hang.
          assert.match(errorText(result, ep), /cannot|capability|not support|failed/, text(result));
        }
      } finally {
        await c.close();
      }
    });

    test("a client cancel stops the call in the app", async () => {
      const c = clientsFor(ep);
      try {
        const client = await c.connect();
        await assertToolOffered(client, ep, "cancellable");
        const count = async () => {
          const r = await call(client, "cancellations", {});
          assert.ok(!r.isError, text(r));
          return r.structuredContent;
        };
        const before = await count();
        const controller = new AbortController();
        const started = Date.now();
        const pending = call(client, "cancellable", { ms: 30_000 }, { signal: controller.signal });
        await new Promise((r) => setTimeout(r, 400));
        controller.abort("relay test cancel");
        await assert.rejects(pending);
        const seen = await waitFor(
          "the app to observe the cancellation",
          async () => {
            const now = await count();
            return now.count > before.count ? now : null;
          },
          5_000,
        ).catch(async (e) => {
          throw new Error(`${e.message}: cancellations stayed at ${JSON.stringify(await count())}`);
        });
        assert.equal(seen.last.tool, "cancellable");
        assert.ok(seen.last.afterMs < 10_000, `cancelled after ${seen.last.afterMs} ms`);
        assert.ok(Date.now() - started < 15_000);
      } finally {
        await c.close();
      }
    });
  });
}

// ---------------------------------------------------------------------------------------------
// Every content block, byte for byte, and the tool's metadata, through /mcp (and /apps/mcp).

describe("relay: the media tool keeps every block and the tool's metadata", () => {
  const decode = (block) => {
    if (block.type === "image" || block.type === "audio") return Buffer.from(block.data, "base64");
    if (block.type === "resource" && block.resource.blob !== undefined) return Buffer.from(block.resource.blob, "base64");
    if (block.type === "resource") return Buffer.from(block.resource.text, "utf8");
    if (block.type === "text") return Buffer.from(block.text, "utf8");
    return Buffer.from(JSON.stringify(block), "utf8");
  };
  const toolOf = async (client, name) => {
    let cursor;
    do {
      const page = await client.listTools(cursor ? { cursor } : {});
      const found = page.tools.find((t) => t.name === name);
      if (found) return found;
      cursor = page.nextCursor;
    } while (cursor);
    return undefined;
  };

  for (const ep of ENDPOINTS.slice(1)) {
    test(`${ep.name}: the same blocks, byte-identical (on /mcp, resource URIs with the app in them), and title/annotations/icons/outputSchema`, async () => {
      const direct = await connect(state.direct.url);
      const client = await connect(ep.url());
      try {
        const expected = await direct.callTool({ name: "media", arguments: {} });
        const expectedTool = await toolOf(direct, "media");
        // The direct call is what the app returns: make sure the fixture is what we think it is.
        assert.deepEqual(expected.content.map((b) => b.type), ["text", "image", "audio", "resource", "resource", "resource_link"]);
        assert.deepEqual([...decode(expected.content[1]).subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], "PNG signature");
        assert.equal(decode(expected.content[2]).subarray(0, 4).toString(), "RIFF");
        assert.equal(decode(expected.content[2]).subarray(8, 12).toString(), "WAVE");
        assert.equal(expectedTool.title, "Media sampler");
        assert.equal(expectedTool.annotations?.readOnlyHint, true);
        assert.equal(expectedTool.icons?.[0]?.mimeType, "image/png");
        assert.ok(expectedTool.outputSchema?.properties?.blocks, "outputSchema");

        const tool = await toolOf(client, ep.prefix + "media");
        assert.ok(tool, `harness: ${ep.prefix}media is not offered at ${ep.name}`);
        const got = await client.callTool({ name: ep.prefix + "media", arguments: {} }, undefined, { timeout: CALL_TIMEOUT_MS });
        assert.ok(!got.isError, JSON.stringify(got));

        // Every difference is collected, so that one run shows all of them.
        const problems = [];
        const same = (what, actual, wanted) => {
          try {
            assert.deepStrictEqual(actual, wanted);
          } catch {
            problems.push(`${what}: got ${JSON.stringify(actual)}, expected ${JSON.stringify(wanted)}`);
          }
        };
        same("block types", got.content.map((b) => b.type), expected.content.map((b) => b.type));
        for (const [i, block] of expected.content.entries()) {
          const other = got.content.find((b, j) => j === i && b.type === block.type);
          if (!other) continue;
          // /mcp names the app's resources its own way (the app in the URI); nothing else differs.
          const wanted = ep.appId ? asOnMcp(ep.appId, block) : block;
          if (Buffer.compare(decode(other), decode(wanted)) !== 0) problems.push(`block ${i} (${block.type}): bytes differ`);
          same(`block ${i} (${block.type})`, other, wanted);
        }
        same("structuredContent", got.structuredContent, expected.structuredContent);
        same("result _meta['test-app/media']", got._meta?.["test-app/media"], expected._meta["test-app/media"]);
        same("tools/list title", tool.title, expectedTool.title);
        same("tools/list annotations", tool.annotations, expectedTool.annotations);
        same("tools/list icons", tool.icons, expectedTool.icons);
        same("tools/list outputSchema", tool.outputSchema, expectedTool.outputSchema);
        assert.deepEqual(problems, [], `${ep.name} changed the media result or tool:\n${problems.join("\n")}`);
      } finally {
        await direct.close().catch(() => {});
        await client.close().catch(() => {});
      }
    });
  }
});

// ---------------------------------------------------------------------------------------------
// GroceryInventory's own elicitation tools through the gateway, checked over its REST API.

describe("relay: GroceryInventory's guided tools complete with an elicitation-capable client", () => {
  const GROCERY = [
    // The app's own endpoint (validates the test), then the gateway's two. Different rows each.
    { name: "GroceryInventory directly", url: () => state.groceryUrl, prefix: "", storeId: 4, productId: 2, counted: 31 },
    { name: "/apps/mcp/grocery-inventory", url: () => state.gateway.url("/apps/mcp/grocery-inventory"), prefix: "", storeId: 2, productId: 9, counted: 17 },
    { name: "/mcp, grocery.", url: () => state.gateway.url("/mcp"), prefix: "grocery.", storeId: 3, productId: 4, counted: 23 },
  ];
  const rest = async (path) => {
    const res = await fetch(state.groceryBase + path);
    assert.equal(res.status, 200, `GET ${path}`);
    return res.json();
  };

  for (const g of GROCERY) {
    test(`${g.name}: guided_stock_count records the count, visible over REST`, async () => {
      const [row] = await rest(`/api/inventory?storeId=${g.storeId}&productId=${g.productId}`);
      assert.notEqual(row.quantityOnHand, g.counted, "pick a count that differs from the current one");
      const asked = [];
      const client = await connect(g.url(), {
        elicit: (request) => {
          asked.push(request.params);
          return autoAnswer({ storeId: String(g.storeId), productId: String(g.productId), countedQuantity: g.counted, confirm: true })(request);
        },
      });
      try {
        const result = await client.callTool({ name: g.prefix + "guided_stock_count", arguments: {} }, undefined, { timeout: CALL_TIMEOUT_MS });
        assert.deepEqual(
          asked.map((a) => Object.keys(a.requestedSchema.properties)),
          [["storeId"], ["productId"], ["countedQuantity"], ["confirm"]],
          `steps asked: ${asked.length}; result: ${JSON.stringify(result)}`,
        );
        assert.notEqual(result.isError, true, text(result));
        assert.equal(result.structuredContent?.status, "completed", JSON.stringify(result));
        const [after] = await rest(`/api/inventory?storeId=${g.storeId}&productId=${g.productId}`);
        assert.equal(after.quantityOnHand, g.counted, "the REST API shows the recorded count");
      } finally {
        await client.close().catch(() => {});
      }
    });

    test(`${g.name}: guided_purchase_order drafts the order the user chose`, async () => {
      const lowBefore = await rest(`/api/inventory/low-stock?storeId=1`);
      const asked = [];
      const client = await connect(g.url(), {
        elicit: (request) => {
          asked.push(request.params);
          return autoAnswer({ storeId: "1", urgency: "urgent", notes: `relay via ${g.name}`, confirm: true })(request);
        },
      });
      try {
        const result = await client.callTool({ name: g.prefix + "guided_purchase_order", arguments: {} }, undefined, { timeout: CALL_TIMEOUT_MS });
        assert.equal(asked.length, 4, `steps asked: ${asked.length}; result: ${JSON.stringify(result)}`);
        assert.notEqual(result.isError, true, text(result));
        assert.equal(result.structuredContent?.status, "completed", JSON.stringify(result));
        const po = result.structuredContent.purchaseOrder;
        assert.equal(po.store.id, 1);
        assert.equal(po.urgency, "urgent");
        assert.equal(po.notes, `relay via ${g.name}`);
        assert.ok(po.lines.length > 0);
        // Every line is a low-stock product of that store as the REST API reports it.
        const low = new Set(lowBefore.map((r) => r.productId));
        for (const line of po.lines) assert.ok(low.has(line.productId ?? line.product?.id), `line ${JSON.stringify(line)} is low stock`);
      } finally {
        await client.close().catch(() => {});
      }
    });
  }
});
