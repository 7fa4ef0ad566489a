// The dashboard UI in headless Chromium, inside a minimal MCP Apps host page written here: the
// page answers ui/initialize, sends tool-input and tool-result with real data from the app, and
// proxies the view's tools/call to the real server through the SDK client.
import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { launchBrowser, shotter } from "./lib/browser.mjs";
import { startHttpServer, connectHttp, text, waitFor } from "./lib/grocery-harness.mjs";

const DASHBOARD_URI = "ui://grocery/store-dashboard.html";
// Screenshot: target/test-artifacts/grocery-dashboard/dashboard.png.
const shot = shotter("grocery-dashboard", { fullPage: true });

// The host side of the MCP Apps postMessage protocol (JSON-RPC 2.0 over window.postMessage).
const HOST_PAGE = `<!doctype html>
<html><head><meta charset="utf-8"><title>Test host</title>
<style>body{margin:0;font-family:sans-serif;background:#eef1f4}iframe{border:1px solid #ccd;width:980px;height:200px;background:#fff;display:block;margin:10px}</style>
</head><body>
<iframe id="view" sandbox="allow-scripts"></iframe>
<script>
  window.hostLog = [];
  window.sizes = [];
  const frame = document.getElementById("view");
  const send = (msg) => frame.contentWindow.postMessage({ jsonrpc: "2.0", ...msg }, "*");
  window.startView = (html, toolArgs, toolResult) => {
    window.addEventListener("message", async (event) => {
      if (event.source !== frame.contentWindow) return;
      const msg = event.data;
      if (!msg || msg.jsonrpc !== "2.0") return;
      window.hostLog.push(msg.method ?? "response");
      if (msg.method === "ui/initialize") {
        send({ id: msg.id, result: {
          protocolVersion: msg.params.protocolVersion,
          hostInfo: { name: "grocery-test-host", version: "1.0.0" },
          hostCapabilities: { serverTools: {}, logging: {} },
          hostContext: { theme: "light", displayMode: "inline", availableDisplayModes: ["inline"],
                         containerDimensions: { maxHeight: 4000 }, locale: "en-US" },
        }});
      } else if (msg.method === "ui/notifications/initialized") {
        send({ method: "ui/notifications/tool-input", params: { arguments: toolArgs } });
        send({ method: "ui/notifications/tool-result", params: toolResult });
      } else if (msg.method === "ui/notifications/size-changed") {
        window.sizes.push(msg.params);
        if (msg.params.height) frame.style.height = msg.params.height + "px";
      } else if (msg.method === "tools/call") {
        try {
          send({ id: msg.id, result: await window.hostCallTool(msg.params) });
        } catch (error) {
          send({ id: msg.id, error: { code: -32603, message: String(error) } });
        }
      } else if (msg.id !== undefined && msg.method) {
        send({ id: msg.id, error: { code: -32601, message: "not supported by the test host: " + msg.method } });
      }
    });
    frame.srcdoc = html;
  };
</script></body></html>`;

describe("GroceryInventory dashboard in Chromium", { timeout: 90_000 }, () => {
  let server;
  let client;
  let browser;
  let page;
  const toolCalls = [];

  before(async () => {
    browser = await launchBrowser();
    server = await startHttpServer();
    client = await connectHttp(server.url, { name: "test-host" });
    page = await browser.newPage({ viewport: { width: 1000, height: 1400 } });
    page.on("pageerror", (error) => console.error("page error:", error));
    await page.exposeFunction("hostCallTool", async (params) => {
      toolCalls.push(params);
      return await client.callTool(params);
    });
  });

  after(async () => {
    await browser?.close();
    await client?.close();
    await server?.stop();
  });

  it("is served as text/html;profile=mcp-app", async () => {
    const res = await client.readResource({ uri: DASHBOARD_URI });
    assert.equal(res.contents.length, 1);
    assert.equal(res.contents[0].mimeType, "text/html;profile=mcp-app");
    assert.ok(res.contents[0].text.length > 1000);
    // Single file: no external scripts or styles.
    assert.doesNotMatch(res.contents[0].text, /<script[^>]+src=|<link[^>]+stylesheet/i);
  });

  it("initializes, shows the stores' stock with low stock highlighted, resizes, and sends tools/call on a change", async () => {
    const html = (await client.readResource({ uri: DASHBOARD_URI })).contents[0].text;
    const toolArgs = {};
    const toolResult = await client.callTool({ name: "show_store_inventory_dashboard", arguments: toolArgs });
    assert.notEqual(toolResult.isError, true, text(toolResult));

    await page.setContent(HOST_PAGE);
    await page.evaluate(([h, a, r]) => window.startView(h, a, r), [html, toolArgs, toolResult]);
    const view = page.frameLocator("#view");

    // Initialized and rendered from the tool result.
    await view.locator("body[data-connected=true]").waitFor({ timeout: 15_000 });
    await view.locator("tr[data-product-id]").first().waitFor({ timeout: 15_000 });
    const log = await page.evaluate(() => window.hostLog);
    assert.ok(log.includes("ui/initialize"), JSON.stringify(log));
    assert.ok(log.includes("ui/notifications/initialized"), JSON.stringify(log));

    const tabs = await view.locator("[data-store-tab]").allInnerTexts();
    assert.equal(tabs.length, 4);
    assert.match(tabs[0], /Downtown Market/);
    assert.match(tabs[1], /Uptown Grocery/);
    assert.equal(await view.locator("tr[data-product-id]").count(), 30);
    const store1 = toolResult.structuredContent.stores[0];
    const lowIds = store1.items.filter((i) => i.isLowStock).map((i) => String(i.productId));
    const shownLow = await view.locator("tr.low").evaluateAll((rows) => rows.map((r) => r.dataset.productId));
    assert.deepEqual(shownLow, lowIds);
    const first = store1.items[0];
    assert.equal(await view.locator(`tr[data-product-id="${first.productId}"] input`).inputValue(), String(first.quantityOnHand));

    // Auto-resize reported the content height.
    await waitFor(() => page.evaluate(() => window.sizes.some((s) => s.height > 300)), { what: "size-changed" });

    // Another store.
    await view.locator('[data-store-tab="2"]').click();
    const store2 = toolResult.structuredContent.stores[1];
    assert.equal(await view.locator(`tr[data-product-id="${store2.items[1].productId}"] input`).inputValue(), String(store2.items[1].quantityOnHand));

    // The user changes a quantity: the view calls adjust_stock through the host.
    const target = store2.items[1];
    const input = view.locator(`tr[data-product-id="${target.productId}"] input`);
    await input.fill(String(target.quantityOnHand + 25));
    await input.press("Enter");
    await waitFor(() => toolCalls.some((c) => c.name === "adjust_stock"), { what: "tools/call adjust_stock" });
    const call = toolCalls.find((c) => c.name === "adjust_stock");
    assert.deepEqual(
      { storeId: call.arguments.storeId, productId: call.arguments.productId, delta: call.arguments.delta },
      { storeId: 2, productId: target.productId, delta: 25 },
    );
    // …and refreshes itself through the app-only tool.
    await waitFor(() => toolCalls.some((c) => c.name === "refresh_dashboard_data"), { what: "tools/call refresh_dashboard_data" });

    const check = await client.callTool({ name: "get_inventory", arguments: { storeId: 2, productId: target.productId } });
    assert.equal(check.structuredContent.items[0].quantityOnHand, target.quantityOnHand + 25);
    await waitFor(async () => (await input.inputValue()) === String(target.quantityOnHand + 25), { what: "updated value" });

    // The + button is another path to the same tool.
    await view.locator(`tr[data-product-id="${target.productId}"] button[title="Add one"]`).click();
    await waitFor(() => toolCalls.filter((c) => c.name === "adjust_stock").length === 2, { what: "second adjust_stock" });
    await waitFor(async () => (await input.inputValue()) === String(target.quantityOnHand + 26), { what: "value after +" });

    await view.locator('[data-store-tab="1"]').click();
    await shot(page, "dashboard");
  });
});
