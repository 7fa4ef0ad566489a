// The gateway's own MCP server at /mcp (issue 5), driven by the official TypeScript client:
// the registry's model-visible tools (MCP Apps, Plugins.Mcp servers, built-ins), calls with the
// model-side rules, list_changed when an app goes away, and the McpCompatibility switches.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { TEST_APP_BIN, gatewayConfig, groceryManifest, startGateway, tempDir, waitRunning, writeManifest } from "./lib/gateway.mjs";

function testApp(id, args = [], extra = {}) {
  return {
    id,
    transport: "stdio",
    command: TEST_APP_BIN,
    arguments: args,
    toolNamePrefix: `${id}.`,
    startupTimeoutSeconds: 20,
    requestTimeoutSeconds: 20,
    ...extra,
  };
}

async function connect(gateway) {
  const client = new Client({ name: "gateway-mcp-test", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(gateway.url("/mcp"))));
  return client;
}

async function rpc(gateway, body, headers = {}) {
  const res = await fetch(gateway.url("/mcp"), {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  const data = text.startsWith("{") ? text : (text.split("\n").find((l) => l.startsWith("data:")) ?? "data: null").slice(5);
  return { status: res.status, body: JSON.parse(data) };
}

const waitFor = async (what, check, timeoutMs = 20_000) => {
  const start = Date.now();
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() - start > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
};

describe("/mcp with GroceryInventory, a test app and a Plugins.Mcp server", () => {
  let gateway, dir, client, crashPidFile;
  before(async () => {
    dir = tempDir();
    crashPidFile = path.join(dir.dir, "victim.pid");
    writeManifest(dir.apps, "grocery-inventory", await groceryManifest());
    writeManifest(dir.apps, "tapp", testApp("tapp"));
    // A confined app (SPEC R48) writes only what its manifest declares: the file, made now.
    writeFileSync(crashPidFile, "");
    writeManifest(dir.apps, "victim", testApp("victim", ["--pid-file", crashPidFile], { permissions: { filesystem: { write: [crashPidFile] } } }));
    // A later app whose prefixed name clashes with GroceryInventory's: refused for the later app.
    writeManifest(dir.apps, "zz-clash", testApp("zz-clash", ["--extra-tool", "get_low_stock"], { toolNamePrefix: "grocery." }));
    const config = gatewayConfig(dir.apps, {
      Plugins: { Mcp: { Servers: { files: { Transport: "stdio", Command: TEST_APP_BIN, Arguments: ["--extra-tool", "get_stores"], ToolNamePrefix: "grocery." } } } },
      Tools: { Preference: ["mcp:*", "mcpapp:*", "builtin:*"] },
    });
    gateway = await startGateway(config, { dir: dir.dir });
    await waitRunning(gateway, ["grocery-inventory", "tapp", "victim", "zz-clash"]);
    await waitFor("registry", async () => {
      const tools = await (await fetch(gateway.url("/tools"))).json();
      // Every provider the tests below read, GroceryInventory's whole catalog included: the
      // registry follows the apps' states a moment later than /apps/health.
      return (
        tools.all.some((t) => t.providerId === "mcp:files") &&
        tools.all.some((t) => t.providerId === "mcpapp:victim") &&
        tools.all.filter((t) => t.providerId === "mcpapp:grocery-inventory").length >= 12
      );
    });
    client = await connect(gateway);
  });
  after(async () => {
    await client?.close();
    await gateway?.stop();
    dir?.cleanup();
  });

  test("the registry lists providers, hides app-only tools, refuses clashes, resolves preference", async () => {
    const tools = await (await fetch(gateway.url("/tools"))).json();
    const grocery = tools.all.filter((t) => t.providerId === "mcpapp:grocery-inventory");
    assert.ok(grocery.length >= 12, "grocery tools under mcpapp:grocery-inventory");
    assert.ok(grocery.every((t) => t.name.startsWith("grocery.")));
    const appOnly = grocery.find((t) => t.name === "grocery.refresh_dashboard_data");
    assert.equal(appOnly.visibleToModel, false);
    assert.ok(!tools.model.some((t) => t.name === "grocery.refresh_dashboard_data"), "app-only tool not offered to the model");
    // The clash: zz-clash's grocery.get_low_stock is refused, with a log line.
    assert.ok(!tools.all.some((t) => t.providerId === "mcpapp:zz-clash" && t.name === "grocery.get_low_stock"));
    assert.match(gateway.logs(), /Tool name 'grocery\.get_low_stock' of McpApp 'zz-clash' clashes with McpApp 'grocery-inventory'/);
    // ResolvePreference between the Plugins.Mcp tool and the MCP App tool of the same name.
    const offered = tools.all.filter((t) => t.name === "grocery.get_stores").map((t) => t.providerId);
    assert.deepEqual(offered.sort(), ["mcp:files", "mcpapp:grocery-inventory"]);
    assert.equal(tools.model.find((t) => t.name === "grocery.get_stores").providerId, "mcp:files");
    assert.match(gateway.logs(), /ResolvePreference: tool 'grocery\.get_stores' is offered by .*; using mcp:files/);
    // Standard servers are supervised like apps but are not MCP Apps: not under /apps/*.
    const health = await (await fetch(gateway.url("/apps/health"))).json();
    assert.ok(health.apps.some((a) => a.id === "grocery-inventory"));
    assert.ok(!health.apps.some((a) => a.id.startsWith("mcp:")), JSON.stringify(health.apps.map((a) => a.id)));
    // Provider-safe names for LLMs.
    assert.equal(tools.model.find((t) => t.name === "grocery.get_low_stock").providerName, "grocery_get_low_stock");
  });

  test("the TypeScript client lists the model-visible tools", async () => {
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name);
    for (const n of ["grocery.get_low_stock", "grocery.show_store_inventory_dashboard", "tapp.echo", "gateway.apps"]) {
      assert.ok(names.includes(n), `${n} listed`);
    }
    for (const n of ["grocery.refresh_dashboard_data", "tapp.app_only"]) assert.ok(!names.includes(n), `${n} hidden`);
    const lowStock = tools.find((t) => t.name === "grocery.get_low_stock");
    assert.equal(lowStock.inputSchema.type, "object");
  });

  test("calls follow the model-side rules", async () => {
    const low = await client.callTool({ name: "grocery.get_low_stock", arguments: { storeId: 1 } });
    assert.ok(!low.isError, JSON.stringify(low));
    assert.ok(low.content[0].text.length > 0);
    assert.ok(low.structuredContent, "structured content for a non-UI tool");
    const dash = await client.callTool({ name: "grocery.show_store_inventory_dashboard", arguments: {} });
    assert.ok(!dash.isError, JSON.stringify(dash));
    assert.equal(dash.structuredContent, undefined, "withheld from the model for a UI tool");
    // The UI the result renders with, named as /mcp names it: the app in the URI's authority.
    assert.equal(dash._meta?.ui?.resourceUri, "ui://grocery-inventory/grocery/store-dashboard.html");
    const remote = await client.callTool({ name: "tapp.fail", arguments: { message: "shelf empty" } });
    assert.ok(remote.isError);
    assert.match(remote.content[0].text, /^Error: .*shelf empty/);
    const invalid = await client.callTool({ name: "grocery.get_low_stock", arguments: { storeId: "not-a-number" } });
    assert.ok(invalid.isError);
    assert.match(invalid.content[0].text, /^Error:.*storeId/);
    const apps = await client.callTool({ name: "gateway.apps", arguments: {} });
    assert.match(apps.content[0].text, /grocery-inventory .*running/);
    // Preference: grocery.get_stores goes to the Plugins.Mcp server (a test-app extra tool).
    const stores = await client.callTool({ name: "grocery.get_stores", arguments: {} });
    assert.match(stores.content[0].text, /get_stores called on/);
  });

  test("an app killed mid-call gives Error: promptly, and list_changed reaches the client", async () => {
    const pid = Number(readFileSync(crashPidFile, "utf8"));
    let changed = 0;
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
      changed += 1;
    });
    const started = Date.now();
    const pending = client.callTool({ name: "victim.slow", arguments: { ms: 60000 } });
    await new Promise((r) => setTimeout(r, 300));
    process.kill(pid, "SIGKILL");
    const result = await pending;
    assert.ok(result.isError);
    assert.match(result.content[0].text, /^Error:/);
    // Ended by the kill, not by the 60 s call or a timeout: a wide margin for a loaded machine.
    assert.ok(Date.now() - started < 20000, "ended at once");
    await waitFor("list_changed", () => changed > 0);
    const { tools } = await client.listTools();
    assert.ok(!tools.some((t) => t.name === "victim.echo"), "the lost app's tools are withdrawn");
    // Supervision restarts it and the tools come back.
    await waitFor("victim restored", async () => (await client.listTools()).tools.some((t) => t.name === "victim.echo"));
  });
});

describe("McpCompatibility switches", () => {
  const start = async (compat, apps = {}) => {
    const dir = tempDir();
    for (const [id, manifest] of Object.entries(apps)) writeManifest(dir.apps, id, manifest);
    const gateway = await startGateway(gatewayConfig(dir.apps, { OpenClaw: { McpApps: { Enabled: true, DiscoveryPaths: [dir.apps] }, McpCompatibility: compat } }), { dir: dir.dir });
    await waitRunning(gateway, Object.keys(apps));
    return { gateway, dir };
  };
  const discover = (gateway) =>
    rpc(
      gateway,
      {
        jsonrpc: "2.0",
        id: 1,
        method: "server/discover",
        params: {
          _meta: {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": { name: "raw-discover", version: "1.0.0" },
          },
        },
      },
      { "mcp-protocol-version": "2026-07-28", "mcp-method": "server/discover" },
    );

  test("EnableDiscoveryFirst (default) answers server/discover; false refuses it", async () => {
    const on = await start({});
    try {
      const r = await discover(on.gateway);
      assert.ok(r.body.result, JSON.stringify(r.body));
      assert.ok(r.body.result.supportedVersions?.includes("2026-07-28") ?? JSON.stringify(r.body.result).includes("2026-07-28"));
      // Initialize-first clients work beside it.
      const client = await connect(on.gateway);
      assert.ok((await client.listTools()).tools.some((t) => t.name === "gateway.apps"));
      await client.close();
    } finally {
      await on.gateway.stop();
      on.dir.cleanup();
    }
    const off = await start({ EnableDiscoveryFirst: false });
    try {
      const r = await discover(off.gateway);
      assert.ok(r.body?.error || r.status >= 400, JSON.stringify(r));
      const client = await connect(off.gateway);
      assert.ok((await client.listTools()).tools.length > 0);
      await client.close();
    } finally {
      await off.gateway.stop();
      off.dir.cleanup();
    }
  });

  test("ForceLegacyInitialize makes upstream sessions initialize-first and /mcp legacy", async () => {
    const modern = testApp("modern", [], { protocolVersion: "2026-07-28" });
    const normal = await start({}, { modern });
    let normalVersion;
    try {
      const client = await connect(normal.gateway);
      const info = await client.callTool({ name: "modern.client_info", arguments: {} });
      normalVersion = info.structuredContent.protocolVersion;
      await client.close();
    } finally {
      await normal.gateway.stop();
      normal.dir.cleanup();
    }
    assert.equal(normalVersion, "2026-07-28", "discover-first towards an app that declares 2026-07-28");
    const forced = await start({ ForceLegacyInitialize: true }, { modern });
    try {
      const client = await connect(forced.gateway);
      const info = await client.callTool({ name: "modern.client_info", arguments: {} });
      assert.equal(info.structuredContent.protocolVersion, "2025-11-25");
      await client.close();
      const r = await discover(forced.gateway);
      assert.ok(r.body?.error || r.status >= 400, JSON.stringify(r));
    } finally {
      await forced.gateway.stop();
      forced.dir.cleanup();
    }
  });

  test("AllowRelaxedInputSchemaValidation keeps schemaless tools", async () => {
    const loose = testApp("loose", ["--schemaless"]);
    for (const [relaxed, expected] of [[false, false], [true, true]]) {
      const g = await start({ AllowRelaxedInputSchemaValidation: relaxed }, { loose });
      try {
        const client = await connect(g.gateway);
        await waitFor("tools", async () => (await client.listTools()).tools.some((t) => t.name === "loose.echo"));
        const names = (await client.listTools()).tools.map((t) => t.name);
        assert.equal(names.includes("loose.no_schema"), expected, `relaxed=${relaxed}`);
        await client.close();
      } finally {
        await g.gateway.stop();
        g.dir.cleanup();
      }
    }
  });
});
