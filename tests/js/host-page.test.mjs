// The gateway's host page (issue 12, SPEC R38) in Debian's Chromium, driven by playwright-core:
// the real gateway with the real GroceryInventory app, the official
// `@modelcontextprotocol/server-basic-vanillajs` app, a sandbox probe (the test app serving
// fixtures/probe-app.html), and a scripted OpenAI-compatible model server (the one stand-in:
// no model runs here). Screenshots go to target/test-artifacts/host-page/.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  TEST_APP_BIN,
  gatewayConfig,
  groceryManifest,
  startGateway,
  tempDir,
  vanillaManifest,
  waitRunning,
  writeManifest,
} from "./lib/gateway.mjs";
import { launchBrowser, shotter } from "./lib/browser.mjs";
import { waitFor } from "./lib/grocery-harness.mjs";
import { reply, startScriptedLlm } from "./lib/scripted-llm.mjs";

const PROBE_HTML = path.join(import.meta.dirname, "fixtures/probe-app.html");

async function newPage(browser, options = {}) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, ...options });
  const page = await context.newPage();
  page.errors = [];
  page.on("pageerror", (error) => page.errors.push(String(error)));
  page.on("dialog", (dialog) => dialog.dismiss());
  return page;
}

const shot = shotter("host-page", { fullPage: true });

/** The inner frame (the app itself) of the app view of `appId`, newest first. */
function appFrame(page, appId, nth = -1) {
  const views = page.locator(`.app-view[data-app-id="${appId}"]`);
  const view = nth === -1 ? views.last() : views.nth(nth);
  return view.frameLocator("iframe.app-frame").frameLocator("iframe");
}

function probeManifest() {
  return {
    id: "probe",
    name: "Sandbox probe",
    version: "1.0.0",
    transport: "stdio",
    command: TEST_APP_BIN,
    arguments: [
      "--name",
      "probe",
      "--ui-file",
      PROBE_HTML,
      "--ui-meta",
      JSON.stringify({ csp: { resourceDomains: ["https://allowed.example"] } }),
    ],
    hasUi: true,
    uiResourceUri: "ui://test-app/app.html",
    capabilities: ["tools", "resources"],
    toolNamePrefix: "probe.",
    startupTimeoutSeconds: 30,
  };
}

describe("the host page", { timeout: 240_000 }, () => {
  let temp;
  let gateway;
  let llm;
  let browser;
  let grocery;

  before(async () => {
    temp = tempDir("gateway-host-page-");
    grocery = await groceryManifest();
    writeManifest(temp.apps, "grocery-inventory", grocery);
    writeManifest(temp.apps, "basic-vanillajs", vanillaManifest());
    writeManifest(temp.apps, "probe", probeManifest());
    writeManifest(temp.apps, "live", {
      id: "live",
      name: "Crashing app",
      version: "1.0.0",
      transport: "stdio",
      command: TEST_APP_BIN,
      arguments: ["--name", "live"],
      toolNamePrefix: "live.",
      startupTimeoutSeconds: 30,
    });
    llm = await startScriptedLlm();
    gateway = await startGateway(
      gatewayConfig(temp.apps, { Agent: { BaseUrl: llm.baseUrl, Model: "scripted", TimeoutSeconds: 60 } }),
      { dir: temp.dir },
    );
    await waitRunning(gateway, ["grocery-inventory", "basic-vanillajs", "probe", "live"]);
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
    await gateway?.stop();
    await llm?.close();
    temp?.cleanup();
  });

  it("lists the apps, opens the GroceryInventory dashboard with real stock, and a change reaches the app", async () => {
    const page = await newPage(browser);
    const mcpCalls = [];
    page.on("request", (request) => {
      if (request.method() === "POST" && request.url().startsWith(gateway.url("/apps/mcp/grocery-inventory?sessionId="))) {
        mcpCalls.push(request.postDataJSON());
      }
    });
    await page.goto(gateway.url("/"));
    assert.match(page.url(), /\/apps\/$/);
    const item = page.locator('.app[data-app-id="grocery-inventory"]');
    await item.locator(".app-state", { hasText: "Running" }).waitFor({ timeout: 15_000 });
    assert.match(await item.locator(".app-counts").innerText(), /\d+ tools/);

    await item.getByRole("button", { name: /Open/ }).click();
    const dashboard = appFrame(page, "grocery-inventory");
    await dashboard.locator("tr[data-product-id]").first().waitFor({ timeout: 20_000 });
    const store2 = await (await fetch(`${new URL(grocery.url).origin}/api/inventory?storeId=2`)).json();
    const target = store2[1];
    await dashboard.locator('[data-store-tab="2"]').click();
    const input = dashboard.locator(`tr[data-product-id="${target.productId}"] input`);
    assert.equal(await input.inputValue(), String(target.quantityOnHand), "the dashboard shows the app's real stock");

    await input.fill(String(target.quantityOnHand + 7));
    await input.press("Enter");
    const rest = `${new URL(grocery.url).origin}/api/inventory?storeId=2&productId=${target.productId}`;
    await waitFor(async () => (await (await fetch(rest)).json())[0]?.quantityOnHand === target.quantityOnHand + 7, {
      timeoutMs: 15_000,
      what: "the change in the app's REST API",
    });
    const adjust = mcpCalls.find((m) => m?.method === "tools/call" && m.params?.name === "adjust_stock");
    assert.ok(adjust, `the change went through /apps/mcp: ${JSON.stringify(mcpCalls.map((m) => m?.method))}`);
    assert.deepEqual({ storeId: adjust.params.arguments.storeId, delta: adjust.params.arguments.delta }, { storeId: 2, delta: 7 });
    await shot(page, "1-grocery-dashboard");
    assert.deepEqual(page.errors, []);
    await page.context().close();
  });

  it("renders the dashboard inline when a chat turn calls its tool, and a reload shows the session again", async () => {
    const page = await newPage(browser);
    await page.goto(gateway.url("/apps/"));
    await page.locator('.app[data-app-id="grocery-inventory"][data-state="running"]').waitFor();
    llm.push(reply.toolCall("grocery_show_store_inventory_dashboard", { storeId: 1 }), reply.text("Here is the inventory dashboard."));

    const box = page.getByLabel("Message to the agent");
    await box.fill("Show me the inventory dashboard");
    await box.press("Enter");
    await page.locator(".message.assistant", { hasText: "Here is the inventory dashboard." }).waitFor({ timeout: 20_000 });
    const card = page.locator('.tool-call[data-tool="grocery.show_store_inventory_dashboard"]');
    await card.and(page.locator('[data-state="done"]')).waitFor();
    const dashboard = appFrame(page, "grocery-inventory");
    await dashboard.locator("tr[data-product-id]").first().waitFor({ timeout: 20_000 });
    await dashboard.locator("body[data-connected=true]").waitFor();

    const sessionId = new URL(page.url()).hash.replace("#/chat/", "");
    assert.match(sessionId, /^web-[0-9a-f]+$/);
    await page.locator(`.session[data-session-id="${sessionId}"]`).waitFor();
    // The model got the tool under its provider-safe name and the result flattened.
    const last = llm.requests.at(-1);
    assert.ok(last.messages.some((m) => m.role === "tool"), JSON.stringify(last.messages));
    assert.ok(!JSON.stringify(last.messages).includes('"ui"'), "page-only data never reaches the model");
    await shot(page, "2-chat-dashboard");

    await page.reload();
    await page.locator(".message.user", { hasText: "Show me the inventory dashboard" }).waitFor({ timeout: 15_000 });
    await page.locator(".message.assistant", { hasText: "Here is the inventory dashboard." }).waitFor();
    await appFrame(page, "grocery-inventory").locator("tr[data-product-id]").first().waitFor({ timeout: 20_000 });
    assert.equal(new URL(page.url()).hash, `#/chat/${sessionId}`);
    assert.deepEqual(page.errors, []);
    await page.context().close();
  });

  it("runs the official basic-vanillajs app: its button calls a tool, its ui/message reaches the chat", async () => {
    const page = await newPage(browser);
    await page.goto(gateway.url("/apps/"));
    const item = page.locator('.app[data-app-id="basic-vanillajs"][data-state="running"]');
    await item.getByRole("button", { name: /Open/ }).click();
    const app = appFrame(page, "basic-vanillajs");
    const time = app.locator("#server-time");
    await app.locator("#get-time-btn").waitFor({ timeout: 20_000 });
    const before = await time.innerText();
    await app.locator("#get-time-btn").click();
    await waitFor(async () => /\d{4}-\d{2}-\d{2}|\d+:\d+/.test(await time.innerText()) && (await time.innerText()) !== before, {
      timeoutMs: 15_000,
      what: "the server time after the button",
    });

    llm.push(reply.text("Got your message from the app."));
    const asked = llm.requests.length;
    await app.locator("#message-text").fill("Hello from inside the app");
    await app.locator("#send-message-btn").click();
    await page.locator(".message.user.from-app", { hasText: "Hello from inside the app" }).waitFor({ timeout: 15_000 });
    await page.locator(".message.assistant", { hasText: "Got your message from the app." }).waitFor({ timeout: 20_000 });
    const request = llm.requests[asked];
    const user = request.messages.filter((m) => m.role === "user").at(-1);
    assert.match(user.content, /Hello from inside the app/);
    // The tool the user ran in the app's UI travelled with it as context.
    assert.match(user.content, /get-time/);

    // ui/open-link asks the user first; cancelling opens nothing.
    await app.locator("#open-link-btn").click();
    const dialog = page.locator("#link-dialog");
    await dialog.waitFor({ state: "visible" });
    assert.match(await dialog.innerText(), /modelcontextprotocol\.io/);
    await dialog.getByRole("button", { name: "Cancel" }).click();
    await dialog.waitFor({ state: "hidden" });
    assert.equal(page.context().pages().length, 1);
    await shot(page, "3-vanillajs");
    assert.deepEqual(page.errors, []);
    await page.context().close();
  });

  it("keeps an app in its sandbox: no host DOM, no cookies, no undeclared domains, only app-visible tools", async () => {
    const page = await newPage(browser);
    await page.goto(gateway.url("/apps/"));
    await page.evaluate(() => {
      document.cookie = "host-secret=do-not-read; path=/";
    });
    const health = await (await fetch(gateway.url("/apps/health"))).json();
    const sandbox = new URL(health.sandbox);
    assert.notEqual(sandbox.origin, new URL(gateway.base).origin, "the sandbox is another origin");

    await page.locator('.app[data-app-id="probe"][data-state="running"]').getByRole("button", { name: /Open/ }).click();
    const probe = appFrame(page, "probe");
    await probe.locator("body[data-done=true]").waitFor({ timeout: 20_000 });
    const results = JSON.parse(await probe.locator("#results").innerText());
    assert.match(results.topDocument, /^blocked:SecurityError/, JSON.stringify(results));
    assert.match(results.parentDocument, /^blocked:SecurityError/, JSON.stringify(results));
    assert.match(results.cookie, /^blocked:SecurityError/, JSON.stringify(results));
    assert.match(results.localStorage, /^blocked:SecurityError/, JSON.stringify(results));
    assert.match(results.fetchHost, /^blocked:/, JSON.stringify(results));
    assert.deepEqual(results.ancestors, [sandbox.origin, new URL(gateway.base).origin]);
    const blocked = results.violations.map((v) => `${v.directive} ${v.blockedURI}`);
    assert.ok(blocked.some((v) => v.startsWith("img-src https://undeclared.example")), JSON.stringify(blocked));
    assert.ok(blocked.some((v) => v.startsWith("connect-src")), JSON.stringify(blocked));
    assert.ok(!blocked.some((v) => v.includes("allowed.example")), JSON.stringify(blocked));
    assert.equal(results.initialized, "gateway-host-page");
    assert.equal(results.appOnly, "ok", JSON.stringify(results));
    assert.notEqual(results.modelOnly, "ok", JSON.stringify(results));

    // The CSP is the gateway's HTTP header, built from the resource's _meta.ui.csp.
    const csp = (await fetch(`${sandbox.origin}/sandbox?csp=${encodeURIComponent(JSON.stringify({ resourceDomains: ["https://allowed.example"] }))}`)).headers.get("content-security-policy");
    assert.match(csp, /img-src[^;]*https:\/\/allowed\.example/);
    assert.match(csp, /connect-src 'none'/);
    await shot(page, "4-sandbox-probe");
    await page.context().close();
  });

  it("shows a question an app asks during a chat turn as a form, and the answer reaches the app", async () => {
    const page = await newPage(browser);
    await page.goto(gateway.url("/apps/"));
    await page.locator('.app[data-app-id="probe"][data-state="running"]').waitFor();
    llm.push(reply.toolCall("probe_elicit", {}), reply.text("Thanks for answering."));
    await page.getByLabel("Message to the agent").fill("Ask me something");
    await page.getByLabel("Message to the agent").press("Enter");
    const form = page.locator("form.input-request");
    await form.waitFor({ timeout: 20_000 });
    assert.equal(await form.getByLabel("Name").inputValue(), "Ada", "the schema's default");
    await form.getByLabel("Name").fill("Grace");
    await form.getByLabel(/Favourite colour/).selectOption("blue");
    await form.getByLabel("How many").fill("7");
    await shot(page, "5-elicitation-form");
    await form.getByRole("button", { name: "Submit" }).click();
    await form.locator(".input-status", { hasText: "Sent." }).waitFor();
    // Inside the tool call's <details>, folded: attached, not visible.
    const card = page.locator('.tool-call[data-tool="probe.elicit"] .tool-output');
    await card.waitFor({ state: "attached", timeout: 20_000 });
    const output = await card.textContent();
    assert.match(output, /action=accept/);
    assert.match(output, /"color":"blue"/);
    assert.match(output, /"name":"Grace"/);
    assert.match(output, /"count":7/);
    await page.locator(".message.assistant", { hasText: "Thanks for answering." }).waitFor({ timeout: 20_000 });
    assert.deepEqual(page.errors, []);
    await page.context().close();
  });

  it("follows the apps' states live: an app that crashes shows failed with its error, then running again", async () => {
    const page = await newPage(browser);
    await page.goto(gateway.url("/apps/"));
    const item = page.locator('.app[data-app-id="live"]');
    await item.and(page.locator('[data-state="running"]')).waitFor({ timeout: 15_000 });
    const client = new Client({ name: "host-page-test", version: "1.0.0" });
    await client.connect(new StreamableHTTPClientTransport(new URL(gateway.url("/apps/mcp/live"))));
    await client.callTool({ name: "crash", arguments: {} }).catch(() => {});
    await client.close().catch(() => {});
    await item.and(page.locator('[data-state="failed"]')).waitFor({ timeout: 15_000 });
    assert.match(await item.locator(".app-state").innerText(), /Failed/);
    assert.ok((await item.locator(".app-error").count()) > 0, "the app's last error is shown");
    await shot(page, "6-app-failed");
    await item.and(page.locator('[data-state="running"]')).waitFor({ timeout: 30_000 });
    await page.context().close();
  });

  it("is usable by keyboard, at phone width, in dark mode", async () => {
    const page = await newPage(browser, { viewport: { width: 390, height: 844 }, colorScheme: "dark" });
    await page.goto(gateway.url("/apps/"));
    // At phone width the apps list is in the drawer (#drawer-toggle), folded away.
    await page.locator('.app[data-app-id="grocery-inventory"][data-state="running"]').waitFor({ state: "attached" });
    const width = await page.evaluate(() => document.documentElement.scrollWidth);
    assert.ok(width <= 390, `no horizontal scrolling at phone width (${width}px)`);
    const background = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
    assert.notEqual(background, "rgb(255, 255, 255)", "dark mode follows the system preference");

    llm.push(reply.text("Typed without a mouse."));
    await page.keyboard.press("Tab"); // the skip link
    await page.keyboard.press("Enter");
    assert.equal(await page.evaluate(() => document.activeElement.id), "composer-input");
    await page.keyboard.type("hello by keyboard");
    await page.keyboard.press("Enter");
    await page.locator(".message.assistant", { hasText: "Typed without a mouse." }).waitFor({ timeout: 20_000 });
    await shot(page, "7-phone-dark");
    await page.context().close();
  });
});

describe("the host page on a gateway that requires a token", { timeout: 120_000 }, () => {
  let temp;
  let gateway;
  let browser;

  before(async () => {
    temp = tempDir("gateway-host-auth-");
    writeManifest(temp.apps, "basic-vanillajs", vanillaManifest());
    gateway = await startGateway(
      gatewayConfig(temp.apps, { Gateway: { AlwaysRequireAuth: true, AuthTokenEnv: "HOST_PAGE_TOKEN" } }),
      { dir: temp.dir, env: { HOST_PAGE_TOKEN: "right-token-123" } },
    );
    await waitRunning(gateway, ["basic-vanillajs"], { headers: { Authorization: "Bearer right-token-123" } });
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
    await gateway?.stop();
    temp?.cleanup();
  });

  it("asks for the token, refuses a wrong one visibly, signs in and works", async () => {
    const page = await newPage(browser);
    await page.goto(gateway.url("/"));
    const token = page.getByLabel("Gateway token");
    await token.waitFor({ timeout: 15_000 });
    assert.equal(await page.locator("#workspace").isVisible(), false);

    await token.fill("wrong-token");
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("alert").filter({ hasText: "That token is not valid." }).waitFor();
    await shot(page, "8-signin-refused");

    await token.fill("right-token-123");
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.locator('.app[data-app-id="basic-vanillajs"] .app-state', { hasText: "Running" }).waitFor({ timeout: 15_000 });
    await page.locator('.app[data-app-id="basic-vanillajs"]').getByRole("button", { name: /Open/ }).click();
    await appFrame(page, "basic-vanillajs").locator("#get-time-btn").waitFor({ timeout: 20_000 });
    await page.reload();
    await page.locator('.app[data-app-id="basic-vanillajs"]').waitFor({ timeout: 15_000 });
    assert.equal(await token.isVisible(), false, "the session cookie keeps the user signed in");
    assert.deepEqual(page.errors, []);
    await page.context().close();
  });
});
