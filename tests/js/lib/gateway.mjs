// Start the real gateway (target/release/gateway-host) for a test: write an appsettings.json into a
// temp folder, spawn the gateway on a free loopback port, and wait for `Gateway listening on`.
// Also: manifests for the real GroceryInventory app and for npm MCP App servers run over stdio.
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import os from "node:os";
import path from "node:path";

export const REPO = path.resolve(import.meta.dirname, "../../..");
const RELEASE = path.join(process.env.CARGO_TARGET_DIR ? path.resolve(REPO, process.env.CARGO_TARGET_DIR) : path.join(REPO, "target"), "release");
export const GATEWAY_BIN = process.env.GATEWAY_HOST_BIN ?? path.join(RELEASE, "gateway-host");
export const GROCERY_BIN = process.env.GROCERY_INVENTORY_BIN ?? path.join(RELEASE, "grocery-inventory");
export const TEST_APP_BIN = path.join(RELEASE, "test-app");

function requireFile(file) {
  if (!existsSync(file)) throw new Error(`${file} is missing: run \`cargo build --release --workspace\` first`);
}

/** A free TCP port on 127.0.0.1 (closed again before returning). */
export function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** A temp folder with `apps/` for manifests; `cleanup()` removes it. */
export function tempDir(prefix = "gateway-js-") {
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix));
  mkdirSync(path.join(dir, "apps"), { recursive: true });
  return { dir, apps: path.join(dir, "apps"), cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Writes `apps/<folder>/openclaw.mcpapp.json`. */
export function writeManifest(appsDir, folder, manifest) {
  const dir = path.join(appsDir, folder);
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, "openclaw.mcpapp.json"), JSON.stringify(manifest, null, 2));
  return dir;
}

/** The repository's GroceryInventory manifest, with an absolute command and a free port. */
export async function groceryManifest() {
  requireFile(GROCERY_BIN);
  const manifest = JSON.parse(readFileSync(path.join(REPO, "mcpapps/grocery-inventory/openclaw.mcpapp.json"), "utf8"));
  const port = await freePort();
  manifest.command = GROCERY_BIN;
  manifest.url = `http://127.0.0.1:${port}/mcp`;
  manifest.arguments = ["--listen", `127.0.0.1:${port}`];
  manifest.startupTimeoutSeconds = 30;
  return manifest;
}

/** The official MCP Apps example server from npm, run as a stdio app. */
export const VANILLA_ENTRY = path.join(REPO, "tests/js/node_modules/@modelcontextprotocol/server-basic-vanillajs/dist/index.js");
export function vanillaManifest(id = "basic-vanillajs") {
  requireFile(VANILLA_ENTRY);
  return {
    id,
    name: "Basic MCP App (vanilla JS)",
    version: "2.0.3",
    transport: "stdio",
    command: process.execPath,
    arguments: [VANILLA_ENTRY, "--stdio"],
    hasUi: true,
    uiResourceUri: "ui://get-time/mcp-app.html",
    capabilities: ["tools", "resources"],
    toolNamePrefix: "basic.",
    startupTimeoutSeconds: 30,
    requestTimeoutSeconds: 30,
  };
}

/**
 * The official budget allocator MCP App from npm (`@modelcontextprotocol/server-budget-allocator`),
 * run as a stdio app (`dist/index.js --stdio`, as its README's client configuration runs it). Its
 * one tool `get-budget-data` links `ui://budget-allocator/mcp-app.html`; it offers no prompts.
 */
export const BUDGET_ENTRY = path.join(REPO, "tests/js/node_modules/@modelcontextprotocol/server-budget-allocator/dist/index.js");
export function budgetManifest(id = "budget-allocator") {
  requireFile(BUDGET_ENTRY);
  return {
    id,
    name: "Budget Allocator",
    version: "2.0.3",
    transport: "stdio",
    command: process.execPath,
    arguments: [BUDGET_ENTRY, "--stdio"],
    hasUi: true,
    uiResourceUri: "ui://budget-allocator/mcp-app.html",
    capabilities: ["tools", "resources"],
    toolNamePrefix: "budget.",
    startupTimeoutSeconds: 30,
    requestTimeoutSeconds: 30,
  };
}

/**
 * Starts the gateway with `config` as appsettings.json (in a temp folder unless `dir` is given).
 * Returns { url, base, child, logs(), stop() }. `env` adds environment variables.
 */
export async function startGateway(config, { dir, env = {}, urls = "http://127.0.0.1:0", timeoutMs = 60_000 } = {}) {
  requireFile(GATEWAY_BIN);
  const own = dir ? null : tempDir();
  const folder = dir ?? own.dir;
  const configPath = path.join(folder, "appsettings.json");
  writeFileSync(configPath, JSON.stringify(config, null, 2));
  // The runner's own configuration overrides never leak into the test.
  const cleanEnv = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !/^(OpenClaw|McpApps|Gateway|Plugins|Security|Agent|Tools|Sessions|McpCompatibility|Testing)__/i.test(k)),
  );
  const child = spawn(GATEWAY_BIN, ["--config", configPath, "--urls", urls], {
    cwd: folder,
    env: { ...cleanEnv, RUST_LOG: "info", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let logs = "";
  const collect = (chunk) => {
    logs += chunk;
    if (process.env.GATEWAY_JS_ECHO) process.stderr.write(chunk);
  };
  child.stdout.setEncoding("utf8").on("data", collect);
  child.stderr.setEncoding("utf8").on("data", collect);
  const base = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`gateway did not listen within ${timeoutMs} ms:\n${logs}`)), timeoutMs);
    const check = () => {
      // eslint-disable-next-line no-control-regex
      const match = logs.replace(/\x1b\[[0-9;]*m/g, "").match(/Gateway listening on (http:\/\/\S+)/);
      if (match) {
        clearTimeout(timer);
        child.stderr.off("data", check);
        resolve(match[1].replace(/\/$/, ""));
      }
    };
    child.stderr.on("data", check);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`gateway exited early (${code}):\n${logs}`));
    });
  });
  child.removeAllListeners("exit");
  return {
    base,
    url: (p) => `${base}${p}`,
    child,
    logs: () => logs,
    stop: async () => {
      await stopChild(child);
      own?.cleanup();
    },
  };
}

export function stopChild(child) {
  return new Promise((resolve) => {
    if (!child || child.exitCode !== null || child.signalCode !== null) return resolve();
    const timer = setTimeout(() => child.kill("SIGKILL"), 15_000);
    child.once("exit", () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill("SIGTERM");
  });
}

/** Polls `/apps/health` until every listed app is Running. */
export async function waitRunning(gateway, ids, { timeoutMs = 60_000, headers = {} } = {}) {
  const start = Date.now();
  let last;
  for (;;) {
    try {
      last = await (await fetch(gateway.url("/apps/health"), { headers })).json();
      const states = Object.fromEntries((last.apps ?? []).map((a) => [a.id, a.state]));
      if (ids.every((id) => states[id] === "running")) return last;
    } catch (e) {
      last = String(e);
    }
    if (Date.now() - start > timeoutMs) {
      throw new Error(`apps ${ids} not running: ${JSON.stringify(last)}\n${gateway.logs()}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A gateway configuration scanning `appsDir`. */
export function gatewayConfig(appsDir, extra = {}) {
  return {
    Gateway: { AuthTokenEnv: "GATEWAY_JS_TOKEN_NOT_SET", ...(extra.Gateway ?? {}) },
    OpenClaw: { McpApps: { Enabled: true, DiscoveryPaths: [appsDir], Allow: ["*"] } },
    ...Object.fromEntries(Object.entries(extra).filter(([k]) => k !== "Gateway")),
  };
}
