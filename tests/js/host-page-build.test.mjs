// The committed host-page bundle (gateway-host/web/dist, embedded by gateway-host) matches its
// sources: rebuilt into a temp folder and compared byte for byte. It is built from the official
// MCP Apps host bridge, not a hand-written protocol.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { REPO } from "./lib/gateway.mjs";

const WEB_DIR = path.join(REPO, "gateway-host/web");

describe("host page build artefacts", { timeout: 300_000 }, () => {
  it("gateway-host/web/dist is not stale", () => {
    if (!existsSync(path.join(WEB_DIR, "node_modules/esbuild"))) {
      execFileSync("npm", ["ci", "--no-audit", "--no-fund"], { cwd: WEB_DIR, stdio: "inherit", timeout: 240_000 });
    }
    const out = mkdtempSync(path.join(tmpdir(), "host-page-"));
    try {
      execFileSync("node", ["build.mjs", "--out", out], { cwd: WEB_DIR, stdio: "pipe", timeout: 120_000 });
      const built = readdirSync(out).sort();
      assert.deepEqual(readdirSync(path.join(WEB_DIR, "dist")).sort(), built, "dist/ holds exactly what the build writes");
      for (const name of built) {
        const fresh = readFileSync(path.join(out, name));
        const committed = readFileSync(path.join(WEB_DIR, "dist", name));
        assert.ok(fresh.equals(committed), `gateway-host/web/dist/${name} is stale: run \`npm run build\` in gateway-host/web`);
      }
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });

  it("the bundle is the official ext-apps AppBridge over the official MCP client", () => {
    const lock = JSON.parse(readFileSync(path.join(WEB_DIR, "package-lock.json"), "utf8"));
    assert.equal(lock.packages["node_modules/@modelcontextprotocol/ext-apps"].version, "2.0.4");
    assert.equal(lock.packages["node_modules/@modelcontextprotocol/client"].version, "2.0.0");
    const host = readFileSync(path.join(WEB_DIR, "dist/host.js"), "utf8");
    assert.match(host, /ui\/notifications\/sandbox-resource-ready/);
    assert.match(host, /ui\/resource-teardown/);
    // No external fonts, scripts or CDNs: the page works offline.
    for (const name of ["index.html", "host.css", "sandbox.html"]) {
      assert.doesNotMatch(readFileSync(path.join(WEB_DIR, "dist", name), "utf8"), /https?:\/\//, name);
    }
  });
});
