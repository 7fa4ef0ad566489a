// `/apps/mcp/{appId}` with the official TypeScript MCP client (issue 6, Must show 1–3): the real
// GroceryInventory app and the official MCP Apps example server from npm, run by the gateway.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import {
  TEST_APP_BIN,
  VANILLA_ENTRY,
  gatewayConfig,
  groceryManifest,
  startGateway,
  tempDir,
  vanillaManifest,
  waitRunning,
  writeManifest,
} from "./lib/gateway.mjs";

const DASHBOARD_URI = "ui://grocery/store-dashboard.html";
const VANILLA_URI = "ui://get-time/mcp-app.html";

async function connect(url) {
  const client = new Client({ name: "apps-mcp-test", version: "1.0.0" }, { capabilities: {} });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  return client;
}

/** Every tool, following pagination. */
async function allTools(client) {
  const tools = [];
  let cursor;
  do {
    const page = await client.listTools(cursor ? { cursor } : {});
    tools.push(...page.tools);
    cursor = page.nextCursor;
  } while (cursor);
  return tools;
}

const text = (result) => (result.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("\n");

describe("/apps/mcp/{appId} with the official TypeScript client", () => {
  let gateway;
  let temp;
  const clients = [];
  const open = async (url) => {
    const c = await connect(url);
    clients.push(c);
    return c;
  };

  before(async () => {
    temp = tempDir();
    writeManifest(temp.apps, "grocery-inventory", await groceryManifest());
    writeManifest(temp.apps, "basic-vanillajs", vanillaManifest());
    writeManifest(temp.apps, "echo", {
      id: "echo",
      version: "1.0.0",
      transport: "stdio",
      command: TEST_APP_BIN,
      arguments: [],
      toolNamePrefix: "echo.",
    });
    gateway = await startGateway(gatewayConfig(temp.apps), { dir: temp.dir });
    await waitRunning(gateway, ["grocery-inventory", "basic-vanillajs", "echo"]);
  });

  after(async () => {
    for (const c of clients) await c.close().catch(() => {});
    await gateway?.stop();
    temp?.cleanup();
  });

  test("GroceryInventory: tools (app-only included, unprefixed), UI resource, a call, prompts, templates", async () => {
    const client = await open(gateway.url("/apps/mcp/grocery-inventory"));
    assert.match(client.getServerVersion().name, /grocery-inventory/);
    assert.ok(client.getServerCapabilities().tools, "tools capability");
    // The gateway answers initialize with what the app itself declared in its handshake.
    assert.equal(client.getServerCapabilities().resources?.subscribe, true, JSON.stringify(client.getServerCapabilities()));
    assert.ok(client.getServerCapabilities().completions, "completions declared by GroceryInventory");

    const tools = await allTools(client);
    const names = tools.map((t) => t.name);
    for (const name of ["get_stores", "get_inventory", "adjust_stock", "show_store_inventory_dashboard", "refresh_dashboard_data"]) {
      assert.ok(names.includes(name), `${name} missing from ${names}`);
    }
    assert.ok(!names.some((n) => n.startsWith("grocery.")), `prefixed names: ${names}`);
    const appOnly = tools.find((t) => t.name === "refresh_dashboard_data");
    assert.deepEqual(appOnly._meta?.ui?.visibility, ["app"]);

    const ui = await client.readResource({ uri: DASHBOARD_URI });
    assert.equal(ui.contents[0].uri, DASHBOARD_URI);
    assert.equal(ui.contents[0].mimeType, "text/html;profile=mcp-app");
    assert.match(ui.contents[0].text, /<html/i);

    const stores = await client.callTool({ name: "get_stores", arguments: {} });
    assert.ok(!stores.isError, text(stores));
    assert.match(text(stores) + JSON.stringify(stores.structuredContent ?? {}), /Downtown Market/);
    const refreshed = await client.callTool({ name: "refresh_dashboard_data", arguments: {} });
    assert.ok(!refreshed.isError, text(refreshed));

    const { prompts } = await client.listPrompts();
    const promptNames = prompts.map((p) => p.name);
    for (const p of ["analyze_store_performance", "draft_supplier_order", "explain_inventory_term"]) {
      assert.ok(promptNames.includes(p), `${p} missing from ${promptNames}`);
    }
    const { resourceTemplates } = await client.listResourceTemplates();
    const templates = resourceTemplates.map((t) => t.uriTemplate);
    assert.ok(templates.includes("inventory://stores/{storeId}/summary"), templates.join());
    assert.ok(templates.includes("inventory://products/{productId}/details"), templates.join());
    await client.ping();
  });

  test("server-basic-vanillajs from npm: its UI HTML (> 200 KB) arrives byte-identical", async () => {
    const direct = new Client({ name: "direct", version: "1.0.0" }, { capabilities: {} });
    await direct.connect(new StdioClientTransport({ command: process.execPath, args: [VANILLA_ENTRY, "--stdio"], stderr: "pipe" }));
    let expected;
    try {
      expected = (await direct.readResource({ uri: VANILLA_URI })).contents[0];
    } finally {
      await direct.close();
    }
    assert.ok(Buffer.byteLength(expected.text, "utf8") > 200 * 1024, `only ${expected.text.length} chars`);

    const client = await open(gateway.url("/apps/mcp/basic-vanillajs"));
    const got = (await client.readResource({ uri: VANILLA_URI })).contents[0];
    assert.equal(got.mimeType, expected.mimeType);
    assert.equal(Buffer.compare(Buffer.from(got.text, "utf8"), Buffer.from(expected.text, "utf8")), 0, "HTML differs");

    const tools = await allTools(client);
    assert.ok(tools.some((t) => t.name === "get-time"), tools.map((t) => t.name).join());
    const time = await client.callTool({ name: "get-time", arguments: {} });
    assert.ok(!time.isError, text(time));
  });

  test("?sessionId= reaches the upstream app in _meta", async () => {
    const client = await open(gateway.url("/apps/mcp/echo?sessionId=js-session-7"));
    const result = await client.callTool({ name: "echo_meta", arguments: {} });
    assert.equal(result.structuredContent?.sessionId, "js-session-7", JSON.stringify(result));
  });

  test("an unknown app is a JSON-RPC error naming it", async () => {
    await assert.rejects(connect(gateway.url("/apps/mcp/no-such-app")), /no-such-app/);
    const health = await (await fetch(gateway.url("/healthz"))).json();
    assert.equal(health.ok, true);
  });
});
