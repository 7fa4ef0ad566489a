// The gateway's `/mcp` multiplexes everything its MCP Apps offer (issue 38): resources (URIs
// rewritten per app, reversibly), templates, prompts (prefixed like tools), completions, and the
// app-only tools for clients that declare the MCP Apps extension. Driven by the official
// TypeScript client in Node and, in Chromium, by a test host page built from the official MCP
// client (@modelcontextprotocol/client) and the official MCP Apps host bridge (`AppBridge` of
// @modelcontextprotocol/ext-apps), connected to `/mcp` only. The apps: the real GroceryInventory,
// the official budget allocator MCP App from npm, and two test-app instances serving the same
// `ui://` URI. Screenshots go to target/test-artifacts/gateway-mcp-apps/.
//
// The URI rule under test, K being the app's id: `S://R` → `S://K/R`, `S:R` → `S://K!/R`.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import path from "node:path";
import { build } from "esbuild";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import {
  BUDGET_ENTRY,
  TEST_APP_BIN,
  budgetManifest,
  gatewayConfig,
  groceryManifest,
  startGateway,
  tempDir,
  waitRunning,
  writeManifest,
} from "./lib/gateway.mjs";
import { launchBrowser, shotter } from "./lib/browser.mjs";

const HOST_ENTRY = path.join(import.meta.dirname, "fixtures/mcp-host/host.js");
const TWIN_HTML = path.join(import.meta.dirname, "fixtures/twin-app.html");

const UI_EXTENSION = "io.modelcontextprotocol/ui";
const UI_CAPABILITIES = { extensions: { [UI_EXTENSION]: { mimeTypes: ["text/html;profile=mcp-app"] } } };

const DASHBOARD_URI = "ui://grocery/store-dashboard.html";
const BUDGET_URI = "ui://budget-allocator/mcp-app.html";
const TWIN_URI = "ui://test-app/app.html";

/** The rewriting rule. */
function rewrite(uri, appId) {
  const slashes = uri.indexOf("://");
  if (slashes > 0) return `${uri.slice(0, slashes)}://${appId}/${uri.slice(slashes + 3)}`;
  const colon = uri.indexOf(":");
  return `${uri.slice(0, colon)}://${appId}!/${uri.slice(colon + 1)}`;
}

test("the rewriting rule of the issue, as this file applies it", () => {
  assert.equal(rewrite(DASHBOARD_URI, "grocery-inventory"), "ui://grocery-inventory/grocery/store-dashboard.html");
  assert.equal(rewrite("inventory://stores/{storeId}/summary", "grocery-inventory"), "inventory://grocery-inventory/stores/{storeId}/summary");
  assert.equal(rewrite("urn:isbn:123", "mcp~files"), "urn://mcp~files!/isbn:123");
});

const DASHBOARD = rewrite(DASHBOARD_URI, "grocery-inventory");
const BUDGET = rewrite(BUDGET_URI, "budget-allocator");

async function connect(url, capabilities = {}, name = "gateway-mcp-apps-test") {
  const client = new Client({ name, version: "1.0.0" }, { capabilities });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  return client;
}

async function connectStdio(command, args) {
  const client = new Client({ name: "direct", version: "1.0.0" }, { capabilities: UI_CAPABILITIES });
  await client.connect(new StdioClientTransport({ command, args, stderr: "pipe" }));
  return client;
}

/** Every item of a paginated list. */
async function all(list, key) {
  const items = [];
  let cursor;
  do {
    const page = await list(cursor ? { cursor } : {});
    items.push(...page[key]);
    cursor = page.nextCursor;
  } while (cursor);
  return items;
}
const allTools = (c) => all((p) => c.listTools(p), "tools");
const allResources = (c) => all((p) => c.listResources(p), "resources");
const allTemplates = (c) => all((p) => c.listResourceTemplates(p), "resourceTemplates");
const allPrompts = (c) => all((p) => c.listPrompts(p), "prompts");

/** The app's own read, as `/mcp` must answer it: each content's `uri` rewritten, the rest as is. */
const rewrittenContents = (direct, appId) => direct.contents.map((c) => ({ ...c, uri: rewrite(c.uri, appId) }));

function assertSameBytes(got, expected, what) {
  assert.equal(got.length, expected.length, `${what}: as many contents`);
  for (let i = 0; i < expected.length; i += 1) {
    for (const field of ["text", "blob"]) {
      if (expected[i][field] === undefined) {
        assert.equal(got[i][field], undefined, `${what}[${i}].${field}`);
      } else {
        const a = Buffer.from(got[i][field] ?? "", "utf8");
        const b = Buffer.from(expected[i][field], "utf8");
        assert.equal(Buffer.compare(a, b), 0, `${what}[${i}].${field} differs (${a.length} vs ${b.length} bytes)`);
      }
    }
  }
}

const waitFor = async (what, check, timeoutMs = 30_000) => {
  const start = Date.now();
  let last;
  for (;;) {
    try {
      last = await check();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    if (Date.now() - start > timeoutMs) throw new Error(`timed out waiting for ${what}: ${last}`);
    await new Promise((r) => setTimeout(r, 200));
  }
};

/** test-app serving the twin UI (its own copy, labelled) and an extra tool `whoami`. */
function twinManifest(id, prefix, uiFile, uiMeta) {
  return {
    id,
    name: `Twin ${id}`,
    version: "1.0.0",
    transport: "stdio",
    command: TEST_APP_BIN,
    arguments: ["--name", id, "--ui-file", uiFile, "--ui-meta", JSON.stringify(uiMeta), "--extra-tool", "whoami"],
    hasUi: true,
    uiResourceUri: TWIN_URI,
    capabilities: ["tools", "resources", "prompts", "completions"],
    toolNamePrefix: prefix,
    startupTimeoutSeconds: 30,
    requestTimeoutSeconds: 30,
  };
}

/** Serves the test host page (the bundled fixtures/mcp-host/host.js) on its own loopback origin. */
async function startHostPage() {
  const bundled = await build({
    entryPoints: [HOST_ENTRY],
    bundle: true,
    write: false,
    format: "iife",
    platform: "browser",
    target: ["es2022"],
    minify: true,
    legalComments: "none",
    logLevel: "warning",
  });
  const script = bundled.outputFiles[0].text;
  const html = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>/mcp MCP Apps test host</title>
<style>body{font:14px system-ui,sans-serif;margin:8px}section{margin:0 0 16px}h2{font-size:14px;margin:4px 0}
iframe{display:block;width:100%;height:480px;border:1px solid #888}</style></head>
<body><main id="apps"></main><script src="/host.js"></script></body></html>`;
  const server = createServer((req, res) => {
    if (req.url === "/host.js") {
      res.writeHead(200, { "content-type": "text/javascript; charset=utf-8" });
      res.end(script);
    } else {
      res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
      res.end(html);
    }
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const origin = `http://127.0.0.1:${server.address().port}`;
  return {
    origin,
    close: () =>
      new Promise((resolve) => {
        server.close(resolve);
        server.closeAllConnections();
      }),
  };
}

/** A screenshot of a page (whole) or of an element. */
const shot = shotter("gateway-mcp-apps");

describe("/mcp multiplexes the apps (issue 38)", { timeout: 600_000 }, () => {
  let temp;
  let gateway;
  let grocery;
  let host;
  let browser;
  let plain; // a client without the MCP Apps extension
  let withUi; // a client declaring it
  let groceryDirect; // GroceryInventory's own /mcp
  let budgetDirect; // the budget allocator over its own stdio
  const twins = {};
  const closers = [];

  before(async () => {
    temp = tempDir("gateway-mcp-apps-");
    grocery = await groceryManifest();
    writeManifest(temp.apps, "grocery-inventory", grocery);
    writeManifest(temp.apps, "budget-allocator", budgetManifest());
    const twinSpecs = {
      "twin-a": { prefix: "twina.", label: "Twin A", meta: { csp: { resourceDomains: ["https://a.example"] }, prefersBorder: true } },
      "twin-b": {
        prefix: "twinb.",
        label: "Twin B",
        meta: { csp: { connectDomains: ["https://b.example"] }, permissions: { clipboardWrite: {} }, prefersBorder: false, domain: "twin-b.example" },
      },
    };
    const template = readFileSync(TWIN_HTML, "utf8");
    for (const [id, spec] of Object.entries(twinSpecs)) {
      const file = path.join(temp.dir, `${id}.html`);
      writeFileSync(file, template.replaceAll("__TWIN_LABEL__", spec.label));
      const manifest = twinManifest(id, spec.prefix, file, spec.meta);
      writeManifest(temp.apps, id, manifest);
      twins[id] = { ...spec, manifest };
    }
    host = await startHostPage();
    gateway = await startGateway(gatewayConfig(temp.apps, { Security: { AllowedOrigins: [host.origin] } }), { dir: temp.dir });
    await waitRunning(gateway, ["grocery-inventory", "budget-allocator", "twin-a", "twin-b"]);
    await waitFor("the registry to hold every app's tools", async () => {
      const tools = await (await fetch(gateway.url("/tools"))).json();
      return (
        tools.all.filter((t) => t.providerId === "mcpapp:grocery-inventory").length >= 12 &&
        tools.all.some((t) => t.providerId === "mcpapp:budget-allocator") &&
        tools.all.some((t) => t.providerId === "mcpapp:twin-a") &&
        tools.all.some((t) => t.providerId === "mcpapp:twin-b")
      );
    });
    plain = await connect(gateway.url("/mcp"), {}, "plain-client");
    withUi = await connect(gateway.url("/mcp"), UI_CAPABILITIES, "ui-client");
    groceryDirect = await connect(grocery.url, {}, "direct");
    budgetDirect = await connectStdio(process.execPath, [BUDGET_ENTRY, "--stdio"]);
    for (const twin of Object.values(twins)) twin.direct = await connectStdio(TEST_APP_BIN, twin.manifest.arguments);
    closers.push(plain, withUi, groceryDirect, budgetDirect, ...Object.values(twins).map((t) => t.direct));
    // The apps' catalogs reach /mcp once the apps are up; wait for that, then assert exactly.
    await waitFor("the apps' resources on /mcp", async () => {
      const uris = (await allResources(plain)).map((r) => r.uri);
      return uris.includes(DASHBOARD) && uris.includes(BUDGET);
    });
  });

  after(async () => {
    await browser?.close();
    for (const c of closers) await c?.close().catch(() => {});
    await gateway?.stop();
    await host?.close();
    temp?.cleanup();
  });

  test("initialize declares resources (subscribe), prompts, completions and logging: what the apps offer", async () => {
    const caps = plain.getServerCapabilities();
    assert.ok(caps.tools, JSON.stringify(caps));
    assert.ok(caps.resources, `resources declared: ${JSON.stringify(caps)}`);
    assert.equal(caps.resources.subscribe, true, `GroceryInventory subscribes: ${JSON.stringify(caps)}`);
    assert.ok(caps.prompts, `prompts declared: ${JSON.stringify(caps)}`);
    assert.ok(caps.completions, `completions declared: ${JSON.stringify(caps)}`);
    assert.ok(caps.logging, `logging declared: ${JSON.stringify(caps)}`);
    await plain.ping();
    await plain.setLoggingLevel("warning");
  });

  test("resources/list: GroceryInventory's and the budget allocator's UI resources under rewritten URIs, as the apps list them", async () => {
    const listed = await allResources(plain);
    const uris = listed.map((r) => r.uri);
    assert.ok(!uris.includes(DASHBOARD_URI), `an app's own URI is not listed as is: ${uris.join(", ")}`);
    assert.ok(!uris.includes(BUDGET_URI), `an app's own URI is not listed as is: ${uris.join(", ")}`);
    for (const [appId, direct] of [
      ["grocery-inventory", groceryDirect],
      ["budget-allocator", budgetDirect],
    ]) {
      for (const own of await allResources(direct)) {
        const entry = listed.find((r) => r.uri === rewrite(own.uri, appId));
        assert.ok(entry, `${own.uri} of ${appId} is listed as ${rewrite(own.uri, appId)}: ${uris.join(", ")}`);
        assert.deepEqual(entry, { ...own, uri: rewrite(own.uri, appId) }, `${appId}'s ${own.uri} listed as the app lists it`);
      }
    }
    // Every listed URI names one of this gateway's apps.
    for (const uri of uris) {
      assert.match(uri, /^[a-z][a-z0-9+.-]*:\/\/(grocery-inventory|budget-allocator|twin-a|twin-b)!?\//, uri);
    }
  });

  test("resources/read of a rewritten URI is the app's own read, byte for byte, _meta included", async () => {
    for (const [appId, ownUri, direct] of [
      ["grocery-inventory", DASHBOARD_URI, groceryDirect],
      ["budget-allocator", BUDGET_URI, budgetDirect],
    ]) {
      const expected = await direct.readResource({ uri: ownUri });
      const got = await plain.readResource({ uri: rewrite(ownUri, appId) });
      assert.ok(expected.contents[0].text.length > 100_000, `${ownUri} is a real app UI (${expected.contents[0].text.length} chars)`);
      assertSameBytes(got.contents, expected.contents, `${appId} ${ownUri}`);
      assert.deepEqual(got.contents, rewrittenContents(expected, appId), `${appId}'s ${ownUri}: mimeType, _meta and uri`);
    }
    // GroceryInventory's UI declares a CSP and prefersBorder in _meta.ui; they arrive unchanged.
    const dashboard = (await plain.readResource({ uri: DASHBOARD })).contents[0];
    assert.ok(dashboard._meta?.ui?.csp, JSON.stringify(dashboard._meta));
    assert.equal(dashboard._meta.ui.prefersBorder, true);
  });

  test("templates are listed rewritten, and a URI of a rewritten template reads the app's resource", async () => {
    const templates = await allTemplates(plain);
    const listed = templates.map((t) => t.uriTemplate);
    for (const own of await allTemplates(groceryDirect)) {
      const uriTemplate = rewrite(own.uriTemplate, "grocery-inventory");
      const entry = templates.find((t) => t.uriTemplate === uriTemplate);
      assert.ok(entry, `${own.uriTemplate} listed as ${uriTemplate}: ${listed.join(", ")}`);
      assert.deepEqual(entry, { ...own, uriTemplate });
    }
    assert.ok(listed.includes("inventory://grocery-inventory/stores/{storeId}/summary"), listed.join(", "));
    assert.ok(listed.includes("inventory://grocery-inventory/products/{productId}/details"), listed.join(", "));
    assert.ok(!listed.includes("inventory://stores/{storeId}/summary"), listed.join(", "));

    const expected = await groceryDirect.readResource({ uri: "inventory://stores/2/summary" });
    const got = await plain.readResource({ uri: "inventory://grocery-inventory/stores/2/summary" });
    assert.deepEqual(got.contents, rewrittenContents(expected, "grocery-inventory"));
    assert.match(got.contents[0].text, /"productName"/);

    // A URI naming no app, or an app's own unrewritten URI, is an error, not some app's resource.
    await assert.rejects(plain.readResource({ uri: DASHBOARD_URI }));
    await assert.rejects(plain.readResource({ uri: "ui://no-such-app/grocery/store-dashboard.html" }));
  });

  test("resources/subscribe and unsubscribe of a rewritten URI are accepted", async () => {
    const uri = "inventory://grocery-inventory/stores/1/summary";
    await withUi.subscribeResource({ uri });
    await withUi.unsubscribeResource({ uri });
  });

  test("prompts: GroceryInventory's under its prefix, prompts/get and completion/complete reach the app", async () => {
    const prompts = await allPrompts(plain);
    const names = prompts.map((p) => p.name);
    for (const own of await allPrompts(groceryDirect)) {
      const entry = prompts.find((p) => p.name === `grocery.${own.name}`);
      assert.ok(entry, `grocery.${own.name} listed: ${names.join(", ")}`);
      assert.deepEqual(entry, { ...own, name: `grocery.${own.name}` });
    }
    for (const name of ["grocery.analyze_store_performance", "grocery.draft_supplier_order", "grocery.explain_inventory_term"]) {
      assert.ok(names.includes(name), `${name}: ${names.join(", ")}`);
    }
    assert.ok(!names.includes("explain_inventory_term"), names.join(", "));

    const args = { term: "safety stock" };
    const got = await plain.getPrompt({ name: "grocery.explain_inventory_term", arguments: args });
    const expected = await groceryDirect.getPrompt({ name: "explain_inventory_term", arguments: args });
    assert.deepEqual(got, expected);
    assert.match(JSON.stringify(got.messages), /safety stock/);
    const performance = await plain.getPrompt({ name: "grocery.analyze_store_performance", arguments: { storeId: "1" } });
    assert.deepEqual(performance, await groceryDirect.getPrompt({ name: "analyze_store_performance", arguments: { storeId: "1" } }));

    const completion = await plain.complete({
      ref: { type: "ref/prompt", name: "grocery.explain_inventory_term" },
      argument: { name: "term", value: "sa" },
    });
    const ownCompletion = await groceryDirect.complete({
      ref: { type: "ref/prompt", name: "explain_inventory_term" },
      argument: { name: "term", value: "sa" },
    });
    assert.ok(ownCompletion.completion.values.length > 0, JSON.stringify(ownCompletion));
    assert.deepEqual(completion.completion, ownCompletion.completion);

    const byTemplate = await plain.complete({
      ref: { type: "ref/resource", uri: "inventory://grocery-inventory/stores/{storeId}/summary" },
      argument: { name: "storeId", value: "" },
    });
    const ownByTemplate = await groceryDirect.complete({
      ref: { type: "ref/resource", uri: "inventory://stores/{storeId}/summary" },
      argument: { name: "storeId", value: "" },
    });
    assert.ok(ownByTemplate.completion.values.length > 0, JSON.stringify(ownByTemplate));
    assert.deepEqual(byTemplate.completion, ownByTemplate.completion);
  });

  test("tools name the rewritten UI URI in _meta; app-only tools are for clients declaring the MCP Apps extension", async (t) => {
    const plainTools = await allTools(plain);
    const uiTools = await allTools(withUi);
    for (const tools of [plainTools, uiTools]) {
      const dash = tools.find((t) => t.name === "grocery.show_store_inventory_dashboard");
      assert.equal(dash._meta?.ui?.resourceUri, DASHBOARD, JSON.stringify(dash._meta));
      assert.equal(dash._meta["ui/resourceUri"], DASHBOARD, JSON.stringify(dash._meta));
      const budget = tools.find((t) => t.name === "budget.get-budget-data");
      assert.ok(budget, tools.map((t) => t.name).join(", "));
      assert.equal(budget._meta?.ui?.resourceUri, BUDGET, JSON.stringify(budget._meta));
      assert.equal(budget._meta["ui/resourceUri"], BUDGET, JSON.stringify(budget._meta));
    }

    // Without the extension: not listed, and a call is refused.
    assert.ok(!plainTools.some((t) => t.name === "grocery.refresh_dashboard_data"), "hidden from a client without the extension");
    let refused;
    try {
      const r = await plain.callTool({ name: "grocery.refresh_dashboard_data", arguments: {} });
      refused = r.isError ? `isError: ${JSON.stringify(r.content)}` : null;
    } catch (error) {
      refused = `JSON-RPC error: ${error.message}`;
    }
    assert.ok(refused, "a client without the extension cannot call an app-only tool");
    t.diagnostic(`grocery.refresh_dashboard_data from a client without the extension: ${refused}`);

    // With it: listed (visibility and URI as on /mcp), callable, and UI-linked results keep structuredContent.
    const appOnly = uiTools.find((t) => t.name === "grocery.refresh_dashboard_data");
    assert.ok(appOnly, `listed for a client with the extension: ${uiTools.map((t) => t.name).join(", ")}`);
    assert.deepEqual(appOnly._meta?.ui?.visibility, ["app"]);
    assert.equal(appOnly._meta.ui.resourceUri, DASHBOARD);
    const refreshed = await withUi.callTool({ name: "grocery.refresh_dashboard_data", arguments: { storeId: 1 } });
    assert.ok(!refreshed.isError, JSON.stringify(refreshed.content));
    assert.ok(Array.isArray(refreshed.structuredContent?.stores), JSON.stringify(refreshed).slice(0, 300));

    const shown = await withUi.callTool({ name: "grocery.show_store_inventory_dashboard", arguments: {} });
    assert.ok(!shown.isError, JSON.stringify(shown.content));
    assert.ok(shown.structuredContent?.stores, "structuredContent kept for a client with the extension");
    assert.equal(shown._meta?.ui?.resourceUri, DASHBOARD, JSON.stringify(shown._meta));
    const shownPlain = await plain.callTool({ name: "grocery.show_store_inventory_dashboard", arguments: {} });
    assert.ok(!shownPlain.isError, JSON.stringify(shownPlain.content));
    assert.equal(shownPlain._meta?.ui?.resourceUri, DASHBOARD, JSON.stringify(shownPlain._meta));
  });

  describe("in Chromium, through an AppBridge host page whose MCP client talks to /mcp", () => {
    let page;
    let sandboxOrigin;
    const posts = [];

    before(async () => {
      browser = await launchBrowser();
      sandboxOrigin = (await (await fetch(gateway.url("/apps/health"))).json()).sandbox;
      assert.ok(sandboxOrigin, "the gateway names its sandbox origin");
      const context = await browser.newContext({ viewport: { width: 1280, height: 1000 } });
      page = await context.newPage();
      page.errors = [];
      page.on("pageerror", (error) => page.errors.push(String(error)));
      page.on("request", (request) => {
        if (request.method() === "POST" && request.url().startsWith(gateway.base)) {
          posts.push({ path: new URL(request.url()).pathname, body: request.postDataJSON() });
        }
      });
      await page.goto(`${host.origin}/`);
      await page.waitForFunction(() => window.hostReady === true);
    });

    after(async () => {
      await page?.context().close();
    });

    const render = (options) =>
      page.evaluate((o) => window.renderApp(o), { endpoint: gateway.url("/mcp"), sandboxOrigin, args: {}, ...options });
    const appFrame = (slot) => page.frameLocator(`section[data-slot="${slot}"] iframe`).frameLocator("iframe");
    const appCalls = (slot) => page.evaluate((s) => window.appToolCalls.filter((c) => c.slot === s), slot);

    test("GroceryInventory's dashboard renders its real stock, and its app-only calls go through /mcp", async () => {
      const shown = await render({ toolName: "grocery.show_store_inventory_dashboard", toolPrefix: "grocery.", slot: "grocery" });
      assert.equal(shown.uri, DASHBOARD, "the tool's _meta.ui.resourceUri on /mcp");
      assert.equal(shown.contentUri, DASHBOARD);
      assert.equal(shown.resultMeta?.ui?.resourceUri, DASHBOARD, JSON.stringify(shown.resultMeta));
      assert.equal(shown.resultHasStructuredContent, true, "the UI client gets the result's structuredContent");
      assert.equal(shown.mimeType, "text/html;profile=mcp-app");

      const dashboard = appFrame("grocery");
      await dashboard.locator("body[data-connected=true]").waitFor({ timeout: 30_000 });
      await dashboard.locator("tr[data-product-id]").first().waitFor({ timeout: 30_000 });
      const origin = new URL(grocery.url).origin;
      const store1 = await (await fetch(`${origin}/api/inventory?storeId=1`)).json();
      assert.ok(store1.length > 5);
      assert.equal(await dashboard.locator("tr[data-product-id]").count(), store1.length, "one row per product of store 1");
      const first = store1[0];
      const input = dashboard.locator(`tr[data-product-id="${first.productId}"] input`);
      assert.equal(await input.inputValue(), String(first.quantityOnHand), "the dashboard shows the app's real stock");
      assert.match(await dashboard.locator("#stores").innerText(), /Downtown Market/);

      // The UI's Refresh button: the app-only refresh_dashboard_data, through AppBridge → client → /mcp.
      await dashboard.locator("#refresh").click();
      await waitFor("the UI's refresh_dashboard_data call", async () => (await appCalls("grocery")).some((c) => c.name === "refresh_dashboard_data" && (c.result || c.error)));
      let calls = await appCalls("grocery");
      const refresh = calls.find((c) => c.name === "refresh_dashboard_data");
      assert.equal(refresh.sentAs, "grocery.refresh_dashboard_data");
      assert.equal(refresh.error, undefined, `refused: ${refresh.error}`);
      assert.ok(!refresh.result.isError, JSON.stringify(refresh.result.content));
      await dashboard.locator("#status", { hasText: "Updated" }).waitFor({ timeout: 15_000 });

      // A quantity change: adjust_stock, then the app-only refresh again; the app's REST API shows it.
      await input.fill(String(first.quantityOnHand + 5));
      await input.press("Enter");
      const rest = `${origin}/api/inventory?storeId=1&productId=${first.productId}`;
      await waitFor("the change in the app's REST API", async () => (await (await fetch(rest)).json())[0]?.quantityOnHand === first.quantityOnHand + 5);
      await waitFor("the refresh after the change", async () => (await appCalls("grocery")).filter((c) => c.name === "refresh_dashboard_data" && c.result).length >= 2);
      calls = await appCalls("grocery");
      const adjust = calls.find((c) => c.name === "adjust_stock");
      assert.equal(adjust?.sentAs, "grocery.adjust_stock");
      assert.ok(adjust.result && !adjust.result.isError, JSON.stringify(adjust));
      assert.ok(calls.every((c) => c.result && !c.result.isError), JSON.stringify(calls.map((c) => [c.sentAs, c.error ?? c.result?.isError])));
      assert.equal(await input.inputValue(), String(first.quantityOnHand + 5));

      // Everything the page sent to the gateway went to /mcp.
      const paths = [...new Set(posts.map((p) => p.path))];
      assert.deepEqual(paths, ["/mcp"], JSON.stringify(paths));
      const sentCalls = posts.filter((p) => p.body?.method === "tools/call").map((p) => p.body.params.name);
      assert.ok(sentCalls.includes("grocery.refresh_dashboard_data"), sentCalls.join(", "));
      await shot(page.locator('section[data-slot="grocery"]'), "1-grocery-dashboard-via-mcp");
      assert.deepEqual(page.errors, []);
    });

    test("the official budget allocator renders its categories and allocation", async () => {
      const shown = await render({ toolName: "budget.get-budget-data", toolPrefix: "budget.", slot: "budget" });
      assert.equal(shown.uri, BUDGET);
      assert.equal(shown.contentUri, BUDGET);
      assert.ok(shown.htmlLength > 100_000, `${shown.htmlLength} chars`);
      const app = appFrame("budget");
      const sliders = app.locator("#sliders-container");
      await sliders.getByText("Marketing").first().waitFor({ timeout: 30_000 });
      const text = await sliders.innerText();
      for (const category of ["Marketing", "Engineering", "Operations", "Sales", "R&D"]) assert.match(text, new RegExp(category), text);
      assert.match(text, /25(\.0)?%/, text);
      await app.locator("#status-bar", { hasText: /Allocated: \$100,000/ }).waitFor({ timeout: 15_000 });
      assert.equal(await app.locator("input.slider, .slider-container input[type=range]").count() >= 5, true, "one slider per category");
      await shot(page.locator('section[data-slot="budget"]'), "2-budget-allocator-via-mcp");
      const paths = [...new Set(posts.map((p) => p.path))];
      assert.deepEqual(paths, ["/mcp"], JSON.stringify(paths));
      assert.deepEqual(page.errors, []);
    });

    test("two apps serving the same ui:// URI: different rewritten URIs, each its own resource, both render", async () => {
      const listed = (await allResources(plain)).map((r) => r.uri);
      const uriA = rewrite(TWIN_URI, "twin-a");
      const uriB = rewrite(TWIN_URI, "twin-b");
      assert.notEqual(uriA, uriB);
      assert.ok(listed.includes(uriA) && listed.includes(uriB), listed.join(", "));
      for (const [id, uri] of [
        ["twin-a", uriA],
        ["twin-b", uriB],
      ]) {
        const expected = await twins[id].direct.readResource({ uri: TWIN_URI });
        const got = await plain.readResource({ uri });
        assertSameBytes(got.contents, expected.contents, `${id} ${uri}`);
        assert.deepEqual(got.contents, rewrittenContents(expected, id), `${id}'s own UI, _meta and all`);
        assert.match(got.contents[0].text, new RegExp(`<h1 id="label">${twins[id].label}</h1>`));
        assert.deepEqual(got.contents[0]._meta?.ui, twins[id].meta);
      }

      for (const [id, slot] of [
        ["twin-a", "twin-a"],
        ["twin-b", "twin-b"],
      ]) {
        const prefix = twins[id].prefix;
        const shown = await render({ toolName: `${prefix}show_ui`, toolPrefix: prefix, slot });
        assert.equal(shown.uri, rewrite(TWIN_URI, id));
        const app = appFrame(slot);
        await app.locator("body[data-done=true]").waitFor({ timeout: 30_000 });
        assert.equal(await app.locator("#label").innerText(), twins[id].label, "its own app's UI");
        assert.equal(await app.locator("#host").innerText(), "gateway-mcp-apps-test-host");
        assert.match(await app.locator("#result").innerText(), /"shown":true/);
        assert.equal(await app.locator("#whoami").innerText(), `whoami called on ${id}`, "the UI's call reached its own app");
        assert.equal(await app.locator("#app-only").innerText(), "app only", "the UI's app-only call through /mcp");
      }
      await shot(page.locator('section[data-slot="twin-a"]'), "3-twin-a-via-mcp");
      await shot(page.locator('section[data-slot="twin-b"]'), "4-twin-b-via-mcp");
      await shot(page, "5-all-via-mcp", { fullPage: true });
      assert.deepEqual(page.errors, []);
    });
  });
});

describe("a standard MCP server (Plugins.Mcp) on /mcp: K = mcp~{serverId}, and URIs without //", { timeout: 180_000 }, () => {
  const NOTES_ENTRY = path.join(import.meta.dirname, "fixtures/notes-server.mjs");
  const K = "mcp~notes";
  let temp;
  let gateway;
  let client;
  let direct;

  before(async () => {
    temp = tempDir("gateway-mcp-notes-");
    const config = gatewayConfig(temp.apps, {
      Plugins: { Mcp: { Servers: { notes: { Transport: "stdio", Command: process.execPath, Arguments: [NOTES_ENTRY], ToolNamePrefix: "notes." } } } },
    });
    gateway = await startGateway(config, { dir: temp.dir });
    await waitFor("the notes server's tools", async () => {
      const tools = await (await fetch(gateway.url("/tools"))).json();
      return tools.all.some((t) => t.providerId === "mcp:notes");
    });
    client = await connect(gateway.url("/mcp"), UI_CAPABILITIES);
    direct = await connectStdio(process.execPath, [NOTES_ENTRY]);
    await waitFor("the notes server's resources on /mcp", async () => (await allResources(client)).some((r) => r.uri.includes(K)));
  });

  after(async () => {
    await client?.close().catch(() => {});
    await direct?.close().catch(() => {});
    await gateway?.stop();
    temp?.cleanup();
  });

  test("S:R becomes S://K!/R and S://R becomes S://K/R, in lists, reads (text and blob), templates and tools' _meta", async () => {
    assert.equal(rewrite("urn:notes:first", K), "urn://mcp~notes!/notes:first");
    const listed = await allResources(client);
    const own = await allResources(direct);
    for (const resource of own) {
      const uri = rewrite(resource.uri, K);
      const entry = listed.find((r) => r.uri === uri);
      assert.ok(entry, `${resource.uri} listed as ${uri}: ${listed.map((r) => r.uri).join(", ")}`);
      assert.deepEqual(entry, { ...resource, uri });
      const expected = await direct.readResource({ uri: resource.uri });
      const got = await client.readResource({ uri });
      assertSameBytes(got.contents, expected.contents, uri);
      assert.deepEqual(got.contents, rewrittenContents(expected, K), uri);
    }
    assert.ok(listed.some((r) => r.uri === "notes://mcp~notes/blobs/pixel.png"));
    assert.ok(listed.some((r) => r.uri === "ui://mcp~notes!/notes-app.html"));

    const templates = (await allTemplates(client)).map((t) => t.uriTemplate);
    assert.ok(templates.includes("urn://mcp~notes!/notes:{id}"), templates.join(", "));
    const second = await client.readResource({ uri: "urn://mcp~notes!/notes:second" });
    assert.deepEqual(second.contents, [{ uri: "urn://mcp~notes!/notes:second", mimeType: "text/plain", text: "The second note, a little longer." }]);

    const tool = (await allTools(client)).find((t) => t.name === "notes.show_notes");
    assert.equal(tool?._meta?.ui?.resourceUri, "ui://mcp~notes!/notes-app.html", JSON.stringify(tool?._meta));
    assert.equal(tool._meta["ui/resourceUri"], "ui://mcp~notes!/notes-app.html", JSON.stringify(tool._meta));
    const shown = await client.callTool({ name: "notes.show_notes", arguments: {} });
    assert.equal(shown._meta?.ui?.resourceUri, "ui://mcp~notes!/notes-app.html", JSON.stringify(shown._meta));
  });

  test("its prompt carries its tool-name prefix; prompts/get and both kinds of completion reach it", async () => {
    const prompts = (await allPrompts(client)).map((p) => p.name);
    assert.ok(prompts.includes("notes.summarize_note"), prompts.join(", "));
    assert.deepEqual(
      await client.getPrompt({ name: "notes.summarize_note", arguments: { id: "third" } }),
      await direct.getPrompt({ name: "summarize_note", arguments: { id: "third" } }),
    );
    const byPrompt = await client.complete({ ref: { type: "ref/prompt", name: "notes.summarize_note" }, argument: { name: "id", value: "s" } });
    assert.deepEqual(byPrompt.completion.values, ["second"]);
    const byTemplate = await client.complete({ ref: { type: "ref/resource", uri: "urn://mcp~notes!/notes:{id}" }, argument: { name: "id", value: "t" } });
    assert.deepEqual(byTemplate.completion.values, ["third"]);
  });
});

describe("OpenClaw:McpCompatibility:ToolsOnly keeps the tools-only /mcp", { timeout: 180_000 }, () => {
  let temp;
  let gateway;
  let client;

  before(async () => {
    temp = tempDir("gateway-mcp-tools-only-");
    writeManifest(temp.apps, "grocery-inventory", await groceryManifest());
    gateway = await startGateway(
      gatewayConfig(temp.apps, { OpenClaw: { McpApps: { Enabled: true, DiscoveryPaths: [temp.apps], Allow: ["*"] }, McpCompatibility: { ToolsOnly: true } } }),
      { dir: temp.dir },
    );
    await waitRunning(gateway, ["grocery-inventory"]);
    await waitFor("GroceryInventory's tools", async () => {
      const tools = await (await fetch(gateway.url("/tools"))).json();
      return tools.all.filter((t) => t.providerId === "mcpapp:grocery-inventory").length >= 12;
    });
    client = await connect(gateway.url("/mcp"), UI_CAPABILITIES);
  });

  after(async () => {
    await client?.close().catch(() => {});
    await gateway?.stop();
    temp?.cleanup();
  });

  test("only tools are declared; resources/list and prompts/list are refused; tools still work", async (t) => {
    const caps = client.getServerCapabilities();
    assert.ok(caps.tools, JSON.stringify(caps));
    for (const key of ["resources", "prompts", "completions"]) assert.equal(caps[key], undefined, `${key} not declared: ${JSON.stringify(caps)}`);
    // The SDK client is not strict about capabilities: these requests reach the gateway, which refuses them.
    for (const [method, call] of [
      ["resources/list", () => client.listResources()],
      ["prompts/list", () => client.listPrompts()],
    ]) {
      await assert.rejects(call(), (error) => {
        assert.equal(typeof error.code, "number", `${method}: a JSON-RPC error from the gateway, got ${error}`);
        t.diagnostic(`${method} with ToolsOnly: ${error.code} ${error.message}`);
        return true;
      });
    }
    const tools = await allTools(client);
    assert.ok(tools.some((t) => t.name === "grocery.get_low_stock"), tools.map((t) => t.name).join(", "));
    const low = await client.callTool({ name: "grocery.get_low_stock", arguments: { storeId: 1 } });
    assert.ok(!low.isError, JSON.stringify(low.content));
  });
});
