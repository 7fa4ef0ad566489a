// The committed dashboard bundle matches its sources (rebuilt into a temp dir and compared byte
// for byte), and the app's manifest is the seed's, launchable by the gateway.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { APP_DIR } from "./lib/grocery-harness.mjs";

const UI_DIR = path.join(APP_DIR, "ui");

describe("GroceryInventory build artefacts", { timeout: 300_000 }, () => {
  it("dist/store-dashboard.html is not stale", () => {
    if (!existsSync(path.join(UI_DIR, "node_modules/esbuild"))) {
      // The bundler and ext-apps are pinned in ui/package-lock.json.
      execFileSync("npm", ["ci", "--no-audit", "--no-fund"], { cwd: UI_DIR, stdio: "inherit", timeout: 240_000 });
    }
    const out = mkdtempSync(path.join(tmpdir(), "grocery-ui-"));
    try {
      execFileSync("node", ["build.mjs", "--out", out], { cwd: UI_DIR, stdio: "pipe", timeout: 60_000 });
      const fresh = readFileSync(path.join(out, "store-dashboard.html"));
      const committed = readFileSync(path.join(UI_DIR, "dist/store-dashboard.html"));
      assert.ok(
        fresh.equals(committed),
        "mcpapps/grocery-inventory/ui/dist/store-dashboard.html is stale: run `npm run build` in mcpapps/grocery-inventory/ui",
      );
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });

  it("the dashboard bundle uses the official ext-apps App class", () => {
    const html = readFileSync(path.join(UI_DIR, "dist/store-dashboard.html"), "utf8");
    const lock = JSON.parse(readFileSync(path.join(UI_DIR, "package-lock.json"), "utf8"));
    assert.equal(lock.packages["node_modules/@modelcontextprotocol/ext-apps"].version, "2.0.4");
    assert.match(html, /ui\/initialize/);
    assert.match(html, /ui\/notifications\/size-changed/);
  });

  it("openclaw.mcpapp.json is the seed's manifest plus a launch command", () => {
    const manifest = JSON.parse(readFileSync(path.join(APP_DIR, "openclaw.mcpapp.json"), "utf8"));
    assert.equal(manifest.id, "grocery-inventory");
    assert.equal(manifest.name, "Grocery Inventory Dashboard");
    assert.equal(manifest.version, "1.0.0");
    assert.equal(manifest.toolNamePrefix, "grocery.");
    assert.equal(manifest.hasUi, true);
    assert.equal(manifest.uiResourceUri, "ui://grocery/store-dashboard.html");
    assert.equal(manifest.transport, "http");
    assert.equal(manifest.url, "http://127.0.0.1:5001/mcp");
    assert.equal(manifest.category, "data");
    assert.deepEqual(manifest.capabilities, ["tools", "resources", "prompts", "completions"]);
    assert.deepEqual(manifest.headers, {});
    assert.deepEqual(manifest.arguments, ["--listen", "127.0.0.1:5001"]);
    assert.equal(path.resolve(APP_DIR, manifest.command), path.resolve(APP_DIR, "../../target/release/grocery-inventory"));
  });
});
