// The host page's "Add app" form (issue 43, SPEC R53) in Debian's Chromium, driven by
// playwright-core: a signed-in admin installs the official budget allocator from npm (a real
// install, as CI reaches the registry) through `POST /admin/mcpapps/install`; the app appears
// Running in the list and its UI renders in the page. A wrong token and an unknown package are
// refused in the form and change nothing; a gateway without a token offers no form.
// Screenshots: target/test-artifacts/host-page-install/.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readdirSync } from "node:fs";
import path from "node:path";
import { gatewayConfig, startGateway, tempDir } from "./lib/gateway.mjs";
import { launchBrowser, shotter } from "./lib/browser.mjs";

const TOKEN = "install-page-token-0123456789";
const BUDGET = "@modelcontextprotocol/server-budget-allocator";
const shot = shotter("host-page-install");

function appFrame(page, id) {
  return page.locator(`figure.app-view[data-app-id="${id}"]`).frameLocator("iframe.app-frame").frameLocator("iframe");
}

describe("the Add app form", () => {
  let temp;
  let gateway;
  let browser;

  before(async () => {
    temp = tempDir("gateway-install-page-");
    gateway = await startGateway(gatewayConfig(temp.apps, { Gateway: { AlwaysRequireAuth: true, AuthTokenEnv: "INSTALL_PAGE_TOKEN" } }), {
      dir: temp.dir,
      env: { INSTALL_PAGE_TOKEN: TOKEN },
    });
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
    await gateway?.stop();
    temp?.cleanup();
  });

  it("installs the budget allocator from npm for a signed-in admin; it runs and its UI renders", async () => {
    const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
    const page = await context.newPage();
    const errors = [];
    page.on("pageerror", (error) => errors.push(String(error)));
    await page.goto(gateway.url("/"));
    await page.getByLabel("Gateway token").fill(TOKEN);
    await page.getByRole("button", { name: "Sign in" }).click();
    const add = page.getByRole("button", { name: "Add app" });
    await add.waitFor({ timeout: 15_000 });
    await add.click();
    const dialog = page.getByRole("dialog", { name: "Add an app" });
    await dialog.waitFor();
    await dialog.getByLabel("Source").fill(`npm:${BUDGET}@2.0.3`);
    await dialog.getByLabel("Tool-name prefix").fill("budget.");
    await dialog.getByLabel("Admin token").fill("not-the-token");
    await shot(page, "1-form");
    await dialog.getByRole("button", { name: "Install" }).click();
    await dialog.getByRole("alert").filter({ hasText: "That token is not valid." }).waitFor({ timeout: 15_000 });
    const appsFolder = path.join(temp.dir, ".gateway-apps");
    assert.deepEqual(existsSync(appsFolder) ? readdirSync(appsFolder) : [], [], "a refused token installs nothing");

    // An unknown package: the registry's answer, in the form; nothing installed.
    await dialog.getByLabel("Source").fill("npm:@modelcontextprotocol/no-such-server-issue-43");
    await dialog.getByLabel("Admin token").fill(TOKEN);
    await dialog.getByRole("button", { name: "Install" }).click();
    await dialog.getByRole("alert").filter({ hasText: "unknown package" }).waitFor({ timeout: 120_000 });
    await shot(page, "2-unknown-package");
    assert.deepEqual(readdirSync(appsFolder), []);

    await dialog.getByLabel("Source").fill(`npm:${BUDGET}@2.0.3`);
    await dialog.getByLabel("Admin token").fill(TOKEN);
    await dialog.getByRole("button", { name: "Install" }).click();
    await dialog.waitFor({ state: "hidden", timeout: 180_000 });
    const item = page.locator('.app[data-app-id="budget-allocator"]');
    await item.locator(".app-state", { hasText: "Running" }).waitFor({ timeout: 60_000 });
    assert.match(await page.locator("#status").textContent(), /Installed budget-allocator 2\.0\.3/);
    await shot(page, "3-installed");
    await item.getByRole("button", { name: /Open/ }).click();
    await appFrame(page, "budget-allocator").getByText("Marketing").first().waitFor({ timeout: 30_000 });
    await shot(page, "4-ui");
    assert.deepEqual(readdirSync(appsFolder), ["budget-allocator"]);
    assert.deepEqual(errors, []);
    await context.close();
  });
});

describe("a gateway without a token", () => {
  it("offers no Add app form (the admin routes need a token)", async () => {
    const temp = tempDir("gateway-install-page-open-");
    const gateway = await startGateway(gatewayConfig(temp.apps), { dir: temp.dir });
    const browser = await launchBrowser();
    try {
      const page = await browser.newPage();
      await page.goto(gateway.url("/"));
      await page.locator("#workspace").waitFor({ timeout: 15_000 });
      await page.locator("#apps-count").waitFor({ state: "attached" });
      assert.equal(await page.getByRole("button", { name: "Add app" }).isVisible(), false);
    } finally {
      await browser.close();
      await gateway.stop();
      temp.cleanup();
    }
  });
});
