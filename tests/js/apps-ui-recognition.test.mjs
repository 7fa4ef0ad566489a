// UI recognition from what an app declares (issue 9, Must show 7; SPEC R19): the official MCP
// Apps example server from npm (`@modelcontextprotocol/server-basic-vanillajs`: a
// `text/html;profile=mcp-app` resource and a tool with `_meta.ui.resourceUri`), run by the gateway
// from a manifest that says nothing about a UI, is reported with `hasUi: true` and its UI URI.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { gatewayConfig, startGateway, tempDir, vanillaManifest, waitRunning, writeManifest } from "./lib/gateway.mjs";

const VANILLA_URI = "ui://get-time/mcp-app.html";

let temp;
let gateway;

before(async () => {
  temp = tempDir();
  const manifest = vanillaManifest("plain-vanillajs");
  // Nothing about a UI in the manifest.
  delete manifest.hasUi;
  delete manifest.uiResourceUri;
  writeManifest(temp.apps, "plain-vanillajs", manifest);
  gateway = await startGateway(gatewayConfig(temp.apps));
});

after(async () => {
  await gateway?.stop();
  temp?.cleanup();
});

test("an app whose manifest declares no UI has the UI its server declares", async () => {
  const health = await waitRunning(gateway, ["plain-vanillajs"]);
  const app = health.apps.find((a) => a.id === "plain-vanillajs");
  assert.equal(app.state, "running", JSON.stringify(app));
  assert.equal(app.hasUi, true, JSON.stringify(app));
  assert.equal(app.uiResourceUri, VANILLA_URI, JSON.stringify(app));
  // The featured app of /apps/health is the first running app with a UI.
  assert.equal(health.mcp, gateway.url("/apps/mcp/plain-vanillajs"), JSON.stringify(health));
});
